//! Durable runs: the `Store` trait (runs, their journal, their latest snapshot) and its records.

pub mod changes;
pub mod choice;
mod codec;
pub mod inbox;
pub mod postgres;
pub mod read_files;
pub mod run_filter;
pub mod shared;
pub mod sqlite;

pub use changes::{RunChanges, RunFollower};
pub use choice::StoreChoice;
pub use inbox::{InboxEntry, InboxRecord, InboxScope, InboxState, TakenInbox};
pub use postgres::PostgresStore;
pub use shared::SharedStore;
pub use sqlite::SqliteStore;

pub use crate::base::durable::{ChildChange, ChildState};
use crate::base::snapshot::Snapshot;

/// A run about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub id: String,
    /// The protocol file as given (callers should pass it canonicalized, so that `--resume` finds
    /// the run whatever the working directory).
    pub protocol_path: String,
    /// The hashes of the files the protocol's load read (`read_files::recorded_hash`): its
    /// own first, alone when it read no other. A changed one is refused on resume.
    pub protocol_hash: String,
    /// The protocol's YAML text, so that a run can be inspected (or diffed) after the file
    /// changed, and resumed with it (pinned). Kept once per content hash, however many runs
    /// share it (`Store::protocol_texts`).
    pub protocol_text: Option<String>,
    /// The texts of the other files its load read (the libraries it imports, its child
    /// protocols and theirs: `read_files::read_texts`), kept as the protocol's is, so that a
    /// resume after one of them changed runs the text the run started with.
    pub read_texts: Vec<std::sync::Arc<str>>,
    /// The bound inputs, by name.
    pub inputs: serde_json::Value,
    pub started_unix_milliseconds: u64,
    /// The operator's narrowing of the protocol's permissions (`--allow-*`, `--no-shell`), so a
    /// resume applies it again; `None` when the operator narrowed nothing.
    pub grants: Option<serde_json::Value>,
    /// The front end that started it, so that the next one of its kind resumes it.
    pub origin: RunOrigin,
    /// Who drives it from its start (`runs::claims`); `None` leaves it unclaimed.
    pub holder: Option<Holder>,
    /// The run and step it was forked from (`protocol-run fork`), if it was.
    pub forked_from: Option<ForkedFrom>,
}

/// Where a forked run started: the state after a step of another run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForkedFrom {
    pub run: String,
    pub step: u64,
}

/// Who holds a run, that is drives it: a process, by the lock file it holds while it lives and
/// the pid that lock file names. Recorded with the run so that every process sees it; whether
/// it still holds the run is `runs::claims`'s to say. A lease with an expiry (a database
/// backend) is one more field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// The front end: `run`, `resume`, `redrive`, `serve` or `mcp`.
    pub process: String,
    pub pid: u32,
    /// The lock file it holds: its host's (`host.lock`) or its run's (`run.lock`).
    pub lock: String,
    /// The lease it holds in a shared store (`Store::renew_lease`), by which hosts on other
    /// machines tell whether it lives; `None` where its lock file tells (one machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// The front end that started a run: a restarted `mcp` server resumes the runs an `mcp`
/// server started, and no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOrigin {
    /// `protocol-run run`.
    Run,
    /// An instance of `protocol-run serve`.
    Serve,
    /// A protocol tool of `protocol-run mcp`.
    Mcp,
    /// A child protocol (an `invoke`, a map's item): its row is written with its parent's
    /// steps, and it runs, stops and resumes with its parent.
    Child,
}

