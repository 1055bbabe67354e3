//! The MCP requests a session sends (initialize, tools, resources, logging level, tasks in both dialects), each answered through the server's tools and the host thread.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult,
    ErrorCode, GetTaskParams, GetTaskResult, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerConfig,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::frontends::mcp::resources;
use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::tools::tool_result;
use crate::frontends::mcp::waiting::input_required::Answer;

use super::ProtocolServer;

impl ServerHandler for ProtocolServer {
    fn get_info(&self) -> ServerConfig {
        // rmcp names itself by default (`Implementation::from_build_env` is built in rmcp's
        // crate): a client must see this program, and its version.
        ServerConfig::new(crate::frontends::mcp::notices::capabilities())
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
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
        // A run it starts is a child of the caller's trace (`_meta.traceparent`, SEP-414).
        let parent = super::trace_parent(context.meta.get_traceparent());
        if elicits && modern && !as_task {
            let answer = self
                .answer_with_input(
                    &request.name,
                    arguments,
                    request.input_responses,
                    request.request_state,
                    parent,
                )
                .await;
            return Ok(match answer {
                Ok(Answer::InputRequired(input)) => CallToolResponse::InputRequired(input),
                Ok(Answer::Report(report)) => tool_result(Ok(report)).into(),
                Err(message) => tool_result(Err(message)).into(),
            });
        }
        let mut answer = if as_task {
            match self
                .create_task(request.name.to_string(), arguments, parent)
                .await
            {
                Ok(task) => return Ok(CallToolResponse::Task(task)),
                Err(message) => Err(message),
            }
        } else {
            self.call(&request.name, arguments, parent).await
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

    /// The requests of the 2025-11-25 task dialect, renamed by the session's `Dialect` so that
    /// they reach here whole; any other method is not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let Some(method) = request.method.strip_prefix(super::dialect::RENAMED) else {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "no method `{}`",
                    request.method.chars().take(200).collect::<String>()
                ),
                None,
            ));
        };
        let _admitted = self.admit()?;
        let params = request.params.unwrap_or_default();
        self.specification_request(method, params, &context)
            .await
            .map(CustomResult)
    }
}
