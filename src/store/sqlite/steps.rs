//! Writing steps: each step's journal row with the state after it, the run's row, its children's; one transaction for a batch of writes.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;

use rusqlite::{CachedStatement, Connection, ErrorCode, OptionalExtension};

use super::statements::CachedStatements;
use super::{Context, SqliteStore};
use crate::store::codec::states::{StoredState, Written};
use crate::store::codec::steps::{EncodedStep, Planned, StepWrite, after_commit};
use crate::store::{Finish, RunStatus, StoreError, Write};

/// A step's journal row, with the state after it in one of its two columns.
pub(super) const INSERT_JOURNAL: &str = "INSERT INTO journal (run_id, step, event_name, \
     event_data, transitions, actions, recorded_at, children, snapshot, snapshot_delta) VALUES \
     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// A run's status and last step, read before a step whose run this store knows nothing of for
/// sure (see `insert_step`). The last step is the journal's: a running run's step does not
/// write the run's row. The run's id is bound once and the journal is reached through the row:
/// written with `?1` in both places, SQLite compiled the statement again at every new id
/// (`sqlite3Reprepare`, ~60 k instructions).
pub(super) const RUN_BEFORE_STEP: &str = "SELECT status, COALESCE((SELECT step FROM journal WHERE \
     journal.run_id = runs.id ORDER BY step DESC LIMIT 1), last_step) FROM runs WHERE id = ?1";

/// A part of a run's telemetry, numbered after the run's last one (`codec::INSERT_TELEMETRY`).
/// As in `RUN_BEFORE_STEP`, the run's id is bound once and its parts are reached through its
/// row: with the id in the subquery as well, SQLite compiled the statement again at every new
/// id (`sqlite3Reprepare`, an eighth of a `serve` host's time creating instances). A run the
/// store does not know inserts nothing.
const INSERT_TELEMETRY: &str = "INSERT INTO telemetry (run_id, part, lines) SELECT runs.id, \
     (SELECT COALESCE(MAX(part) + 1, 0) FROM telemetry WHERE telemetry.run_id = runs.id), ?2 \
     FROM runs WHERE runs.id = ?1";

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
        // foldhash rather than SipHash: a host's batch looks up each of its runs here, a
        // thousand a batch. `keys` keeps the ids taken out of `written`, put back with their
        // runs' new states without being allocated again.
        let mut chains: HashMap<&str, Written, RandomState> = HashMap::default();
        let mut keys: HashMap<&str, String, RandomState> = HashMap::default();
        let mut encoded = Vec::new();
        for write in writes {
            let Planned::Step(step) = write else {
                continue;
            };
            let (before, known) = match chains.remove(step.run) {
                Some(before) => {
                    let known = Known::InThisBatch(before.step());
                    (Some(before), known)
                }
                None => match self.written.remove_entry(step.run) {
                    Some((key, before)) => {
                        keys.insert(step.run, key);
                        let known = Known::Committed(before.step());
                        (Some(before), known)
                    }
                    None => (None, Known::Nothing),
                },
            };
            let (state, written) = self.context.encode_state(step, before)?;
            chains.insert(step.run, written);
            encoded.push((self.context.encode_step(step, state)?, known));
        }
        // The runs of the batch this store holds with a fencing token, each once: found in a
        // set, not by a scan of those found so far, which made a batch of many runs (a host's
        // thousands of new instances) quadratic.
        let mut fences: Vec<(&str, i64)> = Vec::new();
        let mut fenced: HashSet<&str, RandomState> = HashSet::default();
        for write in writes {
            let run = match write {
                Planned::Step(step) => step.run,
                Planned::Other(other) => other.run(),
            };
            if let Some(token) = self.fences.get(run)
                && fenced.insert(run)
            {
                fences.push((run, *token));
            }
        }
        let expected_version = self.data_version;
        let mut seen_version = None;
        // The runs a redrive reopened, with the fencing tokens it took them under.
        let mut reopened: Vec<(String, i64)> = Vec::new();
        let result = self.write(operation, |context, connection| {
            // What this store committed is still what the file holds only if no other
            // connection has committed since (`PRAGMA data_version` is unchanged by this
            // connection's own commits).
            let version = data_version(connection).map_err(context.failed(operation))?;
            seen_version = Some(version);
            let unchanged = expected_version == Some(version);
            // Another connection wrote: it may have claimed a run this store holds.
            if !unchanged {
                for (run, token) in &fences {
                    context.check_fence(connection, run, Some(*token))?;
                }
            }
            // Runs whose row another write of this batch changed: their steps after it are
            // checked against the row.
            let mut changed_rows: HashSet<&str, RandomState> = HashSet::default();
            // The journal's insert, taken from the statement cache once for the batch rather
            // than once a step (each lookup hashes the statement's text).
            let mut insert_journal = None;
            let mut steps = encoded.iter();
            for write in writes {
                match write {
                    Planned::Step(step) => {
                        let (encoded, known) = steps.next().expect("one encoding per step");
                        let last = match *known {
                            _ if changed_rows.contains(&step.run) => None,
                            Known::InThisBatch(last) => Some(last),
                            Known::Committed(last) if unchanged => Some(last),
                            Known::Committed(_) | Known::Nothing => None,
                        };
                        if insert_journal.is_none() {
                            insert_journal = Some(
                                connection
                                    .prepare_cached(INSERT_JOURNAL)
                                    .map_err(context.failed(operation))?,
                            );
                        }
                        let insert = insert_journal.as_mut().expect("prepared above");
                        context.insert_step(connection, insert, step, encoded, last)?;
                    }
                    Planned::Other(Write::CreateRun(run)) => {
                        changed_rows.insert(&run.id);
                        context.insert_run(connection, run)?;
                    }
                    Planned::Other(Write::MarkStopped {
                        run,
                        unix_milliseconds,
                    }) => {
                        changed_rows.insert(run);
                        context.update_status(
                            connection,
                            run,
                            RunStatus::Stopped,
                            *unix_milliseconds,
                        )?;
                    }
                    Planned::Other(Write::FinishRun { run, finish }) => {
                        changed_rows.insert(run);
                        context.update_finish(connection, run, finish)?;
                    }
                    Planned::Other(Write::ApplyInbox {
                        run,
                        entry,
                        step,
                        outcome,
                        output,
                    }) => {
                        context.apply_entry(connection, run, *entry, *step, outcome, output)?;
                    }
                    Planned::Other(Write::Reopen {
                        run,
                        unix_milliseconds,
                        holder,
                    }) => {
                        changed_rows.insert(run);
                        let claimed = fences.iter().any(|(held, _)| *held == run.as_str());
                        let token = context.update_reopen(
                            connection,
                            run,
                            *unix_milliseconds,
                            holder,
                            claimed,
                        )?;
                        reopened.push((run.clone(), token));
                    }
                    Planned::Other(Write::Telemetry { run, lines }) => {
                        let operation = || format!("append to the telemetry of run `{run}`");
                        let inserted = connection
                            .execute_cached(INSERT_TELEMETRY, rusqlite::params![run, lines])
                            .map_err(context.failed(&operation()))?;
                        if inserted == 0 {
                            return Err(context.refusal(connection, run, None, &operation(), None));
                        }
                    }
                    Planned::Other(Write::Trace { run, trace }) => {
                        let operation = || format!("record the trace of run `{run}`");
                        connection
                            .execute_cached(
                                &crate::store::codec::UPDATE_TRACE.replace('$', "?"),
                                rusqlite::params![run, trace],
                            )
                            .map_err(context.failed(&operation()))?;
                    }
                    Planned::Other(Write::Step { .. }) => {
                        unreachable!("`Planned::of` borrows every step as `Planned::Step`")
                    }
                }
            }
            Ok(())
        });
        if let Some(version) = seen_version {
            // Another connection wrote: the states and last steps kept here may be behind the
            // file's. Forgotten, the runs' next steps are checked against their rows and their
            // states written in full.
            if expected_version != Some(version) {
                self.written.clear();
            }
            // Known only after a commit: a refused transaction (a fenced run among others) leaves
            // the next one to check afresh.
            self.data_version = result.is_ok().then_some(version);
        }
        if result.is_ok() {
            after_commit(
                writes,
                chains,
                &mut keys,
                &mut self.written,
                &mut self.fences,
            );
            self.fences.extend(reopened);
        }
        result
    }
}

