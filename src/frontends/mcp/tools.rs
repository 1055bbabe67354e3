//! The management tools a server lists beside its protocols' (their names, descriptions and argument schemas), how a tool's arguments are read, and how its answer becomes its result.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value, json};

/// `send_event`, `get_run`, `list_runs`, `cancel_run`, `resume_run`, `redrive_run`, `get_logs`,
/// `get_diagram`.
pub(super) fn management_tools() -> Vec<Tool> {
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
            "redrive_run",
            "Drive again a run that failed on an unhandled error, or stopped unfinished, under \
             its own id from its last step before the failure: only what failed runs again \
             (the effects running then, a map's items that did not end well, a failed child); \
             returns its report with `redriven`: the step it goes on from and what runs again",
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

/// A tool's answer as its result: the report, or the error (secrets masked) as a tool error.
pub(super) fn tool_result(answer: Result<Value, String>) -> CallToolResult {
    match answer {
        Ok(report) => CallToolResult::structured(report),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(
            crate::base::secrets::mask(&message),
        )]),
    }
}

/// A required string argument, or the error naming it.
pub(super) fn text_argument(arguments: &Map<String, Value>, name: &str) -> Result<String, String> {
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
pub(super) fn optional_text_argument(
    arguments: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>, String> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => text_argument(arguments, name).map(Some),
    }
}
