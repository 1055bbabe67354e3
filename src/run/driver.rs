//! The driver: external queue, timers on real or virtual (tokio paused) time, JSON-lines input.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Interpreter;
use super::algorithm::{Outcome, RunError};
use super::event::{Event, Origin};
use crate::actions::{Directive, Host, LogRecord, SendRequest};
use crate::clock;
use crate::compile::machine::Machine;
use crate::effects::mock::Mocks;
use crate::effects::{EffectRequest, run_effect, run_with_plan};
use crate::run::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::run::snapshot::{InFlightEffect, PendingTimer};
use crate::value::Value;

/// Input lines as they arrive: a line, or the problem that made one unreadable (too long), to
/// be reported with its number and skipped.
pub type InputLines = mpsc::Receiver<Result<String, String>>;

/// The longest event line read by default (1 MiB): a longer one is reported and skipped, so
/// one huge line cannot exhaust memory.
pub const MAX_EVENT_LINE_BYTES: usize = 1 << 20;

/// Where external events come from.
pub enum EventSource {
    /// No external events.
    None,
    /// JSON lines known in advance (a file's content), delivered in order.
    Lines(String),
    /// JSON lines read from stdin as they arrive.
    Stdin,
}

/// How the driver keeps time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeMode {
    #[default]
    Real,
    /// Delays elapse instantly, in order, on tokio's paused clock.
    Virtual,
}

/// How the driver runs: its clock, any scripted effect outcomes, and its input limit.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    pub time_mode: TimeMode,
    pub mocks: Mocks,
    /// The longest event line read from stdin.
    pub max_event_bytes: usize,
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            time_mode: TimeMode::default(),
            mocks: Mocks::default(),
            max_event_bytes: MAX_EVENT_LINE_BYTES,
        }
    }
}

/// How a driven run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Set when a top-level final state was reached.
    pub outcome: Option<Outcome>,
    /// Active atomic states when the run stopped.
    pub active_states: Vec<String>,
    pub context: serde_json::Value,
    /// SIGINT or SIGTERM stopped the run between macrosteps.
    pub stopped_by_signal: bool,
    /// Effects that were still running when the run reached its final state, each awaited:
    /// `{"id", "invocation", "outcome", "event", ...}` (`outcome`: `completed` or `failed`).
    pub effects: Vec<serde_json::Value>,
}

impl RunReport {
    /// Whether an effect awaited after the final state failed.
    pub fn an_effect_failed_after_finish(&self) -> bool {
        self.effects
            .iter()
            .any(|effect| effect["outcome"] != "completed")
    }
}

/// A problem with one input line; the line is skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct InputLineError {
    pub line: usize,
    pub message: String,
}

/// Receives log records and input problems as the run goes.
pub trait Observer {
    fn log(&mut self, record: &LogRecord, time: &str);
    /// A directive for the driving program.
    fn directive(&mut self, directive: &Directive);
    fn input_error(&mut self, error: &InputLineError);
    /// A telemetry entry: `start`, `step` (after each event), `effect` (an outcome arrived) or
    /// `finish`, with its fields.
    fn record(&mut self, _time: &str, _kind: &str, _fields: serde_json::Value) {}
    /// After each external event's macrostep; by default the `step` telemetry entry. An
    /// observer that keeps no telemetry overrides it to skip building the entry.
    fn step(&mut self, unix_milliseconds: u64, event: &Event, interpreter: &Interpreter) {
        let fields = serde_json::json!({
            "event": &*event.name,
            "data": event.data.to_json(),
            "configuration": interpreter.active_leaves(),
        });
        self.record(&clock::format_rfc3339(unix_milliseconds), "step", fields);
    }
    /// A transition was taken; by default the `transition` telemetry entry, stamped with
    /// `now()` (Unix milliseconds on the run's clock).
    fn transition(
        &mut self,
        now: &dyn Fn() -> u64,
        machine: &Machine,
        transition: crate::compile::machine::TransitionId,
    ) {
        let node = machine.transition(transition);
        let targets: Vec<&str> = node
            .targets
            .iter()
            .map(|target| &*machine.state(*target).id)
            .collect();
        let fields = serde_json::json!({
            "source": &*machine.state(node.source).id,
            "targets": targets,
            "at": node.pointer,
        });
        self.record(&clock::format_rfc3339(now()), "transition", fields);
    }
    /// A state was entered (coverage); most observers ignore it.
    fn state_entered(&mut self, _state: &str) {}
}

/// Prints through `tracing` (logs) and stderr (input problems).
pub struct TracingObserver {
    pub run_id: String,
}

impl Observer for TracingObserver {
    fn log(&mut self, record: &LogRecord, time: &str) {
        crate::output::emit(record, time, &self.run_id);
    }

    fn directive(&mut self, directive: &Directive) {
        // One whole line per directive, flushed at once: the driving program reads line by line.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", directive.to_json());
        let _ = stdout.flush();
    }

    fn input_error(&mut self, error: &InputLineError) {
        eprintln!(
            "warning: events line {}: {}; line skipped",
            error.line, error.message
        );
    }
}

/// Timers are ordered by deadline, then by the order they were set.
type TimerKey = (Instant, u64);

/// A delayed send waiting for its deadline: its id (for `cancel`) and the event.
type PendingSend = (Option<Arc<str>>, Event, u64);

/// What a running effect sends back: telemetry lines while it retries, then its outcome.
pub(crate) enum EffectMessage {
    Log(LogRecord),
    Directive(Directive),
    /// An effect's outcome, for its invocation; dropped if that invocation was cancelled.
    Outcome(u64, Event),
    /// A child protocol's outcome; dropped if the invoke was cancelled meanwhile.
    InvokeOutcome(Arc<str>, Event),
    /// An event a child protocol sent its parent (`send ... to: parent`), with its invoke id.
    ChildEvent(Arc<str>, Event),
    /// A durable parent's child committed a step.
    ChildStep(Arc<str>, Box<CheckpointStep>),
    /// An effect's retry plan begins another attempt.
    Progress(u64, crate::effects::PlanProgress),
}

/// Forwards a child protocol's logs and directives to its parent's driver; a directive says
/// which child it is from (`from`: the invoke ids down to it, `kid/grandkid`).
struct ChildObserver {
    parent: EffectSink,
    id: Arc<str>,
}

impl Observer for ChildObserver {
    fn log(&mut self, record: &LogRecord, _time: &str) {
        self.parent.send(EffectMessage::Log(record.clone()));
    }

    fn directive(&mut self, directive: &Directive) {
        let mut directive = directive.clone();
        directive.from = Some(match &directive.from {
            Some(below) => Arc::from(format!("{}/{below}", self.id)),
            None => self.id.clone(),
        });
        self.parent.send(EffectMessage::Directive(directive));
    }

    fn input_error(&mut self, _error: &InputLineError) {}
}

/// A child protocol's checkpoint: each of its steps goes to its parent, which records it with
/// its own (the child's snapshot inside the parent's).
struct ParentCheckpoint {
    parent: EffectSink,
    id: Arc<str>,
}

impl Checkpoint for ParentCheckpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        // A parent gone meanwhile has cancelled this child: nothing is left to record.
        self.parent
            .send(EffectMessage::ChildStep(self.id.clone(), Box::new(step)));
        Ok(())
    }
}

