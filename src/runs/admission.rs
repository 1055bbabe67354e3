//! What happens to an event sent to a run: taken, deferred, discarded or refused, and why, told to whoever sent it.

use serde::Serialize;

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
