//! One SQLite store several drivers share: `mcp`'s runs all write through the server's one connection, rather than each holding its own (three descriptors apiece).

use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Finish, Holder, JournalEntry, NewRun, RunRecord, RunSummary, SqliteStore, Store, StoreError,
    StoredSnapshot, Unclaimed, Write,
};
use crate::base::snapshot::Snapshot;

/// A handle on one `SqliteStore`; clones share its connection. Each call takes the connection
/// for its own length, so a transaction is never interleaved with another driver's.
#[derive(Clone)]
pub struct SharedStore(Arc<Mutex<SqliteStore>>);

impl SharedStore {
    pub fn new(store: SqliteStore) -> SharedStore {
        SharedStore(Arc::new(Mutex::new(store)))
    }

    /// The connection, for the reads `SqliteStore` has beyond the `Store` trait; held for one
    /// read, never across another call that takes it (a thread taking it twice waits on
    /// itself for good). A call that
    /// panicked while holding it left no transaction open (SQLite rolls back an unfinished one
    /// as it is dropped), so the connection is used on rather than refused for good.
    pub fn lock(&self) -> MutexGuard<'_, SqliteStore> {
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

    fn latest_unfinished_run(&self, protocol_path: &str) -> Result<Option<RunSummary>, StoreError> {
        self.lock().latest_unfinished_run(protocol_path)
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

    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.lock().commit_batch(writes)
    }
}
