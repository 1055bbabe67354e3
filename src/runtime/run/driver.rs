//! Driving a run: its options and report, the observer of what it does, and the loop that feeds it input, timers and signals.

use super::Interpreter;
use super::algorithm::{Outcome, RunError};
use crate::base::clock;
use crate::base::durable::{Checkpoint, Resume};
use crate::base::event::Event;
use crate::effects::mock::Mocks;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::admission::EventReport;
use std::io::Write;
use std::sync::Arc;
use tokio::sync::mpsc;

// What callers name through `run::driver`, wherever it now lives.
pub use super::host::DriverState;
pub(crate) use super::host::{EffectMessage, EffectSink};
pub use super::input::{
    InputBatches, InputLine, InputLineError, InputLines, LineBatch, MAX_EVENT_LINE_BYTES,
    parse_event_line, parse_input_line,
};
pub(crate) use super::input::{spawn_stdin_batches, spawn_stdin_reader};
pub use super::session::{Session, Waited};

/// Where external events come from.
pub enum EventSource {
    /// No external events.
    None,
    /// JSON lines known in advance (a file's content), delivered in order.
    Lines(String),
    /// JSON lines read from stdin as they arrive.
    Stdin,
    /// JSON lines read from a file, under the same per-line rules as stdin.
    File(std::fs::File),
    /// No lines: the events other processes queue in the durable run's inbox, waited for until
    /// the run finishes, is cancelled or is stopped (`--events inbox`: a driver the inspector
    /// starts).
    Inbox,
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
    /// A cancel request taken from the run's inbox stopped it between macrosteps: the front
    /// end records it cancelled (`runs::cancel::record_cancelled`).
    pub cancelled: Option<super::queued::CancelRequest>,
    /// Effects that were still running when the run reached its final state, each awaited:
    /// `{"id", "invocation", "outcome", "event", ...}` (`outcome`: `completed` or `failed`).
    pub effects: Vec<serde_json::Value>,
    /// Deferred events still waiting when the run ended, each reported `discarded`.
    pub discarded: Vec<serde_json::Value>,
}

