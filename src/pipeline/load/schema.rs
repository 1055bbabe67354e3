//! The JSON Schema generated from the model, and validation that maps its errors to YAML positions.

use std::sync::OnceLock;

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::schema_branch::{self, Choice};
use super::schema_check::{self, Verdict};
use super::schema_forms;
use super::schema_tables::{Member, Node, Span, Tables};
use super::set_aside::Violation;
use super::source::{Part, Source};
use crate::base::diagnostic::{Diagnostic, did_you_mean};
use crate::base::model::Protocol;

/// The kinds of YAML document the engine reads, each with its generated schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    Protocol,
    Scenario,
    /// A file of blocks and retry policies that protocols import.
    Library,
}

impl DocumentKind {
    /// The schema as JSON, generated from the model types (draft-07, for yaml-language-server).
    pub fn schema(self) -> Value {
        match self {
            DocumentKind::Protocol => generate::<Protocol>("Protocol"),
            DocumentKind::Scenario => {
                generate::<crate::base::model::scenario::ScenarioFile>("Scenario")
            }
            DocumentKind::Library => generate::<crate::base::model::Library>("Library"),
        }
    }

    /// The schema file's exact text: pretty JSON with a final newline.
    pub fn schema_text(self) -> String {
        let mut text = serde_json::to_string_pretty(&self.schema()).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The file name of the committed schema.
    pub fn schema_file_name(self) -> &'static str {
        match self {
            DocumentKind::Protocol => "protocol.schema.json",
            DocumentKind::Scenario => "scenario.schema.json",
            DocumentKind::Library => "library.schema.json",
        }
    }

    /// The committed schema file (which `tests/schema.rs` keeps equal to `schema_text()`)
    /// without its descriptions, as `build.rs` writes it: parsing it is several times cheaper
    /// than generating the schema from the types again, and than parsing the descriptions too.
    pub fn validation_text(self) -> &'static str {
        match self {
            DocumentKind::Protocol => {
                include_str!(concat!(env!("OUT_DIR"), "/protocol.validation.json"))
            }
            DocumentKind::Scenario => {
                include_str!(concat!(env!("OUT_DIR"), "/scenario.validation.json"))
            }
            DocumentKind::Library => {
                include_str!(concat!(env!("OUT_DIR"), "/library.validation.json"))
            }
        }
    }

    /// The schema compiled by `build.rs` into tables the schema walk reads.
    pub(super) fn tables(self) -> &'static Tables<'static> {
        static PROTOCOL: Tables<'static> =
            include!(concat!(env!("OUT_DIR"), "/protocol.tables.rs"));
        static SCENARIO: Tables<'static> =
            include!(concat!(env!("OUT_DIR"), "/scenario.tables.rs"));
        static LIBRARY: Tables<'static> = include!(concat!(env!("OUT_DIR"), "/library.tables.rs"));
        match self {
            DocumentKind::Protocol => &PROTOCOL,
            DocumentKind::Scenario => &SCENARIO,
            DocumentKind::Library => &LIBRARY,
        }
    }

    /// The schema as JSON, parsed once per process when first needed.
    pub(super) fn parsed(self) -> &'static Value {
        static PROTOCOL: OnceLock<Value> = OnceLock::new();
        static SCENARIO: OnceLock<Value> = OnceLock::new();
        static LIBRARY: OnceLock<Value> = OnceLock::new();
        let cell = match self {
            DocumentKind::Protocol => &PROTOCOL,
            DocumentKind::Scenario => &SCENARIO,
            DocumentKind::Library => &LIBRARY,
        };
        cell.get_or_init(|| {
            // A committed file that does not parse can only come from a broken checkout; the
            // generated schema is the same document.
            serde_json::from_str(self.validation_text()).unwrap_or_else(|_| self.schema())
        })
    }

    /// The schema's validator, built once per process and only for a document that does not
    /// conform (`schema_check`): building it costs more than all the rest of `validate`.
    fn validator(self) -> &'static jsonschema::Validator {
        static PROTOCOL: OnceLock<jsonschema::Validator> = OnceLock::new();
        static SCENARIO: OnceLock<jsonschema::Validator> = OnceLock::new();
        static LIBRARY: OnceLock<jsonschema::Validator> = OnceLock::new();
        let cell = match self {
            DocumentKind::Protocol => &PROTOCOL,
            DocumentKind::Scenario => &SCENARIO,
            DocumentKind::Library => &LIBRARY,
        };
        cell.get_or_init(|| {
            jsonschema::draft7::new(self.parsed())
                .unwrap_or_else(|error| panic!("the generated {self:?} schema is invalid: {error}"))
        })
    }
}

