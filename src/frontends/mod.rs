//! The front ends: the command line and the MCP server; each parses, calls the runs service and prints.

pub mod cli;
pub mod mcp;
