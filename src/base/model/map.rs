//! `map` as written: one effect per element of a list, run in parallel, its outcomes collected.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize};

use super::action::{Action, LoopArray};
use super::effect::{
    BackupAction, ExecAction, GrepSearchAction, ListDirAction, ReadFileAction, RestoreAction,
    WriteAction,
};
use super::map_invoke::MapChild;

/// The keys of a `map` besides those of the effect it runs for each item.
pub const MAP_KEYS: [&str; 5] = [
    "map",
    "item",
    "index",
    "max_concurrency",
    "tolerated_failures",
];

/// The effect kinds a `map` may run for each item.
pub const MAP_BODY_KINDS: [&str; 7] = [
    "exec",
    "read_file",
    "list_dir",
    "grep_search",
    "write",
    "backup",
    "restore",
];

/// Runs one effect, or one child protocol, per element of a list, in parallel:
/// `done.map.<id>` with every item's result in item order, or `error.map.<id>` with each
/// item's outcome once more items failed than tolerated. The mapping is the effect as written
/// (`exec`, a tool or a file action, with its `id`, `timeout`, `retry`, ...), or `id` and
/// `invoke`, plus the keys of the map; item `i` is the effect or child `<id>[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct MapAction {
    pub fan_out: FanOut,
    /// What runs for each item: its templates read the item's element.
    pub body: MapBody,
}

/// What a map runs for each item.
#[derive(Debug, Clone, PartialEq)]
pub enum MapBody {
    /// An effect (`exec`, a tool or a file action).
    Effect(Box<Action>),
    /// A child protocol.
    Child(MapChild),
}

impl MapBody {
    /// The map's id: the effect's, or the one written beside `invoke`.
    pub fn id(&self) -> Option<&str> {
        match self {
            MapBody::Effect(action) => action.effect_options().map(|options| options.id.as_str()),
            MapBody::Child(child) => Some(&child.id),
        }
    }
}

/// What a `map` adds to the effect it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FanOut {
    /// The list: literal elements, or a CEL expression evaluated once when the map starts.
    pub map: LoopArray,
    /// The context variable that holds an item's element while that item's arguments are
    /// evaluated (all of them when the map starts); its value is restored afterwards.
    pub item: String,
    /// A context variable that holds the item's position, from 0, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// At most this many items run at once (at least 1); all of them when omitted, up to the
    /// engine's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Failed items (error, timeout) the map tolerates: a count such as `1`, a percentage of
    /// the items such as `"25%"`, or an expression giving either (`max_failures`,
    /// `"${max_failures}"`), evaluated when the map starts. Default 0: the first failure fails
    /// the map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerated_failures: Option<Tolerance>,
}

/// How many failed items a map tolerates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Tolerance {
    /// At most this many items may fail.
    Count(u32),
    /// At most this share of the items may fail, e.g. `"25%"` (from 0% to 100%), or an
    /// expression giving a count or a percentage when the map starts.
    Text(String),
}

impl Serialize for MapAction {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut object = serde_json::to_value(&self.fan_out)
            .map_err(S::Error::custom)?
            .as_object()
            .cloned()
            .unwrap_or_default();
        let body = match &self.body {
            MapBody::Effect(action) => serde_json::to_value(&**action),
            MapBody::Child(child) => serde_json::to_value(child),
        };
        if let serde_json::Value::Object(body) = body.map_err(S::Error::custom)? {
            object.extend(body);
        }
        object.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for MapAction {
    /// Splits the mapping: the map's own keys, and the effect it runs, read as that action.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        let serde_json::Value::Object(mut object) = value else {
            return Err(D::Error::custom("a map is a mapping"));
        };
        let mut fan_out = serde_json::Map::new();
        for key in MAP_KEYS {
            if let Some(value) = object.remove(key) {
                fan_out.insert(key.to_string(), value);
            }
        }
        let fan_out: FanOut = serde_json::from_value(serde_json::Value::Object(fan_out))
            .map_err(|error| D::Error::custom(error.to_string()))?;
        let effect = MAP_BODY_KINDS
            .iter()
            .find(|kind| object.contains_key(**kind));
        let body = match (effect, object.contains_key("invoke")) {
            (Some(kind), true) => {
                return Err(D::Error::custom(format!(
                    "a map runs one effect or one child protocol per item, not both: remove `{kind}` or `invoke`"
                )));
            }
            (None, false) => {
                return Err(D::Error::custom(format!(
                    "a map runs one effect or one child protocol per item: add `invoke`, or one of {}",
                    MAP_BODY_KINDS.join(", ")
                )));
            }
            (None, true) => MapBody::Child(
                serde_json::from_value(serde_json::Value::Object(object))
                    .map_err(|error| D::Error::custom(error.to_string()))?,
            ),
            (Some(_), false) => MapBody::Effect(Box::new(
                serde_json::from_value(serde_json::Value::Object(object))
                    .map_err(|error| D::Error::custom(error.to_string()))?,
            )),
        };
        Ok(MapAction { fan_out, body })
    }
}

impl JsonSchema for MapAction {
    fn schema_name() -> Cow<'static, str> {
        "MapAction".into()
    }

    /// A closed mapping: the map's keys, and exactly one effect kind with that kind's keys, or
    /// `id` and `invoke`.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let fan_out = FanOut::json_schema(generator);
        let bodies = [
            ExecAction::json_schema(generator),
            ReadFileAction::json_schema(generator),
            ListDirAction::json_schema(generator),
            GrepSearchAction::json_schema(generator),
            WriteAction::json_schema(generator),
            BackupAction::json_schema(generator),
            RestoreAction::json_schema(generator),
            MapChild::json_schema(generator),
        ];
        let own = fan_out
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut every = own.clone();
        let branches: Vec<serde_json::Value> = bodies
            .iter()
            .zip(MAP_BODY_KINDS.into_iter().chain(["invoke"]))
            .map(|(body, kind)| {
                let mut properties = own.clone();
                if let Some(body_properties) = body
                    .get("properties")
                    .and_then(serde_json::Value::as_object)
                {
                    properties.extend(body_properties.clone());
                    // Each key's type is its branch's to check: listed here only as allowed.
                    every.extend(
                        body_properties
                            .keys()
                            .map(|key| (key.clone(), serde_json::Value::Bool(true))),
                    );
                }
                serde_json::json!({
                    "properties": properties,
                    "required": [kind],
                    "additionalProperties": false,
                })
            })
            .collect();
        schemars::json_schema!({
            "description": "Runs one effect, or one child protocol, per element of a list, in parallel: `done.map.<id>` with every item's result in item order, or `error.map.<id>` with each item's outcome once more items failed than tolerated. The mapping is the effect as written (`exec`, a tool or a file action, with its `id`, `timeout`, `retry`, ...), or `id` and `invoke`, plus the keys of the map; item `i` is the effect or child `<id>[i]`.",
            "type": "object",
            "required": ["map", "id", "item"],
            "properties": every,
            "additionalProperties": false,
            "oneOf": branches,
        })
    }
}
