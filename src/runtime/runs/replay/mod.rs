//! Replaying recorded runs against a new version of their protocol (Temporal's replayer, for CI): each journaled event offered again in order to an instance of the new version, with no effect run and no real time, and the first step where it would do otherwise reported.

mod host;
pub mod steps;

use std::path::Path;
use std::sync::Arc;

use crate::base::diagnostic::Location;
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::source::Part;
use crate::pipeline::load::{LoadError, Loaded};
use crate::runtime::run::Interpreter;
use crate::store::{JournalEntry, RunRecord, Store, StoreError};
use host::QuietHost;
use steps::{After, Difference, End, StepSeen, TransitionSeen, transition_names};

/// The version replayed against: a protocol file loaded and compiled as `validate` does.
pub struct Version {
    pub loaded: Loaded,
    pub machine: Arc<Machine>,
}

impl Version {
    pub fn load(path: &Path) -> Result<Version, LoadError> {
        let (loaded, machine) = crate::pipeline::compile::set_aside::load_and_compile_file(path)?;
        Ok(Version {
            loaded,
            machine: Arc::new(machine),
        })
    }

    fn locate(&self, pointer: &str) -> Location {
        self.loaded.source.location(pointer, Part::Key)
    }

    /// Where the state `id` is written in this version, if it has it.
    fn locate_state(&self, id: &str) -> Option<Location> {
        let state = self.machine.state_id(id)?;
        Some(self.locate(&self.machine.state(state).pointer))
    }
}

/// What replaying one run found.
#[derive(Debug)]
pub enum Verdict {
    /// Every journaled step does the same in the new version.
    Clean { steps: usize },
    /// The first step that does not.
    Diverged(Box<Divergence>),
    /// The run cannot be replayed as the command was given (a secret input not supplied, a
    /// child protocol's run): why, and what to do.
    NotReplayable { reason: String },
}

/// The first step of a run the new version does otherwise.
#[derive(Debug)]
pub struct Divergence {
    pub step: u64,
    /// The event the step handled; `None` for the start.
    pub event: Option<String>,
    /// `transitions`, `states`, `end`; `inputs` when the new version cannot take the run's
    /// inputs, `state` when it cannot hold the state a forked run started in, `error` when it
    /// fails on the step.
    pub kind: &'static str,
    /// What the journal did and what the new version does, in a sentence.
    pub message: String,
    pub recorded: Option<StepSeen>,
    pub replayed: Option<StepSeen>,
    /// Where in the new version the difference is (the transition it takes, or the state
    /// concerned), and what the marker there says.
    pub location: Option<(Location, String)>,
}

/// Replays run `run_id` of `store` against `version`; its secret inputs (never stored) come
/// from `secrets`, by name. A run the store does not have is `StoreError::UnknownRun`.
pub fn replay(
    store: &dyn Store,
    version: &Version,
    run_id: &str,
    secrets: &[(String, String)],
) -> Result<Verdict, StoreError> {
    let Some(record) = store.run(run_id)? else {
        return Err(StoreError::UnknownRun {
            database: store.location(),
            run: run_id.to_string(),
        });
    };
    if let Some(parent) = &record.summary.parent {
        return Ok(Verdict::NotReplayable {
            reason: format!(
                "it is a child protocol of run `{parent}`: replay `{parent}`, whose journal holds \
                 what its children sent it"
            ),
        });
    }
    let inputs = match bind_inputs(&version.machine, &record, secrets) {
        Ok(inputs) => inputs,
        Err(Bound::SecretMissing(reason)) => return Ok(Verdict::NotReplayable { reason }),
        Err(Bound::Refused(message)) => {
            return Ok(diverged(Divergence {
                step: 0,
                event: None,
                kind: "inputs",
                message: format!("the new version cannot take the run's inputs: {message}"),
                recorded: None,
                replayed: None,
                location: None,
            }));
        }
    };
    let journal = store.journal(run_id)?;
    let Some(first) = journal.first() else {
        return Ok(Verdict::Clean { steps: 0 });
    };
    let replaying = Replaying {
        store,
        version,
        run_id,
        recorded_machine: recorded_machine(&record),
    };
    let mut host = QuietHost::default();
    let mut interpreter = match replaying.begin(first, inputs, secrets, &mut host)? {
        Ok(interpreter) => interpreter,
        Err(divergence) => return Ok(diverged(divergence)),
    };
    if let Some(divergence) = replaying.check(first, &interpreter, &mut host)? {
        return Ok(diverged(divergence));
    }
    for entry in &journal[1..] {
        // A step without an event took none of the instance's own (a resume, a child's step,
        // effects ending after the final state): there is nothing to offer again.
        let Some(event) = &entry.event else {
            continue;
        };
        let event = Event {
            send_id: timer_name(&event.name).then(|| Arc::from(event.name.as_str())),
            ..Event::named(
                &version.machine,
                &event.name,
                Value::from_json(&event.data),
                origin_of(&event.name),
            )
        };
        interpreter.set_clock(entry.unix_milliseconds);
        if let Err(error) = interpreter.take(&event, &mut host) {
            return Ok(diverged(replaying.failed(entry, &error.to_string())));
        }
        if let Some(divergence) = replaying.check(entry, &interpreter, &mut host)? {
            return Ok(diverged(divergence));
        }
    }
    Ok(Verdict::Clean {
        steps: journal.len(),
    })
}

