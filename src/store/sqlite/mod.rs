//! The embedded store: one SQLite file (`<dir>/state.db`) in WAL mode, fsynced on every commit.

use crate::store::inbox::EntryKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod children;
mod inbox;
mod schema;
mod snapshots;
mod statements;
mod steps;
#[cfg(test)]
mod tests;
mod texts;

use statements::CachedStatements;

use super::codec::steps::{Planned, StepWrite};
use super::codec::{Codec, JOURNAL_COLUMNS, PROTOCOL_TEXT, RUN_COLUMNS, RawEntry, RawRun};

use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, TransactionBehavior};

use super::{
    Finish, Holder, JournalEntry, NewRun, RunCursor, RunRecord, RunStatus, RunSummary, Store,
    StoreError, StoredSnapshot, Unclaimed, Write,
};
use crate::base::durable::ChildState;
use crate::base::snapshot::Snapshot;

mod summaries;

/// The most memory SQLite's page cache of one store takes (KiB), filled only as pages are read.
const PAGE_CACHE_KIB: u32 = 32 * 1024;

/// Pages the write-ahead log grows to before a commit copies them back into the database
/// (SQLite's default is 1,000): a page written by many commits in between is copied once.
const CHECKPOINT_PAGES: u32 = 8 * 1024;

/// How long a write waits for another process's transaction before giving up.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs, journal and snapshots in `<dir>/state.db`.
pub struct SqliteStore {
    connection: Connection,
    context: Context,
    /// The state this store last committed for each run it writes to, which the run's next
    /// step is stored as a delta of (`snapshots.rs`).
    written: std::collections::HashMap<
        String,
        crate::store::codec::states::Written,
        foldhash::fast::RandomState,
    >,
    /// `PRAGMA data_version` when this store last wrote steps: while another connection has
    /// not changed it, what `written` says of a run (its last step, that it runs) is the
    /// file's too, and a step is written without reading the run's row.
    data_version: Option<i64>,
    /// The fencing token of each run this store claimed (or created held): its writes to the
    /// run are refused once the row has another (`StoreError::Fenced`).
    fences: std::collections::HashMap<String, i64, foldhash::fast::RandomState>,
}

impl SqliteStore {
    /// The database file's name inside the state directory.
    pub const FILE_NAME: &'static str = "state.db";

    /// Opens (creating it and its directory if needed) `<directory>/state.db`, in WAL mode with
    /// `synchronous=FULL` (a committed step survives a power cut), and brings its schema up to
    /// date.
    pub fn open(directory: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let directory = directory.as_ref();
        let path = directory.join(Self::FILE_NAME);
        // Made for the operator alone: runs' contexts and event data are not for other users.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(directory)
            .map_err(|source| StoreError::CreateDirectory {
                database: path.display().to_string(),
                directory: directory.display().to_string(),
                source,
            })?;
        let connection = Connection::open(&path).map_err(|source| StoreError::Database {
            database: path.display().to_string(),
            operation: "open the database".to_string(),
            source: Box::new(source),
        })?;
        let mut store = SqliteStore {
            connection,
            context: Context {
                codec: Codec {
                    database: path.display().to_string(),
                },
                path,
                busy_timeout: DEFAULT_BUSY_TIMEOUT,
            },
            written: std::collections::HashMap::default(),
            data_version: None,
            fences: std::collections::HashMap::default(),
        };
        store
            .connection
            .set_prepared_statement_cache_capacity(statements::STATEMENT_CACHE_CAPACITY);
        store.set_busy_timeout(DEFAULT_BUSY_TIMEOUT)?;
        // Switching a new database to WAL takes it whole: SQLite answers busy at once, without
        // its busy handler, while another process opens the same new database (a `run` and the
        // `ui` started together). Tried again until the busy timeout has passed.
        let started = std::time::Instant::now();
        let mode: String = loop {
            let switched =
                store
                    .connection
                    .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0));
            match switched {
                Err(error)
                    if matches!(
                        error.sqlite_error_code(),
                        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    ) && started.elapsed() < DEFAULT_BUSY_TIMEOUT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                switched => break switched.map_err(store.context.failed("switch to WAL mode"))?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database {
                database: store.location(),
                operation: "switch to WAL mode".to_string(),
                source: format!("the journal mode stayed `{mode}`").into(),
            });
        }
        // The page cache and the log's checkpoint are sized for a host's batch: a batch of
        // steps over thousands of runs dirties a page of `runs` and of the journal's index for
        // most of them. With SQLite's default cache (2 MiB) those pages were spilled to the log
        // in the middle of the transaction and read back, and a checkpoint (every 1,000 pages)
        // followed nearly every commit. Neither changes what is durable: every commit is still
        // synced (`synchronous=FULL`) before it returns.
        store
            .connection
            .execute_batch(&format!(
                "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
                 PRAGMA cache_size = -{PAGE_CACHE_KIB}; \
                 PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES};"
            ))
            .map_err(
                store
                    .context
                    .failed("set synchronous=FULL, foreign keys and the page cache"),
            )?;
        store.migrate()?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.context.path
    }

    /// How long an operation waits while another process writes.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        self.connection
            .busy_timeout(timeout)
            .map_err(self.context.failed("set the busy timeout"))?;
        self.context.busy_timeout = timeout;
        Ok(())
    }

    /// Runs `body` in one immediate transaction, committed if it succeeds; on an error the
    /// transaction is dropped, which rolls back whatever `body` wrote.
    fn write(
        &mut self,
        operation: &str,
        body: impl FnOnce(&Context, &Connection) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let failed = self.context.failed(operation);
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&failed)?;
        body(&self.context, &transaction)?;
        transaction.commit().map_err(&failed)
    }

    fn summaries(&self, sql: &str, parameters: &[&str]) -> Result<Vec<RunSummary>, StoreError> {
        let failed = self.context.failed("list runs");
        let mut statement = self.connection.prepare_cached(sql).map_err(&failed)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(parameters), read_run)
            .map_err(&failed)?;
        let mut runs = Vec::new();
        for row in rows {
            runs.push(self.context.summary(row.map_err(&failed)?)?);
        }
        Ok(runs)
    }

    fn journal_entries(
        &self,
        run: &str,
        sql: &str,
        parameters: impl rusqlite::Params,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let failed = self
            .context
            .failed(&format!("read the journal of run `{run}`"));
        let mut statement = self.connection.prepare_cached(sql).map_err(&failed)?;
        let rows = statement
            .query_map(parameters, read_entry)
            .map_err(&failed)?;
        let mut entries = Vec::new();
        for row in rows {
            entries.push(self.context.journal_entry(run, row.map_err(&failed)?)?);
        }
        Ok(entries)
    }
}

