//! The events a protocol deals in, for hover and for scenario buffers: its effects (whose
//! outcome events the engine sends), the events it declares, raises, sends and handles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::outline::{Named, key_offset};
use super::schemas::{Property, properties};
use crate::pipeline::load::yaml::{Positions, escape_pointer_token};

/// The action kinds that start an effect, and so report `done.exec.<id>` (a map,
/// `done.map.<id>`).
const EFFECT_KINDS: [&str; 8] = [
    "map",
    "exec",
    "read_file",
    "list_dir",
    "grep_search",
    "write",
    "backup",
    "restore",
];

/// The prefixes of the engine's events, each followed by an id.
const ENGINE_FAMILIES: [&str; 10] = [
    "done.exec.",
    "done.map.",
    "done.state.",
    "done.invoke.",
    "error.exec.",
    "error.map.",
    "error.incomplete.",
    "error.permission.",
    "error.invoke.",
    "timeout.",
];

/// The most places hover lists for one raised or sent event.
const MAX_PLACES_SHOWN: usize = 8;

/// What a protocol does with events, read from its YAML.
#[derive(Debug, Clone, Default)]
pub struct EventOutline {
    /// Actions with an `id` that start an effect; the documentation names the kind and state.
    pub effects: Vec<Named>,
    /// The ids of the effects that are maps (their items are `id[N]`).
    pub maps: BTreeSet<String>,
    /// `events:` entries; the documentation is the schema's description and properties.
    pub declared: Vec<Named>,
    /// The properties each declared event's data schema lists, by event name.
    pub data_fields: BTreeMap<String, Vec<Property>>,
    /// Every `on:` key's event names.
    pub handled: BTreeSet<String>,
    /// Raised or sent events: where (`raise` or `send` in state `x`).
    pub produced: BTreeMap<String, Vec<String>>,
}

impl EventOutline {
    /// Reads the events of the protocol `top` in `file`.
    pub fn read(file: &Path, positions: &Positions, top: &Map<String, Value>) -> EventOutline {
        let mut outline = EventOutline::default();
        if let Some(events) = top.get("events").and_then(Value::as_object) {
            for (name, schema) in events {
                let fields = properties(schema);
                outline.declared.push(Named {
                    name: name.clone(),
                    file: file.to_path_buf(),
                    offset: key_offset(
                        positions,
                        &format!("/events/{}", escape_pointer_token(name)),
                    ),
                    documentation: declared_documentation(name, schema, &fields),
                });
                outline.data_fields.insert(name.clone(), fields);
            }
        }
        let mut walker = Walker {
            file,
            positions,
            outline: &mut outline,
        };
        walker.states(top, "", "(the run)");
        outline
    }

    /// What the event `name`, a key under `on:`, is; `None` when nothing is known of it.
    pub fn describe(&self, name: &str) -> Option<String> {
        if let Some(declared) = self.declared.iter().find(|event| event.name == name) {
            return Some(declared.documentation.clone());
        }
        if let Some(places) = self.produced.get(name) {
            let mut shown: Vec<&str> = places.iter().map(String::as_str).collect();
            let more = shown.len().saturating_sub(MAX_PLACES_SHOWN);
            shown.truncate(MAX_PLACES_SHOWN);
            let mut text = format!("event `{name}`, produced by the protocol itself:");
            for place in shown {
                text.push_str(&format!("\n- {place}"));
            }
            if more > 0 {
                text.push_str(&format!("\n- and {more} more"));
            }
            return Some(text);
        }
        self.engine_event(name)
    }

    /// Whether `name` is of a family only the engine produces (an effect's outcome, a
    /// state's done event...), whether or not this protocol has the id it names.
    pub fn is_engine_event(&self, name: &str) -> bool {
        ENGINE_FAMILIES
            .iter()
            .any(|family| name.starts_with(family))
            || ["error.execution", "error.communication"].contains(&name)
    }

