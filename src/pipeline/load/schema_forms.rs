//! Keys whose value takes several forms: each form is described as that key written that way, so an editor's hover names both.

use serde_json::{Map, Value};

/// The words between a key's own description and its form's.
const FORM_LEAD: &str = "Written here as:";

/// Rewrites, under every documented key whose value is a choice of forms (an untagged enum:
/// `anyOf` in the generated schema), the reference to the choice into the forms themselves,
/// each described as the key's text followed by the form's. yaml-language-server shows the
/// description of the innermost schema that matched, which is the form's; without this, hover
/// on `max_attempts: 3` said only "A whole number." The same applies to the values of a
/// documented mapping (`on:`): hover on an event key names the form of its transition.
pub fn describe_forms(root: &mut Value) {
    let Some(definitions) = root.get("definitions").cloned() else {
        return;
    };
    rewrite(root, &definitions);
}

fn rewrite(node: &mut Value, definitions: &Value) {
    match node {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get_mut("properties") {
                for property in properties.values_mut() {
                    describe_property(property, definitions);
                }
            }
            for (key, child) in object.iter_mut() {
                if !matches!(key.as_str(), "default" | "const" | "enum" | "examples") {
                    rewrite(child, definitions);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite(item, definitions)),
        _ => {}
    }
}

fn describe_property(property: &mut Value, definitions: &Value) {
    let Some(description) = property
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    if let Some(forms) = choice_forms(property, definitions, &description) {
        let object = property
            .as_object_mut()
            .expect("a property with a description");
        object.remove("$ref");
        object.remove("allOf");
        object.insert("anyOf".into(), Value::Array(forms));
        return;
    }
    // A mapping of names to values of several forms: each value is described under the key.
    if let Some(values) = property.get_mut("additionalProperties")
        && let Some(forms) = choice_forms(values, definitions, &description)
    {
        *values = Value::Object(Map::from_iter([("anyOf".to_string(), Value::Array(forms))]));
    }
}

/// The forms of the choice `schema` refers to, each described under `description`; `None`
/// when it refers to no choice.
fn choice_forms(schema: &Value, definitions: &Value, description: &str) -> Option<Vec<Value>> {
    let choice = referenced_choice(schema, definitions)?;
    let mut forms = Vec::new();
    collect_forms(choice, definitions, description, &mut forms, 0);
    Some(forms)
}

/// The `anyOf` branches of the definition a schema names by `$ref` (alone or in a one-element
/// `allOf`).
fn referenced_choice<'a>(schema: &Value, definitions: &'a Value) -> Option<&'a Vec<Value>> {
    let reference = schema.get("$ref").and_then(Value::as_str).or_else(|| {
        match schema.get("allOf").and_then(Value::as_array)?.as_slice() {
            [only] => only.get("$ref").and_then(Value::as_str),
            _ => None,
        }
    })?;
    let name = reference.strip_prefix("#/definitions/")?;
    definitions.get(name)?.get("anyOf")?.as_array()
}

/// Each branch as a form; a branch that is itself a choice (`One(TransitionSpec)`) contributes
/// its own forms, since `anyOf` of an `anyOf` takes the same values.
fn collect_forms(
    branches: &[Value],
    definitions: &Value,
    description: &str,
    forms: &mut Vec<Value>,
    depth: usize,
) {
    for branch in branches {
        if depth < 4
            && let Some(inner) = referenced_choice(branch, definitions)
        {
            collect_forms(inner, definitions, description, forms, depth + 1);
            continue;
        }
        let mut form = branch.clone();
        if let Some(object) = form.as_object_mut() {
            // `allOf: [{ $ref }]` → `$ref`: yaml-language-server takes a `$ref`'s sibling
            // description over the target's, but shows the target's under an `allOf`.
            if let Some(Value::Array(parts)) = object.get("allOf")
                && let [only] = parts.as_slice()
                && let Some(reference) = only.get("$ref").cloned()
            {
                object.remove("allOf");
                object.insert("$ref".into(), reference);
            }
            let own = object
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string);
            let text = match own {
                Some(own) => format!("{description}\n\n{FORM_LEAD} {own}"),
                None => description.to_string(),
            };
            object.remove("markdownDescription");
            object.insert("description".into(), Value::String(text));
        }
        forms.push(form);
    }
}
