//! Resuming the runs MCP servers started: one on `resume_run`, and at start every one a server left behind (killed, or stopped when its client went).

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use crate::mcp::catalog::Served;
use crate::mcp::runs::host::{Host, MAX_LIVE_RUNS};
use crate::mcp::runs::records;
use crate::mcp::runs::report::{RunView, report};
use crate::run::fleet::Recording;
use crate::store::{RunOrigin, RunRecord, RunStatus, SqliteStore, Store};

/// The runs resumed at start that stderr names one per line; the rest are counted in one line,
/// so a store of thousands of waiting runs does not flood a client's log.
const NAMED_RESUMED_RUNS: usize = 20;

impl Host {
    /// Resumes a recorded run that no server drives (stopped, or left running by a server
    /// that died) from its latest snapshot, in a fleet of its own, as `serve` resumes its
    /// instances; a live run's report is returned as it is.
    pub(in crate::mcp) fn resume_run(&mut self, run: &str) -> Result<Value, String> {
        if let Some(report) = self.live_report(run) {
            return Ok(report);
        }
        let (store, record) = self.unfinished_record(run)?;
        self.resume(store, &record)
    }

    /// A recorded run that has not finished, with the store it was read from (to resume or
    /// cancel it); refused when the store has no such run or it has finished.
    pub(in crate::mcp) fn unfinished_record(
        &self,
        run: &str,
    ) -> Result<(SqliteStore, RunRecord), String> {
        let store =
            SqliteStore::open(&self.settings.state_dir).map_err(|error| error.to_string())?;
        let record = store
            .run(run)
            .map_err(|error| error.to_string())?
            .ok_or_else(|| format!("no run `{run}`; list_runs lists them"))?;
        if record.summary.status == RunStatus::Finished {
            return Err(format!("run `{run}` has finished; get_run tells how"));
        }
        Ok((store, record))
    }