impl Context {
    /// Writes one step: its journal entry with the state after it (a full snapshot or a delta
    /// of the one before), and with its end, the run's. Refused (`refusal`) for an unknown or
    /// finished run and for a step not above the run's last. `known_last` is the run's last
    /// step when this store knows for sure that the run is running at it (it committed that
    /// step and nothing has changed the run since): the run's row is then not read.
    fn insert_step(
        &self,
        connection: &Connection,
        insert_journal: &mut CachedStatement<'_>,
        write: &StepWrite<'_>,
        encoded: &EncodedStep,
        known_last: Option<i64>,
    ) -> Result<(), StoreError> {
        let (run, entry) = (write.run, write.entry);
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
        // 1. The run is running (a stopped one runs again) and the step comes after its last.
        // A running run's step writes nothing to the run's row: its last step and when it was
        // taken are the journal's, so the step costs one row (and its index entry), not also
        // a rewrite of the run's row on a page of its own.
        let last = match known_last {
            Some(last) if last < *step => Some(last),
            _ => self.check_step(connection, run, *step, sequence, &operation)?,
        };
        // A delta of a state another connection has since written past (its step is not the
        // run's last) would not rebuild: the state is written whole instead.
        let whole;
        let (snapshot, snapshot_delta) = match state {
            StoredState::Full(text) => (Some(text), None),
            StoredState::Delta { base, text } if Some(*base) == last => (None, Some(text)),
            StoredState::Delta { .. } => {
                whole = self.encode_snapshot(run, write.snapshot)?;
                (Some(&whole), None)
            }
        };
        // 2. The journal entry and the state after it (`INSERT_JOURNAL`). A duplicate step or
        // an unknown run violates a constraint.
        let inserted = insert_journal.execute(rusqlite::params![
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
        ]);
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
        // 3. The run's end, with its last step.
        if let Some((final_state, exit_code, output, finished_at)) = finish {
            let changed = connection
                .execute_cached(
                    "UPDATE runs SET status = 'finished', holder = NULL, last_step = ?1, \
                     last_step_at = ?2, updated_at = ?2, final_state = ?4, exit_code = ?5, \
                     output = ?6, finished_at = ?7 WHERE id = ?3 AND status <> 'finished'",
                    rusqlite::params![step, time, run, final_state, exit_code, output, finished_at],
                )
                .map_err(failed)?;
            if changed == 0 {
                return Err(self.refusal(connection, run, Some(sequence), &operation(), None));
            }
        }
        // 4. Its children's rows, their states, and with its end, the end of the children it
        // left.
        self.apply_child_changes(connection, run, entry)?;
        self.insert_child_states(connection, child_states)?;
        if finish.is_some() {
            self.end_children(connection, run, entry.unix_milliseconds)?;
        }
        Ok(())
    }