impl RunOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOrigin::Run => "run",
            RunOrigin::Serve => "serve",
            RunOrigin::Mcp => "mcp",
            RunOrigin::Child => "child",
        }
    }

    pub fn parse(text: &str) -> Option<RunOrigin> {
        match text {
            "run" => Some(RunOrigin::Run),
            "serve" => Some(RunOrigin::Serve),
            "mcp" => Some(RunOrigin::Mcp),
            "child" => Some(RunOrigin::Child),
            _ => None,
        }
    }
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Started and not finished: live, or its process died (then it can be resumed).
    Running,
    /// Stopped on purpose (a signal, no events left) with a checkpoint: it can be resumed.
    Stopped,
    /// Ended: a final state, or an error that ends the run.
    Finished,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Stopped => "stopped",
            RunStatus::Finished => "finished",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        match text {
            "running" => Some(RunStatus::Running),
            "stopped" => Some(RunStatus::Stopped),
            "finished" => Some(RunStatus::Finished),
            _ => None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The top-level final state reached; `None` when an error ended the run.
    pub final_state: Option<String>,
    /// The process exit code the run ended with.
    pub exit_code: i32,
    pub output: serde_json::Value,
    pub unix_milliseconds: u64,
}

impl Finish {
    /// The `{event, message, states}` of the unhandled `error.execution` that failed the run
    /// (`errors: strict`), which the store keeps as the output of a run with no final state.
    pub fn unhandled_error(&self) -> Option<&serde_json::Value> {
        let error = self.output.get("error")?;
        (self.final_state.is_none() && error.get("event").is_some_and(|event| event.is_string()))
            .then_some(error)
    }
}

/// One run as `list_runs` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: String,
    pub protocol_path: String,
    pub protocol_hash: String,
    pub status: RunStatus,
    pub started_unix_milliseconds: u64,
    /// The sequence number of the last committed step, if any.
    pub last_sequence: Option<u64>,
    pub last_step_unix_milliseconds: Option<u64>,
    /// Set once the run has finished.
    pub finish: Option<Finish>,
    /// The front end that started it; `None` for a run recorded before origins were.
    pub origin: Option<RunOrigin>,
    /// The process recorded as driving it, if any (it may have died since: `runs::claims`).
    /// Cleared when its holder stops or finishes it.
    pub holder: Option<Holder>,
    /// For a child protocol's row: the run that invoked it (held with it, by its holder).
    pub parent: Option<String>,
    /// The run and step it was forked from, if it was.
    pub forked_from: Option<ForkedFrom>,
    /// How many times it was redriven (`protocol-run redrive`).
    pub redrives: u64,
}

/// Where a page of runs starts: after this run, in the order newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    pub started_unix_milliseconds: u64,
    pub id: String,
}

/// One run with everything recorded when it started.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub summary: RunSummary,
    pub protocol_text: Option<String>,
    pub inputs: serde_json::Value,
    /// The operator's narrowing recorded when the run started (see `NewRun::grants`).
    pub grants: Option<serde_json::Value>,
}

/// The external event a macrostep handled.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEvent {
    pub name: String,
    pub data: serde_json::Value,
}

/// One macrostep, as the journal keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEntry {
    /// Increasing within a run; the start of a run is step 0.
    pub sequence: u64,
    /// `None` for the start (entering the initial configuration).
    pub event: Option<JournalEvent>,
    /// The transitions taken, in order, by their pointer in the protocol (`/states/a/on/go/0`).
    pub transitions: Vec<String>,
    /// What the actions did: outcomes, logs, directives; a summary the driver chooses.
    pub actions: serde_json::Value,
    pub unix_milliseconds: u64,
    /// What became of the run's child protocols in the step; each change is also applied to
    /// the child's own row (`<run id>/<path>`), in the same transaction.
    pub children: Vec<ChildChange>,
}

/// The latest snapshot of a run and the step it was taken after.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSnapshot {
    pub sequence: u64,
    pub unix_milliseconds: u64,
    pub snapshot: Snapshot,
    /// Labels of the secrets the snapshot holds as placeholders (`crate::base::secrets`): a resume
    /// puts their values back (`Snapshot::with_secrets`).
    pub secrets: Vec<String>,
}

