//! Runs as MCP tasks (the Tasks extension, SEP-2663): a protocol tool called with the extension answers a task whose id is the run id, and `tasks/get`, `tasks/update`, `tasks/cancel` read and drive the run.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ElicitRequest, ErrorCode, InputRequest,
    InputRequests, JsonObject, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use serde_json::{Map, Value, json};

use crate::frontends::mcp::runs::host::{CANCELLED_EXIT_CODE, Host, Request};
use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::waiting::answers::Delivery;
use crate::store::Store;

/// How often a client is asked to poll `tasks/get`: a run's steps take milliseconds, its
/// waits (effects, timers, the client's own answers) seconds and more.
pub const POLL_INTERVAL_MILLISECONDS: u64 = 500;

impl Host {
    /// A run as a task: `{report, created, updated, step, asked_since, finish, not_live}`, its
    /// times in Unix milliseconds and its latest committed step from the store, so a run this
    /// server does not drive (recorded by an earlier one) is a task too. `asked_since` keys a
    /// live run's input requests; `not_live` says why a run is not live here, and whether
    /// `resume_run` can resume it.
    pub(in crate::frontends::mcp) fn task_view(&self, run: &str) -> Result<Value, String> {
        // The connection is taken for each read alone: `get_run` below takes it too.
        let summary = crate::frontends::mcp::runs::records::served_summary(
            &**self.settings.store.lock(),
            &self.served_paths(),
            run,
        )?
        .ok_or_else(|| format!("no task `{run}`: no run has this id; list_runs lists them"))?;
        let summary = &summary;
        let updated = summary
            .finish
            .as_ref()
            .map(|finish| finish.unix_milliseconds)
            .or(summary.last_step_unix_milliseconds)
            .unwrap_or(summary.started_unix_milliseconds);
        let finish = summary.finish.as_ref().map(|finish| {
            json!({
                "state": finish.final_state,
                "exit_code": finish.exit_code,
                "output": finish.output,
            })
        });
        let report = self.get_run(run)?;
        let step = summary.last_sequence.unwrap_or(0);
        let asked_since = match self.runs.get(run) {
            Some(live) if report["status"] == "running" => {
                Some(live.view.borrow_mut().request_step(&report["events"], step))
            }
            _ => None,
        };
        let not_live = match self.runs.get(run) {
            // The whole record (protocol text, inputs) only where resuming is in question.
            None if summary.finish.is_none() => self
                .settings
                .store
                .run(run)
                .map_err(|error| error.to_string())?
                .map(|record| self.not_live_reason(&record)),
            _ => None,
        };
        Ok(json!({
            "report": report,
            "created": summary.started_unix_milliseconds,
            "updated": updated,
            "step": step,
            "asked_since": asked_since,
            "finish": finish,
            "not_live": not_live,
        }))
    }
}

impl Host {
    /// Why a recorded run that has not finished is not live here, for its task's status
    /// message: what keeps it from resuming here (as `resume_run` would say), or that
    /// `resume_run` resumes it.
    fn not_live_reason(&self, record: &crate::store::RunRecord) -> String {
        let status = record.summary.status.as_str();
        let not_live = format!("the run is {status} and not live in this server");
        match self.resumable(record) {
            Err(why) => format!("{not_live}: {}", crate::base::secrets::mask(&why)),
            Ok(_) if record.summary.status == crate::store::RunStatus::Running => {
                format!("{not_live}; resume_run resumes it here unless another process drives it")
            }
            Ok(_) => format!("{not_live}; resume_run resumes it"),
        }
    }
}

/// The task a `task_view` describes. Its status comes from the run: `working` while an effect,
/// a child or a timer will move it; `input_required` while it waits for an event it can take
/// (one elicitation request per event); `completed` once it finished with exit code 0;
/// `failed` once an error ended it or it finished with another code; `cancelled` after
/// `cancel_run` or `tasks/cancel`.
pub fn detailed(view: &Value) -> DetailedTask {
    let report = &view["report"];
    let run = report["run"].as_str().unwrap_or_default();
    let milliseconds =
        |field: &str| crate::base::clock::format_rfc3339(view[field].as_u64().unwrap_or(0));
    let mut task = Task::new(
        run,
        TaskStatus::Working,
        milliseconds("created"),
        milliseconds("updated"),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MILLISECONDS);
    let (payload, message) = payload(view);
    if let Some(message) = message {
        task = task.with_status_message(message);
    }
    DetailedTask::new(task, payload)
}