    /// At start: resumes every unfinished run an MCP server started of a protocol this one
    /// serves, newest first, up to `MAX_LIVE_RUNS`, each named on stderr; one that cannot
    /// resume (its protocol changed, another process drives it) is named with the reason and
    /// left for `resume_run`.
    pub(in crate::mcp) fn resume_recorded(&mut self) {
        let runs = SqliteStore::open(&self.settings.state_dir).and_then(|store| store.list_runs());
        let runs = match runs {
            Ok(runs) => runs,
            Err(error) => {
                eprintln!("mcp: cannot resume the runs left by an earlier server: {error}");
                return;
            }
        };
        let served: Vec<&str> = self
            .protocols
            .iter()
            .map(|served| served.path.as_str())
            .collect();
        let left: Vec<String> = runs
            .into_iter()
            .filter(|run| {
                run.origin == Some(RunOrigin::Mcp)
                    && run.status != RunStatus::Finished
                    && served.contains(&run.protocol_path.as_str())
            })
            .map(|run| run.id)
            .collect();
        let mut named = 0usize;
        let mut quietly_resumed = 0usize;
        let mut over_the_limit = 0usize;
        for run in left {
            if self.live_runs() >= MAX_LIVE_RUNS {
                over_the_limit += 1;
                continue;
            }
            let resumed = SqliteStore::open(&self.settings.state_dir)
                .map_err(|error| error.to_string())
                .and_then(|store| {
                    let record = store
                        .run(&run)
                        .map_err(|error| error.to_string())?
                        .ok_or_else(|| format!("no run `{run}`"))?;
                    let protocol = record.summary.protocol_path.clone();
                    self.resume(store, &record).map(|report| (protocol, report))
                });
            match resumed {
                Ok((protocol, report)) => {
                    let states: Vec<&str> = report["states"]
                        .as_array()
                        .map(|states| states.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let count = match states.len() {
                        1 => "1 state".to_string(),
                        count => format!("{count} states"),
                    };
                    if named == NAMED_RESUMED_RUNS {
                        quietly_resumed += 1;
                    } else {
                        named += 1;
                        eprintln!(
                            "mcp: resumed {run} ({protocol}, {count}: {})",
                            states.join(", ")
                        );
                    }
                }
                Err(message) => {
                    eprintln!("mcp: not resumed {run}: {}", crate::secrets::mask(&message));
                }
            }
        }
        if quietly_resumed > 0 {
            eprintln!(
                "mcp: resumed {quietly_resumed} more runs (`protocol-run runs --status running` \
                 lists them)"
            );
        }
        if over_the_limit > 0 {
            eprintln!(
                "mcp: not resumed {over_the_limit} runs: {MAX_LIVE_RUNS} runs are live, the limit \
                 (MAX_LIVE_RUNS); resume_run resumes one once another ends"
            );
        }
    }

    /// Resumes `record`'s run in a fleet of its own, its report starting with the directives
    /// its journal holds; refused when its protocol is not served here or changed, or another
    /// process holds its run lock.
    fn resume(&mut self, store: SqliteStore, record: &RunRecord) -> Result<Value, String> {
        let run = record.summary.id.as_str();
        // The served machine's grants are the operator's (`crate::runs::grants::for_host`).
        let (served, _) = self.resumable(record)?;
        let machine = served.machine.clone();
        let pinned = served.pinned.clone();
        let lock = self.lock_run(run)?;
        let (directives, dropped) = records::recorded_directives(&store, run)?;
        let recording = Recording {
            store: Box::new(store),
            protocol_path: served.path.clone(),
            protocol_hash: record.summary.protocol_hash.clone(),
            protocol_text: served.text.clone(),
            grants: self.settings.recorded_grants.clone(),
            origin: RunOrigin::Mcp,
        };
        let view = Rc::new(RefCell::new(RunView::resumed(directives, dropped)));
        let mut fleet = self.fleet(run.to_string(), machine.clone(), recording, view.clone());
        fleet.set_pinned_inputs(pinned);
        fleet.resume_run(run, crate::run::durable::TimerPolicy::Deadline)?;
        fleet.commit();
        let report = report(&machine, run, &view.borrow());
        self.keep_live(run, machine, fleet, view, lock);
        Ok(report)
    }

    /// What resuming `record`'s run here takes, or why it cannot resume (its protocol is not
    /// served here or changed, an input of it cannot be restored), from what this server
    /// holds: its served protocol and its inputs bound again.
    pub(in crate::mcp) fn resumable(
        &self,
        record: &RunRecord,
    ) -> Result<(&Served, Vec<crate::value::Value>), String> {
        let run = record.summary.id.as_str();
        let served = self
            .protocols
            .iter()
            .find(|served| served.path == record.summary.protocol_path)
            .ok_or_else(|| {
                format!(
                    "run `{run}` runs {}, which this server does not serve",
                    record.summary.protocol_path
                )
            })?;
        if let Some(changed) = crate::store::read_files::changed_file(
            &served.path,
            &record.summary.protocol_hash,
            &served.text,
        ) {
            return Err(format!(
                "{} changed since run `{run}` started; restore the file to resume it",
                changed.path
            ));
        }
        let secret_inputs = served.pinned.texts_of(&served.machine.secret_input_names());
        let values = served
            .machine
            .bind_recorded_inputs(&record.inputs, &secret_inputs)
            .map_err(|errors| {
                let messages: Vec<String> = errors
                    .iter()
                    .map(|error| match error {
                        // A client has no way to give a secret here; the operator pins it.
                        crate::compile::inputs::InputError::SecretNotStored { name } => format!(
                            "secret input `{name}` is not stored with the run, and a client \
                             cannot supply it: start the server with --input {name}=VALUE, or \
                             `protocol-run resume {} --input {name}=VALUE` resumes it outside \
                             this server",
                            record.summary.id
                        ),
                        other => other.to_string(),
                    })
                    .collect();
                messages.join("; ")
            })?;
        Ok((served, values))
    }

    /// The run lock of a run this server is about to drive: a run another process drives
    /// (`run --resume`) is refused, naming that process.
    pub(in crate::mcp) fn lock_run(&self, run: &str) -> Result<crate::run_lock::RunLock, String> {
        let runs = crate::telemetry::runs_directory(&self.settings.state_dir);
        crate::run_lock::RunLock::acquire(&runs, run).map_err(|error| error.to_string())
    }
}
