//! Completion: the names that belong at the cursor, from the document's outline (for a
//! scenario buffer, its protocol's).

use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionTextEdit, Documentation, Range, TextEdit,
};

use super::cursor::{Slot, cursor_at, transition_event};
use super::functions::FUNCTIONS;
use super::outline::{Named, Outline};
use super::positions::position_of;
use super::scenario;
use super::schemas::Property;

/// The most items one answer holds: a protocol may name thousands of states and events.
pub const MAX_COMPLETION_ITEMS: usize = 500;

/// The items for the cursor at byte `offset` of `text`.
pub fn complete(text: &str, offset: usize, outline: &Outline) -> Vec<CompletionItem> {
    let cursor = cursor_at(text, offset);
    let typed = &text[cursor.word_start..cursor.offset];
    let range = Range::new(
        position_of(text, cursor.word_start),
        position_of(text, cursor.offset),
    );
    let item =
        |label: &str, kind: CompletionItemKind, documentation: Option<String>| CompletionItem {
            label: label.to_string(),
            kind: Some(kind),
            documentation: documentation.map(Documentation::String),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                label.to_string(),
            ))),
            ..Default::default()
        };
    let named = |names: &[Named], kind: CompletionItemKind| -> Vec<CompletionItem> {
        names
            .iter()
            .map(|named| item(&named.name, kind, Some(named.documentation.clone())))
            .collect()
    };
    let mut items = match cursor.slot {
        Slot::State => named(&outline.states, CompletionItemKind::CLASS),
        Slot::Event => outline
            .events
            .iter()
            .map(|event| item(event, CompletionItemKind::EVENT, None))
            .collect(),
        Slot::Block => named(&outline.blocks, CompletionItemKind::MODULE),
        Slot::Policy => named(&outline.policies, CompletionItemKind::CONSTANT),
        // `event.data.`: the fields of the transition's declared events.
        Slot::Expression if reads_event_data(&text[..cursor.word_start]) => {
            data_fields(text, cursor.offset, outline)
                .into_iter()
                .map(|field| {
                    let mut completion = item(
                        &field.name,
                        CompletionItemKind::FIELD,
                        field.description.clone(),
                    );
                    completion.detail = Some(field.summary.clone());
                    completion
                })
                .collect()
        }
        Slot::Expression => {
            let mut items = named(&outline.inputs, CompletionItemKind::VARIABLE);
            items.extend(named(&outline.context, CompletionItemKind::FIELD));
            items.push(item(
                "event",
                CompletionItemKind::VARIABLE,
                Some("the event being handled: `event.name`, `event.data`, `event.origin`".into()),
            ));
            items.extend(FUNCTIONS.iter().map(|function| {
                let mut completion = item(
                    function.name,
                    CompletionItemKind::FUNCTION,
                    Some(function.documentation.into()),
                );
                completion.detail = Some(function.signature.into());
                completion
            }));
            items
        }
        Slot::Other => Vec::new(),
    };
    items.retain(|item| item.label.starts_with(typed));
    items.truncate(MAX_COMPLETION_ITEMS);
    items
}

/// Where completion offers a declared event's fields.
const EVENT_DATA: &str = "event.data.";

/// Whether `before` ends in `event.data.` (not some other name's, `myevent.data.`).
fn reads_event_data(before: &str) -> bool {
    before.strip_suffix(EVENT_DATA).is_some_and(|rest| {
        !rest
            .chars()
            .next_back()
            .is_some_and(|character| character.is_alphanumeric() || "_.".contains(character))
    })
}

/// The fields of the declared events the transition at `offset` is on (each of them, when its
/// `on:` key names several); none outside a transition, or for an event not declared.
fn data_fields<'a>(text: &str, offset: usize, outline: &'a Outline) -> Vec<&'a Property> {
    let Some(key) = transition_event(text, offset) else {
        return Vec::new();
    };
    let mut fields: Vec<&Property> = Vec::new();
    for event in key.split_whitespace() {
        for field in outline
            .event_outline
            .data_fields
            .get(event)
            .into_iter()
            .flatten()
        {
            if !fields.iter().any(|known| known.name == field.name) {
                fields.push(field);
            }
        }
    }
    fields
}

/// The items for the cursor at byte `offset` of a scenario buffer, from the outline of the
/// protocol it tests.
pub fn complete_scenario(text: &str, offset: usize, outline: &Outline) -> Vec<CompletionItem> {
    let cursor = cursor_at(text, offset);
    let line_start = text[..cursor.offset]
        .rfind('\n')
        .map_or(0, |newline| newline + 1);
    let slot = scenario::slot_of(text, line_start, &text[line_start..cursor.offset]);
    let typed = &text[cursor.word_start..cursor.offset];
    let range = Range::new(
        position_of(text, cursor.word_start),
        position_of(text, cursor.offset),
    );
    let mut items: Vec<CompletionItem> = scenario::candidates(slot, outline)
        .into_iter()
        .filter(|(label, _, _)| label.starts_with(typed))
        .map(|(label, kind, documentation)| CompletionItem {
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                label.clone(),
            ))),
            label,
            kind: Some(kind),
            documentation: documentation.map(Documentation::String),
            ..Default::default()
        })
        .collect();
    items.truncate(MAX_COMPLETION_ITEMS);
    items
}
