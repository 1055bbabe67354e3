//! Events made against a machine: a name is resolved to its compiled type once, when the event is made.

use std::sync::Arc;

use super::expression::EvaluationError;
use super::machine::{EventType, Machine};
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::effects::{EffectOutcome, OutcomeEvents};

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

    /// `error.execution` for a failed expression, with `message` and `expression` as data.
    pub fn execution_error(machine: &Machine, error: &EvaluationError) -> Event {
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

    /// The event that reports an effect's outcome to the machine.
    pub fn of_outcome(machine: &Machine, outcome: EffectOutcome, events: &OutcomeEvents) -> Event {
        Event::of_type(machine, outcome.event_type(events), Origin::Outcome)
            .with_data(Value::Map(Arc::new(outcome.data)))
    }
}
