//! Which transitions coverage counts, and how a report names one: `source → target (event)`.

use crate::pipeline::compile::machine::{Machine, TransitionNode};

/// The transitions an author writes (not the implicit `initial` ones), in machine order.
pub fn coverable(machine: &Machine) -> impl Iterator<Item = &TransitionNode> {
    machine.transitions.iter().filter(|transition| {
        !transition.pointer.ends_with("/initial") && !transition.pointer.ends_with("/target")
    })
}

/// `source → target (event) [guard]`: what the author sees in the protocol.
pub fn label(machine: &Machine, transition: &TransitionNode) -> String {
    let mut text = machine.transition_name(transition);
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
