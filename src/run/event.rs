//! Events: a name (with its compiled type when known), data, and where it came from.

use std::sync::Arc;

use crate::compile::machine::{EventType, Machine};
use crate::value::Value;

/// Where an event came from, as SCXML's `_event.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Raised by the engine itself: `done.state.*`, `error.*`.
    Platform,
    /// Raised by the protocol with `raise`.
    Internal,
    /// Sent from outside, or with `send`.
    External,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Platform => "platform",
            Origin::Internal => "internal",
            Origin::External => "external",
        }
    }
}

/// One event. Cloning shares the name and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: Arc<str>,
    /// The compiled event type, when the name was known at compile time.
    pub event_type: Option<EventType>,
    pub data: Value,
    pub origin: Origin,
    pub send_id: Option<Arc<str>>,
}

impl Event {
    /// An event of a type known to the machine (no string work when it is handled).
    pub fn of_type(machine: &Machine, event_type: EventType, origin: Origin) -> Event {
        Event {
            name: machine.event_name(event_type).clone(),
            event_type: Some(event_type),
            data: Value::Null,
            origin,
            send_id: None,
        }
    }

    /// An event by name: its type is looked up once here.
    pub fn named(machine: &Machine, name: &str, data: Value, origin: Origin) -> Event {
        let event_type = machine.event_type(name);
        Event {
            name: match event_type {
                Some(known) => machine.event_name(known).clone(),
                None => Arc::from(name),
            },
            event_type,
            data,
            origin,
            send_id: None,
        }
    }

    /// `error.execution` for a failed expression, with `message` and `expression` as data.
    pub fn execution_error(
        machine: &Machine,
        error: &crate::compile::expression::EvaluationError,
    ) -> Event {
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("message"), Value::string(error.message.as_str()));
        data.insert(
            Arc::from("expression"),
            Value::String(error.expression.clone()),
        );
        Event::of_type(machine, machine.error_execution, Origin::Platform)
            .with_data(Value::Map(Arc::new(data)))
    }

    pub fn with_data(mut self, data: Value) -> Event {
        self.data = data;
        self
    }
}
