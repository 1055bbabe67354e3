//! The driver: external queue, timers on real or virtual (tokio paused) time, JSON-lines input.

use std::collections::{BTreeMap, VecDeque};
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
use crate::value::Value;

/// Where external events come from.
pub enum EventSource {
    /// No external events.
    None,
    /// JSON lines known in advance (a file's content), delivered at once in order.
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

/// How the driver runs: its clock and any scripted effect outcomes.
#[derive(Debug, Clone, Default)]
pub struct DriveOptions {
    pub time_mode: TimeMode,
    pub mocks: Mocks,
}

/// How a driven run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Set when a top-level final state was reached.
    pub outcome: Option<Outcome>,
    /// Active atomic states when the run stopped.
    pub active_states: Vec<String>,
    pub context: serde_json::Value,
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
type PendingSend = (Option<Arc<str>>, Event);

/// What a running effect sends back: telemetry lines while it retries, then its outcome.
enum EffectMessage {
    Log(LogRecord),
    Outcome(Event),
}

/// The host the algorithm talks to: external queue, timers, log output.
struct DriverHost<'a> {
    external_queue: VecDeque<Event>,
    timers: BTreeMap<TimerKey, PendingSend>,
    sequence: u64,
    started_at: Instant,
    started_unix_milliseconds: u64,
    observer: &'a mut dyn Observer,
    machine: Arc<Machine>,
    /// Where running effects report their outcome events.
    completions: mpsc::UnboundedSender<EffectMessage>,
    /// Effects started whose outcome has not arrived yet.
    running_effects: usize,
    mocks: Arc<std::sync::Mutex<Mocks>>,
}

impl DriverHost<'_> {
    fn now_text(&self) -> String {
        let elapsed = Instant::now().saturating_duration_since(self.started_at);
        clock::format_rfc3339(self.started_unix_milliseconds + elapsed.as_millis() as u64)
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(deadline, _)| *deadline)
    }

    /// Moves the earliest timer due by now onto the external queue. One at a time: handling
    /// it may cancel the others (a state's `after` timers are cancelled when it exits), and a
    /// cancelled timer must never be delivered.
    fn fire_due_timer(&mut self) {
        let now = Instant::now();
        if let Some(entry) = self.timers.first_entry()
            && entry.key().0 <= now
        {
            let (_, event) = entry.remove();
            self.external_queue.push_back(event);
        }
    }
}

impl Host for DriverHost<'_> {
    fn log(&mut self, record: LogRecord) {
        let time = self.now_text();
        self.observer.log(&record, &time);
    }

    fn send(&mut self, request: SendRequest) {
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
            return;
        }
        let deadline =
            Instant::now() + std::time::Duration::from_millis(request.delay_milliseconds);
        self.sequence += 1;
        self.timers
            .insert((deadline, self.sequence), (request.id, request.event));
    }

    fn cancel(&mut self, send_id: &str) {
        self.timers
            .retain(|_, (id, _)| id.as_deref() != Some(send_id));
    }

    fn transition_taken(&mut self, transition: crate::compile::machine::TransitionId) {
        let node = self.machine.transition(transition);
        let targets: Vec<&str> = node
            .targets
            .iter()
            .map(|target| &*self.machine.state(*target).id)
            .collect();
        let fields = serde_json::json!({
            "source": &*self.machine.state(node.source).id,
            "targets": targets,
            "at": node.pointer,
        });
        let time = self.now_text();
        self.observer.record(&time, "transition", fields);
    }

    fn emit(&mut self, directive: Directive) {
        self.observer.directive(&directive);
    }

    fn start_effect(&mut self, request: EffectRequest) {
        self.running_effects += 1;
        let completions = self.completions.clone();
        let machine = self.machine.clone();
        let mocks = self.mocks.clone();
        tokio::spawn(async move {
            let telemetry = completions.clone();
            let mut report = move |record: LogRecord| {
                let _ = telemetry.send(EffectMessage::Log(record));
            };
            let attempt = move |attempt: EffectRequest| {
                // A poisoned lock only means another attempt panicked; the scripts are intact.
                let mocked = mocks
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .next(&attempt.id);
                async move {
                    match mocked {
                        Some(mock) => {
                            let (outcome, after) = mock.outcome(&attempt);
                            tokio::time::sleep(after).await;
                            outcome
                        }
                        None => run_effect(&attempt).await,
                    }
                }
            };
            let outcome = run_with_plan(&request, attempt, &mut report).await;
            // The run may have ended meanwhile; then nobody waits for this outcome.
            let event = outcome.into_event(&machine, &request.events);
            let _ = completions.send(EffectMessage::Outcome(event));
        });
    }
}

