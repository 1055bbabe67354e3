//! `<finalize>` moved onto the transitions that take the invoked child's events, where that is exact.
//!
//! SCXML runs an invocation's `<finalize>` when an event from that child is about to be
//! processed, before transitions are selected. The protocol has no such hook, so the actions
//! are prepended (behind a check that the event is the child's) to every transition that can
//! take an event from the child. That is the same machine only when:
//! - some transition takes every such event (the invoking state or one around it has a
//!   transition without a guard for each event name the child sends, and for
//!   `done.invoke.<id>`), since otherwise SCXML would still run the finalize;
//! - no parallel state can make two transitions take one event, which would run it twice;
//! - no guard those transitions are selected by reads a variable it assigns;
//! - no `exit` action of the states those transitions can leave reads or writes a variable it
//!   touches (they now run before it, not after);
//! - when it can fail, nothing can tell its failure from SCXML's: a failure now also skips the
//!   transition's own actions, and its `error.execution` now follows events the exits raised.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// One `<finalize>` waiting to be placed on transitions once the whole document is converted.
pub(super) struct Finalizer {
    /// The id of the state whose `<invoke>` it belongs to.
    pub state: String,
    pub invoke: String,
    pub actions: Vec<Value>,
    /// The events the child sends to its parent; `None` when one is computed.
    pub child_events: Option<Vec<String>>,
    pub line: u32,
    pub column: u32,
}

