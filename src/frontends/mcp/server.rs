//! The MCP side: each served protocol a tool that starts a run, and the tools that drive runs, answered by the host thread.

use std::path::Path;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::frontends::mcp::limits::InFlight;
use crate::frontends::mcp::resources;
use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::waiting::input_required::Answer;

/// The server a client talks to: the tools, and the channel to the host that runs them.
#[derive(Clone)]
pub struct ProtocolServer {
    tools: Arc<Vec<Tool>>,
    /// Names of the tools that start a protocol's run.
    protocols: Arc<Vec<String>>,
    /// Each protocol's YAML, for its resource.
    texts: Arc<Vec<crate::frontends::mcp::resources::ProtocolText>>,
    requests: mpsc::Sender<Request>,
    /// Directives as they are committed, with their run ids.
    notices: broadcast::Sender<(String, Value)>,
    /// This session's `logging/setLevel`.
    least_level: crate::frontends::mcp::notices::LeastLevel,
    /// Where runs are recorded, for their telemetry.
    state_dir: Arc<Path>,
    /// This session's requests in flight (`for_session` gives each session its own).
    in_flight: InFlight,
    /// Whether a plain call that leaves a run waiting for input asks a client that can
    /// answer elicitation for the event (`--no-elicitation` turns it off).
    elicitation: bool,
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
            state_dir: Arc::from(state_dir),
            in_flight: InFlight::default(),
            elicitation,
        }
    }

    /// The same server for a new client session: the same tools and runs, its own log level
    /// and its own count of requests in flight.
    pub fn for_session(&self) -> ProtocolServer {
        ProtocolServer {
            least_level: crate::frontends::mcp::notices::LeastLevel::default(),
            in_flight: InFlight::default(),
            ..self.clone()
        }
    }

    /// A recorded run's telemetry, read from the store and its telemetry file off the
    /// runtime's thread (the host is not asked: a run need not be live to have telemetry).
    async fn telemetry(&self, run: &str) -> Result<Value, String> {
        let state_dir = self.state_dir.clone();
        let served: Vec<String> = self.texts.iter().map(|text| text.path.clone()).collect();
        let run = run.to_string();
        tokio::task::spawn_blocking(move || {
            crate::frontends::mcp::telemetry::read(&state_dir, &served, &run)
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
    ) -> Result<Value, String> {
        if self.protocols.iter().any(|protocol| protocol == name) {
            let protocol = name.to_string();
            return self
                .ask(|reply| Request::Start {
                    protocol,
                    inputs: arguments,
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

/// A tool's answer as its result: the report, or the error (secrets masked) as a tool error.
fn tool_result(answer: Result<Value, String>) -> CallToolResult {
    match answer {
        Ok(report) => CallToolResult::structured(report),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(
            crate::base::secrets::mask(&message),
        )]),
    }
}

/// A required string argument, or the error naming it.
fn text_argument(arguments: &Map<String, Value>, name: &str) -> Result<String, String> {
    match arguments.get(name) {
        Some(Value::String(text)) => {
            crate::frontends::mcp::limits::check_name_argument(name, text)?;
            Ok(text.clone())
        }
        // Named by its type: the value itself may be as large as a message.
        Some(other) => Err(format!(
            "argument `{name}` must be a string, not {}",
            crate::base::value::Value::from_json(other).type_name()
        )),
        None => Err(format!("missing argument `{name}`")),
    }
}

/// An optional string argument, or the error naming it.
fn optional_text_argument(
    arguments: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>, String> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => text_argument(arguments, name).map(Some),
    }
}

/// `send_event`, `get_run`, `list_runs`, `cancel_run`, `resume_run`, `get_logs`,
/// `get_diagram`.
fn management_tools() -> Vec<Tool> {
    let schema = |value: Value| match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    };
    let run = json!({"type": "string", "description": "The run id a protocol's tool returned"});
    let run_only = schema(json!({
        "type": "object",
        "properties": {"run": run},
        "required": ["run"],
        "additionalProperties": false,
    }));
    vec![
        Tool::new(
            "send_event",
            "Send an event to a run; returns its new states, the directives emitted so far and \
             the events it can take now",
            schema(json!({
                "type": "object",
                "properties": {
                    "run": run,
                    "event": {"type": "string", "description": "One of the run's `events`"},
                    "data": {"description": "The event's data, as its data_schema says"},
                },
                "required": ["run", "event"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            "wait_for_state",
            "Wait until a run is in a state (or has ended, or the timeout passed); returns its \
             report with `awaited`: reached, ended or timed_out. Events sent to the run meanwhile \
             wait their turn",
            schema(json!({
                "type": "object",
                "properties": {
                    "run": run,
                    "state": {"type": "string", "description": "A state id of the run's protocol"},
                    "timeout": {"type": "string",
                                "description": "At most this long (wall clock), e.g. \"30s\"; 60s by default, a day at most"},
                },
                "required": ["run", "state"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            "get_run",
            "A run's status, states, directives and the events it can take now",
            run_only.clone(),
        ),
        Tool::new(
            "list_runs",
            "The recorded runs of the protocols this server serves, newest first, 1000 at a \
             time: `{runs, truncated, next}`; call again with `after` set to `next` for the \
             following page",
            schema(json!({
                "type": "object",
                "properties": {
                    "after": {"type": "string",
                              "description": "The `next` of the previous page"},
                },
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            "cancel_run",
            "Cancel a live run: its effects and child protocols are stopped (their processes \
             killed) and it is recorded finished, exit code 130; it cannot be resumed",
            run_only.clone(),
        ),
        Tool::new(
            "resume_run",
            "Resume a run no server is driving (stopped, or left by a server that died) from \
             its last committed step; returns its report",
            run_only.clone(),
        ),
        Tool::new(
            "get_logs",
            "A live run's latest log lines (at most 1000), oldest first, filtered by tag and by \
             least level",
            schema(json!({
                "type": "object",
                "properties": {
                    "run": run,
                    "tag": {"type": "string", "description": "Only lines carrying this tag"},
                    "level": {"enum": ["debug", "info", "warn", "error"],
                              "description": "Only lines at this level or above"},
                },
                "required": ["run"],
                "additionalProperties": false,
            })),
        ),
        Tool::new(
            "get_diagram",
            "A live run's protocol as a Mermaid stateDiagram-v2, its active states in the \
             `active` class",
            run_only,
        ),
    ]
}

impl ServerHandler for ProtocolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(crate::frontends::mcp::notices::capabilities()).with_instructions(
            "Each protocol tool starts a run and returns its id, states, directives and the \
             events it can take now; drive it with send_event and watch it with get_run.",
        )
    }

    /// From now on, every directive a run emits reaches the client as a log message whose
    /// logger is the run id, as it is committed.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tokio::spawn(crate::frontends::mcp::notices::forward(
            self.notices.subscribe(),
            context.peer,
            self.least_level.clone(),
        ));
    }

    /// Declaring the logging capability promises this: directives below the level are not sent.
    #[expect(
        deprecated,
        reason = "logging is deprecated by SEP-2577; see notices.rs"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.least_level.set(&request);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let _admitted = self.admit()?;
        let runs = self
            .ask(|reply| Request::ListRuns {
                after: None,
                count: resources::MAX_LISTED_RUNS,
                reply,
            })
            .await
            .map_err(|message| ErrorData::internal_error(message, None))?;
        Ok(ListResourcesResult::with_all_items(resources::list(
            &self.texts,
            &runs,
        )))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let _admitted = self.admit()?;
        let uri = request.uri;
        let not_found = |message| ErrorData::resource_not_found(message, None);
        let contents = match resources::parse(&uri).map_err(not_found)? {
            resources::Named::Protocol(id) => {
                resources::protocol_contents(&self.texts, id, &uri).map_err(not_found)?
            }
            resources::Named::Run(run) => {
                let run = run.to_string();
                self.ask(|reply| Request::GetRun { run, reply })
                    .await
                    .map(|report| resources::run_contents(&report, &uri))
                    .map_err(resources::read_error)?
            }
            resources::Named::Telemetry(run) => self
                .telemetry(run)
                .await
                .map(|telemetry| resources::run_contents(&telemetry, &uri))
                .map_err(resources::read_error)?,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // One place for the whole call: the run it starts or moves, the wait for its effects,
        // and the elicitation it waits on (at most ELICITATION_TIMEOUT a request).
        let _admitted = match self.in_flight.admit() {
            Ok(admitted) => admitted,
            Err(message) => return Ok(tool_result(Err(message)).into()),
        };
        let arguments = request.arguments.unwrap_or_default();
        let starts_run = self
            .protocols
            .iter()
            .any(|protocol| *protocol == request.name);
        // Only a request that declares the tasks extension itself (its `_meta`, the 2026-07-28
        // envelope) gets a task: clients that declare it at initialize of an earlier revision
        // (the MCP Inspector does, by default) take the extension to be ignored there.
        let tasks = context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let moves_run = starts_run || request.name == "send_event";
        let elicits = self.elicitation
            && moves_run
            && crate::frontends::mcp::waiting::elicitation::client_elicits(
                context.client_capabilities(),
            );
        // 2026-07-28 forbids server requests: such a client is asked by the call's result.
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let as_task = starts_run && tasks;
        if elicits && modern && !as_task {
            let answer = self
                .answer_with_input(
                    &request.name,
                    arguments,
                    request.input_responses,
                    request.request_state,
                )
                .await;
            return Ok(match answer {
                Ok(Answer::InputRequired(input)) => CallToolResponse::InputRequired(input),
                Ok(Answer::Report(report)) => tool_result(Ok(report)).into(),
                Err(message) => tool_result(Err(message)).into(),
            });
        }
        let mut answer = if as_task {
            match self.create_task(request.name.to_string(), arguments).await {
                Ok(task) => return Ok(CallToolResponse::Task(task)),
                Err(message) => Err(message),
            }
        } else {
            self.call(&request.name, arguments).await
        };
        if elicits && let Ok(report) = answer {
            answer = self.elicit(&context.peer, report).await;
        }
        Ok(tool_result(answer).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let _admitted = self.admit()?;
        let (_, task) = self.task(&request.task_id).await?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let _admitted = self.admit()?;
        self.update_task(request).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let _admitted = self.admit()?;
        self.cancel_task(&request.task_id).await
    }
}
