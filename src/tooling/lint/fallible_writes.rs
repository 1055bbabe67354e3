//! Eventless guards that may decide on data an action on the way into their state failed to write.

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;

use super::{Lint, Rule, free_names, states_in_document_order};
use crate::base::model::action::Action;
use crate::base::model::transition::TransitionSpec;
use crate::base::model::{self, ErrorMode, Transitions};
use crate::pipeline::load::source::Part;
use crate::pipeline::load::yaml::escape_pointer_token;

/// An assignment that may fail, and so leave its variable as it was.
struct FallibleWrite {
    variable: String,
    /// Where the assignment is, to name its line.
    pointer: String,
}

/// A state of the document: its pointer, itself, and the ids of its ancestors.
struct Place<'a> {
    pointer: String,
    state: &'a model::State,
    ancestors: Vec<String>,
}

impl Lint<'_> {
    /// An eventless guard that reads a variable an assignment on the way into its state may fail
    /// to write (an expression that fails, a typed variable the value does not conform to).
    /// Under `errors: scxml` the guard is evaluated before `error.execution` is processed; under
    /// `errors: strict` only a targetless handler of the error lets the run reach the guard.
    pub(super) fn guards_after_fallible_writes(&mut self) {
        let protocol = &self.loaded.protocol;
        let places = places(protocol);
        let writes = writes_on_the_way_in(protocol, &places);
        for (id, place) in &places {
            let Some(always) = &place.state.always else {
                continue;
            };
            let scxml = protocol.errors == ErrorMode::Scxml;
            // Under `errors: strict` the run fails, or leaves, unless a handler stays.
            let staying_handler = if scxml {
                None
            } else {
                match targetless_error_handler(id, place, &places) {
                    Some(pointer) => Some(pointer),
                    None => continue,
                }
            };
            for (position, spec) in always.as_slice().iter().enumerate() {
                let TransitionSpec::Full(transition) = spec else {
                    continue;
                };
                let Some(guard) = &transition.guard else {
                    continue;
                };
                let Ok(program) = cel::Program::compile(guard) else {
                    continue;
                };
                let mut read = HashSet::new();
                free_names(program.expression(), &mut Vec::new(), &mut read);
                let Some(write) = writes
                    .get(id.as_str())
                    .into_iter()
                    .flatten()
                    .find(|write| read.contains(&write.variable))
                else {
                    continue;
                };
                let pointer = match always {
                    Transitions::One(_) => format!("{}/always/guard", place.pointer),
                    Transitions::Many(_) => format!("{}/always/{position}/guard", place.pointer),
                };
                let line = self.line_of(&write.pointer, Part::Key);
                let variable = &write.variable;
                let (message, help) = match &staying_handler {
                    None => (
                        format!(
                            "this eventless guard reads `{variable}`, which the assignment on line \
                             {line} may fail to write on the way into `{id}`; under `errors: scxml` \
                             the guard is evaluated before `error.execution` is processed, so it \
                             decides on the old value"
                        ),
                        format!(
                            "remove `errors: scxml` (by default the error is processed first, and \
                             fails the run when nothing handles it), or guard on a value only a \
                             successful assignment sets (a handler of `error.execution` in `{id}` \
                             does not help here: the guard is taken before it runs)"
                        ),
                    ),
                    Some(handler) => (
                        format!(
                            "this eventless guard reads `{variable}`, which the assignment on line \
                             {line} may fail to write on the way into `{id}`; the targetless \
                             `error.execution` handler on line {} lets the run stay, and the guard \
                             then decides on the old value",
                            self.line_of(handler, Part::Key)
                        ),
                        "give the handler a target that leaves the state, or guard on a value \
                         only a successful assignment sets"
                            .to_string(),
                    ),
                };
                self.warn(Rule::FallibleWrite, &pointer, Part::Value, message, help);
            }
        }
    }
}

/// Every state by id, in document order, with its pointer and ancestors (read off the
/// pointer: `/states/a/states/b` is `b` inside `a`).
fn places(protocol: &model::Protocol) -> IndexMap<String, Place<'_>> {
    states_in_document_order(protocol)
        .into_iter()
        .map(|(pointer, state)| {
            let mut ids: Vec<String> = pointer
                .split('/')
                .skip(1)
                .skip(1)
                .step_by(2)
                .map(|token| token.replace("~1", "/").replace("~0", "~"))
                .collect();
            let id = ids.pop().unwrap_or_default();
            ids.reverse();
            let place = Place {
                pointer,
                state,
                ancestors: ids,
            };
            (id, place)
        })
        .collect()
}

