//! Taking an interpreter's snapshot and restoring one: the instance's configuration, context, history and children, checked against the machine.

use std::sync::Arc;

use super::Interpreter;
use super::algorithm::{Failure, Instance, Outcome};
use crate::base::snapshot::{SNAPSHOT_FORMAT, Snapshot, SnapshotFailure, SnapshotOutcome};
use crate::base::state_set::StateSet;
use crate::base::value::Value;
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};

/// Why a snapshot cannot be restored into a machine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "{path}: the snapshot has format {found}, newer than this protocol-run reads ({supported})"
    )]
    UnsupportedFormat {
        path: String,
        found: u32,
        supported: u32,
    },
    #[error("{path}: the snapshot is of protocol `{snapshot}`, but this protocol is `{machine}`")]
    OtherProtocol {
        path: String,
        snapshot: String,
        machine: String,
    },
    #[error(
        "{path}: the snapshot's {part} names the state `{state}`, which the protocol does not have"
    )]
    UnknownState {
        path: String,
        part: String,
        state: String,
    },
    #[error(
        "{path}: the snapshot's context has the variable `{variable}`, which the protocol does not declare"
    )]
    UnknownVariable { path: String, variable: String },
    #[error("{path}: the snapshot records history for `{state}`, which is not a history state")]
    NotHistory { path: String, state: String },
    #[error("{path}: the snapshot's configuration is not one this protocol can be in: {reason}")]
    InvalidConfiguration { path: String, reason: String },
}

impl Interpreter {
    /// The instance by name. Call it between macrosteps (after `start` or `handle` returned).
    pub fn snapshot(&self) -> Snapshot {
        let machine = &*self.machine;
        let instance = &self.instance;
        let state_names = |set: &StateSet| -> Vec<String> {
            set.iter()
                .map(|state| machine.state(state).id.to_string())
                .collect()
        };
        let mut history: Vec<&(StateId, StateSet)> = instance.history.iter().collect();
        history.sort_by_key(|(state, _)| *state);
        Snapshot {
            format: SNAPSHOT_FORMAT,
            protocol: machine.id.clone(),
            configuration: state_names(&instance.configuration),
            context: machine
                .context
                .iter()
                .zip(&instance.context)
                .map(|((name, _), value)| (name.clone(), value.to_stored_json()))
                .collect(),
            history: history
                .into_iter()
                .map(|(state, recorded)| {
                    (machine.state(*state).id.to_string(), state_names(recorded))
                })
                .collect(),
            running: instance.running,
            outcome: instance.outcome.as_ref().map(|outcome| SnapshotOutcome {
                final_state: outcome.state_name(machine).map(|state| state.to_string()),
                exit_code: outcome.exit_code,
                output: outcome.output.to_stored_json(),
                failure: outcome.failure.as_ref().map(|failure| SnapshotFailure {
                    event: failure.event.to_string(),
                    message: failure.message.clone(),
                    states: failure
                        .states
                        .iter()
                        .map(|state| state.to_string())
                        .collect(),
                }),
            }),
            timers: Vec::new(),
            effects: Vec::new(),
            retries: Vec::new(),
            invocations: 0,
            children: Vec::new(),
            maps: Vec::new(),
            deferred: Vec::new(),
        }
    }

    /// An instance put back as `snapshot` describes it, without running any action: no entry
    /// actions, no timers started (the driver re-arms `snapshot.timers`), no invokes.
    ///
    /// Refuses a snapshot naming a state or variable the machine does not have, or whose
    /// configuration the machine could not be in. A variable the machine declares and the
    /// snapshot lacks keeps its initial value.
    pub fn restore(
        machine: Arc<Machine>,
        inputs: Vec<Value>,
        snapshot: &Snapshot,
    ) -> Result<Interpreter, RestoreError> {
        let mut instance =
            restore_instance(&machine, super::algorithm::shared_inputs(inputs), snapshot)?;
        instance.note_quiet_events(&machine);
        Ok(Interpreter {
            machine,
            instance,
            limits: Default::default(),
        })
    }
}

