//! The runs an MCP server hosts: each an ordinary durable run driven by `serve`'s fleet, on one thread of its own, answering the tools' requests.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::frontends::mcp::catalog::Served;
use crate::frontends::mcp::runs::ended::{EndedRun, EndedRuns};
use crate::frontends::mcp::runs::records;
use crate::frontends::mcp::runs::report::{RunView, report};
pub(in crate::frontends::mcp) use crate::frontends::mcp::runs::requests::Reply;
pub use crate::frontends::mcp::runs::requests::{
    CANCELLED_EXIT_CODE, HostSettings, Request, SharedHosting,
};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::input::LineBatch;

/// One live run: its fleet's input, and what its output said so far. The server holds it (its
/// host lock, recorded as the run's holder) until it ends.
pub(in crate::frontends::mcp) struct LiveRun {
    pub(in crate::frontends::mcp) input: mpsc::Sender<LineBatch>,
    pub(in crate::frontends::mcp) machine: Arc<Machine>,
    pub(in crate::frontends::mcp) view: Rc<RefCell<RunView>>,
    /// The instance name inside its fleet (the run id less `<protocol id>:`).
    pub(in crate::frontends::mcp) instance: String,
    /// Cancels the run; the fleet answers the reply once its effects are stopped. Taken by
    /// the first `cancel_run`.
    pub(in crate::frontends::mcp) cancel: Option<oneshot::Sender<Reply>>,
}

/// A request waiting for its line's output to be committed.
pub(in crate::frontends::mcp) struct Waiting {
    /// The run the line went to.
    pub(in crate::frontends::mcp) run: String,
    /// The tool call that sent the line, as warnings about it name it (`MCP call send_event
    /// to run `r``): it came from no input line.
    pub(in crate::frontends::mcp) call: String,
    pub(in crate::frontends::mcp) reply: oneshot::Sender<Result<Value, String>>,
    pub(in crate::frontends::mcp) problems: Vec<String>,
    /// What became of the event the line sent, once the fleet said.
    pub(in crate::frontends::mcp) outcome: Option<Value>,
    /// How the wait of an `await` line ended.
    pub(in crate::frontends::mcp) awaited: Option<&'static str>,
}

pub(in crate::frontends::mcp) type Waiters = Rc<RefCell<HashMap<u64, Waiting>>>;

/// The host's state on its thread.
pub(in crate::frontends::mcp) struct Host {
    pub(in crate::frontends::mcp) protocols: Vec<Served>,
    pub(in crate::frontends::mcp) settings: HostSettings,
    pub(in crate::frontends::mcp) runs: HashMap<String, LiveRun>,
    pub(in crate::frontends::mcp) waiters: Waiters,
    pub(in crate::frontends::mcp) next_client: u64,
    /// Turns true when the server stops: every fleet parks its run for the next server.
    pub(in crate::frontends::mcp) stop: watch::Sender<bool>,
    /// The fleets still driving their runs; one that ended is reaped with its run.
    pub(in crate::frontends::mcp) fleets: tokio::task::JoinSet<()>,
    /// The runs whose fleets ended since the last request, for the host to forget.
    pub(in crate::frontends::mcp) just_ended: Rc<RefCell<Vec<String>>>,
    /// The views of the runs that ended most recently.
    pub(in crate::frontends::mcp) ended: EndedRuns,
    /// On a shared store, what the database's wake is passed to (`shared::Wakes`).
    pub(in crate::frontends::mcp) wakes: crate::frontends::mcp::runs::shared::Wakes,
    /// When the next look for runs whose host died is due (a shared store).
    pub(in crate::frontends::mcp) next_takeover: Option<tokio::time::Instant>,
    /// Runs a look could not resume, said once each rather than at every look.
    pub(in crate::frontends::mcp) told: std::collections::HashSet<String>,
}

