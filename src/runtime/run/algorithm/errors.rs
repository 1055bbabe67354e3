//! How the errors the algorithm meets are processed: W3C's order, or `errors: strict` (an execution error first, and fatal when unhandled).

use std::sync::Arc;

use super::{Algorithm, CurrentEvent, Outcome};
use crate::base::event::Event;
use crate::base::value::Value;
use crate::pipeline::compile::budget;
use crate::pipeline::compile::expression::EvaluationError;
use crate::pipeline::compile::machine::EventDescriptor;

/// An `error.execution` no transition handled, which ended a run under `errors: strict`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The error event's name.
    pub event: Arc<str>,
    /// What failed, as the event's `message` says.
    pub message: String,
    /// The atomic states the run was in.
    pub states: Vec<Arc<str>>,
}

impl Failure {
    /// The failure as the `error` of a finished line: `{event, message, states}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "event": &*self.event,
            "message": crate::base::secrets::mask(&self.message),
            "states": self.states.iter().map(|state| &**state).collect::<Vec<_>>(),
        })
    }
}

impl<'e> Algorithm<'_, 'e> {
    /// The run has ended: errors still queued would be discarded unseen, so each is reported;
    /// under `errors: strict` an execution error among them fails the run it would have ended.
    pub(super) fn settle_queued_errors(&mut self) {
        while let Some(event) = self.instance.internal_queue.pop_front() {
            let fails = self.machine.strict_errors
                && event.event_type == Some(self.machine.error_execution)
                && self
                    .instance
                    .outcome
                    .as_ref()
                    .is_none_or(|outcome| outcome.failure.is_none());
            *self.event = CurrentEvent::Internal(event);
            if fails {
                self.fail_on_unhandled_error();
            } else {
                self.report_unhandled_error();
            }
        }
    }

    /// `errors: strict`: the first `error.execution` waiting in the internal queue, taken out
    /// of it to be processed next, ahead of eventless transitions and of events raised before it.
    pub(super) fn take_execution_error(&mut self) -> Option<Event> {
        if !self.machine.strict_errors || self.instance.internal_queue.is_empty() {
            return None;
        }
        let error = self.machine.error_execution;
        let queue = &mut self.instance.internal_queue;
        let position = queue
            .iter()
            .position(|event| event.event_type == Some(error))?;
        queue.remove(position)
    }

    /// Whether an `error.execution` waits to be processed first (`errors: strict`).
    pub(super) fn execution_error_waits(&self) -> bool {
        self.machine.strict_errors
            && self
                .instance
                .internal_queue
                .iter()
                .any(|event| event.event_type == Some(self.machine.error_execution))
    }

    /// `select_transitions`; under `errors: strict`, a guard that failed voids the selection:
    /// no transition is taken on a guess, and the error is processed next.
    pub(super) fn select_transitions_strictly(&mut self, eventless: bool) {
        let queued = self.instance.internal_queue.len();
        self.select_transitions(eventless);
        // Guards raise nothing but their errors: a longer queue means one of them failed.
        if self.machine.strict_errors && self.instance.internal_queue.len() > queued {
            self.workspace().enabled.clear();
        }
    }

    /// `errors: strict`: the current event, an `error.execution`, was handled by no transition.
    /// The run ends at once, failed, with the error as its outcome.
    #[cold]
    pub(super) fn fail_on_unhandled_error(&mut self) {
        let Some(event) = self.event.get() else {
            return;
        };
        let machine = self.machine;
        let mut message = error_message(event).unwrap_or_default();
        // A handler was there, but its guard failed while it was being selected: say so.
        let error_type = Some(machine.error_execution);
        if let Some(guard_error) = self
            .instance
            .internal_queue
            .iter()
            .find(|queued| queued.event_type == error_type)
            .and_then(error_message)
        {
            message = format!("{message}; a guard of its handler failed too: {guard_error}");
        }
        let failure = Failure {
            event: event.name.clone(),
            message,
            states: self
                .instance
                .configuration
                .iter()
                .filter(|state| machine.state(*state).is_atomic())
                .map(|state| machine.state(state).id.clone())
                .collect(),
        };
        let record = crate::pipeline::actions::LogRecord {
            level: crate::base::model::action::LogLevel::Error,
            message: format!(
                "{} was not handled by any transition: {}; the run fails (exit code {}; \
                 handle it with `on: {{ error.execution: ... }}`, or say `errors: scxml` to \
                 discard it as SCXML does)",
                failure.event,
                failure.message,
                crate::base::exit_code::UNHANDLED_ERROR
            ),
            tags: Arc::from([Arc::from("unhandled_error")]),
            fields: vec![(Arc::from("event"), Value::String(failure.event.clone()))],
            from: None,
        };
        self.host.log(record);
        self.instance.running = false;
        self.instance.outcome = Some(Box::new(Outcome {
            final_state: None,
            exit_code: crate::base::exit_code::UNHANDLED_ERROR,
            output: Value::Null,
            failure: Some(Arc::new(failure)),
        }));
    }

    /// SCXML discards an event no transition takes; for an error that would hide why a run
    /// stalls, so it is discarded with a warning.
    #[inline]
    pub(super) fn report_unhandled_error(&mut self) {
        let Some(event) = self.event.get() else {
            return;
        };
        let is_error = match event.event_type {
            Some(event_type) => self
                .machine
                .error_types
                .get(event_type.0 as usize)
                .copied()
                .unwrap_or(false),
            None => EventDescriptor::Prefix(Arc::from("error")).matches(&event.name),
        };
        if is_error {
            self.warn_unhandled_error();
        }
    }

    #[cold]
    fn warn_unhandled_error(&mut self) {
        let Some(event) = self.event.get() else {
            return;
        };
        let detail = error_message(event)
            .map(|message| format!(": {message}"))
            .unwrap_or_default();
        let record = crate::pipeline::actions::LogRecord {
            level: crate::base::model::action::LogLevel::Warn,
            message: format!("{} was not handled by any transition{detail}", event.name),
            tags: Arc::from([Arc::from("unhandled_error")]),
            fields: vec![(Arc::from("event"), Value::String(event.name.clone()))],
            from: None,
        };
        self.host.log(record);
    }

    #[cold]
    pub(super) fn raise_execution_error(&mut self, error: EvaluationError) {
        self.budgets_in_force();
        // An evaluation cut short by a signal or the step's clock is no error of the protocol:
        // the step stops at its next microstep, and nothing should handle it before.
        if budget::step_must_stop(1).is_some() {
            return;
        }
        let event = Event::execution_error(self.machine, &error);
        self.instance.internal_queue.push_back(event);
    }
}

/// The `message` an error event carries, as text.
fn error_message(event: &Event) -> Option<String> {
    match &event.data {
        Value::Map(entries) => entries.get("message").map(|message| match message {
            Value::String(text) => text.to_string(),
            other => other.to_json().to_string(),
        }),
        _ => None,
    }
}