/// Boxed causes, so that a store over another database can report its own.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A store operation that failed; each names the database (its file, for SQLite).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{database}: cannot create the directory {directory}: {source}")]
    CreateDirectory {
        database: String,
        directory: String,
        source: std::io::Error,
    },
    #[error("{database}: cannot {operation}: {source}")]
    Database {
        database: String,
        operation: String,
        source: Cause,
    },
    #[error(
        "{database}: cannot {operation}: another process kept the database busy for over {waited_milliseconds} ms"
    )]
    Busy {
        database: String,
        operation: String,
        waited_milliseconds: u64,
    },
    #[error(
        "{database}: the database has schema version {found}, newer than this protocol-run knows ({supported}); use a newer protocol-run"
    )]
    NewerSchema {
        database: String,
        found: i64,
        supported: i64,
    },
    #[error("{database}: there is no run `{run}`")]
    UnknownRun { database: String, run: String },
    #[error("{database}: a run `{run}` already exists")]
    RunExists { database: String, run: String },
    #[error("{database}: run `{run}` has finished; it takes no more steps")]
    RunFinished { database: String, run: String },
    #[error(
        "{database}: run `{run}` is already at step {last}; step {sequence} must come after it"
    )]
    StaleStep {
        database: String,
        run: String,
        sequence: u64,
        last: u64,
    },
    #[error("{database}: {what} {value} is too large to store (at most {max})", max = i64::MAX)]
    OutOfRange {
        database: String,
        what: &'static str,
        value: u64,
    },
    #[error("{database}: cannot encode the {what} of run `{run}`: {source}")]
    Encode {
        database: String,
        run: String,
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("{database}: cannot store the {what} of run `{run}`: {source}")]
    Secret {
        database: String,
        run: String,
        what: &'static str,
        source: crate::base::secrets::AmbiguousPlaceholder,
    },
    #[error(
        "{database}: this host's lease `{host}` ran out (it was not renewed in time: the process \
         was paused, or cut off from the database); its runs may be another host's now, so it \
         writes nothing more"
    )]
    LeaseLost { database: String, host: String },
    #[error(
        "{database}: run `{run}` was taken over by another holder (fencing token {current}; this \
         process held {held}): this process no longer drives it, and its write was refused"
    )]
    Fenced {
        database: String,
        run: String,
        held: i64,
        current: i64,
    },
    #[error(
        "{database}: inbox entry {entry} of run `{run}` is not waiting (it was applied or set \
         aside already): an entry is applied once"
    )]
    InboxEntryNotWaiting {
        database: String,
        run: String,
        entry: u64,
    },
    #[error(
        "{database}: the state of run `{run}` after step {step} was not kept: the step was recorded before protocol-run kept the state of every step"
    )]
    StateNotKept {
        database: String,
        run: String,
        step: u64,
    },
    #[error("{database}: the stored {what} of run `{run}` is damaged: {source}")]
    Corrupt {
        database: String,
        run: String,
        what: &'static str,
        source: Cause,
    },
}

/// Where runs are kept. Writes take `&mut self`; one macrostep is one `commit_step`, all of it
/// or nothing.
///
/// Times are Unix milliseconds chosen by the caller (virtual under virtual time), never read
/// from a clock here.
pub trait Store: Send {
    /// Where the store keeps its data, for messages.
    fn location(&self) -> String;

    /// Records a run that starts; its status is `running`.
    fn create_run(&mut self, run: &NewRun) -> Result<(), StoreError>;

    /// Commits one macrostep atomically: the journal entry, the snapshot after it (replacing the
    /// previous one), and the run's last step. With `finish`, the run is finished in the same
    /// transaction. A `stopped` run that takes a step is `running` again.
    ///
    /// Refuses a step whose sequence is not above the last one, and a finished run.
    fn commit_step(
        &mut self,
        run: &str,
        entry: &JournalEntry,
        snapshot: &Snapshot,
        finish: Option<&Finish>,
    ) -> Result<(), StoreError>;

    /// Keeps each child's state in its own row (`<run>/<path>`): what a step's `child_states`
    /// say. A child with no row is kept in none (a run recorded before children had rows).
    fn commit_child_states(&mut self, run: &str, states: &[ChildState]) -> Result<(), StoreError>;