fn generate<T: schemars::JsonSchema>(title: &str) -> Value {
    let settings = schemars::generate::SchemaSettings::draft07();
    let generator = settings.into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    polish_for_editors(&mut value, title);
    value
}

/// The protocol schema as JSON.
pub fn protocol_schema() -> Value {
    DocumentKind::Protocol.schema()
}

/// The protocol schema file's exact text.
pub fn protocol_schema_text() -> String {
    DocumentKind::Protocol.schema_text()
}

/// Gives every definition a `title` and mirrors each `description` into `markdownDescription`,
/// which yaml-language-server shows on hover and in completions.
fn polish_for_editors(root: &mut Value, root_title: &str) {
    if let Some(object) = root.as_object_mut() {
        object
            .entry("title")
            .or_insert_with(|| Value::String(root_title.to_string()));
        if let Some(Value::Object(definitions)) = object.get_mut("definitions") {
            for (name, definition) in definitions.iter_mut() {
                if let Some(definition) = definition.as_object_mut() {
                    definition
                        .entry("title")
                        .or_insert_with(|| Value::String(humanize(name)));
                }
            }
        }
    }
    drop_null_options(root);
    schema_forms::describe_forms(root);
    mirror_descriptions(root);
}

/// An omitted key is how YAML authors say "none": `Option` fields accept the value's own type,
/// not `null`, so editors offer only meaningful completions.
fn drop_null_options(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get("type")
                && types.len() == 2
                && types.contains(&Value::from("null"))
            {
                let other = types
                    .iter()
                    .find(|kind| *kind != "null")
                    .cloned()
                    .unwrap_or_default();
                object.insert("type".into(), other);
            }
            if let Some(Value::Array(branches)) = object.get("anyOf")
                && branches.len() == 2
                && let Some(null_branch) = branches
                    .iter()
                    .position(|branch| branch.get("type") == Some(&Value::from("null")))
                && let Some(Value::Object(kept)) = branches.get(1 - null_branch).cloned()
            {
                object.remove("anyOf");
                for (key, entry) in kept {
                    object.entry(key).or_insert(entry);
                }
            }
            for (key, child) in object.iter_mut() {
                if !matches!(key.as_str(), "default" | "const" | "enum" | "examples") {
                    drop_null_options(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_options),
        _ => {}
    }
}

fn mirror_descriptions(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(description)) = object.get("description") {
                let description = description.clone();
                object.insert("markdownDescription".into(), Value::String(description));
            }
            for (key, child) in object.iter_mut() {
                // `default`, `const` and `enum` hold instance data, not schemas.
                if !matches!(key.as_str(), "default" | "const" | "enum" | "examples") {
                    mirror_descriptions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mirror_descriptions),
        _ => {}
    }
}

/// `LogAction` → `Log action`.
fn humanize(name: &str) -> String {
    let mut words = String::new();
    for (index, character) in name.chars().enumerate() {
        if character.is_uppercase() && index > 0 {
            words.push(' ');
            words.extend(character.to_lowercase());
        } else {
            words.push(character);
        }
    }
    words
}

/// Every schema violation in a protocol, located in the YAML source.
pub fn validate(source: &Source, document: &Value) -> Vec<Diagnostic> {
    validate_document(DocumentKind::Protocol, source, document)
}

/// Every schema violation in a document of this kind, located in the YAML source.
pub fn validate_document(kind: DocumentKind, source: &Source, document: &Value) -> Vec<Diagnostic> {
    violations(kind, source, document)
        .into_iter()
        .map(|violation| violation.diagnostic)
        .collect()
}

/// Every schema violation in a document of this kind, with the part of the document it makes
/// unusable.
pub fn violations(kind: DocumentKind, source: &Source, document: &Value) -> Vec<Violation> {
    if schema_check::check(kind.tables(), document) == Verdict::Conforms {
        return Vec::new();
    }
    let schema = kind.parsed();
    let validator = kind.validator();
    let mut violations = Vec::new();
    for error in validator.iter_errors(document) {
        explain(source, schema, &error, &mut violations);
    }
    violations.dedup();
    violations
}

/// A key with no value right after a comma in a flow mapping (`{ description: relative to repo,
/// absolute otherwise }`) is most likely the rest of the text before it: the help says to quote
/// that text.
fn text_split_by_comma(source: &Source, offset: usize, key: &str) -> Option<String> {
    let line_start = source.text[..offset].rfind('\n').map_or(0, |at| at + 1);
    let before = source.text[line_start..offset].trim_end();
    let before = before.strip_suffix(',')?;
    // The entry before the comma, back to the separator that began it.
    let entry = before[before.rfind([',', '{'])? + 1..].trim();
    let (previous_key, text) = entry.split_once(": ")?;
    let text = text.trim();
    if text.starts_with(['"', '\'', '{', '[']) {
        return None;
    }
    Some(format!(
        "in a `{{ ... }}` mapping a comma ends a value, so `{key}` was read as a key of its own; if \
         it belongs to the text before it, quote that text: `{previous_key}: \"{text}, {key}\"`"
    ))
}

