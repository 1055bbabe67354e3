//! One journaled step as the journal recorded it and as a protocol version replays it, and the first difference between the two, by what stays when a protocol is edited (states and events, not pointers).

use crate::base::durable::ChildChange;
use crate::base::snapshot::SnapshotOutcome;
use crate::pipeline::compile::machine::{Machine, TransitionNode};

/// A transition as a reader names it (`source → target (trigger)`), with its pointer in its
/// protocol and its two ends, which are what two versions of a protocol are compared by: a
/// transition moved, renumbered or given another trigger that still leads from the same state
/// to the same states does the same thing.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionSeen {
    pub name: String,
    pub pointer: String,
    /// Its source state and target states; `None` for a recorded pointer its protocol's text
    /// could not tell (the text was not kept whole, or no longer compiles), which is then
    /// compared by pointer.
    pub ends: Option<(String, Vec<String>)>,
}

impl TransitionSeen {
    pub fn of(machine: &Machine, transition: &TransitionNode) -> TransitionSeen {
        let mut targets: Vec<String> = transition
            .targets
            .iter()
            .map(|target| machine.state(*target).id.to_string())
            .collect();
        targets.sort();
        TransitionSeen {
            name: machine.transition_name(transition),
            pointer: transition.pointer.clone(),
            ends: Some((machine.state(transition.source).id.to_string(), targets)),
        }
    }

    /// A recorded pointer, resolved in the protocol it was recorded with when there is one.
    pub fn recorded(machine: Option<&Machine>, pointer: &str) -> TransitionSeen {
        let found = machine.and_then(|machine| {
            let transition = machine
                .transitions
                .iter()
                .find(|transition| transition.pointer == pointer)?;
            Some(TransitionSeen::of(machine, transition))
        });
        found.unwrap_or_else(|| TransitionSeen {
            name: pointer.to_string(),
            pointer: pointer.to_string(),
            ends: None,
        })
    }

    fn same_as(&self, other: &TransitionSeen) -> bool {
        match (&self.ends, &other.ends) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => self.pointer == other.pointer,
        }
    }

    /// Its source state, when known.
    pub fn source(&self) -> Option<&str> {
        self.ends.as_ref().map(|(source, _)| source.as_str())
    }
}

/// How a run ended: its top-level final state (none when an unhandled error failed it) and
/// its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub final_state: Option<String>,
    pub exit_code: u8,
}

impl End {
    pub fn of(outcome: &SnapshotOutcome) -> End {
        End {
            final_state: outcome.final_state.clone(),
            exit_code: outcome.exit_code,
        }
    }

    pub fn describe(end: Option<&End>) -> String {
        match end {
            None => "still running".to_string(),
            Some(End {
                final_state: Some(state),
                exit_code,
            }) => format!("ended in `{state}` (exit {exit_code})"),
            Some(End {
                final_state: None,
                exit_code,
            }) => format!("ended by an unhandled error (exit {exit_code})"),
        }
    }
}

/// The run after a step: its active states (sorted: a new version may list its states in
/// another order), the events waiting in its inbox because a state defers them (in arrival
/// order), and how it ended, if it did.
#[derive(Debug, Clone, PartialEq)]
pub struct After {
    pub states: Vec<String>,
    pub deferred: Vec<String>,
    pub end: Option<End>,
}

impl After {
    /// The run after a step, with nothing deferred.
    pub fn new(mut states: Vec<String>, end: Option<End>) -> After {
        states.sort();
        After {
            states,
            deferred: Vec::new(),
            end,
        }
    }
}

/// An effect, a map or a child protocol a step started (a map's items start as the host lets
/// them, in whichever step, and are not compared), named `effect `id``, `map `id`` or
/// `child `id``, with the state it belongs to (unknown for a recorded child: empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    pub name: String,
    pub owner: String,
}

impl Started {
    /// What a recorded step started: the effects and maps its actions name (`{"effect": id,
    /// "owner"}`, `{"map": id}`), and the child protocols it started (its own, not theirs, nor
    /// a map's items).
    pub fn recorded(actions: &serde_json::Value, children: &[ChildChange]) -> Vec<Started> {
        let mut started = Started::of_actions(actions);
        started.extend(children.iter().filter_map(|change| match change {
            ChildChange::Started { path, .. }
                if !path.contains('/') && crate::effects::mock::map_of_item(path).is_none() =>
            {
                Some(Started {
                    name: format!("child `{path}`"),
                    owner: String::new(),
                })
            }
            _ => None,
        }));
        started
    }

