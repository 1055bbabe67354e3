//! Many instances of one protocol on one scheduler: parked between steps, their timers in one heap, their effects reporting on one channel, their steps committed in batches.
//!
//! This file holds the fleet's types, its builder and `run`, the loop that drives it. Its
//! pipeline, in order: `lines` takes an input line (parses it, refuses it or its event, creates
//! the instance it names); `steps` steps a member over a session (for a line's event, a timer or
//! an effect's message), with `observer` turning what the instance says into output lines and
//! telemetry; `commit` commits the batch those steps built and writes its output, and takes
//! instances out of the fleet. Beside it: `awaiting` (`await` lines), `inbox` (durable inboxes
//! shared with other hosts), `takeover` (runs of hosts that died), `versions` (pinned protocol
//! versions), `telemetry` and `tracing` (what a step records for `logs`/`stats` and `--otlp`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::effects::mock::Mocks;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;
use crate::runtime::run::admission::EventReport;
use crate::runtime::run::driver::{DriverState, EffectMessage, InputBatches};
use crate::runtime::run::input::LineOrigin;
use crate::runtime::run::stop::Stop;
use crate::store::{Store, Write};

mod awaiting;
mod commit;
mod inbox;
mod lines;
mod observer;
mod steps;
mod takeover;
mod telemetry;
mod tracing;
mod versions;

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

    /// Answers each bad line that came from a socket client to that client too.
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

    /// How many instances this host dropped because the store refused their writes.
    pub fn store_failures(&self) -> usize {
        self.store_failures
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
}

/// Resolves at `deadline`; never without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
