//! Effects and the sandbox: the I/O behind effectful actions (processes, files, tools), the grants that bound it and the kernel sandbox that enforces them.

pub mod arguments;
pub mod capabilities;
pub mod files;
pub mod grant_inputs;
pub mod mock;
pub mod mock_arguments;
mod mock_shape;
pub mod process;
pub mod retry;
pub mod sandbox;
pub mod tools;
pub mod watchdog;

use std::sync::Arc;

use indexmap::IndexMap;

use crate::base::ids::{EventType, StateId};
use crate::base::value::Value;

/// The three outcome events of an effect, known at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OutcomeEvents {
    /// `done.<kind>.<id>`
    pub done: EventType,
    /// `error.<kind>.<id>`
    pub failed: EventType,
    /// `error.<kind>.timeout.<id>`
    pub timed_out: EventType,
    /// `error.incomplete.<id>`
    pub incomplete: EventType,
}

/// An effect to run, resolved from an action.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EffectRequest {
    /// The action's id.
    pub id: Arc<str>,
    pub kind: EffectKind,
    pub events: OutcomeEvents,
    pub plan: RetryPlan,
    /// What a resumed run does if the engine stopped while this effect ran.
    pub on_interrupt: InterruptPolicy,
    /// `state`: cancelled when `owner` exits; `run`: outlives its state.
    #[serde(default)]
    pub scope: EffectScope,
    /// The state whose visit this effect belongs to (`StateId::ROOT`: the run itself).
    #[serde(default = "root_state")]
    pub owner: StateId,
    /// The capabilities it was admitted under, when they restrict anything: checked again and
    /// enforced by the kernel at every attempt (`crate::effects::sandbox`). Set by every admission,
    /// a resumed run's included, so it is never stored.
    #[serde(skip)]
    pub grant: Option<crate::effects::sandbox::Grant>,
}

fn root_state() -> StateId {
    StateId::ROOT
}

pub use crate::base::model::effect::{EffectScope, InterruptPolicy};

/// How attempts are timed, retried and reported.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RetryPlan {
    /// The base timeout of one attempt.
    pub timeout: Option<std::time::Duration>,
    /// Attempt `n` gets `timeout` × the `n`-th multiplier (the last repeats); none means 1.
    pub multipliers: Vec<f64>,
    /// Tried in order; the first whose `error_equals` matches a failure decides.
    pub retriers: Vec<retry::RetryPolicy>,
    /// Prefix of the telemetry log lines.
    pub telemetry: Arc<str>,
    /// Output markers that make a successful process outcome incomplete.
    pub incomplete_markers: Vec<String>,
}

impl RetryPlan {
    /// Attempt `attempt`'s timeout and the multiplier applied (`retry::attempt_timeout`).
    pub fn attempt_timeout(&self, attempt: u32) -> (Option<std::time::Duration>, f64) {
        retry::attempt_timeout(self.timeout, &self.multipliers, attempt)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum EffectKind {
    Process(process::ProcessRequest),
    Tool(tools::ToolCall),
    File(files::FileRequest),
}

impl EffectKind {
    /// The action that asked for it, as protocols spell it.
    pub fn name(&self) -> &'static str {
        match self {
            EffectKind::Process(_) => "exec",
            EffectKind::Tool(call) => call.tool.name(),
            EffectKind::File(files::FileRequest::Backup { .. }) => "backup",
            EffectKind::File(files::FileRequest::Restore { .. }) => "restore",
            EffectKind::File(_) => "write",
        }
    }

    /// The same effect with another timeout (files take no timeout).
    fn with_timeout(&self, timeout: Option<std::time::Duration>) -> EffectKind {
        let mut kind = self.clone();
        match &mut kind {
            EffectKind::Process(process) => process.timeout = timeout,
            EffectKind::Tool(tool) => tool.timeout = timeout,
            EffectKind::File(_) => {}
        }
        kind
    }

    pub fn timeout(&self) -> Option<std::time::Duration> {
        match self {
            EffectKind::Process(process) => process.timeout,
            EffectKind::Tool(tool) => tool.timeout,
            EffectKind::File(_) => None,
        }
    }
}

/// What an effect produced, in the shape its outcome event carries.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectOutcome {
    pub succeeded: bool,
    pub timed_out: bool,
    /// The output carried a completeness marker (ADR-018).
    pub incomplete: bool,
    /// The event data: `id`, `exit_code`, `stdout`, ...
    pub data: IndexMap<Arc<str>, Value>,
}

