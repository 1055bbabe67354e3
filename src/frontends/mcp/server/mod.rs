//! The MCP side: each served protocol a tool that starts a run, and the tools that drive runs, answered by the host thread.

use std::path::Path;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::Tool;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::frontends::mcp::limits::InFlight;
use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::tools::{management_tools, optional_text_argument, text_argument};

pub mod dialect;
mod handler;

/// The server a client talks to: the tools, and the channel to the host that runs them.
#[derive(Clone)]
pub struct ProtocolServer {
    tools: Arc<Vec<Tool>>,
    /// Names of the tools that start a protocol's run.
    pub(in crate::frontends::mcp) protocols: Arc<Vec<String>>,
    /// Each protocol's YAML, for its resource.
    texts: Arc<Vec<crate::frontends::mcp::resources::ProtocolText>>,
    requests: mpsc::Sender<Request>,
    /// Directives as they are committed, with their run ids.
    notices: broadcast::Sender<(String, Value)>,
    /// This session's `logging/setLevel`.
    least_level: crate::frontends::mcp::notices::LeastLevel,
    /// Where runs are recorded, for their telemetry: the host's store (each read takes it for
    /// its own length) and the state directory's telemetry files.
    store: crate::store::SharedStore,
    state_dir: Arc<Path>,
    /// This session's requests in flight (`for_session` gives each session its own).
    in_flight: InFlight,
    /// Whether a plain call that leaves a run waiting for input asks a client that can
    /// answer elicitation for the event (`--no-elicitation` turns it off).
    pub(in crate::frontends::mcp) elicitation: bool,
    /// The runs this session created as tasks of the 2025-11-25 dialect (`for_session` gives
    /// each session its own).
    pub(in crate::frontends::mcp) session_tasks:
        crate::frontends::mcp::waiting::specification_tasks::SessionTasks,
}

/// A protocol as its tool: its id, what it does, the schema of its inputs.
pub struct ProtocolTool {
    pub id: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
    /// Its YAML and title, for its resource.
    pub text: crate::frontends::mcp::resources::ProtocolText,
}

impl ProtocolServer {
    pub fn new(
        protocols: Vec<ProtocolTool>,
        requests: mpsc::Sender<Request>,
        notices: broadcast::Sender<(String, Value)>,
        store: crate::store::SharedStore,
        state_dir: &Path,
        elicitation: bool,
    ) -> ProtocolServer {
        let names = protocols
            .iter()
            .map(|protocol| protocol.id.clone())
            .collect();
        let mut tools = Vec::new();
        let mut texts = Vec::new();
        for protocol in protocols {
            tools.push(Tool::new(
                protocol.id,
                protocol.description,
                Arc::new(protocol.input_schema),
            ));
            texts.push(protocol.text);
        }
        tools.extend(management_tools());
        ProtocolServer {
            tools: Arc::new(tools),
            protocols: Arc::new(names),
            texts: Arc::new(texts),
            requests,
            notices,
            least_level: crate::frontends::mcp::notices::LeastLevel::default(),
            store,
            state_dir: Arc::from(state_dir),
            in_flight: InFlight::default(),
            elicitation,
            session_tasks: Default::default(),
        }
    }

    /// The same server for a new client session: the same tools and runs, its own log level,
    /// its own count of requests in flight and its own tasks.
    pub fn for_session(&self) -> ProtocolServer {
        ProtocolServer {
            least_level: crate::frontends::mcp::notices::LeastLevel::default(),
            in_flight: InFlight::default(),
            session_tasks: Default::default(),
            ..self.clone()
        }
    }

    /// The names of the tools that start runs.
    pub fn protocol_names(&self) -> Arc<Vec<String>> {
        self.protocols.clone()
    }

    /// A recorded run's telemetry, read from the store and its telemetry file off the
    /// runtime's thread (the host is not asked: a run need not be live to have telemetry).
    async fn telemetry(&self, run: &str) -> Result<Value, String> {
        let state_dir = self.state_dir.clone();
        let store = self.store.clone();
        let served: Vec<String> = self.texts.iter().map(|text| text.path.clone()).collect();
        let run = run.to_string();
        tokio::task::spawn_blocking(move || {
            crate::frontends::mcp::telemetry::read(&store, &state_dir, &served, &run)
        })
        .await
        .map_err(|error| format!("the telemetry could not be read: {error}"))?
    }

