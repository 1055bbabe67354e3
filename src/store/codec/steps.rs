//! A step as every store writes it: borrowed from the batch, its columns encoded (JSON text, secrets masked) before the database is touched.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use super::Codec;
use super::children::EncodedChildState;
use super::states::{StoredState, Written};
use crate::base::durable::ChildState;
use crate::base::snapshot::Snapshot;
use crate::store::{Finish, JournalEntry, StoreError, Write};

/// A step to commit, borrowed from a `Write::Step` or from `commit_step`'s arguments.
#[derive(Clone, Copy)]
pub(in crate::store) struct StepWrite<'a> {
    pub(in crate::store) run: &'a str,
    pub(in crate::store) entry: &'a JournalEntry,
    pub(in crate::store) snapshot: &'a Snapshot,
    pub(in crate::store) finish: Option<&'a Finish>,
    pub(in crate::store) child_states: &'a [ChildState],
}

/// One write of a transaction: a step, or another write of a batch.
pub(in crate::store) enum Planned<'a> {
    Step(StepWrite<'a>),
    Other(&'a Write),
}

impl<'a> Planned<'a> {
    /// The writes of a batch, each step borrowed.
    pub(in crate::store) fn of(writes: &'a [Write]) -> Vec<Planned<'a>> {
        writes
            .iter()
            .map(|write| match write {
                Write::Step {
                    run,
                    entry,
                    snapshot,
                    finish,
                    child_states,
                } => Planned::Step(StepWrite {
                    run,
                    entry,
                    snapshot,
                    finish: finish.as_ref(),
                    child_states,
                }),
                other => Planned::Other(other),
            })
            .collect()
    }
}

impl Codec {
    /// A step's columns as they are written, its state (a full snapshot or a delta) encoded by
    /// the caller, which knows the state before it.
    pub(in crate::store) fn encode_step(
        &self,
        step: &StepWrite<'_>,
        state: StoredState,
    ) -> Result<EncodedStep, StoreError> {
        let StepWrite {
            run,
            entry,
            finish,
            child_states,
            ..
        } = *step;
        Ok(EncodedStep {
            child_states: self.encode_child_states(run, child_states)?,
            step: self.integer("a step number", entry.sequence)?,
            time: self.integer("a step time", entry.unix_milliseconds)?,
            event_name: entry.event.as_ref().map(|event| event.name.clone()),
            event_data: match &entry.event {
                Some(event) => Some(self.encode(run, "journal event data", &event.data)?),
                None => None,
            },
            transitions: self.encode(run, "journal transitions", &entry.transitions)?,
            actions: self.encode(run, "journal actions", &entry.actions)?,
            children: match entry.children.is_empty() {
                true => None,
                false => Some(self.encode(run, "journal children", &entry.children)?),
            },
            state,
            finish: match finish {
                Some(finish) => Some((
                    finish.final_state.clone(),
                    finish.exit_code,
                    self.encode(run, "output", &finish.output)?,
                    self.integer("a finish time", finish.unix_milliseconds)?,
                )),
                None => None,
            },
        })
    }
}

/// A step's columns, encoded before the write lock is taken.
pub(in crate::store) struct EncodedStep {
    pub(in crate::store) step: i64,
    pub(in crate::store) time: i64,
    pub(in crate::store) event_name: Option<String>,
    pub(in crate::store) event_data: Option<String>,
    pub(in crate::store) transitions: String,
    pub(in crate::store) actions: String,
    /// The step's child changes, `None` when there are none.
    pub(in crate::store) children: Option<String>,
    /// The state after the step.
    pub(in crate::store) state: StoredState,
    /// Final state, exit code, output, finish time.
    pub(in crate::store) finish: Option<(Option<String>, i32, String, i64)>,
    /// The states of the children that stepped, for their own rows.
    pub(in crate::store) child_states: Vec<EncodedChildState>,
}

/// Runs by id, hashed with foldhash: a host's batch looks up each of its runs, a thousand a
/// batch.
pub(in crate::store) type ByRun<T> = HashMap<String, T, RandomState>;

/// What a store keeps of the runs it writes, once a batch of `writes` committed: each run's
/// last state (`chains`, from the batch), for its next step's delta, in `written` (none for a
/// run that stopped or finished; `keys` gives back the ids taken out of `written` so that they
/// are not allocated again); and in `fences` the fencing tokens of the runs it holds (a run
/// created held starts at 0; a stopped or finished one is released).
pub(in crate::store) fn after_commit<'a>(
    writes: &[Planned<'a>],
    mut chains: HashMap<&'a str, Written, RandomState>,
    keys: &mut HashMap<&'a str, String, RandomState>,
    written: &mut ByRun<Written>,
    fences: &mut ByRun<i64>,
) {
    for write in writes {
        match write {
            Planned::Other(Write::MarkStopped { run, .. } | Write::FinishRun { run, .. }) => {
                chains.remove(run.as_str());
                written.remove(run);
                fences.remove(run);
            }
            Planned::Other(Write::CreateRun(run)) if run.holder.is_some() => {
                fences.insert(run.id.clone(), 0);
            }
            Planned::Step(step) if step.finish.is_some() => {
                fences.remove(step.run);
            }
            _ => {}
        }
    }
    for (run, state) in chains {
        // A finished run takes no more steps: its state is not kept for a next one.
        if !state.finished {
            let key = keys.remove(run).unwrap_or_else(|| run.to_string());
            written.insert(key, state);
        }
    }
}
