//! Transitions as a reader names them, `source → target (event)`, from the pointers the journal keeps.

use std::collections::HashMap;

/// The names of one protocol's transitions, by pointer.
pub struct TransitionNames {
    by_pointer: HashMap<String, String>,
}

impl TransitionNames {
    /// The names of the transitions of the protocol recorded at `path` with `text`; none when the
    /// text no longer compiles (a library it reads changed or went), so pointers show instead.
    pub fn of_recorded(path: &str, text: Option<&str>) -> TransitionNames {
        let machine = text.and_then(|text| {
            let loaded = crate::pipeline::load::load_text(path, text.to_string()).ok()?;
            crate::pipeline::compile::compile(&loaded).ok()
        });
        let by_pointer = machine
            .map(|machine| {
                machine
                    .transitions
                    .iter()
                    .map(|transition| {
                        (
                            transition.pointer.clone(),
                            machine.transition_name(transition),
                        )
                    })
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
