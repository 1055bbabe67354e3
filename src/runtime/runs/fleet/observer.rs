//! What an instance says during a step, as the batch's output lines and telemetry entries.

use crate::base::event::Event;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;
use crate::runtime::run::admission::EventReport;
use crate::runtime::run::driver::{InputLineError, Observer};
use crate::runtime::telemetry::{push_stored_entry, read_by_logs_or_stats};

use super::LogSink;
use super::commit::write_line;

/// Tags everything an instance says with its id: directives and state changes into the batch's
/// output, logs on stderr, all as JSON lines.
pub(super) struct MemberObserver<'o> {
    pub(super) name: &'o str,
    pub(super) output: &'o mut Vec<u8>,
    pub(super) log_sink: Option<&'o mut LogSink>,
    /// The outcome of the event the line being handled sent, once its step reported it, kept
    /// only for a fleet that answers it (`keeps_line_outcome`).
    pub(super) line_outcome: Option<Box<EventReport>>,
    pub(super) keeps_line_outcome: bool,
    /// The entries `logs` and `stats` read (`read_by_logs_or_stats`), for the store to commit
    /// with the steps they tell of; `None` for a fleet that records nothing.
    pub(super) telemetry: Option<&'o mut String>,
    /// The states entered since the last `start`, `resume` or `step` entry, which says them
    /// (kept only with `telemetry`).
    pub(super) entered: Vec<String>,
}

impl MemberObserver<'_> {
    /// Adds an entry to the instance's telemetry, if the fleet keeps it; a `start`, `resume`,
    /// `step` or `finish` says the states entered since the last one.
    fn keep(&mut self, time: &str, kind: &str, mut fields: serde_json::Value) {
        let Some(telemetry) = self.telemetry.as_deref_mut() else {
            return;
        };
        if matches!(kind, "start" | "resume" | "step" | "finish") {
            fields["entered"] = std::mem::take(&mut self.entered).into();
        }
        push_stored_entry(telemetry, time, kind, fields);
    }
}

impl Observer for MemberObserver<'_> {
    fn log(&mut self, record: &LogRecord, time: &str) {
        let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
        let fields: serde_json::Map<String, serde_json::Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        let mut line = serde_json::json!({
            "instance": self.name,
            "time": time,
            "level": format!("{:?}", record.level).to_lowercase(),
            "message": record.message,
            "tags": tags,
            "fields": fields,
        });
        if let Some(from) = &record.from {
            line["from"] = (**from).into();
        }
        let masked = crate::base::secrets::mask_json(&line);
        eprintln!("{masked}");
        if let Some(sink) = self.log_sink.as_mut() {
            sink(&masked);
        }
        if self.telemetry.is_some()
            && let serde_json::Value::Object(mut fields) = line
        {
            // The entry is the line without what the store's row says (the run) or the entry
            // leads with (its time).
            fields.shift_remove("instance");
            fields.shift_remove("time");
            self.keep(time, "log", serde_json::Value::Object(fields));
        }
    }

    fn directive(&mut self, directive: &Directive) {
        let mut line = serde_json::Map::new();
        line.insert("instance".into(), self.name.into());
        if let serde_json::Value::Object(fields) = directive.to_json() {
            line.extend(fields);
        }
        write_line(self.output, &serde_json::Value::Object(line));
    }

    fn input_error(&mut self, error: &InputLineError) {
        eprintln!(
            "warning: instance `{}`: {}; event skipped",
            self.name,
            crate::base::secrets::mask(&error.message)
        );
    }

    /// An outcome without a step of its own (a deferred event the end of the run discarded):
    /// a line of its own.
    fn event_outcome(&mut self, _time: &str, report: &EventReport) {
        let mut line = serde_json::json!({"instance": self.name});
        if let (Some(object), serde_json::Value::Object(fields)) =
            (line.as_object_mut(), report.to_json())
        {
            object.extend(fields);
        }
        write_line(self.output, &crate::base::secrets::mask_json(&line));
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        if self.telemetry.is_some() && read_by_logs_or_stats(kind) {
            self.keep(time, kind, fields.clone());
        }
        let line = match kind {
            "start" => serde_json::json!({
                "instance": self.name,
                "started": true,
                "configuration": fields["configuration"],
            }),
            "resume" => serde_json::json!({
                "instance": self.name,
                "resumed": fields["step"],
                "configuration": fields["configuration"],
            }),
            _ => return,
        };
        write_line(self.output, &line);
    }

    /// `{"instance", "event", "outcome"?, "reason"?, "configuration"}`, written straight
    /// into the batch's output: an input event's outcome rides on the line of its step (none
    /// for an event taken at once).
    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &Event,
        interpreter: &Interpreter,
        outcome: Option<&EventReport>,
    ) {
        // Only a step that entered a state is kept: one that entered none left the states as
        // they were, so `stats` counts the same entries and the same time in each state from
        // the entry after it (the journal has every step). A host stepped by events that move
        // no state (most of `serve`'s) then writes no telemetry for them.
        if self.telemetry.is_some() && !self.entered.is_empty() {
            let fields = crate::runtime::run::driver::step_fields(event, interpreter, outcome);
            let time = crate::base::clock::format_rfc3339(unix_milliseconds);
            self.keep(&time, "step", fields);
        }
        if self.keeps_line_outcome
            && let Some(report) = outcome.filter(|report| report.ticket.is_some() && !report.waited)
        {
            self.line_outcome = Some(Box::new(report.clone()));
        }
        let output = &mut *self.output;
        output.extend_from_slice(b"{\"instance\":");
        let _ = serde_json::to_writer(&mut *output, self.name);
        output.extend_from_slice(b",\"event\":");
        let _ = serde_json::to_writer(&mut *output, &*event.name);
        // Taken at once is what a step line says without an `outcome` (the common case costs
        // no bytes); every other outcome is named.
        if let Some(report) = outcome.filter(|report| {
            report.outcome != crate::runtime::run::admission::EventOutcome::Taken || report.waited
        }) {
            output.extend_from_slice(b",\"outcome\":\"");
            output.extend_from_slice(report.outcome.name().as_bytes());
            output.push(b'"');
            if let Some(reason) = &report.reason {
                output.extend_from_slice(b",\"reason\":");
                let _ = serde_json::to_writer(&mut *output, &crate::base::secrets::mask(reason));
            }
            if report.waited {
                output.extend_from_slice(b",\"waited\":true");
            }
        }
        output.extend_from_slice(b",\"configuration\":[");
        let machine = interpreter.machine();
        let mut first = true;
        for state in interpreter.configuration() {
            let node = machine.state(state);
            if node.is_atomic() {
                if !first {
                    output.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut *output, &*node.id);
            }
        }
        output.extend_from_slice(b"]}\n");
    }

    fn state_entered(&mut self, state: &str) {
        if self.telemetry.is_some() {
            self.entered.push(state.to_string());
        }
    }

    /// Transitions are in the journal (durable hosts); no telemetry entry is built for them.
    fn transition(
        &mut self,
        _now: &dyn Fn() -> u64,
        _machine: &Machine,
        _transition: crate::pipeline::compile::machine::TransitionId,
    ) {
    }
}
