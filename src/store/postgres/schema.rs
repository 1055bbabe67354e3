//! The PostgreSQL store's schema: one migration per version, applied when a host connects (hosts connecting at once take turns on an advisory lock); a database of a newer version is refused.

use super::{PostgresStore, wait};
use crate::store::StoreError;

/// The schema, one migration per version: version N is reached by applying the first N. The
/// tables are SQLite's at its version 7 (`sqlite::schema`), in PostgreSQL's types: the same
/// rows, so that what one store keeps the other can read.
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
        exit_code BIGINT,
        output TEXT,
        finished_at BIGINT,
        grants TEXT,
        origin TEXT,
        holder TEXT,
        parent TEXT,
        root TEXT
    );
    CREATE INDEX runs_by_protocol ON runs (protocol_path, status, started_at);
    CREATE INDEX runs_by_root ON runs (root);
    CREATE TABLE journal (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        step BIGINT NOT NULL,
        event_name TEXT,
        event_data TEXT,
        transitions TEXT NOT NULL,
        actions TEXT NOT NULL,
        recorded_at BIGINT NOT NULL,
        children TEXT,
        snapshot TEXT,
        snapshot_delta TEXT,
        PRIMARY KEY (run_id, step)
    );
    CREATE TABLE snapshots (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        step BIGINT NOT NULL,
        snapshot TEXT NOT NULL,
        taken_at BIGINT NOT NULL
    );
",
    // SQLite's version 8: a fencing token per run, one more at every claim.
    "
    ALTER TABLE runs ADD COLUMN fencing BIGINT NOT NULL DEFAULT 0;
",
    // Hosts' leases, by the database's clock (Unix milliseconds): a holder naming a lease is
    // live while it has not run out.
    "
    CREATE TABLE hosts (
        id TEXT PRIMARY KEY,
        taken_at BIGINT NOT NULL,
        renewed_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    );
",
    // SQLite's version 9: the run and step a run was forked from.
    "
    ALTER TABLE runs ADD COLUMN forked_from TEXT;
",
    // SQLite's version 10: each run's inbox (`store::inbox`).
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
    // Who committed each step, and under which fencing token of its run: hosts of a fleet can
    // be checked never to have both written under one token. (PostgreSQL only: on SQLite one
    // machine's lock files tell the holder.)
    "
    ALTER TABLE journal ADD COLUMN fencing BIGINT;
    ALTER TABLE journal ADD COLUMN writer TEXT;
",
    // SQLite's version 11: the texts runs started with, each kept once by its content hash.
    "
    CREATE TABLE protocol_texts (
        hash TEXT PRIMARY KEY,
        text TEXT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN protocol_text_hash TEXT;
",
    // SQLite's version 12: how many times a run was redriven.
    "
    ALTER TABLE runs ADD COLUMN redrives BIGINT NOT NULL DEFAULT 0;
",
    // SQLite's version 13: a run's telemetry, one row per commit that recorded some.
    "
    CREATE TABLE telemetry (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        part BIGINT NOT NULL,
        lines TEXT NOT NULL,
        PRIMARY KEY (run_id, part)
    );
",
    // SQLite's version 14: the trace a run is exported in (`--otlp`), as JSON.
    "
    ALTER TABLE runs ADD COLUMN trace TEXT;
",
    // SQLite's version 15: what an inbox entry asks of its run's holder.
    "
    ALTER TABLE inbox ADD COLUMN request TEXT NOT NULL DEFAULT 'event'
        CHECK (request IN ('event', 'cancel'));
",
];

/// The advisory lock migrations take (any constant: it only has to be the same for every host).
const MIGRATION_LOCK: i64 = 0x7072_6f74_6f63_6f6c;

impl PostgresStore {
    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        let row = wait(
            self.client
                .query_one("SELECT MAX(version) FROM schema_version", &[]),
        )
        .map_err(|error| super::session::failed(&self.codec, "read the schema version", error))?;
        Ok(row.get::<_, Option<i64>>(0).unwrap_or_default())
    }

    /// Applies the migrations the database lacks, all in one transaction.
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
        let operation = "bring the schema up to date";
        let failed = |error| super::session::failed(&self.codec, operation, error);
        let supported = MIGRATIONS.len() as i64;
        let transaction = wait(self.client.transaction()).map_err(failed)?;
        // Hosts that connect at once wait for each other here, then read the version the first
        // one left.
        wait(transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]))
            .map_err(failed)?;
        wait(
            transaction.batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)",
            ),
        )
        .map_err(failed)?;
        let found = wait(transaction.query_one("SELECT MAX(version) FROM schema_version", &[]))
            .map_err(failed)?
            .get::<_, Option<i64>>(0)
            .unwrap_or_default();
        if found > supported {
            return Err(StoreError::NewerSchema {
                database: self.codec.location(),
                found,
                supported,
            });
        }
        if found == supported {
            return wait(transaction.commit()).map_err(failed);
        }
        for migration in &MIGRATIONS[found as usize..] {
            wait(transaction.batch_execute(migration)).map_err(failed)?;
        }
        wait(transaction.execute("DELETE FROM schema_version", &[])).map_err(failed)?;
        wait(transaction.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&supported],
        ))
        .map_err(failed)?;
        wait(transaction.commit()).map_err(failed)
    }
}
