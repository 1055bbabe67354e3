//! The committed JSON Schema is exactly what the model generates.

#[test]
fn committed_schema_equals_the_generated_one() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/protocol.schema.json"
    ))
    .expect("schemas/protocol.schema.json is committed");
    let generated = protocol_run::pipeline::load::schema::protocol_schema_text();
    assert!(
        committed == generated,
        "schemas/protocol.schema.json is stale: run `cargo run -- schema --out schemas` and commit it"
    );
}

#[test]
fn committed_scenario_schema_equals_the_generated_one() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/scenario.schema.json"
    ))
    .expect("schemas/scenario.schema.json is committed");
    let generated = protocol_run::pipeline::load::schema::DocumentKind::Scenario.schema_text();
    assert!(
        committed == generated,
        "schemas/scenario.schema.json is stale: run `cargo run -- schema --out schemas`"
    );
}

#[test]
fn committed_library_schema_equals_the_generated_one() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/library.schema.json"
    ))
    .expect("schemas/library.schema.json is committed");
    let generated = protocol_run::pipeline::load::schema::DocumentKind::Library.schema_text();
    assert!(
        committed == generated,
        "schemas/library.schema.json is stale: run `cargo run -- schema --out schemas`"
    );
}

#[test]
fn schema_command_prints_the_same_schema() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("schema")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        protocol_run::pipeline::load::schema::protocol_schema_text()
    );
}

/// The generated schema without its string `description` and `markdownDescription` members.
fn without_descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(members) => {
            members.retain(|key, member| {
                !(matches!(key.as_str(), "description" | "markdownDescription")
                    && member.is_string())
            });
            members.values_mut().for_each(without_descriptions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(without_descriptions),
        _ => {}
    }
}

#[test]
fn the_validators_schema_is_the_generated_one_without_descriptions() {
    use protocol_run::pipeline::load::schema::DocumentKind;
    for kind in [
        DocumentKind::Protocol,
        DocumentKind::Scenario,
        DocumentKind::Library,
    ] {
        let validation: serde_json::Value = serde_json::from_str(kind.validation_text())
            .unwrap_or_else(|error| panic!("{kind:?}: build.rs wrote invalid JSON: {error}"));
        let mut generated = kind.schema();
        without_descriptions(&mut generated);
        assert!(
            validation == generated,
            "{kind:?}: the validator's schema differs"
        );
        // The protocol has a property called `description`: it stays.
        if kind == DocumentKind::Protocol {
            assert!(validation["properties"]["description"].is_object());
        }
    }
}
