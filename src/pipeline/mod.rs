//! From text to machine: load reads and checks a document, compile turns it into index tables, actions are the executable content compiled into them.

pub mod actions;
pub mod compile;
pub mod extensions;
pub mod load;
