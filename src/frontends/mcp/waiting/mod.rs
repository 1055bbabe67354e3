//! A run waiting for the client: the run as an MCP task, elicitation of the event it waits on, the 2026-07-28 retry, and the one path an answer takes.

pub(in crate::frontends::mcp) mod answers;
pub mod elicitation;
pub mod input_required;
pub mod request_keys;
pub mod tasks;