/// The event reporting how a child protocol ended: its output on `done.invoke.<id>` when it
/// reached a final state with exit code 0, otherwise `error.invoke.<id>` with a message.
fn invoke_outcome(
    parent: &Machine,
    request: &crate::actions::InvokeRequest,
    result: Result<RunReport, RunError>,
) -> Event {
    let failure = |message: String, report: Option<&RunReport>| {
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("id"), Value::String(request.id.clone()));
        data.insert(Arc::from("message"), Value::string(message));
        if let Some(outcome) = report.and_then(|report| report.outcome.as_ref()) {
            data.insert(Arc::from("exit_code"), Value::Int(outcome.exit_code.into()));
            data.insert(
                Arc::from("state"),
                Value::String(request.machine.state(outcome.final_state).id.clone()),
            );
            data.insert(Arc::from("output"), outcome.output.clone());
        }
        Event::of_type(parent, request.failed, Origin::Outcome)
            .with_data(Value::Map(Arc::new(data)))
    };
    match result {
        Ok(report) => match &report.outcome {
            Some(outcome) if outcome.exit_code == 0 => {
                Event::of_type(parent, request.done, Origin::Outcome)
                    .with_data(outcome.output.clone())
            }
            Some(outcome) => {
                let state = &request.machine.state(outcome.final_state).id;
                failure(
                    format!(
                        "the child protocol ended in `{state}` with exit code {}",
                        outcome.exit_code
                    ),
                    Some(&report),
                )
            }
            None => failure(
                format!(
                    "the child protocol stopped unfinished in {}",
                    report.active_states.join(", ")
                ),
                Some(&report),
            ),
        },
        Err(error) => failure(error.to_string(), None),
    }
}

/// Where running effects report: the session's own channel, or a host's channel shared by all
/// its instances, each message tagged with the instance it is for.
#[derive(Clone)]
pub(crate) enum EffectSink {
    Own(mpsc::UnboundedSender<EffectMessage>),
    Shared(mpsc::UnboundedSender<(usize, EffectMessage)>, usize),
}

impl EffectSink {
    /// Hands a message over; `false` when nobody listens any more (the run ended).
    fn send(&self, message: EffectMessage) -> bool {
        match self {
            EffectSink::Own(sender) => sender.send(message).is_ok(),
            EffectSink::Shared(sender, instance) => sender.send((*instance, message)).is_ok(),
        }
    }
}

/// What a driven instance keeps between its steps besides its interpreter: pending timers,
/// running effects, its clock and step count. A host of many instances keeps one per idle
/// instance, and no task or channel with it.
pub struct DriverState {
    /// Pending delayed sends, sorted by (deadline, sequence): a deque rather than a tree, so a
    /// `serve` host's idle instances with one timer each keep one small allocation apiece.
    timers: VecDeque<(TimerKey, PendingSend)>,
    sequence: u64,
    started_at: Instant,
    started_unix_milliseconds: u64,
    /// Where running effects report their outcome events. A session's own channel is made when
    /// the first effect starts (its receiving end then waits in `new_receiver` for the session),
    /// since most instances of a `serve` host never start one.
    completions: Option<EffectSink>,
    /// Effects and child protocols started whose outcome has not arrived yet.
    running: super::running::Running,
    /// Outcomes of effects that ended after the run reached its final state (telemetry
    /// summaries with their `outcome`), for the `finished` line.
    after_finish: Vec<serde_json::Value>,
    /// The sequence number of the next committed step.
    step: u64,
    /// Set when a timer is added, cancelled or fired: a host that keeps its own index of
    /// deadlines reads the deque only then (reading it for every event costs a cache miss).
    timers_changed: bool,
}

impl Default for DriverState {
    fn default() -> DriverState {
        DriverState::new()
    }
}

impl DriverState {
    /// A state whose clock starts now; its effects report on a channel of its own.
    pub fn new() -> DriverState {
        DriverState::reporting_to(None)
    }

    /// A state whose effects report to `completions` (a host's shared channel), when given.
    pub(crate) fn reporting_to(completions: Option<EffectSink>) -> DriverState {
        DriverState {
            timers: VecDeque::new(),
            sequence: 0,
            started_at: Instant::now(),
            started_unix_milliseconds: clock::unix_milliseconds_now(),
            completions,
            running: super::running::Running::default(),
            after_finish: Vec::new(),
            step: 0,
            timers_changed: false,
        }
    }

    /// Unix milliseconds on this instance's clock (virtual under virtual time).
    fn now_milliseconds(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.started_at);
        self.started_unix_milliseconds + elapsed.as_millis() as u64
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.front().map(|((deadline, _), _)| *deadline)
    }

    /// Whether a timer was added, cancelled or fired since the last call.
    pub fn take_timers_changed(&mut self) -> bool {
        std::mem::take(&mut self.timers_changed)
    }

    /// Whether nothing can happen to the instance unless an event arrives: no timer pending,
    /// no effect or child protocol running.
    pub fn is_idle(&self) -> bool {
        self.timers.is_empty() && self.running.is_empty()
    }

    /// Whether effects or child protocols are running.
    pub fn has_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// What the effects that ended after the run's final state did (see `RunReport::effects`).
    pub fn effects_after_finish(&self) -> &[serde_json::Value] {
        &self.after_finish
    }
}

/// The host the algorithm talks to: external queue, timers, log output.
struct DriverHost<'a> {
    external_queue: VecDeque<Event>,
    state: &'a mut DriverState,
    observer: &'a mut dyn Observer,
    machine: Arc<Machine>,
    /// The receiving end of a channel made by `completions`, until the session takes it.
    new_receiver: Option<mpsc::UnboundedReceiver<EffectMessage>>,
    mocks: Arc<std::sync::Mutex<Mocks>>,
    /// Transitions taken in the current macrostep, for checkpoints (durable runs only).
    taken: Vec<String>,
    /// What the actions of the current macrostep did (logs, directives, effects started), for
    /// its journal entry (durable runs only).
    step_actions: Vec<serde_json::Value>,
    /// Whether steps are recorded for a checkpoint.
    recording: bool,
    /// For a child protocol: where `send ... to: parent` goes, and its invoke id.
    parent: Option<(EffectSink, Arc<str>)>,
    /// Something durable happened between macrosteps (a child's step, a retry plan's next
    /// attempt): the run commits a step for it.
    commit_due: bool,
}

