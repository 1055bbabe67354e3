//! Cancelling a run: its holder does it when a process drives it (a request in its inbox); when none does, it is recorded at once, the processes its effects left stopped.

use std::path::Path;

use crate::base::exit_code;
use crate::runtime::run::stop::Stop;
use crate::runtime::runs::claims::{ClaimError, HolderLock};
use crate::runtime::runs::start::{Refusal, recorded_root};
use crate::store::{RunStatus, Store, StoreError, Write};

/// What a cancel did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// A process holds the run: the request waits in its inbox as entry `entry`, and the
    /// holder cancels the run when it takes it (a holder that ends first leaves it to the
    /// next one).
    Queued { entry: u64 },
    /// No process held the run: it is recorded cancelled now.
    Recorded,
}

impl Cancelled {
    /// What a front end says of it.
    pub fn description(&self, run: &str) -> String {
        match self {
            Cancelled::Queued { entry } => format!(
                "run `{run}` is held by another process: the cancel waits in its inbox as entry \
                 {entry}, and that process cancels it when it takes it"
            ),
            Cancelled::Recorded => format!(
                "run `{run}` cancelled: no process held it; the processes its effects left are \
                 stopped and it is finished with exit code {}",
                crate::runtime::run::stop::CANCELLED_EXIT_CODE
            ),
        }
    }
}

/// Cancels `run` of the store kept under `state_dir` (`protocol-run cancel`, the inspector):
/// claimed here and recorded cancelled when no process holds it, else asked of its holder
/// through its inbox. Refused, saying why, for a run the store does not have, a child
/// protocol's run (its root is cancelled) and a finished run.
pub fn cancel(store: &mut dyn Store, state_dir: &Path, run: &str) -> Result<Cancelled, Refusal> {
    let record = recorded_root(store, run, "cancel")?;
    if record.summary.status == RunStatus::Finished {
        return Err(finished(run));
    }
    let failed = |error: StoreError| Refusal::error(error, exit_code::IO);
    match HolderLock::run(store, state_dir, run, "cancel") {
        // Held here until the cancel is recorded, which releases the run.
        Ok(lock) => {
            let recorded = what_waited(store, lock.holder(), run)
                .and_then(|applied| record_cancelled(store, run, applied));
            if let Err(error) = recorded {
                // Nobody is left holding a run this cancel did not record.
                let _ = store.release_runs(&[run.to_string()], lock.holder());
                return Err(failed(error));
            }
            Ok(Cancelled::Recorded)
        }
        Err(ClaimError::Held { .. } | ClaimError::HostHeld { .. }) => {
            let now = crate::base::clock::unix_milliseconds_now();
            match store.enqueue_cancel(run, now) {
                Ok(entry) => Ok(Cancelled::Queued { entry }),
                // Its holder finished it meanwhile.
                Err(_) if matches!(store.run_summary(run), Ok(Some(summary)) if summary.status == RunStatus::Finished) => {
                    Err(finished(run))
                }
                Err(error) => Err(failed(error)),
            }
        }
        Err(ClaimError::Finished { .. }) => Err(finished(run)),
        Err(error) => {
            let code = error.exit_code();
            Err(Refusal::error(error, code))
        }
    }
}

fn finished(run: &str) -> Refusal {
    Refusal::error(
        format!("run `{run}` has finished: there is nothing to cancel"),
        exit_code::USAGE,
    )
}

/// What waits in the inbox of `run`, which `holder` has claimed, applied as the cancel leaves
/// it: an earlier cancel request taken as this one, an event discarded (the run never takes
/// it). Nothing is left waiting on a cancelled run.
fn what_waited(
    store: &mut dyn Store,
    holder: &crate::store::Holder,
    run: &str,
) -> Result<Vec<Write>, StoreError> {
    // One take: entries stay waiting until the commit that applies them, so a second take
    // would find the same ones again.
    let taken = store.take_inbox(holder, crate::store::InboxScope::Run(run), TAKE_LIMIT)?;
    Ok(taken
        .entries
        .into_iter()
        .map(|entry| Write::ApplyInbox {
            run: run.to_string(),
            entry: entry.entry,
            step: None,
            outcome: match entry.kind {
                crate::store::inbox::EntryKind::Cancel => request_outcome(),
                crate::store::inbox::EntryKind::Event => after_cancel_outcome(&entry.event),
            },
            output: String::new(),
        })
        .collect())
}

/// The most inbox entries a cancel applies with it; more (a flood queued for a run nobody
/// held) stay waiting on the finished run, which takes no more.
const TAKE_LIMIT: usize = 10_000;

/// Records `run`, which this process holds and no longer drives, cancelled: the processes its
/// last committed step lists as running (its children's too) are stopped first, then its stop,
/// its finish with `CANCELLED_EXIT_CODE` and `more` (the inbox entry that asked for it) are
/// committed in one batch, which releases it.
pub fn record_cancelled(
    store: &mut dyn Store,
    run: &str,
    more: Vec<Write>,
) -> Result<(), StoreError> {
    if let Some(stored) = store.latest_snapshot(run)? {
        crate::runtime::run::session::stop_processes_left_by(&stored.snapshot);
    }
    let mut writes = Stop::Cancel.writes(run, crate::base::clock::unix_milliseconds_now());
    writes.extend(more);
    store.commit_batch(&writes)
}

/// The outcome an inbox cancel request is applied with.
pub fn request_outcome() -> serde_json::Value {
    serde_json::json!({
        "event": crate::store::inbox::CANCEL_REQUEST,
        "outcome": "cancelled",
        "reason": "the run was cancelled: its effects and children stopped",
    })
}

/// The outcome of an inbox entry left behind a cancel request in the same look.
pub fn after_cancel_outcome(event: &str) -> serde_json::Value {
    serde_json::json!({
        "event": event,
        "outcome": "discarded",
        "reason": "the run was cancelled before it took this event",
    })
}
