//! The protocol as written in YAML: typed serde + schemars types, the single source of the JSON Schema.

pub mod action;
pub mod duration;
pub mod effect;
pub mod input;
pub mod map;
pub mod permissions;
pub mod state;
pub mod transition;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use action::Action;
pub use duration::Duration;
pub use input::{Input, InputType};
pub use permissions::Permissions;
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
    /// The state (or states, in parallel regions) entered first. Defaults to the first state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<Targets>,
    /// The top-level states, in document order. Each key is the state's id, unique in the file.
    pub states: IndexMap<String, State>,
}