impl RunReport {
    /// Whether an effect awaited after the final state failed.
    pub fn an_effect_failed_after_finish(&self) -> bool {
        self.effects
            .iter()
            .any(|effect| effect["outcome"] != "completed")
    }
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
    /// After each external event's macrostep, with what became of the event when it was
    /// input (taken, deferred, discarded: see `EventReport`); by default the `step` telemetry
    /// entry. An observer that keeps no telemetry overrides it to skip building the entry.
    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &Event,
        interpreter: &Interpreter,
        outcome: Option<&EventReport>,
    ) {
        let fields = step_fields(event, interpreter, outcome);
        self.record(&clock::format_rfc3339(unix_milliseconds), "step", fields);
    }
    /// A transition was taken; by default the `transition` telemetry entry, stamped with
    /// `now()` (Unix milliseconds on the run's clock).
    fn transition(
        &mut self,
        now: &dyn Fn() -> u64,
        machine: &Machine,
        transition: crate::pipeline::compile::machine::TransitionId,
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
    /// What became of an external event that had no macrostep of its own: refused at the door,
    /// or still deferred when the run ended; by default an `event` telemetry entry.
    fn event_outcome(&mut self, time: &str, report: &EventReport) {
        self.record(time, "event", report.to_json());
    }
    /// How an `await` line (`line`) ended; `run` tells its sender on stdout.
    fn awaited(
        &mut self,
        _line: usize,
        _awaited: &super::input::Await,
        _end: super::awaiting::AwaitEnd,
    ) {
    }
    /// A state was entered (coverage); most observers ignore it.
    fn state_entered(&mut self, _state: &str) {}
    /// A state was exited; most observers ignore it.
    fn state_exited(&mut self, _state: &str) {}
    /// Attempt `attempt` of the effect `invocation` begins (its first, or the next of its
    /// retry plan), with its timeout; most observers ignore it.
    fn effect_attempt(&mut self, _invocation: u64, _attempt: u32, _timeout_ms: Option<u64>) {}
    /// The exported trace the effect `invocation`'s process joins (`TRACEPARENT`); `None`
    /// when nothing is exported.
    fn effect_trace(&self, _invocation: u64) -> Option<crate::base::trace_context::EffectTrace> {
        None
    }
    /// The steps taken so far are committed (`Checkpoint::flush`): what the observer held back
    /// that tells of them may go out now. An observer that holds nothing back ignores it.
    fn release(&mut self) {}
    /// An effect was admitted and started, with its arguments (a scenario's `expect: effects:`);
    /// most observers ignore it.
    fn effect_started(&mut self, _request: &crate::effects::EffectRequest) {}
    /// The child protocol `id` of `machine`'s run started (an `invoke`, or a map's item
    /// `MAP[i]`); its end is the `invoke` entry `record` is told. Most observers ignore it.
    fn child_started(&mut self, _machine: &Machine, _id: &str) {}
    /// The trace child protocol `id` of this run joins, when this observer traces a run's
    /// children from the inside (`child_trace`): only an exported trace does, so that children
    /// pay nothing for it otherwise.
    fn child_trace_context(&self, _id: &str) -> Option<crate::base::trace_context::ChildTrace> {
        None
    }
    /// What child protocol `path` (`kid`, `kid/grandkid`, a map's `items[3]`) did inside: the
    /// trace of an observer with a `child_trace_context`; by default, the child's telemetry
    /// entries the timeline reads, recorded as `child` entries of this run (`child_entry`).
    fn child_trace(&mut self, path: &str, note: ChildNote) {
        if let ChildNote::Telemetry { time, kind, fields } = note {
            self.record(&time, "child", child_entry(path, &kind, fields));
        }
    }
    /// The telemetry recorded since the last call, as JSON lines, for the store to commit with
    /// the steps it tells of (`Checkpoint::telemetry`); `None` when there is none, or when the
    /// observer keeps no telemetry for a store.
    fn take_telemetry(&mut self) -> Option<String> {
        None
    }
}

/// What a child protocol did inside, told to its parent's observer (`Observer::child_trace`):
/// what the child's own observer was told.
#[derive(Debug, Clone)]
pub enum ChildNote {
    StateEntered(String),
    StateExited(String),
    /// A restored child's active states, already entered before this session.
    StatesRestored(Vec<String>),
    /// A telemetry entry of the kinds a trace reads: `effect_started`, `effect`,
    /// `map_started`, `map`, `invoke`.
    Record(String, serde_json::Value),
    Attempt {
        invocation: u64,
        attempt: u32,
        timeout_ms: Option<u64>,
    },
    /// The child started a child protocol of its own, an invoke of `owner` or a map's item.
    ChildStarted {
        id: String,
        owner: Option<String>,
    },
    /// A telemetry entry of the child the inspector's timeline reads
    /// (`telemetry_kinds::kept_of_a_child`), told whether or not a trace is exported: a child keeps
    /// no telemetry of its own, its parent keeps it (`Observer::child_trace`).
    Telemetry {
        time: String,
        kind: String,
        fields: serde_json::Value,
    },
}

/// The fields of the `child` telemetry entry its parent keeps for an entry of child protocol
/// `path`: `{"child": path, "entry": {"kind", ...fields}}`, the child's entry whole under
/// `entry`, so that nothing reading the parent's own entries (`logs`, `stats`) counts it.
pub fn child_entry(path: &str, kind: &str, fields: serde_json::Value) -> serde_json::Value {
    let mut entry = serde_json::Map::new();
    entry.insert("kind".into(), kind.into());
    if let serde_json::Value::Object(fields) = fields {
        entry.extend(fields);
    }
    serde_json::json!({"child": path, "entry": entry})
}

/// The state of `machine` that declares the invoke `id`; `None` for a map's item.
pub fn invoke_owner<'m>(machine: &'m Machine, id: &str) -> Option<&'m str> {
    machine
        .states
        .iter()
        .find(|state| state.invokes.iter().any(|invoke| *invoke.id == *id))
        .map(|state| &*state.id)
}

