//! Which task dialect a session speaks: the 2025-11-25 specification's (SEP-1686: `task` in `tools/call`, `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`) or the 2026-07-28 Tasks extension's; its requests renamed where rmcp would drop or refuse them, and what a 2025-11-25 session is told at initialize and in `tools/list`.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    ClientRequest, CustomResult, JsonRpcMessage, JsonRpcRequest, ProtocolVersion, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};

/// The prefix of the methods a 2025-11-25 session's task requests are renamed to, so that rmcp
/// hands them on whole to the handler (`on_custom_request`) instead of dropping `task` from
/// `tools/call` or refusing `tasks/get` for want of the extension.
pub const RENAMED: &str = "protocol-run/2025-11-25/";

/// A `tools/call` that carries `task`, renamed before rmcp reads it.
pub const TASK_CALL: &str = "protocol-run/2025-11-25/tools/call";

/// The revision whose task dialect this serves beside the extension.
pub fn speaks_specification_tasks(version: &ProtocolVersion) -> bool {
    *version == ProtocolVersion::V_2025_11_25
}

/// A raw message (or batch) with each `tools/call` whose params carry a `task` object renamed to
/// `TASK_CALL`, as it comes off the wire; `None` when nothing was renamed. rmcp's `tools/call`
/// params have no `task` field, and would drop it.
pub fn rename_task_calls(body: &[u8]) -> Option<Vec<u8>> {
    // Most messages carry no `task` at all: they are not parsed twice.
    if !body.windows(6).any(|window| window == b"\"task\"") {
        return None;
    }
    let mut message: Value = serde_json::from_slice(body).ok()?;
    let renamed = match &mut message {
        // Every call of a batch is renamed: no short cut past the first.
        Value::Array(batch) => {
            let mut renamed = false;
            for item in batch {
                renamed |= rename_task_call(item);
            }
            renamed
        }
        single => rename_task_call(single),
    };
    renamed.then(|| serde_json::to_vec(&message).ok()).flatten()
}

fn rename_task_call(message: &mut Value) -> bool {
    if message["method"] != "tools/call" || !message["params"]["task"].is_object() {
        return false;
    }
    message["method"] = Value::from(TASK_CALL);
    true
}

/// A session's transport, translating its task dialect: requests of the 2025-11-25 dialect reach
/// the handler under `RENAMED` names, and a 2025-11-25 session is told of the `tasks` capability
/// and each protocol tool's `execution.taskSupport`.
pub struct Dialect<T> {
    inner: T,
    /// The tools that start runs (each may be called as a task).
    protocols: Arc<Vec<String>>,
    /// The session negotiated 2025-11-25: its task requests are of that revision.
    specification_tasks: bool,
    /// The client declared the Tasks extension at initialize: its `tasks/get` and
    /// `tasks/cancel` are the extension's.
    extension_declared: bool,
}

impl<T> Dialect<T> {
    pub fn new(inner: T, protocols: Arc<Vec<String>>) -> Dialect<T> {
        Dialect {
            inner,
            protocols,
            specification_tasks: false,
            extension_declared: false,
        }
    }

    /// A message from the client, renamed when it is a request of the 2025-11-25 dialect (or a
    /// renamed `tools/call` of a session that does not speak it, named back: its `task` is
    /// ignored, as the specification says of a receiver that did not declare tasks).
    fn incoming(&mut self, message: RxJsonRpcMessage<RoleServer>) -> RxJsonRpcMessage<RoleServer> {
        let JsonRpcMessage::Request(request) = message else {
            return message;
        };
        let method = match &request.request {
            ClientRequest::InitializeRequest(initialize) => {
                self.extension_declared = initialize.params.capabilities.supports_tasks();
                None
            }
            ClientRequest::GetTaskRequest(get) if self.specification_request(&get.params.meta) => {
                Some(format!("{RENAMED}tasks/get"))
            }
            ClientRequest::CancelTaskRequest(cancel)
                if self.specification_request(&cancel.params.meta) =>
            {
                Some(format!("{RENAMED}tasks/cancel"))
            }
            ClientRequest::CustomRequest(custom) => match custom.method.as_str() {
                TASK_CALL if !self.specification_tasks => Some("tools/call".to_string()),
                "tasks/result" | "tasks/list" if self.specification_tasks => {
                    Some(format!("{RENAMED}{}", custom.method))
                }
                _ => None,
            },
            _ => None,
        };
        match method {
            Some(method) => JsonRpcMessage::Request(renamed(request, &method)),
            None => JsonRpcMessage::Request(request),
        }
    }

