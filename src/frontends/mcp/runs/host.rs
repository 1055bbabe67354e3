//! The runs an MCP server hosts: each an ordinary durable run driven by `serve`'s fleet, on one thread of its own, answering the tools' requests.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::frontends::mcp::catalog::Served;
use crate::frontends::mcp::runs::ended::{EndedRun, EndedRuns};
use crate::frontends::mcp::runs::records;
use crate::frontends::mcp::runs::report::{RunView, report};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::input::{LineBatch, LineOrigin};
use crate::store::SharedStore;

/// A request from a tool, answered with a JSON report or an error the client reads.
pub enum Request {
    Start {
        protocol: String,
        inputs: Map<String, Value>,
        reply: Reply,
    },
    SendEvent {
        run: String,
        event: String,
        data: Option<Value>,
        /// For an answer to the input request keyed `EVENT@STEP`: its step. The event is sent
        /// only while that request stands (`check_request_stands`), checked here, on the
        /// host's thread, so no other event slips in between.
        expected_step: Option<u64>,
        reply: Reply,
    },
    /// Waits until the run is in `state` (or ended, or `timeout` passed), then answers its
    /// report with how the wait ended.
    WaitForState {
        run: String,
        state: String,
        timeout: Option<Value>,
        reply: Reply,
    },
    GetRun {
        run: String,
        reply: Reply,
    },
    /// A page of runs: at most `count`, after the run `after`.
    ListRuns {
        after: Option<String>,
        count: usize,
        reply: Reply,
    },
    CancelRun {
        run: String,
        reply: Reply,
    },
    ResumeRun {
        run: String,
        reply: Reply,
    },
    GetLogs {
        run: String,
        tag: Option<String>,
        level: Option<String>,
        reply: Reply,
    },
    GetDiagram {
        run: String,
        reply: Reply,
    },
    /// A run as a task: its report, and when it started and last changed.
    GetTask {
        run: String,
        reply: Reply,
    },
}

/// Where a request's answer goes.
pub(in crate::frontends::mcp) type Reply = oneshot::Sender<Result<Value, String>>;

pub use crate::runtime::run::stop::CANCELLED_EXIT_CODE;

/// What the host runs under: the operator's choices.
pub struct HostSettings {
    pub state_dir: PathBuf,
    /// The server's one store connection, which every run and every read shares.
    pub store: SharedStore,
    /// What each run this server drives records as its holder: the server, by its host lock.
    pub holder: crate::store::Holder,
    /// The most runs driven at once (`--max-live-runs`): a start or a resume past it is
    /// refused, naming it.
    pub max_live_runs: usize,
    pub narrowing: crate::effects::capabilities::Capabilities,
    /// The operator's narrowing as its flags gave it: which kinds of grant it narrows.
    pub narrowing_permissions: crate::base::model::Permissions,
    /// The inputs the operator pinned (`--input`): each protocol takes those it declares.
    pub pinned: crate::runtime::runs::grants::PinnedInputs,
    pub recorded_grants: Option<Value>,
    pub limits: crate::runtime::run::algorithm::Limits,
    /// Where each directive goes as it is committed, with its run id: the server turns them
    /// into notifications for the client.
    pub notices: broadcast::Sender<(String, Value)>,
    /// Whether the runs earlier servers left are resumed at start (`--no-resume` leaves them
    /// for `resume_run`).
    pub resume: bool,
    /// Whether a plain call that leaves a run waiting for input asks the client for the event
    /// by elicitation, when the client can answer it.
    pub elicitation: bool,
}

/// One live run: its fleet's input, and what its output said so far. The server holds it (its
/// host lock, recorded as the run's holder) until it ends.
pub(in crate::frontends::mcp) struct LiveRun {
    input: mpsc::Sender<LineBatch>,
    pub(in crate::frontends::mcp) machine: Arc<Machine>,
    pub(in crate::frontends::mcp) view: Rc<RefCell<RunView>>,
    /// The instance name inside its fleet (the run id less `<protocol id>:`).
    instance: String,
    /// Cancels the run; the fleet answers the reply once its effects are stopped. Taken by
    /// the first `cancel_run`.
    pub(in crate::frontends::mcp) cancel: Option<oneshot::Sender<Reply>>,
}

