//! The walk through one run's journal: each journaled event offered again, in order, to the new version's instance, deferred events kept in an inbox and offered again as a session offers them, and each step compared with the journal's.

use std::sync::Arc;

use super::host::QuietHost;
use super::steps::{self, After, End, Started, StepSeen, TransitionSeen};
use super::{Divergence, Version, report};
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;
use crate::runtime::run::algorithm::Selection;
use crate::store::{JournalEntry, JournalEvent, Store, StoreError};

/// One run being replayed: where its journal is, and the two versions compared.
pub struct Replaying<'a> {
    pub store: &'a dyn Store,
    pub version: &'a Version,
    /// The new version's machine for this run (`inputs::run_machine`).
    pub machine: Arc<Machine>,
    pub run_id: &'a str,
    /// The version the run was recorded with, to read the journal's pointers.
    pub recorded_machine: Option<Machine>,
}

/// The new version's instance as the replay goes.
struct Replayed {
    interpreter: Interpreter,
    host: QuietHost,
    /// The events it defers, waiting to be offered again when its states change, in arrival
    /// order (a session's inbox).
    inbox: Vec<Event>,
}

impl Replayed {
    /// A run that ended discards what waited in its inbox (once the step's own event left it).
    fn discard_if_ended(&mut self) {
        if !self.interpreter.is_running() {
            self.inbox.clear();
        }
    }
}

