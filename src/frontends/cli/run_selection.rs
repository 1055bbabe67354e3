//! Which run `status`, `resume`, `logs` and `stats` read: a positional RUN_ID, or the latest.

use std::path::{Path, PathBuf};

use clap::Args;

use super::exit_code;
use crate::store::{RunStatus, Store, StoreChoice};

/// Where runs are kept, for the commands that read or drive them.
#[derive(Debug, Args)]
pub struct StateDirectory {
    /// This host's state: `state.db` (every step, with `--store sqlite`), `runs/` (telemetry)
    /// and the lock files that say which process drives which run.
    #[arg(
        long = "state-dir",
        env = "PROTOCOL_RUN_STATE_DIR",
        default_value = ".protocol-run",
        value_name = "DIR"
    )]
    pub path: PathBuf,
    /// Where runs are kept: `sqlite` (the state directory's state.db), `postgres` (the URL in
    /// PROTOCOL_RUN_DATABASE_URL, or in the file PROTOCOL_RUN_DATABASE_URL_FILE names), a
    /// `postgres://` URL (seen by other users in the process list: prefer the variable for a
    /// password), or `memory` (`serve` only: nothing recorded).
    #[arg(
        long = "store",
        env = "PROTOCOL_RUN_STORE",
        hide_env_values = true,
        default_value = "sqlite",
        value_name = "STORE",
        value_parser = StoreChoice::parse
    )]
    pub store: StoreChoice,
    /// With a shared store (postgres): how long this process's lease lasts unrenewed (it is
    /// renewed every third of that); once it has run out, another host takes its runs over and
    /// this process, if it comes back, ends without writing.
    #[arg(
        long = "lease",
        env = "PROTOCOL_RUN_LEASE",
        default_value = "30s",
        value_name = "DURATION",
        value_parser = parse_lease
    )]
    pub lease: std::time::Duration,
}

/// `--lease`: a duration of at least a second (renewed every third of it).
fn parse_lease(text: &str) -> Result<std::time::Duration, String> {
    let duration = crate::base::time::parse_duration(text)?;
    match u64::try_from(duration.num_milliseconds()) {
        Ok(milliseconds) if milliseconds >= 1_000 => {
            Ok(std::time::Duration::from_millis(milliseconds))
        }
        _ => Err(format!(
            "`{text}` is shorter than a second: a lease is renewed every third of it"
        )),
    }
}

impl StateDirectory {
    /// The store a process that drives runs (`process`: `run`, `serve`, `mcp`) writes to: with
    /// a shared store, under this process's lease, taken here and renewed for as long as the
    /// process lives (`runs::lease`).
    pub fn open_store_to_drive(&self, process: &str) -> Result<Box<dyn Store>, u8> {
        let mut store = self.open_store()?;
        if let StoreChoice::Postgres(_) = &self.store {
            let (choice, directory) = (self.store.clone(), self.path.clone());
            let open = move || {
                choice
                    .open(&directory)?
                    .ok_or_else(|| crate::store::StoreError::Database {
                        database: "memory".to_string(),
                        operation: "renew the lease".to_string(),
                        source: "--store memory keeps no lease".into(),
                    })
            };
            if let Err(error) =
                crate::runtime::runs::lease::take(&mut *store, process, self.lease, open)
            {
                eprintln!("error: {error}");
                return Err(exit_code::IO);
            }
        }
        Ok(store)
    }

    /// The store this command reads and writes; an error reported on stderr, with its exit
    /// code. `memory` is refused: it keeps no runs.
    pub fn open_store(&self) -> Result<Box<dyn Store>, u8> {
        match self.store.open(&self.path) {
            Ok(Some(store)) => Ok(store),
            Ok(None) => {
                eprintln!(
                    "error: --store memory keeps no runs; it is for `serve` (use sqlite or \
                     postgres)"
                );
                Err(exit_code::USAGE)
            }
            Err(error) => {
                eprintln!("error: {error}");
                Err(exit_code::IO)
            }
        }
    }
}

/// A host's `--retain`: prunes now and then every interval, each round through a connection of
/// its own to the host's store.
pub fn keep_pruning(
    state: &StateDirectory,
    retention: crate::runtime::runs::retention::Retention,
) -> Result<(), u8> {
    let (choice, directory) = (state.store.clone(), state.path.clone());
    let open = move || {
        choice
            .open(&directory)?
            .ok_or_else(|| crate::store::StoreError::Database {
                database: "memory".to_string(),
                operation: "prune runs".to_string(),
                source: "--store memory keeps no runs".into(),
            })
    };
    retention
        .keep_pruning(open, state.path.clone())
        .map_err(|error| {
            eprintln!("error: --retain: cannot start its thread: {error}");
            exit_code::INTERNAL
        })
}

/// A run named on the command line, or none (then the latest).
#[derive(Debug, Args)]
pub struct RunSelection {
    /// The run (see `protocol-run runs`); the most recently started one when omitted.
    #[arg(value_name = "RUN_ID")]
    run_id: Option<String>,
    /// The old spelling of RUN_ID, kept so that scripts written for it still work.
    #[arg(
        long = "run",
        value_name = "ID",
        hide = true,
        conflicts_with = "run_id"
    )]
    run: Option<String>,
}

impl RunSelection {
    /// The id given, by either spelling.
    pub fn given(&self) -> Option<&str> {
        self.run_id.as_deref().or(self.run.as_deref())
    }
}

/// Which runs may stand for "the latest" when no id is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latest {
    /// Any run.
    Any,
    /// Only a run that has not finished (`resume`: a finished run takes no more steps).
    Unfinished,
}

/// The run id to read: the one given, or the latest recorded run. With `announce` the latest is
/// named on stderr, so that a person knows which run the output is about; JSON output goes
/// without, since scripts often read both streams together.
pub fn choose_run(
    state: &StateDirectory,
    selection: &RunSelection,
    latest: Latest,
    announce: bool,
) -> Result<String, u8> {
    if let Some(id) = selection.given() {
        return Ok(id.to_string());
    }
    let id = match latest_in_store(state, latest)? {
        Some(id) => id,
        // Telemetry without a store (older state directories): the newest run directory.
        None if latest == Latest::Any => latest_telemetry(&state.path)?,
        None => {
            eprintln!(
                "error: no unfinished run in {}; `protocol-run runs` lists them all",
                state.path.display()
            );
            return Err(exit_code::NO_INPUT_FILE);
        }
    };
    if announce {
        eprintln!("run {id} (the latest; name another as RUN_ID, see `protocol-run runs`)");
    }
    Ok(id)
}

fn latest_in_store(state: &StateDirectory, latest: Latest) -> Result<Option<String>, u8> {
    if !state.store.may_hold_runs(&state.path) {
        return Ok(None);
    }
    let store = state.open_store()?;
    let runs = store.list_runs().map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
    // `list_runs` gives the most recently started first; a child protocol's run is named
    // through its parent's.
    Ok(runs
        .into_iter()
        .filter(|run| run.parent.is_none())
        .find(|run| latest == Latest::Any || run.status != RunStatus::Finished)
        .map(|run| run.id))
}

fn latest_telemetry(state_directory: &Path) -> Result<String, u8> {
    let runs = crate::runtime::telemetry::runs_directory(state_directory);
    match crate::runtime::telemetry::run_ids(&runs) {
        Ok(ids) => ids.last().cloned().ok_or_else(|| {
            eprintln!("error: no runs in {}", state_directory.display());
            exit_code::NO_INPUT_FILE
        }),
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", runs.display());
            Err(exit_code::IO)
        }
    }
}