/// A request waiting for its line's output to be committed.
pub(in crate::frontends::mcp) struct Waiting {
    /// The run the line went to.
    pub(in crate::frontends::mcp) run: String,
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
    };
    if host.settings.resume {
        host.resume_recorded();
    }
    while let Some(request) = requests.recv().await {
        host.handle(request).await;
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
                reply,
            } => self.start(&protocol, inputs, reply).await,
            Request::SendEvent {
                run,
                event,
                data,
                expected_step,
                reply,
            } => {
                self.send_event(&run, &event, data, expected_step, reply)
                    .await
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

    /// Starts a run of `protocol` with `inputs` and the pinned ones: its grants the operator's
    /// (resolved when the protocol was served), its own fleet, its first line creating it.
    async fn start(
        &mut self,
        protocol: &str,
        inputs: Map<String, Value>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let fail = |reply: oneshot::Sender<Result<Value, String>>, message: String| {
            let _ = reply.send(Err(message));
        };
        if let Err(message) = self.check_room() {
            return fail(reply, message);
        }
        let Some(served) = self
            .protocols
            .iter()
            .find(|served| served.machine.id == protocol)
        else {
            return fail(reply, format!("no protocol `{protocol}` is served"));
        };
        if let Err(message) = check_line_length(&Value::Object(inputs.clone()).to_string()) {
            return fail(reply, message);
        }
        let supplied: Vec<(String, Value)> = inputs.clone().into_iter().collect();
        let supplied = match served.pinned.with_client_inputs(&supplied) {
            Ok(supplied) => supplied,
            Err(message) => return fail(reply, message),
        };
        // Checked here, so a bad input is the call's error rather than a line the fleet skips.
        if let Err(errors) = served.machine.bind_input_values(&supplied) {
            let messages: Vec<String> = errors.iter().map(tool_input_error).collect();
            return fail(reply, messages.join("; "));
        }
        let machine = served.machine.clone();
        let pinned = served.pinned.clone();
        let instance =
            records::new_instance_name(&self.settings.store.lock(), &machine.id, |run| {
                self.runs.contains_key(run)
            });
        let run_id = format!("{}:{instance}", machine.id);
        // The run is created holding this server's claim (`Recording::holder`).
        let recording = served.recording(
            Box::new(self.settings.store.clone()),
            self.settings.recorded_grants.clone(),
            crate::store::RunOrigin::Mcp,
            self.settings.holder.clone(),
        );
        let view = Rc::new(RefCell::new(RunView::default()));
        let mut fleet = self.fleet(run_id.clone(), machine.clone(), recording, view.clone());
        fleet.set_pinned_inputs(pinned);
        self.keep_live(&run_id, machine, fleet, view);
        let line = serde_json::json!({"instance": instance, "inputs": inputs}).to_string();
        self.submit(&run_id, &line, reply).await;
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

    /// Hands `line` to the run's fleet; `reply` is answered once its output is committed.
    async fn submit(
        &mut self,
        run: &str,
        line: &str,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let Some(live) = self.runs.get(run) else {
            let _ = reply.send(Err(format!("no live run `{run}`")));
            return;
        };
        if let Err(message) = check_line_length(line) {
            let _ = reply.send(Err(message));
            return;
        }
        self.next_client += 1;
        let client = self.next_client;
        let mut batch = LineBatch::from_client(LineOrigin { client, line: 1 });
        batch.push(line);
        self.waiters.borrow_mut().insert(
            client,
            Waiting {
                run: run.to_string(),
                reply,
                problems: Vec::new(),
                outcome: None,
                awaited: None,
            },
        );
        if live.input.send(batch).await.is_err()
            && let Some(waiting) = self.waiters.borrow_mut().remove(&client)
        {
            let _ = waiting
                .reply
                .send(Err(format!("run `{run}` is no longer live")));
        }
    }

    /// Sends `event` to a live run; answered with its report once the step is committed. The
    /// fleet refuses what `serve` refuses (an undeclared event, data off its schema, a
    /// platform event) with the reason. An answer to an input request (`expected_step`) is
    /// sent only while the request stands.
    async fn send_event(
        &mut self,
        run: &str,
        event: &str,
        data: Option<Value>,
        expected_step: Option<u64>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        if let Some(step) = expected_step
            && let Err(message) = self.check_request_stands(run, event, step)
        {
            let _ = reply.send(Err(message));
            return;
        }
        let live = match self.running(run) {
            Ok(live) => live,
            Err(message) => {
                let _ = reply.send(Err(message));
                return;
            }
        };
        let mut line = serde_json::json!({"instance": live.instance, "event": event});
        if let Some(data) = data {
            line["data"] = data;
        }
        self.submit(run, &line.to_string(), reply).await;
    }

    /// Hands the run's fleet an `await` line, answered once the wait ends (the fleet holds the
    /// run's other input meanwhile, as `serve` does).
    async fn wait_for_state(
        &mut self,
        run: &str,
        state: &str,
        timeout: Option<Value>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let live = match self.running(run) {
            Ok(live) => live,
            Err(message) => {
                let _ = reply.send(Err(message));
                return;
            }
        };
        let mut line = serde_json::json!({"instance": live.instance, "await": state});
        if let Some(timeout) = timeout {
            line["timeout"] = timeout;
        }
        self.submit(run, &line.to_string(), reply).await;
    }

    /// A live run that has not ended, or why there is none.
    pub(in crate::frontends::mcp) fn running(&mut self, run: &str) -> Result<&mut LiveRun, String> {
        if !self.runs.contains_key(run) {
            if let Some(ended) = self.ended.get(run) {
                let status = ended.view.borrow().status();
                return Err(format!("run `{run}` has ended: {status}"));
            }
            return Err(self.not_live(run));
        }
        let live = self.runs.get_mut(run).expect("checked above");
        let status = live.view.borrow().status();
        if status != "running" {
            return Err(format!("run `{run}` has ended: {status}"));
        }
        Ok(live)
    }

    /// The report of a run live or ended here recently, or a recorded one's summary from the
    /// store.
    pub(in crate::frontends::mcp) fn get_run(&self, run: &str) -> Result<Value, String> {
        if let Some((machine, view)) = self.view_of(run) {
            return Ok(report(machine, run, &view.borrow()));
        }
        records::summary(&self.settings.store.lock(), &self.served_paths(), run)
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
        records::not_live(&self.settings.store.lock(), run)
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
        records::list(&self.settings.store.lock(), &paths, after, count, |run| {
            self.view_of(run).map(|(_, view)| view.borrow().status())
        })
    }
}

/// The bound `serve` puts on each of its input lines, held for a tool's line too: the run's
/// inputs, or an event with its data.
fn check_line_length(line: &str) -> Result<(), String> {
    let limit = crate::runtime::run::input::MAX_EVENT_LINE_BYTES;
    if line.len() > limit {
        return Err(format!(
            "the run's input (the event's data, or the inputs) is {} bytes as JSON, more than \
             the limit of {limit} bytes (MAX_EVENT_LINE_BYTES, `serve`'s --max-event-bytes)",
            line.len()
        ));
    }
    Ok(())
}

/// An input problem as the client should read it: a missing input is an argument of the tool,
/// not a `--input` flag.
fn tool_input_error(error: &crate::pipeline::compile::inputs::InputError) -> String {
    use crate::pipeline::compile::inputs::InputError;
    match error {
        InputError::Missing { name, description } => format!(
            "missing required input `{name}`{description}; give the tool its `{name}` argument"
        ),
        other => other.to_string(),
    }
}
