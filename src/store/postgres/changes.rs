//! Word of the runs a transaction committed steps or status changes to, by PostgreSQL's notifications on `RUNS_CHANNEL` (one per run per transaction), which a listening store hands on (`Store::watch_runs`).

use std::collections::HashSet;

use foldhash::fast::RandomState;
use tokio_postgres::GenericClient;

use super::PostgresStore;
use super::session::Session;
use crate::store::codec::steps::Planned;
use crate::store::{RunChanges, StoreError, Write};

/// The channel a transaction that commits a run's step, status change or end notifies on: the
/// payload is the run's id.
pub(super) const RUNS_CHANNEL: &str = "protocol_run_runs";

impl PostgresStore {
    /// Listens on `RUNS_CHANNEL` (once, however often asked); the feed its notifications go to.
    pub(super) fn listen_for_runs(&mut self) -> Result<RunChanges, StoreError> {
        if !self.listening_for_runs {
            super::wait(self.client.batch_execute(&format!("LISTEN {RUNS_CHANNEL}"))).map_err(
                |error| super::session::failed(&self.codec, "listen for committed steps", error),
            )?;
            self.listening_for_runs = true;
        }
        Ok(self.changes.clone())
    }
}

impl<C: GenericClient + Sync> Session<'_, C> {
    /// Tells the listeners of `RUNS_CHANNEL`, once the transaction commits, that `runs` (each
    /// named once) were written to: a notification per run, all in one statement.
    pub(super) fn announce_runs(&self, runs: &[&str]) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        self.execute(
            &|| format!("announce the steps of {} run(s)", runs.len()),
            "SELECT pg_notify($1, run)::text FROM unnest($2::text[]) AS run",
            &[&RUNS_CHANNEL, &runs],
        )?;
        Ok(())
    }
}

/// The runs of a batch whose steps or status it writes (a telemetry part, a trace or an applied
/// inbox entry alone changes neither), in their order, each once.
pub(super) fn announced<'a>(writes: &[Planned<'a>]) -> Vec<&'a str> {
    let mut runs: Vec<&'a str> = Vec::new();
    let mut named: HashSet<&str, RandomState> = HashSet::default();
    for write in writes {
        let run = match *write {
            Planned::Step(ref step) => step.run,
            Planned::Other(other) => match other {
                Write::CreateRun(_)
                | Write::Step { .. }
                | Write::MarkStopped { .. }
                | Write::FinishRun { .. }
                | Write::Reopen { .. } => other.run(),
                Write::ApplyInbox { .. } | Write::Telemetry { .. } | Write::Trace { .. } => {
                    continue;
                }
            },
        };
        if named.insert(run) {
            runs.push(run);
        }
    }
    runs
}

/// Hands a notification on `RUNS_CHANNEL` to the store's followers.
pub(super) fn deliver(notification: &tokio_postgres::Notification, changes: &RunChanges) {
    if notification.channel() == RUNS_CHANNEL {
        changes.announce(notification.payload());
    }
}
