//! `check` of `send ... to: <invoke id>`: judged by the child's protocol, and by when the child runs (after its state's entry actions).

use super::{Lint, ProducedEvent, Rule, Usage, states_in_document_order};
use crate::base::diagnostic::did_you_mean;
use crate::pipeline::compile::machine::{EventDescriptor, Machine};
use crate::pipeline::load::source::Part;

/// The most of a child's event names a help lists.
const MAX_NAMES_LISTED: usize = 12;

/// Why a child does not take an event its parent sends it.
#[derive(Clone, Copy)]
enum Refusal {
    /// An engine event: never delivered between parent and child.
    EngineEvent,
    /// The child declares `events:` without it.
    NotDeclared,
    /// No transition of the child matches it.
    NotHandled,
}

impl Lint<'_> {
    /// Each send to a child: the child must take the event, and must be running when it is
    /// sent (not so in the entry actions of the state that invokes it).
    pub(super) fn sends_to_children(&mut self, usage: &Usage) {
        for produced in &usage.produced {
            let Some(to) = produced.to.as_deref() else {
                continue;
            };
            if let Some(child) = invoked_machine(self.machine, to) {
                self.send_to_child(produced, to, child);
            }
        }
        self.sends_before_children_start(usage);
    }

    fn send_to_child(&mut self, produced: &ProducedEvent, to: &str, child: &Machine) {
        let event = produced.name.as_str();
        let Some(refusal) = refusal(child, event) else {
            return;
        };
        let child_name = format!("`{}` ({})", child.id, child.source_path);
        let (message, known) = match refusal {
            Refusal::EngineEvent => (
                format!(
                    "event `{event}` is sent to `{to}`, but an engine event is never delivered \
                     between parent and child: this protocol gets `error.communication` instead"
                ),
                handled_names(child),
            ),
            Refusal::NotDeclared => (
                format!(
                    "event `{event}` is sent to `{to}`, whose protocol {child_name} does not \
                     declare it under `events:`: the child refuses it, and this protocol gets \
                     `error.communication`"
                ),
                child
                    .declared_events
                    .as_ref()
                    .map(|declared| declared.names().collect())
                    .unwrap_or_default(),
            ),
            Refusal::NotHandled => (
                format!(
                    "event `{event}` is sent to `{to}`, but no transition of its protocol \
                     {child_name} handles it"
                ),
                handled_names(child),
            ),
        };
        let suggestion = match refusal {
            // An engine event's name is no typo of the child's events.
            Refusal::EngineEvent => None,
            _ => did_you_mean(event, known.iter().copied()),
        };
        let help = suggestion.unwrap_or_else(|| {
            let remedy = match refusal {
                Refusal::EngineEvent => "send an event of your own".to_string(),
                _ => format!("send an event the child takes, or make {child_name} take `{event}`"),
            };
            if known.is_empty() {
                return remedy;
            }
            let more = known.len().saturating_sub(MAX_NAMES_LISTED);
            let mut listed = known
                .iter()
                .take(MAX_NAMES_LISTED)
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                listed.push_str(&format!(" and {more} more"));
            }
            format!("{remedy}; the child takes {listed}")
        });
        self.warn(Rule::Event, &produced.pointer, Part::Value, message, help);
    }

    /// A send to a child in the entry actions of the state that invokes it: the child starts
    /// once the state's entry is done, so the event finds no child to take it.
    fn sends_before_children_start(&mut self, usage: &Usage) {
        for (pointer, state) in states_in_document_order(&self.loaded.protocol) {
            let entry = format!("{pointer}/entry/");
            let token = pointer.rsplit('/').next().unwrap_or_default();
            let id = token.replace("~1", "/").replace("~0", "~");
            for produced in &usage.produced {
                let Some(to) = produced.to.as_deref() else {
                    continue;
                };
                if !produced.pointer.starts_with(&entry)
                    || !state.invoke.iter().any(|invoke| invoke.id == to)
                {
                    continue;
                }
                let to_pointer = produced
                    .pointer
                    .strip_suffix("/send")
                    .map_or(produced.pointer.clone(), |send| format!("{send}/to"));
                self.warn(
                    Rule::Event,
                    &to_pointer,
                    Part::Value,
                    format!(
                        "`{}` is sent to `{to}` in the entry of state `{id}`, before `{to}` \
                         starts: a state's invokes start after its entry actions, so the send \
                         raises `error.communication`",
                        produced.name
                    ),
                    format!(
                        "send it once `{to}` runs: from a transition of `{id}` (on an event the \
                         child sends with `to: parent`, say), or invoke `{to}` in a state that \
                         encloses `{id}`"
                    ),
                );
            }
        }
    }
}

/// The compiled protocol of the invoke `id`, wherever a state invokes it.
fn invoked_machine<'a>(machine: &'a Machine, id: &str) -> Option<&'a Machine> {
    machine
        .states
        .iter()
        .flat_map(|state| &state.invokes)
        .find(|invoke| &*invoke.id == id)
        .map(|invoke| &*invoke.machine)
}

/// Why `child` would not take `event` from its parent; `None` when it would.
fn refusal(child: &Machine, event: &str) -> Option<Refusal> {
    if crate::base::event::refuse_platform_event(event).is_some() {
        return Some(Refusal::EngineEvent);
    }
    if let Some(declared) = &child.declared_events
        && declared.schema(event).is_none()
    {
        return Some(Refusal::NotDeclared);
    }
    let handled = child.transitions.iter().any(|transition| {
        transition
            .events
            .iter()
            .any(|descriptor| descriptor.matches(event))
    });
    (!handled).then_some(Refusal::NotHandled)
}

/// The event names the child's `on:` keys write, once each, in document order (not the
/// engine's, which a parent cannot send).
fn handled_names(child: &Machine) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for descriptor in child
        .transitions
        .iter()
        .flat_map(|transition| &transition.events)
    {
        if let EventDescriptor::Prefix(name) = descriptor
            && !names.contains(&&**name)
            && crate::base::event::refuse_platform_event(name).is_none()
        {
            names.push(name);
        }
    }
    names
}
