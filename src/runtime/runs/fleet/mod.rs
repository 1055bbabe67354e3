//! Many instances of one protocol on one scheduler: parked between steps, their timers in one heap, their effects reporting on one channel, their steps committed in batches.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::base::event::{Event, Origin};
use crate::effects::mock::Mocks;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::otlp::spans::SessionEnd;
use crate::runtime::run::Interpreter;
use crate::runtime::run::admission::EventReport;
use crate::runtime::run::algorithm::RunError;
use crate::runtime::run::driver::{
    DriverState, EffectMessage, EffectSink, InputBatches, InputLineError, Observer, Session,
};
use crate::runtime::run::input::LineOrigin;
use crate::runtime::run::stop::Stop;
use crate::runtime::telemetry::{push_stored_entry, read_by_logs_or_stats};

mod awaiting;
mod inbox;
mod takeover;
mod telemetry;
mod tracing;
mod versions;
use crate::base::value::Value;
use crate::store::{Finish, NewRun, RunStatus, Store, Write};

/// The exit code of an instance ended by an error (as `run`'s for an invalid protocol or input).
const ERROR_EXIT_CODE: i32 = 64;

/// Where a fleet records its instances, and the protocol they run.
pub struct Recording {
    pub store: Box<dyn Store>,
    /// The protocol file, canonicalized: instances of the same file resume together.
    pub protocol_path: String,
    pub protocol_hash: String,
    pub protocol_text: String,
    /// The texts of the other files its load read (`NewRun::read_texts`).
    pub read_texts: Vec<Arc<str>>,
    /// The operator's narrowing this host runs under, recorded with each instance it starts.
    pub grants: Option<serde_json::Value>,
    /// The front end hosting the fleet (`serve`, or `mcp`), recorded with each instance.
    pub origin: crate::store::RunOrigin,
    /// The host, recorded as the holder of each instance it starts or resumes
    /// (`runs::claims`): its lock is held for as long as the fleet runs.
    pub holder: crate::store::Holder,
}

/// How a fleet's `run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetEnd {
    /// Input ended and no instance had a timer or effect left.
    Drained,
    /// The stop future resolved (a signal, a cancel): every live instance is stopped as it
    /// said, parked or finished.
    Stopped,
}

/// Where committed output lines go.
type OutputSink = Box<dyn FnMut(&[u8])>;

/// One instance between its steps.
struct Member {
    name: Box<str>,
    interpreter: Interpreter,
    state: DriverState,
    /// The deadline of this instance's entry in the fleet's heap, if it has one.
    armed: Option<Instant>,
}

/// Instances of one protocol, fed JSON lines tagged with an instance id (`serve`). Every
/// instance is data: its interpreter and parked driver state, with no task or channel of its
/// own. One heap orders every instance's next timer; one channel carries every effect's
/// outcome; every step's output line waits until the batch it belongs to is committed.
pub struct Fleet {
    /// Taking over the runs of hosts that died, now and again while this one runs.
    takeover: Option<takeover::Takeover>,
    /// The durable inboxes of runs: taking the events other hosts queued for the instances
    /// held here, and relaying the outcomes of those queued here for instances held elsewhere.
    inboxes: Option<inbox::Inboxes>,
    /// Keep the outcome of the event being applied (an inbox entry's) in `kept_outcome`.
    keep_outcome: bool,
    kept_outcome: Option<Box<EventReport>>,
    /// The file's version: new instances run it.
    machine: Arc<Machine>,
    /// The versions instances recorded under texts that changed since run (pinned).
    versions: Option<versions::Versions>,
    /// Run ids are `<protocol id>:<instance>`.
    prefix: String,
    /// Every instance created by this host, by slot; a finished one leaves `None` (slots are
    /// not reused, so a late effect message cannot reach a newer instance).
    members: Vec<Option<Box<Member>>>,
    /// Live instances by name. Names come from input, so the hash is seeded per process;
    /// foldhash rather than SipHash because this lookup is on every event's path.
    by_name: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    /// Instances that finished since the last commit: their runs are not yet finished in the
    /// store, so a line for them must not create them again.
    finished: HashSet<Box<str>>,
    /// At least one entry per instance with a pending timer, at or before its earliest.
    deadlines: BinaryHeap<Reverse<(Instant, usize)>>,
    effects_sender: mpsc::UnboundedSender<(usize, EffectMessage)>,
    effects: mpsc::UnboundedReceiver<(usize, EffectMessage)>,
    mocks: Arc<Mutex<Mocks>>,
    recording: Option<Recording>,
    /// Writes of the current batch.
    pending: Vec<Write>,
    /// The telemetry of the current batch, committed after its other writes (`pending`).
    telemetry: telemetry::BatchTelemetry,
    /// Output lines of the current batch.
    output: Vec<u8>,
    sink: OutputSink,
    input_ended: bool,
    line_number: usize,
    /// Every instance's limits (`--max-microsteps`, the budgets).
    limits: crate::runtime::run::algorithm::Limits,
    /// The operator's pinned inputs: every new instance takes them (no line may give them),
    /// and they supply the secret inputs of the instances resumed from the store, which never
    /// holds them.
    pinned: crate::runtime::runs::grants::PinnedInputs,
    /// The socket client the line being handled came from, if it did.
    line_origin: Option<LineOrigin>,
    /// Answers a bad line to the client it came from (besides the warning on stderr).
    problem_reply: Option<ProblemReply>,
    /// Tells the client a line came from what became of its event (`mcp`'s `send_event`).
    outcome_reply: Option<OutcomeReply>,
    /// Tells the client an `await` line came from how the wait ended (`mcp`'s
    /// `wait_for_state`).
    await_reply: Option<ProblemReply>,
    /// The most instances alive at once; a line that would create one more is refused.
    max_instances: usize,
    /// Told each client whose lines were handled, once their output is committed (`mcp`
    /// answers a request only then).
    answer: Option<Box<dyn FnMut(u64)>>,
    /// Clients whose lines were handled since the last commit.
    handled_clients: Vec<u64>,
    /// Names the line a client sent, for the warnings about it (`mcp` names the tool call);
    /// `input line N` when it has no name.
    line_names: Option<LineNames>,
    /// Instances dropped because the store refused their writes (a full disk).
    store_failures: usize,
    /// Takes each log line (masked) besides stderr.
    log_sink: Option<LogSink>,
    /// Told, after each step that leaves an instance live, what it still waits on (`mcp`
    /// tells a client whether only an event can move the run).
    pending_sink: Option<PendingSink>,
    /// Ends once every instance it hosted has ended, rather than when its input ends: a fleet
    /// of one run (`mcp`) releases its store and lock as soon as the run is over.
    ends_with_its_instances: bool,
    /// The `await` lines still waiting, each holding its client's later lines (at most one a
    /// client: the client's next `await` is held behind it).
    awaiting: Vec<awaiting::Awaiting>,
    /// Lines read after an `await` line of their client, handled once it ends
    /// (`MAX_HELD_LINES`).
    held: std::collections::VecDeque<(Result<String, String>, Option<LineOrigin>)>,
    /// With `--otlp`, where each instance's trace goes.
    tracing: Option<tracing::Tracing>,
}

