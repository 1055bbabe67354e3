//! Retention: deleting runs that ended long enough ago, from the store and from this host's telemetry, a bounded batch at a time, the same for `runs prune` and a host's `--retain`.

use std::path::Path;

use crate::store::{RunStatus, Store, StoreError};

/// How many runs one transaction deletes: a backlog of millions is deleted in many short
/// transactions, never one that holds the store's write lock for minutes.
pub const PRUNE_BATCH: usize = 1_000;

/// What a prune deleted.
#[derive(Debug, Default)]
pub struct Pruned {
    /// Runs deleted from the store.
    pub runs: usize,
    /// Telemetry directories of deleted runs that could not be removed, each with why.
    pub telemetry_left: Vec<String>,
}

/// Deletes every run in one of `statuses` (never a running one) that ended before
/// `before_unix_milliseconds`, with its journal, states and children's rows, and its telemetry
/// under `state_directory`.
pub fn prune(
    store: &mut dyn Store,
    state_directory: &Path,
    before_unix_milliseconds: u64,
    statuses: &[RunStatus],
) -> Result<Pruned, StoreError> {
    let telemetry = crate::runtime::telemetry::runs_directory(state_directory);
    let mut pruned = Pruned::default();
    loop {
        let batch = store.prune_runs(before_unix_milliseconds, statuses, PRUNE_BATCH)?;
        for run in &batch {
            // A run id is one path segment (checked when the run was created): what is removed
            // is only ever inside this host's telemetry directory.
            if run.contains('/') || run == "." || run == ".." {
                continue;
            }
            let directory = telemetry.join(run);
            match std::fs::remove_dir_all(&directory) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => pruned
                    .telemetry_left
                    .push(format!("{}: {error}", directory.display())),
                _ => {}
            }
        }
        pruned.runs += batch.len();
        if batch.len() < PRUNE_BATCH {
            return Ok(pruned);
        }
    }
}
