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

/// A host's `--retain DURATION`: runs that ended longer ago than that are deleted when the host
/// starts, then every tenth of it (a minute apart at least, an hour at most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    keep_milliseconds: u64,
}

impl Retention {
    /// A duration such as `30d` or `12h`; zero keeps no ended run.
    pub fn parse(text: &str) -> Result<Retention, String> {
        let duration = crate::base::time::parse_duration(text)?;
        let keep_milliseconds = u64::try_from(duration.num_milliseconds())
            .map_err(|_| format!("`{text}` is negative: how long ended runs are kept"))?;
        Ok(Retention { keep_milliseconds })
    }

    /// How long after one prune the next one is.
    pub fn interval(&self) -> std::time::Duration {
        let tenth = std::time::Duration::from_millis(self.keep_milliseconds / 10);
        tenth.clamp(
            std::time::Duration::from_secs(60),
            std::time::Duration::from_secs(3_600),
        )
    }

    /// Deletes the finished runs that ended before now minus the retention, through a store
    /// `open` gives (a connection of its own, so that a host's steps are not held up).
    pub fn prune_now(
        &self,
        open: &dyn Fn() -> Result<Box<dyn Store>, StoreError>,
        state_directory: &Path,
    ) -> Result<Pruned, StoreError> {
        let now = crate::base::clock::unix_milliseconds_now();
        let mut store = open()?;
        prune(
            &mut *store,
            state_directory,
            now.saturating_sub(self.keep_milliseconds),
            &[RunStatus::Finished],
        )
    }

    /// Prunes now, then every `interval` on a thread of its own for as long as the process
    /// lives; each failure is said on stderr (the next round tries again).
    pub fn keep_pruning(
        self,
        open: impl Fn() -> Result<Box<dyn Store>, StoreError> + Send + 'static,
        state_directory: std::path::PathBuf,
    ) -> std::io::Result<()> {
        let round = move || match self.prune_now(&open, &state_directory) {
            Ok(pruned) => {
                for left in pruned.telemetry_left {
                    eprintln!("warning: --retain: the telemetry of a pruned run was left: {left}");
                }
            }
            Err(error) => eprintln!(
                "warning: --retain: {error}; tried again in {:?}",
                self.interval()
            ),
        };
        round();
        std::thread::Builder::new()
            .name("retention".to_string())
            .spawn(move || {
                loop {
                    std::thread::sleep(self.interval());
                    round();
                }
            })
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_prunes_every_tenth_of_it_within_a_minute_and_an_hour() {
        let every = |text| Retention::parse(text).unwrap().interval().as_secs();
        assert_eq!(every("30d"), 3_600);
        assert_eq!(every("2h"), 720);
        assert_eq!(every("1m"), 60);
        assert_eq!(every("0"), 60);
        assert!(Retention::parse("-1d").unwrap_err().contains("negative"));
        assert!(Retention::parse("soon").is_err());
    }
}