/// Turns one validation error into diagnostics, descending into the `oneOf`/`anyOf` branch
/// the author most likely meant.
fn explain(source: &Source, schema: &Value, error: &ValidationError, out: &mut Vec<Violation>) {
    let pointer = error.instance_path().as_str().to_string();
    let instance = error.instance();
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let allowed = allowed_properties(schema, error.schema_path().as_str());
            for key in unexpected {
                let key_pointer = format!("{pointer}/{}", super::yaml::escape_pointer_token(key));
                let location = source.location(&key_pointer, Part::Key);
                let help = misplaced_timing(key, &allowed)
                    .or_else(|| {
                        let valueless = instance.get(key).is_some_and(Value::is_null);
                        valueless
                            .then(|| text_split_by_comma(source, location.position.offset, key))
                            .flatten()
                    })
                    .or_else(|| did_you_mean(key, allowed.iter().map(String::as_str)))
                    .or_else(|| {
                        (!allowed.is_empty())
                            .then(|| format!("allowed keys here: {}", allowed.join(", ")))
                    });
                let diagnostic = Diagnostic::error(format!("unknown key `{key}`"))
                    .at(location)
                    .with_label("not allowed here")
                    .with_optional_help(help);
                out.push(Violation::node(key_pointer, diagnostic));
            }
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let diagnostic = Diagnostic::error(format!("missing required key `{name}`"))
                .at(source.location(&pointer, Part::Key))
                .with_help(format!("add `{name}:` to this mapping"));
            out.push(Violation::node(pointer, diagnostic));
        }
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            match schema_branch::choose(schema, error, context) {
                Choice::Branch(branch) => {
                    for inner in branch {
                        explain(source, schema, inner, out);
                    }
                }
                Choice::OneOfValues(values) => out.push(Violation::value(
                    &pointer,
                    not_allowed_value(source, &pointer, instance, &values),
                )),
                // Not an action (or step) at all: the list means the same without it.
                Choice::NoKindKey { what, kind_keys } => {
                    let diagnostic = no_kind_key(source, &pointer, instance, &what, &kind_keys);
                    out.push(Violation::node(pointer, diagnostic))
                }
                Choice::OtherType(types) => out.push(Violation::value(
                    &pointer,
                    Diagnostic::error(format!(
                        "expected {}, found {}",
                        types.join(" or "),
                        describe(instance)
                    ))
                    .at(source.location(&pointer, Part::Value))
                    .with_optional_help(type_help(instance, &types.join(" "))),
                )),
            }
        }
        ValidationErrorKind::Type { .. } => {
            out.push(Violation::value(
                &pointer,
                Diagnostic::error(format!(
                    "expected {}, found {}",
                    expected_types(error),
                    describe(instance)
                ))
                .at(source.location(&pointer, Part::Value))
                .with_optional_help(type_help(instance, &expected_types(error))),
            ));
        }
        ValidationErrorKind::Enum { options } => {
            let choices: Vec<String> = options
                .as_array()
                .map(|values| {
                    values
                        .iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Violation::value(
                &pointer,
                not_allowed_value(source, &pointer, instance, &choices),
            ));
        }
        // Only a state key on the wrong kind of state is refused so (`model::state_kinds`), for
        // editors; the compiler reports it with what to write instead, and the key cannot
        // mislead the compiler's other checks.
        ValidationErrorKind::FalseSchema => {}
        _ => out.push(Violation::value(
            &pointer,
            Diagnostic::error(error.to_string()).at(source.location(&pointer, Part::Value)),
        )),
    }
}

/// `delay` or `until` on a transition under `on` or `always`: where it belongs.
fn misplaced_timing(key: &str, allowed: &[String]) -> Option<String> {
    let is_transition = allowed.iter().any(|name| name == "guard");
    (is_transition && matches!(key, "delay" | "until")).then(|| {
        format!("`{key}` belongs to transitions under `after`: move this transition to the state's `after:` list")
    })
}

/// A value outside an enumeration: the allowed values, and the nearest one.
fn not_allowed_value(
    source: &Source,
    pointer: &str,
    instance: &Value,
    allowed: &[String],
) -> Diagnostic {
    let given = instance.as_str().unwrap_or_default();
    let listed = format!("allowed values: {}", allowed.join(", "));
    let help = match did_you_mean(given, allowed.iter().map(String::as_str)) {
        Some(suggestion) => format!("{suggestion} ({listed})"),
        None => listed,
    };
    Diagnostic::error(format!("{} is not an allowed value", describe(instance)))
        .at(source.location(pointer, Part::Value))
        .with_help(help)
}

