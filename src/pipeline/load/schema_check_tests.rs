//! The schema walk answers as `jsonschema`'s validator does: on every YAML file of the repository and on thousands of variants of them.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::schema::DocumentKind;
use super::schema_check::{Verdict, check, visits};
use super::schema_tables::compile;
use super::yaml::{YamlLimits, parse};

const KINDS: [DocumentKind; 3] = [
    DocumentKind::Protocol,
    DocumentKind::Scenario,
    DocumentKind::Library,
];

#[test]
fn the_committed_schemas_use_only_keywords_the_tables_hold() {
    for kind in KINDS {
        assert!(
            kind.tables().unread.is_empty(),
            "{kind:?}: {:#?}",
            kind.tables().unread
        );
        // What build.rs compiled is what the compiler makes of the schema the validator reads.
        let compiled = compile(kind.parsed());
        let written = match kind {
            DocumentKind::Protocol => include_str!(concat!(env!("OUT_DIR"), "/protocol.tables.rs")),
            DocumentKind::Scenario => include_str!(concat!(env!("OUT_DIR"), "/scenario.tables.rs")),
            DocumentKind::Library => include_str!(concat!(env!("OUT_DIR"), "/library.tables.rs")),
        };
        assert!(
            compiled.to_rust() == written,
            "{kind:?}: build.rs compiled other tables"
        );
    }
}

/// The walk's answer on `schema` compiled here.
fn verdict(schema: Value, document: Value) -> Verdict {
    let compiled = compile(&schema);
    let unread: Vec<&str> = compiled.unread().iter().map(String::as_str).collect();
    check(&compiled.tables(&unread), &document)
}

#[test]
fn an_unknown_keyword_is_left_to_the_validator() {
    let unknown = [
        json!({"type": "string", "pattern": "^a"}),
        json!({"type": "string", "format": "email"}),
        json!({"$ref": "https://example.com/schema"}),
        json!({"patternProperties": {"a": true}}),
        json!({"items": [true, false]}),
        json!({"const": 1}),
        json!({"type": "strange"}),
    ];
    for schema in unknown {
        assert_eq!(
            verdict(schema.clone(), json!("b")),
            Verdict::Unknown,
            "{schema}"
        );
    }
}

#[test]
fn numbers_are_read_as_draft_7_reads_them() {
    let integer = || json!({"type": "integer", "minimum": 0, "maximum": 255});
    assert_eq!(verdict(integer(), json!(1.0)), Verdict::Conforms);
    assert_eq!(verdict(integer(), json!(1.5)), Verdict::Fails);
    assert_eq!(verdict(integer(), json!(-1)), Verdict::Fails);
    assert_eq!(verdict(integer(), json!(255)), Verdict::Conforms);
    assert_eq!(verdict(integer(), json!(256.0)), Verdict::Fails);
    assert_eq!(verdict(integer(), json!(u64::MAX)), Verdict::Fails);
    assert_eq!(
        verdict(json!({"type": "number"}), json!(2)),
        Verdict::Conforms
    );
    let choice = || json!({"enum": ["a", "b"]});
    assert_eq!(verdict(choice(), json!("b")), Verdict::Conforms);
    assert_eq!(verdict(choice(), json!("c")), Verdict::Fails);
    assert_eq!(verdict(choice(), json!(1)), Verdict::Fails);
}

#[test]
fn references_and_conditions_are_followed() {
    let schema = || {
        json!({
            "definitions": {
                "Step": {
                    "type": "object",
                    "properties": {"next": {"$ref": "#/definitions/Step"}, "kind": {"type": "string"}},
                    "additionalProperties": false,
                    "if": {"required": ["kind"]},
                    "then": {"required": ["next"]}
                }
            },
            "$ref": "#/definitions/Step"
        })
    };
    let valid = json!({"kind": "a", "next": {"next": {}}});
    assert_eq!(verdict(schema(), valid), Verdict::Conforms);
    assert_eq!(verdict(schema(), json!({"kind": "a"})), Verdict::Fails);
    assert_eq!(
        verdict(schema(), json!({"next": {"other": 1}})),
        Verdict::Fails
    );
    let circular =
        json!({"definitions": {"A": {"$ref": "#/definitions/A"}}, "$ref": "#/definitions/A"});
    assert_eq!(verdict(circular, json!(1)), Verdict::Unknown);
}

/// Every YAML file of the repository outside `target/` and `node_modules/`, with its kind.
fn documents() -> Vec<(PathBuf, DocumentKind, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut directories = vec![root.to_path_buf()];
    while let Some(directory) = directories.pop() {
        let Ok(entries) = std::fs::read_dir(&directory) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    directories.push(path);
                }
            } else if name.ends_with(".yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            let kind = if name.ends_with(".scenario.yaml") {
                DocumentKind::Scenario
            } else if name.ends_with(".library.yaml") {
                DocumentKind::Library
            } else {
                DocumentKind::Protocol
            };
            let text = std::fs::read_to_string(&path).ok()?;
            let document = parse(&text, &YamlLimits::default()).ok()?;
            Some((path, kind, document.value))
        })
        .collect()
}

