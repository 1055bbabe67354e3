//! The embedded store: one SQLite file (`<dir>/state.db`) in WAL mode, fsynced on every commit.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod children;
mod statements;

use statements::CachedStatements;

use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, TransactionBehavior};

use super::{
    Cause, Finish, Holder, JournalEntry, JournalEvent, NewRun, RunOrigin, RunRecord, RunStatus,
    RunSummary, Store, StoreError, StoredSnapshot, Unclaimed, Write,
};
use crate::base::durable::ChildState;
use crate::base::snapshot::Snapshot;

mod summaries;
pub use summaries::RunCursor;

/// How long a write waits for another process's transaction before giving up.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema, one migration per version: version N is reached by applying the first N.
///
/// Written to carry over to PostgreSQL unchanged: only TEXT, INTEGER and BIGINT columns (BIGINT
/// for Unix milliseconds and step numbers, which overflow PostgreSQL's 32-bit INTEGER; SQLite
/// gives any type containing "INT" integer affinity), JSON kept as TEXT (JSONB there if it is
/// ever queried), no ROWID, AUTOINCREMENT or STRICT, and `INSERT ... ON CONFLICT ... DO UPDATE`,
/// which both accept. Run ids are chosen by the caller, so no sequence generator is needed.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        protocol_path TEXT NOT NULL,
        protocol_hash TEXT NOT NULL,
        protocol_text TEXT,
        inputs TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'stopped', 'finished')),
        started_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        last_step BIGINT,
        last_step_at BIGINT,
        final_state TEXT,
        exit_code INTEGER,
        output TEXT,
        finished_at BIGINT
    );
    CREATE INDEX runs_by_protocol ON runs (protocol_path, status, started_at);
    CREATE TABLE journal (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        step BIGINT NOT NULL,
        event_name TEXT,
        event_data TEXT,
        transitions TEXT NOT NULL,
        actions TEXT NOT NULL,
        recorded_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, step)
    );
    CREATE TABLE snapshots (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        step BIGINT NOT NULL,
        snapshot TEXT NOT NULL,
        taken_at BIGINT NOT NULL
    );
",
    "
    ALTER TABLE runs ADD COLUMN grants TEXT;
",
    // NULL for the runs recorded before it: no front end claims them on its own.
    "
    ALTER TABLE runs ADD COLUMN origin TEXT;
",
    // The process driving the run (`Holder` as JSON), NULL when none: released on a stop or
    // a finish. A lease's expiry would be a column beside it.
    "
    ALTER TABLE runs ADD COLUMN holder TEXT;
",
    // A child protocol's row (origin `child`): `parent` is the run that invoked it, `root` the
    // run whose steps record it. Each step's child changes are kept with its journal entry.
    "
    ALTER TABLE runs ADD COLUMN parent TEXT;
    ALTER TABLE runs ADD COLUMN root TEXT;
    CREATE INDEX runs_by_root ON runs (root);
    ALTER TABLE journal ADD COLUMN children TEXT;
",
];

const RUN_COLUMNS: &str = "id, protocol_path, protocol_hash, status, started_at, last_step, \
     last_step_at, final_state, exit_code, output, finished_at, origin, holder, parent";

/// The key under which a stored snapshot lists the labels of its secret placeholders.
const SNAPSHOT_SECRETS: &str = "secrets";

const JOURNAL_COLUMNS: &str =
    "step, event_name, event_data, transitions, actions, recorded_at, children";

