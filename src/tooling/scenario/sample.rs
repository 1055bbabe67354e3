//! Values the search sends and mocks: event data that fits its declared schema, and the output
//! a child protocol's final state declares.

use serde_json::{Map, Value, json};

use super::candidates::MAX_CANDIDATES;
use crate::pipeline::compile::expression::ValueTemplate;
use crate::pipeline::compile::machine::{Machine, StateKind};

/// How deep `instance` follows nested schemas: deeper than any event's data is written.
const MAX_DEPTH: usize = 8;

/// A small value that fits `schema` (a JSON Schema as `events:` writes one): each required
/// property, the first `enum` value, the least number and list allowed; `Null` for a schema
/// that takes any data (`{}`).
pub fn instance(schema: &Value) -> Value {
    instance_at(schema, 0)
}

fn instance_at(schema: &Value, depth: usize) -> Value {
    let Some(object) = schema.as_object() else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(constant) = object.get("const") {
        return constant.clone();
    }
    if let Some(first) = object
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return first.clone();
    }
    for alternatives in ["anyOf", "oneOf"] {
        if let Some(first) = object
            .get(alternatives)
            .and_then(Value::as_array)
            .and_then(|values| values.first())
        {
            return instance_at(first, depth + 1);
        }
    }
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        // `[string, "null"]`: the first that is not null.
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ if object.contains_key("properties") || object.contains_key("required") => "object",
        _ => return Value::Null,
    };
    let number = |name: &str| object.get(name).and_then(Value::as_f64);
    match kind {
        "object" => {
            let properties = object.get("properties").and_then(Value::as_object);
            let mut data = Map::new();
            for name in object
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let property = properties
                    .and_then(|properties| properties.get(name))
                    .unwrap_or(&Value::Null);
                data.insert(name.to_string(), instance_at(property, depth + 1));
            }
            Value::Object(data)
        }
        "array" => {
            let items = object.get("items").unwrap_or(&Value::Null);
            let count = number("minItems").unwrap_or(0.0) as usize;
            Value::Array(
                (0..count.min(MAX_CANDIDATES))
                    .map(|_| instance_at(items, depth + 1))
                    .collect(),
            )
        }
        "string" => {
            let length = number("minLength").unwrap_or(1.0).max(1.0) as usize;
            match object.get("format").and_then(Value::as_str) {
                Some("date-time") => json!(super::runner::DEFAULT_CLOCK),
                _ => json!("x".repeat(length.min(1024))),
            }
        }
        "integer" | "number" => {
            let least = number("minimum")
                .or_else(|| number("exclusiveMinimum").map(|bound| bound.floor() + 1.0))
                .unwrap_or(1.0);
            let greatest = number("maximum").unwrap_or(f64::MAX);
            let value = least.min(greatest);
            if kind == "integer" || value.fract() == 0.0 {
                json!(value.ceil() as i64)
            } else {
                json!(value)
            }
        }
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

/// `instance` with one property changed: each `enum` value and boolean of a property, and each
/// optional property given; what guards on the data compare with comes on top of these.
pub fn variants(schema: &Value) -> Vec<Value> {
    let base = instance(schema);
    let (Some(fields), Some(properties)) = (
        base.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) else {
        return Vec::new();
    };
    let mut variants = Vec::new();
    for (name, property) in properties {
        let mut values: Vec<Value> = property
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if property.get("type").and_then(Value::as_str) == Some("boolean") {
            values.extend([json!(true), json!(false)]);
        }
        if !fields.contains_key(name) {
            values.push(instance(property));
        }
        for value in values {
            let mut variant = fields.clone();
            variant.insert(name.clone(), value);
            let variant = Value::Object(variant);
            if variant != base && !variants.contains(&variant) && variants.len() < MAX_CANDIDATES {
                variants.push(variant);
            }
        }
    }
    variants
}

/// `data` over `base`: the keys of both, `data`'s where both have one (an object over an
/// object); `data` as it is otherwise.
pub fn over(base: &Value, data: &Value) -> Value {
    match (base, data) {
        (Value::Object(base), Value::Object(data)) => {
            let mut merged = base.clone();
            merged.extend(data.iter().map(|(key, value)| (key.clone(), value.clone())));
            Value::Object(merged)
        }
        _ => data.clone(),
    }
}

/// What a child protocol's run ends with, by final state: (its exit code, the output it
/// declares, each computed part standing as `"x"` unless a guard compares that field with
/// text: then that text, so a parent reading `r.verdict == 'approve'` sees one that passes;
/// and once more all `"x"`, so it sees one that does not).
pub fn child_endings(child: &Machine, compared: &[(String, String)]) -> Vec<(u8, Value)> {
    let mut endings = Vec::new();
    let finals = child.states.iter().filter(|state| {
        state.kind == StateKind::Final && state.parent.is_some_and(|parent| parent.index() == 0)
    });
    for state in finals {
        let Some(output) = &state.output else {
            endings.push((state.exit_code, Value::Null));
            continue;
        };
        for compared in [compared, &[]] {
            let ending = (state.exit_code, sample_of(output, None, compared));
            if !endings.contains(&ending) {
                endings.push(ending);
            }
        }
    }
    endings
}

fn sample_of(template: &ValueTemplate, key: Option<&str>, compared: &[(String, String)]) -> Value {
    let text = || {
        let literal = key.and_then(|key| {
            compared
                .iter()
                .find(|(field, _)| field == key)
                .map(|(_, value)| value.clone())
        });
        json!(literal.unwrap_or_else(|| "x".to_string()))
    };
    match template {
        ValueTemplate::Literal(value) => value.to_json(),
        ValueTemplate::Expression(_) | ValueTemplate::Text(_) => text(),
        ValueTemplate::List(items) => Value::Array(
            items
                .iter()
                .map(|item| sample_of(item, None, compared))
                .collect(),
        ),
        ValueTemplate::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(name, value)| (name.to_string(), sample_of(value, Some(name), compared)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_has_every_required_property_and_fits() {
        let schema = json!({
            "type": "object",
            "properties": {
                "content": { "type": "string", "minLength": 3 },
                "verdict": { "enum": ["approve", "reject"] },
                "score": { "type": "integer", "minimum": 5 },
                "note": { "type": "string" },
                "urgent": { "type": "boolean" }
            },
            "required": ["content", "verdict", "score"]
        });
        assert_eq!(
            instance(&schema),
            json!({ "content": "xxx", "verdict": "approve", "score": 5 })
        );
        let variants = variants(&schema);
        assert!(variants.contains(&json!({ "content": "xxx", "verdict": "reject", "score": 5 })));
        assert!(variants.contains(
            &json!({ "content": "xxx", "verdict": "approve", "score": 5, "urgent": true })
        ));
        assert!(
            variants.contains(
                &json!({ "content": "xxx", "verdict": "approve", "score": 5, "note": "x" })
            )
        );
        assert_eq!(instance(&json!({})), Value::Null);
        assert_eq!(
            over(&json!({ "a": 1, "b": 2 }), &json!({ "b": 3 })),
            json!({ "a": 1, "b": 3 })
        );
    }
}
