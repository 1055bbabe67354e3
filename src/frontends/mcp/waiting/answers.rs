//! An answer to a waiting run's input request, sent as its event only while the request stands: `tasks/update`, a 2026-07-28 retry and a plain call's elicitation all deliver through here.

use rmcp::model::{ElicitResult, ElicitationAction, InputResponses};
use serde_json::Value;

use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::waiting::request_keys::request_key;

/// What became of the answers to a run's input requests.
pub enum Delivery {
    /// An accepted answer was sent as its event: the run's report after its step.
    Sent(Value),
    /// Every answer was declined or cancelled: the run still waits.
    Declined,
    /// An answer's key names no request the run has outstanding (answered already, or the run
    /// moved on); nothing was sent. `now` keys the requests outstanding instead.
    NotOutstanding { key: String, now: Vec<String> },
}

/// What sending one answer did.
pub enum Sent {
    /// The run took it: its report after the step.
    Taken(Value),
    /// The request no longer stood when the answer came: the run as it is now (a task view).
    MovedOn(Value),
}

/// The requests a task view (`Host::task_view`) has outstanding, by key, with their events:
/// one per event a running run can take, keyed by the step its requests were keyed at.
pub fn outstanding(view: &Value) -> Vec<(String, &Value)> {
    let report = &view["report"];
    let Some(since) = view["asked_since"].as_u64() else {
        return Vec::new();
    };
    if report["status"] != "running" {
        return Vec::new();
    }
    let events = report["events"].as_array().map_or(&[][..], Vec::as_slice);
    events
        .iter()
        .map(|event| (request_key(event, since), event))
        .collect()
}

impl ProtocolServer {
    /// The run as `tasks/get` reads it: `{report, created, updated, step, asked_since,
    /// finish, not_live}`.
    pub(in crate::frontends::mcp) async fn task_view(&self, run: &str) -> Result<Value, String> {
        let run = run.to_string();
        self.ask(|reply| Request::GetTask { run, reply }).await
    }

    /// Sends the first accepted answer among `responses` as its event, to the run `view` (a
    /// task view) describes. Every key must name a request outstanding in `view` (as the
    /// extension requires) or nothing is sent; the answer is taken only if its request still
    /// stands when the host sends it. An answer that is no elicitation result, or whose data
    /// the event refuses, is the error saying why.
    pub(in crate::frontends::mcp) async fn deliver_answers(
        &self,
        view: &Value,
        responses: InputResponses,
    ) -> Result<Delivery, String> {
        let outstanding = outstanding(view);
        let keys_now = || outstanding.iter().map(|(key, _)| key.clone()).collect();
        for key in responses.keys() {
            crate::frontends::mcp::limits::check_name_argument("inputResponses key", key)?;
        }
        if let Some(key) = responses.keys().find(|key| {
            !outstanding
                .iter()
                .any(|(outstanding, _)| outstanding == *key)
        }) {
            return Ok(Delivery::NotOutstanding {
                key: key.clone(),
                now: keys_now(),
            });
        }
        let run = view["report"]["run"].as_str().unwrap_or_default();
        let since = view["asked_since"].as_u64().unwrap_or_default();
        for (key, response) in responses {
            let Some((_, event)) = outstanding
                .iter()
                .find(|(outstanding, _)| *outstanding == key)
            else {
                continue;
            };
            let answer: ElicitResult = serde_json::from_value(response).map_err(|error| {
                format!("inputResponses `{key}` is not an elicitation result: {error}")
            })?;
            if answer.action != ElicitationAction::Accept {
                continue;
            }
            let sent = self
                .send_answer(run, event, answer.content.as_ref(), since)
                .await
                .map_err(|message| crate::base::secrets::mask(&message).into_owned())?;
            return Ok(match sent {
                Sent::Taken(report) => Delivery::Sent(report),
                Sent::MovedOn(now) => Delivery::NotOutstanding {
                    key,
                    now: outstanding_keys(&now),
                },
            });
        }
        Ok(Delivery::Declined)
    }

    /// Sends an accepted answer's `content` to `run` as `event` (an entry of its report's
    /// `events`), answering the request keyed at step `since`, through `send_event`'s
    /// admission. When the host refuses it, the run is read again: a request that no longer
    /// stands is `MovedOn` with the run as it is, any other refusal (data off the event's
    /// schema) the error.
    pub(in crate::frontends::mcp) async fn send_answer(
        &self,
        run: &str,
        event: &Value,
        content: Option<&Value>,
        since: u64,
    ) -> Result<Sent, String> {
        let data = crate::frontends::mcp::waiting::elicitation::event_data(event, content)?;
        let name = event["name"].as_str().unwrap_or_default().to_string();
        let key = request_key(event, since);
        let sent = {
            let run = run.to_string();
            self.ask(|reply| Request::SendEvent {
                run,
                event: name,
                data,
                expected_step: Some(since),
                reply,
            })
            .await
        };
        // An answer the run refused (data off the event's schema) was not delivered.
        let sent = sent.and_then(|report| match report["sent"]["outcome"].as_str() {
            Some("refused") => Err(report["sent"]["reason"]
                .as_str()
                .unwrap_or("refused")
                .to_string()),
            _ => Ok(report),
        });
        match sent {
            Ok(report) => Ok(Sent::Taken(report)),
            Err(message) => {
                let now = self.task_view(run).await?;
                if outstanding_keys(&now).contains(&key) {
                    Err(message)
                } else {
                    Ok(Sent::MovedOn(now))
                }
            }
        }
    }
}

/// The keys of the requests a task view has outstanding.
fn outstanding_keys(view: &Value) -> Vec<String> {
    outstanding(view).into_iter().map(|(key, _)| key).collect()
}
