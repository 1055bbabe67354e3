//! Exit codes of the engine itself (sysexits, `base::exit_code`), and which one each failure to load a protocol ends with.

pub use crate::base::exit_code::*;
use crate::pipeline::load::LoadError;

/// The exit code of a protocol file that could not be loaded.
pub fn of_load_error(error: &LoadError) -> u8 {
    match error {
        LoadError::NotFound { .. } => NO_INPUT_FILE,
        LoadError::Unreadable { .. } => IO,
        LoadError::Invalid(_) => INVALID,
    }
}