    fn of_actions(actions: &serde_json::Value) -> Vec<Started> {
        let text = |action: &serde_json::Value, key: &str| {
            action
                .get(key)
                .and_then(|value| value.as_str())
                .map(str::to_string)
        };
        actions
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|action| {
                let (kind, id) = match (text(action, "effect"), text(action, "map")) {
                    (Some(id), _) if crate::effects::mock::map_of_item(&id).is_none() => {
                        ("effect", id)
                    }
                    (_, Some(id)) => ("map", id),
                    _ => return None,
                };
                Some(Started {
                    name: format!("{kind} `{id}`"),
                    owner: text(action, "owner").unwrap_or_default(),
                })
            })
            .collect()
    }
}

/// What a step did: the transitions it took, what it started, and the run after it (`None`
/// when the store did not keep the state after a recorded step: a journal written before every
/// step's was).
#[derive(Debug, Clone, PartialEq)]
pub struct StepSeen {
    pub transitions: Vec<TransitionSeen>,
    pub started: Vec<Started>,
    pub after: Option<After>,
}

/// What first differs between a recorded step and its replay.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// The transitions taken: the first of the replay's the journal has no match for, and the
    /// first of the journal's the replay has none for (either may be none).
    Transitions {
        replayed: Option<TransitionSeen>,
        recorded: Option<TransitionSeen>,
    },
    /// The effects and maps started: the first the replay starts that the journal's step did
    /// not, and the first the other way round (either may be none).
    Started {
        replayed: Option<Started>,
        recorded: Option<Started>,
    },
    /// The active states after the step: the first the replay has and the journal has not, and
    /// the first the other way round.
    States {
        replayed: Option<String>,
        recorded: Option<String>,
    },
    /// The events waiting in the inbox after the step.
    Deferred,
    /// How the run ended (or not) at the step.
    End,
}

impl Difference {
    /// The name `--format json` gives it.
    pub fn kind(&self) -> &'static str {
        match self {
            Difference::Transitions { .. } => "transitions",
            Difference::Started { .. } => "started",
            Difference::States { .. } => "states",
            Difference::Deferred => "deferred",
            Difference::End => "end",
        }
    }
}

/// The first difference between a recorded step and its replay, if any: the transitions taken
/// (as a multiset, compared by their ends), the effects and maps started (as a multiset, by
/// name), then the active states, the events deferred, and the ending. A recorded
/// step whose state was not kept is compared by its transitions alone.
pub fn compare(recorded: &StepSeen, replayed: &StepSeen) -> Option<Difference> {
    let unmatched_replayed = unmatched(
        &replayed.transitions,
        &recorded.transitions,
        TransitionSeen::same_as,
    );
    let unmatched_recorded = unmatched(
        &recorded.transitions,
        &replayed.transitions,
        TransitionSeen::same_as,
    );
    if unmatched_replayed.is_some() || unmatched_recorded.is_some() {
        return Some(Difference::Transitions {
            replayed: unmatched_replayed,
            recorded: unmatched_recorded,
        });
    }
    let same_name = |one: &Started, other: &Started| one.name == other.name;
    let started_replayed = unmatched(&replayed.started, &recorded.started, same_name);
    let started_recorded = unmatched(&recorded.started, &replayed.started, same_name);
    if started_replayed.is_some() || started_recorded.is_some() {
        return Some(Difference::Started {
            replayed: started_replayed,
            recorded: started_recorded,
        });
    }
    let (Some(recorded), Some(replayed)) = (&recorded.after, &replayed.after) else {
        return None;
    };
    if recorded.states != replayed.states {
        let missing_from = |states: &[String], other: &[String]| {
            states.iter().find(|state| !other.contains(state)).cloned()
        };
        return Some(Difference::States {
            replayed: missing_from(&replayed.states, &recorded.states),
            recorded: missing_from(&recorded.states, &replayed.states),
        });
    }
    if recorded.deferred != replayed.deferred {
        return Some(Difference::Deferred);
    }
    (recorded.end != replayed.end).then_some(Difference::End)
}

/// The first of `these` that `those` has no match left for, each of `those` matching once.
fn unmatched<T: Clone>(these: &[T], those: &[T], same: impl Fn(&T, &T) -> bool) -> Option<T> {
    let mut left: Vec<&T> = those.iter().collect();
    for one in these {
        match left.iter().position(|other| same(one, other)) {
            Some(index) => {
                left.remove(index);
            }
            None => return Some(one.clone()),
        }
    }
    None
}

