//! What a divergence says: the sentence for a reader with the place in the new version it concerns, and the JSON object `--format json` prints for each run.

use super::steps::{Difference, End, StepSeen, started_names, transition_names};
use super::{Verdict, Version};
use crate::base::diagnostic::Location;

/// The sentence that says what differs, and where in the new version it is.
pub fn explain(
    version: &Version,
    difference: &Difference,
    recorded: &StepSeen,
    replayed: &StepSeen,
) -> (String, Option<(Location, String)>) {
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
        Difference::Started {
            replayed: starts,
            recorded: started,
        } => {
            let message = format!(
                "the journal's step started {}; the new version's starts {}",
                started_names(&recorded.started),
                started_names(&replayed.started)
            );
            let location = match (starts, started) {
                (Some(starts), _) => version.locate_state(&starts.owner).map(|location| {
                    let label = format!("the new version starts {} in this state", starts.name);
                    (location, label)
                }),
                (None, Some(started)) => version.locate_state(&started.owner).map(|location| {
                    let label = format!(
                        "the journal's run started {} in this state; the new version does not",
                        started.name
                    );
                    (location, label)
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
                    let label = format!("the new version is in `{state}`; the journal's was not");
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
        Difference::Deferred => {
            let deferred = |step: &StepSeen| {
                let names: Vec<String> = step
                    .after
                    .iter()
                    .flat_map(|after| &after.deferred)
                    .map(|name| format!("`{name}`"))
                    .collect();
                if names.is_empty() {
                    "nothing".to_string()
                } else {
                    names.join(", ")
                }
            };
            let message = format!(
                "after it the journal's run had {} waiting in its inbox (deferred by a state); \
                 the new version's has {}",
                deferred(recorded),
                deferred(replayed)
            );
            (message, deferring_place(version, recorded, replayed))
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
                            "deferred": after.deferred,
                            "final_state": after.end.as_ref().and_then(|end| end.final_state.clone()),
                            "exit_code": after.end.as_ref().map(|end| end.exit_code),
                        })
                    });
                    let started: Vec<&str> =
                        step.started.iter().map(|one| one.name.as_str()).collect();
                    serde_json::json!({"transitions": transitions, "started": started, "after": after})
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

/// Where the new version's deferring differs: the state that defers an event the journal's
/// run did not keep waiting (at its `defer:`), or else the active state that no longer defers
/// one it kept.
fn deferring_place(
    version: &Version,
    recorded: &StepSeen,
    replayed: &StepSeen,
) -> Option<(Location, String)> {
    let (recorded, replayed) = (recorded.after.as_ref()?, replayed.after.as_ref()?);
    let machine = &*version.machine;
    let first_missing = |these: &[String], those: &[String]| {
        these.iter().find(|name| !those.contains(name)).cloned()
    };
    let active = replayed
        .states
        .iter()
        .filter_map(|id| machine.state_id(id).map(|state| (id, machine.state(state))));
    if let Some(event) = first_missing(&replayed.deferred, &recorded.deferred) {
        let (id, state) = active
            .filter(|(_, state)| {
                state
                    .defer
                    .iter()
                    .any(|descriptor| descriptor.matches(&event))
            })
            .max_by_key(|(_, state)| state.ancestors.len())?;
        let label = format!("the new version's `{id}` defers `{event}` here");
        return Some((version.locate(&format!("{}/defer", state.pointer)), label));
    }
    let event = first_missing(&recorded.deferred, &replayed.deferred)?;
    let (id, state) = active.clone().find(|(_, state)| state.is_atomic())?;
    let label = format!("the new version's `{id}` does not defer `{event}`");
    Some((version.locate(&state.pointer), label))
}
