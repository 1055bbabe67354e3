//! Which transitions coverage counts, and how a report names one: `source → target (event)`.

use crate::compile::machine::{EventDescriptor, Machine, TransitionNode};

/// The transitions an author writes (not the implicit `initial` ones), in machine order.
pub fn coverable(machine: &Machine) -> impl Iterator<Item = &TransitionNode> {
    machine.transitions.iter().filter(|transition| {
        !transition.pointer.ends_with("/initial") && !transition.pointer.ends_with("/target")
    })
}

/// `source → target (event) [guard]`: what the author sees in the protocol.
pub fn label(machine: &Machine, transition: &TransitionNode) -> String {
    let source = &machine.state(transition.source).id;
    let targets: Vec<&str> = transition
        .targets
        .iter()
        .map(|target| &*machine.state(*target).id)
        .collect();
    let events: Vec<&str> = transition
        .events
        .iter()
        .map(|event| match event {
            EventDescriptor::Any => "*",
            EventDescriptor::Prefix(prefix) => prefix,
        })
        .collect();
    let trigger = if events.is_empty() {
        "always".to_string()
    } else if transition.pointer.contains("/after/") {
        "after".to_string()
    } else {
        events.join(" ")
    };
    let mut text = if targets.is_empty() {
        format!("{source} ({trigger})")
    } else {
        format!("{source} → {} ({trigger})", targets.join(", "))
    };
    if let Some(guard) = &transition.guard {
        text.push_str(&format!(" [{}]", guard.text));
    }
    text
}

/// The label of the transition at `pointer`, or the pointer itself when none is there.
pub fn label_of(machine: &Machine, pointer: &str) -> String {
    machine
        .transitions
        .iter()
        .find(|transition| transition.pointer == pointer)
        .map_or_else(
            || pointer.to_string(),
            |transition| label(machine, transition),
        )
}
