//! A protocol's `inputs` as the JSON Schema of its MCP tool: types, bounds, enums, defaults, descriptions.

use serde_json::{Map, Value, json};

use crate::base::model::input::InputType;
use crate::pipeline::compile::machine::{InputNode, Machine};
use crate::runtime::runs::grants::PinnedInputs;

/// The input schema of the tool that starts `machine`: one property per input the operator did
/// not pin, the required ones listed, nothing else taken (an unknown or pinned input is
/// refused, as `run` refuses an unknown one).
pub fn tool_input_schema(machine: &Machine, pinned: &PinnedInputs) -> Map<String, Value> {
    let open = || {
        machine
            .inputs
            .iter()
            .filter(|input| !pinned.is_pinned(&input.name))
    };
    let properties: Map<String, Value> = open()
        .map(|input| (input.name.clone(), Value::Object(property(input))))
        .collect();
    let required: Vec<&str> = open()
        .filter(|input| input.required)
        .map(|input| input.name.as_str())
        .collect();
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    schema
}

/// One input's schema.
fn property(input: &InputNode) -> Map<String, Value> {
    let mut schema = type_schema(input.kind, input.items);
    if input.kind == InputType::Enum {
        schema.insert("enum".into(), json!(input.values));
    }
    // Bounds of a duration are milliseconds, while its value may be a literal: they are told in
    // the description rather than as JSON Schema bounds a literal would fail.
    let numeric = matches!(input.kind, InputType::Integer | InputType::Number);
    let mut description = input.description.clone().unwrap_or_default();
    for (keyword, bound) in [("minimum", input.minimum), ("maximum", input.maximum)] {
        let Some(bound) = bound else { continue };
        if numeric {
            schema.insert(keyword.into(), json!(bound));
        } else {
            let separator = if description.is_empty() { "" } else { "; " };
            description.push_str(&format!("{separator}{keyword} {bound} ms"));
        }
    }
    if input.secret {
        let separator = if description.is_empty() { "" } else { "; " };
        description.push_str(&format!(
            "{separator}secret: masked in every output, never stored"
        ));
    }
    if !description.is_empty() {
        schema.insert("description".into(), description.into());
    }
    if let Some(default) = &input.default {
        schema.insert("default".into(), default.to_json());
    }
    schema
}

/// The JSON types an input of `kind` takes (the text forms `run --input` takes are accepted
/// too: a list as `a,b`, a duration as `30s`).
fn type_schema(kind: InputType, items: Option<InputType>) -> Map<String, Value> {
    let mut schema = Map::new();
    match kind {
        InputType::String | InputType::Enum => {
            schema.insert("type".into(), "string".into());
        }
        InputType::Integer => {
            schema.insert("type".into(), "integer".into());
        }
        InputType::Number => {
            schema.insert("type".into(), "number".into());
        }
        InputType::Boolean => {
            schema.insert("type".into(), "boolean".into());
        }
        InputType::Duration => {
            schema.insert("type".into(), json!(["string", "integer"]));
            schema.insert(
                "description".into(),
                "a duration literal such as `30s`, or milliseconds".into(),
            );
        }
        InputType::List => {
            schema.insert("type".into(), "array".into());
            if let Some(items) = items {
                schema.insert("items".into(), Value::Object(type_schema(items, None)));
            }
        }
    }
    schema
}