    /// The snapshot after the run's last committed step, its children's states put back from
    /// their own rows; `None` before its first.
    fn latest_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError>;

    /// One run, with its protocol text and inputs.
    fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Every run, the most recently started first.
    fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError>;

    /// The most recently started run of this protocol path that has not finished (`--resume`).
    fn latest_unfinished_run(&self, protocol_path: &str) -> Result<Option<RunSummary>, StoreError> {
        Ok(self.unfinished_runs(protocol_path, 1)?.pop())
    }

    /// At most `count` runs of the protocol at `protocol_path` that have not finished and are
    /// not children, the most recently started first; the limit is the database's, so a host
    /// looking for runs to take over never reads a large store whole.
    fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError>;

    /// The run's journal in order.
    fn journal(&self, run: &str) -> Result<Vec<JournalEntry>, StoreError>;

    /// The last `count` journal entries, in order (for `status`).
    fn journal_tail(&self, run: &str, count: usize) -> Result<Vec<JournalEntry>, StoreError>;

    /// The last `count` journal entries before step `before`, in order: the journal read back
    /// from its end a page at a time, however long it grew.
    fn journal_before(
        &self,
        run: &str,
        before: u64,
        count: usize,
    ) -> Result<Vec<JournalEntry>, StoreError>;