impl DriverHost<'_> {
    /// An effect beyond the run's capabilities: logged, and answered with
    /// `error.permission.<id>` instead of running.
    fn refuse(&mut self, request: &EffectRequest, denied: &crate::capabilities::Denied) {
        let message = format!("{}: {denied}", request.id);
        let record = LogRecord {
            level: crate::model::action::LogLevel::Warn,
            message: message.clone(),
            tags: Arc::from([Arc::from("permission_denied")]),
            fields: vec![
                (Arc::from("id"), Value::String(request.id.clone())),
                (Arc::from("capability"), Value::string(denied.capability)),
                (Arc::from("subject"), Value::string(denied.subject.as_str())),
            ],
        };
        self.log(record);
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("id"), Value::String(request.id.clone()));
        data.insert(Arc::from("capability"), Value::string(denied.capability));
        data.insert(Arc::from("subject"), Value::string(denied.subject.as_str()));
        data.insert(Arc::from("message"), Value::string(message));
        let event = Event::named(
            &self.machine,
            &format!("error.permission.{}", request.id),
            Value::Map(Arc::new(data)),
            Origin::Outcome,
        );
        self.external_queue.push_back(event);
    }

    /// Runs a child protocol on a local task: a new one, or (`resumed`) one continuing from
    /// the step its parent's snapshot recorded, its timers re-armed by the given policy.
    fn spawn_child(
        &mut self,
        request: crate::actions::InvokeRequest,
        resumed: Option<(crate::run::snapshot::ChildSnapshot, TimerPolicy)>,
    ) {
        let parent = self.completions();
        let machine = self.machine.clone();
        let mocks = self.mocks.clone();
        let id = request.id.clone();
        let (inbox, link_inbox) = if request.takes_events {
            let (sender, receiver) = mpsc::unbounded_channel();
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        let queue = super::running::ChildQueue {
            inbox,
            autoforward: request.autoforward,
            inputs: request.inputs.iter().map(Value::to_json).collect(),
            last_step: resumed.as_ref().map(|(child, _)| child.clone()),
        };
        let link = ChildLink {
            parent: parent.clone(),
            id: id.clone(),
            inbox: link_inbox,
        };
        // A durable parent records its children's steps with its own.
        let recording = self.recording;
        // The child's driver holds borrowed state, so it runs on this thread (a local task).
        let handle = tokio::task::spawn_local(async move {
            let resume = resumed.as_ref().map(|(child, timers)| Resume {
                snapshot: (*child.snapshot).clone(),
                sequence: child.sequence,
                committed_unix_milliseconds: child.committed_unix_milliseconds,
                timers: *timers,
            });
            let restored = match &resume {
                Some(resume) => Interpreter::restore(
                    request.machine.clone(),
                    request.inputs.clone(),
                    &resume.snapshot,
                )
                .map_err(|error| RunError::Checkpoint {
                    message: format!("the child cannot be resumed: {error}"),
                }),
                None => Ok(Interpreter::new(
                    request.machine.clone(),
                    request.inputs.clone(),
                )),
            };
            let mut observer = ChildObserver {
                parent: parent.clone(),
                id: request.id.clone(),
            };
            let mut checkpoint = ParentCheckpoint {
                parent: parent.clone(),
                id: request.id.clone(),
            };
            let result = match restored {
                Ok(mut child) => {
                    Box::pin(drive_async(
                        &mut child,
                        EventSource::None,
                        false,
                        MAX_EVENT_LINE_BYTES,
                        mocks,
                        &mut observer,
                        Hosting {
                            checkpoint: recording.then_some(&mut checkpoint as &mut dyn Checkpoint),
                            resume: resume.as_ref(),
                            signals: false,
                            child: Some(link),
                        },
                    ))
                    .await
                }
                Err(error) => Err(error),
            };
            let event = invoke_outcome(&machine, &request, result);
            parent.send(EffectMessage::InvokeOutcome(request.id.clone(), event));
        });
        if self.state.running.start_child(id.clone(), handle, queue) {
            // The same invoke started again before its state exited: the old child is gone.
            let time = self.now_text();
            let fields = serde_json::json!({"id": &*id, "outcome": "superseded"});
            self.observer.record(&time, "invoke", fields);
        }
    }

    /// Starts an effect; a resumed one goes on from the retry plan's recorded `from`.
    fn start_effect_from(
        &mut self,
        mut request: EffectRequest,
        from: Option<crate::effects::PlanProgress>,
    ) {
        if let Err(denied) = self.machine.capabilities.admit(&mut request) {
            self.refuse(&request, &denied);
            return;
        }
        if let crate::effects::EffectKind::Process(process) = &mut request.kind {
            process.tag = Some(crate::effects::process::new_tag());
        }
        let now = self.now_milliseconds();
        let (invocation, mut cancellation) =
            self.state.running.start(request.clone(), now, from.clone());
        let started = serde_json::json!({
            "id": &*request.id,
            "kind": request.kind.name(),
            "invocation": invocation,
            "owner": &*self.machine.state(request.owner).id,
            "scope": match request.scope {
                crate::effects::EffectScope::State => "state",
                crate::effects::EffectScope::Run => "run",
            },
        });
        if self.recording {
            self.step_actions.push(serde_json::json!({
                "effect": &*request.id,
                "kind": request.kind.name(),
                "invocation": invocation,
                "owner": started["owner"],
            }));
        }
        let time = self.now_text();
        self.observer.record(&time, "effect_started", started);
        let completions = self.completions();
        let machine = self.machine.clone();
        let mocks = self.mocks.clone();
        tokio::spawn(async move {
            let telemetry = completions.clone();
            let mut report = move |record: LogRecord| {
                telemetry.send(EffectMessage::Log(record));
            };
            let attempts_cancellation = cancellation.clone();
            let attempt = move |attempt: EffectRequest| {
                // A poisoned lock only means another attempt panicked; the scripts are intact.
                let mocked = mocks
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .next(&attempt.id);
                let mut cancellation = attempts_cancellation.clone();
                async move {
                    match mocked {
                        Some(mock) => {
                            let (outcome, after) = mock.outcome(&attempt);
                            tokio::select! {
                                () = tokio::time::sleep(after) => outcome,
                                () = cancellation.cancelled() => outcome,
                            }
                        }
                        None => run_effect(&attempt, &mut cancellation).await,
                    }
                }
            };
            let progress_sink = completions.clone();
            let mut progress = move |progress: &crate::effects::PlanProgress| {
                progress_sink.send(EffectMessage::Progress(invocation, progress.clone()));
            };
            let outcome = run_with_plan(
                &request,
                attempt,
                &mut report,
                &mut progress,
                from.as_ref(),
                &mut cancellation,
            )
            .await;
            if cancellation.is_cancelled() {
                // Its end was recorded when it was cancelled; nobody waits for this outcome.
                return;
            }
            let mut event = outcome.into_event(&machine, &request.events);
            if let Value::Map(data) = &mut event.data {
                Arc::make_mut(data).insert(Arc::from("invocation"), Value::Int(invocation as i64));
            }
            completions.send(EffectMessage::Outcome(invocation, event));
        });
    }

    /// Unix milliseconds on this run's clock (virtual under virtual time).
    fn now_milliseconds(&self) -> u64 {
        self.state.now_milliseconds()
    }

    /// Delivers a `send ... to:` to the parent or to a running child. When nobody is there
    /// (no parent, the child not running or taking no events), `error.communication` is raised,
    /// as SCXML does for a target it cannot reach.
    fn send_to(&mut self, to: &str, event: Event) {
        let name = event.name.clone();
        let delivered = if to == crate::actions::send::PARENT {
            match &self.parent {
                Some((parent, id)) => parent.send(EffectMessage::ChildEvent(id.clone(), event)),
                None => false,
            }
        } else {
            self.state.running.send_to_child(to, event)
        };
        if delivered {
            return;
        }
        let message = if to == crate::actions::send::PARENT {
            "this run was not invoked by a parent".to_string()
        } else {
            format!("the child `{to}` is not running")
        };
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("to"), Value::string(to));
        data.insert(Arc::from("event"), Value::String(name));
        data.insert(Arc::from("message"), Value::string(message));
        let error = Event::named(
            &self.machine,
            "error.communication",
            Value::Map(Arc::new(data)),
            Origin::Platform,
        );
        self.external_queue.push_back(error);
    }

    fn now_text(&self) -> String {
        clock::format_rfc3339(self.now_milliseconds())
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.state.next_deadline()
    }

    /// Adds a pending send in deadline order (after those due at the same instant).
    fn add_timer(&mut self, deadline: Instant, pending: PendingSend) {
        if self.state.timers.is_empty() {
            // Room for exactly one: most instances wait on one timer, and a growing deque
            // would reserve four.
            self.state.timers.reserve_exact(1);
        }
        self.state.sequence += 1;
        self.state.timers_changed = true;
        let key = (deadline, self.state.sequence);
        let position = self.state.timers.partition_point(|(other, _)| *other < key);
        self.state.timers.insert(position, (key, pending));
    }

    /// The sender effects report to, making the channel on first use.
    fn completions(&mut self) -> EffectSink {
        if let Some(sink) = &self.state.completions {
            return sink.clone();
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let sink = EffectSink::Own(sender);
        self.state.completions = Some(sink.clone());
        self.new_receiver = Some(receiver);
        sink
    }

    /// Moves the earliest timer due by now onto the external queue. One at a time: handling
    /// it may cancel the others (a state's `after` timers are cancelled when it exits), and a
    /// cancelled timer must never be delivered.
    fn fire_due_timer(&mut self) {
        let now = Instant::now();
        if self.next_deadline().is_some_and(|deadline| deadline <= now)
            && let Some((_, (_, event, _))) = self.state.timers.pop_front()
        {
            self.state.timers_changed = true;
            self.external_queue.push_back(event);
        }
    }
}

