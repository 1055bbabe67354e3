//! What the driver hands a durable store after each macrostep, and what it needs to resume a run.

use crate::base::snapshot::Snapshot;

/// One committed macrostep: the step's journal entry and the state after it.
#[derive(Debug, Clone)]
pub struct CheckpointStep {
    /// 0 for the start, then one per external event handled.
    pub sequence: u64,
    /// The external event handled (`None` for the start): its name and data.
    pub event: Option<(String, serde_json::Value)>,
    /// Transitions taken, by their pointer in the protocol.
    pub transitions: Vec<String>,
    /// What the step's actions did, in order: `{"log", "tags"}`, `{"directive"}`,
    /// `{"effect", "kind"}` for each effect started.
    pub actions: serde_json::Value,
    /// The instance after the step, with the driver's timers and running effects.
    pub snapshot: Snapshot,
    pub unix_milliseconds: u64,
    /// What became of the run's child protocols in the step, theirs included: each child keeps
    /// a row of its own in the store, written with its parent's step.
    pub children: Vec<ChildChange>,
    /// The children (theirs included) that committed a step since the run's last commit, as
    /// they are now: each is kept in its own row, so a child's step costs its parent the size
    /// of that child, not of the whole tree. The snapshot above names them without their state.
    pub child_states: Vec<ChildState>,
}

/// A child protocol's state after a step of its own, for its row (`path` as in `ChildChange`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildState {
    pub path: String,
    pub sequence: u64,
    pub committed_unix_milliseconds: u64,
    /// Its own children named without their state, as its parent's are.
    pub snapshot: crate::base::snapshot::Snapshot,
}

impl ChildState {
    /// The same state seen from the parent of the run it was made in: `below/path`.
    pub fn below(mut self, parent_path: &str) -> ChildState {
        self.path = format!("{parent_path}/{}", self.path);
        self
    }
}

/// A child protocol (an `invoke`, a map's item) started, stepped or ended in its parent's step.
/// `path` names it below the run that records it: its invoke id (`review`, `check[3]`), then its
/// own children's below it (`review/lint`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ChildChange {
    /// The child started (again, if its invoke ran before): its protocol file and recorded
    /// hash, and its inputs as recorded (secret ones masked).
    Started {
        path: String,
        protocol_path: String,
        protocol_hash: String,
        inputs: serde_json::Value,
    },
    /// The child was resumed with its parent: its row is made if it has none (a run recorded
    /// before children had rows), and left as it is otherwise.
    Resumed {
        path: String,
        protocol_path: String,
        protocol_hash: String,
        inputs: serde_json::Value,
    },
    /// The child committed its step `sequence`.
    Stepped { path: String, sequence: u64 },
    /// The child ended: in its final state with its exit code and output, or with no final
    /// state (stopped unfinished, ended by an error, or cancelled when its invoking state exited)
    /// and the exit code saying which.
    Ended {
        path: String,
        final_state: Option<String>,
        exit_code: i32,
        output: serde_json::Value,
    },
}

impl ChildChange {
    /// The exit code of a child stopped before it ended (its invoking state exited, or another
    /// start of the same invoke replaced it), as of a run cancelled on purpose.
    pub const CANCELLED_EXIT_CODE: i32 = 130;

    /// The child of invoke `path` stopped before it ended.
    pub fn cancelled(path: &str) -> ChildChange {
        ChildChange::Ended {
            path: path.to_string(),
            final_state: None,
            exit_code: Self::CANCELLED_EXIT_CODE,
            output: serde_json::Value::Null,
        }
    }

    /// The child it is about, below the run that records it.
    pub fn path(&self) -> &str {
        match self {
            ChildChange::Started { path, .. }
            | ChildChange::Resumed { path, .. }
            | ChildChange::Stepped { path, .. }
            | ChildChange::Ended { path, .. } => path,
        }
    }

