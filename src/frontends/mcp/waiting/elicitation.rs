//! Asking the client for an event a run waits on: one `elicitation/create` request per event it can take, and the event an accepted answer makes.

use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, ServerRequest,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use crate::frontends::mcp::runs::host::Request;
use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::waiting::answers::Sent;

/// The most events one tool call asks the client for, one after another, while each answer
/// leaves the run waiting again.
pub const MAX_ELICITATION_ROUNDS: usize = 10;

/// How long a tool call waits for the run's effects and children to end before it decides
/// whether to ask; past it the call answers the report as it is.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// How long a tool call waits for the client's answer to one elicitation request; past it the
/// request is cancelled and the call answers the run's report as it is. The call holds one of
/// the session's `MAX_REQUESTS_IN_FLIGHT` places while it waits.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How often a settling run's report is read again.
const SETTLE_POLL: Duration = Duration::from_millis(50);

/// The latest directives a request's message quotes.
const QUOTED_DIRECTIVES: usize = 5;

/// The request for `event` (an entry of the report's `events`) of the run `report` describes:
/// a message naming the run, the event and the latest directives, and the schema of the data.
pub fn request(report: &Value, event: &Value) -> ElicitRequestParams {
    let name = event["name"].as_str().unwrap_or_default();
    let mut message = format!(
        "Run `{}` of protocol `{}` waits for the event `{name}`.",
        report["run"].as_str().unwrap_or_default(),
        report["protocol"].as_str().unwrap_or_default(),
    );
    let directives = report["directives"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let quoted = &directives[directives.len().saturating_sub(QUOTED_DIRECTIVES)..];
    if !quoted.is_empty() {
        message.push_str(" Latest directives:");
        for directive in quoted {
            message.push('\n');
            message.push_str(&crate::base::secrets::mask_json(directive).to_string());
        }
    }
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: requested_schema(event),
    }
}

/// The event's declared data schema when it is a flat object of primitives (an elicitation
/// form can hold nothing else); otherwise one `data` string field that holds the data as JSON.
fn requested_schema(event: &Value) -> ElicitationSchema {
    if let Some(schema) = flat_schema(event) {
        return schema;
    }
    let fallback = json!({
        "type": "object",
        "properties": {
            "data": {
                "type": "string",
                "title": "data",
                "description": format!(
                    "The data of `{}` as JSON (an object, a string in quotes, a number...); \
                     empty for none",
                    event["name"].as_str().unwrap_or_default()
                ),
            }
        },
    });
    serde_json::from_value(fallback).expect("the fallback schema is an elicitation schema")
}

/// The declared schema as an elicitation form, if it is one: `type: object` whose properties
/// are each a string, number, integer or boolean (with their titles, descriptions, bounds,
/// enums and defaults).
fn flat_schema(event: &Value) -> Option<ElicitationSchema> {
    let schema = event.get("data_schema")?.as_object()?;
    if schema.get("type")? != "object" {
        return None;
    }
    let properties = schema.get("properties")?.as_object()?;
    let primitive = ["string", "number", "integer", "boolean"];
    let flat = properties.values().all(|property| {
        property
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| primitive.contains(&kind))
    });
    if !flat {
        return None;
    }
    let mut form = Map::new();
    for keyword in ["type", "properties", "required", "title", "description"] {
        if let Some(value) = schema.get(keyword) {
            form.insert(keyword.into(), value.clone());
        }
    }
    serde_json::from_value(Value::Object(form)).ok()
}

/// The data an accepted answer gives `event`: the form's content itself where the event's
/// schema was the form, else its `data` field read as JSON (none when empty or absent).
pub fn event_data(event: &Value, content: Option<&Value>) -> Result<Option<Value>, String> {
    if flat_schema(event).is_some() {
        return Ok(content.cloned());
    }
    let name = event["name"].as_str().unwrap_or_default();
    match content.and_then(|content| content.get("data")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => serde_json::from_str(text).map(Some).map_err(|error| {
            format!(
                "the answer's `data` for `{name}` is not JSON ({error}); write a string in \
                 quotes"
            )
        }),
        Some(other) => Err(format!(
            "the answer's `data` for `{name}` must be a string holding JSON, not {other}"
        )),
    }
}

/// Whether a client with `capabilities` declared form elicitation (naming neither mode means
/// form).
pub fn client_elicits(capabilities: Option<ClientCapabilities>) -> bool {
    capabilities
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

impl ProtocolServer {
    /// After a plain tool call left a run in `report`: waits for its effects to end (at most
    /// `SETTLE_LIMIT`), and while it then waits for input asks the client for each event it
    /// can take in turn. An accepted answer is sent as the event and the new report is
    /// considered again; a declined one asks for the next event; a cancelled one, a client
    /// that fails to answer within `ELICITATION_TIMEOUT`, or an answer that comes after the run
    /// moved on (nothing sent) ends the asking with the run's report as it is.
    pub(in crate::frontends::mcp) async fn elicit(
        &self,
        peer: &Peer<RoleServer>,
        report: Value,
    ) -> Result<Value, String> {
        let mut report = report;
        for _ in 0..MAX_ELICITATION_ROUNDS {
            report = self.settle(report).await?;
            if report["status"] != "running" || report["waiting"] != "input" {
                return Ok(report);
            }
            let run = report["run"].as_str().unwrap_or_default().to_string();
            let view = self.task_view(&run).await?;
            report = view["report"].clone();
            let Some(since) = view["asked_since"].as_u64() else {
                return Ok(report);
            };
            let events = report["events"].as_array().cloned().unwrap_or_default();
            let mut sent = None;
            for event in &events {
                let answer = match ask_client(peer, request(&report, event)).await {
                    Some(answer) => answer,
                    None => return Ok(report),
                };
                match answer.action {
                    ElicitationAction::Accept => {
                        sent = Some(
                            self.send_answer(&run, event, answer.content.as_ref(), since)
                                .await?,
                        );
                        break;
                    }
                    ElicitationAction::Decline => continue,
                    _ => return Ok(report),
                }
            }
            match sent {
                Some(Sent::Taken(next)) => report = next,
                Some(Sent::MovedOn(now)) => return Ok(now["report"].clone()),
                None => return Ok(report),
            }
        }
        Ok(report)
    }

    /// The run's report once no effect or child of it runs, or as it is after `SETTLE_LIMIT`.
    pub(in crate::frontends::mcp) async fn settle(&self, report: Value) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        let mut report = report;
        while report["waiting"] == "effect" && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(SETTLE_POLL).await;
            let run = report["run"].as_str().unwrap_or_default().to_string();
            report = self.ask(|reply| Request::GetRun { run, reply }).await?;
        }
        Ok(report)
    }
}

/// Sends one elicitation request; `None` when the client does not answer it within
/// `ELICITATION_TIMEOUT` (the request is then cancelled), or cannot (the revision forbids
/// server requests, or the connection failed).
pub(in crate::frontends::mcp) async fn ask_client(
    peer: &Peer<RoleServer>,
    params: ElicitRequestParams,
) -> Option<ElicitResult> {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let options = PeerRequestOptions::with_timeout(ELICITATION_TIMEOUT);
    let handle = peer.send_request_with_option(request, options).await.ok()?;
    match handle.await_response().await {
        Ok(ClientResult::ElicitResult(result)) => Some(result),
        _ => None,
    }
}