/// The effects and maps started, as a reader reads them, or `nothing`.
pub fn started_names(started: &[Started]) -> String {
    if started.is_empty() {
        return "nothing".to_string();
    }
    started
        .iter()
        .map(|one| one.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The transitions as a reader reads them: `a → b (go), b → c (always)`, or `none`.
pub fn transition_names(transitions: &[TransitionSeen]) -> String {
    if transitions.is_empty() {
        return "no transition".to_string();
    }
    transitions
        .iter()
        .map(|transition| format!("`{}`", transition.name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transition(name: &str, pointer: &str, source: &str, targets: &[&str]) -> TransitionSeen {
        TransitionSeen {
            name: name.to_string(),
            pointer: pointer.to_string(),
            ends: Some((
                source.to_string(),
                targets.iter().map(|target| target.to_string()).collect(),
            )),
        }
    }

    fn step(transitions: Vec<TransitionSeen>, states: &[&str]) -> StepSeen {
        StepSeen {
            transitions,
            started: Vec::new(),
            after: Some(After::new(
                states.iter().map(|state| state.to_string()).collect(),
                None,
            )),
        }
    }

    #[test]
    fn a_renumbered_transition_with_the_same_ends_is_the_same() {
        let recorded = step(
            vec![transition("a → b (go)", "/states/a/on/go/0", "a", &["b"])],
            &["b"],
        );
        let replayed = step(
            vec![transition("a → b (go)", "/states/a/on/go/1", "a", &["b"])],
            &["b"],
        );
        assert_eq!(compare(&recorded, &replayed), None);
    }

    #[test]
    fn another_target_is_a_difference_of_transitions_before_states() {
        let recorded = step(
            vec![transition("a → b (go)", "/states/a/on/go/0", "a", &["b"])],
            &["b"],
        );
        let replayed = step(
            vec![transition("a → c (go)", "/states/a/on/go/0", "a", &["c"])],
            &["c"],
        );
        let Some(Difference::Transitions { replayed, recorded }) = compare(&recorded, &replayed)
        else {
            panic!("expected a difference of transitions");
        };
        assert_eq!(replayed.unwrap().name, "a → c (go)");
        assert_eq!(recorded.unwrap().name, "a → b (go)");
    }

    #[test]
    fn unresolved_pointers_are_compared_as_pointers() {
        let unresolved = TransitionSeen::recorded(None, "/states/a/on/go/0");
        let resolved = transition("a → b (go)", "/states/a/on/go/0", "a", &["b"]);
        assert!(unresolved.same_as(&resolved));
        let moved = transition("a → b (go)", "/states/a/on/go/1", "a", &["b"]);
        assert!(!unresolved.same_as(&moved));
    }

    #[test]
    fn effects_started_are_read_from_the_actions_without_a_maps_items() {
        let actions = serde_json::json!([
            {"map": "check", "invocation": 0},
            {"effect": "check[0]", "kind": "exec", "invocation": 1, "owner": "checking"},
            {"effect": "build", "kind": "exec", "invocation": 2, "owner": "building"},
            {"log": "hello", "tags": []},
        ]);
        let names: Vec<String> = Started::recorded(&actions, &[])
            .into_iter()
            .map(|started| started.name)
            .collect();
        assert_eq!(names, ["map `check`", "effect `build`"]);
        let mut recorded = step(Vec::new(), &["building"]);
        recorded.started = Started::recorded(&actions, &[]);
        let replayed = step(Vec::new(), &["building"]);
        let Some(Difference::Started { replayed, recorded }) = compare(&recorded, &replayed) else {
            panic!("expected a difference of effects started");
        };
        assert_eq!(replayed, None);
        assert_eq!(recorded.unwrap().name, "map `check`");
    }

    #[test]
    fn states_and_endings_are_compared_when_kept() {
        let recorded = step(Vec::new(), &["a", "a.x"]);
        let mut replayed = step(Vec::new(), &["a.x", "a"]);
        assert_eq!(compare(&recorded, &replayed), None);
        replayed.after.as_mut().unwrap().end = Some(End {
            final_state: Some("done".into()),
            exit_code: 0,
        });
        assert_eq!(compare(&recorded, &replayed), Some(Difference::End));
        let unkept = StepSeen {
            transitions: Vec::new(),
            started: Vec::new(),
            after: None,
        };
        assert_eq!(compare(&unkept, &replayed), None);
    }
}