/// What a live instance waits on after its step: the events it can take aside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Effects or child protocols are running: their outcomes will move it.
    pub running: bool,
    /// A timer (a delayed send or an `after`) is pending.
    pub timers: bool,
}

/// Where a fleet tells what each live instance waits on, by its name.
pub type PendingSink = Box<dyn FnMut(&str, Pending)>;

/// Where a fleet's log lines go besides stderr.
pub type LogSink = Box<dyn FnMut(&serde_json::Value)>;

/// Answers a bad line to its socket client: where it came from, and the problem.
pub type ProblemReply = Box<dyn FnMut(LineOrigin, &str)>;

/// What a front end calls the line a client sent (`MCP call send_event to run `r``).
pub type LineNames = Box<dyn Fn(LineOrigin) -> Option<String>>;

/// Tells a line's client what became of its event: taken, deferred, discarded or refused.
pub type OutcomeReply = Box<dyn FnMut(LineOrigin, &EventReport)>;

impl Fleet {
    /// A fleet writing its output lines to stdout; `recording` makes it durable.
    pub fn new(machine: Arc<Machine>, recording: Option<Recording>) -> Fleet {
        let (effects_sender, effects) = mpsc::unbounded_channel();
        Fleet {
            takeover: None,
            versions: None,
            inboxes: None,
            keep_outcome: false,
            kept_outcome: None,
            prefix: format!("{}:", machine.id),
            machine,
            members: Vec::new(),
            by_name: HashMap::default(),
            finished: HashSet::new(),
            deadlines: BinaryHeap::new(),
            effects_sender,
            effects,
            mocks: Arc::new(Mutex::new(Mocks::default())),
            recording,
            pending: Vec::new(),
            telemetry: telemetry::BatchTelemetry::default(),
            output: Vec::new(),
            sink: Box::new(|bytes| {
                use std::io::Write;
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(bytes);
                let _ = stdout.flush();
            }),
            input_ended: false,
            line_number: 0,
            limits: crate::runtime::run::algorithm::Limits::default(),
            pinned: crate::runtime::runs::grants::PinnedInputs::default(),
            line_origin: None,
            line_names: None,
            problem_reply: None,
            outcome_reply: None,
            await_reply: None,
            awaiting: Vec::new(),
            held: std::collections::VecDeque::new(),
            max_instances: usize::MAX,
            answer: None,
            handled_clients: Vec::new(),
            store_failures: 0,
            log_sink: None,
            pending_sink: None,
            ends_with_its_instances: false,
            tracing: None,
        }
    }

    /// Ends the fleet once it has taken a line or hosted an instance and no instance is live,
    /// its input still open.
    pub fn ending_with_its_instances(mut self) -> Fleet {
        self.ends_with_its_instances = true;
        self
    }

    /// Tells `sink` what each instance still waits on after each of its steps.
    pub fn with_pending(mut self, sink: impl FnMut(&str, Pending) + 'static) -> Fleet {
        self.pending_sink = Some(Box::new(sink));
        self
    }

    /// Hands each log line, masked, to `sink` too (`mcp` keeps them for `get_logs`).
    pub fn with_logs(mut self, sink: impl FnMut(&serde_json::Value) + 'static) -> Fleet {
        self.log_sink = Some(Box::new(sink));
        self
    }

    /// Tells `answer` each socket client whose batch was handled, after its output is committed.
    pub fn with_answers(mut self, answer: impl FnMut(u64) + 'static) -> Fleet {
        self.answer = Some(Box::new(answer));
        self
    }

    /// Runs every instance under `limits`.
    pub fn with_limits(mut self, limits: crate::runtime::run::algorithm::Limits) -> Fleet {
        self.limits = limits;
        self
    }

    /// Pins inputs for every instance: a new one takes them, and they supply the secret inputs
    /// of the instances `resume_recorded` resumes.
    pub fn set_pinned_inputs(&mut self, pinned: crate::runtime::runs::grants::PinnedInputs) {
        self.pinned = pinned;
    }

    /// Answers each bad line that came from a socket client to that client too.
    /// Tells each line's client what became of its event, a refusal included (instead of
    /// the problem reply).
    pub fn with_outcome_replies(
        mut self,
        reply: impl FnMut(LineOrigin, &EventReport) + 'static,
    ) -> Fleet {
        self.outcome_reply = Some(Box::new(reply));
        self
    }

    /// Tells each `await` line's client how its wait ended (`reached`, `timed_out`, `ended`),
    /// and answers it only then.
    pub fn with_await_replies(mut self, reply: impl FnMut(LineOrigin, &str) + 'static) -> Fleet {
        self.await_reply = Some(Box::new(reply));
        self
    }

    /// Names each client's line in the warnings about it, instead of its input line number.
    pub fn with_line_names(
        mut self,
        names: impl Fn(LineOrigin) -> Option<String> + 'static,
    ) -> Fleet {
        self.line_names = Some(Box::new(names));
        self
    }

