//! Typed protocol inputs: declared types, defaults, bounds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A typed parameter of the protocol, supplied as `--input NAME=VALUE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The input's type. `duration` takes literals like `30s` and reads as milliseconds in expressions.
    #[serde(rename = "type")]
    pub kind: InputType,
    /// What the input means; shown by `validate` and in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The run refuses to start when a required input is not supplied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// The value used when the input is not supplied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// Smallest allowed value: a number, or a duration literal for `duration` inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Value>,
    /// Largest allowed value: a number, or a duration literal for `duration` inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Value>,
    /// The allowed values of an `enum` input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The type of each element of a `list` input (any type when omitted). Each element is
    /// read as this type: for `string`, `1.5` and `true` are the texts `"1.5"` and `"true"`; for
    /// `integer`, `number` and `boolean`, a text such as `"3"` is read as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<InputType>,
    /// A `string` input holding a secret (a token, a password): its value is masked as
    /// `***NAME***` in every log, status, telemetry line and output, and never stored, so a
    /// resume needs it again (`--input NAME=VALUE`). No default; at least 4 characters.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

/// The type of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// Any text.
    String,
    /// A whole number.
    Integer,
    /// A number, whole or not.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A duration literal such as `30s`, `2m`, `1h30m`; milliseconds in expressions.
    Duration,
    /// A list: `a,b` (comma-separated) or YAML/JSON list syntax on the command line, e.g.
    /// `[1, 2, 3]`.
    List,
    /// One of the strings listed in `values`.
    Enum,
}

impl InputType {
    pub fn name(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Duration => "duration",
            InputType::List => "list",
            InputType::Enum => "enum",
        }
    }
}
