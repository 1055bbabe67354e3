//! Actions as written: each kind is a closed mapping told apart by one required key.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator};

pub use super::effect::{
    BackupAction, EffectOptions, ExecAction, ExecCommand, GrepSearchAction, ListDirAction,
    ReadFileAction, RestoreAction, Retrier, WriteAction,
};
use serde::{Deserialize, Deserializer, Serialize};

/// One action. Each kind is a mapping whose distinguishing key names it: `log`, `assign`,
/// `raise`, `send`, `cancel`, `if`, `foreach`, `map`, `exec`, `emit`, `read_file`, `list_dir`,
/// `grep_search`, `write`, `backup`, `restore`, `call` or `use`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Action {
    Log(LogAction),
    Assign(AssignAction),
    Raise(RaiseAction),
    Send(SendAction),
    Cancel(CancelAction),
    If(IfAction),
    Foreach(ForeachAction),
    Map(super::map::MapAction),
    Exec(ExecAction),
    Emit(EmitAction),
    ReadFile(ReadFileAction),
    ListDir(ListDirAction),
    GrepSearch(GrepSearchAction),
    Write(WriteAction),
    Backup(BackupAction),
    Restore(RestoreAction),
    Call(CallAction),
    Use(super::reuse::UseAction),
}

impl Action {
    /// The options of an effectful action (`exec`, a tool, a file action).
    pub fn effect_options(&self) -> Option<&crate::base::model::effect::EffectOptions> {
        match self {
            Action::Exec(exec) => Some(&exec.options),
            Action::ReadFile(read) => Some(&read.options),
            Action::ListDir(list) => Some(&list.options),
            Action::GrepSearch(grep) => Some(&grep.options),
            Action::Write(write) => Some(&write.options),
            Action::Backup(backup) => Some(&backup.options),
            Action::Restore(restore) => Some(&restore.options),
            Action::Map(map) => match &map.body {
                super::map::MapBody::Effect(body) => body.effect_options(),
                super::map::MapBody::Child(_) => None,
            },
            _ => None,
        }
    }
}

/// The distinguishing key of each action kind, in the order they are documented.
pub const ACTION_KINDS: [&str; 18] = [
    "log",
    "assign",
    "raise",
    "send",
    "cancel",
    "if",
    "foreach",
    // Before the effect kinds: a map's mapping holds the effect it runs.
    "map",
    "exec",
    "emit",
    "read_file",
    "list_dir",
    "grep_search",
    "write",
    "backup",
    "restore",
    "call",
    "use",
];

/// Writes a log line: a `tracing` event with tags and structured fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogAction {
    /// The message, a template: `${expression}` is replaced by its value.
    pub log: String,
    /// Severity; `info` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
    /// Tags shown as `#tag` in human output and as an array in JSON output; templates, so
    /// `${agent_type}_timeout` names the tag from the run's values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Structured fields; string values are templates (`"${attempts}"` keeps its type).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub fields: IndexMap<String, serde_json::Value>,
}

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Sets context variables. Each value is a CEL expression (strings) or a literal (numbers,
/// booleans, null, lists and mappings). Assignments run in order, each seeing the previous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignAction {
    /// Context variable → new value.
    pub assign: IndexMap<String, serde_json::Value>,
}

/// Puts an event on the internal queue: it is handled before any external event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RaiseAction {
    /// The event name (a template).
    pub raise: String,
    /// The event's data; string values are templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// Puts an event on the external queue, now or after a delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendAction {
    /// The event name (a template).
    pub send: String,
    /// The event's data; string values are templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Wait this long first: a literal such as `5s`, or an expression giving milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    /// An id that `cancel` can name to withdraw the event before it is delivered (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where the event goes instead of this run's own queue: the `id` of one of this protocol's
    /// `invoke`s (that child's queue, while it runs), or `parent` (the protocol that invoked
    /// this one). Delivered at once: it cannot be combined with `delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// Withdraws a delayed `send` that has not been delivered yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelAction {
    /// The `id` of the send to withdraw (a template).
    pub cancel: String,
}

/// Runs the first branch whose condition holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IfAction {
    /// The condition (CEL expression).
    #[serde(rename = "if")]
    pub condition: String,
    /// Actions run when the condition holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<Action>,
    /// Further conditions, tried in order when the ones before failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elif: Vec<ElifBranch>,
    /// Actions run when no condition holds.
    #[serde(rename = "else", default, skip_serializing_if = "Vec::is_empty")]
    pub otherwise: Vec<Action>,
}

/// Runs a block once for each element of a list, in order (SCXML's `<foreach>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForeachAction {
    /// The list: literal elements, or a CEL expression evaluated once before the first
    /// iteration.
    pub foreach: LoopArray,
    /// The context variable that holds the current element in each iteration.
    pub item: String,
    /// A context variable that holds the current element's position, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// Actions run for each element.
    #[serde(rename = "do", default, skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<Action>,
}

