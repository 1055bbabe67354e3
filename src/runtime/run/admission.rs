//! What happens to an event sent to a run: taken, deferred, discarded or refused, and why, told to whoever sent it.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::base::event::refuse_platform_event;
use crate::pipeline::compile::machine::{EventDescriptor, Machine};

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
    /// Stored in the inbox of a run another host holds, which applies it: its own outcome
    /// follows once that host has committed the step that applied it.
    Queued,
}

impl EventOutcome {
    pub fn name(self) -> &'static str {
        match self {
            EventOutcome::Taken => "taken",
            EventOutcome::Deferred => "deferred",
            EventOutcome::Discarded => "discarded",
            EventOutcome::Refused => "refused",
            EventOutcome::Queued => "queued",
        }
    }
}

/// What became of one external event, for its sender and the run's telemetry.
#[derive(Debug, Clone, PartialEq)]
pub struct EventReport {
    pub event: Arc<str>,
    pub outcome: EventOutcome,
    /// Why, for every outcome but `taken`: most are fixed texts, so a host discarding many
    /// events builds no string for each.
    pub reason: Option<Cow<'static, str>>,
    /// Who sent it, in the front end's numbering (`--events`: the input line), when known.
    pub ticket: Option<u64>,
    /// It had waited in the inbox (deferred) before this outcome.
    pub waited: bool,
}

impl EventReport {
    /// `{"event", "outcome", "reason"?, "waited"?}`.
    pub fn to_json(&self) -> Value {
        let mut report = json!({"event": &*self.event, "outcome": self.outcome.name()});
        if let Some(reason) = &self.reason {
            report["reason"] = reason.as_ref().into();
        }
        if self.waited {
            report["waited"] = true.into();
        }
        report
    }
}

/// Why an event no transition took and no state defers is discarded, as a run reports it.
pub const DISCARDED: &str = "no transition of the active states takes it now and none of them defers it (SCXML discards such an event)";

/// Why an event is discarded when a guard failed on it under `errors: strict`.
pub const GUARD_FAILED: &str = "a guard of a transition that takes it failed (`error.execution`): \
     under `errors: strict` no transition takes an event whose guards could not be decided, and \
     the error is processed instead";

/// Why an event that came after the run ended is discarded.
pub const AFTER_THE_END: &str = "the run has ended";

/// `DISCARDED` spelled out for a reader: the states it met, and the events they take.
pub fn discarded_reason(machine: &Machine, event: &str, states: &[&str]) -> String {
    if states.is_empty() {
        return format!("the run has ended; `{event}` came too late");
    }
    let takeable = event_names_now(machine, states.iter().copied());
    if takeable.contains(&event) {
        return format!(
            "the active states ({}) take `{event}` only where a guard holds, and none held; none \
             of them defers it (SCXML discards such an event)",
            states.join(", ")
        );
    }
    let takes = if takeable.is_empty() {
        "they take no external event now".to_string()
    } else {
        format!("they take: {}", takeable.join(", "))
    };
    format!(
        "no transition of the active states ({}) takes `{event}` now and none of them defers \
         it (SCXML discards such an event); {takes}",
        states.join(", ")
    )
}

/// The external events some active state (or an ancestor) has a transition for, in document
/// order of their states from the innermost, each with its data schema where `events:`
/// declares one. Platform events (`done.*`, `error.*`, `timeout.*`, `after.*`) and wildcards
/// are not the agent's to send.
pub fn events_now(machine: &Machine, states: &[String]) -> Value {
    let names = event_names_now(machine, states.iter().map(String::as_str));
    let declared = machine.declared_events.as_deref();
    let events: Vec<Value> = names
        .into_iter()
        .map(|name| {
            let mut event = json!({ "name": name });
            if let Some(schema) = declared.and_then(|declared| declared.schema(name)) {
                event["data_schema"] = (*schema.schema).clone();
            }
            event
        })
        .collect();
    Value::Array(events)
}

/// The names `events_now` lists.
fn event_names_now<'m, 's>(
    machine: &'m Machine,
    states: impl Iterator<Item = &'s str>,
) -> Vec<&'m str> {
    let mut names: Vec<&str> = Vec::new();
    for state in states.filter_map(|id| machine.state_id(id)) {
        let node = machine.state(state);
        let lineage = std::iter::once(state).chain(node.ancestors.iter().copied());
        for transition in lineage.flat_map(|state| machine.state(state).transitions.iter()) {
            for descriptor in &machine.transition(*transition).events {
                let EventDescriptor::Prefix(name) = descriptor else {
                    continue;
                };
                // What input may not send (`done.*`, `error.*`, `timeout.*`, `after.*`), by the
                // rule that refuses it: `error_report` or `done_reviewing` is the agent's.
                let platform = crate::base::event::refuse_platform_event(name).is_some();
                if !platform && !names.contains(&&**name) {
                    names.push(name);
                }
            }
        }
    }
    let declared = machine.declared_events.as_deref();
    names.retain(|name| {
        declared.is_none_or(|declared| declared.names().any(|known| known == *name))
    });
    names
}

/// Whether an event from outside a run (a parent, a child, an events line, a client) may enter
/// it: never an engine name (`done.*`, `error.*`, `timeout.*`, `after.*`: only the engine
/// reports outcomes, so no sender can forge one, even to a protocol that declares no
/// `events:`), and with `events:` declared, only a declared event whose data conforms. The
/// refusal says why.
pub fn admit(
    machine: &Machine,
    name: &str,
    data: &crate::base::value::Value,
) -> Result<(), String> {
    if let Some(refusal) = refuse_platform_event(name) {
        return Err(refusal);
    }
    machine.admit_external_value(name, data)
}

/// `admit` for data as JSON (an events line, a `serve` line, a tool's arguments, a scenario's
/// `send`).
pub fn admit_json(machine: &Machine, name: &str, data: &serde_json::Value) -> Result<(), String> {
    if let Some(refusal) = refuse_platform_event(name) {
        return Err(refusal);
    }
    machine.admit_external(name, data)
}
