//! The types every stage shares, below all of them: values and time, diagnostics, the protocol's document model, events, state sets, snapshots and journal steps, secrets.

pub mod clock;
pub mod diagnostic;
pub mod durable;
pub mod event;
pub mod exit_code;
pub mod files;
pub mod ids;
pub mod log_record;
pub mod model;
pub mod read_file;
pub mod secrets;
pub mod snapshot;
pub mod state_set;
pub mod stored_value;
pub mod text;
pub mod time;
pub mod trace_context;
pub mod value;