    /// An engine event: what produces it and the data it carries.
    fn engine_event(&self, name: &str) -> Option<String> {
        let effect = |id: &str| self.effects.iter().any(|effect| effect.name == id);
        let outcome_data = "data: `id`, `exit_code`, `stdout`, `stderr`, `truncated`, \
                            `duration_ms`, `timed_out`, and per kind `bytes`, `entries`, \
                            `matches`, `path`";
        let family = match name {
            "*" => Some("any event"),
            "error" | "error.*" => {
                Some("every error event: failed effects, `error.execution`, ...")
            }
            "done.exec" => Some("the success of every effect"),
            "error.exec" => Some("every failure of every effect, timeouts included"),
            "error.exec.timeout" => Some("the timeout of every effect"),
            "done.state" => Some("every compound or parallel state's completion"),
            _ => None,
        };
        if let Some(family) = family {
            return Some(format!("descriptor `{name}`: matches {family}"));
        }
        let text = if let Some(id) = name.strip_prefix("error.exec.timeout.") {
            format!(
                "an attempt of the effect `{id}` timed out (after its retries); {outcome_data}, `message`"
            )
        } else if let Some(id) = name.strip_prefix("done.exec.").filter(|id| effect(id)) {
            format!("the effect `{id}` succeeded; {outcome_data}")
        } else if let Some(id) = name.strip_prefix("error.exec.").filter(|id| effect(id)) {
            format!(
                "the effect `{id}` failed (another exit code, a process that could not start, a missing file, no match); {outcome_data}, `message`"
            )
        } else if let Some(id) = name.strip_prefix("error.incomplete.") {
            format!("the output of the effect `{id}` carried a completeness marker; {outcome_data}")
        } else if let Some(id) = name.strip_prefix("error.permission.") {
            format!(
                "the effect `{id}` was refused by the protocol's `permissions`; data: `id`, `capability`, `subject`, `message`"
            )
        } else if let Some(id) = name.strip_prefix("done.map.") {
            format!(
                "every item of the map `{id}` finished as its tolerance allows; data: the items' outcomes"
            )
        } else if let Some(id) = name.strip_prefix("error.map.") {
            format!("the map `{id}` failed more items than it tolerates")
        } else if let Some(id) = name.strip_prefix("done.state.") {
            format!(
                "the compound state `{id}` reached a final child (data: its `output`), or every region of the parallel state `{id}` is final"
            )
        } else if let Some(id) = name.strip_prefix("timeout.") {
            format!("the state `{id}` stayed longer than its `timeout`")
        } else if let Some(id) = name.strip_prefix("done.invoke.") {
            format!("the child protocol invoked as `{id}` finished; data: its output")
        } else if let Some(id) = name.strip_prefix("error.invoke.") {
            format!("the child protocol invoked as `{id}` failed or could not start")
        } else if name == "error.execution" {
            "an expression or action failed; the rest of its action block is skipped. \
             data: `message`, `expression`"
                .to_string()
        } else if name == "error.communication" {
            "an event between parent and child protocol was refused; data: `event`, `from`, \
             `message`"
                .to_string()
        } else {
            return None;
        };
        Some(format!("engine event `{name}`: {text}"))
    }
}

/// Walks the states, collecting effects, handlers and produced events.
struct Walker<'a> {
    file: &'a Path,
    positions: &'a Positions,
    outline: &'a mut EventOutline,
}

impl Walker<'_> {
    fn states(&mut self, parent: &Map<String, Value>, pointer: &str, owner: &str) {
        // Top-level and state-level actions outside `states` (a run's `finally`, say).
        for (key, value) in parent {
            if key != "states" && key != "on" {
                self.actions(
                    value,
                    &format!("{pointer}/{}", escape_pointer_token(key)),
                    owner,
                );
            }
        }
        if let Some(on) = parent.get("on").and_then(Value::as_object) {
            for (key, transitions) in on {
                self.outline
                    .handled
                    .extend(key.split_whitespace().map(str::to_string));
                let at = format!("{pointer}/on/{}", escape_pointer_token(key));
                self.actions(transitions, &at, owner);
            }
        }
        let Some(states) = parent.get("states").and_then(Value::as_object) else {
            return;
        };
        for (id, state) in states {
            if let Some(state) = state.as_object() {
                let at = format!("{pointer}/states/{}", escape_pointer_token(id));
                self.states(state, &at, &format!("state `{id}`"));
            }
        }
    }

    /// Every action under `value` (at `pointer`), in state `owner`.
    fn actions(&mut self, value: &Value, pointer: &str, owner: &str) {
        match value {
            Value::Object(object) => {
                for kind in ["raise", "send"] {
                    if let Some(name) = object.get(kind).and_then(Value::as_str) {
                        let place = format!("`{kind}` in {owner}");
                        self.outline
                            .produced
                            .entry(name.to_string())
                            .or_default()
                            .push(place);
                    }
                }
                let kind = EFFECT_KINDS.iter().find(|kind| object.contains_key(**kind));
                if let (Some(kind), Some(id), false) = (
                    kind,
                    object.get("id").and_then(Value::as_str),
                    object.contains_key("send"),
                ) {
                    if *kind == "map" {
                        self.outline.maps.insert(id.to_string());
                    }
                    self.outline.effects.push(Named {
                        name: id.to_string(),
                        file: self.file.to_path_buf(),
                        offset: key_offset(self.positions, &format!("{pointer}/id")),
                        documentation: format!("`{kind}` effect `{id}` in {owner}"),
                    });
                }
                for (key, child) in object {
                    self.actions(
                        child,
                        &format!("{pointer}/{}", escape_pointer_token(key)),
                        owner,
                    );
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    self.actions(item, &format!("{pointer}/{index}"), owner);
                }
            }
            _ => {}
        }
    }
}

/// A declared event's hover: its description and the properties its data has, each with its
/// type and the values its `enum` allows.
fn declared_documentation(name: &str, schema: &Value, fields: &[Property]) -> String {
    let mut text = format!("declared event `{name}`");
    if let Some(description) = schema.get("description").and_then(Value::as_str) {
        text.push_str(&format!("\n\n{description}"));
    }
    if !fields.is_empty() {
        text.push_str("\n\ndata:");
        for field in fields {
            text.push_str(&format!("\n- `{}`: {}", field.name, field.summary));
            if let Some(description) = &field.description {
                text.push_str(&format!(" — {description}"));
            }
        }
    } else if schema.as_object().is_some_and(Map::is_empty) {
        text.push_str("\n\ndata: any");
    }
    text
}
