//! Runs as tasks in the dialect of the 2025-11-25 specification (SEP-1686), which VS Code and the official SDKs speak: a protocol tool called with `task` answers `CreateTaskResult`; `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` read, wait on, list and cancel the runs the session created so; `notifications/tasks/status` says when one changes status.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ElicitRequestParams, ElicitationAction, ErrorData, JsonObject, MetaObject, RequestMetaObject,
    ServerNotification, TaskStatus,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::tools::tool_result;
use crate::frontends::mcp::waiting::answers::Sent;
use crate::frontends::mcp::waiting::elicitation::{MAX_ELICITATION_ROUNDS, ask_client, request};
use crate::frontends::mcp::waiting::tasks::{POLL_INTERVAL_MILLISECONDS, detailed};

/// The most tasks one `tasks/list` page holds; `nextCursor` leads to the rest.
pub const MAX_TASKS_PER_PAGE: usize = 20;

/// The most tasks a session keeps track of; past it the oldest is forgotten by the session (its
/// run stays, for `get_run` and the other tools).
pub const MAX_SESSION_TASKS: usize = 10_000;

/// How often a blocked `tasks/result`, and a session's status watcher, read its tasks again.
const STATUS_POLL: Duration = Duration::from_millis(100);

/// The `_meta` key that ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The tasks one session created, oldest first: the only ones its task requests reach, as the
/// specification asks (what `tasks/get` reads, `tasks/list` lists), so another session's runs
/// stay out of sight. `watching` says whether its status watcher runs.
#[derive(Clone, Default)]
pub struct SessionTasks(Arc<Mutex<TaskList>>);

#[derive(Default)]
struct TaskList {
    ids: VecDeque<String>,
    watching: bool,
}

impl SessionTasks {
    fn list(&self) -> std::sync::MutexGuard<'_, TaskList> {
        // A panic while the list was held leaves it whole: each change is one push or pop.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a new task; true when the session's watcher must be started.
    fn add(&self, id: &str) -> bool {
        let mut list = self.list();
        list.ids.push_back(id.to_string());
        if list.ids.len() > MAX_SESSION_TASKS {
            list.ids.pop_front();
        }
        !std::mem::replace(&mut list.watching, true)
    }

    fn contains(&self, id: &str) -> bool {
        self.list().ids.iter().any(|known| known == id)
    }

    fn all(&self) -> Vec<String> {
        self.list().ids.iter().cloned().collect()
    }

    /// The page after `cursor` (the last task id of the page before), and the cursor of the
    /// next page if there is one.
    fn page(&self, cursor: Option<&str>) -> Result<(Vec<String>, Option<String>), String> {
        let list = self.list();
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                list.ids.iter().position(|id| id == cursor).ok_or_else(|| {
                    "the cursor is none that tasks/list gave this session (or its task was \
                         forgotten, past MAX_SESSION_TASKS); list again without a cursor"
                        .to_string()
                })? + 1
            }
        };
        let page: Vec<String> = list
            .ids
            .iter()
            .skip(start)
            .take(MAX_TASKS_PER_PAGE)
            .cloned()
            .collect();
        let next = (start + page.len() < list.ids.len())
            .then(|| page.last().cloned())
            .flatten();
        Ok((page, next))
    }

    /// Whether the watcher, which saw the tasks in `seen`, ends: it does unless a task came
    /// that it has not seen (or `always`); then a task added later starts another.
    fn stop_watching(&self, seen: &HashMap<String, TaskStatus>, always: bool) -> bool {
        let mut list = self.list();
        if !always && list.ids.iter().any(|id| !seen.contains_key(id)) {
            return false;
        }
        list.watching = false;
        true
    }
}

/// The 2025-11-25 `Task` a task view (`Host::task_view`) describes: its status as the extension
/// gives it, no ttl (a run is durable), the poll interval the extension asks for.
pub fn specification_task(view: &Value) -> Value {
    let task = detailed(view).task;
    let mut value = json!({
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttl": null,
        "pollInterval": POLL_INTERVAL_MILLISECONDS,
    });
    // The extension's message names its `inputRequests`, which this dialect has not.
    let message = match task.status {
        TaskStatus::InputRequired => Some(waiting_message(&view["report"])),
        _ => task.status_message,
    };
    if let Some(message) = message {
        value["statusMessage"] = Value::from(message);
    }
    value
}

/// What a run waiting for input asks, in this dialect's terms.
fn waiting_message(report: &Value) -> String {
    let events: Vec<String> = report["events"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|event| format!("`{}`", event["name"].as_str().unwrap_or_default()))
        .collect();
    format!(
        "the run waits for one of the events {}: tasks/result asks for it by elicitation, or \
         send_event sends it",
        events.join(", ")
    )
}

/// The `_meta` that ties a message to task `id`.
fn related_task(id: &str) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert(RELATED_TASK.into(), json!({"taskId": id}));
    MetaObject(meta)
}

fn invalid_params(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(
        crate::base::secrets::mask(&message.into()).into_owned(),
        None,
    )
}

