//! Writing to PostgreSQL: a batch of steps in one transaction, each step's run locked and checked, its journal row with the state after it, its children's rows.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use tokio_postgres::GenericClient;

use super::PostgresStore;
use super::session::Session;
use crate::base::durable::ChildChange;
use crate::store::codec::children::{ChildRowWrite, EncodedChildState};
use crate::store::codec::states::{StoredState, Written};
use crate::store::codec::steps::{EncodedStep, Planned, StepWrite, after_commit};
use crate::store::{Finish, Holder, NewRun, RunStatus, StoreError, Unclaimed, Write};

/// A run's last step in its journal. Read after the run's lock, in a statement of its own:
/// under PostgreSQL's READ COMMITTED a statement sees what was committed when it started, so a
/// subquery of the locking statement would miss a step committed by the writer it waited for.
const LAST_JOURNAL_STEP: &str =
    "SELECT step FROM journal WHERE run_id = $1 ORDER BY step DESC LIMIT 1";

impl PostgresStore {
    /// Commits `writes` in one transaction of a few statements whatever their number: the rows
    /// of their runs locked and read at once, each write checked against them, and the journal
    /// rows inserted together (a step that ends its run, a stop, a child's change are statements
    /// of their own). Each step's state is encoded before the transaction starts, as a delta of
    /// the state this store wrote for the run's step before (`Written`) where it has it,
    /// otherwise in full; a delta is written only if that step is still the run's last once the
    /// run's row is locked (another host may have written since), and whole otherwise. A failed
    /// transaction forgets the states of the runs it wrote to.
    pub(super) fn commit_planned(
        &mut self,
        operation: &str,
        writes: &[Planned<'_>],
    ) -> Result<(), StoreError> {
        let mut chains: HashMap<&str, Written, RandomState> = HashMap::default();
        let mut encoded = Vec::new();
        for write in writes {
            let Planned::Step(step) = write else {
                continue;
            };
            let before = chains
                .remove(step.run)
                .or_else(|| self.written.remove(step.run));
            let (state, written) = self.codec.encode_state(step, before)?;
            chains.insert(step.run, written);
            encoded.push(self.codec.encode_step(step, state)?);
        }
        // The tokens of the batch's runs this store holds, copied: the transaction borrows the
        // store.
        let fences: Vec<Option<i64>> = writes
            .iter()
            .map(|write| self.fences.get(planned_run(write)).copied())
            .collect();
        let lease = self.lease.clone();
        // The runs a redrive reopened, with the fencing tokens it took them under.
        let mut reopened: Vec<(String, i64)> = Vec::new();
        let result = self.write(operation, |session| {
            // Every run the batch writes to, locked and read at once: the checks below are made
            // against what was read, which nobody else can change until the commit.
            let runs: Vec<&str> = writes.iter().map(planned_run).collect();
            // The batch's new runs first, in one statement: its steps of them come after.
            let created: Vec<&NewRun> = writes
                .iter()
                .filter_map(|write| match write {
                    Planned::Other(Write::CreateRun(new)) => Some(new),
                    _ => None,
                })
                .collect();
            session.insert_runs(&created)?;
            let mut known = session.lock_runs(&runs)?;
            let mut journal = JournalRows {
                writer: lease.clone(),
                ..JournalRows::default()
            };
            let mut telemetry = super::telemetry::TelemetryRows::default();
            let mut steps = encoded.iter();
            // A redrive's reopening moves its run's token on for the batch's later writes.
            let mut fences = fences.clone();
            for (index, write) in writes.iter().enumerate() {
                let run = planned_run(write);
                let fence = fences[index];
                if let Some(held) = fence {
                    let current = known.get(run).map(|row| row.fencing);
                    session.codec.fenced(run, held, current)?;
                }
                match write {
                    Planned::Step(step) => {
                        let encoded = steps.next().expect("one encoding per step");
                        session.stage_step(step, encoded, &mut known, &mut journal)?;
                    }
                    Planned::Other(Write::CreateRun(new)) => {
                        known.insert(new.id.clone(), Locked::created());
                    }
                    Planned::Other(Write::MarkStopped {
                        run,
                        unix_milliseconds,
                    }) => {
                        session.update_status(run, RunStatus::Stopped, *unix_milliseconds)?;
                        known
                            .entry(run.clone())
                            .and_modify(|row| row.status = RunStatus::Stopped.as_str().into());
                    }
                    Planned::Other(Write::ApplyInbox {
                        run,
                        entry,
                        step,
                        outcome,
                        output,
                    }) => {
                        session.apply_entry(run, *entry, *step, outcome, output)?;
                    }
                    Planned::Other(Write::FinishRun { run, finish }) => {
                        session.update_finish(run, finish)?;
                        known
                            .entry(run.clone())
                            .and_modify(|row| row.status = RunStatus::Finished.as_str().into());
                    }
                    Planned::Other(Write::Reopen {
                        run,
                        unix_milliseconds,
                        holder,
                    }) => {
                        let token = session.update_reopen(
                            run,
                            *unix_milliseconds,
                            holder,
                            fence.is_some(),
                        )?;
                        reopened.push((run.clone(), token));
                        for later in index + 1..writes.len() {
                            if planned_run(&writes[later]) == run.as_str() {
                                fences[later] = Some(token);
                            }
                        }
                        known.entry(run.clone()).and_modify(|row| {
                            row.status = RunStatus::Running.as_str().into();
                            row.fencing = token;
                        });
                    }
                    Planned::Other(Write::Telemetry { run, lines }) => telemetry.push(run, lines),
                    Planned::Other(Write::Trace { run, trace }) => {
                        session.execute(
                            &|| format!("record the trace of run `{run}`"),
                            crate::store::codec::UPDATE_TRACE,
                            &[run, trace],
                        )?;
                    }
                    Planned::Other(Write::Step { .. }) => {
                        unreachable!("`Planned::of` borrows every step as `Planned::Step`")
                    }
                }
            }
            session.insert_journal(&journal)?;
            session.insert_telemetry(&telemetry)?;
            session.announce_runs(&super::changes::announced(writes))
        });
        if result.is_ok() {
            after_commit(
                writes,
                chains,
                &mut HashMap::default(),
                &mut self.written,
                &mut self.fences,
            );
            self.fences.extend(reopened);
        }
        result
    }
}

/// What a claim found: for each run, why it was not claimed (`None`: claimed); and the fencing
/// token of each run claimed.
pub(super) type Claimed = (Vec<Option<Unclaimed>>, Vec<(String, i64)>);

/// A run's row as a batch read it under its lock, kept up to date by the batch's own writes.
struct Locked {
    status: String,
    last: Option<i64>,
    fencing: i64,
}

impl Locked {
    /// A run the batch itself created.
    fn created() -> Locked {
        Locked {
            status: RunStatus::Running.as_str().to_string(),
            last: None,
            fencing: 0,
        }
    }
}

/// New runs' columns, for one `INSERT ... SELECT FROM unnest(...)`.
#[derive(Default)]
struct NewRunColumns<'a> {
    id: Vec<&'a str>,
    path: Vec<&'a str>,
    hash: Vec<&'a str>,
    text_hash: Vec<Option<&'a str>>,
    inputs: Vec<String>,
    started: Vec<i64>,
    grants: Vec<Option<String>>,
    origin: Vec<&'static str>,
    holder: Vec<Option<String>>,
    forked_from: Vec<Option<String>>,
}