impl EffectOutcome {
    /// The outcome of a finished process: success is exit code 0.
    pub fn from_process(id: &str, outcome: &process::ProcessOutcome) -> EffectOutcome {
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::string(id));
        data.insert(
            Arc::from("exit_code"),
            outcome
                .exit_code
                .map_or(Value::Null, |code| Value::Int(code.into())),
        );
        data.insert(Arc::from("stdout"), Value::string(outcome.stdout.as_str()));
        data.insert(Arc::from("stderr"), Value::string(outcome.stderr.as_str()));
        data.insert(Arc::from("truncated"), Value::Bool(outcome.truncated));
        data.insert(
            Arc::from("duration_ms"),
            Value::Int(outcome.duration.as_millis() as i64),
        );
        data.insert(Arc::from("timed_out"), Value::Bool(outcome.timed_out));
        let succeeded = !outcome.timed_out && outcome.exit_code == Some(0);
        if !succeeded {
            let message = if outcome.timed_out {
                format!("timed out after {} ms", outcome.duration.as_millis())
            } else if let Some(code) = outcome.exit_code {
                format!("exited with code {code}")
            } else {
                format!("killed by signal {}", outcome.signal.unwrap_or_default())
            };
            data.insert(Arc::from("message"), Value::string(message));
        }
        EffectOutcome {
            succeeded,
            timed_out: outcome.timed_out,
            incomplete: false,
            data,
        }
    }

    /// The outcome of an effect that could not run at all (a program not found, a mocked
    /// `error:`): the same keys as a finished process, with no exit code, so handlers can read
    /// `stderr` or `exit_code` whatever the failure.
    pub fn failure(id: &str, message: String) -> EffectOutcome {
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::string(id));
        data.insert(Arc::from("exit_code"), Value::Null);
        data.insert(Arc::from("stdout"), Value::string(""));
        data.insert(Arc::from("stderr"), Value::string(""));
        data.insert(Arc::from("truncated"), Value::Bool(false));
        data.insert(Arc::from("duration_ms"), Value::Int(0));
        data.insert(Arc::from("timed_out"), Value::Bool(false));
        data.insert(Arc::from("message"), Value::string(message));
        EffectOutcome {
            succeeded: false,
            timed_out: false,
            incomplete: false,
            data,
        }
    }

    /// The name of the event that reports this outcome.
    pub fn event_type(&self, events: &OutcomeEvents) -> EventType {
        match (self.succeeded, self.timed_out, self.incomplete) {
            (_, _, true) => events.incomplete,
            (_, true, _) => events.timed_out,
            (true, _, _) => events.done,
            (false, _, _) => events.failed,
        }
    }

    /// The first marker found in the output, if any.
    fn incomplete_marker<'a>(&self, markers: &'a [String]) -> Option<&'a str> {
        let text = |key: &str| {
            self.data
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let output = text("stdout") + &text("stderr");
        markers
            .iter()
            .find(|marker| output.contains(marker.as_str()))
            .map(String::as_str)
    }
}

/// Tells a running effect that it is no longer wanted (its owner state exited, its run
/// stopped). The host keeps the sending end; dropping it cancels too, so an effect never
/// outlives the host that started it.
#[derive(Debug, Clone, Default)]
pub struct Cancellation {
    /// `None`: never cancelled (an effect run on its own, outside a host).
    receiver: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Cancellation {
    /// A cancellation and the sender that triggers it (by `send(true)` or by being dropped).
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Cancellation) {
        let (sender, receiver) = tokio::sync::watch::channel(false);
        let cancellation = Cancellation {
            receiver: Some(receiver),
        };
        (sender, cancellation)
    }

    pub fn is_cancelled(&self) -> bool {
        self.receiver
            .as_ref()
            .is_some_and(|receiver| *receiver.borrow() || receiver.has_changed().is_err())
    }

    /// Completes when the effect is cancelled; never, for one that cannot be.
    pub async fn cancelled(&mut self) {
        let Some(receiver) = self.receiver.as_mut() else {
            return std::future::pending().await;
        };
        // `wait_for` fails when the sender is gone: that cancels as well.
        let _ = receiver.wait_for(|cancelled| *cancelled).await;
    }
}

