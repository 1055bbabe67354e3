//! The store's schema: one migration per version, applied when a file is opened; a file of a newer version is refused.

use rusqlite::TransactionBehavior;

use super::SqliteStore;
use crate::store::StoreError;

/// The schema, one migration per version: version N is reached by applying the first N.
///
/// Written to carry over to PostgreSQL unchanged: only TEXT, INTEGER and BIGINT columns (BIGINT
/// for Unix milliseconds and step numbers, which overflow PostgreSQL's 32-bit INTEGER; SQLite
/// gives any type containing "INT" integer affinity), JSON kept as TEXT (JSONB there if it is
/// ever queried), no ROWID, AUTOINCREMENT or STRICT, and `INSERT ... ON CONFLICT ... DO UPDATE`,
/// which both accept. Run ids are chosen by the caller, so no sequence generator is needed.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // The state after each step, kept with its journal row (`snapshots.rs`): in full
    // (`snapshot`) every few steps, otherwise as a delta of the step before (`snapshot_delta`).
    // The latest snapshot of each run recorded before moves to its step's row; `snapshots` keeps
    // the states of children (their latest, in their own rows) and any it could not move.
    "
    ALTER TABLE journal ADD COLUMN snapshot TEXT;
    ALTER TABLE journal ADD COLUMN snapshot_delta TEXT;
    UPDATE journal SET snapshot = (SELECT kept.snapshot FROM snapshots kept WHERE
        kept.run_id = journal.run_id AND kept.step = journal.step)
        WHERE EXISTS (SELECT 1 FROM snapshots kept WHERE kept.run_id = journal.run_id
        AND kept.step = journal.step);
    DELETE FROM snapshots WHERE EXISTS (SELECT 1 FROM journal moved WHERE
        moved.run_id = snapshots.run_id AND moved.step = snapshots.step
        AND moved.snapshot IS NOT NULL);
",
    // A running run's step no longer writes the run's row: its last step and that step's time
    // are read from the journal (`RUN_COLUMNS`); `runs.last_step` and `runs.last_step_at` are
    // written only when a run ends (and for child runs, whose steps are their root's). Nothing
    // to move: every step already has its journal row. The version tells an older build, which
    // would read a running run's last step from its row, that it cannot read this file.
    "
    -- version 7: a run's last step is its journal's
",
    // A fencing token per run, one more at every claim: a store that claimed a run writes to it
    // only while the row still has the token its claim gave (`Store::claim_runs`).
    "
    ALTER TABLE runs ADD COLUMN fencing BIGINT NOT NULL DEFAULT 0;
",
    // The run and step a run was forked from (`ForkedFrom` as JSON), NULL for any other run.
    "
    ALTER TABLE runs ADD COLUMN forked_from TEXT;
",
    // Each run's inbox (`store::inbox`): events hosts accepted for it, numbered per run by
    // `runs.inbox_next` under the run's row lock, until its holder applies or sets them aside.
    "
    ALTER TABLE runs ADD COLUMN inbox_next BIGINT NOT NULL DEFAULT 0;
    CREATE TABLE inbox (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        entry BIGINT NOT NULL,
        event_name TEXT NOT NULL,
        event_data TEXT NOT NULL,
        queued_at BIGINT NOT NULL,
        sender TEXT,
        tries BIGINT NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'applied', 'set_aside')),
        step BIGINT,
        outcome TEXT,
        output TEXT,
        PRIMARY KEY (run_id, entry)
    );
    CREATE INDEX inbox_waiting ON inbox (run_id, entry) WHERE status = 'pending';
    CREATE UNIQUE INDEX inbox_steps ON inbox (run_id, step) WHERE step IS NOT NULL;
",
    // Pinned versions: the texts runs started with (protocols, libraries, child protocols),
    // each kept once by its content hash. A new run names its protocol's text by hash and
    // leaves `protocol_text` NULL; a run recorded before keeps its own copy there, still read.
    "
    CREATE TABLE protocol_texts (
        hash TEXT PRIMARY KEY,
        text TEXT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN protocol_text_hash TEXT;
",
    // How many times a run was redriven (`Store::reopen_run`).
    "
    ALTER TABLE runs ADD COLUMN redrives BIGINT NOT NULL DEFAULT 0;
",
    // A run's telemetry (what `logs` and `stats` read), whichever process drove it: one row per
    // commit that recorded some, its JSON lines in order; it goes with its run.
    "
    CREATE TABLE telemetry (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        part BIGINT NOT NULL,
        lines TEXT NOT NULL,
        PRIMARY KEY (run_id, part)
    );
",
    // The trace a run is exported in (`--otlp`), as JSON: a resumed run goes on in it.
    "
    ALTER TABLE runs ADD COLUMN trace TEXT;
",
    // What an inbox entry asks of its run's holder: an event, or the run's cancel.
    "
    ALTER TABLE inbox ADD COLUMN request TEXT NOT NULL DEFAULT 'event'
        CHECK (request IN ('event', 'cancel'));
",
];

impl SqliteStore {
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
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
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
}