/// A batch's journal rows, column by column, for one `INSERT ... SELECT FROM unnest(...)`.
#[derive(Default)]
struct JournalRows {
    run: Vec<String>,
    step: Vec<i64>,
    event_name: Vec<Option<String>>,
    event_data: Vec<Option<String>>,
    transitions: Vec<String>,
    actions: Vec<String>,
    time: Vec<i64>,
    children: Vec<Option<String>>,
    snapshot: Vec<Option<String>>,
    snapshot_delta: Vec<Option<String>>,
    /// The run's fencing token each step was committed under.
    fencing: Vec<i64>,
    /// The lease of the host that committed them (`None` for a process that keeps none).
    writer: Option<String>,
}

impl JournalRows {
    fn push(
        &mut self,
        run: &str,
        encoded: &EncodedStep,
        snapshot: Option<String>,
        snapshot_delta: Option<String>,
        fencing: i64,
    ) {
        self.fencing.push(fencing);
        self.run.push(run.to_string());
        self.step.push(encoded.step);
        self.event_name.push(encoded.event_name.clone());
        self.event_data.push(encoded.event_data.clone());
        self.transitions.push(encoded.transitions.clone());
        self.actions.push(encoded.actions.clone());
        self.time.push(encoded.time);
        self.children.push(encoded.children.clone());
        self.snapshot.push(snapshot);
        self.snapshot_delta.push(snapshot_delta);
    }
}

