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

/// The most `json_valid` reads of a file: past it the file is not taken as valid, it is an
/// error naming the limit (a guard must not read a huge file, or `/dev/zero`, into memory).
pub const JSON_VALID_MAX_BYTES: u64 = 16 << 20;

/// Adds the engine functions to an evaluation context. `reads`, when reading is restricted,
/// is what the file functions check every path against.
pub fn register(
    context: &mut Context,
    reads: Option<Arc<crate::capabilities::Capabilities>>,
) -> Result<(), cel::DeclarationError> {
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
    let permitted = move |function: &'static str, path: &str| -> Result<(), ExecutionError> {
        match &reads {
            Some(capabilities) => capabilities.may_read(Path::new(path)).map_err(|denied| {
                ExecutionError::function_error(function, format!("{path}: {denied}"))
            }),
            None => Ok(()),
        }
    };
    let check = permitted.clone();
    context.add_function(
        "exists",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            check("exists", &path)?;
            Ok(Path::new(path.as_str()).exists())
        },
    )?;
    let check = permitted.clone();
    context.add_function(
        "is_dir",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            check("is_dir", &path)?;
            Ok(Path::new(path.as_str()).is_dir())
        },
    )?;
    context.add_function("command_exists", |name: Arc<String>| command_exists(&name))?;
    context.add_function("env", |name: Arc<String>| -> cel::Value {
        std::env::var(name.as_str()).map_or(cel::Value::Null, |value| {
            // Whatever it flows into is masked from now on (`crate::secrets`).
            crate::secrets::register_environment(&name, &value);
            cel::Value::String(Arc::new(value))
        })
    })?;
    let check = permitted.clone();
    context.add_function(
        "json_valid",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            check("json_valid", &path)?;
            json_valid(&path)
        },
    )?;
    let check = permitted;
    context.add_function(
        "file_size",
        move |path: Arc<String>| -> Result<i64, ExecutionError> {
            check("file_size", &path)?;
            std::fs::metadata(path.as_str())
                .map(|metadata| i64::try_from(metadata.len()).unwrap_or(i64::MAX))
                .map_err(|error| {
                    ExecutionError::function_error("file_size", format!("{path}: {error}"))
                })
        },
    )?;
    Ok(())
}

/// Whether the regular file at `path` holds valid JSON. Only a regular file is read (a FIFO
/// would block the host, a device never end), and at most `JSON_VALID_MAX_BYTES` of it.
fn json_valid(path: &str) -> Result<bool, ExecutionError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, so opening a FIFO returns at once; what was opened is then checked.
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
    else {
        return Ok(false);
    };
    let Ok(metadata) = file.metadata() else {
        return Ok(false);
    };
    if !metadata.is_file() {
        return Err(ExecutionError::function_error(
            "json_valid",
            format!("{path} is not a regular file"),
        ));
    }
    if metadata.len() > JSON_VALID_MAX_BYTES {
        return Err(ExecutionError::function_error(
            "json_valid",
            format!(
                "{path} is {} bytes, more than json_valid reads ({JSON_VALID_MAX_BYTES} bytes)",
                metadata.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    // A file that grows while it is read is still read no further than the limit.
    if file
        .take(JSON_VALID_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
        || bytes.len() as u64 > JSON_VALID_MAX_BYTES
    {
        return Ok(false);
    }
    Ok(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok())
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
