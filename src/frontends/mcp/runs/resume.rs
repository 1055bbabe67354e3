//! Resuming the runs MCP servers started: one on `resume_run`, and at start every one a server left behind (killed, or stopped when its client went).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use crate::frontends::mcp::catalog::Served;
use crate::frontends::mcp::runs::host::Host;
use crate::frontends::mcp::runs::records;
use crate::frontends::mcp::runs::report::{RunView, report};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::runs::resume::{ProtocolChanged, Version};
use crate::runtime::runs::served::HostOperator;
use crate::store::{RunOrigin, RunRecord, RunStatus, Store};

/// The runs resumed at start that stderr names one per line; the rest are counted in one line,
/// so a store of thousands of waiting runs does not flood a client's log.
const NAMED_RESUMED_RUNS: usize = 20;

impl Host {
    /// Resumes a recorded run that no server drives (stopped, or left running by a server
    /// that died) from its latest snapshot, in a fleet of its own, as `serve` resumes its
    /// instances; a live run's report is returned as it is.
    pub(in crate::frontends::mcp) fn resume_run(&mut self, run: &str) -> Result<Value, String> {
        if let Some(report) = self.live_report(run) {
            return Ok(report);
        }
        self.check_room()?;
        let record = self.unfinished_record(run)?;
        self.claim(run)?;
        self.resume_claimed(&record)
    }

    /// Redrives a run of a protocol served here that failed on an unhandled error or stopped
    /// unfinished (`runs::redrive`): recorded in the store (a failed run is claimed by its
    /// reopening, a stopped one claimed first), then resumed from the redrive's step in a fleet
    /// of its own; its report says what runs again under `redriven`.
    pub(in crate::frontends::mcp) fn redrive_run(&mut self, run: &str) -> Result<Value, String> {
        if self.live_report(run).is_some() {
            return Err(format!(
                "run `{run}` is live here: it has not failed; cancel_run ends it"
            ));
        }
        self.check_room()?;
        let refused =
            |refusal: crate::runtime::runs::start::Refusal| refusal.text.trim_end().to_string();
        crate::runtime::runs::redrive::check(&**self.settings.store.lock(), run)
            .map_err(refused)?;
        let record = self.recorded(run)?;
        // Served here, its texts compiling, its inputs restorable: checked before anything is
        // written.
        let (served, machine, _, _) = self.resumable(&record)?;
        let secrets = served.pinned.texts_of(&machine.secret_input_names());
        if record.summary.status != RunStatus::Finished {
            self.claim(run)?;
        }
        let redrive = crate::runtime::runs::redrive::Redrive {
            run,
            holder: &self.settings.holder,
            secrets: &secrets,
            unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
        };
        let redriven = crate::runtime::runs::redrive::record(&mut self.settings.store, &redrive);
        let redriven = match redriven {
            Ok(redriven) => redriven,
            Err(refusal) => {
                if record.summary.status != RunStatus::Finished {
                    let _ = self
                        .settings
                        .store
                        .release_runs(&[run.to_string()], &self.settings.holder);
                }
                return Err(refused(refusal));
            }
        };
        eprintln!("mcp: {run} {}", redriven.description());
        let record = self.recorded(run)?;
        let mut report = self.resume_claimed(&record)?;
        report["redriven"] = serde_json::json!({
            "from_step": redriven.from_step,
            "failed_at": redriven.failed_at,
            "again": redriven.again,
        });
        Ok(report)
    }

    /// Resumes `record`'s run once this server claimed it; a run that cannot resume is
    /// released at once, so that another process may take it.
    fn resume_claimed(&mut self, record: &RunRecord) -> Result<Value, String> {
        let resumed = self.resume(record);
        if resumed.is_err() {
            let run = [record.summary.id.clone()];
            if let Err(error) = self
                .settings
                .store
                .release_runs(&run, &self.settings.holder)
            {
                eprintln!("mcp: {error}");
            }
        }
        resumed
    }

    /// Claims `run` for this server (`runs::claims`): a run another live process holds (a
    /// `resume`, or a `run` still driving it) is refused, naming it.
    pub(in crate::frontends::mcp) fn claim(&mut self, run: &str) -> Result<(), String> {
        let claimed = crate::runtime::runs::claims::claim(
            &mut self.settings.store,
            &self.settings.holder,
            &[run.to_string()],
        )
        .map_err(|error| error.to_string())?;
        claimed
            .into_iter()
            .next()
            .unwrap_or(Ok(()))
            .map_err(|refused| refused.to_string())
    }

