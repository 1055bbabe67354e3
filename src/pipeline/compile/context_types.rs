//! `types:`: a context variable's declared JSON Schema, checked on its initial value and literal assignments at load, and on every other assignment when it runs.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::Compiler;
use super::data_schema::DataSchema;
use crate::base::diagnostic::did_you_mean;
use crate::base::model::Protocol;
use crate::base::value::Value;
use crate::pipeline::load::yaml::escape_pointer_token;

/// The compiled type of each context variable, by slot (`None`: any value), each initial value
/// checked against its type; every problem is reported at its place.
pub fn compile(compiler: &mut Compiler, protocol: &Protocol) -> Vec<Option<DataSchema>> {
    let mut types = vec![None; protocol.context.len()];
    for (name, schema) in &protocol.types {
        let pointer = format!("/types/{}", escape_pointer_token(name));
        let Some(slot) = protocol.context.get_index_of(name) else {
            let help = did_you_mean(name, protocol.context.keys().map(String::as_str))
                .unwrap_or_else(|| {
                    format!(
                        "declare it with its initial value under `context:`, e.g. `{name}: null`"
                    )
                });
            compiler.key_error(
                &pointer,
                format!("`types:` names `{name}`, which is not a context variable"),
                Some(help),
            );
            continue;
        };
        let compiled = match DataSchema::compile(schema) {
            Ok(compiled) => compiled,
            Err(message) => {
                compiler.value_error(
                    &pointer,
                    format!("the type of `{name}`: {message}"),
                    Some("write a JSON Schema, e.g. `{ type: object }`".into()),
                );
                continue;
            }
        };
        if let Err(problem) = compiled.check(&protocol.context[slot]) {
            compiler.value_error(
                &format!("/context/{}", escape_pointer_token(name)),
                format!("the initial value of `{name}` does not conform to its type: {problem}"),
                Some(format!(
                    "change the value, or the type under `types: {{ {name}: ... }}`"
                )),
            );
        }
        types[slot] = Some(compiled);
    }
    types
}

/// Checks `value`, the whole variable after an assignment, against the variable's type:
/// the `error.execution` message names the variable, the place in it and the rule.
pub fn check_assignment(
    types: &[Option<DataSchema>],
    slot: usize,
    name: &str,
    value: &Value,
) -> Result<(), String> {
    let Some(schema) = types.get(slot).and_then(Option::as_ref) else {
        return Ok(());
    };
    schema.check(&value.to_json()).map_err(|problem| {
        format!("`{name}` would not conform to its type ({problem}); the assignment is not made")
    })
}

/// The schema the value at `path` inside a variable of type `schema` must conform to, when
/// the type says (through `properties`, or an object `additionalProperties`). A key known only
/// when it runs (`None`) is under `additionalProperties` only where no `properties` are named.
pub fn schema_at<'a>(
    schema: &'a serde_json::Value,
    path: &[Option<String>],
) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(schema, |schema, key| {
        let properties = schema.get("properties");
        let named = match key {
            Some(key) => properties.and_then(|properties| properties.get(key)),
            None if properties.is_some_and(|properties| {
                properties.as_object().is_none_or(|named| !named.is_empty())
            }) =>
            {
                return None;
            }
            None => None,
        };
        named.or_else(|| {
            schema
                .get("additionalProperties")
                .filter(|more| more.is_object())
        })
    })
}

/// The value of an expression that is a literal (`'approved'`, `[1, 2]`, `{'a': true}`), as
/// JSON: its type is then known at load. `None` for anything that reads a name or calls a
/// function.
pub fn constant_value(text: &str) -> Option<serde_json::Value> {
    let program = cel::Program::compile(text).ok()?;
    if !is_literal(program.expression()) {
        return None;
    }
    let value = program.execute(&cel::Context::default()).ok()?;
    Value::from_cel(&value).map(|value| value.to_json())
}

fn is_literal(expression: &IdedExpr) -> bool {
    match &expression.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => list.elements.iter().all(is_literal),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => is_literal(&entry.key) && is_literal(&entry.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals_have_known_values_and_the_rest_do_not() {
        assert_eq!(constant_value("'approved'"), Some(json!("approved")));
        assert_eq!(
            constant_value("[1, 'a', {'b': null}]"),
            Some(json!([1, "a", { "b": null }]))
        );
        assert_eq!(constant_value("attempts + 1"), None);
        assert_eq!(constant_value("size([1])"), None);
    }

    #[test]
    fn the_schema_at_a_path_follows_properties() {
        let schema = json!({
            "type": "object",
            "properties": { "critic": { "enum": ["approved"] } },
            "additionalProperties": { "type": "string" }
        });
        let path = |keys: &[&str]| {
            keys.iter()
                .map(|key| Some(key.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            schema_at(&schema, &path(&["critic"])),
            Some(&json!({ "enum": ["approved"] }))
        );
        assert_eq!(
            schema_at(&schema, &path(&["other"])),
            Some(&json!({ "type": "string" }))
        );
        assert_eq!(schema_at(&json!({}), &path(&["x"])), None);
        // A computed key: under `additionalProperties` only when no key is named.
        let open = json!({ "type": "object", "additionalProperties": { "type": "string" } });
        assert_eq!(
            schema_at(&open, &[None]),
            Some(&json!({ "type": "string" }))
        );
        assert_eq!(schema_at(&schema, &[None]), None);
    }
}
