//! A `map`'s other body: one child protocol per element of a list, as `invoke` runs one for a state.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The child protocol a `map` runs for each item: item `i` is the child `<id>[i]`, whose final
/// `output` is the item's result (exit code 0) and whose other endings fail the item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MapChild {
    /// Names the map's items (`<id>[0]`, `<id>[1]`, ...) and its events (`done.map.<id>`).
    pub id: String,
    /// The protocol each item runs.
    pub invoke: ChildProtocol,
}

/// A child protocol and the inputs it is given; the item's element is bound while they are
/// rendered. Items take no events: `send ... to:` cannot address them and `autoforward` is
/// not offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChildProtocol {
    /// The child protocol's file, relative to this protocol's file.
    pub protocol: String,
    /// The child's inputs; string values are templates (`"${reviewer}"` keeps its type).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, serde_json::Value>,
}