impl Replaying<'_> {
    /// Replays `journal`, the run's; its first divergence, if any.
    pub fn walk(
        &self,
        journal: &[JournalEntry],
        inputs: Vec<Value>,
        secrets: &[(String, String)],
    ) -> Result<Option<Divergence>, StoreError> {
        let Some(first) = journal.first() else {
            return Ok(None);
        };
        let mut replayed = match self.begin(first, inputs.clone(), secrets)? {
            Ok(replayed) => replayed,
            Err(divergence) => return Ok(Some(divergence)),
        };
        if let Some(divergence) = self.check(first, &mut replayed)? {
            return Ok(Some(divergence));
        }
        let mut position = 1;
        while let Some(entry) = journal.get(position) {
            position += 1;
            // A step without an event took none of the instance's own (a resume, a child's
            // step, effects ending after the final state): there is nothing to offer again. A
            // redrive's step went back to an earlier step's state, which it holds: the replay
            // goes on from there, as from a fork's first step.
            let Some(recorded) = &entry.event else {
                if crate::runtime::runs::redrive::is_redrive(entry) {
                    replayed = match self.begin(entry, inputs.clone(), secrets)? {
                        Ok(replayed) => replayed,
                        Err(divergence) => return Ok(Some(divergence)),
                    };
                }
                continue;
            };
            let event = self.event(recorded);
            let waited_before = !replayed.inbox.is_empty();
            let before = states(&replayed.interpreter);
            let selection = match self.take(&mut replayed, &event, entry) {
                Ok(selection) => selection,
                Err(divergence) => return Ok(Some(*divergence)),
            };
            // An input no transition took waits in the inbox when an active state defers it.
            if selection == Selection::NotTaken
                && is_input(&event)
                && replayed.interpreter.deferred_by(&event).is_some()
            {
                replayed.inbox.push(event);
            }
            replayed.discard_if_ended();
            if let Some(divergence) = self.check(entry, &mut replayed)? {
                return Ok(Some(divergence));
            }
            if waited_before && before != states(&replayed.interpreter) {
                let offered = self.offer_waiting(&mut replayed, journal, &mut position, entry)?;
                if offered.is_some() {
                    return Ok(offered);
                }
            }
        }
        Ok(None)
    }

    /// The instance of the new version at the journal's first step: started (step 0), or, for
    /// a forked run, put in the state it was forked into, its inbox with it.
    fn begin(
        &self,
        first: &JournalEntry,
        inputs: Vec<Value>,
        secrets: &[(String, String)],
    ) -> Result<Result<Replayed, Divergence>, StoreError> {
        let machine = self.machine.clone();
        let mut host = QuietHost::new(machine.clone());
        if first.sequence == 0 {
            let mut interpreter = Interpreter::new(machine, inputs);
            interpreter.set_clock(first.unix_milliseconds);
            return Ok(match interpreter.start(&mut host) {
                Ok(()) => Ok(Replayed {
                    interpreter,
                    host,
                    inbox: Vec::new(),
                }),
                Err(error) => Err(failed(first, &error.to_string())),
            });
        }
        let how = match crate::runtime::runs::redrive::is_redrive(first) {
            true => "redriven",
            false => "forked",
        };
        let cannot_hold = |reason: String| Divergence {
            step: first.sequence,
            event: None,
            kind: "state",
            message: format!(
                "the run was {how} into this state, which the new version cannot hold: {reason}"
            ),
            recorded: None,
            replayed: None,
            location: None,
        };
        let Some(stored) = self.store.snapshot_at(self.run_id, first.sequence)? else {
            return Ok(Err(cannot_hold("the store has no state for it".into())));
        };
        let inbox = stored
            .snapshot
            .deferred
            .iter()
            .map(|deferred| JournalEvent {
                name: deferred.event.clone(),
                data: Value::from_stored_json(&deferred.data).to_json(),
            })
            .map(|deferred| self.event(&deferred))
            .collect();
        let restored = stored
            .snapshot
            .with_secrets(&stored.secrets, secrets)
            .and_then(|snapshot| {
                Interpreter::restore(machine, inputs, &snapshot).map_err(|error| error.to_string())
            });
        Ok(restored
            .map(|interpreter| Replayed {
                interpreter,
                host,
                inbox,
            })
            .map_err(cannot_hold))
    }

    /// The journaled event as the engine gave it, as far as the journal tells.
    fn event(&self, recorded: &JournalEvent) -> Event {
        Event {
            send_id: timer_name(&recorded.name).then(|| Arc::from(recorded.name.as_str())),
            ..Event::named(
                &self.machine,
                &recorded.name,
                Value::from_json(&recorded.data),
                origin_of(&recorded.name),
            )
        }
    }

    /// One macrostep of the new version on `event`, at the time `entry` was recorded.
    fn take(
        &self,
        replayed: &mut Replayed,
        event: &Event,
        entry: &JournalEntry,
    ) -> Result<Selection, Box<Divergence>> {
        replayed.interpreter.set_clock(entry.unix_milliseconds);
        replayed
            .interpreter
            .take(event, &mut replayed.host)
            .map_err(|error| Box::new(failed(entry, &error.to_string())))
    }

    /// Offers the deferred events again after the states changed, as a session does (oldest
    /// first; one taken, or no longer deferred, leaves the inbox and is a step of its own, and
    /// the scan starts again after one taken): each such step must be the journal's next.
    fn offer_waiting(
        &self,
        replayed: &mut Replayed,
        journal: &[JournalEntry],
        position: &mut usize,
        after: &JournalEntry,
    ) -> Result<Option<Divergence>, StoreError> {
        let mut index = 0;
        while replayed.interpreter.is_running() {
            let Some(waiting) = replayed.inbox.get(index).cloned() else {
                break;
            };
            let next = journal.get(*position);
            let matches = next
                .and_then(|next| next.event.as_ref())
                .is_some_and(|event| *event.name == *waiting.name);
            let before = states(&replayed.interpreter);
            // The time of the step it should be; its own turn is checked below.
            let at = next.filter(|_| matches).unwrap_or(after);
            let selection = match self.take(replayed, &waiting, at) {
                Ok(selection) => selection,
                Err(divergence) => return Ok(Some(*divergence)),
            };
            let taken = selection == Selection::Taken;
            let changed = before != states(&replayed.interpreter);
            let still_deferred = !taken && replayed.interpreter.deferred_by(&waiting).is_some();
            if still_deferred && !changed {
                // Left waiting, and no step taken.
                replayed.host.take_step();
                index += 1;
                continue;
            }
            if !still_deferred {
                replayed.inbox.remove(index);
            }
            replayed.discard_if_ended();
            let Some(next) = next.filter(|_| matches) else {
                return Ok(Some(self.not_offered(after, next, &waiting)));
            };
            *position += 1;
            if let Some(divergence) = self.check(next, replayed)? {
                return Ok(Some(divergence));
            }
            if taken {
                index = 0;
            } else if still_deferred {
                index += 1;
            }
        }
        Ok(None)
    }

    /// The new version offers a deferred event again where the journal's next step is
    /// another (or there is none).
    fn not_offered(
        &self,
        after: &JournalEntry,
        next: Option<&JournalEntry>,
        waiting: &Event,
    ) -> Divergence {
        let journal = match next {
            Some(JournalEntry {
                sequence,
                event: Some(event),
                ..
            }) => format!("its step {sequence} is `{}`", event.name),
            Some(JournalEntry { sequence, .. }) => format!("its step {sequence} takes no event"),
            None => "it has no step after it".to_string(),
        };
        Divergence {
            step: next.map_or(after.sequence + 1, |next| next.sequence),
            event: Some(waiting.name.to_string()),
            kind: "inbox",
            message: format!(
                "after step {} the new version offers the deferred `{}` again (its states \
                 changed), as the journal's run did not: {journal}",
                after.sequence, waiting.name
            ),
            recorded: None,
            replayed: None,
            location: None,
        }
    }

    /// Compares the step just replayed with the journal's `entry`.
    fn check(
        &self,
        entry: &JournalEntry,
        replayed: &mut Replayed,
    ) -> Result<Option<Divergence>, StoreError> {
        let machine = &*self.machine;
        let interpreter = &replayed.interpreter;
        let (taken, started) = replayed.host.take_step();
        let replayed = StepSeen {
            transitions: taken
                .into_iter()
                .map(|transition| TransitionSeen::of(machine, machine.transition(transition)))
                .collect(),
            started,
            after: Some(After {
                deferred: replayed
                    .inbox
                    .iter()
                    .map(|event| event.name.to_string())
                    .collect(),
                ..After::new(
                    states(interpreter),
                    interpreter.outcome().map(|outcome| End {
                        final_state: outcome.state_name(machine).map(|state| state.to_string()),
                        exit_code: outcome.exit_code,
                    }),
                )
            }),
        };
        let recorded = StepSeen {
            transitions: entry
                .transitions
                .iter()
                .map(|pointer| TransitionSeen::recorded(self.recorded_machine.as_ref(), pointer))
                .collect(),
            started: Started::recorded(&entry.actions, &entry.children),
            after: self.recorded_after(entry.sequence)?,
        };
        let Some(difference) = steps::compare(&recorded, &replayed) else {
            return Ok(None);
        };
        let (message, location) = report::explain(self.version, &difference, &recorded, &replayed);
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
            Ok(Some(stored)) => Ok(Some(After {
                deferred: stored
                    .snapshot
                    .deferred
                    .iter()
                    .map(|deferred| deferred.event.clone())
                    .collect(),
                ..After::new(
                    stored.snapshot.configuration,
                    stored.snapshot.outcome.as_ref().map(End::of),
                )
            })),
            Ok(None) | Err(StoreError::StateNotKept { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A run of another protocol (its recorded state names another `id`), which a resume in
/// the new version would refuse: a divergence at its first step, at FILE's `id`.
pub fn other_protocol(
    store: &dyn Store,
    version: &Version,
    run_id: &str,
    first: &JournalEntry,
) -> Result<Option<Divergence>, StoreError> {
    let recorded = match store.snapshot_at(run_id, first.sequence) {
        Ok(Some(stored)) => stored.snapshot.protocol,
        Ok(None) | Err(StoreError::StateNotKept { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let id = &version.machine.id;
    Ok((recorded != *id).then(|| Divergence {
        step: first.sequence,
        event: None,
        kind: "protocol",
        message: format!(
            "the run is of protocol `{recorded}` and the new version is `{id}`: a run \
             resumed in it would be refused"
        ),
        recorded: None,
        replayed: None,
        location: Some((
            version.locate("/id"),
            format!("`{id}` here; the run's protocol is `{recorded}`"),
        )),
    }))
}

/// The new version failed on the step.
fn failed(entry: &JournalEntry, error: &str) -> Divergence {
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

/// The instance's active states, by id.
fn states(interpreter: &Interpreter) -> Vec<String> {
    interpreter
        .active_states()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Whether `event` is input to the run, which an active state may defer: sent from outside or
/// by `send`, not one of the engine's own (as a session tells it).
fn is_input(event: &Event) -> bool {
    matches!(event.origin, Origin::External | Origin::Child)
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