    /// A recorded run; refused when the store has no such run.
    fn recorded(&self, run: &str) -> Result<RunRecord, String> {
        self.settings
            .store
            .run(run)
            .map_err(|error| error.to_string())?
            .ok_or_else(|| format!("no run `{run}`; list_runs lists them"))
    }

    /// A recorded run that has not finished (to resume or cancel it); refused when the store
    /// has no such run or it has finished.
    pub(in crate::frontends::mcp) fn unfinished_record(
        &self,
        run: &str,
    ) -> Result<RunRecord, String> {
        let record = self.recorded(run)?;
        if record.summary.status == RunStatus::Finished {
            return Err(format!("run `{run}` has finished; get_run tells how"));
        }
        Ok(record)
    }

    /// At start: resumes every unfinished run an MCP server started of a protocol this one
    /// serves, newest first, up to `--max-live-runs`, each named on stderr; one that cannot
    /// resume (its protocol changed, another process holds it) is named with the reason and
    /// left for `resume_run`.
    pub(in crate::frontends::mcp) fn resume_recorded(&mut self) {
        self.resume_left(true);
    }

    /// Claims the unfinished runs MCP servers started of the protocols served here that no
    /// live holder has, and resumes them. At the start (`at_start`) every one is read and
    /// each left is said; later (a shared store, whose other hosts hold most of them) only as
    /// many as there is room for, a run another host holds is left quietly, one taken over is
    /// said, one that cannot resume is said once, and a protocol whose secret inputs are not
    /// pinned here is left to a host given them.
    pub(in crate::frontends::mcp) fn resume_left(&mut self, at_start: bool) {
        let limit = self.settings.max_live_runs;
        let room = limit.saturating_sub(self.runs.len());
        if !at_start && room == 0 {
            return;
        }
        let mut left = Vec::new();
        for served in &self.protocols {
            let missing: Vec<&str> = served
                .machine
                .inputs
                .iter()
                .filter(|input| input.secret && !served.pinned.is_pinned(&input.name))
                .map(|input| input.name.as_str())
                .collect();
            if !at_start && !missing.is_empty() {
                if self
                    .told
                    .insert(format!("\0secret inputs of {}", served.path))
                {
                    eprintln!(
                        "mcp: runs of {} whose host dies are left to a host given its secret \
                         input(s) {}: this one was not (--input {}); they are not stored with \
                         the runs",
                        served.path,
                        missing.join(", "),
                        missing.join(" --input ")
                    );
                }
                continue;
            }
            let count = if at_start { usize::MAX } else { room };
            match self.settings.store.unfinished_runs(&served.path, count) {
                Ok(runs) => left.extend(runs.into_iter().filter(|run| {
                    run.origin == Some(RunOrigin::Mcp) && !self.runs.contains_key(&run.id)
                })),
                Err(error) => {
                    eprintln!("mcp: cannot look for runs to resume: {error}");
                    return;
                }
            }
        }
        // Newest first, across the protocols.
        left.sort_by(|one, other| {
            other
                .started_unix_milliseconds
                .cmp(&one.started_unix_milliseconds)
        });
        let mut left: Vec<String> = left.into_iter().map(|run| run.id).collect();
        let over_the_limit = left.len().saturating_sub(room);
        left.truncate(room);
        // One transaction claims them all; a run another live process holds is left to it.
        let claims = match crate::runtime::runs::claims::claim(
            &mut self.settings.store,
            &self.settings.holder,
            &left,
        ) {
            Ok(claims) => claims,
            Err(error) => {
                eprintln!("mcp: cannot resume the runs left by an earlier server: {error}");
                return;
            }
        };
        let mut named = 0usize;
        let mut quietly_resumed = 0usize;
        for (run, claimed) in left.into_iter().zip(claims) {
            if claimed.is_err() && !at_start {
                continue;
            }
            let resumed = claimed
                .map_err(|refused| refused.to_string())
                .and_then(|()| {
                    let record = self.recorded(&run)?;
                    let protocol = record.summary.protocol_path.clone();
                    self.resume_claimed(&record)
                        .map(|report| (protocol, report))
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
                    let how = if at_start {
                        "resumed"
                    } else {
                        "took over (its host is gone)"
                    };
                    if named == NAMED_RESUMED_RUNS {
                        quietly_resumed += 1;
                    } else {
                        named += 1;
                        eprintln!(
                            "mcp: {how} {run} ({protocol}, {count}: {})",
                            states.join(", ")
                        );
                    }
                }
                Err(message) => {
                    if at_start || self.told.insert(run.clone()) {
                        eprintln!(
                            "mcp: not resumed {run}: {}",
                            crate::base::secrets::mask(&message)
                        );
                    }
                }
            }
        }
        if quietly_resumed > 0 {
            eprintln!(
                "mcp: resumed {quietly_resumed} more runs (`protocol-run runs --status running` \
                 lists them)"
            );
        }
        if over_the_limit > 0 && at_start {
            eprintln!(
                "mcp: not resumed {over_the_limit} runs: {limit} runs are live, the limit \
                 (--max-live-runs); resume_run resumes one once another ends"
            );
        }
    }

