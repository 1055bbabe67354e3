//! Elicitation on 2026-07-28 sessions, which forbid server requests: a plain call that leaves a run waiting for input answers `InputRequiredResult`, and its retry delivers the answer as the event.

use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{Map, Value};

use super::host::Request;
use super::server::ProtocolServer;

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
    /// `elicit` waits), a run waiting for input asks again; a retry whose answers were all
    /// declined answers the report as it is.
    pub(super) async fn answer_with_input(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> Result<Answer, String> {
        let report = match request_state {
            None => self.call(name, arguments).await?,
            Some(run) => {
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
                let delivered = self
                    .deliver_answers(&view, responses.unwrap_or_default())
                    .await?;
                match delivered {
                    Some(report) => report,
                    None => return Ok(Answer::Report(view["report"].clone())),
                }
            }
        };
        let report = self.settle(report).await?;
        if report["status"] != "running" || report["waiting"] != "input" {
            return Ok(Answer::Report(report));
        }
        let run = report["run"].as_str().unwrap_or_default().to_string();
        let view = self.task_view(&run).await?;
        let requests = super::tasks::input_requests(&report, view["step"].as_u64().unwrap_or(0));
        if requests.is_empty() {
            return Ok(Answer::Report(report));
        }
        Ok(Answer::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(run),
        )))
    }

    /// The run as `tasks/get` reads it.
    async fn task_view(&self, run: &str) -> Result<Value, String> {
        let run = run.to_string();
        self.ask(|reply| Request::GetTask { run, reply }).await
    }
}