/// What error messages need: the file, and how long a busy database is waited for.
/// The file, how long a busy database is waited for, and the encoding every store shares.
struct Context {
    codec: Codec,
    path: PathBuf,
    busy_timeout: Duration,
}

/// The shared encoding's methods (`encode`, `decode`, `corrupt`, ...) are the context's own.
impl std::ops::Deref for Context {
    type Target = Codec;

    fn deref(&self) -> &Codec {
        &self.codec
    }
}

impl Context {
    /// Refuses a write to `run` when this store holds it with fencing token `fence` and the
    /// row has another: another holder claimed it since. No check for a run this store holds
    /// no token of (`None`).
    pub(super) fn check_fence(
        &self,
        connection: &Connection,
        run: &str,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        let Some(held) = fence else {
            return Ok(());
        };
        let current: Option<i64> = connection
            .query_row_cached("SELECT fencing FROM runs WHERE id = ?1", [run], |row| {
                row.get(0)
            })
            .optional()
            .map_err(self.failed(&format!("read the fencing token of run `{run}`")))?;
        self.fenced(run, held, current)
    }

    /// Maps a SQLite error to one naming the file and the operation; a busy database says so.
    fn failed(&self, operation: &str) -> impl Fn(rusqlite::Error) -> StoreError + use<> {
        let database = self.path.display().to_string();
        let operation = operation.to_string();
        let waited = self.busy_timeout.as_millis() as u64;
        move |error| match error.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy {
                database: database.clone(),
                operation: operation.clone(),
                waited_milliseconds: waited,
            },
            _ => StoreError::Database {
                database: database.clone(),
                operation: operation.clone(),
                source: Box::new(error),
            },
        }
    }

    /// Inserts a new run; one with the same id is refused.
    fn insert_run(&self, connection: &Connection, run: &NewRun) -> Result<(), StoreError> {
        let started = self.integer("a start time", run.started_unix_milliseconds)?;
        let grants = run
            .grants
            .as_ref()
            .map(|grants| self.encode(&run.id, "grants", grants))
            .transpose()?;
        let inputs = self.encode(&run.id, "inputs", &run.inputs)?;
        let holder = run
            .holder
            .as_ref()
            .map(|holder| self.encode(&run.id, "holder", holder))
            .transpose()?;
        let forked_from = run
            .forked_from
            .as_ref()
            .map(|origin| self.encode(&run.id, "fork origin", origin))
            .transpose()?;
        let failed = self.failed(&format!("create run `{}`", run.id));
        let exists = connection
            .query_row_cached("SELECT 1 FROM runs WHERE id = ?1", [&run.id], |_| Ok(()))
            .optional()
            .map_err(&failed)?
            .is_some();
        if exists {
            return Err(StoreError::RunExists {
                database: self.location(),
                run: run.id.clone(),
            });
        }
        // Its texts are kept apart, once per hash; its row names its protocol's.
        let protocol_text_hash = self.keep_texts(connection, run)?;
        connection
            .execute_cached(
                "INSERT INTO runs (id, protocol_path, protocol_hash, protocol_text_hash, inputs, \
                 status, started_at, updated_at, grants, origin, holder, forked_from) VALUES (?1, \
                 ?2, ?3, ?4, ?5, 'running', ?6, ?6, ?7, ?8, ?9, ?10)",
                rusqlite::params![
                    run.id,
                    run.protocol_path,
                    run.protocol_hash,
                    protocol_text_hash,
                    inputs,
                    started,
                    grants,
                    run.origin.as_str(),
                    holder,
                    forked_from
                ],
            )
            .map_err(&failed)?;
        Ok(())
    }
}