impl Host for DriverHost<'_> {
    fn log(&mut self, record: LogRecord) {
        let time = self.now_text();
        if self.recording {
            let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
            self.step_actions
                .push(serde_json::json!({"log": record.message, "tags": tags}));
        }
        self.observer.log(&record, &time);
    }

    fn send(&mut self, request: SendRequest) {
        if let Some(to) = &request.to {
            return self.send_to(to, request.event);
        }
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
            return;
        }
        let deadline =
            Instant::now() + std::time::Duration::from_millis(request.delay_milliseconds);
        self.add_timer(
            deadline,
            (request.id, request.event, request.delay_milliseconds),
        );
    }

    fn cancel(&mut self, send_id: &str) {
        self.state.timers_changed = true;
        self.state
            .timers
            .retain(|(_, (id, _, _))| id.as_deref() != Some(send_id));
    }

    fn state_entered(&mut self, state: crate::compile::machine::StateId) {
        self.observer.state_entered(&self.machine.state(state).id);
    }

    fn transition_taken(&mut self, transition: crate::compile::machine::TransitionId) {
        if self.recording {
            self.taken
                .push(self.machine.transition(transition).pointer.clone());
        }
        let state = &*self.state;
        self.observer
            .transition(&|| state.now_milliseconds(), &self.machine, transition);
    }

    fn start_invoke(&mut self, request: crate::actions::InvokeRequest) {
        self.spawn_child(request, None);
    }

    fn cancel_invoke(&mut self, id: &str) {
        // Dropping the child's driver drops its running effects, whose processes are stopped.
        if self.state.running.stop_child(id) {
            let time = self.now_text();
            let fields = serde_json::json!({"id": id, "outcome": "cancelled"});
            self.observer.record(&time, "invoke", fields);
        }
    }

    fn cancel_effects_of(&mut self, state: crate::compile::machine::StateId) {
        if self.state.running.effects().is_empty() {
            return;
        }
        for effect in self.state.running.cancel_owned_by(state) {
            if effect.arrived {
                // Its outcome waits on the queue: it is taken off, never delivered.
                self.external_queue
                    .retain(|event| outcome_invocation(event) != Some(effect.invocation));
            }
            self.record_cancelled(&effect, "cancelled");
        }
    }

    fn emit(&mut self, directive: Directive) {
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"directive": directive.to_json()}));
        }
        self.observer.directive(&directive);
    }

    fn start_effect(&mut self, request: EffectRequest) {
        self.start_effect_from(request, None);
    }
}

/// Parses one JSON line `{"event": "name", "data": {...}}`.
pub fn parse_event_line(machine: &Machine, text: &str) -> Result<Event, String> {
    match parse_input_line(machine, text)? {
        InputLine::Event(event) => Ok(event),
        InputLine::Advance(_) => Err("expected an event, not `advance`".into()),
    }
}

/// One line of the event stream: an event, or (under virtual time) a move of the clock.
pub enum InputLine {
    Event(Event),
    /// `{"advance": "1m"}`: let this much virtual time pass, firing what falls due.
    Advance(std::time::Duration),
}

/// Parses one JSON line of the event stream.
pub fn parse_input_line(machine: &Machine, text: &str) -> Result<InputLine, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    let object = json
        .as_object()
        .ok_or("expected an object like {\"event\": \"name\"}")?;
    if let Some(advance) = object.get("advance") {
        if object.len() > 1 {
            return Err("an `advance` line has no other keys".into());
        }
        return advance
            .as_str()
            .and_then(crate::model::Duration::parse)
            .map(|duration| InputLine::Advance(duration.as_std()))
            .ok_or_else(|| format!("`advance` takes a duration such as \"30s\", not {advance}"));
    }
    if let Some(key) = object
        .keys()
        .find(|key| !matches!(key.as_str(), "event" | "data"))
    {
        return Err(format!(
            "unknown key `{key}`; an event line has `event` and optional `data`"
        ));
    }
    let name = object
        .get("event")
        .and_then(serde_json::Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or("missing `event` (a non-empty string)")?;
    if let Some(refusal) = super::event::refuse_platform_event(name) {
        return Err(refusal);
    }
    let data = object.get("data").map_or(Value::Null, Value::from_json);
    Ok(InputLine::Event(Event::named(
        machine,
        name,
        data,
        Origin::External,
    )))
}

/// Runs a started-or-not interpreter until it reaches a top-level final state, or until the
/// events are used up and no timer is pending.
pub fn drive(
    interpreter: &mut Interpreter,
    source: EventSource,
    options: DriveOptions,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    drive_durable(interpreter, source, options, observer, None, None)
}

/// `drive`, committing every macrostep to `checkpoint`, and continuing a restored run when
/// `resume` is given. SIGINT or SIGTERM stops it gracefully between macrosteps (the report says
/// so); a second signal ends the process at once.
pub fn drive_durable(
    interpreter: &mut Interpreter,
    source: EventSource,
    options: DriveOptions,
    observer: &mut dyn Observer,
    checkpoint: Option<&mut dyn Checkpoint>,
    resume: Option<&Resume>,
) -> Result<RunReport, RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .start_paused(options.time_mode == TimeMode::Virtual)
        .build()
        .expect("a current-thread tokio runtime with timers always builds");
    let mocks = Arc::new(std::sync::Mutex::new(options.mocks));
    let local = tokio::task::LocalSet::new();
    let virtual_time = options.time_mode == TimeMode::Virtual;
    runtime.block_on(local.run_until(drive_async(
        interpreter,
        source,
        virtual_time,
        options.max_event_bytes,
        mocks,
        observer,
        Hosting {
            checkpoint,
            resume,
            signals: true,
            child: None,
        },
    )))
}

/// How a driven run is hosted: whether it is durable, whether it stops on signals (top-level
/// runs only), and for a child protocol, its link to its parent.
struct Hosting<'checkpoint, 'resume> {
    checkpoint: Option<&'checkpoint mut dyn Checkpoint>,
    resume: Option<&'resume Resume>,
    signals: bool,
    child: Option<ChildLink>,
}

/// A child protocol's link to its parent: where its `send ... to: parent` goes, tagged with
/// its invoke id, and the queue its parent sends to (when it takes events).
struct ChildLink {
    parent: EffectSink,
    id: Arc<str>,
    inbox: Option<mpsc::UnboundedReceiver<Event>>,
}