    /// Refuses a step of a run that is unknown or finished, or not above the run's last step
    /// (`refusal`); a stopped run taking a step is running again. The run's last step.
    fn check_step(
        &self,
        connection: &Connection,
        run: &str,
        step: i64,
        sequence: u64,
        operation: &dyn Fn() -> String,
    ) -> Result<Option<i64>, StoreError> {
        let row = run_state(connection, run)
            .optional()
            .map_err(self.failed(&operation()))?;
        match row {
            Some((status, last))
                if status == RunStatus::Running.as_str() && last.is_none_or(|last| last < step) =>
            {
                Ok(last)
            }
            Some((status, last))
                if status == RunStatus::Stopped.as_str() && last.is_none_or(|last| last < step) =>
            {
                connection
                    .execute_cached(
                        "UPDATE runs SET status = 'running' WHERE id = ?1 AND status = 'stopped'",
                        [run],
                    )
                    .map_err(self.failed(&operation()))?;
                Ok(last)
            }
            _ => Err(self.refusal(connection, run, Some(sequence), &operation(), None)),
        }
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

    /// A run driven again by `holder` (`Store::reopen_run`): running, its end cleared, held by
    /// `holder` under a new fencing token, which it gives. A finished run is taken so; an
    /// unfinished one only when this store `claimed` it. Its children's rows are left as they
    /// ended: a child that starts again resets its row.
    pub(super) fn update_reopen(
        &self,
        connection: &Connection,
        run: &str,
        unix_milliseconds: u64,
        holder: &crate::store::Holder,
        claimed: bool,
    ) -> Result<i64, StoreError> {
        let time = self.integer("a time", unix_milliseconds)?;
        let holder = self.encode_holder(holder)?;
        let operation = format!("reopen run `{run}`");
        let token: Option<i64> = connection
            .query_row_cached(
                "UPDATE runs SET status = 'running', final_state = NULL, exit_code = NULL, \
                 output = NULL, finished_at = NULL, updated_at = ?1, redrives = redrives + 1, \
                 holder = ?2, fencing = fencing + 1 \
                 WHERE id = ?3 AND (status = 'finished' OR ?4) RETURNING fencing",
                rusqlite::params![time, holder, run, claimed],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.failed(&operation))?;
        match token {
            Some(token) => Ok(token),
            None => {
                let row = run_state(connection, run)
                    .optional()
                    .map_err(self.failed(&operation))?;
                Err(self.not_reopened(row.is_some(), run, &operation))
            }
        }
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
        match run_state(transaction, run).optional() {
            Err(error) => self.failed("read the run's status")(error),
            Ok(row) => self.codec.refusal(
                row,
                run,
                sequence,
                operation,
                cause.map(|error| Box::new(error) as crate::store::Cause),
            ),
        }
    }
}

/// A run's status and last step (the journal's, or for a child run, which has no journal of
/// its own, its row's).
fn run_state(connection: &Connection, run: &str) -> rusqlite::Result<(String, Option<i64>)> {
    connection.query_row_cached(RUN_BEFORE_STEP, [run], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?))
    })
}

/// The connection's `PRAGMA data_version`: changed by every commit of another connection to
/// the file, never by this connection's own.
fn data_version(connection: &Connection) -> rusqlite::Result<i64> {
    connection.query_row_cached("PRAGMA data_version", [], |row| row.get(0))
}

/// What this store knows of a run's last step before writing the next one.
#[derive(Clone, Copy)]
enum Known {
    /// Nothing: the run's row is read.
    Nothing,
    /// This store committed this step of the running run; still true if no other connection
    /// has written since.
    Committed(i64),
    /// An earlier step of the same batch, checked in the same transaction.
    InThisBatch(i64),
}