    /// Warns on stderr that the line being handled was not taken, and why, naming it as its
    /// sender knows it: `input line N`, or what the front end that sent it calls it.
    fn warn_line_skipped(&self, why: &str) {
        let why = crate::base::secrets::mask(why);
        match self
            .line_origin
            .zip(self.line_names.as_ref())
            .and_then(|(origin, names)| names(origin))
        {
            Some(name) => eprintln!("warning: {name}: {why}; not taken"),
            None => eprintln!(
                "warning: input line {}: {why}; line skipped",
                self.line_number
            ),
        }
    }

    pub fn with_problem_replies(mut self, reply: impl FnMut(LineOrigin, &str) + 'static) -> Fleet {
        self.problem_reply = Some(Box::new(reply));
        self
    }

    /// Refuses to create an instance while `max` are alive.
    pub fn with_max_instances(mut self, max: usize) -> Fleet {
        self.max_instances = max;
        self
    }

    /// Sends each committed batch of output lines to `sink` instead of stdout.
    pub fn with_output(mut self, sink: impl FnMut(&[u8]) + 'static) -> Fleet {
        self.sink = Box::new(sink);
        self
    }

    /// Instances alive (started, not finished, not parked for good).
    pub fn live(&self) -> usize {
        self.by_name.len()
    }

    /// Resumes one recorded run of this protocol (`<protocol id>:<instance>`) from its latest
    /// snapshot, as `resume_recorded` resumes each; its first step joins the batch.
    pub fn resume_run(&mut self, run_id: &str, timers: TimerPolicy) -> Result<(), String> {
        let Some(name) = run_id.strip_prefix(&self.prefix) else {
            return Err(format!(
                "run `{run_id}` is not of protocol `{}`",
                self.machine.id
            ));
        };
        let (interpreter, resume) = self.restore(run_id, timers)?;
        let trace = self.begin_restored_trace(run_id, &interpreter)?;
        let slot = self.add_member(name, interpreter);
        self.keep_trace(slot, trace);
        self.step(slot, |session| match &resume {
            Some(resume) => session.resume(resume),
            None => session.start(),
        });
        Ok(())
    }

    /// An instance as its run's record and latest snapshot left it.
    fn restore(
        &self,
        run_id: &str,
        timers: TimerPolicy,
    ) -> Result<(Interpreter, Option<Resume>), String> {
        let store = &self
            .recording
            .as_ref()
            .expect("restoring needs a store")
            .store;
        let record = store
            .run(run_id)
            .map_err(|error| error.to_string())?
            .ok_or_else(|| format!("no run `{run_id}`"))?;
        let grants = self
            .recording
            .as_ref()
            .and_then(|recording| recording.grants.as_ref());
        if record.grants.as_ref() != grants {
            return Err(format!(
                "it started under the operator's narrowing {}, and this host runs under {}; \
                 start the server again with the --allow-*/--no-shell flags the run started under",
                record
                    .grants
                    .as_ref()
                    .map_or("none".to_string(), serde_json::Value::to_string),
                grants.map_or("none".to_string(), serde_json::Value::to_string)
            ));
        }
        // Its version's machine: the file's, or the texts it started with when they changed.
        let machine = self.machine_recorded_as(&record.summary.protocol_hash);
        let secret_inputs = self.pinned.texts_of(&machine.secret_input_names());
        let values = super::resume::bind_recorded(&machine, &record, &secret_inputs, |name| {
            format!(
                "start the host again with --input {name}=VALUE, or `protocol-run resume \
                 {run_id} --input {name}=VALUE` resumes it outside this host"
            )
        })?;
        super::resume::restore_latest(&**store, run_id, machine, values, &secret_inputs, timers)
    }

    /// Runs the fleet: lines from `input`, timers as they fall due, effects as they report,
    /// committing and writing output after each round. Ends when input has ended (or, if it
    /// ends with its instances, once they have) and no instance is left waiting, or when `stop`
    /// resolves, stopping each live instance as it says. Batches still queued in `input` then
    /// are the caller's.
    pub async fn run(
        &mut self,
        input: &mut InputBatches,
        stop: impl std::future::Future<Output = Stop>,
    ) -> FleetEnd {
        let mut stop = std::pin::pin!(stop);
        loop {
            self.fire_due_timers();
            self.settle_await();
            self.commit();
            if let Some(answer) = &mut self.answer {
                self.handled_clients.drain(..).for_each(&mut *answer);
            }
            // A signal that stopped a busy instance's step may be seen here before `stop`
            // resolves: the host stops, rather than count that instance as drained.
            if crate::pipeline::compile::budget::stop_requested() {
                self.stop(Stop::Park);
                return FleetEnd::Stopped;
            }
            // The output just committed goes out before more input is taken: input that is always
            // ready would otherwise keep the socket clients' writers from running until their
            // queues overflow.
            tokio::task::yield_now().await;
            let had_work = self.line_number > 0 || !self.members.is_empty();
            let ended = self.input_ended || (self.ends_with_its_instances && had_work);
            if ended && self.by_name.is_empty() {
                return FleetEnd::Drained;
            }
            let deadline = self
                .deadlines
                .peek()
                .map(|Reverse((deadline, _))| *deadline);
            let await_deadline = self.await_deadline();
            let takeover_at = self.takeover.as_ref().map(takeover::Takeover::next);
            let inboxes_at = self.inboxes.as_ref().map(inbox::Inboxes::next);
            let inboxes_wake = self.inboxes.as_ref().and_then(inbox::Inboxes::wake);
            tokio::select! {
                biased;
                how = &mut stop => {
                    self.stop(how);
                    return FleetEnd::Stopped;
                }
                Some((slot, message)) = self.effects.recv() => {
                    self.deliver(slot, message);
                    while let Ok((slot, message)) = self.effects.try_recv() {
                        self.deliver(slot, message);
                    }
                }
                // Input waits while stdin's `await` line does; a client's lines after its own
                // `await` are held.
                batch = input.recv(), if !self.input_ended && self.reads_input() => match batch {
                    Some(batch) => {
                        for (index, line) in batch.lines().enumerate() {
                            let origin = batch.origin.map(|first| LineOrigin {
                                client: first.client,
                                line: first.line + index,
                            });
                            if self.awaits_client(origin.map(|origin| origin.client)) {
                                self.held.push_back((line.map(String::from), origin));
                                continue;
                            }
                            self.line_number += 1;
                            self.line_origin = origin;
                            match line {
                                Ok(line) => self.accept_line(line),
                                Err(message) => self.line_problem(&message),
                            }
                        }
                        // A client whose `await` still waits is answered when it ends.
                        if let Some(origin) = batch.origin
                            && !self.awaits_client(Some(origin.client))
                        {
                            self.handled_clients.push(origin.client);
                        }
                    }
                    None => self.end_input(),
                },
                () = sleep_until(await_deadline), if await_deadline.is_some() => {
                    self.await_timed_out();
                }
                () = sleep_until(takeover_at), if takeover_at.is_some() => {
                    self.take_over_now();
                }
                () = sleep_until(inboxes_at), if inboxes_at.is_some() => {
                    self.look_at_inboxes();
                }
                () = inbox::Inboxes::woken(inboxes_wake) => {
                    self.look_at_inboxes();
                }
                () = sleep_until(deadline) => {}
            }
        }
    }