/// SIGINT and SIGTERM, as one stream; `None` when they cannot be watched.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn watch() -> Option<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(StopSignals {
            interrupt: signal(SignalKind::interrupt()).ok()?,
            terminate: signal(SignalKind::terminate()).ok()?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }

    /// After the first signal, the next one gets the default action: the process ends at once.
    /// Everything committed stays committed.
    fn let_the_next_one_kill() {
        use nix::sys::signal::{SigHandler, Signal, signal};
        for stop in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: installing the default disposition runs no handler code of ours.
            let _ = unsafe { signal(stop, SigHandler::SigDfl) };
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn drive_async(
    interpreter: &mut Interpreter,
    source: EventSource,
    virtual_time: bool,
    max_event_bytes: usize,
    mocks: Arc<std::sync::Mutex<Mocks>>,
    observer: &mut dyn Observer,
    hosting: Hosting<'_, '_>,
) -> Result<RunReport, RunError> {
    let mut state = DriverState::new();
    let mut session = Session::new(interpreter, &mut state, mocks, observer);
    if let Some(checkpoint) = hosting.checkpoint {
        session = session.with_checkpoint(checkpoint);
    }
    if let Some(link) = hosting.child {
        session.host.parent = Some((link.parent, link.id));
        session.inbox = link.inbox;
    }
    let mut signals = if hosting.signals {
        StopSignals::watch()
    } else {
        None
    };
    let mut lines = match source {
        EventSource::None => None,
        EventSource::Lines(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let (sender, receiver) = mpsc::channel(lines.len().max(1));
            for line in lines {
                let _ = sender.try_send(Ok(line.to_string()));
            }
            // Dropping the sender ends the stream after the last line.
            Some(receiver)
        }
        EventSource::Stdin => Some(spawn_stdin_reader(max_event_bytes)),
    };
    let mut line_number = 0;
    match hosting.resume {
        Some(resume) => session.resume(resume)?,
        None => session.start()?,
    }
    let mut stopped_by_signal = false;
    loop {
        session.handle_queued()?;
        if !session.interpreter.is_running() {
            break;
        }
        if !session.interpreter.is_running() {
            break;
        }
        // On the virtual clock a pending timer is always "due": while the event stream is
        // open, time moves only on `advance` lines, so the run waits for the next event
        // instead of racing ahead of whoever writes them.
        session.timers_held = virtual_time && lines.is_some();
        let idle = session.host.next_deadline().is_none() && !session.host.state.has_running();
        // A child its parent sends to waits for its events until it is cancelled.
        if idle && lines.is_none() && session.inbox.is_none() {
            break;
        }
        let waited = match signals.as_mut() {
            Some(signals) => tokio::select! {
                waited = session.wait(None, lines.as_mut()) => waited,
                () = signals.next() => {
                    // Between macrosteps: the last one is committed, so this is the checkpoint.
                    StopSignals::let_the_next_one_kill();
                    stopped_by_signal = true;
                    break;
                }
            },
            None => session.wait(None, lines.as_mut()).await,
        };
        match waited {
            Waited::Line(Some(Err(message))) => {
                line_number += 1;
                session.host.observer.input_error(&InputLineError {
                    line: line_number,
                    message,
                });
            }
            Waited::Line(Some(Ok(line))) => {
                line_number += 1;
                match parse_input_line(&session.host.machine, &line) {
                    Ok(InputLine::Event(event)) => session.host.external_queue.push_back(event),
                    Ok(InputLine::Advance(duration)) if virtual_time => {
                        session.timers_held = false;
                        session.advance(duration).await?;
                    }
                    Ok(InputLine::Advance(_)) => {
                        session.host.observer.input_error(&InputLineError {
                            line: line_number,
                            message: "`advance` moves the virtual clock: run with --virtual-time"
                                .into(),
                        })
                    }
                    Err(message) if !line.trim().is_empty() => {
                        session.host.observer.input_error(&InputLineError {
                            line: line_number,
                            message,
                        })
                    }
                    Err(_) => {}
                }
            }
            Waited::Line(None) => {
                lines = None;
                session.timers_held = false;
            }
            Waited::Progress | Waited::Deadline => {}
        }
        session.commit_between_steps()?;
    }
    // The run reached its final state: what it started is let finish, each effect within its
    // own timeout, and recorded; a signal still stops it at once.
    while !stopped_by_signal && session.effects_running() {
        match signals.as_mut() {
            Some(signals) => tokio::select! {
                _ = session.wait(None, None) => {}
                () = signals.next() => {
                    StopSignals::let_the_next_one_kill();
                    stopped_by_signal = true;
                }
            },
            None => {
                session.wait(None, None).await;
            }
        }
        session.commit_between_steps()?;
    }
    let mut report = session.finish();
    report.stopped_by_signal = stopped_by_signal;
    Ok(report)
}

/// What one wait ended with.
pub enum Waited {
    /// An effect reported, or a timer fired.
    Progress,
    /// The deadline given to `wait` was reached.
    Deadline,
    /// An input line (or why it could not be read), or the end of input (`None`).
    Line(Option<Result<String, String>>),
}

/// A started machine with its queues, timers and running effects: the steps a driver (the CLI
/// run loop, a scenario) takes, one at a time, on the (possibly virtual) tokio clock.
pub struct Session<'a> {
    pub interpreter: &'a mut Interpreter,
    host: DriverHost<'a>,
    /// Effect outcomes, once an effect has started (`DriverHost::completions`).
    completed: Option<mpsc::UnboundedReceiver<EffectMessage>>,
    /// Timers do not fire while held (virtual time with an open event stream).
    timers_held: bool,
    /// Where each macrostep is committed (durable runs).
    checkpoint: Option<&'a mut dyn Checkpoint>,
    /// A child protocol's queue, which its parent sends to.
    inbox: Option<mpsc::UnboundedReceiver<Event>>,
}

