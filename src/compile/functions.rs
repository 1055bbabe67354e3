//! The engine's own expression functions: environment checks for guards (`exists`, `is_dir`,
//! `command_exists`, `env`, `json_valid`, `file_size`). Paths are relative to the working directory.

use std::path::Path;
use std::sync::Arc;

use cel::{Context, ExecutionError};

/// Names of the functions this module adds, for load-time checks.
pub const ENGINE_FUNCTIONS: [&str; 6] = [
    "exists",
    "is_dir",
    "command_exists",
    "env",
    "json_valid",
    "file_size",
];

/// Adds the engine functions to an evaluation context.
pub fn register(context: &mut Context) -> Result<(), cel::DeclarationError> {
    context.add_function("exists", |path: Arc<String>| {
        Path::new(path.as_str()).exists()
    })?;
    context.add_function("is_dir", |path: Arc<String>| {
        Path::new(path.as_str()).is_dir()
    })?;
    context.add_function("command_exists", |name: Arc<String>| command_exists(&name))?;
    context.add_function("env", |name: Arc<String>| -> cel::Value {
        std::env::var(name.as_str()).map_or(cel::Value::Null, |value| {
            cel::Value::String(Arc::new(value))
        })
    })?;
    context.add_function("json_valid", |path: Arc<String>| {
        std::fs::read(path.as_str())
            .ok()
            .is_some_and(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).is_ok())
    })?;
    context.add_function(
        "file_size",
        |path: Arc<String>| -> Result<i64, ExecutionError> {
            std::fs::metadata(path.as_str())
                .map(|metadata| i64::try_from(metadata.len()).unwrap_or(i64::MAX))
                .map_err(|error| {
                    ExecutionError::function_error("file_size", format!("{path}: {error}"))
                })
        },
    )?;
    Ok(())
}

/// Whether `name` runs: a path to an executable file, or an executable found on `PATH`.
fn command_exists(name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    if name.contains('/') {
        return is_executable(Path::new(name));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|directory| is_executable(&directory.join(name)))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_commands_on_the_path() {
        assert!(command_exists("sh"));
        assert!(command_exists("/bin/sh"));
        assert!(!command_exists("definitely-not-a-command-xyz"));
        assert!(!command_exists(""));
    }
}
