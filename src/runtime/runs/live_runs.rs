//! How many runs one `mcp` server drives at once: a bound that follows from the descriptors the process may open, its limit raised from soft to hard at start.
//!
//! A run waiting for an event holds no descriptor of its own (its steps go through the
//! server's one store connection, and its claim is the server's host lock); a run whose effect
//! is running holds that effect's pipes. So the bound is what the descriptor limit leaves,
//! once the server's own are set aside, divided by what a run's effects may hold at once.

/// Descriptors the server keeps for itself, whatever the number of runs: stdin, stdout and
/// stderr (3); the store's connection: the database, its write-ahead log and its shared memory
/// index (3); the host lock (1); the runtimes' event polls, wakers and signal pipe (about 10);
/// a read's own short-lived store connection (3, `resources/read` of telemetry); the HTTP
/// listener and its clients' connections; the telemetry file a read opens. Rounded up to 128,
/// so that a hundred HTTP clients still connect when every run holds its share.
pub const DESCRIPTORS_RESERVED: u64 = 128;

/// Descriptors one live run may hold: an effect process's stdin, stdout and stderr pipes and
/// the handle its exit is awaited on (4), twice over: two effects at once, or one while the
/// next is spawned (a spawn holds both ends of each pipe for a moment).
pub const DESCRIPTORS_PER_RUN: u64 = 8;

/// The most live runs by default, however many descriptors there are: what one server's
/// single thread of runs answers promptly.
pub const MAX_LIVE_RUNS_CEILING: usize = 10_000;

/// Raises this process's soft limit on open descriptors to its hard limit (as far as the
/// system lets: a hard limit of "unlimited" is raised to the kernel's `nr_open`), and returns
/// the limit then in force.
pub fn raise_descriptor_limit() -> Result<u64, String> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|error| format!("cannot read the limit on open files: {error}"))?;
    if soft >= hard {
        return Ok(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => Ok(hard),
        // A hard limit above what the kernel allows one process (`RLIM_INFINITY` on some
        // systems) is refused: the soft limit stays, and so does the bound that follows.
        Err(_) => Ok(soft),
    }
}

/// The default bound on live runs under a limit of `descriptors` open files: what is left
/// after `DESCRIPTORS_RESERVED`, divided by `DESCRIPTORS_PER_RUN`, at most
/// `MAX_LIVE_RUNS_CEILING`; zero when the limit leaves nothing (every start is refused, each
/// saying why, and the server still answers every other request).
pub fn default_max_live_runs(descriptors: u64) -> usize {
    let runs = descriptors.saturating_sub(DESCRIPTORS_RESERVED) / DESCRIPTORS_PER_RUN;
    usize::try_from(runs)
        .unwrap_or(usize::MAX)
        .min(MAX_LIVE_RUNS_CEILING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bound_follows_from_the_descriptor_limit() {
        // The common soft limit: (1024 - 128) / 8.
        assert_eq!(default_max_live_runs(1_024), 112);
        assert_eq!(default_max_live_runs(100), 0);
        assert_eq!(default_max_live_runs(1_048_576), MAX_LIVE_RUNS_CEILING);
        assert_eq!(default_max_live_runs(u64::MAX), MAX_LIVE_RUNS_CEILING);
    }
}