    fn line_problem(&mut self, message: &str) {
        self.warn_line_skipped(message);
        if let (Some(origin), Some(reply)) = (self.line_origin, &mut self.problem_reply) {
            reply(origin, message);
        }
    }

    /// One input line: `{"instance": ID, "inputs": {...}, "event": NAME, "data": {...}}`, where
    /// `inputs` counts only when the line creates the instance and `event` is optional. A bad
    /// line is reported with its number and skipped.
    pub fn accept_line(&mut self, line: &str) {
        if line.bytes().all(|byte| byte.is_ascii_whitespace()) {
            return;
        }
        let parsed: ServeLine = match serde_json::from_str(line) {
            Ok(parsed) => parsed,
            Err(error) if error.is_syntax() || error.is_eof() => {
                return self.line_problem(&format!("not JSON: {error}"));
            }
            Err(error) => {
                return self.line_problem(&format!(
                    "{error}; a line is an object like {{\"instance\": \"task-1\", \"event\": \
                     \"go\"}} with optional `inputs` and `data`"
                ));
            }
        };
        let Some(name) = parsed.instance.filter(|name| !name.is_empty()) else {
            return self.line_problem("missing `instance` (a non-empty string)");
        };
        if let Some(state) = parsed.await_state {
            if parsed.event.is_some() || parsed.inputs.is_some() || parsed.data.is_some() {
                return self.line_problem(
                    "an `await` line has `instance`, `await` and optional `timeout`, nothing else",
                );
            }
            return self.accept_await(&name, &state, parsed.timeout.as_deref());
        }
        // Refused before anything happens, even the instance's creation.
        let data = parsed.data.as_ref().unwrap_or(&serde_json::Value::Null);
        // A live instance may run a pinned version, whose events are its own.
        let machine = self.machine_of(&name);
        if let Some(event) = parsed.event.as_deref()
            && let Err(refusal) = crate::runtime::run::admission::admit_json(&machine, event, data)
        {
            return self.refuse_event(&name, event, &refusal);
        }
        let slot = match self.by_name.get(&*name) {
            Some(slot) => *slot,
            None => match self.create(&name, parsed.inputs.as_ref()) {
                Ok(slot) => slot,
                Err(NotCreated::Refused(message)) => return self.line_problem(&message),
                Err(NotCreated::HeldElsewhere) => match parsed.event.as_deref() {
                    Some(event) if parsed.inputs.is_none() => {
                        return self.queue_event(&name, event, data);
                    }
                    _ => {
                        return self.line_problem(&format!(
                            "instance `{}` exists, held by another host: a line for it carries \
                             an event, which is queued for that host, and no `inputs` (taken \
                             only by the line that creates an instance)",
                            &*name
                        ));
                    }
                },
            },
        };
        let Some(event) = parsed.event else {
            return;
        };
        let event = Event::named(
            &machine,
            &event,
            parsed.data.as_ref().map_or(Value::Null, Value::from_json),
            Origin::External,
        );
        let ticket = Some(self.line_number as u64);
        self.step_as(slot, Some(&name), |session| session.offer(event, ticket));
    }

    /// An event the line may not send: said on the output (`outcome: refused`, its reason),
    /// warned on stderr, and answered to the client the line came from.
    fn refuse_event(&mut self, instance: &str, event: &str, refusal: &str) {
        let report = EventReport {
            event: event.into(),
            outcome: crate::runtime::run::admission::EventOutcome::Refused,
            reason: Some(refusal.to_string().into()),
            ticket: Some(self.line_number as u64),
            waited: false,
        };
        let mut line = serde_json::json!({"instance": instance});
        if let (Some(object), serde_json::Value::Object(fields)) =
            (line.as_object_mut(), report.to_json())
        {
            object.extend(fields);
        }
        write_line(&mut self.output, &crate::base::secrets::mask_json(&line));
        match (self.line_origin, self.outcome_reply.is_some()) {
            (Some(origin), true) => {
                self.warn_line_skipped(refusal);
                if let Some(reply) = &mut self.outcome_reply {
                    reply(origin, &report);
                }
            }
            _ => self.line_problem(refusal),
        }
    }

