//! `events:`: the external events a protocol takes, each with a schema for its data; input is admitted or refused here.

use indexmap::IndexMap;
use serde_json::Value;

use super::Compiler;
use super::data_schema::DataSchema;
use crate::base::diagnostic::did_you_mean;
use crate::pipeline::load::yaml::escape_pointer_token;

/// The most events one protocol may declare.
pub const MAX_DECLARED_EVENTS: usize = 1_000;

/// The declared external events and their compiled data schemas, in document order.
#[derive(Debug, Default)]
pub struct DeclaredEvents {
    events: IndexMap<String, DataSchema>,
}

impl DeclaredEvents {
    /// Compiles `events:`, reporting each bad name or schema at its place; `None` when the
    /// protocol declares none (then every external event is taken, as before).
    pub fn compile(
        compiler: &mut Compiler,
        events: &IndexMap<String, Value>,
    ) -> Option<DeclaredEvents> {
        if events.is_empty() {
            return None;
        }
        if events.len() > MAX_DECLARED_EVENTS {
            compiler.key_error(
                "/events",
                format!(
                    "the protocol declares {} events, more than the limit of \
                     {MAX_DECLARED_EVENTS} (MAX_DECLARED_EVENTS)",
                    events.len()
                ),
                Some("split it into child protocols".into()),
            );
            return Some(DeclaredEvents::default());
        }
        let mut declared = IndexMap::with_capacity(events.len());
        for (name, schema) in events {
            let pointer = format!("/events/{}", escape_pointer_token(name));
            if name.contains('*') {
                compiler.key_error(
                    &pointer,
                    format!("`{name}` is a pattern; `events:` declares single events"),
                    Some("write each event's full name".into()),
                );
                continue;
            }
            compiler.check_event_name_at(name, &pointer, crate::pipeline::load::source::Part::Key);
            if let Some(refusal) = crate::base::event::refuse_platform_event(name) {
                let reason = refusal.split(';').next().unwrap_or_default().to_string();
                compiler.key_error(
                    &pointer,
                    format!("{reason}; it cannot be declared as input"),
                    Some(
                        "the engine reports it: handle it under `on:` without declaring it".into(),
                    ),
                );
                continue;
            }
            match DataSchema::compile(schema) {
                Ok(compiled) => {
                    declared.insert(name.clone(), compiled);
                }
                Err(message) => compiler.value_error(
                    &pointer,
                    format!("the data schema of event `{name}`: {message}"),
                    Some(
                        "write a JSON Schema, e.g. `{ type: object, properties: { reason: { \
                         type: string } } }`, or `{}` for any data"
                            .into(),
                    ),
                ),
            }
        }
        Some(DeclaredEvents { events: declared })
    }

    /// The declared names, in document order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.events.keys().map(String::as_str)
    }

    /// The data schema of a declared event.
    pub fn schema(&self, name: &str) -> Option<&DataSchema> {
        self.events.get(name)
    }

    /// Whether external input may send `name` with `data`: it must be declared and its data
    /// must conform. The refusal names the event, the place in the data and the rule.
    pub fn admit(&self, name: &str, data: &Value) -> Result<(), String> {
        let Some(schema) = self.events.get(name) else {
            let help = did_you_mean(name, self.names())
                .map(|suggestion| format!("; {suggestion}"))
                .unwrap_or_default();
            return Err(format!(
                "`{name}` is not an event this protocol takes{help} (declared under `events:`: {})",
                self.names().collect::<Vec<_>>().join(", ")
            ));
        };
        schema
            .check(data)
            .map_err(|problem| format!("event `{name}` has data that does not conform: {problem}"))
    }
}
