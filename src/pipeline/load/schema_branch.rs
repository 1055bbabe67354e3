//! Which branch of a failed `oneOf`/`anyOf` the author meant, read from the schema itself: the kind key present (`exec`, `send`), the one value allowed, or the form whose type fits.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// What to say about a value that fits none of the branches of a choice.
pub enum Choice<'a> {
    /// The branch the author meant: explain its errors.
    Branch(&'a [ValidationError<'static>]),
    /// Every branch is one allowed value (an enumeration written as `oneOf` of `const`s).
    OneOfValues(Vec<String>),
    /// Every branch is a mapping named by its own key, and this mapping has none of them.
    NoKindKey {
        /// What the choice is, in words (`action`, `step`), from the schema's title.
        what: String,
        kind_keys: Vec<String>,
    },
    /// The value has a type no branch takes.
    OtherType(Vec<String>),
}

/// Picks the branch of the failed choice `error` (a `oneOf` or `anyOf`) the author meant.
pub fn choose<'a>(
    schema: &Value,
    error: &ValidationError,
    context: &'a [Vec<ValidationError<'static>>],
) -> Choice<'a> {
    let instance = error.instance();
    let pointer = error.instance_path().as_str();
    let keyword_path = error.schema_path().as_str();
    let branches: Vec<&Value> = schema_at(schema, keyword_path)
        .and_then(Value::as_array)
        .map(|branches| branches.iter().map(|b| resolve(schema, b)).collect())
        .unwrap_or_default();

    if !branches.is_empty()
        && let Some(values) = allowed_values(&branches)
    {
        return Choice::OneOfValues(values);
    }
    if let Some(object) = instance.as_object()
        && let Some(kind_keys) = kind_keys(&branches)
    {
        return match kind_keys
            .iter()
            .position(|key| key.as_ref().is_some_and(|key| object.contains_key(key)))
            .and_then(|index| context.get(index))
        {
            Some(branch) => Choice::Branch(branch),
            None => Choice::NoKindKey {
                what: choice_title(schema, keyword_path),
                kind_keys: kind_keys.into_iter().flatten().collect(),
            },
        };
    }
    let wrong_type_here = |branch: &[ValidationError]| {
        branch.iter().any(|error| {
            error.instance_path().as_str() == pointer
                && matches!(error.kind(), ValidationErrorKind::Type { .. })
        })
    };
    if !context.is_empty() && context.iter().all(|branch| wrong_type_here(branch)) {
        let mut types: Vec<String> = Vec::new();
        for branch in &branches {
            for name in type_names(branch) {
                if !types.contains(&name) {
                    types.push(name);
                }
            }
        }
        if !types.is_empty() {
            return Choice::OtherType(types);
        }
    }
    context
        .iter()
        .filter(|branch| !branch.is_empty())
        .min_by_key(|branch| (wrong_type_here(branch), branch.len()))
        .map_or(Choice::Branch(&[]), |branch| Choice::Branch(branch))
}

/// The allowed values when every branch is a `const` (schemars writes documented enum
/// variants so).
fn allowed_values(branches: &[&Value]) -> Option<Vec<String>> {
    branches
        .iter()
        .map(|branch| {
            branch
                .get("const")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Each branch's kind key: a required key no other branch requires. `None` unless at least two
/// branches are mappings named so (a choice between a string and a mapping has no kind key).
fn kind_keys(branches: &[&Value]) -> Option<Vec<Option<String>>> {
    let required = |branch: &Value| -> Vec<String> {
        branch
            .get("required")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let all_required: Vec<Vec<String>> = branches.iter().map(|branch| required(branch)).collect();
    let keys: Vec<Option<String>> = all_required
        .iter()
        .enumerate()
        .map(|(index, keys)| {
            keys.iter()
                .find(|key| {
                    all_required
                        .iter()
                        .enumerate()
                        .all(|(other, keys)| other == index || !keys.contains(key))
                })
                .cloned()
        })
        .collect();
    (keys.iter().flatten().count() >= 2).then_some(keys)
}

/// `Action` → `action`: the title of the schema holding the choice, or `value`.
fn choice_title(schema: &Value, keyword_path: &str) -> String {
    let owner = keyword_path
        .rsplit_once('/')
        .and_then(|(parent, _)| schema_at(schema, parent));
    owner
        .and_then(|owner| owner.get("title"))
        .and_then(Value::as_str)
        .map_or_else(|| "value".to_string(), str::to_lowercase)
}

/// The JSON types a branch takes, in words for messages.
fn type_names(branch: &Value) -> Vec<String> {
    let names = match branch.get("type") {
        Some(Value::String(name)) => vec![name.clone()],
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    names.iter().map(|name| type_word(name)).collect()
}

/// A JSON type in the words of the YAML author: `array` is a list, `object` a mapping.
pub fn type_word(name: &str) -> String {
    match name {
        "array" => "a list".to_string(),
        "object" => "a mapping".to_string(),
        "integer" => "a whole number".to_string(),
        "null" => "nothing (null)".to_string(),
        "string" | "number" | "boolean" => format!("a {name}"),
        _ => name.to_string(),
    }
}

/// A branch's own schema: through `$ref`s and the one-element `allOf` schemars wraps a
/// titled reference in.
fn resolve<'a>(schema: &'a Value, mut node: &'a Value) -> &'a Value {
    // Bounded: a reference cycle in a generated schema must not hang the loader.
    for _ in 0..8 {
        if let Some(target) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| schema.pointer(reference.strip_prefix('#')?))
        {
            node = target;
            continue;
        }
        match node.get("allOf").and_then(Value::as_array) {
            Some(parts) if parts.len() == 1 && node.get("properties").is_none() => {
                node = &parts[0];
            }
            _ => break,
        }
    }
    node
}

/// The schema node at a validation error's keyword path, following `$ref` segments.
pub fn schema_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = schema;
    for segment in path.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        node = match segment.as_str() {
            "$ref" => {
                let reference = node.get("$ref")?.as_str()?;
                schema.pointer(reference.strip_prefix('#')?)?
            }
            _ => match node {
                Value::Object(object) => object.get(&segment)?,
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            },
        };
    }
    Some(node)
}
