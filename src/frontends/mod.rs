//! The front ends: the command line, the MCP server and the web inspector; each parses, calls the runs service and prints.

pub mod cli;
pub mod mcp;
pub mod ui;
