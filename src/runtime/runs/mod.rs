//! The runs service: the one set of rules every front end (`run`, `resume`, `serve`, `mcp`, `test`, a parent's children) drives runs by.
//!
//! Which grants an input may choose (`grants`), who holds a run (`claims`), how many runs a
//! server drives (`live_runs`) and the host of many instances `serve` runs (`fleet`): each lives
//! here once, below the front ends, so no mode keeps a copy of its own. What an incoming event
//! may do is the engine's own rule (`run::admission`), applied by every session.

pub mod cancel;
pub mod claims;
pub mod exit_code;
pub mod fleet;
pub mod fork;
pub mod grants;
pub mod lease;
pub mod live_runs;
pub mod redrive;
pub mod replay;
pub mod resume;
pub mod retention;
pub mod served;
pub mod start;
pub mod view;
