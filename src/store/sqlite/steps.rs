//! Writing steps: each step's journal row with the state after it, the run's row, its children's; one transaction for a batch of writes.

use std::collections::HashMap;

use rusqlite::{Connection, ErrorCode, OptionalExtension};

use super::snapshots::{StoredState, Written};
use super::statements::CachedStatements;
use super::{Context, SqliteStore, children};
use crate::base::durable::ChildState;
use crate::base::snapshot::Snapshot;
use crate::store::{Finish, JournalEntry, RunStatus, StoreError, Write};

/// A step's journal row, with the state after it in one of its two columns.
pub(super) const INSERT_JOURNAL: &str = "INSERT INTO journal (run_id, step, event_name, \
     event_data, transitions, actions, recorded_at, children, snapshot, snapshot_delta) VALUES \
     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// A running run's last step, its status left alone (see `insert_step`).
pub(super) const STEP_OF_RUNNING_RUN: &str = "UPDATE runs SET last_step = ?1, last_step_at = ?2, \
     updated_at = ?2 WHERE id = ?3 AND status = 'running' AND (last_step IS NULL OR last_step < ?1)";

/// A step to commit, borrowed from a `Write::Step` or from `commit_step`'s arguments.
#[derive(Clone, Copy)]
pub(super) struct StepWrite<'a> {
    pub(super) run: &'a str,
    pub(super) entry: &'a JournalEntry,
    pub(super) snapshot: &'a Snapshot,
    pub(super) finish: Option<&'a Finish>,
    pub(super) child_states: &'a [ChildState],
}