fn restore_instance(
    machine: &Machine,
    inputs: Arc<[Value]>,
    snapshot: &Snapshot,
) -> Result<Instance, RestoreError> {
    let path = || machine.source_path.clone();
    if snapshot.format > SNAPSHOT_FORMAT {
        return Err(RestoreError::UnsupportedFormat {
            path: path(),
            found: snapshot.format,
            supported: SNAPSHOT_FORMAT,
        });
    }
    if snapshot.protocol != machine.id {
        return Err(RestoreError::OtherProtocol {
            path: path(),
            snapshot: snapshot.protocol.clone(),
            machine: machine.id.clone(),
        });
    }
    let state = |part: &str, id: &str| {
        machine
            .state_id(id)
            .filter(|state| *state != StateId::ROOT)
            .ok_or_else(|| RestoreError::UnknownState {
                path: path(),
                part: part.to_string(),
                state: id.to_string(),
            })
    };
    let mut instance = Instance::new(machine, inputs);
    for id in &snapshot.configuration {
        instance.configuration.insert(state("configuration", id)?);
    }
    if snapshot.running && instance.configuration.is_empty() {
        return Err(RestoreError::InvalidConfiguration {
            path: path(),
            reason: "a running instance needs active states".to_string(),
        });
    }
    check_configuration(machine, &instance.configuration).map_err(|reason| {
        RestoreError::InvalidConfiguration {
            path: path(),
            reason,
        }
    })?;
    for (name, value) in &snapshot.context {
        let slot = machine
            .context
            .iter()
            .position(|(variable, _)| variable == name)
            .ok_or_else(|| RestoreError::UnknownVariable {
                path: path(),
                variable: name.clone(),
            })?;
        instance.context[slot] = Value::from_stored_json(value);
    }
    for (history_id, recorded_ids) in &snapshot.history {
        let history_state = state("history", history_id)?;
        if !machine.state(history_state).is_history() {
            return Err(RestoreError::NotHistory {
                path: path(),
                state: history_id.clone(),
            });
        }
        let mut recorded = StateSet::with_capacity(machine.states.len());
        for id in recorded_ids {
            recorded.insert(state(&format!("history of `{history_id}`"), id)?);
        }
        instance.history.push((history_state, recorded));
    }
    instance.running = snapshot.running;
    instance.outcome = match &snapshot.outcome {
        Some(outcome) => Some(Box::new(Outcome {
            final_state: match &outcome.final_state {
                Some(final_state) => Some(state("outcome", final_state)?),
                None => None,
            },
            exit_code: outcome.exit_code,
            output: Value::from_stored_json(&outcome.output),
            failure: outcome.failure.as_ref().map(|failure| {
                Arc::new(Failure {
                    event: Arc::from(failure.event.as_str()),
                    message: failure.message.clone(),
                    states: failure
                        .states
                        .iter()
                        .map(|state| Arc::from(state.as_str()))
                        .collect(),
                })
            }),
        })),
        None => None,
    };
    Ok(instance)
}

/// SCXML's legal state configuration: every active state's parent is active, an active compound
/// state has exactly one active child, an active parallel state has all of its regions, and no
/// history pseudo-state is active. An empty configuration (a run that ended) is legal.
fn check_configuration(machine: &Machine, configuration: &StateSet) -> Result<(), String> {
    if configuration.is_empty() {
        return Ok(());
    }
    let name = |state: StateId| &*machine.state(state).id;
    let active_children = |state: StateId| {
        machine
            .state(state)
            .children
            .iter()
            .copied()
            .filter(|child| !machine.state(*child).is_history() && configuration.contains(*child))
    };
    if active_children(StateId::ROOT).count() != 1 {
        return Err("exactly one top-level state must be active".to_string());
    }
    for state in configuration.iter() {
        let node = machine.state(state);
        if node.is_history() {
            return Err(format!("`{}` is a history state", name(state)));
        }
        if let Some(parent) = node.parent
            && parent != StateId::ROOT
            && !configuration.contains(parent)
        {
            return Err(format!(
                "`{}` is active but its parent `{}` is not",
                name(state),
                name(parent)
            ));
        }
        match node.kind {
            StateKind::Compound if active_children(state).count() != 1 => {
                return Err(format!(
                    "the compound state `{}` must have exactly one active child",
                    name(state)
                ));
            }
            StateKind::Parallel => {
                if let Some(region) = node.children.iter().copied().find(|child| {
                    !machine.state(*child).is_history() && !configuration.contains(*child)
                }) {
                    return Err(format!(
                        "the region `{}` of the parallel state `{}` is not active",
                        name(region),
                        name(state)
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::event::{Event, Origin};
    use crate::runtime::run::RecordingHost;

    fn machine() -> Arc<Machine> {
        let yaml = "id: tiny\ncontext: { n: 1.5 }\nstates:\n  a: { on: { go: b } }\n  \
                    b: { type: final, exit_code: 4, output: { n: \"${n}\" } }\n";
        let loaded = crate::pipeline::load::load_text("tiny.yaml", yaml.to_string()).unwrap();
        Arc::new(crate::pipeline::compile::compile(&loaded).unwrap())
    }

    #[test]
    fn a_finished_run_restores_with_its_outcome_and_no_states() {
        let machine = machine();
        let mut interpreter = Interpreter::new(machine.clone(), Vec::new());
        let mut host = RecordingHost::default();
        interpreter.start(&mut host).unwrap();
        let go = Event::named(&machine, "go", Value::Null, Origin::External);
        interpreter.handle(&go, &mut host).unwrap();
        let snapshot = interpreter.snapshot();
        assert!(snapshot.configuration.is_empty() && !snapshot.running);
        let restored = Interpreter::restore(machine, Vec::new(), &snapshot).unwrap();
        assert_eq!(restored.outcome(), interpreter.outcome());
        assert_eq!(restored.context_value("n"), Some(&Value::Float(1.5)));
    }

    #[test]
    fn a_running_snapshot_without_states_or_of_a_later_format_is_refused() {
        let machine = machine();
        let mut snapshot = Interpreter::new(machine.clone(), Vec::new()).snapshot();
        snapshot.running = true;
        let error = Interpreter::restore(machine.clone(), Vec::new(), &snapshot)
            .err()
            .unwrap();
        assert!(matches!(error, RestoreError::InvalidConfiguration { .. }));
        snapshot.configuration = vec!["a".to_string()];
        snapshot.format = SNAPSHOT_FORMAT + 1;
        let error = Interpreter::restore(machine, Vec::new(), &snapshot)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "tiny.yaml: the snapshot has format 2, newer than this protocol-run reads (1)"
        );
    }
}
