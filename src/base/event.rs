//! Events: a name (with its compiled type when known), data, and where it came from.

use std::sync::Arc;

use crate::base::value::Value;
use crate::pipeline::compile::machine::{EventType, Machine};

/// Where an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Raised by the engine itself: `done.state.*`, `error.execution`, timers.
    Platform,
    /// Raised by the protocol with `raise`.
    Internal,
    /// Sent from outside, or with `send`.
    External,
    /// An outcome the engine reports on the external queue: an effect's (`done.exec.*`,
    /// `error.exec.*`, `error.permission.*`) or a child protocol's (`done.invoke.*`).
    Outcome,
    /// Sent by a child protocol with `send ... to: parent`; `Event::invoke_id` names it.
    Child,
}

impl Origin {
    /// SCXML's `_event.type`: outcomes arrive on the external queue, so they are `external`.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Platform => "platform",
            Origin::Internal => "internal",
            Origin::External | Origin::Outcome | Origin::Child => "external",
        }
    }

    /// Who made the event, as guards read it in `event.origin`: the engine's own events
    /// (outcomes included) are `platform`, so a protocol can tell them from input; a child's
    /// are its invoke id (see `Event::origin_name`).
    pub fn origin_name(self) -> &'static str {
        match self {
            Origin::Platform | Origin::Outcome => "platform",
            Origin::Internal => "internal",
            Origin::External | Origin::Child => "external",
        }
    }
}

/// The name prefixes of the engine's own events; external input may not use them.
pub const PLATFORM_EVENT_PREFIXES: [&str; 4] = ["done", "error", "timeout", "after"];

/// Why external input may not send an event of this name, if it may not: `done.*`, `error.*`,
/// `timeout.*` and `after.*` are the engine's to raise, so input cannot forge an outcome.
pub fn refuse_platform_event(name: &str) -> Option<String> {
    // Every event's path asks: most names start with none of the prefixes' letters.
    if !matches!(name.as_bytes().first(), Some(b'd' | b'e' | b't' | b'a')) {
        return None;
    }
    let prefix = PLATFORM_EVENT_PREFIXES.iter().find(|prefix| {
        name.strip_prefix(**prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })?;
    Some(format!(
        "`{name}` is an engine event (`{prefix}.*` is reserved for outcomes the engine \
         reports); input may not send it: send an event of your own and handle that"
    ))
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
    /// The invoke id of the child protocol that sent it (SCXML's `invokeid`).
    pub invoke_id: Option<Arc<str>>,
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
            invoke_id: None,
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
            invoke_id: None,
        }
    }

    /// What `event.origin` reads: `external`, `internal`, `platform`, or the id of the child
    /// protocol that sent it.
    pub fn origin_value(&self) -> crate::base::value::Value {
        match (&self.origin, &self.invoke_id) {
            (Origin::Child, Some(id)) => crate::base::value::Value::String(id.clone()),
            (origin, _) => crate::base::value::Value::string(origin.origin_name()),
        }
    }

    /// `error.execution` for a failed expression, with `message` and `expression` as data.
    pub fn execution_error(
        machine: &Machine,
        error: &crate::pipeline::compile::expression::EvaluationError,
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

    /// `error.communication` for an event from a parent or child protocol that this protocol's
    /// `events:` refuses (undeclared, or data that does not conform): the event is not
    /// delivered, and this says so, with `event`, `from` and `message` as data.
    pub fn refused_message(machine: &Machine, event: &str, from: &str, message: String) -> Event {
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("event"), Value::string(event));
        data.insert(Arc::from("from"), Value::string(from));
        data.insert(Arc::from("message"), Value::string(message));
        Event::named(
            machine,
            "error.communication",
            Value::Map(Arc::new(data)),
            Origin::Platform,
        )
    }

    pub fn with_data(mut self, data: Value) -> Event {
        self.data = data;
        self
    }
}
