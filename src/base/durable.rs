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
}

/// Where each macrostep goes before the next begins. A failure stops the run: a durable run that
/// can no longer record its steps must not go on as if it could.
pub trait Checkpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String>;
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
}
