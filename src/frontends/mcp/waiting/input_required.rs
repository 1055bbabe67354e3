//! Elicitation on 2026-07-28 sessions, which forbid server requests: a plain call that leaves a run waiting for input answers `InputRequiredResult`, and its retry delivers the answer as the event.

use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{Map, Value};

use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::waiting::answers::Delivery;

/// What a plain call that moves a run answers on a 2026-07-28 session.
pub enum Answer {
    /// The run's report, as a plain call gives it.
    Report(Value),
    /// The run waits for input: one elicitation request per event it can take; the client
    /// retries the call with its answers and this request state (the run id).
    InputRequired(InputRequiredResult),
}

impl ProtocolServer {
    /// A protocol tool call or `send_event` for a client that takes `InputRequiredResult`.
    /// The first call runs as a plain one; a retry (`request_state` set) instead delivers the
    /// first accepted answer to the run the state names, which must be the call's own (a run
    /// of the protocol, or `send_event`'s `run`). Then, once the run's effects have ended (as
    /// `elicit` waits), a run waiting for input asks again, with fresh keys where the answers
    /// came too late (their requests no longer outstanding: nothing was sent); a retry whose
    /// answers were all declined answers the report as it is.
    pub(in crate::frontends::mcp) async fn answer_with_input(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        responses: Option<InputResponses>,
        request_state: Option<String>,
        parent: Option<crate::base::trace_context::TraceParent>,
    ) -> Result<Answer, String> {
        let report = match request_state {
            None => self.call(name, arguments, parent).await?,
            Some(run) => {
                crate::frontends::mcp::limits::check_name_argument("requestState", &run)?;
                let own = match arguments.get("run").and_then(Value::as_str) {
                    Some(argument) if name == "send_event" => argument == run,
                    _ => run.starts_with(&format!("{name}:")),
                };
                if !own {
                    return Err(format!(
                        "requestState `{run}` names no run of this `{name}` call; retry the call \
                         with the requestState its input_required result gave"
                    ));
                }
                let view = self.task_view(&run).await?;
                match self
                    .deliver_answers(&view, responses.unwrap_or_default())
                    .await?
                {
                    Delivery::Sent(report) => report,
                    Delivery::Declined => return Ok(Answer::Report(view["report"].clone())),
                    Delivery::NotOutstanding { .. } => self.task_view(&run).await?["report"].take(),
                }
            }
        };
        let report = self.settle(report).await?;
        if report["status"] != "running" || report["waiting"] != "input" {
            return Ok(Answer::Report(report));
        }
        let run = report["run"].as_str().unwrap_or_default().to_string();
        let view = self.task_view(&run).await?;
        let requests = crate::frontends::mcp::waiting::tasks::input_requests(
            &view["report"],
            view["asked_since"].as_u64().unwrap_or(0),
        );
        if requests.is_empty() {
            return Ok(Answer::Report(view["report"].clone()));
        }
        Ok(Answer::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(run),
        )))
    }
}
