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
    reads: Option<Arc<crate::effects::capabilities::Capabilities>>,
) -> Result<(), cel::DeclarationError> {
    context.add_function(
        "now",
        |function: &cel::FunctionContext| -> Result<cel::Value, ExecutionError> {
            let milliseconds = clock(function)?;
            crate::base::time::from_unix_milliseconds(milliseconds)
                .map(|now| cel::Value::Timestamp(now.fixed_offset()))
                .ok_or_else(|| {
                    ExecutionError::function_error(
                        "now",
                        crate::base::time::out_of_range_message(&format!(
                            "the clock ({milliseconds} ms after 1970)"
                        )),
                    )
                })
        },
    )?;
    context.add_function(
        "now_ms",
        |function: &cel::FunctionContext| -> Result<i64, ExecutionError> {
            Ok(i64::try_from(clock(function)?).unwrap_or(i64::MAX))
        },
    )?;
    let reads = Arc::new(reads);
    let check = reads.clone();
    context.add_function(
        "exists",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            Ok(open_permitted("exists", &path, &check, O_PATH)?.is_ok())
        },
    )?;
    let check = reads.clone();
    context.add_function(
        "is_dir",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            Ok(open_permitted("is_dir", &path, &check, O_PATH)?
                .ok()
                .and_then(|file| file.metadata().ok())
                .is_some_and(|metadata| metadata.is_dir()))
        },
    )?;
    let check = reads.clone();
    context.add_function(
        "command_exists",
        move |name: Arc<String>| -> Result<bool, ExecutionError> { command_exists(&name, &check) },
    )?;
    context.add_function("env", |name: Arc<String>| -> cel::Value {
        std::env::var(name.as_str()).map_or(cel::Value::Null, |value| {
            // Whatever it flows into is masked from now on (`crate::base::secrets`).
            crate::base::secrets::register_environment(&name, &value);
            cel::Value::String(Arc::new(value))
        })
    })?;
    let check = reads.clone();
    context.add_function(
        "json_valid",
        move |path: Arc<String>| -> Result<bool, ExecutionError> {
            // Read access, non-blocking so that opening a FIFO returns at once.
            let Ok(file) = open_permitted(
                "json_valid",
                &path,
                &check,
                nix::fcntl::OFlag::O_NONBLOCK.bits(),
            )?
            else {
                return Ok(false);
            };
            json_valid(&path, file)
        },
    )?;
    let check = reads;
    context.add_function(
        "file_size",
        move |path: Arc<String>| -> Result<i64, ExecutionError> {
            let failed = |error: std::io::Error| {
                ExecutionError::function_error("file_size", format!("{path}: {error}"))
            };
            let file = open_permitted("file_size", &path, &check, O_PATH)?.map_err(failed)?;
            file.metadata()
                .map(|metadata| i64::try_from(metadata.len()).unwrap_or(i64::MAX))
                .map_err(failed)
        },
    )?;
    Ok(())
}

/// Opened without reading: enough to look at the file through its descriptor.
const O_PATH: i32 = nix::fcntl::OFlag::O_PATH.bits();

/// What `read` allows, when it is restricted.
type Reads = Arc<Option<Arc<crate::effects::capabilities::Capabilities>>>;

/// `path` opened once (`flags` added to a read-only open), checked against `read` before and,
/// where it really led, after: the caller uses only the descriptor, so a link swapped in
/// between cannot make it look at a file outside `read`. A path outside `read` is an error;
/// one that does not open is the inner error.
fn open_permitted(
    function: &'static str,
    path: &str,
    reads: &Reads,
    flags: i32,
) -> Result<std::io::Result<std::fs::File>, ExecutionError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(capabilities) = reads.as_ref() else {
        return Ok(std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path));
    };
    let denied = |shown: &dyn std::fmt::Display, denied: crate::effects::capabilities::Denied| {
        ExecutionError::function_error(function, format!("{shown}: {denied}"))
    };
    capabilities
        .may_read(Path::new(path))
        .map_err(|error| denied(&path, error))?;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(file) => file,
        Err(error) => return Ok(Err(error)),
    };
    // The kernel's name for what the descriptor is, links resolved when it was opened.
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|error| ExecutionError::function_error(function, format!("{path}: {error}")))?;
    capabilities
        .may_read(&opened)
        .map_err(|error| denied(&path, error))?;
    Ok(Ok(file))
}

/// Whether the regular file `file`, opened from `path`, holds valid JSON. Only a regular file is
/// read (a FIFO would block the host, a device never end), and at most `JSON_VALID_MAX_BYTES`.
fn json_valid(path: &str, file: std::fs::File) -> Result<bool, ExecutionError> {
    use std::io::Read;
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

/// Whether `name` runs: a path to an executable file, or an executable found on `PATH`. A path
/// is looked at like `exists` does (opened once, checked against `read` where it really leads:
/// outside it is an error). A bare name is looked up on the engine's `PATH` (absolute entries
/// only) as `exec` would run it, whatever `read` says: the answer names no file the protocol
/// chose, and a protocol restricting `read` must still be able to pick an available tool.
fn command_exists(name: &str, reads: &Reads) -> Result<bool, ExecutionError> {
    if name.is_empty() {
        return Ok(false);
    }
    if name.contains('/') {
        return Ok(open_permitted("command_exists", name, reads, O_PATH)?.is_ok_and(is_executable));
    }
    let unrestricted: Reads = Arc::new(None);
    Ok(std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .filter(|directory| directory.is_absolute())
            .filter_map(|directory| directory.join(name).to_str().map(str::to_string))
            .any(|candidate| {
                open_permitted("command_exists", &candidate, &unrestricted, O_PATH)
                    .is_ok_and(|opened| opened.is_ok_and(is_executable))
            })
    }))
}

fn is_executable(file: std::fs::File) -> bool {
    use std::os::unix::fs::PermissionsExt;
    file.metadata()
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_commands_on_the_path() {
        let unrestricted = Arc::new(None);
        assert_eq!(command_exists("sh", &unrestricted), Ok(true));
        assert_eq!(command_exists("/bin/sh", &unrestricted), Ok(true));
        assert_eq!(
            command_exists("definitely-not-a-command-xyz", &unrestricted),
            Ok(false)
        );
        assert_eq!(command_exists("", &unrestricted), Ok(false));
    }
}