    /// Resumes `record`'s run, claimed by this server, in a fleet of its own, its report
    /// starting with the directives its journal holds; refused when its protocol is not served
    /// here or changed.
    fn resume(&mut self, record: &RunRecord) -> Result<Value, String> {
        let run = record.summary.id.as_str();
        // The served machine's grants are the operator's (`crate::runtime::runs::grants::for_host`).
        let (served, machine, changed, _) = self.resumable(record)?;
        if let Some(changed) = changed {
            eprintln!(
                "mcp: {} changed since run `{run}` started; it goes on with the text it started \
                 with",
                changed.changed.path
            );
        }
        let pinned = served.pinned.clone();
        let (directives, dropped) =
            records::recorded_directives(&**self.settings.store.lock(), run)?;
        let recording = served.recording(
            Box::new(self.settings.store.clone()),
            self.settings.recorded_grants.clone(),
            RunOrigin::Mcp,
            self.settings.holder.clone(),
        );
        let view = Rc::new(RefCell::new(RunView::resumed(directives, dropped)));
        let mut fleet = self.fleet(run.to_string(), machine.clone(), recording, view.clone());
        fleet.set_pinned_inputs(pinned);
        fleet.resume_run(run, crate::base::durable::TimerPolicy::Deadline)?;
        fleet.commit();
        let report = report(&machine, run, &view.borrow());
        self.keep_live(run, machine, fleet, view);
        Ok(report)
    }

    /// What resuming `record`'s run here takes, or why it cannot resume (its protocol is not
    /// served here, or changed and the texts it started with are not all kept, an input of it
    /// cannot be restored), from what this server holds: its served protocol, the machine it
    /// resumes with (the served one, or the texts it started with when a file changed since,
    /// with what changed) and its inputs bound again.
    pub(in crate::frontends::mcp) fn resumable(
        &self,
        record: &RunRecord,
    ) -> Result<Resumable<'_>, String> {
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
        let version = crate::runtime::runs::resume::version(
            &self.settings.store,
            record,
            &served.path,
            &served.text,
            false,
            || format!("run `{run}`"),
        )
        .map_err(|error| error.to_string())?;
        let (machine, changed) = match version {
            Version::Current => (served.machine.clone(), None),
            Version::NotKept(changed) => {
                return Err(changed.message(
                    "The texts it started with are not all kept: restore the file to resume it",
                ));
            }
            Version::Pinned(changed, texts) => {
                let operator = HostOperator {
                    limit: &self.settings.narrowing,
                    narrowing: &self.settings.narrowing_permissions,
                };
                let machine = crate::runtime::runs::served::pinned_version(
                    std::path::Path::new(&served.path),
                    &texts,
                    &operator,
                    &served.pinned,
                )
                .map_err(|refusal| {
                    changed.message(&format!(
                        "The text it started with does not compile here: {}",
                        refusal.text.trim_end()
                    ))
                })?;
                (machine, Some(changed))
            }
        };
        let secret_inputs = served.pinned.texts_of(&machine.secret_input_names());
        // A client has no way to give a secret here; the operator pins it.
        let values = crate::runtime::runs::resume::bind_recorded(
            &machine,
            record,
            &secret_inputs,
            |name| {
                format!(
                    "a client cannot supply it; start the server with --input {name}=VALUE, or \
                     `protocol-run resume {run} --input {name}=VALUE` resumes it outside this \
                     server"
                )
            },
        )?;
        Ok((served, machine, changed, values))
    }
}

/// What resuming a run on an MCP server takes (`Host::resumable`).
pub(in crate::frontends::mcp) type Resumable<'a> = (
    &'a Served,
    Arc<Machine>,
    Option<ProtocolChanged>,
    Vec<crate::base::value::Value>,
);