/// Reads the columns of `RUN_COLUMNS`, in that order.
fn read_run(row: &Row) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        id: row.get(0)?,
        protocol_path: row.get(1)?,
        protocol_hash: row.get(2)?,
        status: row.get(3)?,
        started_at: row.get(4)?,
        last_step: row.get(5)?,
        last_step_at: row.get(6)?,
        final_state: row.get(7)?,
        exit_code: row.get(8)?,
        output: row.get(9)?,
        finished_at: row.get(10)?,
        origin: row.get(11)?,
        holder: row.get(12)?,
        parent: row.get(13)?,
        forked_from: row.get(14)?,
        redrives: row.get(15)?,
    })
}

/// Reads the columns of `JOURNAL_COLUMNS`, in that order.
fn read_entry(row: &Row) -> rusqlite::Result<RawEntry> {
    Ok(RawEntry {
        step: row.get(0)?,
        event_name: row.get(1)?,
        event_data: row.get(2)?,
        transitions: row.get(3)?,
        actions: row.get(4)?,
        recorded_at: row.get(5)?,
        children: row.get(6)?,
    })
}

impl Store for SqliteStore {
    fn location(&self) -> String {
        self.context.location()
    }

    fn create_run(&mut self, run: &NewRun) -> Result<(), StoreError> {
        self.write(
            &format!("create run `{}`", run.id),
            |context, connection| context.insert_run(connection, run),
        )?;
        if run.holder.is_some() {
            self.fences.insert(run.id.clone(), 0);
        }
        Ok(())
    }

    fn commit_step(
        &mut self,
        run: &str,
        entry: &JournalEntry,
        snapshot: &Snapshot,
        finish: Option<&Finish>,
    ) -> Result<(), StoreError> {
        let step = StepWrite {
            run,
            entry,
            snapshot,
            finish,
            child_states: &[],
        };
        self.commit_planned(
            &format!("commit step {} of run `{run}`", entry.sequence),
            &[Planned::Step(step)],
        )
    }

    fn commit_child_states(&mut self, run: &str, states: &[ChildState]) -> Result<(), StoreError> {
        let encoded = self.context.encode_child_states(run, states)?;
        self.write(
            &format!("keep the states of the children of run `{run}`"),
            |context, connection| context.insert_child_states(connection, &encoded),
        )
    }