    /// Hands a request to the host and waits for its answer. The client's request that
    /// asks was admitted once, by the handler (`admit`), for all the asking it does.
    pub(super) async fn ask(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<Value, String>>) -> Request,
    ) -> Result<Value, String> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(request(reply))
            .await
            .map_err(|_| "the server is stopping".to_string())?;
        answer
            .await
            .map_err(|_| "the server is stopping".to_string())?
    }

    /// A place for one more request of this session, held while it is answered, or the
    /// refusal naming `MAX_REQUESTS_IN_FLIGHT`, as a JSON-RPC error: an invalid request, since
    /// the client sent more than it may at once.
    fn admit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ErrorData> {
        self.in_flight
            .admit()
            .map_err(|message| ErrorData::invalid_request(message, None))
    }

    pub(super) async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        parent: Option<crate::base::trace_context::TraceParent>,
    ) -> Result<Value, String> {
        if self.protocols.iter().any(|protocol| protocol == name) {
            let protocol = name.to_string();
            return self
                .ask(|reply| Request::Start {
                    protocol,
                    inputs: arguments,
                    parent,
                    reply,
                })
                .await;
        }
        match name {
            "send_event" => {
                let run = text_argument(&arguments, "run")?;
                let event = text_argument(&arguments, "event")?;
                let data = arguments.get("data").cloned();
                self.ask(|reply| Request::SendEvent {
                    run,
                    event,
                    data,
                    expected_step: None,
                    reply,
                })
                .await
            }
            "wait_for_state" => {
                let run = text_argument(&arguments, "run")?;
                let state = text_argument(&arguments, "state")?;
                let timeout = arguments.get("timeout").cloned();
                self.ask(|reply| Request::WaitForState {
                    run,
                    state,
                    timeout,
                    reply,
                })
                .await
            }
            "get_run" => {
                let run = text_argument(&arguments, "run")?;
                self.ask(|reply| Request::GetRun { run, reply }).await
            }
            "list_runs" => {
                let after = optional_text_argument(&arguments, "after")?;
                self.ask(|reply| Request::ListRuns {
                    after,
                    count: crate::frontends::mcp::runs::records::MAX_RUNS_PER_PAGE,
                    reply,
                })
                .await
            }
            "cancel_run" => {
                let run = text_argument(&arguments, "run")?;
                self.ask(|reply| Request::CancelRun { run, reply }).await
            }
            "resume_run" => {
                let run = text_argument(&arguments, "run")?;
                self.ask(|reply| Request::ResumeRun { run, reply }).await
            }
            "redrive_run" => {
                let run = text_argument(&arguments, "run")?;
                self.ask(|reply| Request::RedriveRun { run, reply }).await
            }
            "get_logs" => {
                let run = text_argument(&arguments, "run")?;
                let tag = optional_text_argument(&arguments, "tag")?;
                let level = optional_text_argument(&arguments, "level")?;
                self.ask(|reply| Request::GetLogs {
                    run,
                    tag,
                    level,
                    reply,
                })
                .await
            }
            "get_diagram" => {
                let run = text_argument(&arguments, "run")?;
                self.ask(|reply| Request::GetDiagram { run, reply }).await
            }
            _ => Err(format!("no tool `{name}`")),
        }
    }
}

/// The parent a tool call's `_meta.traceparent` names (W3C Trace Context, as SEP-414 reserves
/// the key). One that does not parse is ignored, as the W3C specification says, and warned of.
pub(in crate::frontends::mcp) fn trace_parent(
    text: Option<&str>,
) -> Option<crate::base::trace_context::TraceParent> {
    let text = text?;
    let parent = crate::base::trace_context::TraceParent::parse(text);
    if parent.is_none() {
        eprintln!(
            "warning: a tool call's _meta.traceparent {:?} is not a W3C traceparent \
             (00-TRACE_ID-SPAN_ID-FLAGS, 32 and 16 hex digits); its run starts a trace of its own",
            text.chars().take(100).collect::<String>()
        );
    }
    parent
}
