//! Keys that belong to one kind of state (`exit_code` to final states, `history` to history states), offered by editors only where they apply.

use schemars::Schema;
use serde_json::{Value, json};

/// Each kind, with the keys only it takes.
const KEYS_BY_KIND: [(&str, &[&str]); 2] = [
    ("final", &["exit_code", "output"]),
    ("history", &["history", "target"]),
];

/// Hides the kind-specific keys from completion (`doNotSuggest`, which yaml-language-server
/// honours), offers them again under `if: { type: KIND }`, and refuses them (`false`) on every
/// other kind, so the editor flags `exit_code` on an atomic state as the CLI does. The keys stay
/// in `properties`: draft-07 has no `unevaluatedProperties` to close the mapping otherwise.
pub(super) fn offer_keys_by_kind(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let mut conditions = Vec::new();
    for (kind, keys) in KEYS_BY_KIND {
        let mut offered = serde_json::Map::new();
        for key in keys {
            let Some(Value::Object(property)) = object
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(*key))
            else {
                continue;
            };
            // Only the text: a copy of the validating keywords would report each mistake twice.
            let description = property.remove("description").unwrap_or_default();
            // Under `allOf`: yaml-language-server replaces a property that is a `$ref` by its
            // target, dropping `doNotSuggest` with it.
            let validating = Value::Object(std::mem::take(property));
            property.insert("description".into(), description.clone());
            property.insert("doNotSuggest".into(), Value::Bool(true));
            property.insert("allOf".into(), json!([validating]));
            offered.insert((*key).to_string(), json!({ "description": description }));
        }
        let refused: serde_json::Map<String, Value> = keys
            .iter()
            .map(|key| ((*key).to_string(), Value::Bool(false)))
            .collect();
        conditions.push(json!({
            "if": { "properties": { "type": { "const": kind } }, "required": ["type"] },
            "then": { "properties": offered },
            "else": { "properties": refused }
        }));
    }
    object.insert("allOf".into(), Value::Array(conditions));
}
