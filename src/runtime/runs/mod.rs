//! The runs service: the one set of rules every front end (`run`, `resume`, `serve`, `mcp`, `test`, a parent's children) drives runs by.
//!
//! What an incoming event may do (`admission`), which grants an input may choose, who holds a
//! run: each lives here once, below the front ends, so no mode keeps a copy of its own.

pub mod admission;
pub mod claims;
pub mod grants;
pub mod live_runs;
