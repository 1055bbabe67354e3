//! Exit codes of the engine itself (sysexits), shared by every stage and front end; a protocol's own codes are 0–63.

pub const USAGE: u8 = 64;
pub const INVALID: u8 = 65;
pub const NO_INPUT_FILE: u8 = 66;
pub const INTERNAL: u8 = 70;
pub const IO: u8 = 74;
/// The run raised an `error.execution` that no transition handled (`errors: strict`).
pub const UNHANDLED_ERROR: u8 = 76;
/// The run stopped before reaching a final state: no events left and no timer pending.
pub const UNFINISHED: u8 = 75;
/// Another process holds what this one needs (a run it is driving): try again later.
pub const TEMPORARY_FAILURE: u8 = 75;
/// A cancelled run: 128 + SIGINT, as a shell reports an interrupted command.
pub const CANCELLED: u8 = 130;
