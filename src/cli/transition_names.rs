//! Transitions as a reader names them, `source → target (event)`, from the pointers the journal keeps.

use std::collections::HashMap;

use crate::compile::machine::{EventDescriptor, Machine, TransitionNode};

/// The names of one protocol's transitions, by pointer.
pub struct TransitionNames {
    by_pointer: HashMap<String, String>,
}

impl TransitionNames {
    /// The names of the transitions of the protocol recorded at `path` with `text`; none when the
    /// text no longer compiles (a library it reads changed or went), so pointers show instead.
    pub fn of_recorded(path: &str, text: Option<&str>) -> TransitionNames {
        let machine = text.and_then(|text| {
            let loaded = crate::load::load_text(path, text.to_string()).ok()?;
            crate::compile::compile(&loaded).ok()
        });
        let by_pointer = machine
            .map(|machine| {
                machine
                    .transitions
                    .iter()
                    .map(|transition| (transition.pointer.clone(), name(&machine, transition)))
                    .collect()
            })
            .unwrap_or_default();
        TransitionNames { by_pointer }
    }

    /// The transition's name, or its pointer when the protocol has no transition there (a
    /// child protocol's, or the protocol could not be compiled).
    pub fn name<'a>(&'a self, pointer: &'a str) -> &'a str {
        self.by_pointer.get(pointer).map_or(pointer, String::as_str)
    }
}

/// `source → target (event)`: targets joined by `, `; a targetless transition stays in its source
/// (`source (event)`); the trigger is the event descriptors, `after` for a timer, `always` for an
/// eventless transition, `initial` for a compound state's initial one.
fn name(machine: &Machine, transition: &TransitionNode) -> String {
    let source = &machine.state(transition.source).id;
    let targets: Vec<&str> = transition
        .targets
        .iter()
        .map(|target| &*machine.state(*target).id)
        .collect();
    let trigger = if transition.pointer.contains("/after/") {
        "after".to_string()
    } else if transition.events.is_empty() {
        let initial = transition.pointer.ends_with("/initial");
        if initial { "initial" } else { "always" }.to_string()
    } else {
        transition
            .events
            .iter()
            .map(|descriptor| match descriptor {
                EventDescriptor::Any => "*",
                EventDescriptor::Prefix(prefix) => prefix,
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    if targets.is_empty() {
        format!("{source} ({trigger})")
    } else {
        format!("{source} → {} ({trigger})", targets.join(", "))
    }
}
