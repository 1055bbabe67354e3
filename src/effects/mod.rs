//! Effects: the I/O behind effectful actions (processes, files), run by the driver on tokio, each
//! reporting its outcome back to the machine as an event.

pub mod files;
pub mod mock;
pub mod process;
pub mod tools;
pub mod retry;

use std::sync::Arc;

use indexmap::IndexMap;

use crate::compile::machine::{EventType, Machine};
use crate::run::event::{Event, Origin};
use crate::value::Value;

/// The three outcome events of an effect, known at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutcomeEvents {
    /// `done.<kind>.<id>`
    pub done: EventType,
    /// `error.<kind>.<id>`
    pub failed: EventType,
    /// `error.<kind>.timeout.<id>`
    pub timed_out: EventType,
}

/// An effect to run, resolved from an action.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectRequest {
    /// The action's id.
    pub id: Arc<str>,
    pub kind: EffectKind,
    pub events: OutcomeEvents,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EffectKind {
    Process(process::ProcessRequest),
}

/// What an effect produced, in the shape its outcome event carries.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectOutcome {
    pub succeeded: bool,
    pub timed_out: bool,
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
            data,
        }
    }

    /// The outcome of an effect that could not run at all.
    pub fn failure(id: &str, message: String) -> EffectOutcome {
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::string(id));
        data.insert(Arc::from("message"), Value::string(message));
        EffectOutcome {
            succeeded: false,
            timed_out: false,
            data,
        }
    }

    /// The event that reports this outcome to the machine.
    pub fn into_event(self, machine: &Machine, events: &OutcomeEvents) -> Event {
        let event_type =
            crate::actions::exec::outcome_event_type(events, self.succeeded, self.timed_out);
        Event::of_type(machine, event_type, Origin::External)
            .with_data(Value::Map(Arc::new(self.data)))
    }
}

/// Runs an effect to its outcome.
pub async fn run_effect(request: &EffectRequest) -> EffectOutcome {
    match &request.kind {
        EffectKind::Process(process) => match process::run_process(process).await {
            Ok(outcome) => EffectOutcome::from_process(&request.id, &outcome),
            Err(error) => EffectOutcome::failure(&request.id, error.to_string()),
        },
    }
}