    /// Starts a new instance with the inputs of its first line; with a shared store's inboxes,
    /// an instance recorded unfinished is another host's (`inbox`), whose events are queued.
    fn create(
        &mut self,
        name: &str,
        inputs: Option<&serde_json::Value>,
    ) -> Result<usize, NotCreated> {
        let run_id = format!("{}{name}", self.prefix);
        if self.finished.contains(name) {
            return Err(NotCreated::Refused(format!(
                "instance `{name}` has finished"
            )));
        }
        if name.contains('/') {
            // `/` separates a run from its child protocols' runs (`<run>/<invoke id>`).
            return Err(NotCreated::Refused(format!(
                "instance `{name}` not created: an instance name may not contain `/`, which \
                 names a run's child protocols"
            )));
        }
        if let Some(recording) = &self.recording
            && let Some(run) = recording
                .store
                .run_summary(&run_id)
                .map_err(|error| NotCreated::Refused(error.to_string()))?
        {
            return Err(match run.status {
                RunStatus::Finished => {
                    NotCreated::Refused(format!("instance `{name}` has finished"))
                }
                _ if self.inboxes.is_some() => NotCreated::HeldElsewhere,
                _ => {
                    NotCreated::Refused(format!("instance `{name}` exists but is not running here"))
                }
            });
        }
        if self.by_name.len() >= self.max_instances {
            return Err(NotCreated::Refused(format!(
                "instance `{name}` not created: {} instances are alive, the limit; raise it with \
                 --max-instances",
                self.max_instances
            )));
        }
        let supplied: Vec<(String, serde_json::Value)> = match inputs {
            None => Vec::new(),
            Some(serde_json::Value::Object(inputs)) => inputs
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            Some(other) => {
                return Err(NotCreated::Refused(format!(
                    "`inputs` must be an object, not {other}"
                )));
            }
        };
        let supplied = self
            .pinned
            .with_client_inputs(&supplied)
            .map_err(|message| format!("instance `{name}`: {message}"))?;
        let values = self
            .machine
            .bind_input_values(&supplied)
            .map_err(|errors| {
                let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("instance `{name}`: {}", messages.join("; "))
            })?;
        if let Some(recording) = &self.recording {
            self.pending.push(Write::CreateRun(NewRun {
                id: run_id,
                protocol_path: recording.protocol_path.clone(),
                protocol_hash: recording.protocol_hash.clone(),
                protocol_text: Some(recording.protocol_text.clone()),
                read_texts: recording.read_texts.clone(),
                inputs: self.machine.recorded_inputs(&values),
                started_unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
                grants: recording.grants.clone(),
                origin: recording.origin,
                holder: Some(recording.holder.clone()),
                forked_from: None,
            }));
        }
        let trace = self.begin_new_trace(name);
        let slot = self.add_member(name, Interpreter::new(self.machine.clone(), values));
        self.keep_trace(slot, trace);
        self.step(slot, |session| session.start());
        Ok(slot)
    }

    fn add_member(&mut self, name: &str, interpreter: Interpreter) -> usize {
        let slot = self.members.len();
        let sink = EffectSink::Shared(self.effects_sender.clone(), slot);
        self.members.push(Some(Box::new(Member {
            name: name.into(),
            interpreter: interpreter.with_limits(self.limits),
            state: {
                let mut state = DriverState::reporting_to(Some(sink));
                state.set_run_id(&format!("{}{name}", self.prefix));
                state
            },
            armed: None,
        })));
        self.by_name.insert(name.into(), slot);
        slot
    }

    /// Runs `body` on a session over the instance in `slot`, then parks it again: its output
    /// and writes join the batch, its next timer joins the heap, and an instance that finished,
    /// failed, or has nothing left to wait for after input ended leaves the fleet.
    fn step(&mut self, slot: usize, body: impl FnOnce(&mut Session) -> Result<(), RunError>) {
        self.step_as(slot, None, body);
    }

