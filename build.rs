//! Compiles the committed JSON Schemas into tables for the schema walk, and writes them without their descriptions for the validator that never reads them.

use std::path::Path;

// The compiler the crate's tests use too; the walk over its tables is the crate's alone.
#[allow(dead_code)]
#[path = "src/pipeline/load/schema_tables.rs"]
mod schema_tables;

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    for kind in ["protocol", "scenario", "library"] {
        let path = format!("schemas/{kind}.schema.json");
        println!("cargo::rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{path} is committed: {error}"));
        let stripped = without_descriptions(&text);
        write(&out, &format!("{kind}.validation.json"), &stripped);
        let schema: serde_json::Value = serde_json::from_str(&stripped)
            .unwrap_or_else(|error| panic!("{path} without descriptions is not JSON: {error}"));
        let tables = schema_tables::compile(&schema).to_rust();
        write(&out, &format!("{kind}.tables.rs"), &tables);
    }
}

fn write(out: &str, name: &str, text: &str) {
    std::fs::write(Path::new(out).join(name), text)
        .unwrap_or_else(|error| panic!("cannot write {name} into OUT_DIR: {error}"));
}

/// The pretty-printed schema without its `description` and `markdownDescription` lines (three
/// quarters of the file, which the validator would parse for nothing), and without the comma a
/// removed last member leaves before its closing bracket. A property named `description` is
/// an object, on a line of its own that does not start a string, and stays.
fn without_descriptions(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            !(line.starts_with("\"description\": \"")
                || line.starts_with("\"markdownDescription\": \""))
        })
        .collect();
    let mut stripped = String::with_capacity(text.len() / 3);
    for (index, line) in kept.iter().enumerate() {
        let closes = kept
            .get(index + 1)
            .is_some_and(|next| next.trim_start().starts_with(['}', ']']));
        let line = if closes {
            line.strip_suffix(',').unwrap_or(line)
        } else {
            line
        };
        stripped.push_str(line);
        stripped.push('\n');
    }
    stripped
}
