//! Which run `status`, `resume`, `logs` and `stats` read: a positional RUN_ID, or the latest.

use std::path::{Path, PathBuf};

use clap::Args;

use super::exit_code;
use crate::store::{RunStatus, SqliteStore, Store};

/// Where runs are kept, for the commands that read them.
#[derive(Debug, Args)]
pub struct StateDirectory {
    /// Where runs are kept: `state.db` (every step) and `runs/` (telemetry).
    #[arg(
        long = "state-dir",
        env = "PROTOCOL_RUN_STATE_DIR",
        default_value = ".protocol-run",
        value_name = "DIR"
    )]
    pub path: PathBuf,
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
    state_directory: &Path,
    selection: &RunSelection,
    latest: Latest,
    announce: bool,
) -> Result<String, u8> {
    if let Some(id) = selection.given() {
        return Ok(id.to_string());
    }
    let id = match latest_in_store(state_directory, latest)? {
        Some(id) => id,
        // Telemetry without a store (older state directories): the newest run directory.
        None if latest == Latest::Any => latest_telemetry(state_directory)?,
        None => {
            eprintln!(
                "error: no unfinished run in {}; `protocol-run runs` lists them all",
                state_directory.display()
            );
            return Err(exit_code::NO_INPUT_FILE);
        }
    };
    if announce {
        eprintln!("run {id} (the latest; name another as RUN_ID, see `protocol-run runs`)");
    }
    Ok(id)
}

fn latest_in_store(state_directory: &Path, latest: Latest) -> Result<Option<String>, u8> {
    if !state_directory.join("state.db").exists() {
        return Ok(None);
    }
    let store = SqliteStore::open(state_directory).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
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