/// Runs an effect to its outcome. A cancelled process is stopped as on timeout (SIGTERM to
/// its group, the grace period, SIGKILL); a cancelled tool is dropped; a file operation,
/// atomic already, is let complete.
pub async fn run_effect(request: &EffectRequest, cancellation: &mut Cancellation) -> EffectOutcome {
    match &request.kind {
        EffectKind::Process(process) => {
            match process::run_process(process, request.grant.as_ref(), cancellation).await {
                Ok(outcome) => EffectOutcome::from_process(&request.id, &outcome),
                Err(error) => EffectOutcome::failure(&request.id, error.to_string()),
            }
        }
        EffectKind::Tool(call) => tokio::select! {
            outcome = tools::run_tool(&request.id, call, request.grant.as_ref()) => outcome,
            () = cancellation.cancelled() => EffectOutcome::failure(&request.id, "cancelled".into()),
        },
        EffectKind::File(file) => {
            files::run_file_effect(&request.id, file, request.grant.as_ref()).await
        }
    }
}

/// The standard completeness markers of ADR-018.
pub const STANDARD_INCOMPLETE_MARKERS: [&str; 7] = [
    "Terminated",
    "Killed",
    "... (truncated)",
    "Connection timed out",
    "Resource temporarily unavailable",
    "Signal received",
    "Process interrupted",
];

/// How far a retry plan got: the attempt running (1-based) and each retrier's own count, so
/// a resumed run goes on from there instead of from the first attempt.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PlanProgress {
    pub attempt: u32,
    pub retriers: Vec<u32>,
}

