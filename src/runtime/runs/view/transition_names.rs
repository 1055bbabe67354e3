//! Transitions as a reader names them, `source → target (event)`, from the pointers the journal keeps.

use std::collections::HashMap;

/// The names of one protocol's transitions, by pointer.
pub struct TransitionNames {
    by_pointer: HashMap<String, String>,
}

impl TransitionNames {
    /// The names of the transitions of the protocol `record`'s run was recorded with, read in
    /// the texts kept with it (`resume::recorded_machine`); none when they are not kept or no
    /// longer compile (a library it reads, not kept, changed or went), so pointers show instead.
    pub fn of_recorded(
        store: &dyn crate::store::Store,
        record: &crate::store::RunRecord,
    ) -> TransitionNames {
        let machine = crate::runtime::runs::resume::recorded_machine(store, record);
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