    /// `step`, with the instance's name as the line gave it (already in cache, unlike the
    /// member's own copy).
    fn step_as(
        &mut self,
        slot: usize,
        name: Option<&str>,
        body: impl FnOnce(&mut Session) -> Result<(), RunError>,
    ) {
        let Some(member) = self.members.get_mut(slot).and_then(Option::as_deref_mut) else {
            // An effect's message for an instance that has ended: nobody waits for it.
            return;
        };
        // Written only by a fleet with a store (`--store memory` keeps no telemetry).
        let mut lines = String::new();
        let mut observer = MemberObserver {
            name: name.unwrap_or(&member.name),
            output: &mut self.output,
            log_sink: self.log_sink.as_mut(),
            line_outcome: None,
            keeps_line_outcome: self.outcome_reply.is_some() || self.keep_outcome,
            telemetry: self.recording.is_some().then_some(&mut lines),
            entered: Vec::new(),
        };
        let mut checkpoint = self.recording.as_ref().map(|_| BatchCheckpoint {
            run: format!("{}{}", self.prefix, member.name),
            writes: &mut self.pending,
        });
        // A fleet without `--otlp` pays one test of `tracing` a step.
        let mut trace = self
            .tracing
            .as_mut()
            .and_then(|tracing| tracing.trace_of(slot));
        let mut traced;
        let told: &mut dyn Observer = match trace.as_deref_mut() {
            Some(trace) => {
                traced = crate::runtime::otlp::observer::TracedObserver {
                    inner: &mut observer,
                    trace,
                };
                &mut traced
            }
            None => &mut observer,
        };
        let mut session = Session::new(
            &mut member.interpreter,
            &mut member.state,
            self.mocks.clone(),
            told,
        );
        if let Some(checkpoint) = checkpoint.as_mut() {
            session = session.with_checkpoint(checkpoint);
        }
        let result = body(&mut session).and_then(|()| session.handle_queued());
        drop(session);
        let line_outcome = observer.line_outcome.take();
        let entered = std::mem::take(&mut observer.entered);
        if let Some(run) = checkpoint.map(|checkpoint| checkpoint.run) {
            // The instance's finish, when this step ends it (as the branches below do).
            let ended = match &result {
                Err(RunError::Interrupted { .. }) => None,
                Err(error) => Some(Some((error.to_string(), ERROR_EXIT_CODE))),
                Ok(()) if member.interpreter.outcome().is_some() && !member.state.has_running() => {
                    Some(None)
                }
                Ok(()) => None,
            };
            if let Some(error) = ended {
                telemetry::push_finish(&mut lines, &member.interpreter, entered, error);
            }
            // The spans open now, when they changed: a host that takes the run over after a
            // crash ends them `interrupted`.
            if let Some(open) =
                trace.and_then(crate::runtime::otlp::spans::RunTrace::take_open_spans)
            {
                tracing::push_open_spans(&mut lines, open);
            }
            // Committed with the steps it tells of, in the same batch.
            self.telemetry.add(slot, run, lines);
        }
        if let (Some(report), Some(origin), Some(reply)) = (
            line_outcome.as_deref(),
            self.line_origin,
            &mut self.outcome_reply,
        ) && report.ticket == Some(self.line_number as u64)
        {
            reply(origin, report);
        }
        if self.keep_outcome {
            self.kept_outcome = line_outcome;
        }
        if let Err(RunError::Interrupted { .. }) = result {
            // A signal stopped its step half-way: kept as its last commit left it, for the
            // next host, like every other instance the signal stops.
            self.park_for_good(slot, Stop::Park);
            return;
        }
        if let Err(error) = result {
            write_line(
                &mut self.output,
                &serde_json::json!({"instance": &*member.name, "error": error.to_string()}),
            );
            if self.recording.is_some() {
                self.pending.push(Write::FinishRun {
                    run: format!("{}{}", self.prefix, member.name),
                    finish: Finish {
                        final_state: None,
                        exit_code: ERROR_EXIT_CODE,
                        output: serde_json::Value::Null,
                        unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
                    },
                });
            }
            let masked = crate::base::secrets::mask(&error.to_string()).into_owned();
            self.end_trace(
                slot,
                SessionEnd::Finished { succeeded: false },
                &[("protocol_run.error", masked.into())],
                true,
            );
            self.remove(slot, true);
            return;
        }
        if let Some(outcome) = member.interpreter.outcome() {
            // It stays until the effects it left running end; the commit that records the last
            // of them finishes the run in the store.
            if member.state.has_running() {
                return;
            }
            let state = outcome
                .state_name(member.interpreter.machine())
                .map(|state| state.to_string());
            awaiting::note_finished(&mut self.awaiting, slot, state.as_deref());
            let mut finished = serde_json::json!({
                "instance": &*member.name,
                "finished": {
                    "state": state,
                    "exit_code": outcome.exit_code,
                    "output": outcome.output.to_json(),
                    "effects": member.state.effects_after_finish(),
                },
            });
            if let Some(failure) = &outcome.failure {
                finished["finished"]["error"] = failure.to_json();
            }
            // Deferred events the end of the run discarded, each said once more here.
            let discarded = member.state.discarded_at_finish();
            if !discarded.is_empty() {
                finished["finished"]["discarded"] = discarded.to_vec().into();
            }
            let exit_code = outcome.exit_code;
            write_line(&mut self.output, &finished);
            self.end_trace(
                slot,
                SessionEnd::Finished {
                    succeeded: exit_code == 0,
                },
                &[("protocol_run.exit_code", exit_code.into())],
                true,
            );
            self.remove(slot, true);
            return;
        }
        if self.input_ended && member.state.is_idle() {
            self.park_for_good(slot, Stop::Park);
            return;
        }
        // The heap holds an entry at or before the instance's earliest timer unless `armed`
        // was cleared (its entry popped) or the timers changed.
        let recheck = member.state.take_timers_changed() || member.armed.is_none();
        if recheck
            && let Some(next) = member.state.next_deadline()
            && member.armed.is_none_or(|armed| next < armed)
        {
            member.armed = Some(next);
            self.deadlines.push(Reverse((next, slot)));
        }
        if let Some(sink) = &mut self.pending_sink {
            let pending = Pending {
                running: member.state.has_running(),
                timers: member.state.next_deadline().is_some(),
            };
            sink(&member.name, pending);
        }
    }

    /// Takes an instance out of the fleet; `finished` keeps its name from being created again
    /// before the batch that finishes it is committed.
    fn remove(&mut self, slot: usize, finished: bool) {
        if let Some(member) = self.members[slot].take() {
            self.by_name.remove(&member.name);
            if finished {
                self.finished.insert(member.name);
            }
        }
    }

    /// The instance leaves this host for good, stopped as `how` says: parked for the next host
    /// (input ended and it has nothing left to wait for, or a signal), or cancelled.
    fn park_for_good(&mut self, slot: usize, how: Stop) {
        if let Some(member) = self.members[slot].as_deref()
            && self.recording.is_some()
        {
            let run = format!("{}{}", self.prefix, member.name);
            let writes = how.writes(&run, crate::base::clock::unix_milliseconds_now());
            self.pending.extend(writes);
            if how == Stop::Cancel {
                // Its telemetry ends with it, as a finished instance's does.
                let mut lines = String::new();
                let cancelled = (
                    "cancelled".to_string(),
                    crate::runtime::run::stop::CANCELLED_EXIT_CODE,
                );
                telemetry::push_finish(
                    &mut lines,
                    &member.interpreter,
                    Vec::new(),
                    Some(cancelled),
                );
                self.telemetry.add(slot, run, lines);
            }
        }
        match how {
            Stop::Park => self.end_trace(slot, SessionEnd::Stopped, &[], true),
            Stop::Cancel => self.end_trace(
                slot,
                SessionEnd::Finished { succeeded: false },
                &[
                    (
                        "protocol_run.exit_code",
                        crate::runtime::run::stop::CANCELLED_EXIT_CODE.into(),
                    ),
                    ("protocol_run.error", "cancelled".into()),
                ],
                true,
            ),
        }
        self.remove(slot, how == Stop::Cancel);
    }

    /// No more input: instances finish what their timers and effects still hold, then the
    /// host ends.
    fn end_input(&mut self) {
        self.input_ended = true;
        let idle: Vec<usize> = self
            .by_name
            .values()
            .copied()
            .filter(|slot| {
                self.members[*slot]
                    .as_deref()
                    .is_some_and(|member| member.state.is_idle())
            })
            .collect();
        for slot in idle {
            self.park_for_good(slot, Stop::Park);
        }
    }

