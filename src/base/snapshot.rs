//! Snapshots: an instance as names and JSON, independent of the compiled indices: what a store keeps to resume a run.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// The snapshot layout this build writes; `restore` reads it and every older one.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// An instance between two macrosteps, by name: what a store keeps to resume a run.
///
/// `Interpreter::snapshot` fills the algorithm's part (configuration, context, history, running,
/// outcome). The driver fills `timers`, `effects` and `retries`, which only it knows. The
/// internal queue is not kept: it is always empty between macrosteps. Floats that are not finite
/// become `null` (JSON has no NaN).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The layout version, `SNAPSHOT_FORMAT` when written.
    pub format: u32,
    /// The protocol's `id`.
    pub protocol: String,
    /// Ids of the active states in document order, compound and parallel ancestors included.
    pub configuration: Vec<String>,
    /// Context variables by name, in declaration order.
    pub context: serde_json::Map<String, serde_json::Value>,
    /// Recorded history: history state id → ids of the states it restores.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub history: IndexMap<String, Vec<String>>,
    pub running: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SnapshotOutcome>,
    /// Delayed sends and `after` timers not fired yet (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<PendingTimer>,
    /// Effects started whose outcome had not arrived (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<InFlightEffect>,
    /// Retries used so far by effects still retrying (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<RetryCounter>,
    /// Effect invocations started so far, so a resumed run numbers on (filled by the driver).
    #[serde(default)]
    pub invocations: u64,
    /// Child protocols running for `invoke`s, each as its last committed step left it (filled
    /// by the driver), so a resumed parent resumes them where they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildSnapshot>,
    /// Maps whose completion had not been handled: each item's outcome so far and the items
    /// running (among `effects`), opaque to the store (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<serde_json::Value>,
    /// External events waiting in the run's inbox because an active state defers them, in
    /// arrival order (filled by the driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<DeferredEvent>,
}

/// An event waiting in the inbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeferredEvent {
    pub event: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// The child protocol that sent it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_child: Option<String>,
    /// Its sender's number for it (`--events`: the input line), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<u64>,
}

/// A running child protocol in its parent's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSnapshot {
    /// The invoke's id.
    pub id: String,
    /// The child's bound inputs, in its declaration order.
    pub inputs: Vec<serde_json::Value>,
    /// The child's own step count at that snapshot.
    pub sequence: u64,
    /// When that step was committed (Unix milliseconds).
    pub committed_unix_milliseconds: u64,
    /// The child as it was (its own children inside). A durable parent's snapshot leaves it
    /// out: the store keeps it in the child's own row, and puts it back when it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Box<Snapshot>>,
}

/// How the run ended, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOutcome {
    /// The top-level final state; absent when an unhandled error failed the run.
    #[serde(default)]
    pub final_state: Option<String>,
    pub exit_code: u8,
    pub output: serde_json::Value,
    /// The error that failed the run (`errors: strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<SnapshotFailure>,
}

/// An unhandled `error.execution` that ended a run, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotFailure {
    pub event: String,
    pub message: String,
    pub states: Vec<String>,
}

/// A timer waiting for its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingTimer {
    /// The event it sends.
    pub event: String,
    /// The id `cancel` uses (`after.<state>.<index>` for `after` timers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_id: Option<String>,
    /// When it falls due: absolute, so a resumed run can tell which deadlines passed meanwhile.
    pub deadline_unix_milliseconds: u64,
    /// Its whole delay, for a resume that restarts timers.
    #[serde(default)]
    pub delay_milliseconds: u64,
    /// An `after` timer, matched only by its own transition.
    pub private: bool,
    /// Written as a deadline (a timestamp): every resume keeps `deadline_unix_milliseconds`,
    /// whatever its timer policy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub absolute: bool,
    /// The event's data (a `send` may carry some).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

/// An effect that was running when the snapshot was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlightEffect {
    /// The action's id.
    pub action: String,
    /// `exec`, `read_file`, a tool name, ...
    pub kind: String,
    /// The attempt that was running, from 1.
    pub attempt: u32,
    /// Each retrier's own attempt count then, so a resumed plan goes on from there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retriers: Vec<u32>,
    /// The request, opaque to the store: enough for the driver to start it again.
    pub request: serde_json::Value,
    /// Its invocation number in the run.
    #[serde(default)]
    pub invocation: u64,
    /// When it started (Unix milliseconds), for a resumed failure's `elapsed_ms`.
    #[serde(default)]
    pub started_unix_milliseconds: u64,
}

/// Attempts one retrier of one action has used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryCounter {
    pub action: String,
    /// The retrier's index in the action's `retry` list.
    pub retrier: u32,
    pub attempts: u32,
}

impl Snapshot {
    /// The snapshot as one JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The snapshot with the secrets the store masked (`labels`) put back: secret inputs from
    /// `inputs` (as supplied on resume), `env()` values read again (`crate::base::secrets`).
    pub fn with_secrets(
        self,
        labels: &[String],
        inputs: &[(String, String)],
    ) -> Result<Snapshot, String> {
        if labels.is_empty() {
            return Ok(self);
        }
        let mut json = self.to_json();
        crate::base::secrets::restore_json(&mut json, labels, inputs)?;
        serde_json::from_value(json).map_err(|error| error.to_string())
    }
}
