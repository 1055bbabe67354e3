//! The runs an MCP server hosts, on the host thread: each a fleet of `serve`'s engine read into a view; started, resumed, cancelled, reported, and read back from the store.

pub(in crate::frontends::mcp) mod cancel;
pub(in crate::frontends::mcp) mod ended;
pub(in crate::frontends::mcp) mod events;
pub(in crate::frontends::mcp) mod fleets;
pub mod host;
pub mod records;
pub mod report;
pub mod requests;
pub(in crate::frontends::mcp) mod resume;
pub(in crate::frontends::mcp) mod shared;
pub(in crate::frontends::mcp) mod start;
