//! A JSON Schema the protocol writes for data (a declared event's, a typed context variable's): bounded, compiled once at load, checked at run time.

use std::sync::Arc;

use serde_json::Value;

/// The most nodes (objects, arrays and scalars) one data schema may have: a protocol's schemas
/// are small, and one of a million nodes would only slow every load.
pub const MAX_SCHEMA_NODES: usize = 10_000;

/// The deepest one data schema may nest.
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// The most bytes a compiled `pattern` regex may take: the `regex` engine runs in linear
/// time, and this bounds its memory.
const MAX_PATTERN_BYTES: usize = 1 << 20;

/// The most violations one check reports: the first few tell what is wrong.
const MAX_REPORTED_VIOLATIONS: usize = 3;

/// A compiled data schema and the schema as written (read again to check `event.data.x`).
#[derive(Debug, Clone)]
pub struct DataSchema {
    pub schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl DataSchema {
    /// Compiles `schema`, or says why it cannot be one (too big, too deep, not a schema).
    pub fn compile(schema: &Value) -> Result<DataSchema, String> {
        let (nodes, depth) = measure(schema);
        if nodes > MAX_SCHEMA_NODES {
            return Err(format!(
                "the schema has {nodes} nodes, more than the limit of {MAX_SCHEMA_NODES} \
                 (MAX_SCHEMA_NODES)"
            ));
        }
        if depth > MAX_SCHEMA_DEPTH {
            return Err(format!(
                "the schema nests {depth} levels deep, more than the limit of \
                 {MAX_SCHEMA_DEPTH} (MAX_SCHEMA_DEPTH)"
            ));
        }
        // `pattern` runs on the linear-time `regex` engine, so data cannot make a check
        // backtrack without end; remote `$ref`s cannot be fetched (the crate is built without
        // resolvers), so a schema is only what the file says.
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(MAX_PATTERN_BYTES))
            .build(schema)
            .map_err(|error| format!("not a valid JSON Schema: {error}"))?;
        Ok(DataSchema {
            schema: Arc::new(schema.clone()),
            validator: Arc::new(validator),
        })
    }

    /// `Ok` when `data` conforms; otherwise where it does not and which rule it breaks, e.g.
    /// ``at `/verdict`: "maybe" is not one of ["approved","rejected"]``.
    pub fn check(&self, data: &Value) -> Result<(), String> {
        let violations: Vec<String> = self
            .validator
            .iter_errors(data)
            .take(MAX_REPORTED_VIOLATIONS + 1)
            .map(|error| {
                let path = error.instance_path().as_str().to_string();
                let path = if path.is_empty() { "/".into() } else { path };
                format!("at `{path}`: {error}")
            })
            .collect();
        if violations.is_empty() {
            return Ok(());
        }
        let more = violations.len() > MAX_REPORTED_VIOLATIONS;
        let mut message = violations[..violations.len().min(MAX_REPORTED_VIOLATIONS)].join("; ");
        if more {
            message.push_str("; ...");
        }
        Err(message)
    }

    /// The properties an object that conforms may have, when the schema says: `Some` with the
    /// names when it lists `properties` (the object is closed or its other keys are unknown to
    /// the author), `None` when it does not constrain them.
    pub fn property_names(&self) -> Option<Vec<&str>> {
        let object = self.schema.as_object()?;
        let properties = object.get("properties")?.as_object()?;
        Some(properties.keys().map(String::as_str).collect())
    }

    /// The schema of property `name`, when the schema lists it.
    pub fn property(&self, name: &str) -> Option<&Value> {
        self.schema.get("properties")?.get(name)
    }
}

/// The number of nodes in `value` and how deep it nests, without recursion.
fn measure(value: &Value) -> (usize, usize) {
    let mut nodes = 0;
    let mut deepest = 0;
    let mut pending = vec![(value, 1)];
    while let Some((node, depth)) = pending.pop() {
        nodes += 1;
        deepest = deepest.max(depth);
        match node {
            Value::Array(items) => pending.extend(items.iter().map(|item| (item, depth + 1))),
            Value::Object(entries) => {
                pending.extend(entries.values().map(|entry| (entry, depth + 1)))
            }
            _ => {}
        }
    }
    (nodes, deepest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_violation_names_the_path_and_the_rule() {
        let schema = DataSchema::compile(&json!({
            "type": "object",
            "properties": { "verdict": { "enum": ["approved", "rejected"] } },
            "required": ["verdict"]
        }))
        .unwrap();
        assert!(schema.check(&json!({ "verdict": "approved" })).is_ok());
        let message = schema.check(&json!({ "verdict": "maybe" })).unwrap_err();
        assert!(message.starts_with("at `/verdict`: "), "{message}");
        assert!(message.contains("maybe"), "{message}");
    }

    #[test]
    fn oversized_and_overdeep_schemas_are_refused_by_name() {
        let wide = json!({ "enum": (0..MAX_SCHEMA_NODES).collect::<Vec<_>>() });
        assert!(
            DataSchema::compile(&wide)
                .unwrap_err()
                .contains("MAX_SCHEMA_NODES")
        );
        let mut deep = json!({});
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = json!({ "items": deep });
        }
        assert!(
            DataSchema::compile(&deep)
                .unwrap_err()
                .contains("MAX_SCHEMA_DEPTH")
        );
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        let message = DataSchema::compile(&json!({ "type": 12 })).unwrap_err();
        assert!(message.starts_with("not a valid JSON Schema"), "{message}");
    }
}
