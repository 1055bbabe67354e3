//! Scenario buffers (`*.scenario.yaml`): the names they use come from the protocol they test,
//! read from disk: state ids, effect ids, and the events a scenario can send.

use std::path::{Path, PathBuf};

use lsp_types::{CompletionItemKind, Location};

use super::cursor::{indentation, last_key, parent_key};
use super::outline::{Named, Outline};

/// The kind of protocol name that belongs at a cursor in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioSlot {
    /// In `configuration:` (of `expect:` or `start:`) or `finished: state:`.
    State,
    /// A key under `mocks:`, or the `id:` of an `effects:` entry.
    Effect,
    /// After `send:`.
    Event,
    Other,
}

/// Whether the buffer at `path` is a scenario file: by name, or by its two top-level keys.
pub fn is_scenario_buffer(path: &Path, text: &str) -> bool {
    crate::tooling::scenario::runner::is_scenario_file(path)
        || crate::tooling::scenario::check::looks_like_scenarios(text)
}

/// The protocol file a scenario buffer names in its top-level `protocol:`, beside the buffer.
pub fn protocol_path(path: &Path, text: &str) -> Option<PathBuf> {
    let line = text.lines().find(|line| line.starts_with("protocol:"))?;
    let value = line["protocol:".len()..]
        .split(" #")
        .next()?
        .trim()
        .trim_matches(['"', '\'']);
    (!value.is_empty()).then(|| path.parent().unwrap_or(Path::new("")).join(value))
}

/// The outline of the protocol the scenario buffer tests, `None` when it cannot be read.
pub fn protocol_outline(path: &Path, text: &str) -> Option<Outline> {
    let protocol = protocol_path(path, text)?;
    let metadata = std::fs::metadata(&protocol).ok()?;
    // The loader's own limit: a larger file is no protocol it would take.
    if metadata.len() > super::documents::MAX_DOCUMENT_BYTES as u64 {
        return None;
    }
    let protocol_text = std::fs::read_to_string(&protocol).ok()?;
    Outline::read(&protocol, &protocol_text)
}

/// The slot at the cursor, from the line before it (`before`) and the keys above it.
pub fn slot_of(text: &str, line_start: usize, before: &str) -> ScenarioSlot {
    let parent = parent_key(text, line_start, indentation(before));
    let parent = parent.as_deref();
    // A flow mapping opened on this line (`mocks: { wr`) is the parent of what is typed in it.
    let open_flow = before
        .rfind('{')
        .filter(|open| !before[*open..].contains('}'));
    let flow_parent = open_flow.and_then(|open| last_key(&before[..open]));
    let flow_entry_has_key = open_flow.is_some_and(|open| {
        let inside = &before[open + 1..];
        last_key(&inside[inside.rfind(',').map_or(0, |comma| comma + 1)..]).is_some()
    });
    match last_key(before) {
        Some("configuration") => ScenarioSlot::State,
        Some("state") if parent == Some("finished") || flow_parent == Some("finished") => {
            ScenarioSlot::State
        }
        Some("send") => ScenarioSlot::Event,
        Some("id") if parent == Some("effects") || before.contains("effects:") => {
            ScenarioSlot::Effect
        }
        _ if flow_parent == Some("mocks") && !flow_entry_has_key => ScenarioSlot::Effect,
        None if parent == Some("mocks") => ScenarioSlot::Effect,
        None if parent == Some("configuration") && before.trim_start().starts_with('-') => {
            ScenarioSlot::State
        }
        _ => ScenarioSlot::Other,
    }
}

/// The names offered in `slot`: label, kind, documentation.
pub fn candidates(
    slot: ScenarioSlot,
    outline: &Outline,
) -> Vec<(String, CompletionItemKind, Option<String>)> {
    let named = |names: &[Named], kind: CompletionItemKind| {
        names
            .iter()
            .map(|named| (named.name.clone(), kind, Some(named.documentation.clone())))
            .collect::<Vec<_>>()
    };
    let events = &outline.event_outline;
    match slot {
        ScenarioSlot::State => named(&outline.states, CompletionItemKind::CLASS),
        ScenarioSlot::Effect => {
            let mut items = named(&events.effects, CompletionItemKind::FUNCTION);
            items.dedup_by(|later, earlier| later.0 == earlier.0);
            // One item of a map: `check[3]`.
            items.extend(events.maps.iter().map(|map| {
                let documentation = format!("one item of the map `{map}`: `{map}[N]`");
                (
                    format!("{map}["),
                    CompletionItemKind::FUNCTION,
                    Some(documentation),
                )
            }));
            items
        }
        ScenarioSlot::Event if !events.declared.is_empty() => {
            named(&events.declared, CompletionItemKind::EVENT)
        }
        // Undeclared: the events some `on:` handles, except those only the engine produces.
        ScenarioSlot::Event => events
            .handled
            .iter()
            .filter(|name| !name.contains('*') && !events.is_engine_event(name))
            .map(|name| {
                (
                    name.clone(),
                    CompletionItemKind::EVENT,
                    events.describe(name),
                )
            })
            .collect(),
        ScenarioSlot::Other => Vec::new(),
    }
}