    /// Fires every timer due by now, each instance's in order, with the steps they cause.
    pub fn fire_due_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((deadline, slot))) = self.deadlines.peek().copied()
            && deadline <= now
        {
            self.deadlines.pop();
            let Some(member) = self.members[slot].as_deref_mut() else {
                continue;
            };
            if member.armed == Some(deadline) {
                member.armed = None;
            }
            // An entry whose timer was cancelled fires nothing; `step` re-arms the next one.
            self.step(slot, |session| {
                while session.is_running()
                    && session.next_deadline().is_some_and(|next| next <= now)
                {
                    session.fire_due_timer();
                    session.handle_queued()?;
                }
                Ok(())
            });
        }
    }

    /// A message from a running effect of the instance in `slot`.
    fn deliver(&mut self, slot: usize, message: EffectMessage) {
        self.step(slot, |session| session.receive(message));
    }

    /// How many instances this host dropped because the store refused their writes.
    pub fn store_failures(&self) -> usize {
        self.store_failures
    }

    /// Commits the batch's writes, then writes its output lines: a step is reported only once
    /// it is durable. If the batch cannot be committed, each write is tried alone, and the
    /// instances whose writes still fail are reported and dropped from this host (their runs
    /// resume from their last committed step).
    pub fn commit(&mut self) {
        self.telemetry.append_to(&mut self.pending);
        if let Some(recording) = &mut self.recording
            && !self.pending.is_empty()
        {
            if let Err(error) = recording.store.commit_batch(&self.pending) {
                crate::runtime::runs::lease::end_if_lost(&error);
                let mut failed = HashSet::new();
                let mut errors = Vec::new();
                for write in &self.pending {
                    if failed.contains(write.run()) {
                        continue;
                    }
                    if let Err(error) = write.apply(&mut *recording.store) {
                        let name = write.run()[self.prefix.len()..].to_string();
                        errors.push(
                            serde_json::json!({"instance": name, "error": error.to_string()}),
                        );
                        failed.insert(write.run().to_string());
                    }
                }
                // Their steps of this batch were not all recorded: none of them is reported,
                // only why they stop here.
                let names: HashSet<&str> =
                    failed.iter().map(|run| &run[self.prefix.len()..]).collect();
                self.output = without_instances(&self.output, &names);
                for error in &errors {
                    write_line(&mut self.output, error);
                }
                self.store_failures += failed.len();
                for run in failed {
                    if let Some(slot) = self.by_name.get(&run[self.prefix.len()..]).copied() {
                        // It resumes from its last committed step, which lists what was open.
                        self.end_trace(slot, SessionEnd::Stopped, &[], false);
                        self.remove(slot, false);
                    }
                }
            }
            self.pending.clear();
        }
        self.finished.clear();
        if !self.output.is_empty() {
            (self.sink)(&self.output);
            self.output.clear();
        }
    }

    /// Stopped between steps: every live instance is parked to resume with the next host (a
    /// signal), or cancelled, its stop and finish committed in one batch.
    fn stop(&mut self, how: Stop) {
        let live: Vec<usize> = self.by_name.values().copied().collect();
        for slot in live {
            self.park_for_good(slot, how);
        }
        self.commit();
    }
}

/// Why a line did not create its instance.
enum NotCreated {
    /// Said to the line's sender.
    Refused(String),
    /// An unfinished run of another host (with the inboxes of a shared store): the line's
    /// event goes to its inbox.
    HeldElsewhere,
}

impl From<String> for NotCreated {
    fn from(message: String) -> NotCreated {
        NotCreated::Refused(message)
    }
}

/// Resolves at `deadline`; never without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// An input line as `serve` reads it; the strings borrow from the line when they can.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeLine<'a> {
    #[serde(borrow)]
    instance: Option<LineText<'a>>,
    inputs: Option<serde_json::Value>,
    #[serde(borrow)]
    event: Option<LineText<'a>>,
    data: Option<serde_json::Value>,
    /// `await`: a state the input waits for, and its `timeout` (a duration such as "30s").
    #[serde(rename = "await", borrow)]
    await_state: Option<LineText<'a>>,
    #[serde(borrow)]
    timeout: Option<LineText<'a>>,
}

/// A string of an input line, borrowed unless it has escapes. (Serde borrows a `Cow` only as
/// a field's own type, not inside an `Option`: this newtype gives it that position.)
#[derive(serde::Deserialize)]
struct LineText<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

impl std::ops::Deref for LineText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// `output`'s lines but those of the instances `names`.
fn without_instances(output: &[u8], names: &HashSet<&str>) -> Vec<u8> {
    let mut kept = Vec::with_capacity(output.len());
    for line in output.split_inclusive(|byte| *byte == b'\n') {
        let instance = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|value| value["instance"].as_str().map(str::to_owned));
        if !instance.is_some_and(|instance| names.contains(instance.as_str())) {
            kept.extend_from_slice(line);
        }
    }
    kept
}

/// One output line, its secrets masked: every client of the host sees it.
fn write_line(output: &mut Vec<u8>, value: &serde_json::Value) {
    // Writing JSON into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *output, &*crate::base::secrets::mask_json(value));
    output.push(b'\n');
}

/// Hands each step to the batch being built.
struct BatchCheckpoint<'p> {
    run: String,
    writes: &'p mut Vec<Write>,
}

impl Checkpoint for BatchCheckpoint<'_> {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        self.writes.push(Write::step(self.run.clone(), step));
        Ok(())
    }
}

/// Tags everything an instance says with its id: directives and state changes into the batch's
/// output, logs on stderr, all as JSON lines.
struct MemberObserver<'o> {
    name: &'o str,
    output: &'o mut Vec<u8>,
    log_sink: Option<&'o mut LogSink>,
    /// The outcome of the event the line being handled sent, once its step reported it, kept
    /// only for a fleet that answers it (`keeps_line_outcome`).
    line_outcome: Option<Box<EventReport>>,
    keeps_line_outcome: bool,
    /// The entries `logs` and `stats` read (`read_by_logs_or_stats`), for the store to commit
    /// with the steps they tell of; `None` for a fleet that records nothing.
    telemetry: Option<&'o mut String>,
    /// The states entered since the last `start`, `resume` or `step` entry, which says them
    /// (kept only with `telemetry`).
    entered: Vec<String>,
}