    fn latest_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        let Some(mut stored) = self.rebuild(run, None)? else {
            // A child's state is in the snapshot of the run that records it.
            return self.child_snapshot(run);
        };
        self.fill_child_states(run, &mut stored.snapshot, &mut stored.secrets)?;
        Ok(Some(stored))
    }

    fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = self
            .connection
            .query_row_cached(
                &format!(
                    "SELECT {RUN_COLUMNS}, {PROTOCOL_TEXT}, inputs, grants FROM runs WHERE id = ?1"
                ),
                [run],
                |row| {
                    Ok((
                        read_run(row)?,
                        row.get::<_, Option<String>>(16)?,
                        row.get::<_, String>(17)?,
                        row.get::<_, Option<String>>(18)?,
                    ))
                },
            )
            .optional()
            .map_err(self.context.failed(&format!("read run `{run}`")))?;
        let Some((raw, protocol_text, inputs, grants)) = row else {
            return Ok(None);
        };
        let inputs = self.context.decode(run, "inputs", &inputs)?;
        let grants = grants
            .map(|grants| self.context.decode(run, "grants", &grants))
            .transpose()?;
        Ok(Some(RunRecord {
            summary: self.context.summary(raw)?,
            protocol_text,
            inputs,
            grants,
        }))
    }

    fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.summaries(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at DESC, id DESC"),
            &[],
        )
    }

    fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX).to_string();
        self.summaries(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE protocol_path = ?1 AND status <> 'finished' \
                 AND root IS NULL ORDER BY started_at DESC, id DESC LIMIT CAST(?2 AS INTEGER)"
            ),
            &[protocol_path, &count],
        )
    }

    fn journal(&self, run: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.journal_entries(
            run,
            &format!("SELECT {JOURNAL_COLUMNS} FROM journal WHERE run_id = ?1 ORDER BY step"),
            [run],
        )
    }

    fn journal_tail(&self, run: &str, count: usize) -> Result<Vec<JournalEntry>, StoreError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let mut entries = self.journal_entries(
            run,
            &format!(
                "SELECT {JOURNAL_COLUMNS} FROM journal WHERE run_id = ?1 ORDER BY step DESC LIMIT ?2"
            ),
            rusqlite::params![run, count],
        )?;
        entries.reverse();
        Ok(entries)
    }

    fn journal_before(
        &self,
        run: &str,
        before: u64,
        count: usize,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let mut entries = self.journal_entries(
            run,
            &format!(
                "SELECT {JOURNAL_COLUMNS} FROM journal WHERE run_id = ?1 AND step < ?2 \
                 ORDER BY step DESC LIMIT ?3"
            ),
            rusqlite::params![run, before, count],
        )?;
        entries.reverse();
        Ok(entries)
    }

    fn mark_stopped(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        // A stopped run's next step, if any, comes after a resume: its state is not kept here.
        self.written.remove(run);
        let fence = self.fences.get(run).copied();
        self.write(
            &format!("mark run `{run}` stopped"),
            |context, connection| {
                context.check_fence(connection, run, fence)?;
                context.update_status(connection, run, RunStatus::Stopped, unix_milliseconds)
            },
        )?;
        // Released: a resume claims it again.
        self.fences.remove(run);
        Ok(())
    }

    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        let fence = self.fences.get(run).copied();
        self.write(
            &format!("mark run `{run}` running"),
            |context, connection| {
                context.check_fence(connection, run, fence)?;
                context.update_status(connection, run, RunStatus::Running, unix_milliseconds)
            },
        )
    }

    fn finish_run(&mut self, run: &str, finish: &Finish) -> Result<(), StoreError> {
        self.written.remove(run);
        let fence = self.fences.get(run).copied();
        self.write(&format!("finish run `{run}`"), |context, connection| {
            context.check_fence(connection, run, fence)?;
            context.update_finish(connection, run, finish)
        })?;
        self.fences.remove(run);
        Ok(())
    }

    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Vec<Option<Unclaimed>>, StoreError> {
        let encoded = self.context.encode_holder(holder)?;
        let mut others = Vec::with_capacity(runs.len());
        let mut tokens = Vec::new();
        // An immediate transaction: a second claimant waits for this one to commit, then reads
        // the holder it recorded.
        self.write(
            &format!("claim {} run(s)", runs.len()),
            |context, connection| {
                let failed = context.failed("claim runs");
                let mut read = connection
                    .prepare_cached("SELECT holder, parent, status FROM runs WHERE id = ?1")
                    .map_err(&failed)?;
                let mut record = connection
                    .prepare_cached(
                        "UPDATE runs SET holder = ?1, fencing = fencing + 1 WHERE id = ?2 \
                         RETURNING fencing",
                    )
                    .map_err(&failed)?;
                for run in runs {
                    let recorded = read
                        .query_row([run], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                        .optional()
                        .map_err(&failed)?;
                    let unclaimed = context.claim(run, recorded, holder, holds)?;
                    if unclaimed.is_none() {
                        let token: Option<i64> = record
                            .query_row([&encoded, run], |row| row.get(0))
                            .optional()
                            .map_err(&failed)?;
                        tokens.extend(token.map(|token| (run.clone(), token)));
                    }
                    others.push(unclaimed);
                }
                Ok(())
            },
        )?;
        self.fences.extend(tokens);
        Ok(others)
    }

    fn release_runs(&mut self, runs: &[String], holder: &Holder) -> Result<(), StoreError> {
        let encoded = self.context.encode_holder(holder)?;
        self.write(
            &format!("release {} run(s)", runs.len()),
            |context, connection| {
                let failed = context.failed("release runs");
                let mut release = connection
                    .prepare_cached("UPDATE runs SET holder = NULL WHERE id = ?1 AND holder = ?2")
                    .map_err(&failed)?;
                for run in runs {
                    release.execute([run, &encoded]).map_err(&failed)?;
                }
                Ok(())
            },
        )?;
        for run in runs {
            self.fences.remove(run);
        }
        Ok(())
    }

    fn run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError> {
        self.read_run_summary(run)
    }

    fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.read_runs_of_protocols(paths, after, count)
    }

    fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError> {
        self.count_directives_before(run, before)
    }

    fn snapshot_at(&self, run: &str, step: u64) -> Result<Option<StoredSnapshot>, StoreError> {
        self.rebuild_at(run, step)
    }

    fn protocol_texts(
        &self,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.kept_texts(hashes)
    }

    fn renew_lease(&mut self, _host: &str, _ttl_milliseconds: u64) -> Result<(), StoreError> {
        // One machine: a holder's lock file tells whether it lives, at once after `kill -9`,
        // and a paused holder keeps its lock (`runs::claims`).
        Ok(())
    }

    fn prune_runs(
        &mut self,
        before_unix_milliseconds: u64,
        statuses: &[RunStatus],
        count: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = self.context.integer("a time", before_unix_milliseconds)?;
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let Some(ended) = super::codec::ended_runs(statuses) else {
            return Ok(Vec::new());
        };
        let mut pruned = Vec::new();
        self.write("prune runs", |context, connection| {
            let failed = context.failed("prune runs");
            let mut select = connection
                .prepare_cached(&format!("{} LIMIT ?2", ended.replace("$1", "?1")))
                .map_err(&failed)?;
            pruned = select
                .query_map(rusqlite::params![before, count], |row| {
                    row.get::<_, String>(0)
                })
                .map_err(&failed)?
                .collect::<rusqlite::Result<Vec<String>>>()
                .map_err(&failed)?;
            for id in &pruned {
                // Journal rows and states go with their runs (`ON DELETE CASCADE`).
                connection
                    .execute_cached("DELETE FROM runs WHERE root = ?1", [id])
                    .map_err(&failed)?;
                connection
                    .execute_cached("DELETE FROM runs WHERE id = ?1", [id])
                    .map_err(&failed)?;
            }
            Ok(())
        })?;
        for run in &pruned {
            self.written.remove(run);
        }
        Ok(pruned)
    }

    fn enqueue(
        &mut self,
        run: &str,
        kind: EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        self.store_entry(run, kind, event, data, unix_milliseconds)
    }

    fn take_inbox(
        &mut self,
        holder: &Holder,
        scope: crate::store::InboxScope,
        limit: usize,
    ) -> Result<crate::store::TakenInbox, StoreError> {
        self.take_entries(holder, scope, limit)
    }

    fn apply_inbox(
        &mut self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        let write = Write::ApplyInbox {
            run: run.to_string(),
            entry,
            step,
            outcome: outcome.clone(),
            output: output.to_string(),
        };
        self.commit_batch(std::slice::from_ref(&write))
    }

    fn inbox_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<crate::store::InboxRecord>, StoreError> {
        self.entry_states(entries)
    }

    fn recent_inbox(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<crate::store::InboxRecord>, StoreError> {
        self.recent_entries(run, count)
    }

    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.commit_planned(
            &format!("commit {} writes", writes.len()),
            &Planned::of(writes),
        )
    }

    fn append_telemetry(&mut self, run: &str, lines: &str) -> Result<(), StoreError> {
        self.commit_batch(&[Write::Telemetry {
            run: run.to_string(),
            lines: lines.to_string(),
        }])
    }

    fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        self.read_telemetry(run)
    }

    fn save_trace(&mut self, run: &str, trace: &str) -> Result<(), StoreError> {
        self.write(
            &format!("record the trace of run `{run}`"),
            |context, connection| {
                connection
                    .prepare_cached(&crate::store::codec::UPDATE_TRACE.replace('$', "?"))
                    .and_then(|mut statement| statement.execute([run, trace]))
                    .map(|_| ())
                    .map_err(context.failed(&format!("record the trace of run `{run}`")))
            },
        )
    }

    fn trace(&self, run: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        let failed = self
            .context
            .failed(&format!("read the trace of run `{run}`"));
        self.connection
            .prepare_cached(&crate::store::codec::SELECT_TRACE.replace('$', "?"))
            .and_then(|mut statement| {
                statement
                    .query_row([run], |row| row.get::<_, Option<String>>(0))
                    .optional()
            })
            .map(Option::flatten)
            .map_err(failed)
    }
}