/// The protocol's definition of `name` (a state, an effect, `map[N]`'s map, a declared event).
pub fn named<'a>(outline: &'a Outline, name: &str) -> Option<&'a Named> {
    let name = crate::effects::mock::map_of_item(name).unwrap_or(name);
    let events = &outline.event_outline;
    [&outline.states, &events.effects, &events.declared]
        .into_iter()
        .find_map(|names| names.iter().find(|named| named.name == name))
}

/// Where `name` is defined in the protocol file.
pub fn definition(outline: &Outline, name: &str) -> Option<Location> {
    let named = named(outline, name)?;
    let text = std::fs::read_to_string(&named.file).ok()?;
    let position = super::positions::position_of(&text, named.offset);
    let uri = super::documents::uri_of_path(&named.file).parse().ok()?;
    Some(Location::new(
        uri,
        lsp_types::Range::new(position, position),
    ))
}

/// What the protocol name under the cursor is: a state's, an effect's or an event's hover.
pub fn hover(text: &str, offset: usize, outline: &Outline) -> Option<lsp_types::Hover> {
    let word = super::cursor::word_around(text, offset);
    let name = &text[word.clone()];
    let documentation = match named(outline, name) {
        Some(named) => named.documentation.clone(),
        None => outline.event_outline.describe(name)?,
    };
    Some(lsp_types::Hover {
        contents: lsp_types::HoverContents::Markup(lsp_types::MarkupContent {
            kind: lsp_types::MarkupKind::Markdown,
            value: documentation,
        }),
        range: Some(lsp_types::Range::new(
            super::positions::position_of(text, word.start),
            super::positions::position_of(text, word.end),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(text: &str) -> ScenarioSlot {
        let line_start = text.rfind('\n').map_or(0, |newline| newline + 1);
        slot_of(text, line_start, &text[line_start..])
    }

    #[test]
    fn reads_the_slot_in_block_and_flow_forms() {
        assert_eq!(
            slot("    start: { configuration: [a, b"),
            ScenarioSlot::State
        );
        assert_eq!(slot("  configuration:\n    - wa"), ScenarioSlot::State);
        assert_eq!(slot("  finished:\n    state: do"), ScenarioSlot::State);
        assert_eq!(slot("  finished: { state: do"), ScenarioSlot::State);
        assert_eq!(slot("  mocks:\n    wr"), ScenarioSlot::Effect);
        assert_eq!(slot("  mocks: { write: ok, re"), ScenarioSlot::Effect);
        assert_eq!(slot("  mocks: { write: o"), ScenarioSlot::Other);
        assert_eq!(slot("  effects:\n    - id: ch"), ScenarioSlot::Effect);
        assert_eq!(slot("  effects: [{ id: ch"), ScenarioSlot::Effect);
        assert_eq!(slot("    - send: st"), ScenarioSlot::Event);
        assert_eq!(slot("  name: st"), ScenarioSlot::Other);
        // `state:` elsewhere is not a finished state.
        assert_eq!(slot("  other:\n    state: do"), ScenarioSlot::Other);
    }

    /// Every cut of a scenario file (as if typed so far), every cursor place in it: nothing
    /// panics.
    #[test]
    fn half_typed_scenarios_never_break_the_handlers() {
        let protocol = "id: p\nevents: { go: {} }\nstates:\n  a:\n    entry: [{ write: f, content: x, id: w }, { map: l, id: m, exec: [x] }]\n    on: { go: b }\n  b: { type: final }\n";
        let outline = Outline::read(Path::new("/nonexistent/p.yaml"), protocol).unwrap();
        let text = "protocol: p.yaml\nscenarios:\n  - name: é\n    start: { configuration: [a] }\n    mocks: { w: ok, 'm[0]': ok }\n    steps:\n      - send: go\n      - expect: { configuration: [b], finished: { state: b }, effects: [{ id: w }] }\n";
        for cut in text
            .char_indices()
            .map(|(index, _)| index)
            .chain([text.len()])
        {
            let typed = &text[..cut];
            for offset in 0..=typed.len() + 2 {
                super::super::completion::complete_scenario(typed, offset, &outline);
                hover(typed, offset, &outline);
                let word = crate::tooling::lsp::cursor::word_around(typed, offset);
                named(&outline, &typed[word]);
            }
        }
    }
}