    /// Whether a `tasks/get` or `tasks/cancel` is of the 2025-11-25 dialect: the session speaks
    /// it, and neither it at initialize nor the request in its `_meta` declared the extension.
    fn specification_request(&self, meta: &Option<rmcp::model::RequestMetaObject>) -> bool {
        let declared_here = meta
            .as_ref()
            .and_then(|meta| meta.client_capabilities())
            .is_some_and(|capabilities| capabilities.supports_tasks());
        self.specification_tasks && !self.extension_declared && !declared_here
    }

    /// A message to the client: a 2025-11-25 session's initialize result declares `tasks`, and
    /// its `tools/list` marks each protocol tool as callable as a task.
    fn outgoing(&mut self, message: TxJsonRpcMessage<RoleServer>) -> TxJsonRpcMessage<RoleServer> {
        let JsonRpcMessage::Response(mut response) = message else {
            return message;
        };
        match &response.result {
            ServerResult::InitializeResult(result) => {
                self.specification_tasks = speaks_specification_tasks(&result.protocol_version);
                if self.specification_tasks {
                    response.result = patched(&response.result, |result| {
                        result["capabilities"]["tasks"] = json!({
                            "list": {},
                            "cancel": {},
                            "requests": {"tools": {"call": {}}},
                        });
                    });
                }
            }
            ServerResult::ListToolsResult(_) if self.specification_tasks => {
                let protocols = self.protocols.clone();
                response.result = patched(&response.result, |result| {
                    let tools = result["tools"].as_array_mut().into_iter().flatten();
                    for tool in tools {
                        let starts_run = tool["name"]
                            .as_str()
                            .is_some_and(|name| protocols.iter().any(|protocol| protocol == name));
                        if starts_run {
                            tool["execution"] = json!({"taskSupport": "optional"});
                        }
                    }
                });
            }
            _ => {}
        }
        JsonRpcMessage::Response(response)
    }
}

/// `request` under another method name, read again as rmcp reads a message (its `_meta` kept).
fn renamed(request: JsonRpcRequest<ClientRequest>, method: &str) -> JsonRpcRequest<ClientRequest> {
    let Ok(mut value) = serde_json::to_value(&request) else {
        return request;
    };
    value["method"] = Value::from(method);
    serde_json::from_value(value).unwrap_or(request)
}

/// `result` as JSON changed by `change`, sent as it is (rmcp's types have no field for what a
/// 2025-11-25 session is told).
fn patched(result: &ServerResult, change: impl FnOnce(&mut Value)) -> ServerResult {
    let Ok(mut value) = serde_json::to_value(result) else {
        return result.clone();
    };
    change(&mut value);
    ServerResult::CustomResult(CustomResult(value))
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Dialect<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = self.outgoing(item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        Some(self.incoming(message))
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tools_call_with_a_task_object_is_renamed() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ittw","task":{"ttl":60000}}}"#;
        let renamed: Value = serde_json::from_slice(&rename_task_calls(call).unwrap()).unwrap();
        assert_eq!(renamed["method"], TASK_CALL);
        assert_eq!(renamed["params"]["task"]["ttl"], 60000);
        // A `task` argument of the tool is no task.
        let argument = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"task":{}}}}"#;
        assert_eq!(rename_task_calls(argument), None);
        let batch = br#"[{"method":"tools/call","params":{"task":{}}},{"method":"tools/list"}]"#;
        let renamed: Value = serde_json::from_slice(&rename_task_calls(batch).unwrap()).unwrap();
        assert_eq!(renamed[0]["method"], TASK_CALL);
        assert_eq!(renamed[1]["method"], "tools/list");
        assert_eq!(rename_task_calls(b"{\"task\": not json"), None);
    }
}
