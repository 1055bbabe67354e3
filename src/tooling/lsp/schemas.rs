//! What hover and completion say of a JSON Schema (a declared event's data, a typed context variable): its type and allowed values, in one line.

use serde_json::{Map, Value};

/// The most values of one `enum` shown; the rest are counted.
const MAX_VALUES_SHOWN: usize = 20;

/// How deep `items` of lists are followed (`list of list of ...`).
const MAX_DEPTH: usize = 4;

/// A property of an object schema: its name, what it is, and its `description`.
#[derive(Debug, Clone)]
pub struct Property {
    pub name: String,
    /// The rule in one line: `string, required, one of "approved", "rejected"`.
    pub summary: String,
    pub description: Option<String>,
}

/// The properties `schema` lists, in its order, each with whether `required` names it.
pub fn properties(schema: &Value) -> Vec<Property> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, rule)| {
            let mut summary = summarize(rule);
            if required.contains(&name.as_str()) {
                summary.push_str(", required");
            }
            summary.push_str(&allowed_values(rule));
            Property {
                name: name.clone(),
                summary,
                description: rule
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        })
        .collect()
}

/// The schema's type with the values it allows: `integer`, `string, one of "a", "b"`,
/// `list of string, one of "x", "y"`.
pub fn describe(schema: &Value) -> String {
    format!("{}{}", summarize(schema), allowed_values(schema))
}

/// The type alone: `string`, `integer or null`, `list of string`, `map of integer`, an
/// object with its property names, `any`.
fn summarize(schema: &Value) -> String {
    summarize_at(schema, 0)
}

fn summarize_at(schema: &Value, depth: usize) -> String {
    let Some(rule) = schema.as_object() else {
        // `true` takes anything; `false` nothing.
        return if schema == &Value::Bool(false) {
            "nothing".into()
        } else {
            "any".into()
        };
    };
    let kind = match rule.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    };
    if kind == "array"
        && let Some(items) = rule.get("items")
        && depth < MAX_DEPTH
    {
        return format!("list of {}", summarize_at(items, depth + 1))
            + &allowed_values_of(items.as_object());
    }
    if kind == "object" || kind == "any" {
        if let Some(properties) = rule.get("properties").and_then(Value::as_object) {
            let names: Vec<String> = properties.keys().map(|name| format!("`{name}`")).collect();
            return format!("object with {}", names.join(", "));
        }
        if let Some(values) = rule
            .get("additionalProperties")
            .filter(|values| values.is_object())
            && depth < MAX_DEPTH
        {
            return format!("map of {}", summarize_at(values, depth + 1))
                + &allowed_values_of(values.as_object());
        }
    }
    kind
}

/// `, one of "a", "b"` for an `enum`, `, exactly "a"` for a `const`; empty otherwise.
fn allowed_values(schema: &Value) -> String {
    allowed_values_of(schema.as_object())
}

fn allowed_values_of(rule: Option<&Map<String, Value>>) -> String {
    let Some(rule) = rule else {
        return String::new();
    };
    if let Some(values) = rule.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values
            .iter()
            .take(MAX_VALUES_SHOWN)
            .map(Value::to_string)
            .collect();
        if values.len() > MAX_VALUES_SHOWN {
            shown.push(format!("and {} more", values.len() - MAX_VALUES_SHOWN));
        }
        return format!(", one of {}", shown.join(", "));
    }
    match rule.get("const") {
        Some(value) => format!(", exactly {value}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_and_allowed_values_read_in_one_line() {
        assert_eq!(describe(&json!({ "type": "integer" })), "integer");
        assert_eq!(
            describe(&json!({ "enum": ["approved", "rejected"] })),
            "any, one of \"approved\", \"rejected\""
        );
        assert_eq!(
            describe(&json!({ "type": "array", "items": { "enum": ["a", "b"] } })),
            "list of any, one of \"a\", \"b\""
        );
        assert_eq!(
            describe(&json!({
                "type": "object",
                "additionalProperties": { "enum": ["approved", "rejected"] },
            })),
            "map of any, one of \"approved\", \"rejected\""
        );
        assert_eq!(
            describe(&json!({ "type": ["string", "null"], "const": "x" })),
            "string or null, exactly \"x\""
        );
        let listed = properties(&json!({
            "properties": { "verdict": { "type": "string", "enum": ["ok", "no"] }, "note": {} },
            "required": ["verdict"],
        }));
        let lines: Vec<String> = listed
            .iter()
            .map(|property| format!("{}: {}", property.name, property.summary))
            .collect();
        assert_eq!(
            lines,
            [
                "verdict: string, required, one of \"ok\", \"no\"",
                "note: any"
            ]
        );
    }
}