fn diverged(divergence: Divergence) -> Verdict {
    Verdict::Diverged(Box::new(divergence))
}

/// Why a run's recorded inputs do not bind in the new version.
enum Bound {
    /// A secret input, never stored, was not supplied: the command line's to fix.
    SecretMissing(String),
    /// The new version refuses them (an input it requires that the run had not, one it no
    /// longer declares, another type): the new version's doing.
    Refused(String),
}

fn bind_inputs(
    machine: &Machine,
    record: &RunRecord,
    secrets: &[(String, String)],
) -> Result<Vec<Value>, Bound> {
    // Only the secrets this version declares: one given for another run's protocol is no
    // concern of this one.
    let declared = machine.secret_input_names();
    let secrets: Vec<(String, String)> = secrets
        .iter()
        .filter(|(name, _)| declared.contains(&name.as_str()))
        .cloned()
        .collect();
    machine
        .bind_recorded_inputs(&record.inputs, &secrets)
        .map_err(|errors| {
            let missing: Vec<&str> = errors
                .iter()
                .filter_map(|error| match error {
                    InputError::SecretNotStored { name } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            if let Some(first) = missing.first() {
                return Bound::SecretMissing(format!(
                    "its secret input{} {} {} not stored with it: pass --input {first}=VALUE \
                     (or --input {first} to read the variable {first})",
                    if missing.len() == 1 { "" } else { "s" },
                    missing
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if missing.len() == 1 { "is" } else { "are" },
                ));
            }
            let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Bound::Refused(messages.join("; "))
        })
}

/// The protocol the run was recorded with, compiled from the text kept with it, so that its
/// journal's pointers read as states and events; `None` when no text was kept or it no longer
/// compiles (a library it reads changed or went), and pointers are compared as they are.
fn recorded_machine(record: &RunRecord) -> Option<Machine> {
    let text = record.protocol_text.clone()?;
    let (_, machine) = crate::pipeline::compile::set_aside::load_and_compile_text(
        &record.summary.protocol_path,
        text,
    )
    .ok()?;
    Some(machine)
}

/// The journal keeps an event's name and data, not where it came from: the engine's timers
/// and outcomes are told by their reserved names, as the engine gave them.
fn origin_of(name: &str) -> Origin {
    if timer_name(name) || name == "error.communication" {
        Origin::Platform
    } else if crate::base::event::refuse_platform_event(name).is_some() {
        Origin::Outcome
    } else {
        Origin::External
    }
}

/// A state's timer fires an event named `after.<state>.<index>` or `timeout.<state>`, whose
/// send id is its name.
fn timer_name(name: &str) -> bool {
    name.starts_with("after.") || name.starts_with("timeout.")
}

/// One run being replayed: where its journal is, and the two versions compared.
struct Replaying<'a> {
    store: &'a dyn Store,
    version: &'a Version,
    run_id: &'a str,
    recorded_machine: Option<Machine>,
}

impl Replaying<'_> {
    /// The instance of the new version at the journal's first step: started (step 0), or, for
    /// a forked run, put in the state it was forked into.
    fn begin(
        &self,
        first: &JournalEntry,
        inputs: Vec<Value>,
        secrets: &[(String, String)],
        host: &mut QuietHost,
    ) -> Result<Result<Interpreter, Divergence>, StoreError> {
        let machine = self.version.machine.clone();
        if first.sequence == 0 {
            let mut interpreter = Interpreter::new(machine, inputs);
            interpreter.set_clock(first.unix_milliseconds);
            return Ok(match interpreter.start(host) {
                Ok(()) => Ok(interpreter),
                Err(error) => Err(self.failed(first, &error.to_string())),
            });
        }
        let cannot_hold = |reason: String| Divergence {
            step: first.sequence,
            event: None,
            kind: "state",
            message: format!(
                "the run was forked into this state, which the new version cannot hold: {reason}"
            ),
            recorded: None,
            replayed: None,
            location: None,
        };
        let Some(stored) = self.store.snapshot_at(self.run_id, first.sequence)? else {
            return Ok(Err(cannot_hold("the store has no state for it".into())));
        };
        let restored = stored
            .snapshot
            .with_secrets(&stored.secrets, secrets)
            .and_then(|snapshot| {
                Interpreter::restore(machine, inputs, &snapshot).map_err(|error| error.to_string())
            });
        Ok(restored.map_err(cannot_hold))
    }

    /// The new version failed on the step.
    fn failed(&self, entry: &JournalEntry, error: &str) -> Divergence {
        Divergence {
            step: entry.sequence,
            event: entry.event.as_ref().map(|event| event.name.clone()),
            kind: "error",
            message: format!("the new version fails on it: {error}"),
            recorded: None,
            replayed: None,
            location: None,
        }
    }

    /// Compares the step just replayed with the journal's `entry`.
    fn check(
        &self,
        entry: &JournalEntry,
        interpreter: &Interpreter,
        host: &mut QuietHost,
    ) -> Result<Option<Divergence>, StoreError> {
        let machine = &*self.version.machine;
        let replayed = StepSeen {
            transitions: host
                .take_transitions()
                .into_iter()
                .map(|transition| TransitionSeen::of(machine, machine.transition(transition)))
                .collect(),
            after: Some(After::new(
                interpreter
                    .active_states()
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                interpreter.outcome().map(|outcome| End {
                    final_state: outcome.state_name(machine).map(|state| state.to_string()),
                    exit_code: outcome.exit_code,
                }),
            )),
        };
        let recorded = StepSeen {
            transitions: entry
                .transitions
                .iter()
                .map(|pointer| TransitionSeen::recorded(self.recorded_machine.as_ref(), pointer))
                .collect(),
            after: self.recorded_after(entry.sequence)?,
        };
        let Some(difference) = steps::compare(&recorded, &replayed) else {
            return Ok(None);
        };
        let (message, location) = self.explain(&difference, &recorded, &replayed);
        Ok(Some(Divergence {
            step: entry.sequence,
            event: entry.event.as_ref().map(|event| event.name.clone()),
            kind: difference.kind(),
            message,
            recorded: Some(recorded),
            replayed: Some(replayed),
            location,
        }))
    }

    /// The run after a recorded step, as the store kept it; `None` for a step recorded before
    /// the state of every step was kept.
    fn recorded_after(&self, step: u64) -> Result<Option<After>, StoreError> {
        match self.store.snapshot_at(self.run_id, step) {
            Ok(Some(stored)) => Ok(Some(After::new(
                stored.snapshot.configuration,
                stored.snapshot.outcome.as_ref().map(End::of),
            ))),
            Ok(None) | Err(StoreError::StateNotKept { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The sentence that says what differs, and where in the new version it is.
    fn explain(
        &self,
        difference: &Difference,
        recorded: &StepSeen,
        replayed: &StepSeen,
    ) -> (String, Option<(Location, String)>) {
        let version = self.version;
        match difference {
            Difference::Transitions {
                replayed: taken,
                recorded: missed,
            } => {
                let message = format!(
                    "the journal took {}; the new version takes {}",
                    transition_names(&recorded.transitions),
                    transition_names(&replayed.transitions)
                );
                let location = match (taken, missed) {
                    (Some(taken), _) => Some((
                        version.locate(&taken.pointer),
                        format!("the new version takes `{}` here", taken.name),
                    )),
                    (None, Some(missed)) => missed.source().and_then(|source| {
                        let label = format!(
                            "the journal took `{}` from here; the new version does not",
                            missed.name
                        );
                        Some((version.locate_state(source)?, label))
                    }),
                    (None, None) => None,
                };
                (message, location)
            }
            Difference::States {
                replayed: only_replayed,
                recorded: only_recorded,
            } => {
                let states = |step: &StepSeen| {
                    step.after
                        .as_ref()
                        .map(|after| after.states.join(", "))
                        .unwrap_or_default()
                };
                let message = format!(
                    "after it the journal's run was in {}; the new version's is in {}",
                    states(recorded),
                    states(replayed)
                );
                let location = match (only_replayed, only_recorded) {
                    (Some(state), _) => version.locate_state(state).map(|location| {
                        let label =
                            format!("the new version is in `{state}`; the journal's was not");
                        (location, label)
                    }),
                    (None, Some(state)) => version.locate_state(state).map(|location| {
                        let label =
                            format!("the journal's run was in `{state}`; the new version's is not");
                        (location, label)
                    }),
                    (None, None) => None,
                };
                (message, location)
            }
            Difference::End => {
                let end = |step: &StepSeen| step.after.as_ref().and_then(|after| after.end.clone());
                let (recorded_end, replayed_end) = (end(recorded), end(replayed));
                let message = format!(
                    "the journal's run {} after it; the new version's {}",
                    End::describe(recorded_end.as_ref()),
                    End::describe(replayed_end.as_ref())
                );
                let final_state = |end: &Option<End>| end.as_ref()?.final_state.clone();
                let location = final_state(&replayed_end)
                    .or_else(|| final_state(&recorded_end))
                    .and_then(|state| {
                        let location = version.locate_state(&state)?;
                        Some((location, format!("final state `{state}`")))
                    });
                (message, location)
            }
        }
    }
}

/// `--format json`'s object for one run: `run`, `result` (`clean`, `diverged`,
/// `not_replayable`) and, by result, `steps`, `divergence` or `reason`.
pub fn to_json(run: &str, verdict: &Verdict) -> serde_json::Value {
    match verdict {
        Verdict::Clean { steps } => {
            serde_json::json!({"run": run, "result": "clean", "steps": steps})
        }
        Verdict::NotReplayable { reason } => {
            serde_json::json!({"run": run, "result": "not_replayable", "reason": reason})
        }
        Verdict::Diverged(divergence) => {
            let step_json = |step: &Option<StepSeen>| {
                step.as_ref().map(|step| {
                    let transitions: Vec<serde_json::Value> = step
                        .transitions
                        .iter()
                        .map(|transition| {
                            serde_json::json!({"name": transition.name, "pointer": transition.pointer})
                        })
                        .collect();
                    let after = step.after.as_ref().map(|after| {
                        serde_json::json!({
                            "states": after.states,
                            "final_state": after.end.as_ref().and_then(|end| end.final_state.clone()),
                            "exit_code": after.end.as_ref().map(|end| end.exit_code),
                        })
                    });
                    serde_json::json!({"transitions": transitions, "after": after})
                })
            };
            let location = divergence.location.as_ref().map(|(location, _)| {
                format!(
                    "{}:{}:{}",
                    location.file, location.position.line, location.position.column
                )
            });
            serde_json::json!({
                "run": run,
                "result": "diverged",
                "divergence": {
                    "step": divergence.step,
                    "event": divergence.event,
                    "difference": divergence.kind,
                    "message": divergence.message,
                    "recorded": step_json(&divergence.recorded),
                    "replayed": step_json(&divergence.replayed),
                    "location": location,
                },
            })
        }
    }
}