/// The `taskId` of a task request's params, checked for its length.
fn task_id(params: &Value) -> Result<String, ErrorData> {
    let id = params["taskId"]
        .as_str()
        .ok_or_else(|| invalid_params("missing `taskId`, the string a task request names"))?;
    crate::frontends::mcp::limits::check_name_argument("taskId", id).map_err(invalid_params)?;
    Ok(id.to_string())
}

impl ProtocolServer {
    /// A request of the 2025-11-25 task dialect (`method` without the `dialect::RENAMED`
    /// prefix), answered as the specification says.
    pub(in crate::frontends::mcp) async fn specification_request(
        &self,
        method: &str,
        params: Value,
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        match method {
            "tools/call" => {
                // rmcp hands a request's `_meta` to its context, not with its params.
                let parent = crate::frontends::mcp::server::trace_parent(
                    context
                        .meta
                        .get_traceparent()
                        .or_else(|| params["_meta"]["traceparent"].as_str()),
                );
                self.create_specification_task(params, &context.peer, parent)
                    .await
            }
            "tasks/get" => Ok(specification_task(&self.session_task(&params).await?.1)),
            "tasks/result" => {
                let elicits = self.elicitation
                    && crate::frontends::mcp::waiting::elicitation::client_elicits(
                        context.client_capabilities(),
                    );
                self.task_result(&params, context, elicits).await
            }
            "tasks/list" => self.list_specification_tasks(&params).await,
            "tasks/cancel" => {
                let (id, _) = self.session_task(&params).await?;
                self.cancel_task(&id).await?;
                let view = self.task_view(&id).await.map_err(invalid_params)?;
                Ok(specification_task(&view))
            }
            _ => Err(ErrorData::method_not_found::<rmcp::model::GetTaskMethod>()),
        }
    }