/// What a `foreach` walks: literal elements, or an expression giving a list when it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum LoopArray {
    /// The elements, as written.
    Listed(Vec<serde_json::Value>),
    /// An expression giving the list when the action runs, e.g. `commits`.
    Computed(String),
}

/// Tells the program driving the protocol what to do: one JSON line on stdout,
/// `{"directive": "<name>", ...data}`. Human logs stay on stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmitAction {
    /// The directive's name (a template), e.g. `use_alternative_tool`.
    pub emit: String,
    /// Fields of the directive; string values are templates (`"${path}"` keeps its type).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub data: IndexMap<String, serde_json::Value>,
}

/// Runs an action the embedding program registered (see `examples/embed.rs`); the command-line
/// engine registers none, so such a protocol runs only inside that program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallAction {
    /// The registered action's name.
    pub call: String,
    /// Its arguments: any YAML value whose strings are templates (`"${attempts}"` keeps its type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
}

/// One `elif` branch of an `if` action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElifBranch {
    /// The condition (CEL expression).
    #[serde(rename = "if")]
    pub condition: String,
    /// Actions run when the condition holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<Action>,
}

impl<'de> Deserialize<'de> for Action {
    /// Dispatches on the distinguishing key, so a mistake inside one kind is reported against
    /// that kind rather than as "matches no variant".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        let kind = value
            .as_object()
            .and_then(|object| ACTION_KINDS.iter().find(|kind| object.contains_key(**kind)))
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "an action is a mapping with one of the keys {}",
                    ACTION_KINDS.join(", ")
                ))
            })?;
        let convert = |error: serde_json::Error| D::Error::custom(error.to_string());
        Ok(match *kind {
            "log" => Action::Log(serde_json::from_value(value).map_err(convert)?),
            "assign" => Action::Assign(serde_json::from_value(value).map_err(convert)?),
            "raise" => Action::Raise(serde_json::from_value(value).map_err(convert)?),
            "send" => Action::Send(serde_json::from_value(value).map_err(convert)?),
            "cancel" => Action::Cancel(serde_json::from_value(value).map_err(convert)?),
            "foreach" => Action::Foreach(serde_json::from_value(value).map_err(convert)?),
            "map" => Action::Map(serde_json::from_value(value).map_err(convert)?),
            "exec" => Action::Exec(serde_json::from_value(value).map_err(convert)?),
            "emit" => Action::Emit(serde_json::from_value(value).map_err(convert)?),
            "read_file" => Action::ReadFile(serde_json::from_value(value).map_err(convert)?),
            "list_dir" => Action::ListDir(serde_json::from_value(value).map_err(convert)?),
            "grep_search" => Action::GrepSearch(serde_json::from_value(value).map_err(convert)?),
            "write" => Action::Write(serde_json::from_value(value).map_err(convert)?),
            "backup" => Action::Backup(serde_json::from_value(value).map_err(convert)?),
            "restore" => Action::Restore(serde_json::from_value(value).map_err(convert)?),
            "call" => Action::Call(serde_json::from_value(value).map_err(convert)?),
            "use" => Action::Use(serde_json::from_value(value).map_err(convert)?),
            _ => Action::If(serde_json::from_value(value).map_err(convert)?),
        })
    }
}

impl JsonSchema for Action {
    fn schema_name() -> Cow<'static, str> {
        "Action".into()
    }

    /// One `oneOf` branch per kind: closed objects, each requiring its own key.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "description": "One action. Each kind is a mapping whose distinguishing key names it: `log`, `assign`, `raise`, `send`, `cancel`, `if`, `foreach`, `map`, `exec`, `emit`, `read_file`, `list_dir`, `grep_search`, `write`, `backup`, `restore`, `call` or `use`.",
            "oneOf": [
                generator.subschema_for::<LogAction>(),
                generator.subschema_for::<AssignAction>(),
                generator.subschema_for::<RaiseAction>(),
                generator.subschema_for::<SendAction>(),
                generator.subschema_for::<CancelAction>(),
                generator.subschema_for::<IfAction>(),
                generator.subschema_for::<ForeachAction>(),
                generator.subschema_for::<super::map::MapAction>(),
                generator.subschema_for::<ExecAction>(),
                generator.subschema_for::<EmitAction>(),
                generator.subschema_for::<ReadFileAction>(),
                generator.subschema_for::<ListDirAction>(),
                generator.subschema_for::<GrepSearchAction>(),
                generator.subschema_for::<WriteAction>(),
                generator.subschema_for::<BackupAction>(),
                generator.subschema_for::<RestoreAction>(),
                generator.subschema_for::<CallAction>(),
                generator.subschema_for::<super::reuse::UseAction>(),
            ]
        })
    }
}
