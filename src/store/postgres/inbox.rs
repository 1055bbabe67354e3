//! Each run's inbox in PostgreSQL (`store::inbox`): stored by any host, taken by the run's holder (skipping entries another take has locked), applied with a step.

use tokio_postgres::GenericClient;

use super::PostgresStore;
use super::session::Session;
use crate::store::codec::inbox::{
    APPLY, INSERT_ENTRY, NEXT_ENTRY, RawState, RawTaken, STATE, take_statement,
};
use crate::store::{Holder, InboxRecord, StoreError, TakenInbox};

impl PostgresStore {
    pub(super) fn store_event(
        &mut self,
        run: &str,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        let data = self.codec.encode(run, "inbox entry's data", data)?;
        let queued = self.codec.integer("a time", unix_milliseconds)?;
        let operation = || format!("store an event in the inbox of run `{run}`");
        let number = self.write_waiting_briefly("store an event in a run's inbox", |session| {
            let Some(row) = session.query_optional(&operation, NEXT_ENTRY, &[&run])? else {
                return Err(session.refusal(run, None, &operation())?);
            };
            let next: i64 = session.column(&row, 0, run)?;
            session.execute(
                &operation,
                INSERT_ENTRY,
                &[&run, &next, &event, &data, &queued],
            )?;
            Ok(next.max(0) as u64)
        })?;
        Ok(number)
    }

    pub(super) fn take_entries(
        &mut self,
        holder: &Holder,
        protocol_path: &str,
        limit: usize,
    ) -> Result<TakenInbox, StoreError> {
        let holder = self.codec.encode_holder(holder)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Entries another host is taking (a holder's old process, before its lease ran out)
        // are skipped rather than waited for.
        let statement = take_statement(" FOR UPDATE OF inbox SKIP LOCKED");
        let operation = || "take inbox entries".to_string();
        let rows = self.write("take inbox entries", |session| {
            let rows = session.query(&operation, &statement, &[&holder, &limit, &protocol_path])?;
            rows.iter()
                .map(|row| {
                    let run: String = session.column(row, 0, "")?;
                    Ok(RawTaken {
                        entry: session.column(row, 1, &run)?,
                        event: session.column(row, 2, &run)?,
                        data: session.column(row, 3, &run)?,
                        tries: session.column(row, 4, &run)?,
                        status: session.column(row, 5, &run)?,
                        run,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()
        })?;
        self.codec.taken(rows)
    }

    pub(super) fn entry_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let session = self.session();
        let operation = || "read inbox entries".to_string();
        let mut records = Vec::with_capacity(entries.len());
        for (run, entry) in entries {
            let number = self.codec.integer("an inbox entry", *entry)?;
            let Some(row) = session.query_optional(&operation, STATE, &[run, &number])? else {
                continue;
            };
            let state = RawState {
                status: session.column(&row, 0, run)?,
                outcome: session.column(&row, 1, run)?,
                output: session.column(&row, 2, run)?,
                step: session.column(&row, 3, run)?,
            };
            records.push(self.codec.inbox_record(run, *entry, state)?);
        }
        Ok(records)
    }
}

impl<C: GenericClient + Sync> Session<'_, C> {
    /// Applies one entry inside a batch's transaction (`Write::ApplyInbox`).
    pub(super) fn apply_entry(
        &self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        let number = self.codec.integer("an inbox entry", entry)?;
        let step = step
            .map(|step| self.codec.integer("a step number", step))
            .transpose()?;
        let outcome = self.codec.encode(run, "inbox entry's outcome", outcome)?;
        let operation = || format!("apply inbox entry {entry} of run `{run}`");
        let changed = self.execute(
            &operation,
            APPLY,
            &[&run, &number, &step, &outcome, &output],
        )?;
        if changed == 0 {
            return Err(self.codec.not_waiting(run, entry));
        }
        Ok(())
    }
}