/// Prepends the finalize actions to every transition that can take an event from its child, or
/// says why the result would differ from SCXML. `variables` are the document's data ids.
pub(super) fn apply(
    finalizer: &Finalizer,
    states: &mut Map<String, Value>,
    variables: &HashSet<String>,
) -> Result<(), String> {
    let invoke = &finalizer.invoke;
    if any_state(states, &|state| {
        state.get("type").and_then(Value::as_str) == Some("parallel")
    }) {
        return Err(
            "cannot be imported in a document with <parallel> states: SCXML runs it once per event, but the protocol runs it with each transition that takes the event, and parallel regions can take one event with several transitions"
            .to_string());
    }
    let Some(chain) = path_to(states, &finalizer.state) else {
        return Err(format!("the state `{}` was not converted", finalizer.state));
    };
    // `None`: any event name, since the child computes one.
    let events: Option<Vec<String>> = finalizer.child_events.clone().map(|mut events| {
        events.push(format!("done.invoke.{invoke}"));
        events
    });
    let can_take = |key: &str| match &events {
        None => true,
        Some(events) => key
            .split_whitespace()
            .any(|descriptor| events.iter().any(|event| matches(descriptor, event))),
    };

    // Coverage: every event from the child is taken by a transition, so the actions run.
    let uncovered: Vec<String> = match &events {
        None if chain_has_unguarded(states, &chain, &|descriptor| descriptor == "*") => Vec::new(),
        None => vec!["any event (the child computes an event name)".to_string()],
        Some(events) => events
            .iter()
            .filter(|event| {
                !chain_has_unguarded(states, &chain, &|descriptor| matches(descriptor, event))
            })
            .map(|event| format!("`{event}`"))
            .collect(),
    };
    if !uncovered.is_empty() {
        return Err(format!(
            "cannot be imported: SCXML runs it for every event from the child, even one no transition takes, but the protocol can only run it with a transition; give `{}` (or a state around it) a transition without `cond` for {}",
            finalizer.state,
            uncovered.join(", ")
        ));
    }

    let assigned = assigned_variables(&finalizer.actions);
    let mut touched: HashSet<String> = assigned.clone();
    for action in &finalizer.actions {
        touched.extend(
            mentioned(action)
                .into_iter()
                .filter(|name| variables.contains(name)),
        );
    }
    let can_fail = !finalizer.actions.is_empty();

    // The states active while the child runs: the invoking state, those around it, and those
    // inside it. Only their transitions can take the child's events, and only they can exit.
    let mut relevant: Vec<Vec<String>> = (1..=chain.len())
        .map(|length| chain[..length].to_vec())
        .collect();
    if let Some(state) = state_at(states, &chain) {
        descendants(state, &chain, &mut relevant);
    }
    for path in &relevant {
        let Some(state) = state_at(states, path) else {
            continue;
        };
        let id = path.last().map_or("", String::as_str);
        if let Some(exit) = state.get("exit") {
            if let Some(name) = first_mention(exit, &touched) {
                return Err(format!(
                    "cannot be imported: the `exit` actions of `{id}` use `{name}`, which it uses too; SCXML runs the finalize before the states exit, the protocol with the transition's actions, after them"
                ));
            }
            if can_fail && emits_events(exit) {
                return Err(format!(
                    "cannot be imported: the `exit` actions of `{id}` raise or send events, and an `error.execution` from the finalize would follow them instead of preceding them"
                ));
            }
        }
        for (key, transitions) in state
            .get("on")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if !can_take(key) {
                continue;
            }
            for transition in alternatives(transitions) {
                if let Some(guard) = transition.get("guard")
                    && let Some(name) = first_mention(guard, &assigned)
                {
                    return Err(format!(
                        "cannot be imported: the condition of the `{key}` transition of `{id}` reads `{name}`, which the finalize assigns; SCXML assigns it before choosing the transition, the protocol only when running it"
                    ));
                }
                if can_fail && transition.get("actions").is_some() {
                    return Err(format!(
                        "cannot be imported: if it failed, the protocol would also skip the actions of the `{key}` transition of `{id}`, which run in SCXML; move those actions into the target's <onentry>"
                    ));
                }
            }
        }
    }

    let guarded = Value::Object(Map::from_iter([
        (
            "if".to_string(),
            Value::String(format!(
                "event.invokeid == '{invoke}' || event.name == 'done.invoke.{invoke}'"
            )),
        ),
        ("then".to_string(), Value::Array(finalizer.actions.clone())),
    ]));
    for path in &relevant {
        let Some(on) = state_at_mut(states, path)
            .and_then(|state| state.get_mut("on"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (key, transitions) in on.iter_mut() {
            if can_take(key) {
                prepend(transitions, &guarded);
            }
        }
    }
    Ok(())
}

/// Whether an event descriptor matches an event name (SCXML's token-prefix rule).
pub(super) fn matches(descriptor: &str, event: &str) -> bool {
    let descriptor = descriptor.strip_suffix(".*").unwrap_or(descriptor);
    descriptor == "*"
        || event == descriptor
        || event
            .strip_prefix(descriptor)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The transitions of one `on` entry, each as written (a target string or a mapping).
fn alternatives(transitions: &Value) -> Vec<&Value> {
    match transitions {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    }
}

/// Whether the state at the end of `chain`, or one around it, has a transition without a guard
/// whose event descriptors satisfy `accepts`.
fn chain_has_unguarded(
    states: &Map<String, Value>,
    chain: &[String],
    accepts: &dyn Fn(&str) -> bool,
) -> bool {
    (1..=chain.len()).any(|length| {
        state_at(states, &chain[..length])
            .and_then(|state| state.get("on"))
            .and_then(Value::as_object)
            .is_some_and(|on| {
                on.iter().any(|(key, transitions)| {
                    key.split_whitespace().any(accepts)
                        && alternatives(transitions)
                            .iter()
                            .any(|transition| transition.get("guard").is_none())
                })
            })
    })
}

fn any_state(states: &Map<String, Value>, test: &dyn Fn(&Value) -> bool) -> bool {
    states.values().any(|state| {
        test(state)
            || state
                .get("states")
                .and_then(Value::as_object)
                .is_some_and(|children| any_state(children, test))
    })
}

/// The ids from a top-level state down to `id`.
fn path_to(states: &Map<String, Value>, id: &str) -> Option<Vec<String>> {
    for (key, state) in states {
        if key == id {
            return Some(vec![key.clone()]);
        }
        if let Some(mut path) = state
            .get("states")
            .and_then(Value::as_object)
            .and_then(|children| path_to(children, id))
        {
            path.insert(0, key.clone());
            return Some(path);
        }
    }
    None
}

fn state_at<'v>(states: &'v Map<String, Value>, path: &[String]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    let state = states.get(first)?;
    if rest.is_empty() {
        return Some(state);
    }
    state_at(state.get("states")?.as_object()?, rest)
}

fn state_at_mut<'v>(states: &'v mut Map<String, Value>, path: &[String]) -> Option<&'v mut Value> {
    let (first, rest) = path.split_first()?;
    let state = states.get_mut(first)?;
    if rest.is_empty() {
        return Some(state);
    }
    state_at_mut(state.get_mut("states")?.as_object_mut()?, rest)
}

