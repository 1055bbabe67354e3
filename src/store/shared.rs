//! One store several drivers share: `mcp`'s runs all write through the server's one connection, rather than each holding its own.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Finish, Holder, JournalEntry, NewRun, RunCursor, RunRecord, RunSummary, Store, StoreError,
    StoredSnapshot, Unclaimed, Write,
};
use crate::base::snapshot::Snapshot;

/// A handle on one store; clones share its connection. Each call takes the connection
/// for its own length, so a transaction is never interleaved with another driver's.
#[derive(Clone)]
pub struct SharedStore(Arc<Mutex<Box<dyn Store>>>);

impl SharedStore {
    pub fn new(store: Box<dyn Store>) -> SharedStore {
        SharedStore(Arc::new(Mutex::new(store)))
    }

    /// The store, for several reads in a row; held for them, never across another call that
    /// takes it (a thread taking it twice waits on itself for good). A call that panicked
    /// while holding it left no transaction open (a database rolls back an unfinished one as
    /// its transaction is dropped), so the store is used on rather than refused for good.
    pub fn lock(&self) -> MutexGuard<'_, Box<dyn Store>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store for SharedStore {
    fn location(&self) -> String {
        self.lock().location()
    }

    fn create_run(&mut self, run: &NewRun) -> Result<(), StoreError> {
        self.lock().create_run(run)
    }

    fn commit_step(
        &mut self,
        run: &str,
        entry: &JournalEntry,
        snapshot: &Snapshot,
        finish: Option<&Finish>,
    ) -> Result<(), StoreError> {
        self.lock().commit_step(run, entry, snapshot, finish)
    }

    fn commit_child_states(
        &mut self,
        run: &str,
        states: &[crate::base::durable::ChildState],
    ) -> Result<(), StoreError> {
        self.lock().commit_child_states(run, states)
    }

    fn latest_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        self.lock().latest_snapshot(run)
    }

    fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        self.lock().run(run)
    }

    fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.lock().list_runs()
    }

    fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.lock().unfinished_runs(protocol_path, count)
    }

    fn journal(&self, run: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.lock().journal(run)
    }

    fn journal_tail(&self, run: &str, count: usize) -> Result<Vec<JournalEntry>, StoreError> {
        self.lock().journal_tail(run, count)
    }

    fn journal_before(
        &self,
        run: &str,
        before: u64,
        count: usize,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        self.lock().journal_before(run, before, count)
    }

    fn mark_stopped(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        self.lock().mark_stopped(run, unix_milliseconds)
    }

    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        self.lock().mark_running(run, unix_milliseconds)
    }

    fn finish_run(&mut self, run: &str, finish: &Finish) -> Result<(), StoreError> {
        self.lock().finish_run(run, finish)
    }

    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Vec<Option<Unclaimed>>, StoreError> {
        self.lock().claim_runs(runs, holder, holds)
    }

    fn release_runs(&mut self, runs: &[String], holder: &Holder) -> Result<(), StoreError> {
        self.lock().release_runs(runs, holder)
    }

    fn run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError> {
        self.lock().run_summary(run)
    }

    fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.lock().runs_of_protocols(paths, after, count)
    }

    fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError> {
        self.lock().directives_before(run, before)
    }

    fn snapshot_at(&self, run: &str, step: u64) -> Result<Option<StoredSnapshot>, StoreError> {
        self.lock().snapshot_at(run, step)
    }

    fn enqueue(
        &mut self,
        run: &str,
        kind: super::inbox::EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        self.lock()
            .enqueue(run, kind, event, data, unix_milliseconds)
    }

    fn take_inbox(
        &mut self,
        holder: &super::Holder,
        scope: super::InboxScope,
        limit: usize,
    ) -> Result<super::TakenInbox, StoreError> {
        self.lock().take_inbox(holder, scope, limit)
    }

    fn apply_inbox(
        &mut self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        self.lock().apply_inbox(run, entry, step, outcome, output)
    }

    fn inbox_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<super::InboxRecord>, StoreError> {
        self.lock().inbox_states(entries)
    }

    fn recent_inbox(&self, run: &str, count: usize) -> Result<Vec<super::InboxRecord>, StoreError> {
        self.lock().recent_inbox(run, count)
    }

    fn wake_on_inbox(
        &mut self,
        host: &str,
    ) -> Result<Option<std::sync::Arc<tokio::sync::Notify>>, StoreError> {
        self.lock().wake_on_inbox(host)
    }

    fn renew_lease(&mut self, host: &str, ttl_milliseconds: u64) -> Result<(), StoreError> {
        self.lock().renew_lease(host, ttl_milliseconds)
    }

    fn prune_runs(
        &mut self,
        before_unix_milliseconds: u64,
        statuses: &[super::RunStatus],
        count: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.lock()
            .prune_runs(before_unix_milliseconds, statuses, count)
    }

    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.lock().commit_batch(writes)
    }

    fn protocol_texts(
        &self,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.lock().protocol_texts(hashes)
    }

    fn append_telemetry(&mut self, run: &str, lines: &str) -> Result<(), StoreError> {
        self.lock().append_telemetry(run, lines)
    }

    fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        self.lock().telemetry(run)
    }

    fn save_trace(&mut self, run: &str, trace: &str) -> Result<(), StoreError> {
        self.lock().save_trace(run, trace)
    }

    fn trace(&self, run: &str) -> Result<Option<String>, StoreError> {
        self.lock().trace(run)
    }

    fn watch_runs(&mut self) -> Result<Option<super::RunChanges>, StoreError> {
        self.lock().watch_runs()
    }
}
