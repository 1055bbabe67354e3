//! Each run's inbox in the SQLite file (`store::inbox`): stored, taken by its holder, applied with a step.

use rusqlite::{Connection, OptionalExtension};

use super::statements::CachedStatements;

use super::{Context, SqliteStore};
use crate::store::codec::inbox::{
    APPLY, INSERT_ENTRY, NEXT_ENTRY, RECENT, RawState, RawTaken, STATE, for_sqlite, take_statement,
};
use crate::store::inbox::EntryKind;
use crate::store::{Holder, InboxRecord, StoreError, TakenInbox};

impl SqliteStore {
    /// Stores an entry of `kind` in `run`'s inbox (`Store::enqueue_event`,
    /// `Store::enqueue_cancel`): its number.
    pub(super) fn store_entry(
        &mut self,
        run: &str,
        kind: EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        let request = kind.as_str();
        let data = self.context.encode(run, "inbox entry's data", data)?;
        let queued = self.context.integer("a time", unix_milliseconds)?;
        let mut number = 0;
        self.write("store an event in a run's inbox", |context, connection| {
            let failed = context.failed("store an event in a run's inbox");
            let next: Option<i64> = connection
                .query_row(&for_sqlite(NEXT_ENTRY), [run], |row| row.get(0))
                .optional()
                .map_err(&failed)?;
            let Some(next) = next else {
                return Err(context.refusal(connection, run, None, "store an event", None));
            };
            connection
                .execute_cached(
                    &for_sqlite(INSERT_ENTRY),
                    rusqlite::params![run, next, event, data, queued, None::<String>, request],
                )
                .map_err(&failed)?;
            number = next.max(0) as u64;
            Ok(())
        })?;
        Ok(number)
    }

    pub(super) fn take_entries(
        &mut self,
        holder: &Holder,
        scope: crate::store::InboxScope,
        limit: usize,
    ) -> Result<TakenInbox, StoreError> {
        let holder = self.context.encode_holder(holder)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = Vec::new();
        self.write("take inbox entries", |context, connection| {
            let failed = context.failed("take inbox entries");
            let mut statement = connection
                .prepare_cached(&for_sqlite(&take_statement("", scope)))
                .map_err(&failed)?;
            rows = statement
                .query_map(rusqlite::params![holder, limit, scope.value()], |row| {
                    Ok(RawTaken {
                        run: row.get(0)?,
                        entry: row.get(1)?,
                        event: row.get(2)?,
                        data: row.get(3)?,
                        tries: row.get(4)?,
                        status: row.get(5)?,
                        request: row.get(6)?,
                    })
                })
                .map_err(&failed)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(&failed)?;
            Ok(())
        })?;
        self.context.taken(rows)
    }

    pub(super) fn entry_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let failed = self.context.failed("read inbox entries");
        let mut statement = self
            .connection
            .prepare_cached(&for_sqlite(STATE))
            .map_err(&failed)?;
        let mut records = Vec::with_capacity(entries.len());
        for (run, entry) in entries {
            let number = self.context.integer("an inbox entry", *entry)?;
            let row = statement
                .query_row(rusqlite::params![run, number], |row| {
                    Ok(RawState {
                        status: row.get(0)?,
                        outcome: row.get(1)?,
                        output: row.get(2)?,
                        step: row.get(3)?,
                        event: row.get(4)?,
                        tries: row.get(5)?,
                        request: row.get(6)?,
                    })
                })
                .optional()
                .map_err(&failed)?;
            if let Some(row) = row {
                records.push(self.context.inbox_record(run, *entry, row)?);
            }
        }
        Ok(records)
    }
}

impl SqliteStore {
    pub(super) fn recent_entries(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let failed = self.context.failed("read a run's inbox");
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let mut statement = self
            .connection
            .prepare_cached(&for_sqlite(RECENT))
            .map_err(&failed)?;
        let rows = statement
            .query_map(rusqlite::params![run, count], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    RawState {
                        status: row.get(1)?,
                        outcome: row.get(2)?,
                        output: row.get(3)?,
                        step: row.get(4)?,
                        event: row.get(5)?,
                        tries: row.get(6)?,
                        request: row.get(7)?,
                    },
                ))
            })
            .map_err(&failed)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&failed)?;
        rows.into_iter()
            .map(|(entry, row)| self.context.inbox_record(run, entry.max(0) as u64, row))
            .collect()
    }
}

impl Context {
    /// Applies one entry inside a batch's transaction (`Write::ApplyInbox`).
    pub(super) fn apply_entry(
        &self,
        connection: &Connection,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        let failed = self.failed("apply an inbox entry");
        let number = self.integer("an inbox entry", entry)?;
        let step = step
            .map(|step| self.integer("a step number", step))
            .transpose()?;
        let outcome = self.encode(run, "inbox entry's outcome", outcome)?;
        let changed = connection
            .execute_cached(
                &for_sqlite(APPLY),
                rusqlite::params![run, number, step, outcome, output],
            )
            .map_err(&failed)?;
        if changed == 0 {
            return Err(self.not_waiting(run, entry));
        }
        Ok(())
    }
}