/// Adds the path of every state inside `state` (at `path`) to `paths`.
fn descendants(state: &Value, path: &[String], paths: &mut Vec<Vec<String>>) {
    for (id, child) in state
        .get("states")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut child_path = path.to_vec();
        child_path.push(id.clone());
        descendants(child, &child_path, paths);
        paths.push(child_path);
    }
}

/// Puts `action` first in the actions of each transition of an `on` entry.
fn prepend(transitions: &mut Value, action: &Value) {
    match transitions {
        Value::Array(items) => {
            for item in items {
                prepend(item, action);
            }
        }
        Value::String(target) => {
            let mut transition = Map::new();
            transition.insert("target".into(), Value::String(std::mem::take(target)));
            transition.insert("actions".into(), Value::Array(vec![action.clone()]));
            *transitions = Value::Object(transition);
        }
        Value::Object(transition) => match transition.get_mut("actions") {
            Some(Value::Array(actions)) => actions.insert(0, action.clone()),
            _ => {
                transition.insert("actions".into(), Value::Array(vec![action.clone()]));
            }
        },
        _ => {}
    }
}

/// The variables `assign` actions (at any depth) write.
fn assigned_variables(actions: &[Value]) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut pending: Vec<&Value> = actions.iter().collect();
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(assignment)) = map.get("assign") {
                    names.extend(assignment.keys().cloned());
                }
                pending.extend(map.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    names
}

/// Every bare name in a value's strings and mapping keys: a word not preceded by `.`, so
/// `event.data.x` mentions `event` but not `x`. It may see names in string literals too, which
/// only makes the check stricter.
fn mentioned(value: &Value) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(text) => names.extend(bare_names(text)),
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    names.extend(bare_names(key));
                    pending.push(item);
                }
            }
            _ => {}
        }
    }
    names
}

fn bare_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    let mut after_dot = false;
    let mut previous = ' ';
    for character in text.chars().chain([' ']) {
        if character.is_ascii_alphanumeric() || character == '_' {
            if word.is_empty() {
                after_dot = previous == '.';
            }
            word.push(character);
        } else if !word.is_empty() {
            if !after_dot && !word.starts_with(|first: char| first.is_ascii_digit()) {
                names.push(std::mem::take(&mut word));
            }
            word.clear();
        }
        if !character.is_whitespace() {
            previous = character;
        }
    }
    names
}

fn first_mention(value: &Value, names: &HashSet<String>) -> Option<String> {
    let mut found: Vec<String> = mentioned(value)
        .into_iter()
        .filter(|name| names.contains(name))
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Whether actions raise or send anything, at any depth.
fn emits_events(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("raise") || map.contains_key("send") || map.values().any(emits_events)
        }
        Value::Array(items) => items.iter().any(emits_events),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_bare_names_but_not_members() {
        let names = bare_names("event.data.x + y * size(z) > 2 && event . data.w");
        assert_eq!(names, ["event", "y", "size", "z", "event"]);
    }

    #[test]
    fn matches_descriptors_by_token_prefix() {
        assert!(matches("*", "done.invoke.kid"));
        assert!(matches("done", "done.invoke.kid"));
        assert!(matches("done.invoke.*", "done.invoke.kid"));
        assert!(!matches("done.inv", "done.invoke.kid"));
        assert!(matches("pong", "pong"));
    }
}