/// The `step` telemetry entry: the event, its data, the configuration reached, and the event's
/// outcome when it was input (`outcome`, `reason`, `waited`, `ticket`).
pub fn step_fields(
    event: &Event,
    interpreter: &Interpreter,
    outcome: Option<&EventReport>,
) -> serde_json::Value {
    let mut fields = serde_json::json!({
        "event": &*event.name,
        "data": event.data.to_json(),
        "configuration": interpreter.active_leaves(),
        "states": interpreter.active_states(),
    });
    if let Some(report) = outcome {
        fields["outcome"] = report.outcome.name().into();
        if let Some(reason) = &report.reason {
            fields["reason"] = reason.as_ref().into();
        }
        if report.waited {
            fields["waited"] = true.into();
        }
        if let Some(ticket) = report.ticket {
            fields["ticket"] = ticket.into();
        }
    }
    fields
}

/// The `finish` telemetry entry: the configuration the run ended in, its final state, exit
/// code and failure (`null` while it has not reached a final state).
pub fn finish_fields(interpreter: &Interpreter) -> serde_json::Value {
    let machine = interpreter.machine();
    let outcome = interpreter.outcome();
    let mut finish = serde_json::json!({
        "configuration": interpreter.active_leaves(),
        "states": interpreter.active_states(),
        "state": outcome.and_then(|outcome| outcome.state_name(machine)).map(|state| state.to_string()),
        "exit_code": outcome.map(|outcome| outcome.exit_code),
    });
    if let Some(failure) = outcome.and_then(|outcome| outcome.failure.as_ref()) {
        finish["error"] = failure.to_json();
    }
    finish
}

/// Prints through `tracing` (logs) and stderr (input problems).
pub struct TracingObserver {
    pub run_id: String,
}

impl Observer for TracingObserver {
    fn log(&mut self, record: &LogRecord, time: &str) {
        crate::runtime::output::emit(record, time, &self.run_id);
    }

    fn directive(&mut self, directive: &Directive) {
        // One whole line per directive, flushed at once: the driving program reads line by line.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "{}",
            crate::base::secrets::mask_json(&directive.to_json())
        );
        let _ = stdout.flush();
    }

    fn input_error(&mut self, error: &InputLineError) {
        eprintln!(
            "warning: events line {}: {}; line skipped",
            error.line,
            crate::base::text::escape_controls(&crate::base::secrets::mask(&error.message))
        );
    }
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
pub(super) struct Hosting<'checkpoint, 'resume> {
    pub(super) checkpoint: Option<&'checkpoint mut dyn Checkpoint>,
    pub(super) resume: Option<&'resume Resume>,
    pub(super) signals: bool,
    pub(super) child: Option<ChildLink>,
}

/// A child protocol's link to its parent: where its `send ... to: parent` goes, tagged with
/// its invoke id, and the queue its parent sends to (when it takes events).
pub(super) struct ChildLink {
    pub(super) parent: EffectSink,
    pub(super) id: Arc<str>,
    pub(super) inbox: Option<mpsc::UnboundedReceiver<Event>>,
    /// The live children of its tree, which its own children count in too.
    pub(super) tree: Arc<super::tree::TreeChildren>,
    /// The child's run id (`<run>/<path>`), when its parent's is known.
    pub(super) run_id: Option<Arc<str>>,
    /// Where its effects' invocations are numbered from (a child a redrive starts again).
    pub(super) first_invocation: u64,
}