/// Runs, journal and snapshots in `<dir>/state.db`.
pub struct SqliteStore {
    connection: Connection,
    context: Context,
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
                path,
                busy_timeout: DEFAULT_BUSY_TIMEOUT,
            },
        };
        store
            .connection
            .set_prepared_statement_cache_capacity(statements::STATEMENT_CACHE_CAPACITY);
        store.set_busy_timeout(DEFAULT_BUSY_TIMEOUT)?;
        let mode: String = store
            .connection
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(store.context.failed("switch to WAL mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database {
                database: store.location(),
                operation: "switch to WAL mode".to_string(),
                source: format!("the journal mode stayed `{mode}`").into(),
            });
        }
        store
            .connection
            .execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(
                store
                    .context
                    .failed("set synchronous=FULL and foreign keys"),
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

    /// The schema version the file is at.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.connection
            .query_row("SELECT MAX(version) FROM schema_version", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .map(Option::unwrap_or_default)
            .map_err(self.context.failed("read the schema version"))
    }

    /// Applies the migrations the file lacks, all in one transaction.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let failed = self.context.failed("bring the schema up to date");
        let supported = MIGRATIONS.len() as i64;
        // A store already up to date is seen by a plain read: opening it (every `status`, every
        // read of a run by `mcp`) then takes no write lock that would wait on a busy writer.
        let current =
            self.connection
                .query_row("SELECT MAX(version) FROM schema_version", [], |row| {
                    row.get::<_, Option<i64>>(0)
                });
        if let Ok(Some(found)) = current
            && found == supported
        {
            return Ok(());
        }
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&failed)?;
        transaction
            .execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            .map_err(&failed)?;
        let found: i64 = transaction
            .query_row("SELECT MAX(version) FROM schema_version", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .map_err(&failed)?
            .unwrap_or_default();
        if found > supported {
            return Err(StoreError::NewerSchema {
                database: self.context.location(),
                found,
                supported,
            });
        }
        if found == supported {
            return Ok(());
        }
        for migration in &MIGRATIONS[found as usize..] {
            transaction.execute_batch(migration).map_err(&failed)?;
        }
        transaction
            .execute("DELETE FROM schema_version", [])
            .map_err(&failed)?;
        transaction
            .execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                [supported],
            )
            .map_err(&failed)?;
        transaction.commit().map_err(&failed)
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

    fn summary(&self, raw: RawRun) -> Result<RunSummary, StoreError> {
        let status = RunStatus::parse(&raw.status).ok_or_else(|| {
            self.context.corrupt(
                &raw.id,
                "status",
                format!("`{}` is not a status", raw.status).into(),
            )
        })?;
        let finish = match status {
            RunStatus::Finished => Some(Finish {
                final_state: raw.final_state,
                exit_code: raw.exit_code.unwrap_or_default() as i32,
                output: match &raw.output {
                    Some(text) => self.context.decode(&raw.id, "output", text)?,
                    None => serde_json::Value::Null,
                },
                unix_milliseconds: raw.finished_at.unwrap_or_default() as u64,
            }),
            _ => None,
        };
        let holder = raw
            .holder
            .map(|holder| self.context.decode(&raw.id, "holder", &holder))
            .transpose()?;
        Ok(RunSummary {
            id: raw.id,
            protocol_path: raw.protocol_path,
            protocol_hash: raw.protocol_hash,
            status,
            started_unix_milliseconds: raw.started_at as u64,
            last_sequence: raw.last_step.map(|step| step as u64),
            last_step_unix_milliseconds: raw.last_step_at.map(|time| time as u64),
            finish,
            // An origin this build does not know reads as none: no front end claims the run.
            origin: raw.origin.as_deref().and_then(RunOrigin::parse),
            holder,
            parent: raw.parent,
        })
    }

    fn summaries(&self, sql: &str, parameters: &[&str]) -> Result<Vec<RunSummary>, StoreError> {
        let failed = self.context.failed("list runs");
        let mut statement = self.connection.prepare_cached(sql).map_err(&failed)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(parameters), RawRun::read)
            .map_err(&failed)?;
        let mut runs = Vec::new();
        for row in rows {
            runs.push(self.summary(row.map_err(&failed)?)?);
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
            .query_map(parameters, RawEntry::read)
            .map_err(&failed)?;
        let mut entries = Vec::new();
        for row in rows {
            let raw = row.map_err(&failed)?;
            let event = match raw.event_name {
                Some(name) => Some(JournalEvent {
                    name,
                    data: match &raw.event_data {
                        Some(text) => self.context.decode(run, "journal event data", text)?,
                        None => serde_json::Value::Null,
                    },
                }),
                None => None,
            };
            entries.push(JournalEntry {
                sequence: raw.step as u64,
                event,
                transitions: self
                    .context
                    .decode(run, "journal transitions", &raw.transitions)?,
                actions: self.context.decode(run, "journal actions", &raw.actions)?,
                unix_milliseconds: raw.recorded_at as u64,
                children: match &raw.children {
                    Some(text) => self.context.decode(run, "journal children", text)?,
                    None => Vec::new(),
                },
            });
        }
        Ok(entries)
    }
}

/// What error messages need: the file, and how long a busy database is waited for.
struct Context {
    path: PathBuf,
    busy_timeout: Duration,
}

