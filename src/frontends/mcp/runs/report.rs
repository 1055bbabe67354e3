//! What a tool result says of a run: its states, the directives it emitted, the events it can take now, how it ended.

use serde_json::{Value, json};

use crate::pipeline::compile::machine::Machine;

/// The most directives one run's view keeps; older ones are dropped first (the journal keeps
/// them all).
pub const MAX_KEPT_DIRECTIVES: usize = 1_000;

/// A live run as its committed output lines describe it.
#[derive(Debug, Default)]
pub struct RunView {
    /// Its active atomic states.
    pub states: Vec<String>,
    /// Directives in the order emitted, the latest `MAX_KEPT_DIRECTIVES` of them (those from
    /// before a resume read back from the journal).
    pub directives: Vec<Value>,
    /// How many directives were dropped past `MAX_KEPT_DIRECTIVES`.
    pub dropped_directives: usize,
    /// `{state, exit_code, output}` once it finished.
    pub finished: Option<Value>,
    /// The error that ended it.
    pub error: Option<String>,
    /// Whether `cancel_run` ended it.
    pub cancelled: bool,
    /// Its latest log lines.
    pub logs: crate::frontends::mcp::logs::KeptLogs,
    /// What it waited on after its latest step.
    pub pending: crate::runtime::runs::fleet::Pending,
    /// The input request it makes, as last keyed (see `request_keys`).
    pub asked: Option<crate::frontends::mcp::waiting::request_keys::Asked>,
    /// What became of the latest event a client sent (`{event, outcome, reason}`), in every
    /// report until another is sent: the outcome of an answer given by `tasks/update`, whose
    /// result carries nothing, is read there.
    pub last_event: Option<Value>,
}

impl RunView {
    /// The view of a run about to resume: the directives its journal holds (the latest
    /// `MAX_KEPT_DIRECTIVES`, and how many older ones there were), so that its report lists
    /// what it emitted before the restart too.
    pub fn resumed(directives: Vec<Value>, dropped_directives: usize) -> RunView {
        RunView {
            directives,
            dropped_directives,
            ..RunView::default()
        }
    }

    /// Takes in one committed output line of the run's fleet; a directive is returned too.
    pub fn observe(&mut self, line: &Value) -> Option<Value> {
        let fields = line.as_object()?;
        // A directive's own fields may be named like the host's (`error`): its key comes first.
        if fields.contains_key("directive") {
            let mut directive = fields.clone();
            directive.remove("instance");
            let directive = Value::Object(directive);
            if self.directives.len() == MAX_KEPT_DIRECTIVES {
                self.directives.remove(0);
                self.dropped_directives += 1;
            }
            self.directives.push(directive.clone());
            return Some(directive);
        }
        if let Some(event) = fields.get("event").and_then(Value::as_str) {
            self.took(event);
        }
        if let Some(states) = fields.get("configuration").and_then(Value::as_array) {
            self.states = states
                .iter()
                .filter_map(|state| state.as_str().map(String::from))
                .collect();
        } else if let Some(finished) = fields.get("finished") {
            self.finished = Some(finished.clone());
        } else if let Some(error) = fields.get("error").and_then(Value::as_str) {
            self.error = Some(error.to_string());
        }
        None
    }

    /// `running`, `finished`, `failed` or `cancelled`.
    pub fn status(&self) -> &'static str {
        if self.cancelled {
            return "cancelled";
        }
        match (&self.finished, &self.error) {
            (_, Some(_)) => "failed",
            // An unhandled `error.execution` ended it: its finished line names the error.
            (Some(finished), None) if finished.get("error").is_some() => "failed",
            (Some(_), None) => "finished",
            (None, None) => "running",
        }
    }
}

/// The report of a run: what every tool that touches a run returns.
pub fn report(machine: &Machine, run: &str, view: &RunView) -> Value {
    let running = view.status() == "running";
    let events = if running {
        events_now(machine, &view.states)
    } else {
        json!([])
    };
    let mut report = json!({
        "run": run,
        "protocol": machine.id,
        "status": view.status(),
        "states": view.states,
        "directives": view.directives,
    });
    if running {
        report["waiting"] = waiting_on(view.pending, &events).into();
    }
    report["events"] = events;
    if let Some(finished) = &view.finished {
        report["finished"] = finished.clone();
    }
    if let Some(error) = &view.error {
        report["error"] = error.clone().into();
    }
    if view.dropped_directives > 0 {
        report["dropped_directives"] = view.dropped_directives.into();
    }
    if let Some(last) = &view.last_event {
        report["last_event"] = last.clone();
    }
    report
}

/// What a running run waits on, the one predicate behind a report's `waiting` and a task's
/// status: `effect` while an effect or child protocol runs (its outcome will move the run);
/// else `input` when it can take an event now, or when nothing at all is pending (only an
/// event can move it); else `timer`. A timer pending beside events it can take (ITTW's
/// periodic re-check while it waits for guidance) does not make it `timer`: the client is
/// still the one the run waits for.
pub fn waiting_on(pending: crate::runtime::runs::fleet::Pending, events: &Value) -> &'static str {
    let takes_events = events.as_array().is_some_and(|events| !events.is_empty());
    if pending.running {
        "effect"
    } else if takes_events || !pending.timers {
        "input"
    } else {
        "timer"
    }
}

pub use crate::runtime::run::admission::events_now;
