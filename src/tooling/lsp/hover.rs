//! Hover: what the word under the cursor names: a state, an input or context variable (with
//! its type), a function, a block, a retry policy, or an event (a declared one's data).

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};

use super::cursor::{Slot, cursor_at, word_around};
use super::functions;
use super::outline::{Named, Outline};
use super::positions::position_of;

/// The hover for the cursor at byte `offset`, if the word there names something.
pub fn hover(text: &str, offset: usize, outline: &Outline) -> Option<Hover> {
    let word = word_around(text, offset);
    let name = &text[word.clone()];
    let found = |names: &[Named]| {
        names
            .iter()
            .find(|named| named.name == name)
            .map(|named| named.documentation.clone())
    };
    let function = || {
        functions::find(name).map(|function| {
            format!(
                "```\n{}\n```\n{}",
                function.signature, function.documentation
            )
        })
    };
    let documentation = match cursor_at(text, word.end).slot {
        // An `on:` key: what the event is and where it comes from.
        Slot::Event => outline.event_outline.describe(name),
        Slot::Block => found(&outline.blocks),
        Slot::Policy => found(&outline.policies),
        _ => found(&outline.states)
            .or_else(|| found(&outline.inputs))
            .or_else(|| found(&outline.context))
            .or_else(function)
            .or_else(|| found(&outline.blocks))
            .or_else(|| found(&outline.policies))
            // A declared event named elsewhere: its `events:` key, a `send:` or `raise:`.
            .or_else(|| found(&outline.event_outline.declared)),
    }?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: documentation,
        }),
        range: Some(lsp_types::Range::new(
            position_of(text, word.start),
            position_of(text, word.end),
        )),
    })
}