/// JSON pointers of up to `limit` nodes of `value`, spread over the whole document.
fn pointers(value: &Value, limit: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut pending = vec![(String::new(), value)];
    while let Some((pointer, node)) = pending.pop() {
        match node {
            Value::Object(members) => {
                for (key, member) in members {
                    pending.push((format!("{pointer}/{}", escape(key)), member));
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    pending.push((format!("{pointer}/{index}"), item));
                }
            }
            _ => {}
        }
        all.push(pointer);
    }
    let stride = all.len().div_ceil(limit).max(1);
    all.into_iter().step_by(stride).collect()
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Values put in place of a node: every JSON type, numbers at the edges the schemas care about
/// (negative, fractional, integral floats, past `u32`), and near-miss mappings.
fn replacements(original: &Value) -> Vec<Value> {
    let mut values = vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(2.0),
        json!(4_294_967_296_u64),
        json!("text"),
        json!([]),
        json!({}),
        json!(["text"]),
    ];
    if let Value::Object(members) = original {
        let mut extended = members.clone();
        extended.insert("not_a_key".into(), json!(1));
        values.push(Value::Object(extended));
        for key in members.keys().take(4) {
            let mut reduced = members.clone();
            reduced.shift_remove(key);
            values.push(Value::Object(reduced));
        }
    }
    if let Value::Array(items) = original
        && let Some(first) = items.first()
    {
        let mut doubled = items.clone();
        doubled.push(first.clone());
        values.push(Value::Array(doubled));
        values.push(Value::Array(vec![json!({"not_a_key": 1})]));
    }
    values
}

#[test]
fn the_walk_and_the_validator_agree_on_every_file_and_its_variants() {
    let mut verdicts = [0usize; 2];
    let mut disagreements = Vec::new();
    let documents = documents();
    assert!(
        documents.len() >= 40,
        "found {} YAML files",
        documents.len()
    );
    let validators: Vec<_> = KINDS
        .iter()
        .map(|kind| jsonschema::draft7::new(kind.parsed()).expect("the schema compiles"))
        .collect();
    for (path, kind, document) in &documents {
        let tables = kind.tables();
        let validator = &validators[KINDS.iter().position(|each| each == kind).unwrap_or(0)];
        let mut compare = |variant: &Value, what: &str| {
            let expected = validator.is_valid(variant);
            let verdict = check(tables, variant);
            match verdict {
                Verdict::Conforms => verdicts[0] += 1,
                Verdict::Fails => verdicts[1] += 1,
                Verdict::Unknown => {}
            }
            let agrees = matches!(
                (verdict, expected),
                (Verdict::Conforms, true) | (Verdict::Fails, false)
            );
            if !agrees && disagreements.len() < 20 {
                disagreements.push(format!(
                    "{} {what}: walk {verdict:?}, validator {expected}",
                    path.display()
                ));
            }
        };
        compare(document, "as written");
        for pointer in pointers(document, 30) {
            let original = document.pointer(&pointer).cloned().unwrap_or_default();
            for replacement in replacements(&original) {
                let mut variant = document.clone();
                if let Some(node) = variant.pointer_mut(&pointer) {
                    *node = replacement.clone();
                }
                compare(&variant, &format!("with {pointer} = {replacement}"));
            }
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    // Both answers were given many times: the comparison cannot pass by saying one thing.
    assert!(verdicts[0] >= 500 && verdicts[1] >= 5_000, "{verdicts:?}");
}

#[test]
fn a_document_that_would_take_a_walk_exponential_time_is_left_to_the_validator() {
    // Each level counts both branches of a `oneOf`, each of which reads the whole level below:
    // 2^40 schemas for 40 nested lists, were it not for the visit limit.
    let schema = json!({
        "definitions": {"Nested": {"oneOf": [
            {"items": {"$ref": "#/definitions/Nested"}},
            {"items": {"$ref": "#/definitions/Nested"}}
        ]}},
        "$ref": "#/definitions/Nested"
    });
    let mut document = json!([]);
    for _ in 0..40 {
        document = json!([document]);
    }
    assert_eq!(verdict(schema, document), Verdict::Unknown);
}

#[test]
fn the_shipped_protocols_are_read_in_a_few_thousand_visits() {
    for file in ["protocols/ittw.yaml", "benches/workload.yaml"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let document = parse(&text, &YamlLimits::default()).unwrap().value;
        let tables = DocumentKind::Protocol.tables();
        assert_eq!(check(tables, &document), Verdict::Conforms, "{file}");
        let read = visits(tables, &document);
        // Far under the limit: the limit only stops documents built to blow the walk up.
        assert!(read < 20_000, "{file}: {read} visits");
    }
}