    /// The same change seen from the parent of the run it was made in: `below/path`.
    pub fn below(mut self, parent_path: &str) -> ChildChange {
        let (ChildChange::Started { path, .. }
        | ChildChange::Resumed { path, .. }
        | ChildChange::Stepped { path, .. }
        | ChildChange::Ended { path, .. }) = &mut self;
        *path = format!("{parent_path}/{path}");
        self
    }
}

/// Where each macrostep goes before the next begins. A failure stops the run: a durable run that
/// can no longer record its steps must not go on as if it could.
///
/// A checkpoint may hold steps back and commit them together at the next `flush` (one
/// transaction for the steps of a read batch): its driver flushes before it waits for input and
/// before it ends, and tells no one of a step (`Observer::release`) before it was flushed.
pub trait Checkpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String>;

    /// Commits the steps held back, if any; a checkpoint that holds none has nothing to do.
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// The run's telemetry recorded since the last flush (`Observer::take_telemetry`), to be
    /// committed with the steps held back, or at once by a checkpoint that holds none. A
    /// checkpoint whose steps a parent records (a child's) is never given any: its observer
    /// hands its lines to the parent's.
    fn telemetry(&mut self, _lines: String) -> Result<(), String> {
        Ok(())
    }

    /// The run the steps are committed to, by its id in the store: its effects' idempotency
    /// keys start with it. `None` for a checkpoint that commits into another run's steps (a
    /// child's, whose id its link gives).
    fn run_id(&self) -> Option<&str> {
        None
    }

    /// How often the run looks for the events other processes queued for it (the run's inbox
    /// in the store: another host, `protocol-run ui`); `None` for a checkpoint without one.
    fn queued_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// Takes at most `limit` of the events queued for the run, oldest first, counting a try of
    /// each (`Store::take_inbox`).
    fn take_queued(&mut self, _limit: usize) -> Result<TakenQueued, String> {
        Ok(TakenQueued::default())
    }

    /// Records queued event `entry` applied by step `step` (none when it was refused before a
    /// step), with its `outcome`: committed with that step, so that it is applied once.
    fn applied_queued(
        &mut self,
        _entry: u64,
        _step: Option<u64>,
        _outcome: serde_json::Value,
    ) -> Result<(), String> {
        Ok(())
    }
}

/// What a look at a run's inbox took: the events to apply, in order, and why others were set
/// aside (taken too often without being applied).
#[derive(Debug, Default)]
pub struct TakenQueued {
    pub events: Vec<QueuedEvent>,
    pub set_aside: Vec<String>,
}

/// An event (or a cancel request) another process queued for a run, by its number in the
/// run's inbox.
#[derive(Debug)]
pub struct QueuedEvent {
    pub entry: u64,
    /// A request to cancel the run, not an event (`event` names it only).
    pub cancel: bool,
    pub event: String,
    pub data: serde_json::Value,
}

/// How a resumed run re-arms the timers it had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimerPolicy {
    /// At their original deadlines; any that passed while the run was down fire at once.
    #[default]
    Deadline,
    /// With the time they had left when the last step was committed.
    Remaining,
    /// With their whole delay again, from the resume.
    Restart,
}

/// A run to continue from its last committed step.
#[derive(Debug, Clone)]
pub struct Resume {
    pub snapshot: Snapshot,
    /// The sequence number of that step; the next one is this plus one.
    pub sequence: u64,
    /// When that step was committed (Unix milliseconds).
    pub committed_unix_milliseconds: u64,
    pub timers: TimerPolicy,
    /// The child protocols a redrive starts again from their beginning (they had failed, and
    /// the run had not taken their failure yet); none for any other resume.
    pub children_again: Vec<ChildAgain>,
}

/// A child protocol of an `invoke` that a redrive starts again: its invoke's id and the inputs
/// it had, in the child's declaration order (as `ChildSnapshot::inputs`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChildAgain {
    pub id: String,
    pub inputs: Vec<serde_json::Value>,
    /// The invocations the failed child had numbered: the child started again numbers its
    /// effects on from there, so their idempotency keys are new.
    #[serde(default)]
    pub first_invocation: u64,
}
