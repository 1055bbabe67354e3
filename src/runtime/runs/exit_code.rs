//! Exit codes of the engine itself (sysexits), shared by every front end; a protocol's own codes are 0–63.

use crate::pipeline::load::LoadError;
use crate::runtime::run::algorithm::RunError;

pub const USAGE: u8 = 64;
pub const INVALID: u8 = 65;
pub const NO_INPUT_FILE: u8 = 66;
pub const INTERNAL: u8 = 70;
pub const IO: u8 = 74;
/// The run stopped before reaching a final state: no events left and no timer pending.
pub const UNFINISHED: u8 = 75;
/// Another process holds what this one needs (a run it is driving): try again later.
pub const TEMPORARY_FAILURE: u8 = 75;

/// The exit code of a protocol file that could not be loaded.
pub fn of_load_error(error: &LoadError) -> u8 {
    match error {
        LoadError::NotFound { .. } => NO_INPUT_FILE,
        LoadError::Unreadable { .. } => IO,
        LoadError::Invalid(_) => INVALID,
    }
}

/// The exit code of a run its engine stopped with an error.
pub fn of_run_error(error: &RunError) -> u8 {
    match error {
        // The store could not take a step (a full disk, a broken database): an I/O failure,
        // not a fault of the protocol.
        RunError::Checkpoint { .. } => IO,
        // A step past its limits stops as a looping protocol does.
        RunError::MicrostepLimit { .. } | RunError::StepTime { .. } => INVALID,
        // The driver reports a step interrupted as a run stopped by a signal.
        RunError::Interrupted { .. } => UNFINISHED,
    }
}
