//! The protocol as written in YAML: typed serde + schemars types, the single source of the JSON Schema.

pub mod action;
pub mod delayed_transition;
pub mod duration;
pub mod effect;
pub mod input;
pub mod map;
pub mod map_invoke;
pub mod permissions;
pub mod reuse;
pub mod scenario;
pub mod state;
mod state_kinds;
pub mod timeout;
pub mod transition;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use action::Action;
pub use delayed_transition::DelayedTransition;
pub use duration::Duration;
pub use input::{Input, InputType};
pub use permissions::Permissions;
pub use reuse::{Block, Library, Parameter, RetryEntry, RetryPlan, UseAction};
pub use state::{HistoryDepth, Invoke, State, StateType};
pub use transition::{Targets, Transition, TransitionType, Transitions};

/// A protocol: a statechart with typed inputs, mutable context and states.
///
/// A protocol file is YAML. Start it with the modeline
/// `# yaml-language-server: $schema=../schemas/protocol.schema.json`
/// so editors complete and check it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Identifier of the protocol, e.g. `ittw`. Letters, digits, `_`, `-` and `.`.
    pub id: String,
    /// Version of the protocol, e.g. `"1.0"` (quote it so YAML keeps it a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A one-line human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the protocol is for; markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Identifiers of related protocols, e.g. `[PPSBM-v1.0]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// Typed parameters supplied with `--input KEY=VALUE`, checked before the run starts.
    /// Expressions read them by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, Input>,
    /// What the protocol may do: programs it may run, paths it may read and write, environment
    /// variables its processes inherit. An action beyond them fails with `error.permission.<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    /// Mutable data and its initial values. Expressions read it by name; `assign` changes it.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub context: IndexMap<String, serde_json::Value>,
    /// The types of context variables, each a JSON Schema: `types: { verdicts: { type: object } }`.
    /// The initial value is checked at load, every assignment to the variable when it is made;
    /// a variable not listed takes any value.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "data_schemas")]
    pub types: IndexMap<String, serde_json::Value>,
    /// The external events the protocol takes, each with a JSON Schema for its data
    /// (`{}` for any). With `events:` declared, input naming another event is refused, data that
    /// does not conform is refused, and `on:` keys that match no event that can occur are errors.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "data_schemas")]
    pub events: IndexMap<String, serde_json::Value>,
    /// External events that wait while the run is in any state and no transition takes them:
    /// `defer:` of every state (see a state's `defer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defer: Vec<String>,
    /// Library files whose blocks and retry policies this protocol uses, relative to this
    /// file, e.g. `[common/tools.yaml]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// Named action blocks, run where a `use:` action names them.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub blocks: IndexMap<String, Block>,
    /// Named retry policies, each the retriers of a `retry:` list; an effect names one with
    /// `retry: NAME`, or puts the name in its `retry:` list.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub retry_policies: IndexMap<String, Vec<effect::Retrier>>,
    /// How an `error.execution` (an expression, assignment or child's inputs that failed) is
    /// processed. `strict` (the default): before any eventless transition, and one that no
    /// transition handles ends the run at once with exit code 76. `scxml`: W3C's order and
    /// leniency (queued behind eventless transitions, discarded with a warning when unhandled).
    #[serde(default, skip_serializing_if = "ErrorMode::is_default")]
    pub errors: ErrorMode,
    /// The state (or states, in parallel regions) entered first. Defaults to the first state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<Targets>,
    /// The top-level states, in document order. Each key is the state's id, unique in the file.
    pub states: IndexMap<String, State>,
}

/// How a protocol processes the errors its executable content raises (`errors:`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ErrorMode {
    /// An `error.execution` is processed before eventless transitions, and one that no
    /// transition handles fails the run (exit code 76): a failed assignment never lets a guard
    /// decide on the data it did not write.
    #[default]
    Strict,
    /// The W3C SCXML order and leniency: the error waits behind eventless transitions and is
    /// discarded with a warning when no transition handles it (what `import scxml` writes).
    Scxml,
}

impl ErrorMode {
    fn is_default(&self) -> bool {
        *self == ErrorMode::Strict
    }
}

/// `events:` and `types:`: names mapped to JSON Schemas, each an object (`{}` takes anything)
/// or `true`/`false`. What the schema says is checked when the protocol is compiled.
fn data_schemas(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": ["object", "boolean"],
            "description": "A JSON Schema (draft 2020-12), e.g. `{ type: object, properties: { reason: { type: string } }, required: [reason] }`; `{}` takes any value."
        }
    })
}