/// Parses one JSON line `{"event": "name", "data": {...}}`.
pub fn parse_event_line(machine: &Machine, text: &str) -> Result<Event, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    let object = json
        .as_object()
        .ok_or("expected an object like {\"event\": \"name\"}")?;
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
    let data = object.get("data").map_or(Value::Null, Value::from_json);
    Ok(Event::named(machine, name, data, Origin::External))
}

/// Runs a started-or-not interpreter until it reaches a top-level final state, or until the
/// events are used up and no timer is pending.
pub fn drive(
    interpreter: &mut Interpreter,
    source: EventSource,
    options: DriveOptions,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .start_paused(options.time_mode == TimeMode::Virtual)
        .build()
        .expect("a current-thread tokio runtime with timers always builds");
    runtime.block_on(drive_async(interpreter, source, options.mocks, observer))
}

async fn drive_async(
    interpreter: &mut Interpreter,
    source: EventSource,
    mocks: Mocks,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let machine = interpreter.machine().clone();
    let (completions, mut completed) = mpsc::unbounded_channel();
    let mut host = DriverHost {
        external_queue: VecDeque::new(),
        timers: BTreeMap::new(),
        sequence: 0,
        started_at: Instant::now(),
        started_unix_milliseconds: clock::unix_milliseconds_now(),
        observer,
        machine: machine.clone(),
        completions,
        running_effects: 0,
        mocks: Arc::new(std::sync::Mutex::new(mocks)),
    };
    let mut stdin_lines = None;
    match source {
        EventSource::None => {}
        EventSource::Lines(text) => {
            for (index, line) in text.lines().enumerate() {
                accept_line(&machine, &mut host, index + 1, line);
            }
        }
        EventSource::Stdin => stdin_lines = Some(spawn_stdin_reader()),
    }
    let mut line_number = 0;
    let mut input_closed = false;
    interpreter.start(&mut host)?;
    let time = host.now_text();
    let start =
        serde_json::json!({"protocol": machine.id, "configuration": interpreter.active_leaves()});
    host.observer.record(&time, "start", start);
    while interpreter.is_running() {
        if let Some(event) = host.external_queue.pop_front() {
            interpreter.handle(&event, &mut host)?;
            let time = host.now_text();
            let step = serde_json::json!({
                "event": &*event.name,
                "data": event.data.to_json(),
                "configuration": interpreter.active_leaves(),
            });
            host.observer.record(&time, "step", step);
            continue;
        }
        let deadline = host.next_deadline();
        let effects_pending = host.running_effects > 0;
        if deadline.is_none() && stdin_lines.is_none() && !effects_pending {
            break;
        }
        let sleep = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let reading = stdin_lines.is_some();
        let next_line = async {
            match stdin_lines.as_mut() {
                Some(lines) => lines.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some(message) = completed.recv(), if effects_pending => match message {
                EffectMessage::Log(record) => host.log(record),
                EffectMessage::Outcome(event) => {
                    host.running_effects -= 1;
                    let time = host.now_text();
                    host.observer.record(&time, "effect", effect_summary(&event));
                    host.external_queue.push_back(event);
                }
            },
            line = next_line, if reading => match line {
                Some(line) => {
                    line_number += 1;
                    accept_line(&machine, &mut host, line_number, &line);
                }
                None => input_closed = true,
            },
            () = sleep, if deadline.is_some() => host.fire_due_timer(),
        }
        if input_closed {
            stdin_lines = None;
            input_closed = false;
        }
    }
    let time = host.now_text();
    let finish = serde_json::json!({
        "configuration": interpreter.active_leaves(),
        "state": interpreter.outcome().map(|outcome| machine.state(outcome.final_state).id.to_string()),
        "exit_code": interpreter.outcome().map(|outcome| outcome.exit_code),
    });
    host.observer.record(&time, "finish", finish);
    Ok(RunReport {
        outcome: interpreter.outcome().cloned(),
        active_states: interpreter
            .active_leaves()
            .into_iter()
            .map(String::from)
            .collect(),
        context: interpreter.context_json(),
    })
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

/// Reads stdin lines on a plain thread (stdin is blocking) and hands them to the run loop.
fn spawn_stdin_reader() -> mpsc::UnboundedReceiver<String> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}
