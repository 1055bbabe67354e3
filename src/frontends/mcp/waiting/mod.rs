//! A run waiting for the client: the run as an MCP task (in the Tasks extension's dialect and the 2025-11-25 specification's), elicitation of the event it waits on, the 2026-07-28 retry, and the one path an answer takes.

pub(in crate::frontends::mcp) mod answers;
pub mod elicitation;
pub mod input_required;
pub mod request_keys;
pub mod specification_tasks;
pub mod tasks;
