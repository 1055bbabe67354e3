//! Each run's inbox in PostgreSQL (`store::inbox`): stored by any host, taken by the run's holder (skipping entries another take has locked), applied with a step.

use tokio_postgres::GenericClient;

use super::PostgresStore;
use super::session::Session;
use crate::store::codec::inbox::{
    APPLY, INSERT_ENTRY, NEXT_ENTRY, RECENT, RawState, RawTaken, take_statement,
};
use crate::store::inbox::EntryKind;
use crate::store::{Holder, InboxRecord, StoreError, TakenInbox};

impl PostgresStore {
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
        let data = self.codec.encode(run, "inbox entry's data", data)?;
        let queued = self.codec.integer("a time", unix_milliseconds)?;
        let operation = || format!("store an event in the inbox of run `{run}`");
        let sender = self.lease.clone();
        let number = self.write_waiting_briefly("store an event in a run's inbox", |session| {
            let Some(row) = session.query_optional(&operation, NEXT_ENTRY, &[&run])? else {
                return Err(session.refusal(run, None, &operation())?);
            };
            let next: i64 = session.column(&row, 0, run)?;
            let holder: Option<String> = session.column(&row, 1, run)?;
            session.execute(
                &operation,
                INSERT_ENTRY,
                &[&run, &next, &event, &data, &queued, &sender, &request],
            )?;
            // The holder is woken when this commits (a run nobody holds waits for the host that
            // takes it over, which looks at its inbox then).
            let lease = match holder {
                Some(text) => session.codec.decode::<Holder>(run, "holder", &text)?.host,
                None => None,
            };
            if let Some(lease) = lease {
                session.notify(&lease)?;
            }
            Ok(next.max(0) as u64)
        })?;
        Ok(number)
    }

    pub(super) fn take_entries(
        &mut self,
        holder: &Holder,
        scope: crate::store::InboxScope,
        limit: usize,
    ) -> Result<TakenInbox, StoreError> {
        let holder = self.codec.encode_holder(holder)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Entries another host is taking (a holder's old process, before its lease ran out)
        // are skipped rather than waited for.
        let statement = take_statement(" FOR UPDATE OF inbox SKIP LOCKED", scope);
        let operation = || "take inbox entries".to_string();
        let rows = self.write("take inbox entries", |session| {
            let rows = session.query(&operation, &statement, &[&holder, &limit, &scope.value()])?;
            rows.iter()
                .map(|row| {
                    let run: String = session.column(row, 0, "")?;
                    Ok(RawTaken {
                        entry: session.column(row, 1, &run)?,
                        event: session.column(row, 2, &run)?,
                        data: session.column(row, 3, &run)?,
                        tries: session.column(row, 4, &run)?,
                        status: session.column(row, 5, &run)?,
                        request: session.column(row, 6, &run)?,
                        run,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()
        })?;
        self.codec.taken(rows)
    }

    /// Listens on `INBOX_CHANNEL` for notifications naming the lease `host`; what they wake.
    pub(super) fn listen(
        &mut self,
        host: &str,
    ) -> Result<std::sync::Arc<tokio::sync::Notify>, StoreError> {
        let wake = std::sync::Arc::new(tokio::sync::Notify::new());
        if let Ok(mut listening) = self.wakeups.lock() {
            *listening = Some((host.to_string(), wake.clone()));
        }
        super::wait(
            self.client
                .batch_execute(&format!("LISTEN {}", super::INBOX_CHANNEL)),
        )
        .map_err(|error| super::session::failed(&self.codec, "listen for queued events", error))?;
        Ok(wake)
    }

    /// The states of `entries`, in their order, in one statement however many a host follows.
    pub(super) fn entry_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<InboxRecord>, StoreError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let session = self.session();
        let operation = || format!("read {} inbox entries", entries.len());
        let runs: Vec<&str> = entries.iter().map(|(run, _)| run.as_str()).collect();
        let numbers = entries
            .iter()
            .map(|(_, entry)| self.codec.integer("an inbox entry", *entry))
            .collect::<Result<Vec<i64>, StoreError>>()?;
        let rows = session.query(
            &operation,
            "SELECT inbox.run_id, inbox.entry, status, outcome, output, step, event_name, tries, \
             request FROM inbox JOIN \
             unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS asked (run_id, entry, position) \
             ON inbox.run_id = asked.run_id AND inbox.entry = asked.entry ORDER BY asked.position",
            &[&runs, &numbers],
        )?;
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let run: String = session.column(row, 0, "")?;
            let entry: i64 = session.column(row, 1, &run)?;
            let state = RawState {
                status: session.column(row, 2, &run)?,
                outcome: session.column(row, 3, &run)?,
                output: session.column(row, 4, &run)?,
                step: session.column(row, 5, &run)?,
                event: session.column(row, 6, &run)?,
                tries: session.column(row, 7, &run)?,
                request: session.column(row, 8, &run)?,
            };
            records.push(self.codec.inbox_record(&run, entry.max(0) as u64, state)?);
        }
        Ok(records)
    }
}

impl PostgresStore {
    pub(super) fn recent_entries(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let session = self.session();
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let operation = || format!("read the inbox of run `{run}`");
        let rows = session.query(&operation, RECENT, &[&run, &count])?;
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let entry: i64 = session.column(row, 0, run)?;
            let state = RawState {
                status: session.column(row, 1, run)?,
                outcome: session.column(row, 2, run)?,
                output: session.column(row, 3, run)?,
                step: session.column(row, 4, run)?,
                event: session.column(row, 5, run)?,
                tries: session.column(row, 6, run)?,
                request: session.column(row, 7, run)?,
            };
            records.push(self.codec.inbox_record(run, entry.max(0) as u64, state)?);
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
        let Some(row) = self.query_optional(
            &operation,
            &format!("{APPLY} RETURNING sender"),
            &[&run, &number, &step, &outcome, &output],
        )?
        else {
            return Err(self.codec.not_waiting(run, entry));
        };
        // The host that queued it is woken when this commits, to relay the outcome.
        if let Some(sender) = self.column::<Option<String>>(&row, 0, run)? {
            self.notify(&sender)?;
        }
        Ok(())
    }

    /// Wakes the host with lease `lease` once the transaction commits (`INBOX_CHANNEL`).
    pub(super) fn notify(&self, lease: &str) -> Result<(), StoreError> {
        self.execute(
            &|| format!("wake the host `{lease}`"),
            "SELECT pg_notify($1, $2)::text",
            &[&super::INBOX_CHANNEL, &lease],
        )?;
        Ok(())
    }
}
