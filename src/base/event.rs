//! Events: a name (with its compiled type when known), data, and where it came from.

use std::sync::Arc;

use crate::base::ids::EventType;
use crate::base::value::Value;

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
    /// What `event.origin` reads: `external`, `internal`, `platform`, or the id of the child
    /// protocol that sent it.
    pub fn origin_value(&self) -> crate::base::value::Value {
        match (&self.origin, &self.invoke_id) {
            (Origin::Child, Some(id)) => crate::base::value::Value::String(id.clone()),
            (origin, _) => crate::base::value::Value::string(origin.origin_name()),
        }
    }

    pub fn with_data(mut self, data: Value) -> Event {
        self.data = data;
        self
    }
}

/// One event descriptor of a transition: `*`, or a dot-separated prefix.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventDescriptor {
    Any,
    Prefix(Arc<str>),
}

impl EventDescriptor {
    pub fn parse(text: &str) -> EventDescriptor {
        // SCXML allows a trailing `.*` (`error.*`), meaning the same as `error`.
        match text.trim_end_matches(".*") {
            "*" | "" => EventDescriptor::Any,
            prefix => EventDescriptor::Prefix(Arc::from(prefix)),
        }
    }

    /// The prefixes of the descriptors other than `*` that match an event called `event`: each
    /// of its dot-separated prefixes (`a`, `a.b`), then the whole name, so matching is a lookup.
    pub fn prefixes_matching(event: &str) -> impl Iterator<Item = &str> {
        event
            .match_indices('.')
            .map(|(end, _)| &event[..end])
            .chain(std::iter::once(event))
    }

    /// SCXML matching: the descriptor's tokens are a prefix of the event name's tokens.
    pub fn matches(&self, event: &str) -> bool {
        match self {
            EventDescriptor::Any => true,
            EventDescriptor::Prefix(prefix) => {
                event == &**prefix
                    || (event.starts_with(&**prefix)
                        && event.as_bytes().get(prefix.len()) == Some(&b'.'))
            }
        }
    }
}