/// Serves `requests` until their senders are gone, then stops every live run (marked stopped
/// in the store, for the next server) and returns.
pub async fn host(
    protocols: Vec<Served>,
    settings: HostSettings,
    mut requests: mpsc::Receiver<Request>,
) {
    let mut host = Host {
        protocols,
        settings,
        runs: HashMap::new(),
        waiters: Rc::default(),
        next_client: 0,
        stop: watch::Sender::new(false),
        fleets: tokio::task::JoinSet::new(),
        just_ended: Rc::default(),
        ended: EndedRuns::default(),
        wakes: Rc::default(),
        next_takeover: None,
        told: std::collections::HashSet::new(),
    };
    host.listen_for_inboxes();
    if host.settings.resume {
        host.resume_recorded();
    }
    host.take_over_later();
    loop {
        let takeover = host.next_takeover();
        tokio::select! {
            request = requests.recv() => match request {
                Some(request) => host.handle(request).await,
                None => break,
            },
            () = async {
                match takeover {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => host.take_over_now(),
        }
    }
    host.stop.send_replace(true);
    while host.fleets.join_next().await.is_some() {}
}

impl Host {
    async fn handle(&mut self, request: Request) {
        self.forget_ended();
        match request {
            Request::Start {
                protocol,
                inputs,
                parent,
                reply,
            } => self.start(&protocol, inputs, parent, reply).await,
            Request::SendEvent {
                run,
                event,
                data,
                expected_step,
                reply,
            } => {
                if expected_step.is_none() && self.queues_for(&run) {
                    self.queue_event(&run, &event, data, reply);
                } else {
                    self.send_event(&run, &event, data, expected_step, reply)
                        .await
                }
            }
            Request::WaitForState {
                run,
                state,
                timeout,
                reply,
            } => self.wait_for_state(&run, &state, timeout, reply).await,
            Request::GetRun { run, reply } => {
                let _ = reply.send(self.get_run(&run));
            }
            Request::ListRuns {
                after,
                count,
                reply,
            } => {
                let _ = reply.send(self.list_runs(after.as_deref(), count));
            }
            Request::CancelRun { run, reply } => self.cancel_run(&run, reply),
            Request::ResumeRun { run, reply } => {
                let _ = reply.send(self.resume_run(&run));
            }
            Request::RedriveRun { run, reply } => {
                let _ = reply.send(self.redrive_run(&run));
            }
            Request::GetLogs {
                run,
                tag,
                level,
                reply,
            } => {
                let answer = match self.view_of(&run) {
                    Some((_, view)) => view
                        .borrow()
                        .logs
                        .filtered(tag.as_deref(), level.as_deref()),
                    None => Err(self.not_live(&run)),
                };
                let _ = reply.send(answer);
            }
            Request::GetDiagram { run, reply } => {
                let _ = reply.send(self.diagram(&run));
            }
            Request::GetTask { run, reply } => {
                let _ = reply.send(self.task_view(&run));
            }
        }
    }

    /// Whether one more run may be driven here, or why not: `--max-live-runs` are, the runs
    /// whose fleets ended forgotten.
    pub(in crate::frontends::mcp) fn check_room(&mut self) -> Result<(), String> {
        self.forget_ended();
        let limit = self.settings.max_live_runs;
        if self.runs.len() < limit {
            return Ok(());
        }
        Err(format!(
            "{limit} runs are live here, the limit (--max-live-runs, by default what the limit \
             on open files leaves); cancel one, wait for one to end, or start the server with a \
             higher --max-live-runs"
        ))
    }

    /// Forgets the runs whose fleets ended:
    /// their input is dropped, their views kept among the ended ones, their fleets reaped.
    fn forget_ended(&mut self) {
        let ended = std::mem::take(&mut *self.just_ended.borrow_mut());
        if ended.is_empty() {
            return;
        }
        for run in ended {
            // A run resumed again under the same id has a new, open input: it stays.
            if !self
                .runs
                .get(&run)
                .is_some_and(|live| live.input.is_closed())
            {
                continue;
            }
            let Some(live) = self.runs.remove(&run) else {
                continue;
            };
            // A run dropped from its fleet still running (its store refused a step) resumes
            // from the store: its view would tell a stale story.
            if live.view.borrow().status() != "running" {
                let ended = EndedRun {
                    machine: live.machine,
                    view: live.view,
                };
                self.ended.keep(run, ended);
            }
        }
        while self.fleets.try_join_next().is_some() {}
    }

    /// The protocol and view of a run live here or ended here recently.
    fn view_of(&self, run: &str) -> Option<(&Arc<Machine>, &Rc<RefCell<RunView>>)> {
        match self.runs.get(run) {
            Some(live) => Some((&live.machine, &live.view)),
            None => self
                .ended
                .get(run)
                .map(|ended| (&ended.machine, &ended.view)),
        }
    }

    /// A live run's report while it runs.
    pub(in crate::frontends::mcp) fn live_report(&self, run: &str) -> Option<Value> {
        let live = self.runs.get(run)?;
        let view = live.view.borrow();
        (view.status() == "running").then(|| report(&live.machine, run, &view))
    }

    /// Drives `fleet` and keeps its run, `<protocol id>:<instance>`, live under `run_id`.
    pub(in crate::frontends::mcp) fn keep_live(
        &mut self,
        run_id: &str,
        machine: Arc<Machine>,
        fleet: crate::runtime::runs::fleet::Fleet,
        view: Rc<RefCell<RunView>>,
    ) {
        let (input, cancel) = self.drive(fleet, run_id.to_string(), view.clone());
        let instance = run_id[machine.id.len() + 1..].to_string();
        self.runs.insert(
            run_id.to_string(),
            LiveRun {
                input,
                machine,
                view,
                instance,
                cancel: Some(cancel),
            },
        );
    }

    /// The report of a run live or ended here recently, or a recorded one's summary from the
    /// store.
    pub(in crate::frontends::mcp) fn get_run(&self, run: &str) -> Result<Value, String> {
        if let Some((machine, view)) = self.view_of(run) {
            return Ok(report(machine, run, &view.borrow()));
        }
        records::summary(&**self.settings.store.lock(), &self.served_paths(), run)
    }

    /// The protocol of a run live or ended here recently as a Mermaid diagram, its active
    /// states drawn in the `active` class.
    fn diagram(&self, run: &str) -> Result<Value, String> {
        let (machine, view) = self.view_of(run).ok_or_else(|| self.not_live(run))?;
        let mut active = Vec::new();
        for state in view.borrow().states.iter() {
            if let Some(state) = machine.state_id(state) {
                active.push(state);
                active.extend(machine.state(state).ancestors.iter().copied());
            }
        }
        active.sort();
        active.dedup();
        Ok(serde_json::json!({
            "run": run,
            "mermaid": crate::tooling::graph::mermaid_with_active(machine, &active),
        }))
    }

    /// Why `run` is not live here: unknown, or recorded with its status.
    pub(in crate::frontends::mcp) fn not_live(&self, run: &str) -> String {
        records::not_live(&**self.settings.store.lock(), run)
    }

    /// The served protocols' files, as runs record them.
    pub(in crate::frontends::mcp) fn served_paths(&self) -> Vec<&str> {
        self.protocols
            .iter()
            .map(|served| served.path.as_str())
            .collect()
    }

    /// A page of the runs of the served protocols the store holds, newest first, live ones
    /// with their status here.
    fn list_runs(&self, after: Option<&str>, count: usize) -> Result<Value, String> {
        let paths = self.served_paths();
        records::list(&**self.settings.store.lock(), &paths, after, count, |run| {
            self.view_of(run).map(|(_, view)| view.borrow().status())
        })
    }
}