impl<'a> Session<'a> {
    /// A session over an instance and what its driver keeps between steps (`DriverState`):
    /// a single run makes one of each; a host of many instances keeps them parked, and opens a
    /// session over one when something happens to it. The external queue starts empty.
    pub fn new(
        interpreter: &'a mut Interpreter,
        state: &'a mut DriverState,
        mocks: Arc<std::sync::Mutex<Mocks>>,
        observer: &'a mut dyn Observer,
    ) -> Session<'a> {
        let machine = interpreter.machine().clone();
        let host = DriverHost {
            external_queue: VecDeque::new(),
            state,
            observer,
            machine,
            new_receiver: None,
            mocks,
            taken: Vec::new(),
            step_actions: Vec::new(),
            recording: false,
            parent: None,
            commit_due: false,
        };
        Session {
            interpreter,
            host,
            completed: None,
            timers_held: false,
            checkpoint: None,
            inbox: None,
        }
    }

    /// Commits every macrostep to `checkpoint`, from the start (step 0) on.
    pub fn with_checkpoint(mut self, checkpoint: &'a mut dyn Checkpoint) -> Session<'a> {
        self.checkpoint = Some(checkpoint);
        self.host.recording = true;
        self
    }

    /// Commits the step just taken, with the state after it.
    fn commit(&mut self, event: Option<&Event>) -> Result<(), RunError> {
        self.host.commit_due = false;
        let taken = std::mem::take(&mut self.host.taken);
        let actions = std::mem::take(&mut self.host.step_actions);
        let Some(checkpoint) = self.checkpoint.as_deref_mut() else {
            return Ok(());
        };
        let mut snapshot = self.interpreter.snapshot();
        let now = Instant::now();
        let now_unix = self.host.now_milliseconds();
        snapshot.timers = self
            .host
            .state
            .timers
            .iter()
            .map(|((deadline, _), (id, event, delay))| PendingTimer {
                event: event.name.to_string(),
                send_id: id.as_deref().map(String::from),
                deadline_unix_milliseconds: now_unix
                    + deadline.saturating_duration_since(now).as_millis() as u64,
                delay_milliseconds: *delay,
                // `after` timers are named `after.<state>.<index>`, a reserved prefix.
                private: event.name.starts_with("after."),
                data: event.data.to_json(),
            })
            .collect();
        snapshot.effects = self
            .host
            .state
            .running
            .effects()
            .iter()
            .map(|effect| InFlightEffect {
                action: effect.request.id.to_string(),
                kind: effect.request.kind.name().to_string(),
                attempt: effect
                    .progress
                    .as_ref()
                    .map_or(1, |progress| progress.attempt),
                retriers: effect
                    .progress
                    .as_ref()
                    .map(|progress| progress.retriers.clone())
                    .unwrap_or_default(),
                request: serde_json::to_value(&effect.request).unwrap_or(serde_json::Value::Null),
                invocation: effect.invocation,
                started_unix_milliseconds: effect.started_unix_milliseconds,
            })
            .collect();
        snapshot.invocations = self.host.state.running.invocations();
        snapshot.children = self.host.state.running.child_snapshots();
        let step = CheckpointStep {
            sequence: self.host.state.step,
            event: event.map(|event| (event.name.to_string(), event.data.to_json())),
            transitions: taken,
            actions: serde_json::Value::Array(actions),
            snapshot,
            unix_milliseconds: now_unix,
        };
        self.host.state.step += 1;
        checkpoint
            .commit(step)
            .map_err(|message| RunError::Checkpoint { message })
    }

    /// Continues a restored run instead of starting it: re-arms its timers by `resume.timers`,
    /// and restarts (policy `retry`) or fails (policy `fail`) the effects that were running.
    /// Entry actions do not run again.
    pub fn resume(&mut self, resume: &Resume) -> Result<(), RunError> {
        self.host.state.step = resume.sequence + 1;
        let now = Instant::now();
        let now_unix = self.host.now_milliseconds();
        let machine = self.host.machine.clone();
        for timer in &resume.snapshot.timers {
            let wait = match resume.timers {
                TimerPolicy::Deadline => timer.deadline_unix_milliseconds.saturating_sub(now_unix),
                TimerPolicy::Remaining => timer
                    .deadline_unix_milliseconds
                    .saturating_sub(resume.committed_unix_milliseconds),
                TimerPolicy::Restart => timer.delay_milliseconds,
            };
            // A delayed send's event is external, as when it was sent; a timer's is the engine's.
            let origin = if timer.private {
                Origin::Platform
            } else {
                Origin::External
            };
            let event = Event::named(
                &machine,
                &timer.event,
                Value::from_json(&timer.data),
                origin,
            );
            self.host.add_timer(
                now + std::time::Duration::from_millis(wait),
                (
                    timer.send_id.as_deref().map(Arc::from),
                    event,
                    timer.delay_milliseconds,
                ),
            );
        }
        self.host
            .state
            .running
            .continue_from(resume.snapshot.invocations);
        for effect in &resume.snapshot.effects {
            let request: Option<EffectRequest> =
                serde_json::from_value(effect.request.clone()).ok();
            // Processes the interrupted effect left running are stopped first, so a retry never
            // runs beside them.
            if let Some(EffectRequest {
                kind: crate::effects::EffectKind::Process(process),
                ..
            }) = &request
                && let Some(tag) = &process.tag
                && crate::effects::process::stop_tagged_and_wait(tag, STOP_PATIENCE)
            {
                let time = self.host.now_text();
                let fields = serde_json::json!({
                    "id": effect.action,
                    "invocation": effect.invocation,
                    "outcome": "stopped_on_resume",
                });
                self.host.observer.record(&time, "effect", fields);
            }
            match request {
                Some(request) if request.on_interrupt == crate::effects::InterruptPolicy::Retry => {
                    // Its retry plan goes on from the attempt that was running.
                    let from = (effect.attempt > 1).then(|| crate::effects::PlanProgress {
                        attempt: effect.attempt,
                        retriers: effect.retriers.clone(),
                    });
                    self.host.start_effect_from(request, from);
                }
                request => {
                    let event = interrupted_failure(&machine, effect, request.as_ref(), now_unix);
                    if self.interpreter.is_running() {
                        self.host.external_queue.push_back(event);
                    } else {
                        self.host.receive_interrupted_after_finish(effect, &event);
                    }
                }
            }
        }
        // Children continue where their last committed step left them: no entry action again.
        for child in &resume.snapshot.children {
            let Some(invoke) = machine
                .states
                .iter()
                .flat_map(|state| &state.invokes)
                .find(|invoke| *invoke.id == *child.id)
            else {
                let time = self.host.now_text();
                let fields = serde_json::json!({"id": child.id, "outcome": "unknown_on_resume"});
                self.host.observer.record(&time, "invoke", fields);
                continue;
            };
            let request = crate::actions::InvokeRequest {
                id: invoke.id.clone(),
                machine: invoke.machine.clone(),
                inputs: child.inputs.iter().map(Value::from_json).collect(),
                done: invoke.done,
                failed: invoke.failed,
                autoforward: invoke.autoforward,
                takes_events: invoke.takes_events,
            };
            self.host
                .spawn_child(request, Some((child.clone(), resume.timers)));
        }
        let time = self.host.now_text();
        let fields = serde_json::json!({
            "protocol": machine.id,
            "configuration": self.interpreter.active_leaves(),
            "step": resume.sequence,
            "children": resume.snapshot.children.iter().map(|child| &child.id).collect::<Vec<_>>(),
        });
        self.host.observer.record(&time, "resume", fields);
        Ok(())
    }

    /// Enters the initial configuration.
    pub fn start(&mut self) -> Result<(), RunError> {
        self.interpreter.set_clock(self.host.now_milliseconds());
        self.interpreter.start(&mut self.host)?;
        self.after_step();
        let time = self.host.now_text();
        let start = serde_json::json!({
            "protocol": self.host.machine.id,
            "configuration": self.interpreter.active_leaves(),
        });
        self.host.observer.record(&time, "start", start);
        self.commit(None)
    }

    /// Queues an external event.
    pub fn send(&mut self, event: Event) {
        self.host.external_queue.push_back(event);
    }

    /// Whether the instance has not reached a top-level final state.
    pub fn is_running(&self) -> bool {
        self.interpreter.is_running()
    }

    /// Moves the earliest timer that is due onto the queue (one: handling it may cancel others).
    pub fn fire_due_timer(&mut self) {
        self.host.fire_due_timer();
    }

    /// Takes in a message a running effect sent to a host's shared channel.
    pub(crate) fn receive(&mut self, message: EffectMessage) -> Result<(), RunError> {
        let running = self.interpreter.is_running();
        self.host.receive(message, running);
        self.commit_between_steps()
    }

    /// Commits what happened between macrosteps that must be durable: a child's step, or after
    /// the final state what the effects that ended since did (the commit that leaves none
    /// running finishes the run in the store).
    pub fn commit_between_steps(&mut self) -> Result<(), RunError> {
        let after_finish = !self.interpreter.is_running() && !self.host.step_actions.is_empty();
        if !after_finish && !self.host.commit_due {
            return Ok(());
        }
        self.commit(None)
    }

    /// After a step: a run that reached its final state fires no more timers, and the outcomes
    /// waiting on its queue are recorded as ended after it.
    fn after_step(&mut self) {
        if self.interpreter.is_running() {
            return;
        }
        if !self.host.state.timers.is_empty() {
            self.host.state.timers.clear();
            self.host.state.timers_changed = true;
        }
        if !self.host.external_queue.is_empty() {
            self.host.outcomes_after_the_run();
        }
    }

    /// Parses and queues one input line; a bad line is reported and skipped.
    pub fn accept_line(&mut self, line_number: usize, line: &str) {
        accept_line(
            &self.host.machine.clone(),
            &mut self.host,
            line_number,
            line,
        );
    }

    /// Handles every queued external event, one macrostep each.
    pub fn handle_queued(&mut self) -> Result<(), RunError> {
        while self.interpreter.is_running() {
            let Some(event) = self.host.external_queue.pop_front() else {
                break;
            };
            self.handle_one(&event)?;
        }
        Ok(())
    }

    /// Sends `event` and handles the queue: when nothing waits before it, it is handled at
    /// once, without passing through the queue (which would allocate it, in a fresh session).
    pub fn send_and_handle(&mut self, event: Event) -> Result<(), RunError> {
        if self.host.external_queue.is_empty() && self.interpreter.is_running() {
            self.handle_one(&event)?;
        } else {
            self.send(event);
        }
        self.handle_queued()
    }

    /// One external event's macrostep, observed and committed.
    fn handle_one(&mut self, event: &Event) -> Result<(), RunError> {
        if event.origin == Origin::Outcome {
            self.host.delivered(event);
        }
        // Children with `autoforward` get the external events their parent takes.
        if event.origin == Origin::External && self.host.state.running.has_children() {
            self.host.state.running.autoforward(event);
        }
        let now = self.host.now_milliseconds();
        self.interpreter.set_clock(now);
        self.interpreter.handle(event, &mut self.host)?;
        self.after_step();
        self.host.observer.step(now, event, self.interpreter);
        self.commit(Some(event))
    }

    /// Sets what the run's clock reads now (Unix milliseconds): a scenario's fixed start, so
    /// `now()` and timestamps are the same on every run. Call before `start`.
    pub fn set_wall_clock(&mut self, unix_milliseconds: u64) {
        self.host.state.started_unix_milliseconds = unix_milliseconds;
        self.host.state.started_at = Instant::now();
    }

    /// Lets `duration` of (virtual) time pass, handling each timer that falls due, in order,
    /// with the macrosteps it causes.
    pub async fn advance(&mut self, duration: std::time::Duration) -> Result<(), RunError> {
        let target = Instant::now() + duration;
        loop {
            self.handle_queued()?;
            if !self.interpreter.is_running() {
                return Ok(());
            }
            let timer_due = self
                .next_deadline()
                .is_some_and(|deadline| deadline <= target);
            if timer_due || self.effects_running() {
                if let Waited::Deadline = self.wait(Some(target), None).await {
                    return self.handle_queued();
                }
            } else {
                tokio::time::sleep_until(target).await;
                return self.handle_queued();
            }
        }
    }

    /// Whether effects or child protocols are still running.
    pub fn effects_running(&self) -> bool {
        self.host.state.has_running()
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.host.next_deadline()
    }

    /// Waits for the next thing to happen: an effect's message, a due timer, `until`, or an input
    /// line. On the virtual clock, the wait jumps straight to the earliest of them.
    pub async fn wait(&mut self, until: Option<Instant>, input: Option<&mut InputLines>) -> Waited {
        let deadline = self.host.next_deadline();
        if self.completed.is_none() {
            self.completed = self.host.new_receiver.take();
        }
        let effects_pending = self.host.state.has_running();
        let timer = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let limit = async {
            match until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        let reading = input.is_some();
        let inbox_open = self.inbox.is_some();
        let from_parent = async {
            match self.inbox.as_mut() {
                Some(inbox) => inbox.recv().await,
                None => std::future::pending().await,
            }
        };
        let next_line = async {
            match input {
                Some(lines) => lines.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            // In a block: the branch's expression is evaluated even when the branch is off.
            Some(message) = async {
                match self.completed.as_mut() {
                    Some(completed) => completed.recv().await,
                    None => std::future::pending().await,
                }
            }, if effects_pending => {
                self.host.receive(message, self.interpreter.is_running());
                Waited::Progress
            }
            // Input before timers: on the virtual clock a timer is always ready, and input
            // must not starve behind it.
            line = next_line, if reading => Waited::Line(line),
            event = from_parent, if inbox_open => {
                match event {
                    Some(event) => {
                        // Event types are the sender's machine's: this one names them anew.
                        let event = Event::named(
                            &self.host.machine,
                            &event.name,
                            event.data,
                            Origin::External,
                        );
                        self.host.external_queue.push_back(event);
                    }
                    // The parent is gone: nothing more will come.
                    None => self.inbox = None,
                }
                Waited::Progress
            }
            () = timer, if !self.timers_held && deadline.is_some_and(|deadline| until.is_none_or(|until| deadline <= until)) => {
                self.host.fire_due_timer();
                Waited::Progress
            }
            () = limit, if until.is_some() => Waited::Deadline,
        }
    }

    /// Ends the session: records the finish and reports.
    pub fn finish(self) -> RunReport {
        let time = self.host.now_text();
        let machine = self.host.machine.clone();
        let outcome = self.interpreter.outcome().cloned();
        let finish = serde_json::json!({
            "configuration": self.interpreter.active_leaves(),
            "state": outcome.as_ref().map(|outcome| machine.state(outcome.final_state).id.to_string()),
            "exit_code": outcome.as_ref().map(|outcome| outcome.exit_code),
        });
        self.host.observer.record(&time, "finish", finish);
        RunReport {
            stopped_by_signal: false,
            effects: self.host.state.after_finish.clone(),
            outcome,
            active_states: self
                .interpreter
                .active_leaves()
                .into_iter()
                .map(String::from)
                .collect(),
            context: self.interpreter.context_json(),
        }
    }
}

impl DriverHost<'_> {
    /// Takes in what a running effect sent. An outcome is delivered while the run goes on;
    /// after its final state it is recorded for the `finished` line instead.
    fn receive(&mut self, message: EffectMessage, running: bool) {
        match message {
            EffectMessage::Log(record) => self.log(record),
            EffectMessage::Directive(directive) => self.observer.directive(&directive),
            EffectMessage::ChildEvent(id, event) => {
                // A cancelled child's events are dropped with it.
                if self.state.running.has_child(&id) {
                    // Event types are the child's machine's: the parent names them anew.
                    let mut event =
                        Event::named(&self.machine, &event.name, event.data, Origin::Child);
                    event.invoke_id = Some(id);
                    self.external_queue.push_back(event);
                }
            }
            EffectMessage::Progress(invocation, progress) => {
                // The first attempt is what the start recorded; later ones are news.
                let news = progress.attempt > 1;
                if self.state.running.progressed(invocation, progress) && news && self.recording {
                    self.commit_due = true;
                }
            }
            EffectMessage::ChildStep(id, step) => {
                let CheckpointStep {
                    sequence,
                    event,
                    transitions,
                    snapshot,
                    unix_milliseconds,
                    ..
                } = *step;
                if self
                    .state
                    .running
                    .child_stepped(&id, sequence, unix_milliseconds, snapshot)
                    && self.recording
                {
                    self.step_actions.push(serde_json::json!({
                        "child": &*id,
                        "step": sequence,
                        "event": event.map(|(name, _)| name),
                        "transitions": transitions,
                    }));
                    self.commit_due = true;
                }
            }
            EffectMessage::InvokeOutcome(id, event) => {
                // A cancelled invoke's outcome is dropped: its state is gone.
                if self.state.running.child_finished(&id) {
                    let time = self.now_text();
                    let fields = serde_json::json!({"id": &*id, "event": &*event.name});
                    self.observer.record(&time, "invoke", fields);
                    self.external_queue.push_back(event);
                }
            }
            EffectMessage::Outcome(invocation, event) => {
                // A cancelled invocation's outcome is never delivered: its end is recorded.
                if self.state.running.arrive(invocation).is_none() {
                    return;
                }
                if running {
                    // Still its owner's until handled: `delivered` records its end then.
                    self.external_queue.push_back(event);
                    return;
                }
                self.finished_after_the_run(invocation, &event);
            }
        }
    }

    /// An outcome taken off the external queue to be handled: the end of its invocation.
    fn delivered(&mut self, event: &Event) {
        let Some(invocation) = outcome_invocation(event) else {
            return;
        };
        if self.state.running.finish(invocation).is_none() {
            return;
        }
        let mut summary = effect_summary(event);
        summary["invocation"] = invocation.into();
        summary["outcome"] = outcome_name(event).into();
        let time = self.now_text();
        self.observer.record(&time, "effect", summary);
    }

    /// After the final state: the outcomes still queued are recorded as ended after the run.
    fn outcomes_after_the_run(&mut self) {
        for event in std::mem::take(&mut self.external_queue) {
            if let Some(invocation) = outcome_invocation(&event) {
                self.finished_after_the_run(invocation, &event);
            }
        }
    }

    /// An effect that ended after the run reached its final state: recorded, listed for the
    /// `finished` line, and a failure warned about.
    fn finished_after_the_run(&mut self, invocation: u64, event: &Event) {
        let Some(effect) = self.state.running.finish(invocation) else {
            return;
        };
        let succeeded = event.name.starts_with("done.");
        let mut summary = effect_summary(event);
        summary["invocation"] = invocation.into();
        summary["outcome"] = outcome_name(event).into();
        {
            summary["after_finish"] = true.into();
            let time = self.now_text();
            self.observer.record(&time, "effect", summary.clone());
            if self.recording {
                self.step_actions
                    .push(serde_json::json!({"effect_outcome": summary.clone()}));
            }
            if !succeeded {
                self.warn_failed_after_finish(&effect.request.id, event);
            }
            self.state.after_finish.push(summary);
        }
    }

    /// A resumed run that had reached its final state: an effect interrupted then is recorded
    /// as failed after the finish, not delivered.
    fn receive_interrupted_after_finish(&mut self, effect: &InFlightEffect, event: &Event) {
        let mut summary = effect_summary(event);
        summary["invocation"] = effect.invocation.into();
        summary["outcome"] = "interrupted".into();
        summary["after_finish"] = true.into();
        let time = self.now_text();
        self.observer.record(&time, "effect", summary.clone());
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"effect_outcome": summary.clone()}));
        }
        self.warn_failed_after_finish(&effect.action, event);
        self.state.after_finish.push(summary);
    }

    /// An effect that failed after the run's final state: the run's outcome stands, but the
    /// failure must be seen.
    fn warn_failed_after_finish(&mut self, id: &str, event: &Event) {
        let message = event
            .data
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("failed")
            .to_string();
        self.log(LogRecord {
            level: crate::model::action::LogLevel::Warn,
            message: format!("{id} failed after the run finished: {message}"),
            tags: Arc::from([Arc::from("effect_failed_after_finish")]),
            fields: vec![
                (Arc::from("id"), Value::string(id)),
                (Arc::from("event"), Value::String(event.name.clone())),
            ],
        });
    }

    /// Records that an effect ended without its outcome: `cancelled` (its owner exited) or
    /// `interrupted` (the run stopped).
    fn record_cancelled(&mut self, effect: &super::running::RunningEffect, outcome: &str) {
        let fields = serde_json::json!({
            "id": &*effect.request.id,
            "invocation": effect.invocation,
            "owner": &*self.machine.state(effect.request.owner).id,
            "outcome": outcome,
        });
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"effect_outcome": fields.clone()}));
        }
        let time = self.now_text();
        self.observer.record(&time, "effect", fields);
    }
}

