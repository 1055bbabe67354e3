//! SCXML semantics, one module per procedure or feature; each asserts the ORDER of steps.

mod entry_exit_order;
