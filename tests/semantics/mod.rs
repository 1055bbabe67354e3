//! SCXML semantics, one module per procedure or feature; each asserts the ORDER of steps.

mod datamodel;
mod delayed;
mod document_order;
mod done_events;
mod entry_exit_order;
mod errors;
mod eventless;
mod history;
mod parallel;
mod plain_transitions;