impl MemberObserver<'_> {
    /// Adds an entry to the instance's telemetry, if the fleet keeps it; a `start`, `resume`,
    /// `step` or `finish` says the states entered since the last one.
    fn keep(&mut self, time: &str, kind: &str, mut fields: serde_json::Value) {
        let Some(telemetry) = self.telemetry.as_deref_mut() else {
            return;
        };
        if matches!(kind, "start" | "resume" | "step" | "finish") {
            fields["entered"] = std::mem::take(&mut self.entered).into();
        }
        push_stored_entry(telemetry, time, kind, fields);
    }
}

impl Observer for MemberObserver<'_> {
    fn log(&mut self, record: &LogRecord, time: &str) {
        let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
        let fields: serde_json::Map<String, serde_json::Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        let mut line = serde_json::json!({
            "instance": self.name,
            "time": time,
            "level": format!("{:?}", record.level).to_lowercase(),
            "message": record.message,
            "tags": tags,
            "fields": fields,
        });
        if let Some(from) = &record.from {
            line["from"] = (**from).into();
        }
        let masked = crate::base::secrets::mask_json(&line);
        eprintln!("{masked}");
        if let Some(sink) = self.log_sink.as_mut() {
            sink(&masked);
        }
        if self.telemetry.is_some()
            && let serde_json::Value::Object(mut fields) = line
        {
            // The entry is the line without what the store's row says (the run) or the entry
            // leads with (its time).
            fields.shift_remove("instance");
            fields.shift_remove("time");
            self.keep(time, "log", serde_json::Value::Object(fields));
        }
    }

    fn directive(&mut self, directive: &Directive) {
        let mut line = serde_json::Map::new();
        line.insert("instance".into(), self.name.into());
        if let serde_json::Value::Object(fields) = directive.to_json() {
            line.extend(fields);
        }
        write_line(self.output, &serde_json::Value::Object(line));
    }

    fn input_error(&mut self, error: &InputLineError) {
        eprintln!(
            "warning: instance `{}`: {}; event skipped",
            self.name,
            crate::base::secrets::mask(&error.message)
        );
    }

    /// An outcome without a step of its own (a deferred event the end of the run discarded):
    /// a line of its own.
    fn event_outcome(&mut self, _time: &str, report: &EventReport) {
        let mut line = serde_json::json!({"instance": self.name});
        if let (Some(object), serde_json::Value::Object(fields)) =
            (line.as_object_mut(), report.to_json())
        {
            object.extend(fields);
        }
        write_line(self.output, &crate::base::secrets::mask_json(&line));
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        if self.telemetry.is_some() && read_by_logs_or_stats(kind) {
            self.keep(time, kind, fields.clone());
        }
        let line = match kind {
            "start" => serde_json::json!({
                "instance": self.name,
                "started": true,
                "configuration": fields["configuration"],
            }),
            "resume" => serde_json::json!({
                "instance": self.name,
                "resumed": fields["step"],
                "configuration": fields["configuration"],
            }),
            _ => return,
        };
        write_line(self.output, &line);
    }

    /// `{"instance", "event", "outcome"?, "reason"?, "configuration"}`, written straight
    /// into the batch's output: an input event's outcome rides on the line of its step (none
    /// for an event taken at once).
    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &Event,
        interpreter: &Interpreter,
        outcome: Option<&EventReport>,
    ) {
        // Only a step that entered a state is kept: one that entered none left the states as
        // they were, so `stats` counts the same entries and the same time in each state from
        // the entry after it (the journal has every step). A host stepped by events that move
        // no state (most of `serve`'s) then writes no telemetry for them.
        if self.telemetry.is_some() && !self.entered.is_empty() {
            let fields = crate::runtime::run::driver::step_fields(event, interpreter, outcome);
            let time = crate::base::clock::format_rfc3339(unix_milliseconds);
            self.keep(&time, "step", fields);
        }
        if self.keeps_line_outcome
            && let Some(report) = outcome.filter(|report| report.ticket.is_some() && !report.waited)
        {
            self.line_outcome = Some(Box::new(report.clone()));
        }
        let output = &mut *self.output;
        output.extend_from_slice(b"{\"instance\":");
        let _ = serde_json::to_writer(&mut *output, self.name);
        output.extend_from_slice(b",\"event\":");
        let _ = serde_json::to_writer(&mut *output, &*event.name);
        // Taken at once is what a step line says without an `outcome` (the common case costs
        // no bytes); every other outcome is named.
        if let Some(report) = outcome.filter(|report| {
            report.outcome != crate::runtime::run::admission::EventOutcome::Taken || report.waited
        }) {
            output.extend_from_slice(b",\"outcome\":\"");
            output.extend_from_slice(report.outcome.name().as_bytes());
            output.push(b'"');
            if let Some(reason) = &report.reason {
                output.extend_from_slice(b",\"reason\":");
                let _ = serde_json::to_writer(&mut *output, &crate::base::secrets::mask(reason));
            }
            if report.waited {
                output.extend_from_slice(b",\"waited\":true");
            }
        }
        output.extend_from_slice(b",\"configuration\":[");
        let machine = interpreter.machine();
        let mut first = true;
        for state in interpreter.configuration() {
            let node = machine.state(state);
            if node.is_atomic() {
                if !first {
                    output.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut *output, &*node.id);
            }
        }
        output.extend_from_slice(b"]}\n");
    }

    fn state_entered(&mut self, state: &str) {
        if self.telemetry.is_some() {
            self.entered.push(state.to_string());
        }
    }

    /// Transitions are in the journal (durable hosts); no telemetry entry is built for them.
    fn transition(
        &mut self,
        _now: &dyn Fn() -> u64,
        _machine: &Machine,
        _transition: crate::pipeline::compile::machine::TransitionId,
    ) {
    }
}