/// Runs an effect under its retry plan: each attempt through `attempt` (the real effect or a
/// mock), telemetry through `report`, pauses on the (possibly virtual) tokio clock. Starts at
/// `from` (a resumed plan) or the first attempt, and tells `progress` before each attempt.
pub async fn run_with_plan<F, Fut>(
    request: &EffectRequest,
    mut attempt: F,
    report: &mut (dyn FnMut(crate::base::log_record::LogRecord) + Send),
    progress: &mut (dyn FnMut(&PlanProgress) + Send),
    from: Option<&PlanProgress>,
    cancellation: &mut Cancellation,
) -> EffectOutcome
where
    F: FnMut(EffectRequest) -> Fut,
    Fut: std::future::Future<Output = EffectOutcome>,
{
    let plan = &request.plan;
    let started = tokio::time::Instant::now();
    let retrying = !plan.retriers.is_empty();
    let mut executors: Vec<retry::RetryExecutor> = plan
        .retriers
        .iter()
        .enumerate()
        .map(|(index, policy)| {
            let mut executor = match from.and_then(|from| from.retriers.get(index)) {
                Some(attempts) => retry::RetryExecutor::resumed(policy.clone(), *attempts),
                None => retry::RetryExecutor::new(policy.clone()),
            };
            executor.start();
            executor
        })
        .collect();
    let max_attempts = plan
        .retriers
        .first()
        .map_or(1, |policy| policy.max_attempts.max(1));
    let mut number = from.map_or(1, |from| from.attempt.max(1));
    loop {
        if retrying {
            progress(&PlanProgress {
                attempt: number,
                retriers: executors
                    .iter()
                    .map(retry::RetryExecutor::attempts)
                    .collect(),
            });
        }
        let (timeout, multiplier) = plan.attempt_timeout(number);
        let timeout_ms = timeout.map(|t| t.as_millis() as i64);
        if retrying {
            report(telemetry(
                plan,
                "timeout_attempt",
                crate::base::model::action::LogLevel::Info,
                format!("{} attempt {number}/{max_attempts}", request.id),
                &[
                    ("attempt", Value::Int(number.into())),
                    ("max_retries", Value::Int(max_attempts.into())),
                    ("timeout_ms", timeout_ms.map_or(Value::Null, Value::Int)),
                    ("multiplier", Value::Float(multiplier)),
                ],
            ));
        }
        let mut this_attempt = request.clone();
        this_attempt.kind = request.kind.with_timeout(timeout);
        if let EffectKind::Process(process) = &mut this_attempt.kind
            && let Some(prefix) = &process.idempotency
        {
            process.idempotency = Some(format!("{prefix}:{number}"));
        }
        if let EffectKind::Process(process) = &mut this_attempt.kind
            && let Some(trace) = &mut process.trace
        {
            trace.attempt = number;
        }
        let mut outcome = attempt(this_attempt).await;
        // A cancelled plan ends with the attempt that was stopped; nobody waits for it.
        if cancellation.is_cancelled() {
            return outcome;
        }
        if outcome.succeeded
            && let Some(marker) = outcome.incomplete_marker(&plan.incomplete_markers)
        {
            report(telemetry(
                plan,
                "incomplete_output",
                crate::base::model::action::LogLevel::Warn,
                format!("{} output is incomplete: `{marker}`", request.id),
                &[
                    ("attempt", Value::Int(number.into())),
                    ("indicator", Value::string(marker)),
                ],
            ));
            outcome.succeeded = false;
            outcome.incomplete = true;
            outcome.data.insert(
                Arc::from("message"),
                Value::string(format!("incomplete output: `{marker}`")),
            );
            outcome
                .data
                .insert(Arc::from("indicator"), Value::string(marker));
        }
        let elapsed_ms = Value::Int(started.elapsed().as_millis() as i64);
        // Every attempt's outcome says how far the plan got, so handlers can report it.
        outcome
            .data
            .insert(Arc::from("attempts"), Value::Int(number.into()));
        outcome
            .data
            .insert(Arc::from("elapsed_ms"), elapsed_ms.clone());
        if outcome.succeeded {
            if retrying {
                report(telemetry(
                    plan,
                    "timeout_success",
                    crate::base::model::action::LogLevel::Info,
                    format!("{} succeeded on attempt {number}", request.id),
                    &[
                        ("attempts", Value::Int(number.into())),
                        ("elapsed_ms", elapsed_ms),
                        (
                            "final_timeout_ms",
                            timeout_ms.map_or(Value::Null, Value::Int),
                        ),
                    ],
                ));
            }
            return outcome;
        }
        let error = match outcome.event_type(&request.events) {
            event_type if event_type == request.events.incomplete => {
                format!("error.incomplete.{}", request.id)
            }
            event_type if event_type == request.events.timed_out => {
                format!("error.exec.timeout.{}", request.id)
            }
            _ => format!("error.exec.{}", request.id),
        };
        let handler = plan.retriers.iter().position(|policy| {
            policy.error_equals.is_empty()
                || policy
                    .error_equals
                    .iter()
                    .any(|descriptor| descriptor.matches(&error))
        });
        let step = handler.map(|index| executors[index].report(Err(&error)));
        match (handler, step) {
            (Some(index), Some(retry::RetryStep::Wait { delay, .. })) => {
                report(telemetry(
                    plan,
                    "timeout_retry",
                    crate::base::model::action::LogLevel::Warn,
                    format!(
                        "{} attempt {number} failed ({error}); retrying in {} ms",
                        request.id,
                        delay.as_millis()
                    ),
                    &[
                        ("attempt", Value::Int(number.into())),
                        ("timeout_ms", timeout_ms.map_or(Value::Null, Value::Int)),
                        ("max_retries", Value::Int(max_attempts.into())),
                        ("delay_ms", Value::Int(delay.as_millis() as i64)),
                        ("error", Value::string(error.as_str())),
                    ],
                ));
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = cancellation.cancelled() => return outcome,
                }
                executors[index].resume();
                number += 1;
            }
            _ => {
                // Only a call that was retried gave up: a failure its policy does not retry
                // (or a first attempt with nothing left) is the effect's failure, which its
                // outcome and telemetry line report, not an exhausted plan.
                if retrying && number > 1 {
                    report(telemetry(
                        plan,
                        "timeout_exhausted",
                        crate::base::model::action::LogLevel::Error,
                        format!("{} gave up after {number} attempts ({error})", request.id),
                        &[
                            ("attempts", Value::Int(number.into())),
                            ("elapsed_ms", elapsed_ms),
                        ],
                    ));
                }
                return outcome;
            }
        }
    }
}

/// A telemetry log line named `<prefix>_<name>`, tagged with that name.
fn telemetry(
    plan: &RetryPlan,
    name: &str,
    level: crate::base::model::action::LogLevel,
    message: String,
    fields: &[(&str, Value)],
) -> crate::base::log_record::LogRecord {
    let tag: Arc<str> = Arc::from(format!("{}_{name}", plan.telemetry));
    crate::base::log_record::LogRecord {
        level,
        message,
        tags: Arc::from([tag]),
        fields: fields
            .iter()
            .map(|(key, value)| (Arc::from(*key), value.clone()))
            .collect(),
        from: None,
    }
}
