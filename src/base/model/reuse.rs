//! Reuse as written: named action blocks, named retry policies, and the library files that share them.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Action;
use super::effect::Retrier;

/// A named, parameterised list of actions, written once under `blocks:` and run where a
/// `use:` action names it. Its actions read the names of the protocol that uses it, and its
/// parameters by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// What the block does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its parameters, by name. Inside the block's expressions and templates, a parameter's
    /// name stands for the expression the `use` gives it, evaluated where it is read.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub parameters: IndexMap<String, Parameter>,
    /// The actions, run in order where the block is used.
    #[serde(rename = "do")]
    pub body: Vec<Action>,
}

/// One parameter of a block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    /// What the parameter means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value when a `use` does not give one: a CEL expression (strings) or a literal. A
    /// parameter without a default must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// Runs a named block here, as if its actions were written in its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseAction {
    /// The block's name, from `blocks:` or from an imported file.
    #[serde(rename = "use")]
    pub block: String,
    /// The block's parameters: each a CEL expression (strings, e.g. `"'read_file'"` or
    /// `path`) or a literal (numbers, booleans, null, lists and mappings).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub with: IndexMap<String, serde_json::Value>,
}

/// The retriers of an effect: one policy's name, or a list of retriers and policy names,
/// tried in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RetryPlan {
    /// The name of a policy under `retry_policies:` (or imported), e.g. `standard`.
    Named(String),
    /// Retriers and policy names, tried in order; a name stands for its policy's retriers.
    Listed(Vec<RetryEntry>),
}

/// One entry of a retry list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RetryEntry {
    /// The name of a retry policy: its retriers, in their order.
    Named(String),
    /// A retrier written here.
    Retrier(Retrier),
}

impl RetryPlan {
    /// The entries in order: a lone name is a list of one.
    pub fn entries(&self) -> Vec<RetryEntry> {
        match self {
            RetryPlan::Named(name) => vec![RetryEntry::Named(name.clone())],
            RetryPlan::Listed(entries) => entries.clone(),
        }
    }
}

/// A library file: blocks and retry policies that protocols (and other libraries) import.
///
/// Start it with the modeline
/// `# yaml-language-server: $schema=../schemas/library.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Library {
    /// What the library holds; markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Other library files whose definitions this one uses, relative to this file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// Named action blocks.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub blocks: IndexMap<String, Block>,
    /// Named retry policies: each the retriers of a `retry:` list.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub retry_policies: IndexMap<String, Vec<Retrier>>,
}