/// For each state, the fallible assignments that run on the way into it: its own entry actions,
/// and the actions of every transition that targets it or one of its descendants.
fn writes_on_the_way_in<'a>(
    protocol: &model::Protocol,
    places: &'a IndexMap<String, Place<'a>>,
) -> HashMap<&'a str, Vec<FallibleWrite>> {
    let typed = |variable: &str| protocol.types.contains_key(variable);
    let mut writes: HashMap<&str, Vec<FallibleWrite>> = HashMap::new();
    for (id, place) in places {
        let entry = writes.entry(id.as_str()).or_default();
        fallible_writes(
            &place.state.entry,
            &format!("{}/entry", place.pointer),
            &typed,
            entry,
        );
    }
    for place in places.values() {
        for (pointer, transition) in transitions_of(place) {
            let mut found = Vec::new();
            fallible_writes(
                &transition.actions,
                &format!("{pointer}/actions"),
                &typed,
                &mut found,
            );
            if found.is_empty() {
                continue;
            }
            for target in transition
                .target
                .iter()
                .flat_map(|targets| targets.as_slice())
            {
                let Some(target_place) = places.get(target) else {
                    continue;
                };
                // The target and the states around it whose eventless transitions then apply.
                for (id, _) in places.get_key_value(target).into_iter().chain(
                    target_place
                        .ancestors
                        .iter()
                        .filter_map(|ancestor| places.get_key_value(ancestor)),
                ) {
                    let list = writes.entry(id.as_str()).or_default();
                    list.extend(found.iter().map(|write| FallibleWrite {
                        variable: write.variable.clone(),
                        pointer: write.pointer.clone(),
                    }));
                }
            }
        }
    }
    writes
}

/// A state's transitions written in full, with their pointers: `on`, `always` and `after`.
fn transitions_of<'a>(place: &'a Place<'_>) -> Vec<(String, &'a model::Transition)> {
    let mut found = Vec::new();
    let mut add = |transitions: &'a Transitions, pointer: String| {
        for (position, spec) in transitions.as_slice().iter().enumerate() {
            if let TransitionSpec::Full(transition) = spec {
                let at = match transitions {
                    Transitions::One(_) => pointer.clone(),
                    Transitions::Many(_) => format!("{pointer}/{position}"),
                };
                found.push((at, transition));
            }
        }
    };
    for (events, transitions) in &place.state.on {
        let token = escape_pointer_token(events);
        add(transitions, format!("{}/on/{token}", place.pointer));
    }
    if let Some(always) = &place.state.always {
        add(always, format!("{}/always", place.pointer));
    }
    for (position, delayed) in place.state.after.iter().enumerate() {
        found.push((
            format!("{}/after/{position}", place.pointer),
            &delayed.transition,
        ));
    }
    found
}

/// The assignments in `actions` (and the blocks of their `if` and `foreach`) that may fail: a
/// value computed by an expression, a path below the variable, or a typed variable.
fn fallible_writes(
    actions: &[Action],
    pointer: &str,
    typed: &dyn Fn(&str) -> bool,
    found: &mut Vec<FallibleWrite>,
) {
    for (index, action) in actions.iter().enumerate() {
        let at = format!("{pointer}/{index}");
        match action {
            Action::Assign(assign) => {
                for (key, value) in &assign.assign {
                    let variable = key.split(['.', '[']).next().unwrap_or_default();
                    let fallible =
                        typed(variable) || variable.len() != key.len() || holds_text(value);
                    if fallible {
                        found.push(FallibleWrite {
                            variable: variable.to_string(),
                            pointer: format!("{at}/assign/{}", escape_pointer_token(key)),
                        });
                    }
                }
            }
            Action::If(branch) => {
                fallible_writes(&branch.then, &format!("{at}/then"), typed, found);
                for (position, elif) in branch.elif.iter().enumerate() {
                    let elif_pointer = format!("{at}/elif/{position}/then");
                    fallible_writes(&elif.then, &elif_pointer, typed, found);
                }
                fallible_writes(&branch.otherwise, &format!("{at}/else"), typed, found);
            }
            Action::Foreach(each) => {
                fallible_writes(&each.body, &format!("{at}/body"), typed, found);
            }
            _ => {}
        }
    }
}

/// Whether an assigned value holds text, which is an expression or template evaluated when it
/// runs (and may fail); numbers, booleans and null are constants.
fn holds_text(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(_) => true,
        serde_json::Value::Array(items) => items.iter().any(holds_text),
        serde_json::Value::Object(entries) => entries.values().any(holds_text),
        _ => false,
    }
}

/// A targetless transition on `error.execution` (or a descriptor covering it) of the state, an
/// ancestor or a descendant: it handles the error and leaves the run where it was.
fn targetless_error_handler(
    id: &str,
    place: &Place<'_>,
    places: &IndexMap<String, Place<'_>>,
) -> Option<String> {
    let related = places.iter().filter(|(other, other_place)| {
        *other == id
            || place.ancestors.iter().any(|ancestor| ancestor == *other)
            || other_place.ancestors.iter().any(|ancestor| ancestor == id)
    });
    for (_, other) in related {
        for (events, transitions) in &other.state.on {
            if !events.split_whitespace().any(covers_execution_error) {
                continue;
            }
            let token = escape_pointer_token(events);
            let pointer = format!("{}/on/{token}", other.pointer);
            let targetless = transitions.as_slice().iter().any(|spec| match spec {
                TransitionSpec::Full(transition) => transition.target.is_none(),
                TransitionSpec::Target(_) => false,
            });
            if targetless {
                return Some(pointer);
            }
        }
    }
    None
}

/// Whether an event descriptor matches `error.execution`.
fn covers_execution_error(descriptor: &str) -> bool {
    let descriptor = descriptor.trim_end_matches(".*");
    descriptor == "*" || descriptor == "error" || descriptor == "error.execution"
}
