//! `start:` of a scenario: a legal configuration and a context, as the snapshot a resume restores.

use crate::base::snapshot::{SNAPSHOT_FORMAT, Snapshot};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};

use crate::base::model::scenario::Start;

/// The states `start.configuration` names with their ancestors, in document order, or why
/// that is not a configuration the protocol can be in (each problem once).
pub fn closed_configuration(
    machine: &Machine,
    states: &[String],
) -> Result<Vec<StateId>, Vec<String>> {
    let mut problems = Vec::new();
    let mut active = std::collections::BTreeSet::new();
    for name in states {
        let Some(state) = machine
            .state_id(name)
            .filter(|state| *state != StateId::ROOT)
        else {
            problems.push(format!("no state `{name}`"));
            continue;
        };
        if machine.state(state).is_history() {
            problems.push(format!(
                "`{name}` is a history state, which is never active: name the state it restores"
            ));
            continue;
        }
        active.insert(state);
        active.extend(machine.state(state).ancestors.iter().copied());
    }
    if active.is_empty() && problems.is_empty() {
        problems.push("the configuration names no state".to_string());
    }
    let name = |state: StateId| machine.state(state).id.to_string();
    for &state in &active {
        let node = machine.state(state);
        let children: Vec<StateId> = node
            .children
            .iter()
            .copied()
            .filter(|child| !machine.state(*child).is_history())
            .collect();
        let chosen: Vec<StateId> = children
            .iter()
            .copied()
            .filter(|c| active.contains(c))
            .collect();
        let list = |states: &[StateId]| {
            states
                .iter()
                .map(|state| format!("`{}`", name(*state)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match node.kind {
            StateKind::Root if chosen.len() > 1 => problems.push(format!(
                "only one top-level state can be active, not {}",
                list(&chosen)
            )),
            StateKind::Compound if chosen.is_empty() => problems.push(format!(
                "compound state `{}` needs one active child: add one of {}",
                node.id,
                list(&children)
            )),
            StateKind::Compound if chosen.len() > 1 => problems.push(format!(
                "only one child of compound state `{}` can be active, not {}",
                node.id,
                list(&chosen)
            )),
            StateKind::Parallel if chosen.len() < children.len() => {
                let missing: Vec<StateId> = children
                    .iter()
                    .copied()
                    .filter(|c| !active.contains(c))
                    .collect();
                problems.push(format!(
                    "every region of parallel state `{}` is active with it: add a state of {}",
                    node.id,
                    list(&missing)
                ));
            }
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(active
            .into_iter()
            .filter(|state| *state != StateId::ROOT)
            .collect())
    } else {
        Err(problems)
    }
}

/// Context names `start.context` sets that the protocol does not declare.
pub fn unknown_variables<'a>(machine: &Machine, start: &'a Start) -> Vec<&'a str> {
    start
        .context
        .keys()
        .filter(|name| {
            !machine
                .context
                .iter()
                .any(|(variable, _)| variable == *name)
        })
        .map(String::as_str)
        .collect()
}

/// The snapshot a run restores to begin at `start`: running, nothing pending.
pub fn start_snapshot(machine: &Machine, start: &Start) -> Result<Snapshot, String> {
    let configuration = closed_configuration(machine, &start.configuration)
        .map_err(|problems| format!("start: {}", problems.join("; ")))?;
    if let Some(name) = unknown_variables(machine, start).first() {
        return Err(format!(
            "start: the protocol declares no context variable `{name}`"
        ));
    }
    Ok(Snapshot {
        format: SNAPSHOT_FORMAT,
        protocol: machine.id.clone(),
        configuration: configuration
            .into_iter()
            .map(|state| machine.state(state).id.to_string())
            .collect(),
        context: start
            .context
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        history: Default::default(),
        running: true,
        outcome: None,
        timers: Vec::new(),
        effects: Vec::new(),
        retries: Vec::new(),
        invocations: 0,
        children: Vec::new(),
        maps: Vec::new(),
        deferred: Vec::new(),
    })
}
