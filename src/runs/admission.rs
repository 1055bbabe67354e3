//! What happens to an event sent to a run: taken, deferred, discarded or refused, and why, told to whoever sent it.

use serde::Serialize;

use crate::compile::machine::Machine;
use crate::run::event::refuse_platform_event;
use crate::value::Value;

/// The end of one external event, as its sender is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventOutcome {
    /// A transition took it.
    Taken,
    /// An active state defers it: it waits in the run's inbox and is offered again after the
    /// configuration changes.
    Deferred,
    /// Admitted, but no transition took it and no active state defers it (SCXML's rule).
    Discarded,
    /// Not admitted: undeclared, data off its schema, an engine name, or a limit.
    Refused,
}

impl EventOutcome {
    pub fn name(self) -> &'static str {
        match self {
            EventOutcome::Taken => "taken",
            EventOutcome::Deferred => "deferred",
            EventOutcome::Discarded => "discarded",
            EventOutcome::Refused => "refused",
        }
    }
}

/// Whether an event from outside a run (a parent, a child, an events line, a client) may enter
/// it: never an engine name (`done.*`, `error.*`, `timeout.*`, `after.*`: only the engine
/// reports outcomes, so no sender can forge one, even to a protocol that declares no
/// `events:`), and with `events:` declared, only a declared event whose data conforms. The
/// refusal says why.
pub fn admit(machine: &Machine, name: &str, data: &Value) -> Result<(), String> {
    if let Some(refusal) = refuse_platform_event(name) {
        return Err(refusal);
    }
    machine.admit_external_value(name, data)
}