/// A mapping in a choice of kinds (an action, a scenario step) that names no kind.
fn no_kind_key(
    source: &Source,
    pointer: &str,
    instance: &Value,
    what: &str,
    kind_keys: &[String],
) -> Diagnostic {
    let keys: Vec<&str> = instance
        .as_object()
        .map(|object| object.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let help = keys
        .iter()
        .find_map(|key| did_you_mean(key, kind_keys.iter().map(String::as_str)))
        .unwrap_or_else(|| format!("start the {what} with one of: {}", kind_keys.join(", ")));
    let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    Diagnostic::error(format!(
        "{article} {what} needs one of the keys that name its kind ({}); this one has none",
        kind_keys.join(", ")
    ))
    .at(source.location(pointer, Part::Value))
    .with_help(help)
}

fn expected_types(error: &ValidationError) -> String {
    // The message reads `X is not of type "string"` (or `of types "boolean", "object"`):
    // keep the part after "of type(s)", in the words the other messages use.
    let message = error.to_string();
    match message.rsplit_once("is not of type") {
        Some((_, types)) => types
            .strip_prefix('s')
            .unwrap_or(types)
            .split(',')
            .map(|name| schema_branch::type_word(name.trim().trim_matches('"')))
            .collect::<Vec<_>>()
            .join(" or "),
        None => "another type".to_string(),
    }
}

fn type_help(instance: &Value, expected: &str) -> Option<String> {
    match instance {
        Value::Number(_) | Value::Bool(_) if expected.contains("string") => {
            Some("quote the value to make it a string".into())
        }
        Value::Null => Some("write a value after the colon, or remove the key".into()),
        _ => None,
    }
}

/// A short description of a value for messages: `the string "x"`, `a mapping`, ...
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing (null)".into(),
        Value::Bool(flag) => format!("the boolean {flag}"),
        Value::Number(number) => format!("the number {number}"),
        Value::String(text) => format!("the string \"{text}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

/// The property names a schema location allows, following `$ref`s along the keyword path.
fn allowed_properties(schema: &Value, schema_path: &str) -> Vec<String> {
    // The path ends in `additionalProperties`: the object schema is the one holding it.
    let parent = schema_path
        .rsplit_once('/')
        .map_or("", |(parent, _)| parent);
    let Some(mut node) = schema_branch::schema_at(schema, parent) else {
        return Vec::new();
    };
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        node = resolve_reference(schema, reference).unwrap_or(node);
    }
    node.get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

fn resolve_reference<'a>(schema: &'a Value, reference: &str) -> Option<&'a Value> {
    schema.pointer(reference.strip_prefix('#')?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::action::ACTION_KINDS;

    #[test]
    fn every_definition_has_a_title_and_is_closed() {
        let schema = protocol_schema();
        assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
        let definitions = schema["definitions"].as_object().unwrap();
        for (name, definition) in definitions {
            assert!(definition.get("title").is_some(), "{name} has no title");
            assert!(
                definition.get("description").is_some(),
                "{name} has no description"
            );
            if definition.get("type") == Some(&Value::String("object".into()))
                && definition.get("properties").is_some()
            {
                assert_eq!(definition["additionalProperties"], false, "{name} is open");
            }
        }
    }

    #[test]
    fn only_transitions_under_after_have_delay_and_until() {
        let schema = protocol_schema();
        let definitions = &schema["definitions"];
        for key in ["delay", "until"] {
            assert!(definitions["Transition"]["properties"].get(key).is_none());
            assert!(
                definitions["DelayedTransition"]["properties"]
                    .get(key)
                    .is_some()
            );
        }
        assert_eq!(
            definitions["State"]["properties"]["after"]["items"]["$ref"],
            "#/definitions/DelayedTransition"
        );
    }

    #[test]
    fn action_kinds_are_one_of_closed_objects_with_one_required_key() {
        let schema = protocol_schema();
        let branches = schema["definitions"]["Action"]["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), ACTION_KINDS.len());
        for (branch, kind) in branches.iter().zip(ACTION_KINDS) {
            let reference = branch["$ref"].as_str().unwrap();
            let definition = resolve_reference(&schema, reference).unwrap();
            let required = definition["required"].as_array().unwrap();
            assert_eq!(required[0], kind, "the distinguishing key comes first");
            for other in ACTION_KINDS.iter().filter(|other| **other != kind) {
                assert!(!required.contains(&serde_json::json!(other)));
            }
            assert_eq!(definition["additionalProperties"], false);
        }
    }
}
