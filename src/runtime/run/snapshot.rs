//! Snapshots: an instance as names and JSON, independent of the compiled indices, and its restore.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::Interpreter;
use super::algorithm::{Instance, Outcome};
use crate::base::state_set::StateSet;
use crate::base::value::Value;
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};

/// The snapshot layout this build writes; `restore` reads it and every older one.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// An instance between two macrosteps, by name: what a store keeps to resume a run.
///
/// `Interpreter::snapshot` fills the algorithm's part (configuration, context, history, running,
/// outcome). The driver fills `timers`, `effects` and `retries`, which only it knows. The
/// internal queue is not kept: it is always empty between macrosteps. Floats that are not finite
/// become `null` (JSON has no NaN).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The layout version, `SNAPSHOT_FORMAT` when written.
    pub format: u32,
    /// The protocol's `id`.
    pub protocol: String,
    /// Ids of the active states in document order, compound and parallel ancestors included.
    pub configuration: Vec<String>,
    /// Context variables by name, in declaration order.
    pub context: serde_json::Map<String, serde_json::Value>,
    /// Recorded history: history state id → ids of the states it restores.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub history: IndexMap<String, Vec<String>>,
    pub running: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SnapshotOutcome>,
    /// Delayed sends and `after` timers not fired yet (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<PendingTimer>,
    /// Effects started whose outcome had not arrived (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<InFlightEffect>,
    /// Retries used so far by effects still retrying (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<RetryCounter>,
    /// Effect invocations started so far, so a resumed run numbers on (filled by the driver).
    #[serde(default)]
    pub invocations: u64,
    /// Child protocols running for `invoke`s, each as its last committed step left it (filled
    /// by the driver), so a resumed parent resumes them where they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildSnapshot>,
    /// Maps whose completion had not been handled: each item's outcome so far and the items
    /// running (among `effects`), opaque to the store (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<serde_json::Value>,
    /// External events waiting in the run's inbox because an active state defers them, in
    /// arrival order (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<DeferredEvent>,
}

/// An event waiting in the inbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeferredEvent {
    pub event: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// The child protocol that sent it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_child: Option<String>,
    /// Its sender's number for it (`--events`: the input line), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<u64>,
}

/// A running child protocol in its parent's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSnapshot {
    /// The invoke's id.
    pub id: String,
    /// The child's bound inputs, in its declaration order.
    pub inputs: Vec<serde_json::Value>,
    /// The child's own step count at that snapshot.
    pub sequence: u64,
    /// When that step was committed (Unix milliseconds).
    pub committed_unix_milliseconds: u64,
    /// The child as it was (its own children inside).
    pub snapshot: Box<Snapshot>,
}

/// How the run ended, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOutcome {
    pub final_state: String,
    pub exit_code: u8,
    pub output: serde_json::Value,
}

/// A timer waiting for its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingTimer {
    /// The event it sends.
    pub event: String,
    /// The id `cancel` uses (`after.<state>.<index>` for `after` timers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_id: Option<String>,
    /// When it falls due: absolute, so a resumed run can tell which deadlines passed meanwhile.
    pub deadline_unix_milliseconds: u64,
    /// Its whole delay, for a resume that restarts timers.
    #[serde(default)]
    pub delay_milliseconds: u64,
    /// An `after` timer, matched only by its own transition.
    pub private: bool,
    /// Written as a deadline (a timestamp): every resume keeps `deadline_unix_milliseconds`,
    /// whatever its timer policy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub absolute: bool,
    /// The event's data (a `send` may carry some).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

/// An effect that was running when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlightEffect {
    /// The action's id.
    pub action: String,
    /// `exec`, `read_file`, a tool name, ...
    pub kind: String,
    /// The attempt that was running, from 1.
    pub attempt: u32,
    /// Each retrier's own attempt count then, so a resumed plan goes on from there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retriers: Vec<u32>,
    /// The request, opaque to the store: enough for the driver to start it again.
    pub request: serde_json::Value,
    /// Its invocation number in the run.
    #[serde(default)]
    pub invocation: u64,
    /// When it started (Unix milliseconds), for a resumed failure's `elapsed_ms`.
    #[serde(default)]
    pub started_unix_milliseconds: u64,
}

/// Attempts one retrier of one action has used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryCounter {
    pub action: String,
    /// The retrier's index in the action's `retry` list.
    pub retrier: u32,
    pub attempts: u32,
}

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

impl Snapshot {
    /// The snapshot as one JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The snapshot with the secrets the store masked (`labels`) put back: secret inputs from
    /// `inputs` (as supplied on resume), `env()` values read again (`crate::base::secrets`).
    pub fn with_secrets(
        self,
        labels: &[String],
        inputs: &[(String, String)],
    ) -> Result<Snapshot, String> {
        if labels.is_empty() {
            return Ok(self);
        }
        let mut json = self.to_json();
        crate::base::secrets::restore_json(&mut json, labels, inputs)?;
        serde_json::from_value(json).map_err(|error| error.to_string())
    }
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
                final_state: machine.state(outcome.final_state).id.to_string(),
                exit_code: outcome.exit_code,
                output: outcome.output.to_stored_json(),
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
        let mut instance = restore_instance(&machine, inputs.into(), snapshot)?;
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
        Some(outcome) => Some(Outcome {
            final_state: state("outcome", &outcome.final_state)?,
            exit_code: outcome.exit_code,
            output: Value::from_stored_json(&outcome.output),
        }),
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
