//! What a document names, read from its YAML alone (no schema, no compile), so completion and
//! hover still work while the protocol is invalid mid-edit.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::base::model::action::ACTION_KINDS;
use crate::pipeline::load::yaml::{Positions, YamlLimits, escape_pointer_token, parse};

/// The most library files read for one document's imports, all levels together.
const MAX_IMPORTED_FILES: usize = 32;

/// A named thing and where it is written.
#[derive(Debug, Clone)]
pub struct Named {
    pub name: String,
    /// The file it is written in.
    pub file: PathBuf,
    /// The byte offset of its key in that file.
    pub offset: usize,
    /// What hover shows.
    pub documentation: String,
}

/// Everything a document names.
#[derive(Debug, Clone, Default)]
pub struct Outline {
    pub states: Vec<Named>,
    pub events: BTreeSet<String>,
    pub context: Vec<Named>,
    pub inputs: Vec<Named>,
    pub blocks: Vec<Named>,
    pub policies: Vec<Named>,
    /// Effects and the events declared, raised, sent and handled (this file's only).
    pub event_outline: super::events::EventOutline,
}

impl Outline {
    /// Reads the outline of `text`, the document at `file`, and of the libraries it imports
    /// (from disk); `None` when the text is no YAML mapping.
    pub fn read(file: &Path, text: &str) -> Option<Outline> {
        let document = parse(text, &YamlLimits::default()).ok()?;
        let top = document.value.as_object()?;
        let mut outline = Outline::default();
        let at = |pointer: &str| key_offset(&document.positions, pointer);
        for (name, value) in mapping(top, "inputs") {
            outline.inputs.push(Named {
                name: name.clone(),
                file: file.to_path_buf(),
                offset: at(&format!("/inputs/{}", escape_pointer_token(name))),
                documentation: input_documentation(name, value),
            });
        }
        let types = top.get("types").and_then(Value::as_object);
        for (name, value) in mapping(top, "context") {
            let typed = types
                .and_then(|types| types.get(name))
                .map_or(String::new(), |schema| {
                    format!(": {} (from `types:`)", super::schemas::describe(schema))
                });
            outline.context.push(Named {
                name: name.clone(),
                file: file.to_path_buf(),
                offset: at(&format!("/context/{}", escape_pointer_token(name))),
                documentation: format!(
                    "context `{name}`{typed}, initially {}",
                    serde_yaml_like(value)
                ),
            });
        }
        outline
            .events
            .extend(mapping(top, "events").map(|(name, _)| name.clone()));
        outline.events.insert("error.execution".into());
        outline.collect_states(file, &document.positions, top, "");
        outline.event_outline = super::events::EventOutline::read(file, &document.positions, top);
        outline.collect_definitions(file, &document.positions, top);
        collect_produced_events(&document.value, &mut outline.events);
        let mut imported = 0;
        outline.read_imports(file, top, &mut imported, 0);
        Some(outline)
    }

    /// Every state under `states` of `parent` (at `pointer`), depth first in document order.
    fn collect_states(
        &mut self,
        file: &Path,
        positions: &Positions,
        parent: &Map<String, Value>,
        pointer: &str,
    ) {
        for (id, state) in mapping(parent, "states") {
            let state_pointer = format!("{pointer}/states/{}", escape_pointer_token(id));
            let Some(state) = state.as_object() else {
                continue;
            };
            let kind = state.get("type").and_then(Value::as_str).unwrap_or(
                if state.contains_key("states") {
                    "compound"
                } else {
                    "atomic"
                },
            );
            let description = state
                .get("description")
                .and_then(Value::as_str)
                .map_or(String::new(), |text| format!("\n\n{text}"));
            self.states.push(Named {
                name: id.clone(),
                file: file.to_path_buf(),
                offset: key_offset(positions, &state_pointer),
                documentation: format!("state `{id}` ({kind}){description}"),
            });
            if matches!(kind, "compound" | "parallel") {
                self.events.insert(format!("done.state.{id}"));
            }
            if state.contains_key("timeout") {
                self.events.insert(format!("timeout.{id}"));
            }
            for invoke in state
                .get("invoke")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(invoke_id) = invoke.get("id").and_then(Value::as_str) {
                    self.events.insert(format!("done.invoke.{invoke_id}"));
                    self.events.insert(format!("error.invoke.{invoke_id}"));
                }
            }
            self.collect_states(file, positions, state, &state_pointer);
        }
    }

    /// `blocks` and `retry_policies` of a protocol or library.
    fn collect_definitions(
        &mut self,
        file: &Path,
        positions: &Positions,
        top: &Map<String, Value>,
    ) {
        for (name, block) in mapping(top, "blocks") {
            self.blocks.push(Named {
                name: name.clone(),
                file: file.to_path_buf(),
                offset: key_offset(
                    positions,
                    &format!("/blocks/{}", escape_pointer_token(name)),
                ),
                documentation: block_documentation(name, block),
            });
        }
        for (name, retriers) in mapping(top, "retry_policies") {
            self.policies.push(Named {
                name: name.clone(),
                file: file.to_path_buf(),
                offset: key_offset(
                    positions,
                    &format!("/retry_policies/{}", escape_pointer_token(name)),
                ),
                documentation: format!("retry policy `{name}`: {}", serde_yaml_like(retriers)),
            });
        }
    }

    /// The blocks and policies of the libraries `top` imports, and of theirs, read from disk.
    fn read_imports(
        &mut self,
        file: &Path,
        top: &Map<String, Value>,
        imported: &mut usize,
        depth: usize,
    ) {
        let directory = file.parent().unwrap_or(Path::new(""));
        for import in top
            .get("imports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(relative) = import.as_str() else {
                continue;
            };
            if *imported >= MAX_IMPORTED_FILES || depth >= MAX_IMPORTED_FILES {
                return;
            }
            *imported += 1;
            let library_file = directory.join(relative);
            let Ok(text) = std::fs::read_to_string(&library_file) else {
                continue;
            };
            let Ok(document) = parse(&text, &YamlLimits::default()) else {
                continue;
            };
            if let Some(library) = document.value.as_object() {
                self.collect_definitions(&library_file, &document.positions, library);
                collect_produced_events(&document.value, &mut self.events);
                self.read_imports(&library_file, library, imported, depth + 1);
            }
        }
    }

    /// Every name an expression can read: inputs and context variables.
    pub fn variables(&self) -> impl Iterator<Item = &Named> {
        self.inputs.iter().chain(&self.context)
    }
}

