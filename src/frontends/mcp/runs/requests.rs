//! What a tool asks the host thread (`Request`), and the operator's choices the host runs under (`HostSettings`).

use std::path::PathBuf;

use serde_json::{Map, Value};
use tokio::sync::{broadcast, oneshot};

use crate::store::SharedStore;

/// A request from a tool, answered with a JSON report or an error the client reads.
pub enum Request {
    Start {
        protocol: String,
        inputs: Map<String, Value>,
        /// The `traceparent` of the call's `_meta`: with `--otlp`, the run's trace is a child
        /// of it.
        parent: Option<crate::base::trace_context::TraceParent>,
        reply: Reply,
    },
    SendEvent {
        run: String,
        event: String,
        data: Option<Value>,
        /// For an answer to the input request keyed `EVENT@STEP`: its step. The event is sent
        /// only while that request stands (`check_request_stands`), checked here, on the
        /// host's thread, so no other event slips in between.
        expected_step: Option<u64>,
        reply: Reply,
    },
    /// Waits until the run is in `state` (or ended, or `timeout` passed), then answers its
    /// report with how the wait ended.
    WaitForState {
        run: String,
        state: String,
        timeout: Option<Value>,
        reply: Reply,
    },
    GetRun {
        run: String,
        reply: Reply,
    },
    /// A page of runs: at most `count`, after the run `after`.
    ListRuns {
        after: Option<String>,
        count: usize,
        reply: Reply,
    },
    CancelRun {
        run: String,
        reply: Reply,
    },
    ResumeRun {
        run: String,
        reply: Reply,
    },
    RedriveRun {
        run: String,
        reply: Reply,
    },
    GetLogs {
        run: String,
        tag: Option<String>,
        level: Option<String>,
        reply: Reply,
    },
    GetDiagram {
        run: String,
        reply: Reply,
    },
    /// A run as a task: its report, and when it started and last changed.
    GetTask {
        run: String,
        reply: Reply,
    },
}

/// Where a request's answer goes.
pub(in crate::frontends::mcp) type Reply = oneshot::Sender<Result<Value, String>>;

pub use crate::runtime::run::stop::CANCELLED_EXIT_CODE;

/// What the host runs under: the operator's choices.
pub struct HostSettings {
    pub state_dir: PathBuf,
    /// The server's one store connection, which every run and every read shares.
    pub store: SharedStore,
    /// What each run this server drives records as its holder: the server, by its host lock.
    pub holder: crate::store::Holder,
    /// The most runs driven at once (`--max-live-runs`): a start or a resume past it is
    /// refused, naming it.
    pub max_live_runs: usize,
    pub narrowing: crate::effects::capabilities::Capabilities,
    /// The operator's narrowing as its flags gave it: which kinds of grant it narrows.
    pub narrowing_permissions: crate::base::model::Permissions,
    /// The inputs the operator pinned (`--input`): each protocol takes those it declares.
    pub pinned: crate::runtime::runs::grants::PinnedInputs,
    pub recorded_grants: Option<Value>,
    pub limits: crate::runtime::run::algorithm::Limits,
    /// Where each directive goes as it is committed, with its run id: the server turns them
    /// into notifications for the client.
    pub notices: broadcast::Sender<(String, Value)>,
    /// Whether the runs earlier servers left are resumed at start (`--no-resume` leaves them
    /// for `resume_run`).
    pub resume: bool,
    /// Whether a plain call that leaves a run waiting for input asks the client for the event
    /// by elicitation, when the client can answer it.
    pub elicitation: bool,
    /// On a shared store (PostgreSQL), how the server works beside other hosts; `None` when it
    /// is the store's only host.
    pub shared: Option<SharedHosting>,
    /// How often each run's fleet looks at its inbox without being woken (`--inbox-poll`):
    /// other processes (another host, `protocol-run ui`) queue events there.
    pub inbox_poll: std::time::Duration,
    /// With `--otlp`, where every run's trace goes: one exporter for the server.
    pub otlp: Option<std::sync::Arc<crate::runtime::otlp::Export>>,
}

/// How an MCP server on a shared store works beside other hosts: it queues events for the runs
/// they hold, takes their queued events for its own runs, and takes over the runs of one that
/// died.
#[derive(Debug, Clone, Copy)]
pub struct SharedHosting {
    /// How often it looks for runs whose host died (half a lease).
    pub takeover_every: std::time::Duration,
}