    /// A graceful stop: the run can be resumed; its holder is released.
    fn mark_stopped(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError>;

    /// A run resumed: `running` again.
    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError>;

    /// Ends a run without a step (an error ended it, or its last step was committed without
    /// `finish`). A finished run is refused.
    fn finish_run(&mut self, run: &str, finish: &Finish) -> Result<(), StoreError>;

    /// Records `holder` as the holder of each of `runs` in one transaction, so that no other
    /// claim slips in between reading a run's holder and replacing it: a run whose recorded
    /// holder is another one that `holds` says still holds it is left to it, and a child
    /// protocol's row is never claimed (it is held with its parent). Returns, for each run in
    /// order, why it was not claimed (`None`: claimed, or no such run). The rule of who may take
    /// a run is `runs::claims`'s; the store only applies it atomically.
    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Vec<Option<Unclaimed>>, StoreError>;

    /// Clears the holder of each of `runs` that `holder` holds: a run claimed, then found unable
    /// to resume, is left for another process to take.
    fn release_runs(&mut self, runs: &[String], holder: &Holder) -> Result<(), StoreError>;

    /// One run's summary, without reading its protocol text, inputs or grants.
    fn run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError>;

    /// At most `count` runs of the protocols at `paths`, newest first (by start, then id),
    /// starting after `after`; the limit is applied by the database, so a store of many runs
    /// is never read whole.
    fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError>;

    /// How many directives the run's journal recorded before step `before`, counted by the
    /// database: the entries are not read into memory.
    fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError>;

    /// The run's own state after its step `step` (redrive, fork and inspection read past
    /// steps; resume reads the last one the same way). Its children's states are not put back
    /// (their rows keep their latest only). `None` when the run has no such step.
    fn snapshot_at(&self, run: &str, step: u64) -> Result<Option<StoredSnapshot>, StoreError>;

    /// Takes, or renews, the lease `host` for `ttl_milliseconds` by the database's clock (never
    /// the caller's): while it lasts, runs whose holder names it are live for every host, and
    /// this store's writes go through; once it has run out it is lost for good
    /// (`StoreError::LeaseLost`), since its runs may have been taken over, and every later
    /// write of this store is refused with it. A store whose holders' liveness is told by lock
    /// files (SQLite, one machine) keeps no lease.
    fn renew_lease(&mut self, host: &str, ttl_milliseconds: u64) -> Result<(), StoreError>;

    /// Deletes at most `count` runs that ended before `before_unix_milliseconds` (a finished
    /// run by its finish, a stopped one by its stop) and whose status is one of `statuses`, with
    /// everything kept of them: journal, states, their children's rows. A running run is never
    /// deleted, nor a child on its own (it goes with the run that records it). The ids deleted,
    /// oldest first: a caller deletes a large backlog a bounded batch at a time.
    fn prune_runs(
        &mut self,
        before_unix_milliseconds: u64,
        statuses: &[RunStatus],
        count: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Stores `event` in `run`'s inbox for the run's holder, durably, before the caller
    /// acknowledges it; its number in the inbox (arrival order: entries of one run are
    /// numbered one after another under the run's row lock). Refused for an unknown or
    /// finished run.
    fn enqueue_event(
        &mut self,
        run: &str,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        self.enqueue(run, inbox::EntryKind::Event, event, data, unix_milliseconds)
    }

    /// Stores a request to cancel `run` in its inbox for the run's holder (`inbox::EntryKind`),
    /// as `enqueue_event` stores an event: its number. Refused for an unknown or finished run.
    fn enqueue_cancel(&mut self, run: &str, unix_milliseconds: u64) -> Result<u64, StoreError> {
        self.enqueue(
            run,
            inbox::EntryKind::Cancel,
            inbox::CANCEL_REQUEST,
            &serde_json::Value::Null,
            unix_milliseconds,
        )
    }

    /// Stores an entry of `kind` in `run`'s inbox (`enqueue_event`, `enqueue_cancel`).
    fn enqueue(
        &mut self,
        run: &str,
        kind: inbox::EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError>;

    /// Takes at most `limit` waiting entries of the runs in `scope` (a protocol's, or one run)
    /// that `holder` holds, oldest first in each run, counting a try for each; an entry already tried `inbox::MAX_TRIES` times is set
    /// aside instead. An entry is applied by a `Write::ApplyInbox` committed with the step
    /// that applied it.
    fn take_inbox(
        &mut self,
        holder: &Holder,
        scope: InboxScope,
        limit: usize,
    ) -> Result<TakenInbox, StoreError>;

    /// Records inbox entry `entry` of `run` applied (`Write::ApplyInbox`), on its own.
    fn apply_inbox(
        &mut self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError>;

    /// Wakes the returned `Notify` whenever an event is queued for a run the host with lease
    /// `host` holds, or an event it queued has an outcome: hosts need not wait for their next
    /// look. `None` where the store cannot tell (hosts then only look now and again).
    fn wake_on_inbox(
        &mut self,
        _host: &str,
    ) -> Result<Option<std::sync::Arc<tokio::sync::Notify>>, StoreError> {
        Ok(None)
    }

    /// The newest `count` entries of `run`'s inbox, newest first, with what became of each.
    fn recent_inbox(&self, run: &str, count: usize) -> Result<Vec<InboxRecord>, StoreError>;

    /// What became of each of `entries` (run, number); an entry the store does not have (its
    /// run was pruned) is left out.
    fn inbox_states(&self, entries: &[(String, u64)]) -> Result<Vec<InboxRecord>, StoreError>;

    /// Commits many writes at once: one transaction (and one sync to disk) for all of them in a
    /// store that can, so a host of many instances pays one commit per batch of steps. Each
    /// write is checked as on its own; if one fails, none is kept. The default applies them one
    /// by one (not atomic), for stores without transactions.
    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        writes.iter().try_for_each(|write| write.apply(self))
    }

    /// The texts kept under `hashes` (`content_hash`), by hash: the protocols, libraries and
    /// child protocols runs started with, each kept once however many runs read it. A hash
    /// whose text is not kept (a run recorded before libraries were kept) is absent.
    fn protocol_texts(
        &self,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError>;

    /// A run that stopped, or failed, is driven again (`protocol-run redrive`) by `holder`:
    /// `running`, its end (final state, exit code, output) cleared, its `redrives` counted, held
    /// by `holder` under a fencing token moved on, which this store keeps. A finished run,
    /// which no claim takes, is claimed so; an unfinished one only by the store that claimed it
    /// (its token checked). Committed with the step that records the redrive (`Write::Reopen`
    /// then a `Write::Step` in one `commit_batch`), so a run is never reopened without it: a
    /// store reopens runs in its `commit_batch`, which must commit a batch at once (a batch
    /// applied write by write refuses it).
    fn reopen_run(
        &mut self,
        run: &str,
        unix_milliseconds: u64,
        holder: &Holder,
    ) -> Result<(), StoreError> {
        self.commit_batch(&[Write::Reopen {
            run: run.to_string(),
            unix_milliseconds,
            holder: holder.clone(),
        }])
    }

    /// Appends a part of a run's telemetry (`Write::Telemetry`: its JSON lines, each ending in
    /// a newline, secrets masked) after the parts kept, whichever process drives the run: a
    /// run's telemetry is the same from every host, and goes with the run when it is pruned.
    fn append_telemetry(&mut self, run: &str, lines: &str) -> Result<(), StoreError>;

    /// The run's telemetry parts, in the order they were appended; none for a run recorded
    /// before telemetry was kept in the store (its `events.jsonl` alone has it).
    fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError>;

    /// Records the trace the run is exported in (`--otlp`: a `runtime::otlp::spans::TraceRecord`
    /// as JSON), so that a resumed or taken-over run goes on in the same trace.
    fn save_trace(&mut self, run: &str, trace: &str) -> Result<(), StoreError>;

    /// The trace recorded with the run (`save_trace`), if any.
    fn trace(&self, run: &str) -> Result<Option<String>, StoreError>;

    /// Word of every run whose steps or status any process commits to this store from now on
    /// (its id), so that a reader following runs is woken rather than looking again and again.
    /// `None` where the store cannot tell (readers then look now and again). Word can be lost
    /// (a connection to the store cut and made again), so a follower still looks now and
    /// again, though seldom.
    fn watch_runs(&mut self) -> Result<Option<RunChanges>, StoreError> {
        Ok(None)
    }
}

/// Why `Store::claim_runs` left a run unclaimed.
#[derive(Debug, Clone, PartialEq)]
pub enum Unclaimed {
    /// Another holder, still live, holds it.
    Held(Holder),
    /// It is a child protocol of `parent`, held with it.
    Child { parent: String },
    /// It has finished: nobody drives it any more.
    Finished,
}

/// One write of a batch (`Store::commit_batch`).
#[derive(Debug, Clone)]
pub enum Write {
    CreateRun(NewRun),
    Step {
        run: String,
        entry: JournalEntry,
        /// Boxed: a snapshot is large, and a batch holds many writes.
        snapshot: Box<Snapshot>,
        finish: Option<Finish>,
        /// The states of the children that stepped, each for its own row.
        child_states: Vec<ChildState>,
    },
    MarkStopped {
        run: String,
        unix_milliseconds: u64,
    },
    FinishRun {
        run: String,
        finish: Finish,
    },
    /// An inbox entry of `run` applied: its outcome and output kept for its sender, the
    /// journal step that consumed it recorded. Refused if the entry is not waiting, so that an
    /// entry is applied once whoever holds the run.
    ApplyInbox {
        run: String,
        entry: u64,
        step: Option<u64>,
        outcome: serde_json::Value,
        output: String,
    },
    /// `Store::reopen_run`.
    Reopen {
        run: String,
        unix_milliseconds: u64,
        holder: Holder,
    },
    /// What the run's telemetry recorded since its last part (`Store::append_telemetry`):
    /// committed with the steps it tells of, so that it is kept exactly when they are.
    Telemetry {
        run: String,
        lines: String,
    },
    /// `Store::save_trace`: the trace a new run is exported in (`--otlp`), recorded in the
    /// batch that creates it, so that a run is never kept without the trace it began.
    Trace {
        run: String,
        trace: String,
    },
}

impl Write {
    /// The write of one macrostep a driver handed over.
    pub fn step(run: String, step: crate::base::durable::CheckpointStep) -> Write {
        // A run that reached its final state finishes once the effects it left running ended.
        let finished = step.snapshot.effects.is_empty();
        let finish = step
            .snapshot
            .outcome
            .as_ref()
            .filter(|_| finished)
            .map(|outcome| Finish {
                final_state: outcome.final_state.clone(),
                exit_code: outcome.exit_code.into(),
                // A failed run's output is the error that failed it.
                output: match &outcome.failure {
                    Some(failure) => serde_json::json!({"error": failure}),
                    None => outcome.output.clone(),
                },
                unix_milliseconds: step.unix_milliseconds,
            });
        let entry = JournalEntry {
            sequence: step.sequence,
            event: step.event.map(|(name, data)| JournalEvent { name, data }),
            transitions: step.transitions,
            actions: step.actions,
            unix_milliseconds: step.unix_milliseconds,
            children: step.children,
        };
        Write::Step {
            run,
            entry,
            snapshot: Box::new(step.snapshot),
            finish,
            child_states: step.child_states,
        }
    }

    /// The write on its own, through the store's single-write methods.
    pub fn apply<S: Store + ?Sized>(&self, store: &mut S) -> Result<(), StoreError> {
        match self {
            Write::CreateRun(run) => store.create_run(run),
            Write::Step {
                run,
                entry,
                snapshot,
                finish,
                child_states,
            } => {
                store.commit_step(run, entry, snapshot, finish.as_ref())?;
                if child_states.is_empty() {
                    return Ok(());
                }
                store.commit_child_states(run, child_states)
            }
            Write::MarkStopped {
                run,
                unix_milliseconds,
            } => store.mark_stopped(run, *unix_milliseconds),
            Write::FinishRun { run, finish } => store.finish_run(run, finish),
            Write::ApplyInbox {
                run,
                entry,
                step,
                outcome,
                output,
            } => store.apply_inbox(run, *entry, *step, outcome, output),
            // Its contract is the step beside it in one transaction, which a store that commits
            // a batch write by write cannot keep.
            Write::Reopen { run, .. } => Err(StoreError::Database {
                database: store.location(),
                operation: format!("reopen run `{run}`"),
                source: "a redrive reopens a run only together with the step that records it, \
                         and this store commits a batch write by write"
                    .into(),
            }),
            Write::Telemetry { run, lines } => store.append_telemetry(run, lines),
            Write::Trace { run, trace } => store.save_trace(run, trace),
        }
    }

    /// The run written to.
    pub fn run(&self) -> &str {
        match self {
            Write::CreateRun(run) => &run.id,
            Write::Step { run, .. }
            | Write::MarkStopped { run, .. }
            | Write::FinishRun { run, .. }
            | Write::ApplyInbox { run, .. }
            | Write::Reopen { run, .. }
            | Write::Telemetry { run, .. }
            | Write::Trace { run, .. } => run,
        }
    }
}

pub use crate::base::read_file::content_hash;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_is_fnv1a_and_sees_one_byte_changes() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(content_hash(""), "fnv1a64:cbf29ce484222325");
        assert_eq!(content_hash("a"), "fnv1a64:af63dc4c8601ec8c");
        assert_ne!(content_hash("id: a\n"), content_hash("id: b\n"));
    }

    #[test]
    fn statuses_round_trip_through_their_names() {
        for status in [RunStatus::Running, RunStatus::Stopped, RunStatus::Finished] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(RunStatus::parse("paused"), None);
    }

    #[test]
    fn origins_round_trip_through_their_names() {
        for origin in [
            RunOrigin::Run,
            RunOrigin::Serve,
            RunOrigin::Mcp,
            RunOrigin::Child,
        ] {
            assert_eq!(RunOrigin::parse(origin.as_str()), Some(origin));
        }
        assert_eq!(RunOrigin::parse("lsp"), None);
    }
}