/// How long a resume waits for an interrupted effect's leftover processes to die.
const STOP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// The failure event of an effect the engine stopped while it ran, with the fields any failure
/// of that effect has (`attempts`, `timed_out`, `elapsed_ms`, ...) and `interrupted: true`.
fn interrupted_failure(
    machine: &Machine,
    effect: &InFlightEffect,
    request: Option<&EffectRequest>,
    now_unix_milliseconds: u64,
) -> Event {
    let mut outcome = crate::effects::EffectOutcome::failure(
        &effect.action,
        "interrupted: the engine stopped while this action ran".into(),
    );
    let elapsed = now_unix_milliseconds.saturating_sub(effect.started_unix_milliseconds);
    let elapsed = if effect.started_unix_milliseconds == 0 {
        0
    } else {
        elapsed
    };
    for (key, value) in [
        ("attempts", Value::Int(effect.attempt.max(1).into())),
        ("elapsed_ms", Value::Int(elapsed as i64)),
        ("duration_ms", Value::Int(elapsed as i64)),
        ("invocation", Value::Int(effect.invocation as i64)),
        ("interrupted", Value::Bool(true)),
    ] {
        outcome.data.insert(Arc::from(key), value);
    }
    match request {
        Some(request) => outcome.into_event(machine, &request.events),
        None => Event::named(
            machine,
            &format!("error.exec.{}", effect.action),
            Value::Map(Arc::new(outcome.data)),
            Origin::Outcome,
        ),
    }
}