/// The entries of the mapping under `key`, none when absent or not a mapping.
fn mapping<'a>(
    parent: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (&'a String, &'a Value)> {
    parent
        .get(key)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// Where the key of the node at `pointer` starts (its value when it has no key).
pub(super) fn key_offset(positions: &Positions, pointer: &str) -> usize {
    let node = positions.nearest(pointer);
    node.key.unwrap_or(node.value).offset
}

/// Events the actions anywhere under `value` raise or send, and the outcome events of each
/// effect with an `id` (`done.exec.<id>`, ...); template names (`${...}`) are left out.
fn collect_produced_events(value: &Value, events: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            for key in ["raise", "send"] {
                if let Some(name) = object.get(key).and_then(Value::as_str)
                    && !name.contains("${")
                {
                    events.insert(name.to_string());
                }
            }
            // An action's `id` names its outcome events (`map` is an action too), except a
            // `send`'s, which names the send for `cancel`.
            let is_effect = !object.contains_key("send")
                && (object.contains_key("map")
                    || ACTION_KINDS.iter().any(|kind| object.contains_key(*kind)));
            if is_effect && let Some(id) = object.get("id").and_then(Value::as_str) {
                let kind = if object.contains_key("map") {
                    "map"
                } else {
                    "exec"
                };
                events.insert(format!("done.{kind}.{id}"));
                events.insert(format!("error.{kind}.{id}"));
                if kind == "exec" {
                    events.insert(format!("error.exec.timeout.{id}"));
                }
            }
            object
                .values()
                .for_each(|child| collect_produced_events(child, events));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|child| collect_produced_events(child, events)),
        _ => {}
    }
}

/// What hover says of an input: its type, whether it is required, its default, and what it
/// means.
fn input_documentation(name: &str, declaration: &Value) -> String {
    let field = |key: &str| declaration.get(key);
    let mut text = format!(
        "input `{name}`: {}",
        field("type").and_then(Value::as_str).unwrap_or("any")
    );
    if field("required").and_then(Value::as_bool) == Some(true) {
        text.push_str(", required");
    }
    if field("secret").and_then(Value::as_bool) == Some(true) {
        text.push_str(", secret");
    }
    for key in ["default", "minimum", "maximum", "values", "items"] {
        if let Some(value) = field(key) {
            text.push_str(&format!(", {key} {}", serde_yaml_like(value)));
        }
    }
    if let Some(description) = field("description").and_then(Value::as_str) {
        text.push_str(&format!("\n\n{description}"));
    }
    text
}

/// What hover says of a block: its description and parameters.
fn block_documentation(name: &str, block: &Value) -> String {
    let mut text = format!("block `{name}`");
    if let Some(description) = block.get("description").and_then(Value::as_str) {
        text.push_str(&format!("\n\n{description}"));
    }
    let parameters: Vec<(&String, &Value)> = block
        .get("parameters")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .collect();
    if !parameters.is_empty() {
        text.push_str("\n\nparameters:");
        for (parameter, declaration) in parameters {
            text.push_str(&format!("\n- `{parameter}`"));
            if let Some(description) = declaration.get("description").and_then(Value::as_str) {
                text.push_str(&format!(": {description}"));
            }
            match declaration.get("default") {
                Some(default) => text.push_str(&format!(" (default {default})")),
                None => text.push_str(" (required)"),
            }
        }
    }
    text
}

/// A value shown compactly: JSON flow syntax reads as YAML too.
fn serde_yaml_like(value: &Value) -> String {
    let text = value.to_string();
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