    /// `tools/call` with `task`: starts a run of the protocol tool and answers it as a task
    /// that begins `working`, as the specification says every task does. Only protocol tools
    /// take `task` (`execution.taskSupport` is `optional` on them and absent on the others).
    async fn create_specification_task(
        &self,
        params: Value,
        peer: &Peer<RoleServer>,
        parent: Option<crate::base::trace_context::TraceParent>,
    ) -> Result<Value, ErrorData> {
        let name = params["name"].as_str().unwrap_or_default().to_string();
        if !self.protocols.contains(&name) {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "tool `{}` cannot be called as a task (only the protocol tools can: their \
                     execution.taskSupport is optional); call it without `task`",
                    name.chars().take(200).collect::<String>()
                ),
                None,
            ));
        }
        let inputs = match &params["arguments"] {
            Value::Null => Map::new(),
            Value::Object(arguments) => arguments.clone(),
            _ => return Err(invalid_params("`arguments` must be an object")),
        };
        let report = self
            .ask(|reply| Request::Start {
                protocol: name,
                inputs,
                parent,
                reply,
            })
            .await
            .map_err(invalid_params)?;
        let run = report["run"].as_str().unwrap_or_default().to_string();
        let view = self.task_view(&run).await.map_err(invalid_params)?;
        let mut task = specification_task(&view);
        task["status"] = json!(TaskStatus::Working);
        task["statusMessage"] = Value::from("the run started");
        if self.session_tasks.add(&run) {
            tokio::spawn(self.clone().watch_statuses(peer.clone()));
        }
        Ok(json!({ "task": task }))
    }

    /// The session's task the params name, with its task view; an id of no task of this
    /// session is invalid params, as the specification says of an unknown one.
    async fn session_task(&self, params: &Value) -> Result<(String, Value), ErrorData> {
        let id = task_id(params)?;
        if !self.session_tasks.contains(&id) {
            return Err(invalid_params(format!(
                "no task `{id}` in this session: tasks/list lists the tasks this session \
                 created; a run started otherwise is read with get_run"
            )));
        }
        let view = self.task_view(&id).await.map_err(invalid_params)?;
        Ok((id, view))
    }

    /// `tasks/list`: the session's tasks, oldest first, `MAX_TASKS_PER_PAGE` a page. A task
    /// whose run is gone from the store is left out.
    async fn list_specification_tasks(&self, params: &Value) -> Result<Value, ErrorData> {
        let cursor = match &params["cursor"] {
            Value::Null => None,
            Value::String(cursor) => Some(cursor.as_str()),
            _ => return Err(invalid_params("`cursor` must be a string tasks/list gave")),
        };
        let (page, next) = self.session_tasks.page(cursor).map_err(invalid_params)?;
        let mut tasks = Vec::new();
        for id in page {
            if let Ok(view) = self.task_view(&id).await {
                tasks.push(specification_task(&view));
            }
        }
        let mut result = json!({ "tasks": tasks });
        if let Some(next) = next {
            result["nextCursor"] = Value::from(next);
        }
        Ok(result)
    }

    /// `tasks/result`: blocks until the task ends, then answers what the plain call would have
    /// (the run's report as the tool's result), tied to the task in its `_meta`. While the run
    /// waits for input, and the client takes elicitation (and `--no-elicitation` is not given),
    /// each event it can take is asked for in turn through an `elicitation/create` tied to the
    /// task; an accepted answer is sent as the event. What it asks is asked once (a declined or
    /// unanswered request is not asked again; `send_event` still answers it), and at most
    /// `MAX_ELICITATION_ROUNDS` times in one `tasks/result`.
    /// The wait ends early when the client cancels the request or its session ends.
    async fn task_result(
        &self,
        params: &Value,
        context: &rmcp::service::RequestContext<RoleServer>,
        elicits: bool,
    ) -> Result<Value, ErrorData> {
        let peer = &context.peer;
        let (id, mut view) = self.session_task(params).await?;
        let mut asked_since = None;
        let mut rounds = 0;
        loop {
            let status = detailed(&view).status();
            if status.is_terminal() {
                let mut result = tool_result(Ok(view["report"].clone()));
                result.meta = Some(related_task(&id));
                let mut result = serde_json::to_value(result).unwrap_or_default();
                // The 2025-11-25 result has no `resultType` (rmcp strips it for such peers).
                if let Value::Object(fields) = &mut result {
                    fields.remove("resultType");
                }
                return Ok(result);
            }
            let since = view["asked_since"].as_u64();
            let ask = elicits
                && status == TaskStatus::InputRequired
                && since.is_some()
                && since != asked_since
                && rounds < MAX_ELICITATION_ROUNDS;
            if ask {
                asked_since = since;
                rounds += 1;
                if self.ask_for_input(peer, &id, &view).await? {
                    // The answer moved the run: what it asks next is asked anew.
                    asked_since = None;
                }
            } else {
                tokio::select! {
                    () = context.ct.cancelled() => {
                        return Err(ErrorData::new(
                            rmcp::model::ErrorCode::INTERNAL_ERROR,
                            format!("tasks/result for `{id}` was cancelled; the task goes on"),
                            None,
                        ));
                    }
                    () = tokio::time::sleep(STATUS_POLL) => {}
                }
            }
            view = self.task_view(&id).await.map_err(invalid_params)?;
        }
    }

    /// Asks the client, through requests tied to task `id`, for each event the run of `view`
    /// can take, until one is accepted and sent; true when the run took it. An answer the run
    /// refused (data off the event's schema) is an error of `tasks/result`, naming why.
    async fn ask_for_input(
        &self,
        peer: &Peer<RoleServer>,
        id: &str,
        view: &Value,
    ) -> Result<bool, ErrorData> {
        let report = &view["report"];
        let since = view["asked_since"].as_u64().unwrap_or_default();
        let events = report["events"].as_array().cloned().unwrap_or_default();
        for event in &events {
            let mut params = request(report, event);
            if let ElicitRequestParams::FormElicitationParams { meta, .. } = &mut params {
                *meta = Some(RequestMetaObject(related_task(id)));
            }
            let Some(answer) = ask_client(peer, params).await else {
                return Ok(false);
            };
            match answer.action {
                ElicitationAction::Accept => {
                    let sent = self
                        .send_answer(id, event, answer.content.as_ref(), since)
                        .await
                        .map_err(invalid_params)?;
                    return Ok(matches!(sent, Sent::Taken(_)));
                }
                ElicitationAction::Decline => continue,
                _ => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Sends `notifications/tasks/status` to the session (`peer`) each time one of its tasks
    /// changes status, until none of them is left unfinished (a task created later starts
    /// another watcher) or the session is gone. The specification has the receiver send these
    /// unasked, to the requestor of the task; it names no way to opt in or out.
    async fn watch_statuses(self, peer: Peer<RoleServer>) {
        let mut last: HashMap<String, TaskStatus> = HashMap::new();
        loop {
            tokio::time::sleep(STATUS_POLL).await;
            let mut unfinished = false;
            for id in self.session_tasks.all() {
                let before = *last.entry(id.clone()).or_insert(TaskStatus::Working);
                if before.is_terminal() {
                    continue;
                }
                let Ok(view) = self.task_view(&id).await else {
                    last.insert(id, TaskStatus::Cancelled);
                    continue;
                };
                let task = specification_task(&view);
                let status = detailed(&view).status();
                unfinished |= !status.is_terminal();
                if status == before {
                    continue;
                }
                last.insert(id, status);
                let notification =
                    rmcp::model::CustomNotification::new("notifications/tasks/status", Some(task));
                let sent = peer
                    .send_notification(ServerNotification::CustomNotification(notification))
                    .await;
                if sent.is_err() {
                    self.session_tasks.stop_watching(&last, true);
                    return;
                }
            }
            // Forgotten tasks are forgotten here too.
            last.retain(|id, _| self.session_tasks.contains(id));
            let gone = peer.is_transport_closed();
            if (gone || !unfinished) && self.session_tasks.stop_watching(&last, gone) {
                return;
            }
        }
    }
}