/// The task's payload and status message.
fn payload(view: &Value) -> (TaskPayload, Option<String>) {
    let report = &view["report"];
    let finish = &view["finish"];
    let cancelled = report["status"] == "cancelled"
        || (finish["state"].is_null() && finish["exit_code"] == CANCELLED_EXIT_CODE);
    if cancelled {
        return (TaskPayload::Cancelled, Some("the run was cancelled".into()));
    }
    if !finish.is_null() {
        if finish["exit_code"] == 0 && !finish["state"].is_null() {
            let result = CallToolResult::structured(report.clone());
            return (
                TaskPayload::Completed {
                    result: object(&result),
                },
                None,
            );
        }
        return failed(report, finish);
    }
    // An answer `tasks/update` delivered that no transition took is said here: its result
    // carries nothing.
    let last = &report["last_event"];
    let untaken = match last["outcome"].as_str() {
        Some(outcome @ ("discarded" | "refused")) => format!(
            "; the last event sent, `{}`, was {outcome}: {}",
            last["event"].as_str().unwrap_or_default(),
            last["reason"].as_str().unwrap_or_default()
        ),
        _ => String::new(),
    };
    let message = match report["waiting"].as_str() {
        Some("input") => {
            let requests = input_requests(report, view["asked_since"].as_u64().unwrap_or(0));
            if !requests.is_empty() {
                return (
                    TaskPayload::InputRequired {
                        input_requests: requests,
                    },
                    Some(format!(
                        "the run waits for one of the events in inputRequests{untaken}"
                    )),
                );
            }
            "the run waits for an event it does not list (send_event sends one)"
        }
        Some("effect") => "an effect or child protocol of the run is running",
        Some("timer") => "the run waits for a timer",
        _ => {
            let why = view["not_live"]
                .as_str()
                .unwrap_or("the run is not live in this server");
            return (TaskPayload::Working, Some(why.into()));
        }
    };
    (TaskPayload::Working, Some(format!("{message}{untaken}")))
}

/// A run that ended in failure: a JSON-RPC error whose data is its final state, exit code and
/// output (and the error that ended it, if one did).
fn failed(report: &Value, finish: &Value) -> (TaskPayload, Option<String>) {
    let run = report["run"].as_str().unwrap_or_default();
    // An unhandled `error.execution` (`errors: strict`): the finish names it, or, read from
    // the store, its output is it; either way the run has no final state.
    let unhandled = finish
        .get("error")
        .or_else(|| finish["output"].get("error"))
        .filter(|_| finish["state"].is_null())
        .and_then(|error| Some((error["event"].as_str()?, error["message"].as_str()?)));
    let message = match (report["error"].as_str(), finish["state"].as_str()) {
        (Some(error), _) => format!("run `{run}` failed: {error}"),
        (None, None) if let Some((event, error)) = unhandled => {
            format!("run `{run}` failed: {event} was not handled: {error}")
        }
        (None, Some(state)) => format!(
            "run `{run}` finished in `{state}` with exit code {}",
            finish["exit_code"]
        ),
        (None, None) => format!("run `{run}` failed with exit code {}", finish["exit_code"]),
    };
    let mut data = finish.clone();
    if let Some(error) = report.get("error") {
        data["error"] = error.clone();
    }
    let error = ErrorData::new(ErrorCode::INTERNAL_ERROR, message.clone(), Some(data));
    (
        TaskPayload::Failed {
            error: object(&error),
        },
        Some(message),
    )
}

/// Why `tasks/update` refused an answer keyed `key`: the requests outstanding now, if any.
fn not_outstanding(task: &str, key: &str, now: &[String]) -> String {
    let asks = if now.is_empty() {
        "it has no request outstanding now".to_string()
    } else {
        let keys: Vec<String> = now.iter().map(|key| format!("`{key}`")).collect();
        format!("its requests now are {}", keys.join(", "))
    };
    format!(
        "inputResponses `{key}` answers no request task `{task}` has outstanding ({asks}); \
         nothing was delivered: read tasks/get and answer its inputRequests"
    )
}