/// One write of a transaction: a step, or another write of a batch.
pub(super) enum Planned<'a> {
    Step(StepWrite<'a>),
    Other(&'a Write),
}

impl<'a> Planned<'a> {
    /// The writes of a batch, each step borrowed.
    pub(super) fn of(writes: &'a [Write]) -> Vec<Planned<'a>> {
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

impl SqliteStore {
    /// Commits `writes` in one transaction. Each step's state is encoded before the write lock
    /// is taken (to hold it briefly), as a delta of the state before it where this store wrote
    /// that state (`Written`), otherwise in full; once committed, the last state of each run
    /// is what the next step's delta is taken against. A failed transaction forgets the states
    /// of the runs it wrote to, so that their next steps are written in full.
    pub(super) fn commit_planned(
        &mut self,
        operation: &str,
        writes: &[Planned<'_>],
    ) -> Result<(), StoreError> {
        let mut chains: HashMap<&str, Written> = HashMap::new();
        let mut encoded = Vec::new();
        for write in writes {
            let Planned::Step(step) = write else {
                continue;
            };
            let before = chains
                .remove(step.run)
                .or_else(|| self.written.remove(step.run));
            let (state, written) = self.context.encode_state(step, before)?;
            chains.insert(step.run, written);
            encoded.push(self.context.encode_step(step, state)?);
        }
        let result = self.write(operation, |context, connection| {
            let mut steps = encoded.iter();
            for write in writes {
                match write {
                    Planned::Step(step) => {
                        let encoded = steps.next().expect("one encoding per step");
                        context.insert_step(connection, step.run, step.entry, encoded)?;
                    }
                    Planned::Other(Write::CreateRun(run)) => context.insert_run(connection, run)?,
                    Planned::Other(Write::MarkStopped {
                        run,
                        unix_milliseconds,
                    }) => context.update_status(
                        connection,
                        run,
                        RunStatus::Stopped,
                        *unix_milliseconds,
                    )?,
                    Planned::Other(Write::FinishRun { run, finish }) => {
                        context.update_finish(connection, run, finish)?;
                    }
                    Planned::Other(Write::Step { .. }) => {
                        unreachable!("`Planned::of` borrows every step as `Planned::Step`")
                    }
                }
            }
            Ok(())
        });
        if result.is_ok() {
            for write in writes {
                if let Planned::Other(
                    Write::MarkStopped { run, .. } | Write::FinishRun { run, .. },
                ) = write
                {
                    chains.remove(run.as_str());
                    self.written.remove(run);
                }
            }
            for (run, written) in chains {
                // A finished run takes no more steps: its state is not kept for a next one.
                if !written.finished {
                    self.written.insert(run.to_string(), written);
                }
            }
        }
        result
    }
}

impl Context {
    /// A step's columns as they are written, its state (a full snapshot or a delta) encoded by
    /// the caller, which knows the state before it.
    fn encode_step(
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

    /// Writes one step: its journal entry with the state after it (a full snapshot or a delta
    /// of the one before), and the run's last step (and its end). Refused (`refusal`) for an unknown or finished run and
    /// for a step not above the run's last.
    fn insert_step(
        &self,
        connection: &Connection,
        run: &str,
        entry: &JournalEntry,
        encoded: &EncodedStep,
    ) -> Result<(), StoreError> {
        let sequence = entry.sequence;
        // Spelled out only when something failed: a step that commits formats nothing.
        let operation = || format!("commit step {sequence} of run `{run}`");
        let failed = |error| self.failed(&operation())(error);
        let EncodedStep {
            step,
            time,
            event_name,
            event_data,
            transitions,
            actions,
            children,
            state,
            finish,
            child_states,
        } = encoded;
        let (snapshot, snapshot_delta) = match state {
            StoredState::Full(text) => (Some(text), None),
            StoredState::Delta(text) => (None, Some(text)),
        };
        // 1. The journal entry and the state after it. A duplicate step or an unknown run
        // violates a constraint.
        let inserted = connection.execute_cached(
            INSERT_JOURNAL,
            rusqlite::params![
                run,
                step,
                event_name,
                event_data,
                transitions,
                actions,
                time,
                children,
                snapshot,
                snapshot_delta
            ],
        );
        match inserted {
            Ok(_) => {}
            Err(error) if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                return Err(self.refusal(
                    connection,
                    run,
                    Some(sequence),
                    &operation(),
                    Some(error),
                ));
            }
            Err(error) => return Err(failed(error)),
        }
        // 2. The run's last step (and its end). If it changes nothing, the run is finished or the
        // step is stale: the error drops the transaction, which rolls 1 back.
        let changed = match finish {
            // A running run's step leaves `status` alone: setting it, even to the same value,
            // has SQLite check the column's `CHECK (status IN (...))` (an ephemeral index built
            // and dropped on every execution) and rewrite the `runs_by_protocol` entry. Only a
            // stopped run's step, which the first update leaves, sets it.
            None => connection
                .execute_cached(STEP_OF_RUNNING_RUN, rusqlite::params![step, time, run])
                .and_then(|changed| match changed {
                    0 => connection.execute_cached(
                        "UPDATE runs SET status = 'running', last_step = ?1, last_step_at = ?2, \
                         updated_at = ?2 WHERE id = ?3 AND status = 'stopped' \
                         AND (last_step IS NULL OR last_step < ?1)",
                        rusqlite::params![step, time, run],
                    ),
                    changed => Ok(changed),
                }),
            Some((final_state, exit_code, output, finished_at)) => connection.execute_cached(
                "UPDATE runs SET status = 'finished', holder = NULL, last_step = ?1, \
                 last_step_at = ?2, updated_at = ?2, final_state = ?4, exit_code = ?5, output = ?6, finished_at = ?7 \
                 WHERE id = ?3 AND status <> 'finished' AND (last_step IS NULL OR last_step < ?1)",
                rusqlite::params![step, time, run, final_state, exit_code, output, finished_at],
            ),
        }
        .map_err(failed)?;
        if changed == 0 {
            return Err(self.refusal(connection, run, Some(sequence), &operation(), None));
        }
        // 3. Its children's rows, their states, and with its end, the end of the children it
        // left.
        self.apply_child_changes(connection, run, entry)?;
        self.insert_child_states(connection, child_states)?;
        if finish.is_some() {
            self.end_children(connection, run, entry.unix_milliseconds)?;
        }
        Ok(())
    }

    /// A status change for a run that has not finished; a stop releases its holder.
    pub(super) fn update_status(
        &self,
        connection: &Connection,
        run: &str,
        status: RunStatus,
        unix_milliseconds: u64,
    ) -> Result<(), StoreError> {
        let time = self.integer("a time", unix_milliseconds)?;
        let operation = format!("mark run `{run}` {}", status.as_str());
        let changed = connection
            .execute_cached(
                "UPDATE runs SET status = ?1, updated_at = ?2, \
                 holder = CASE WHEN ?1 = 'stopped' THEN NULL ELSE holder END \
                 WHERE id = ?3 AND status <> 'finished'",
                rusqlite::params![status.as_str(), time, run],
            )
            .map_err(self.failed(&operation))?;
        if changed == 0 {
            return Err(self.refusal(connection, run, None, &operation, None));
        }
        self.children_follow(connection, run, status, time)
    }

    /// Ends a run that has not finished.
    pub(super) fn update_finish(
        &self,
        connection: &Connection,
        run: &str,
        finish: &Finish,
    ) -> Result<(), StoreError> {
        let output = self.encode(run, "output", &finish.output)?;
        let time = self.integer("a finish time", finish.unix_milliseconds)?;
        let operation = format!("finish run `{run}`");
        let changed = connection
            .execute_cached(
                "UPDATE runs SET status = 'finished', holder = NULL, final_state = ?1, \
                 exit_code = ?2, output = ?3, finished_at = ?4, updated_at = ?4 \
                 WHERE id = ?5 AND status <> 'finished'",
                rusqlite::params![finish.final_state, finish.exit_code, output, time, run],
            )
            .map_err(self.failed(&operation))?;
        if changed == 0 {
            return Err(self.refusal(connection, run, None, &operation, None));
        }
        self.end_children(connection, run, finish.unix_milliseconds)
    }

    /// Why a write to `run` changed nothing (or violated a constraint, `cause`): the run is
    /// unknown, finished, or already past `sequence`.
    pub(super) fn refusal(
        &self,
        transaction: &Connection,
        run: &str,
        sequence: Option<u64>,
        operation: &str,
        cause: Option<rusqlite::Error>,
    ) -> StoreError {
        let row = transaction
            .query_row_cached(
                "SELECT status, last_step FROM runs WHERE id = ?1",
                [run],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?)),
            )
            .optional();
        let database = self.location();
        let run = run.to_string();
        match (row, sequence) {
            (Err(error), _) => self.failed("read the run's status")(error),
            (Ok(None), _) => StoreError::UnknownRun { database, run },
            (Ok(Some((status, _))), _) if status == RunStatus::Finished.as_str() => {
                StoreError::RunFinished { database, run }
            }
            (Ok(Some((_, Some(last)))), Some(sequence)) if last >= 0 && last as u64 >= sequence => {
                StoreError::StaleStep {
                    database,
                    run,
                    sequence,
                    last: last as u64,
                }
            }
            (Ok(Some(_)), _) => StoreError::Database {
                database,
                operation: operation.to_string(),
                source: match cause {
                    Some(error) => Box::new(error),
                    None => "the run's row was not updated".into(),
                },
            },
        }
    }
}

/// A step's columns, encoded before the write lock is taken.
struct EncodedStep {
    step: i64,
    time: i64,
    event_name: Option<String>,
    event_data: Option<String>,
    transitions: String,
    actions: String,
    /// The step's child changes, `None` when there are none.
    children: Option<String>,
    /// The state after the step.
    state: StoredState,
    /// Final state, exit code, output, finish time.
    finish: Option<(Option<String>, i32, String, i64)>,
    /// The states of the children that stepped, for their own rows.
    child_states: Vec<children::EncodedChildState>,
}