/// The run a write of a batch writes to.
fn planned_run<'a>(write: &Planned<'a>) -> &'a str {
    match write {
        Planned::Step(step) => step.run,
        Planned::Other(other) => other.run(),
    }
}

/// The database's clock, in Unix milliseconds: leases are measured by it, never by a host's.
const NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

impl<C: GenericClient + Sync> Session<'_, C> {
    /// Takes the lease `host` for `ttl` milliseconds, or renews it while it has not run out;
    /// whether it is held now (a lease that ran out is never taken again).
    pub(super) fn renew_lease(&self, host: &str, ttl: i64) -> Result<bool, StoreError> {
        let renewed = self.query_optional(
            &|| format!("renew the lease `{host}`"),
            &format!(
                "INSERT INTO hosts (id, taken_at, renewed_at, expires_at) SELECT $1, now.at, \
                 now.at, now.at + $2 FROM (SELECT {NOW} AS at) AS now ON CONFLICT (id) DO UPDATE \
                 SET renewed_at = excluded.renewed_at, expires_at = excluded.expires_at \
                 WHERE hosts.expires_at > excluded.renewed_at RETURNING id"
            ),
            &[&host, &ttl],
        )?;
        Ok(renewed.is_some())
    }

    /// Refuses the transaction's writes when the lease `host` has run out.
    pub(super) fn check_lease(&self, host: &str) -> Result<(), StoreError> {
        let live = self.lease_is_live(host)?;
        if live {
            return Ok(());
        }
        Err(StoreError::LeaseLost {
            database: self.codec.location(),
            host: host.to_string(),
        })
    }

    /// Whether the lease `host` exists and has not run out.
    fn lease_is_live(&self, host: &str) -> Result<bool, StoreError> {
        let row = self.query_optional(
            &|| format!("read the lease `{host}`"),
            &format!("SELECT expires_at > {NOW} FROM hosts WHERE id = $1"),
            &[&host],
        )?;
        match row {
            Some(row) => self.column(&row, 0, ""),
            None => Ok(false),
        }
    }

    /// Inserts a new run; one with the same id is refused.
    pub(super) fn insert_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.insert_runs(&[run])
    }

    /// Inserts new runs in one statement; a run whose id is taken (already in the store, or
    /// twice in `runs`) is refused, the first such named.
    pub(super) fn insert_runs(&self, runs: &[&NewRun]) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        let codec = self.codec;
        let text_hashes = self.keep_texts(runs)?;
        let mut columns = NewRunColumns::default();
        for (run, text_hash) in runs.iter().zip(&text_hashes) {
            let id = &run.id;
            columns.id.push(id.as_str());
            columns.path.push(run.protocol_path.as_str());
            columns.hash.push(run.protocol_hash.as_str());
            columns.text_hash.push(text_hash.as_deref());
            columns
                .inputs
                .push(codec.encode(id, "inputs", &run.inputs)?);
            columns
                .started
                .push(codec.integer("a start time", run.started_unix_milliseconds)?);
            columns.grants.push(
                run.grants
                    .as_ref()
                    .map(|grants| codec.encode(id, "grants", grants))
                    .transpose()?,
            );
            columns.origin.push(run.origin.as_str());
            columns.holder.push(
                run.holder
                    .as_ref()
                    .map(|holder| codec.encode(id, "holder", holder))
                    .transpose()?,
            );
            columns.forked_from.push(
                run.forked_from
                    .as_ref()
                    .map(|origin| codec.encode(id, "fork origin", origin))
                    .transpose()?,
            );
        }
        let inserted = self.query(
            &|| format!("create {} run(s)", runs.len()),
            "INSERT INTO runs (id, protocol_path, protocol_hash, protocol_text_hash, inputs, \
             status, started_at, updated_at, grants, origin, holder, forked_from) SELECT new.id, \
             new.path, new.hash, new.text_hash, new.inputs, 'running', new.started, \
             new.started, new.grants, new.origin, new.holder, new.forked_from FROM \
             unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], \
             $7::text[], $8::text[], $9::text[], $10::text[]) AS new(id, path, hash, text_hash, \
             inputs, started, grants, origin, holder, forked_from) ON CONFLICT (id) DO NOTHING \
             RETURNING id",
            &[
                &columns.id,
                &columns.path,
                &columns.hash,
                &columns.text_hash,
                &columns.inputs,
                &columns.started,
                &columns.grants,
                &columns.origin,
                &columns.holder,
                &columns.forked_from,
            ],
        )?;
        let mut made: HashMap<String, usize> = HashMap::new();
        for row in &inserted {
            *made.entry(self.column::<String>(row, 0, "")?).or_default() += 1;
        }
        for run in runs {
            match made.get_mut(&run.id) {
                Some(count) if *count > 0 => *count -= 1,
                _ => {
                    return Err(StoreError::RunExists {
                        database: codec.location(),
                        run: run.id.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Locks the rows of `runs` (in id order, so that two hosts locking rows of the same runs
    /// never wait on each other in a circle) and reads what a batch checks its writes against:
    /// each run's status, last step (its journal's, or its row's for a child run) and fencing
    /// token. A run the store does not have is missing from the map.
    fn lock_runs(&self, runs: &[&str]) -> Result<HashMap<String, Locked>, StoreError> {
        let mut ids: Vec<&str> = runs.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let operation = || format!("lock {} run(s)", ids.len());
        let mut known = HashMap::new();
        for row in self.query(
            &operation,
            "SELECT id, status, last_step, fencing FROM runs WHERE id = ANY($1) ORDER BY id \
             FOR UPDATE",
            &[&ids],
        )? {
            let id: String = self.column(&row, 0, "")?;
            let locked = Locked {
                status: self.column(&row, 1, &id)?,
                last: self.column(&row, 2, &id)?,
                fencing: self.column(&row, 3, &id)?,
            };
            known.insert(id, locked);
        }
        // After the lock, in a statement of its own (as `LAST_JOURNAL_STEP` says why).
        for row in self.query(
            &operation,
            "SELECT ids.id, (SELECT step FROM journal WHERE journal.run_id = ids.id ORDER BY \
             step DESC LIMIT 1) FROM unnest($1::text[]) AS ids(id)",
            &[&ids],
        )? {
            let id: String = self.column(&row, 0, "")?;
            let last: Option<i64> = self.column(&row, 1, &id)?;
            if let (Some(locked), Some(last)) = (known.get_mut(&id), last) {
                locked.last = Some(last);
            }
        }
        Ok(known)
    }

    /// Checks one step against its run as the batch knows it (refused when the run is unknown
    /// or finished, or the step not above its last; a stopped run runs again), then stages its
    /// journal row, with the state after it, for the batch's one insert, and writes its end and
    /// its children's rows and states.
    fn stage_step(
        &self,
        write: &StepWrite<'_>,
        encoded: &EncodedStep,
        known: &mut HashMap<String, Locked>,
        journal: &mut JournalRows,
    ) -> Result<(), StoreError> {
        let (run, entry) = (write.run, write.entry);
        let sequence = entry.sequence;
        let operation = || format!("commit step {sequence} of run `{run}`");
        let Some(row) = known
            .get_mut(run)
            .filter(|row| row.status != RunStatus::Finished.as_str())
            .filter(|row| row.last.is_none_or(|last| last < encoded.step))
        else {
            let row = known.get(run).map(|row| (row.status.clone(), row.last));
            return Err(self
                .codec
                .refusal(row, run, Some(sequence), &operation(), None));
        };
        if row.status == RunStatus::Stopped.as_str() {
            self.execute(
                &operation,
                "UPDATE runs SET status = 'running' WHERE id = $1 AND status = 'stopped'",
                &[&run],
            )?;
            row.status = RunStatus::Running.as_str().to_string();
        }
        let last = row.last.replace(encoded.step);
        let (snapshot, snapshot_delta) = match &encoded.state {
            StoredState::Full(text) => (Some(text.clone()), None),
            StoredState::Delta { base, text } if Some(*base) == last => (None, Some(text.clone())),
            StoredState::Delta { .. } => {
                (Some(self.codec.encode_snapshot(run, write.snapshot)?), None)
            }
        };
        journal.push(run, encoded, snapshot, snapshot_delta, row.fencing);
        if let Some((final_state, exit_code, output, finished_at)) = &encoded.finish {
            self.execute(
                &operation,
                "UPDATE runs SET status = 'finished', holder = NULL, last_step = $1, \
                 last_step_at = $2, updated_at = $2, final_state = $4, exit_code = $5, \
                 output = $6, finished_at = $7 WHERE id = $3",
                &[
                    &encoded.step,
                    &encoded.time,
                    &run,
                    final_state,
                    &i64::from(*exit_code),
                    output,
                    finished_at,
                ],
            )?;
            row.status = RunStatus::Finished.as_str().to_string();
        }
        self.apply_child_changes(run, entry)?;
        self.insert_child_states(&encoded.child_states)?;
        if encoded.finish.is_some() {
            self.end_children(run, encoded.time)?;
        }
        Ok(())
    }

    /// Inserts the batch's journal rows in one statement.
    fn insert_journal(&self, rows: &JournalRows) -> Result<(), StoreError> {
        if rows.run.is_empty() {
            return Ok(());
        }
        self.execute(
            &|| format!("commit {} step(s)", rows.run.len()),
            "INSERT INTO journal (run_id, step, event_name, event_data, transitions, actions, \
             recorded_at, children, snapshot, snapshot_delta, fencing, writer) SELECT *, \
             $12::text FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], \
             $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[], $10::text[], \
             $11::bigint[])",
            &[
                &rows.run,
                &rows.step,
                &rows.event_name,
                &rows.event_data,
                &rows.transitions,
                &rows.actions,
                &rows.time,
                &rows.children,
                &rows.snapshot,
                &rows.snapshot_delta,
                &rows.fencing,
                &rows.writer,
            ],
        )?;
        Ok(())
    }

    /// A run's status and last step (its journal's, or its row's for a child run).
    fn run_state(
        &self,
        run: &str,
        operation: &dyn Fn() -> String,
    ) -> Result<Option<(String, Option<i64>)>, StoreError> {
        let sql = "SELECT status, last_step FROM runs WHERE id = $1";
        let Some(row) = self.query_optional(operation, sql, &[&run])? else {
            return Ok(None);
        };
        let status: String = self.column(&row, 0, run)?;
        let journal = self.query_optional(operation, LAST_JOURNAL_STEP, &[&run])?;
        let last = match journal {
            Some(step) => Some(self.column(&step, 0, run)?),
            None => self.column(&row, 1, run)?,
        };
        Ok(Some((status, last)))
    }

    /// Why a write to `run` changed nothing: the run is unknown, finished, or past `sequence`.
    pub(super) fn refusal(
        &self,
        run: &str,
        sequence: Option<u64>,
        operation: &str,
    ) -> Result<StoreError, StoreError> {
        let row = self.run_state(run, &|| "read the run's status".to_string())?;
        Ok(self.codec.refusal(row, run, sequence, operation, None))
    }

    /// A status change for a run that has not finished; a stop releases its holder, and the
    /// run's live children follow it.
    pub(super) fn update_status(
        &self,
        run: &str,
        status: RunStatus,
        unix_milliseconds: u64,
    ) -> Result<(), StoreError> {
        let time = self.codec.integer("a time", unix_milliseconds)?;
        let operation = format!("mark run `{run}` {}", status.as_str());
        let changed = self.execute(
            &|| operation.clone(),
            "UPDATE runs SET status = $1::text, updated_at = $2, \
             holder = CASE WHEN $1::text = 'stopped' THEN NULL ELSE holder END \
             WHERE id = $3 AND status <> 'finished'",
            &[&status.as_str(), &time, &run],
        )?;
        if changed == 0 {
            return Err(self.refusal(run, None, &operation)?);
        }
        let from = match status {
            RunStatus::Stopped => RunStatus::Running,
            RunStatus::Running => RunStatus::Stopped,
            RunStatus::Finished => return Ok(()),
        };
        self.execute(
            &|| format!("mark the children of run `{run}` {}", status.as_str()),
            "UPDATE runs SET status = $1, updated_at = $2 WHERE root = $3 AND status = $4",
            &[&status.as_str(), &time, &run, &from.as_str()],
        )?;
        Ok(())
    }

    /// Ends a run that has not finished, and the children it left running.
    pub(super) fn update_finish(&self, run: &str, finish: &Finish) -> Result<(), StoreError> {
        let output = self.codec.encode(run, "output", &finish.output)?;
        let time = self
            .codec
            .integer("a finish time", finish.unix_milliseconds)?;
        let operation = format!("finish run `{run}`");
        let changed = self.execute(
            &|| operation.clone(),
            "UPDATE runs SET status = 'finished', holder = NULL, final_state = $1, \
             exit_code = $2, output = $3, finished_at = $4, updated_at = $4 \
             WHERE id = $5 AND status <> 'finished'",
            &[
                &finish.final_state,
                &i64::from(finish.exit_code),
                &output,
                &time,
                &run,
            ],
        )?;
        if changed == 0 {
            return Err(self.refusal(run, None, &operation)?);
        }
        self.end_children(run, time)
    }

    /// A run driven again by `holder` (`Store::reopen_run`): running, its end cleared, held by
    /// `holder` under a new fencing token, which it gives. A finished run is taken so; an
    /// unfinished one only when this store `claimed` it. Its children's rows are left as they
    /// ended: a child that starts again resets its row.
    pub(super) fn update_reopen(
        &self,
        run: &str,
        unix_milliseconds: u64,
        holder: &crate::store::Holder,
        claimed: bool,
    ) -> Result<i64, StoreError> {
        let time = self.codec.integer("a time", unix_milliseconds)?;
        let holder = self.codec.encode_holder(holder)?;
        let operation = format!("reopen run `{run}`");
        let row = self.query_optional(
            &|| operation.clone(),
            "UPDATE runs SET status = 'running', final_state = NULL, exit_code = NULL, \
             output = NULL, finished_at = NULL, updated_at = $1, redrives = redrives + 1, \
             holder = $2, fencing = fencing + 1 \
             WHERE id = $3 AND (status = 'finished' OR $4) RETURNING fencing",
            &[&time, &holder, &run, &claimed],
        )?;
        match row {
            Some(row) => self.column(&row, 0, run),
            None => {
                let exists = self.run_state(run, &|| operation.clone())?.is_some();
                Err(self.codec.not_reopened(exists, run, &operation))
            }
        }
    }

    /// The run that records children ended: the children it left running ended with it.
    fn end_children(&self, run: &str, time: i64) -> Result<(), StoreError> {
        self.execute(
            &|| format!("end the children of run `{run}`"),
            "UPDATE runs SET status = 'finished', exit_code = $1, output = 'null', \
             finished_at = $2, updated_at = $2 WHERE root = $3 AND status <> 'finished'",
            &[&i64::from(ChildChange::CANCELLED_EXIT_CODE), &time, &run],
        )?;
        Ok(())
    }

    /// Applies a step's child changes to the children's rows (`<run>/<path>`), `run` being the
    /// run that records them.
    fn apply_child_changes(
        &self,
        run: &str,
        entry: &crate::store::JournalEntry,
    ) -> Result<(), StoreError> {
        if entry.children.is_empty() {
            return Ok(());
        }
        let time = self.codec.integer("a step time", entry.unix_milliseconds)?;
        let operation = || {
            format!(
                "record the children of run `{run}` at step {}",
                entry.sequence
            )
        };
        for write in self.codec.child_row_writes(run, entry)? {
            match write {
                ChildRowWrite::Begin {
                    id,
                    protocol_path,
                    protocol_hash,
                    inputs,
                    parent,
                    replace,
                } => {
                    // A row of that id that is not this run's child is never taken over.
                    let sql = if replace {
                        "INSERT INTO runs (id, protocol_path, protocol_hash, inputs, status, \
                         started_at, updated_at, origin, parent, root) VALUES ($1, $2, $3, $4, \
                         'running', $5, $5, 'child', $6, $7) ON CONFLICT (id) DO UPDATE SET \
                         protocol_path = excluded.protocol_path, protocol_hash = \
                         excluded.protocol_hash, inputs = excluded.inputs, status = 'running', \
                         started_at = excluded.started_at, updated_at = excluded.updated_at, \
                         last_step = NULL, last_step_at = NULL, final_state = NULL, exit_code = \
                         NULL, output = NULL, finished_at = NULL WHERE runs.origin = 'child' AND \
                         runs.root = excluded.root"
                    } else {
                        "INSERT INTO runs (id, protocol_path, protocol_hash, inputs, status, \
                         started_at, updated_at, origin, parent, root) VALUES ($1, $2, $3, $4, \
                         'running', $5, $5, 'child', $6, $7) ON CONFLICT (id) DO NOTHING"
                    };
                    let written = self.execute(
                        &operation,
                        sql,
                        &[
                            &id,
                            &protocol_path,
                            &protocol_hash,
                            &inputs,
                            &time,
                            &parent,
                            &run,
                        ],
                    )?;
                    if replace && written == 0 {
                        return Err(StoreError::RunExists {
                            database: self.codec.location(),
                            run: id,
                        });
                    }
                }
                ChildRowWrite::Stepped { id, step } => {
                    self.execute(
                        &operation,
                        "UPDATE runs SET status = 'running', last_step = $1, last_step_at = $2, \
                         updated_at = $2 WHERE id = $3 AND root = $4 AND status <> 'finished'",
                        &[&step, &time, &id, &run],
                    )?;
                }
                ChildRowWrite::Ended {
                    id,
                    final_state,
                    exit_code,
                    output,
                    below,
                } => {
                    self.execute(
                        &operation,
                        "UPDATE runs SET status = 'finished', final_state = $1, exit_code = $2, \
                         output = $3, finished_at = $4, updated_at = $4 WHERE id = $5 AND \
                         root = $6 AND status <> 'finished'",
                        &[
                            &final_state,
                            &i64::from(exit_code),
                            &output,
                            &time,
                            &id,
                            &run,
                        ],
                    )?;
                    // Its own children ended with it (a cancelled child's never said so).
                    self.execute(
                        &operation,
                        "UPDATE runs SET status = 'finished', exit_code = $1, output = 'null', \
                         finished_at = $2, updated_at = $2 WHERE root = $3 AND \
                         starts_with(id, $4::text) AND status <> 'finished'",
                        &[
                            &i64::from(ChildChange::CANCELLED_EXIT_CODE),
                            &time,
                            &run,
                            &below,
                        ],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Writes each child's state to its row's snapshot, replacing the one before; a child with
    /// no row keeps none.
    pub(super) fn insert_child_states(
        &self,
        states: &[EncodedChildState],
    ) -> Result<(), StoreError> {
        for state in states {
            self.execute(
                &|| format!("keep the state of child run `{}`", state.id),
                "INSERT INTO snapshots (run_id, step, snapshot, taken_at) SELECT $1, $2, $3, $4 \
                 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) ON CONFLICT (run_id) DO UPDATE \
                 SET step = excluded.step, snapshot = excluded.snapshot, taken_at = \
                 excluded.taken_at",
                &[&state.id, &state.step, &state.snapshot, &state.taken_at],
            )?;
        }
        Ok(())
    }

    /// Records `holder` as the holder of each run that `codec.claim` lets it take, each run's
    /// row locked while it is read and written.
    pub(super) fn claim_runs(
        &self,
        runs: &[String],
        holder: &Holder,
        encoded: &str,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Claimed, StoreError> {
        let operation = || "claim runs".to_string();
        let mut others = Vec::with_capacity(runs.len());
        let mut tokens = Vec::new();
        for run in runs {
            let recorded = match self.query_optional(
                &operation,
                "SELECT holder, parent, status FROM runs WHERE id = $1 FOR UPDATE",
                &[run],
            )? {
                Some(row) => Some((
                    self.column(&row, 0, run)?,
                    self.column(&row, 1, run)?,
                    self.column(&row, 2, run)?,
                )),
                None => None,
            };
            // A holder with a lease lives while its lease does and `holds` says it does (on
            // its own machine its lock file tells at once, after a `kill -9`); one without, while
            // its lock file is held.
            let mut failure = None;
            let mut live = |other: &Holder| match &other.host {
                Some(lease) => {
                    let leased = self.lease_is_live(lease).unwrap_or_else(|error| {
                        failure = Some(error);
                        true
                    });
                    leased && holds(other)
                }
                None => holds(other),
            };
            let unclaimed = self.codec.claim(run, recorded, holder, &mut live)?;
            if let Some(error) = failure {
                return Err(error);
            }
            if unclaimed.is_none()
                && let Some(row) = self.query_optional(
                    &operation,
                    "UPDATE runs SET holder = $1, fencing = fencing + 1 WHERE id = $2 \
                     RETURNING fencing",
                    &[&encoded, run],
                )?
            {
                tokens.push((run.clone(), self.column(&row, 0, run)?));
            }
            others.push(unclaimed);
        }
        Ok((others, tokens))
    }

    /// Refuses a write to `run` when this store holds it with fencing token `fence` and the
    /// row (locked until the transaction ends) has another: another holder claimed it since.
    pub(super) fn check_fence(&self, run: &str, fence: Option<i64>) -> Result<(), StoreError> {
        let Some(held) = fence else {
            return Ok(());
        };
        let current = match self.query_optional(
            &|| format!("read the fencing token of run `{run}`"),
            "SELECT fencing FROM runs WHERE id = $1 FOR UPDATE",
            &[&run],
        )? {
            Some(row) => Some(self.column(&row, 0, run)?),
            None => None,
        };
        self.codec.fenced(run, held, current)
    }

    /// Deletes the runs `select` (`codec::ended_runs` with its limit) finds, with their
    /// children's rows; journal rows and states go with them (`ON DELETE CASCADE`).
    pub(super) fn prune_runs(
        &self,
        select: &str,
        before: i64,
        count: i64,
    ) -> Result<Vec<String>, StoreError> {
        let operation = || "prune runs".to_string();
        let mut pruned = Vec::new();
        for row in self.query(&operation, select, &[&before, &count])? {
            let id: String = self.column(&row, 0, "")?;
            self.execute(&operation, "DELETE FROM runs WHERE root = $1", &[&id])?;
            self.execute(&operation, "DELETE FROM runs WHERE id = $1", &[&id])?;
            pruned.push(id);
        }
        Ok(pruned)
    }

    /// Clears the holder of each of `runs` that `encoded` (a holder) holds.
    pub(super) fn release_runs(&self, runs: &[String], encoded: &str) -> Result<(), StoreError> {
        for run in runs {
            self.execute(
                &|| "release runs".to_string(),
                "UPDATE runs SET holder = NULL WHERE id = $1 AND holder = $2",
                &[run, &encoded],
            )?;
        }
        Ok(())
    }
}
