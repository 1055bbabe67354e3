//! Go to definition: a state from a target, a block from `use:`, a policy from `retry:`, a
//! file from `imports:` or an invoke's `protocol:`.

use std::path::Path;

use lsp_types::{Location, Position, Range};

use super::cursor::{Slot, cursor_at, word_around};
use super::documents::uri_of_path;
use super::outline::{Named, Outline};
use super::positions::position_of;

/// Where the word at byte `offset` of `text` (the document at `file`) is defined.
pub fn definition(text: &str, file: &Path, offset: usize, outline: &Outline) -> Option<Location> {
    let word = word_around(text, offset);
    let name = &text[word.clone()];
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        let target = file.parent().unwrap_or(Path::new("")).join(name);
        if target.is_file() {
            let start = Position::new(0, 0);
            return Some(Location::new(uri(&target)?, Range::new(start, start)));
        }
    }
    let found = |names: &[Named]| names.iter().find(|named| named.name == name).cloned();
    let named = match cursor_at(text, word.end).slot {
        Slot::Block => found(&outline.blocks),
        Slot::Policy => found(&outline.policies),
        _ => found(&outline.states)
            .or_else(|| found(&outline.blocks))
            .or_else(|| found(&outline.policies))
            .or_else(|| found(&outline.inputs))
            .or_else(|| found(&outline.context)),
    }?;
    let position = if named.file == file {
        position_of(text, named.offset)
    } else {
        let other = std::fs::read_to_string(&named.file).ok()?;
        position_of(&other, named.offset)
    };
    Some(Location::new(
        uri(&named.file)?,
        Range::new(position, position),
    ))
}

fn uri(path: &Path) -> Option<lsp_types::Uri> {
    uri_of_path(path).parse().ok()
}