impl Context {
    fn location(&self) -> String {
        self.path.display().to_string()
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

    fn integer(&self, what: &'static str, value: u64) -> Result<i64, StoreError> {
        i64::try_from(value).map_err(|_| StoreError::OutOfRange {
            database: self.location(),
            what,
            value,
        })
    }

    /// `value` as stored: JSON with every secret masked (`crate::base::secrets`). Only the snapshot
    /// is ever read back with its secrets restored (`encode_snapshot`); the rest keeps the
    /// placeholders for good.
    fn encode<T: serde::Serialize>(
        &self,
        run: &str,
        what: &'static str,
        value: &T,
    ) -> Result<String, StoreError> {
        let failed = |source| self.encode_failed(run, what, source);
        if !crate::base::secrets::active() {
            return serde_json::to_string(value).map_err(failed);
        }
        let mut json = serde_json::to_value(value).map_err(failed)?;
        crate::base::secrets::mask_json_in_place(&mut json);
        Ok(json.to_string())
    }

    /// A snapshot as stored: masked, with the labels of the placeholders it holds under
    /// `secrets`, so that a resume restores exactly those. A text that would not come back
    /// whole (one spelling a placeholder) is refused.
    fn encode_snapshot(&self, run: &str, snapshot: &Snapshot) -> Result<String, StoreError> {
        let failed = |source| self.encode_failed(run, "snapshot", source);
        if !crate::base::secrets::active() {
            return serde_json::to_string(snapshot).map_err(failed);
        }
        let mut json = serde_json::to_value(snapshot).map_err(failed)?;
        let labels = crate::base::secrets::mask_for_store(&mut json).map_err(|source| {
            StoreError::Secret {
                database: self.location(),
                run: run.to_string(),
                what: "snapshot",
                source,
            }
        })?;
        if !labels.is_empty()
            && let serde_json::Value::Object(fields) = &mut json
        {
            fields.insert(SNAPSHOT_SECRETS.into(), labels.into());
        }
        Ok(json.to_string())
    }

    fn encode_failed(
        &self,
        run: &str,
        what: &'static str,
        source: serde_json::Error,
    ) -> StoreError {
        StoreError::Encode {
            database: self.location(),
            run: run.to_string(),
            what,
            source,
        }
    }

    /// A stored snapshot and the labels of the secrets it holds as placeholders.
    fn decode_snapshot(
        &self,
        run: &str,
        text: &str,
    ) -> Result<(Snapshot, Vec<String>), StoreError> {
        if !text.contains(SNAPSHOT_SECRETS) {
            return Ok((self.decode(run, "snapshot", text)?, Vec::new()));
        }
        let mut json: serde_json::Value = self.decode(run, "snapshot", text)?;
        let labels = match &mut json {
            serde_json::Value::Object(fields) => fields.shift_remove(SNAPSHOT_SECRETS),
            _ => None,
        };
        let labels = match labels {
            Some(labels) => serde_json::from_value(labels)
                .map_err(|source| self.corrupt(run, "snapshot secrets", Box::new(source)))?,
            None => Vec::new(),
        };
        let snapshot = serde_json::from_value(json)
            .map_err(|source| self.corrupt(run, "snapshot", Box::new(source)))?;
        Ok((snapshot, labels))
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        run: &str,
        what: &'static str,
        text: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|source| self.corrupt(run, what, Box::new(source)))
    }