/// SIGINT and SIGTERM, as one stream; `None` when they cannot be watched.
pub(super) struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn watch() -> Option<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        // A busy macrostep does not yield to the task that reads these: it sees the flag.
        crate::pipeline::compile::budget::watch_stop_signals();
        Some(StopSignals {
            interrupt: signal(SignalKind::interrupt()).ok()?,
            terminate: signal(SignalKind::terminate()).ok()?,
        })
    }

    pub(super) async fn next(&mut self) {
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
pub(super) async fn drive_async(
    interpreter: &mut Interpreter,
    source: EventSource,
    virtual_time: bool,
    max_event_bytes: usize,
    mocks: Arc<std::sync::Mutex<Mocks>>,
    observer: &mut dyn Observer,
    hosting: Hosting<'_, '_>,
) -> Result<RunReport, RunError> {
    let mut state = DriverState::new();
    if let Some(link) = &hosting.child {
        state.extras_mut().tree = Some(link.tree.clone());
        state.extras_mut().run_id = link.run_id.clone();
        state.running.continue_from(link.first_invocation);
    }
    if let Some(run) = hosting
        .checkpoint
        .as_ref()
        .and_then(|checkpoint| checkpoint.run_id())
    {
        state.set_run_id(run);
    }
    let mut session = Session::new(interpreter, &mut state, mocks, observer);
    if let Some(checkpoint) = hosting.checkpoint {
        session = session.with_checkpoint(checkpoint);
    }
    if let Some(link) = hosting.child {
        session.host.parent = Some((link.parent, link.id));
        session.inbox = link.inbox;
    }
    session.look_at_queued_events(virtual_time);
    let mut signals = if hosting.signals {
        StopSignals::watch()
    } else {
        None
    };
    // Waits for its inbox while it is idle, if it looks at one.
    let waits_for_inbox =
        matches!(source, EventSource::Inbox) && session.next_queued_look.is_some();
    let mut lines = match source {
        EventSource::None | EventSource::Inbox => None,
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
        EventSource::File(file) => Some(super::input::spawn_line_reader(
            Box::new(file),
            max_event_bytes,
        )),
    };
    let mut line_number = 0;
    // The steps of one read batch are committed together: up to this many waits answered at
    // once (a line ready, an effect's outcome, a timer due) before the held steps are flushed.
    let mut answered_at_once = 0;
    // Whatever ends the drive (the end of input, a signal, a failure), the steps taken are
    // committed and told before it returns.
    let driven: Result<bool, RunError> = async {
        let started = match hosting.resume {
            Some(resume) => session.resume(resume),
            None => session.start(),
        };
        // A signal that stopped a busy step: that step is not committed, the one before it stands.
        let mut stopped_by_signal = interrupted(started)?;
        while !stopped_by_signal {
            if interrupted(session.handle_queued())? {
                stopped_by_signal = true;
                break;
            }
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
            if idle && lines.is_none() && session.inbox.is_none() && !waits_for_inbox {
                // Before stopping for want of input, what was queued meanwhile is taken (a
                // cancel among it, too), on virtual time as well: a holder never leaves its
                // inbox unread.
                let looked = match session.look_at_queued() {
                    Err(RunError::Interrupted { .. }) => {
                        stopped_by_signal = true;
                        break;
                    }
                    other => other?,
                };
                session.commit_between_steps()?;
                let still_idle =
                    session.host.next_deadline().is_none() && !session.host.state.has_running();
                let more = looked == super::queued::Looked::Full;
                if session.cancel_request.is_some()
                    || !session.interpreter.is_running()
                    || (still_idle && !more)
                {
                    break;
                }
                continue;
            }
            // Whatever is ready without waiting joins the batch; before waiting, the batch is
            // committed and what tells of it released.
            let ready = match answered_at_once < MAX_BATCH_STEPS {
                true => ready_now(session.wait(None, lines.as_mut())),
                false => None,
            };
            answered_at_once += 1;
            let waited = match ready {
                Some(waited) => waited,
                None => {
                    session.flush()?;
                    answered_at_once = 0;
                    match signals.as_mut() {
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
                    }
                }
            };
            match waited {
                Waited::Line(Some(Err(message))) => {
                    line_number += 1;
                    let error = InputLineError::new(line_number, message, None);
                    session.host.observer.input_error(&error);
                }
                Waited::Line(Some(Ok(line))) => {
                    line_number += 1;
                    match parse_input_line(&session.host.machine, &line) {
                        Ok(InputLine::Event(event)) => {
                            // Its outcome goes to the observer, numbered by its line.
                            if interrupted(session.offer(event, Some(line_number as u64)))? {
                                stopped_by_signal = true;
                                break;
                            }
                        }
                        Ok(InputLine::Await(awaited)) => {
                            // An await may wait long: what came before it is committed and told.
                            session.flush()?;
                            let waiting = signals.as_mut();
                            let end = super::awaiting::await_state(
                                &mut session,
                                &awaited,
                                virtual_time,
                                waiting,
                            )
                            .await?;
                            session.host.observer.awaited(line_number, &awaited, end);
                            if end == super::awaiting::AwaitEnd::Stopped {
                                StopSignals::let_the_next_one_kill();
                                stopped_by_signal = true;
                                break;
                            }
                            if end == super::awaiting::AwaitEnd::Cancelled {
                                break;
                            }
                        }
                        Ok(InputLine::Advance(duration)) if virtual_time => {
                            session.timers_held = false;
                            session.advance(duration).await?;
                        }
                        Ok(InputLine::Advance(_)) => {
                            let message =
                                "`advance` moves the virtual clock: run with --virtual-time";
                            let error = InputLineError::new(line_number, message.into(), None);
                            session.host.observer.input_error(&error)
                        }
                        Err(message) if !line.trim().is_empty() => {
                            let error = InputLineError::new(line_number, message, Some(&line));
                            session.host.observer.input_error(&error)
                        }
                        Err(_) => {}
                    }
                }
                Waited::Line(None) => {
                    lines = None;
                    session.timers_held = false;
                }
                Waited::Queued => {
                    if interrupted(session.take_queued())? {
                        stopped_by_signal = true;
                        break;
                    }
                    if session.cancel_request.is_some() {
                        break;
                    }
                }
                Waited::Progress | Waited::Deadline => {}
            }
            session.commit_between_steps()?;
        }
        // The run reached its final state: what it started is let finish, each effect within its
        // own timeout, and recorded; a signal still stops it at once.
        while !stopped_by_signal && session.cancel_request.is_none() && session.effects_running() {
            session.flush()?;
            let waited = match signals.as_mut() {
                Some(signals) => tokio::select! {
                    waited = session.wait(None, None) => Some(waited),
                    () = signals.next() => {
                        StopSignals::let_the_next_one_kill();
                        stopped_by_signal = true;
                        None
                    }
                },
                None => Some(session.wait(None, None).await),
            };
            // What comes to the inbox now finds the run ended (and is said so); the look is
            // armed again, or the wait would answer at once for good.
            if let Some(Waited::Queued) = waited
                && interrupted(session.take_queued())?
            {
                stopped_by_signal = true;
            }
            session.commit_between_steps()?;
        }
        Ok(stopped_by_signal)
    }
    .await;
    let flushed = session.flush();
    let stopped_by_signal = driven?;
    flushed?;
    if stopped_by_signal {
        StopSignals::let_the_next_one_kill();
        // Its effects die with the process; the checkpoint keeps them for `on_interrupt`.
        session.record_interrupted();
    }
    let mut report = session.finish();
    report.stopped_by_signal = stopped_by_signal;
    Ok(report)
}

/// At most this many steps are held back for one commit, so that a stream of input always
/// ready still commits (and tells of its steps) as it goes.
const MAX_BATCH_STEPS: usize = 1024;

/// `future`'s output if it is ready at once, without waiting; `None` otherwise (the future is
/// dropped: `Session::wait` may be cancelled at any point, as a signal does).
fn ready_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

/// Whether a step ended because a signal interrupted it (any other failure is returned).
fn interrupted(step: Result<(), RunError>) -> Result<bool, RunError> {
    match step {
        Ok(()) => Ok(false),
        Err(RunError::Interrupted { .. }) => Ok(true),
        Err(error) => Err(error),
    }
}