/// The invocation an effect's outcome event reports, if it is one.
fn outcome_invocation(event: &Event) -> Option<u64> {
    if event.origin != Origin::Outcome {
        return None;
    }
    match event.data.get("invocation") {
        Some(Value::Int(invocation)) => u64::try_from(*invocation).ok(),
        _ => None,
    }
}

/// How an outcome event ended its invocation, as telemetry names it.
fn outcome_name(event: &Event) -> &'static str {
    if event.name.starts_with("done.") {
        "completed"
    } else {
        "failed"
    }
}

/// The telemetry of an effect outcome: which action, how it ended, how long it took.
fn effect_summary(event: &Event) -> serde_json::Value {
    let field = |name: &str| {
        event
            .data
            .get(name)
            .map_or(serde_json::Value::Null, Value::to_json)
    };
    serde_json::json!({
        "id": field("id"),
        "event": &*event.name,
        "succeeded": event.name.starts_with("done."),
        "timed_out": field("timed_out"),
        "exit_code": field("exit_code"),
        "duration_ms": field("duration_ms"),
    })
}

fn accept_line(machine: &Machine, host: &mut DriverHost, line_number: usize, line: &str) {
    if line.trim().is_empty() {
        return;
    }
    match parse_event_line(machine, line) {
        Ok(event) => host.external_queue.push_back(event),
        Err(message) => host.observer.input_error(&InputLineError {
            line: line_number,
            message,
        }),
    }
}

/// Reads stdin lines on a plain thread (stdin is blocking) and hands them to the run loop. A
/// full channel makes the thread wait: a fast writer is slowed down, not buffered without end.
pub(crate) fn spawn_stdin_reader(max_line_bytes: usize) -> InputLines {
    let (sender, receiver) = mpsc::channel(1024);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            let Some(read) = read_limited_line(&mut input, max_line_bytes, &mut line) else {
                break;
            };
            let line = read.and_then(|()| {
                String::from_utf8(line).map_err(|_| "the line is not UTF-8".to_string())
            });
            if sender.blocking_send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Input lines in batches: as many as were read without waiting (at most 1,024), so a host
/// pays one hand-over per batch rather than per line.
pub type InputBatches = mpsc::Receiver<LineBatch>;

/// Input lines handed over together: their bytes end to end, and where each one ends (or why
/// it was dropped). One buffer per batch, not one allocation per line.
#[derive(Debug, Default)]
pub struct LineBatch {
    bytes: Vec<u8>,
    ends: Vec<Result<usize, String>>,
}

impl LineBatch {
    /// A batch of one line.
    pub fn of_line(line: &str) -> LineBatch {
        std::iter::once(line).collect()
    }

    /// Adds a line (without its newline).
    pub fn push(&mut self, line: &str) {
        self.bytes.extend_from_slice(line.as_bytes());
        self.ends.push(Ok(self.bytes.len()));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each line, or why it was dropped (too long, not UTF-8), in order.
    pub fn lines(&self) -> impl Iterator<Item = Result<&str, String>> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |end| {
            let end = end.as_ref().map_err(String::clone)?;
            let line = &self.bytes[start..*end];
            start = *end;
            std::str::from_utf8(line).map_err(|_| "the line is not UTF-8".to_string())
        })
    }
}

impl<'a> FromIterator<&'a str> for LineBatch {
    fn from_iter<T: IntoIterator<Item = &'a str>>(lines: T) -> LineBatch {
        let mut batch = LineBatch::default();
        lines.into_iter().for_each(|line| batch.push(line));
        batch
    }
}

/// Reads stdin on a plain thread like `spawn_stdin_reader`, handing lines over in batches: a
/// batch is sent when the read buffer is used up (the next line would wait for the writer) or
/// full.
pub(crate) fn spawn_stdin_batches(max_line_bytes: usize) -> InputBatches {
    const BATCH_LINES: usize = 1024;
    let (sender, receiver) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
        let mut batch = LineBatch::default();
        while let Some(read) = read_limited_line(&mut input, max_line_bytes, &mut batch.bytes) {
            batch.ends.push(read.map(|()| batch.bytes.len()));
            if (batch.len() >= BATCH_LINES || input.buffer().is_empty())
                && sender.blocking_send(std::mem::take(&mut batch)).is_err()
            {
                return;
            }
        }
        if !batch.is_empty() {
            let _ = sender.blocking_send(batch);
        }
    });
    receiver
}

/// Appends the next line, without its newline, to `line`; a line longer than `limit` bytes is
/// read to its end and dropped (`line` as it was), and reported instead. `None` at the end of
/// input or on a read error.
pub(crate) fn read_limited_line(
    input: &mut impl BufRead,
    limit: usize,
    line: &mut Vec<u8>,
) -> Option<Result<(), String>> {
    let start = line.len();
    let mut length = 0usize;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if buffer.is_empty() {
            if length == 0 {
                return None;
            }
            break;
        }
        let (chunk, newline) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(position) => (&buffer[..position], true),
            None => (buffer, false),
        };
        length += chunk.len();
        if length <= limit {
            line.extend_from_slice(chunk);
        }
        let consumed = chunk.len() + usize::from(newline);
        input.consume(consumed);
        if newline {
            break;
        }
    }
    if length > limit {
        line.truncate(start);
        return Some(Err(format!(
            "the line is {length} bytes, longer than the limit of {limit} bytes; raise it with \
             --max-event-bytes"
        )));
    }
    Some(Ok(()))
}