    fn corrupt(&self, run: &str, what: &'static str, source: Cause) -> StoreError {
        StoreError::Corrupt {
            database: self.location(),
            run: run.to_string(),
            what,
            source,
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
        connection
            .execute_cached(
                "INSERT INTO runs (id, protocol_path, protocol_hash, protocol_text, inputs, status, \
                 started_at, updated_at, grants, origin, holder) VALUES (?1, ?2, ?3, ?4, ?5, \
                 'running', ?6, ?6, ?7, ?8, ?9)",
                rusqlite::params![
                    run.id,
                    run.protocol_path,
                    run.protocol_hash,
                    run.protocol_text,
                    inputs,
                    started,
                    grants,
                    run.origin.as_str(),
                    holder
                ],
            )
            .map_err(&failed)?;
        Ok(())
    }

    /// A step's columns as they are written; without a snapshot when a later step of the same
    /// batch replaces it.
    fn encode_step(
        &self,
        run: &str,
        entry: &JournalEntry,
        snapshot: Option<&Snapshot>,
        finish: Option<&Finish>,
        child_states: &[ChildState],
    ) -> Result<EncodedStep, StoreError> {
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
            snapshot: match snapshot {
                Some(snapshot) => Some(self.encode_snapshot(run, snapshot)?),
                None => None,
            },
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

    /// Writes one step: its journal entry, its snapshot (replacing the run's previous one), and
    /// the run's last step (and its end). Refused (`refusal`) for an unknown or finished run and
    /// for a step not above the run's last.
    fn insert_step(
        &self,
        connection: &Connection,
        run: &str,
        entry: &JournalEntry,
        encoded: &EncodedStep,
    ) -> Result<(), StoreError> {
        let sequence = entry.sequence;
        let operation = format!("commit step {sequence} of run `{run}`");
        let failed = self.failed(&operation);
        let EncodedStep {
            step,
            time,
            event_name,
            event_data,
            transitions,
            actions,
            children,
            snapshot,
            finish,
            child_states,
        } = encoded;
        // 1. The journal entry. A duplicate step or an unknown run violates a constraint.
        let inserted = connection.execute_cached(
            "INSERT INTO journal (run_id, step, event_name, event_data, transitions, actions, \
             recorded_at, children) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params![
                run,
                step,
                event_name,
                event_data,
                transitions,
                actions,
                time,
                children
            ],
        );
        match inserted {
            Ok(_) => {}
            Err(error) if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                return Err(self.refusal(connection, run, Some(sequence), &operation, Some(error)));
            }
            Err(error) => return Err(failed(error)),
        }
        // 2. The snapshot after it, replacing the previous one.
        if let Some(snapshot) = snapshot {
            connection
                .execute_cached(
                    "INSERT INTO snapshots (run_id, step, snapshot, taken_at) VALUES (?1, ?2, ?3, \
                     ?4) ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, \
                     snapshot = excluded.snapshot, taken_at = excluded.taken_at",
                    rusqlite::params![run, step, snapshot, time],
                )
                .map_err(&failed)?;
        }
        // 3. The run's last step (and its end). If it changes nothing, the run is finished or the
        // step is stale: the error drops the transaction, which rolls 1 and 2 back.
        let changed = match finish {
            None => connection.execute_cached(
                "UPDATE runs SET status = 'running', last_step = ?1, last_step_at = ?2, \
                 updated_at = ?2 WHERE id = ?3 AND status <> 'finished' \
                 AND (last_step IS NULL OR last_step < ?1)",
                rusqlite::params![step, time, run],
            ),
            Some((final_state, exit_code, output, finished_at)) => connection.execute_cached(
                "UPDATE runs SET status = 'finished', holder = NULL, last_step = ?1, \
                 last_step_at = ?2, updated_at = ?2, final_state = ?4, exit_code = ?5, output = ?6, finished_at = ?7 \
                 WHERE id = ?3 AND status <> 'finished' AND (last_step IS NULL OR last_step < ?1)",
                rusqlite::params![step, time, run, final_state, exit_code, output, finished_at],
            ),
        }
        .map_err(&failed)?;
        if changed == 0 {
            return Err(self.refusal(connection, run, Some(sequence), &operation, None));
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

    /// A status change for a run that has not finished; a stop releases its holder.
    fn update_status(
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
    fn update_finish(
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
    fn refusal(
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

/// A `runs` row as stored.
struct RawRun {
    id: String,
    protocol_path: String,
    protocol_hash: String,
    status: String,
    started_at: i64,
    last_step: Option<i64>,
    last_step_at: Option<i64>,
    final_state: Option<String>,
    exit_code: Option<i64>,
    output: Option<String>,
    finished_at: Option<i64>,
    origin: Option<String>,
    holder: Option<String>,
    parent: Option<String>,
}

impl RawRun {
    /// Reads the columns of `RUN_COLUMNS`, in that order.
    fn read(row: &Row) -> rusqlite::Result<RawRun> {
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
        })
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
    snapshot: Option<String>,
    /// Final state, exit code, output, finish time.
    finish: Option<(Option<String>, i32, String, i64)>,
    /// The states of the children that stepped, for their own rows.
    child_states: Vec<children::EncodedChildState>,
}

/// A `journal` row as stored.
struct RawEntry {
    step: i64,
    event_name: Option<String>,
    event_data: Option<String>,
    transitions: String,
    actions: String,
    recorded_at: i64,
    children: Option<String>,
}

impl RawEntry {
    /// Reads the columns of `JOURNAL_COLUMNS`, in that order.
    fn read(row: &Row) -> rusqlite::Result<RawEntry> {
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
}

impl Store for SqliteStore {
    fn location(&self) -> String {
        self.context.location()
    }

    fn create_run(&mut self, run: &NewRun) -> Result<(), StoreError> {
        self.write(
            &format!("create run `{}`", run.id),
            |context, connection| context.insert_run(connection, run),
        )
    }

    fn commit_step(
        &mut self,
        run: &str,
        entry: &JournalEntry,
        snapshot: &Snapshot,
        finish: Option<&Finish>,
    ) -> Result<(), StoreError> {
        // Everything is encoded before the write lock is taken, to hold it briefly.
        let encoded = self
            .context
            .encode_step(run, entry, Some(snapshot), finish, &[])?;
        self.write(
            &format!("commit step {} of run `{run}`", entry.sequence),
            |context, connection| context.insert_step(connection, run, entry, &encoded),
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
        let row: Option<(i64, String, i64)> = self
            .connection
            .query_row_cached(
                "SELECT step, snapshot, taken_at FROM snapshots WHERE run_id = ?1",
                [run],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(
                self.context
                    .failed(&format!("read the snapshot of run `{run}`")),
            )?;
        let Some((step, text, taken_at)) = row else {
            // A child's state is in the snapshot of the run that records it.
            return self.child_snapshot(run);
        };
        let (mut snapshot, mut secrets) = self.context.decode_snapshot(run, &text)?;
        self.fill_child_states(run, &mut snapshot, &mut secrets)?;
        Ok(Some(StoredSnapshot {
            sequence: step as u64,
            unix_milliseconds: taken_at as u64,
            snapshot,
            secrets,
        }))
    }

    fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = self
            .connection
            .query_row_cached(
                &format!(
                    "SELECT {RUN_COLUMNS}, protocol_text, inputs, grants FROM runs WHERE id = ?1"
                ),
                [run],
                |row| {
                    Ok((
                        RawRun::read(row)?,
                        row.get::<_, Option<String>>(14)?,
                        row.get::<_, String>(15)?,
                        row.get::<_, Option<String>>(16)?,
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
            summary: self.summary(raw)?,
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

    fn latest_unfinished_run(&self, protocol_path: &str) -> Result<Option<RunSummary>, StoreError> {
        let mut runs = self.summaries(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE protocol_path = ?1 AND status <> 'finished' \
                 AND root IS NULL ORDER BY started_at DESC, id DESC LIMIT 1"
            ),
            &[protocol_path],
        )?;
        Ok(runs.pop())
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
        self.write(
            &format!("mark run `{run}` stopped"),
            |context, connection| {
                context.update_status(connection, run, RunStatus::Stopped, unix_milliseconds)
            },
        )
    }

    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        self.write(
            &format!("mark run `{run}` running"),
            |context, connection| {
                context.update_status(connection, run, RunStatus::Running, unix_milliseconds)
            },
        )
    }

    fn finish_run(&mut self, run: &str, finish: &Finish) -> Result<(), StoreError> {
        self.write(&format!("finish run `{run}`"), |context, connection| {
            context.update_finish(connection, run, finish)
        })
    }

    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Vec<Option<Unclaimed>>, StoreError> {
        // Plain JSON: a holder holds no secret, and a masked lock path would name no lock.
        let encoded = serde_json::to_string(holder)
            .map_err(|source| self.context.encode_failed("", "holder", source))?;
        let mut others = Vec::with_capacity(runs.len());
        // An immediate transaction: a second claimant waits for this one to commit, then reads
        // the holder it recorded.
        self.write(
            &format!("claim {} run(s)", runs.len()),
            |context, connection| {
                let failed = context.failed("claim runs");
                let mut read = connection
                    .prepare_cached("SELECT holder, parent FROM runs WHERE id = ?1")
                    .map_err(&failed)?;
                let mut record = connection
                    .prepare_cached("UPDATE runs SET holder = ?1 WHERE id = ?2")
                    .map_err(&failed)?;
                for run in runs {
                    let recorded: Option<(Option<String>, Option<String>)> = read
                        .query_row([run], |row| Ok((row.get(0)?, row.get(1)?)))
                        .optional()
                        .map_err(&failed)?;
                    let (other, parent) = recorded.unwrap_or_default();
                    if let Some(parent) = parent {
                        others.push(Some(Unclaimed::Child { parent }));
                        continue;
                    }
                    let other = match other {
                        Some(text) => Some(context.decode::<Holder>(run, "holder", &text)?),
                        None => None,
                    };
                    match other {
                        Some(other) if other != *holder && holds(&other) => {
                            others.push(Some(Unclaimed::Held(other)));
                        }
                        _ => {
                            record.execute([&encoded, run]).map_err(&failed)?;
                            others.push(None);
                        }
                    }
                }
                Ok(())
            },
        )?;
        Ok(others)
    }

    fn release_runs(&mut self, runs: &[String], holder: &Holder) -> Result<(), StoreError> {
        let encoded = serde_json::to_string(holder)
            .map_err(|source| self.context.encode_failed("", "holder", source))?;
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
        )
    }

    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        // A snapshot that a later step of the same run replaces in this transaction is never
        // read: it is neither encoded nor written.
        let mut last_step_of_run: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::new();
        for (index, write) in writes.iter().enumerate() {
            if let Write::Step { run, .. } = write {
                last_step_of_run.insert(run, index);
            }
        }
        let mut encoded = Vec::with_capacity(last_step_of_run.len());
        for (index, write) in writes.iter().enumerate() {
            if let Write::Step {
                run,
                entry,
                snapshot,
                finish,
                child_states,
            } = write
            {
                let latest = last_step_of_run.get(run.as_str()) == Some(&index);
                let snapshot = latest.then_some(snapshot);
                encoded.push(self.context.encode_step(
                    run,
                    entry,
                    snapshot.map(|snapshot| &**snapshot),
                    finish.as_ref(),
                    child_states,
                )?);
            }
        }
        self.write(
            &format!("commit {} writes", writes.len()),
            |context, connection| {
                let mut steps = encoded.iter();
                for write in writes {
                    match write {
                        Write::CreateRun(run) => context.insert_run(connection, run)?,
                        Write::Step { run, entry, .. } => {
                            let step = steps.next().expect("one encoding per step");
                            context.insert_step(connection, run, entry, step)?;
                        }
                        Write::MarkStopped {
                            run,
                            unix_milliseconds,
                        } => context.update_status(
                            connection,
                            run,
                            RunStatus::Stopped,
                            *unix_milliseconds,
                        )?,
                        Write::FinishRun { run, finish } => {
                            context.update_finish(connection, run, finish)?;
                        }
                    }
                }
                Ok(())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ChildChange;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory of its own under the system's temporary directory, removed afterwards.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let directory = std::env::temp_dir().join(format!(
                "protocol-run-sqlite-{name}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&directory);
            Scratch(directory)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.to_string(),
            protocol_path: "/protocols/p.yaml".to_string(),
            protocol_hash: super::super::content_hash("id: p"),
            protocol_text: Some("id: p".to_string()),
            inputs: serde_json::json!({"n": 1}),
            started_unix_milliseconds: 1_000,
            grants: None,
            origin: super::super::RunOrigin::Run,
            holder: None,
        }
    }

    fn snapshot(count: u64) -> Snapshot {
        serde_json::from_value(serde_json::json!({
            "format": 1, "protocol": "p", "configuration": ["a"],
            "context": {"count": count}, "running": true
        }))
        .unwrap()
    }

    fn entry(sequence: u64) -> JournalEntry {
        JournalEntry {
            sequence,
            event: Some(JournalEvent {
                name: "tick".to_string(),
                data: serde_json::json!({"n": sequence}),
            }),
            transitions: vec!["/states/a/on/tick/0".to_string()],
            actions: serde_json::json!([]),
            unix_milliseconds: sequence.saturating_add(1_000),
            children: Vec::new(),
        }
    }

    fn count(store: &SqliteStore, table: &str) -> i64 {
        store
            .connection
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .unwrap()
    }

    #[test]
    fn open_creates_the_directory_in_wal_mode_with_full_sync_at_the_latest_schema() {
        let scratch = Scratch::new("open");
        let store = SqliteStore::open(scratch.0.join("nested/state")).unwrap();
        assert!(scratch.0.join("nested/state/state.db").is_file());
        let pragma = |name: &str| -> String {
            store
                .connection
                .query_row(&format!("PRAGMA {name}"), [], |row| {
                    row.get::<_, rusqlite::types::Value>(0)
                })
                .map(|value| format!("{value:?}"))
                .unwrap()
        };
        assert_eq!(pragma("journal_mode"), "Text(\"wal\")");
        assert_eq!(pragma("synchronous"), "Integer(2)"); // FULL
        assert_eq!(pragma("foreign_keys"), "Integer(1)");
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        drop(store);
        // Reopening applies nothing twice.
        let store = SqliteStore::open(scratch.0.join("nested/state")).unwrap();
        assert_eq!(count(&store, "schema_version"), 1);
    }

    #[test]
    fn a_newer_schema_is_refused_naming_the_file() {
        let scratch = Scratch::new("newer");
        let store = SqliteStore::open(&scratch.0).unwrap();
        store
            .connection
            .execute("UPDATE schema_version SET version = 99", [])
            .unwrap();
        drop(store);
        let error = SqliteStore::open(&scratch.0).err().unwrap();
        let message = error.to_string();
        assert!(matches!(error, StoreError::NewerSchema { found: 99, .. }));
        assert!(
            message.contains("state.db") && message.contains("99"),
            "{message}"
        );
    }

    #[test]
    fn a_failing_second_statement_leaves_nothing_of_the_step() {
        let scratch = Scratch::new("rollback");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        store
            .commit_step("r", &entry(0), &snapshot(0), None)
            .unwrap();
        // The journal insert (first statement) succeeds, the snapshot upsert (second) aborts.
        store
            .connection
            .execute_batch(
                "CREATE TEMP TRIGGER refuse_insert BEFORE INSERT ON snapshots \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END; \
                 CREATE TEMP TRIGGER refuse_update BEFORE UPDATE ON snapshots \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            )
            .unwrap();
        let error = store
            .commit_step("r", &entry(1), &snapshot(1), None)
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("state.db") && message.contains("commit step 1 of run `r`"),
            "{message}"
        );
        assert!(message.contains("injected failure"), "{message}");
        assert_eq!(count(&store, "journal"), 1);
        let latest = store.latest_snapshot("r").unwrap().unwrap();
        assert_eq!((latest.sequence, latest.snapshot), (0, snapshot(0)));
        assert_eq!(store.list_runs().unwrap()[0].last_sequence, Some(0));
        // Once the failure is gone the same step commits.
        store
            .connection
            .execute_batch("DROP TRIGGER refuse_insert; DROP TRIGGER refuse_update;")
            .unwrap();
        store
            .commit_step("r", &entry(1), &snapshot(1), None)
            .unwrap();
        assert_eq!(store.journal("r").unwrap().len(), 2);
    }

    #[test]
    fn a_busy_database_is_waited_for_then_reported() {
        let scratch = Scratch::new("busy");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        // Another connection (as another process would) holds the write lock.
        let other = Connection::open(store.path()).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        store.set_busy_timeout(Duration::from_millis(40)).unwrap();
        let started = std::time::Instant::now();
        let error = store
            .commit_step("r", &entry(0), &snapshot(0), None)
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(40));
        assert!(matches!(error, StoreError::Busy { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("state.db") && message.contains("busy for over 40 ms"),
            "{message}"
        );
        other.execute_batch("COMMIT").unwrap();
        store
            .commit_step("r", &entry(0), &snapshot(0), None)
            .unwrap();
    }

    #[test]
    fn refusals_say_which_run_and_why() {
        let scratch = Scratch::new("refusals");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        let error = store.create_run(&new_run("r")).unwrap_err();
        assert!(matches!(error, StoreError::RunExists { .. }), "{error}");
        let error = store
            .commit_step("nobody", &entry(0), &snapshot(0), None)
            .unwrap_err();
        assert!(matches!(error, StoreError::UnknownRun { .. }), "{error}");
        store
            .commit_step("r", &entry(3), &snapshot(3), None)
            .unwrap();
        for stale in [3, 2] {
            let error = store
                .commit_step("r", &entry(stale), &snapshot(9), None)
                .unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "{}: run `r` is already at step 3; step {stale} must come after it",
                    store.path().display()
                )
            );
        }
        assert_eq!(count(&store, "journal"), 1);
        let error = store.mark_stopped("nobody", 5).unwrap_err();
        assert!(matches!(error, StoreError::UnknownRun { .. }), "{error}");
        let error = store
            .commit_step("r", &entry(u64::MAX), &snapshot(0), None)
            .unwrap_err();
        assert!(matches!(error, StoreError::OutOfRange { .. }), "{error}");
    }

    #[test]
    fn a_damaged_snapshot_is_reported_not_panicked_on() {
        let scratch = Scratch::new("damaged");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        store
            .commit_step("r", &entry(0), &snapshot(0), None)
            .unwrap();
        store
            .connection
            .execute("UPDATE snapshots SET snapshot = '{\"format\": 1'", [])
            .unwrap();
        let error = store.latest_snapshot("r").unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("state.db") && message.contains("snapshot of run `r` is damaged"),
            "{message}"
        );
    }

    /// A step's child changes: `r/kid` and `r/kid/grand` started, stepped and ended, each in
    /// the transaction of the step that made it.
    #[test]
    fn children_keep_rows_of_their_own_written_with_their_parents_steps() {
        let scratch = Scratch::new("children");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        let started = |path: &str| ChildChange::Started {
            path: path.to_string(),
            protocol_path: format!("/protocols/{path}.yaml"),
            protocol_hash: "h".to_string(),
            inputs: serde_json::json!({}),
        };
        let mut step = entry(0);
        step.children = vec![started("kid"), started("kid/grand")];
        store.commit_step("r", &step, &snapshot(0), None).unwrap();
        let run = |store: &SqliteStore, id: &str| store.run(id).unwrap().unwrap().summary;
        let kid = run(&store, "r/kid");
        assert_eq!(kid.parent.as_deref(), Some("r"));
        assert_eq!(kid.origin, Some(RunOrigin::Child));
        assert_eq!(kid.status, RunStatus::Running);
        assert_eq!(kid.started_unix_milliseconds, 1_000);
        assert_eq!(run(&store, "r/kid/grand").parent.as_deref(), Some("r/kid"));
        // A child is held with its parent: never claimed on its own.
        let holder = Holder {
            process: "resume".to_string(),
            pid: 1,
            lock: "/nowhere".to_string(),
        };
        let claimed = store
            .claim_runs(&["r/kid".to_string()], &holder, &mut |_| true)
            .unwrap();
        assert_eq!(
            claimed,
            [Some(Unclaimed::Child {
                parent: "r".to_string()
            })]
        );
        // Stopping the parent stops its children; resuming it resumes them.
        store.mark_stopped("r", 1_500).unwrap();
        assert_eq!(run(&store, "r/kid/grand").status, RunStatus::Stopped);
        store.mark_running("r", 1_600).unwrap();
        assert_eq!(run(&store, "r/kid/grand").status, RunStatus::Running);
        let mut step = entry(1);
        step.children = vec![
            ChildChange::Stepped {
                path: "kid/grand".to_string(),
                sequence: 1,
            },
            ChildChange::Ended {
                path: "kid/grand".to_string(),
                final_state: Some("done".to_string()),
                exit_code: 0,
                output: serde_json::json!({"said": "went"}),
            },
        ];
        store.commit_step("r", &step, &snapshot(1), None).unwrap();
        let grand = run(&store, "r/kid/grand");
        assert_eq!(grand.last_sequence, Some(1));
        let finish = grand.finish.unwrap();
        assert_eq!(finish.final_state.as_deref(), Some("done"));
        assert_eq!(finish.output, serde_json::json!({"said": "went"}));
        // The journal keeps what the step did to them.
        assert_eq!(store.journal("r").unwrap()[1].children, step.children);
        // The parent's end ends the children it left, as cancelled.
        let finish = Finish {
            final_state: Some("a".to_string()),
            exit_code: 0,
            output: serde_json::Value::Null,
            unix_milliseconds: 2_000,
        };
        store
            .commit_step("r", &entry(2), &snapshot(2), Some(&finish))
            .unwrap();
        let kid = run(&store, "r/kid").finish.unwrap();
        assert_eq!(kid.exit_code, ChildChange::CANCELLED_EXIT_CODE);
        assert_eq!(kid.final_state, None);
    }

    /// A row of a child's name that is not the run's child is never taken over: the step that
    /// would is refused whole.
    #[test]
    fn a_child_row_never_takes_over_another_run() {
        let scratch = Scratch::new("children-clash");
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store.create_run(&new_run("r")).unwrap();
        store.create_run(&new_run("r/kid")).unwrap();
        let mut step = entry(0);
        step.children = vec![ChildChange::Started {
            path: "kid".to_string(),
            protocol_path: "/protocols/kid.yaml".to_string(),
            protocol_hash: "h".to_string(),
            inputs: serde_json::json!({}),
        }];
        let error = store
            .commit_step("r", &step, &snapshot(0), None)
            .unwrap_err();
        assert!(
            error.to_string().contains("a run `r/kid` already exists"),
            "{error}"
        );
        assert_eq!(count(&store, "journal"), 0);
        let other = store.run("r/kid").unwrap().unwrap().summary;
        assert_eq!(other.origin, Some(RunOrigin::Run));
        assert_eq!(other.protocol_path, "/protocols/p.yaml");
    }
}