/// `value` as a JSON object (what a task carries its result and error as).
fn object(value: &impl serde::Serialize) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(Value::Object(object)) => object,
        _ => Map::new(),
    }
}

/// One elicitation request per event the run can take now, keyed `EVENT@STEP`, `STEP` the
/// step its requests were keyed at (`RunView::request_step`): the same while the request
/// stands, so an answer keeps its key over the run's timer steps, and never reused for another.
pub fn input_requests(report: &Value, since: u64) -> InputRequests {
    let events = report["events"].as_array().map_or(&[][..], Vec::as_slice);
    events
        .iter()
        .map(|event| {
            let request = crate::frontends::mcp::waiting::elicitation::request(report, event);
            (
                crate::frontends::mcp::waiting::request_keys::request_key(event, since),
                InputRequest::Elicitation(ElicitRequest::new(request)),
            )
        })
        .collect()
}

impl ProtocolServer {
    /// Starts a run of `protocol` and answers it as a task; a refused start (a bad input) is
    /// the error the plain call would give.
    pub(in crate::frontends::mcp) async fn create_task(
        &self,
        protocol: String,
        inputs: Map<String, Value>,
        parent: Option<crate::base::trace_context::TraceParent>,
    ) -> Result<CreateTaskResult, String> {
        let report = self
            .ask(|reply| Request::Start {
                protocol,
                inputs,
                parent,
                reply,
            })
            .await?;
        let run = report["run"].as_str().unwrap_or_default().to_string();
        let view = self.task_view(&run).await?;
        Ok(CreateTaskResult::new(detailed(&view).task))
    }

    /// `tasks/get`: the run as a task; an unknown id is invalid params, as the spec says.
    /// A task id longer than `MAX_NAME_ARGUMENT_BYTES` is refused, by its length.
    pub(in crate::frontends::mcp) async fn task(
        &self,
        id: &str,
    ) -> Result<(Value, DetailedTask), ErrorData> {
        let view = async {
            crate::frontends::mcp::limits::check_name_argument("taskId", id)?;
            self.task_view(id).await
        }
        .await
        .map_err(|message| ErrorData::invalid_params(message, None))?;
        let detailed = detailed(&view);
        Ok((view, detailed))
    }

    /// `tasks/update`: the first accepted answer to an outstanding request is sent as its event,
    /// through the same admission as `send_event`; a refusal (data off the event's schema) is
    /// invalid params naming why. A key that is not outstanding (answered already, or the run
    /// moved on) is invalid params too, naming the keys outstanding now: the extension requires
    /// every key to be, and the client must not take its answer for delivered. Declined and
    /// cancelled answers are taken: the run still waits, and `tasks/cancel` cancels it.
    pub(in crate::frontends::mcp) async fn update_task(
        &self,
        params: UpdateTaskParams,
    ) -> Result<(), ErrorData> {
        let (view, _) = self.task(&params.task_id).await?;
        let delivery = self
            .deliver_answers(&view, params.input_responses)
            .await
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        match delivery {
            Delivery::Sent(_) | Delivery::Declined => Ok(()),
            Delivery::NotOutstanding { key, now } => Err(ErrorData::invalid_params(
                not_outstanding(&params.task_id, &key, &now),
                None,
            )),
        }
    }

    /// `tasks/cancel`: cancels the run as `cancel_run` does (its effects' and children's process
    /// groups killed); a task already ended is invalid params, as the spec says.
    pub(in crate::frontends::mcp) async fn cancel_task(&self, id: &str) -> Result<(), ErrorData> {
        let (_, detailed) = self.task(id).await?;
        if detailed.status().is_terminal() {
            let status = serde_json::to_value(detailed.status()).unwrap_or_default();
            let status = status.as_str().unwrap_or_default();
            return Err(ErrorData::invalid_params(
                format!(
                    "task `{id}` is already {status}; a task that has ended cannot be cancelled"
                ),
                None,
            ));
        }
        let run = id.to_string();
        self.ask(|reply| Request::CancelRun { run, reply })
            .await
            .map(|_| ())
            .map_err(|message| ErrorData::invalid_params(message, None))
    }
}
