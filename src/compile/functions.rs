//! The engine's own expression functions: environment checks for guards, and the run's clock.

use std::path::Path;
use std::sync::Arc;

use cel::{Context, ExecutionError};

/// Names of the functions this module adds, for load-time checks.
pub const ENGINE_FUNCTIONS: [&str; 8] = [
    "now",
    "now_ms",
    "exists",
    "is_dir",
    "command_exists",
    "env",
    "json_valid",
    "file_size",
];

/// The hidden variable through which `now()` reads the scope's clock.
pub const CLOCK_VARIABLE: &str = "@clock";

/// The scope's clock in Unix milliseconds, read through the resolver.
fn clock(function: &cel::FunctionContext) -> Result<u64, ExecutionError> {
    match function
        .ptx
        .get_variable(CLOCK_VARIABLE)
        .map(|value| cel::Value::try_from(value.as_ref()))
    {
        Some(Ok(cel::Value::Int(milliseconds))) => Ok(u64::try_from(milliseconds).unwrap_or(0)),
        _ => Err(ExecutionError::function_error(
            "now",
            "no clock in this scope",
        )),
    }
}

/// Adds the engine functions to an evaluation context.
pub fn register(context: &mut Context) -> Result<(), cel::DeclarationError> {
    context.add_function(
        "now",
        |function: &cel::FunctionContext| -> Result<cel::Value, ExecutionError> {
            Ok(cel::Value::String(Arc::new(crate::clock::format_rfc3339(
                clock(function)?,
            ))))
        },
    )?;
    context.add_function(
        "now_ms",
        |function: &cel::FunctionContext| -> Result<i64, ExecutionError> {
            Ok(i64::try_from(clock(function)?).unwrap_or(i64::MAX))
        },
    )?;
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
