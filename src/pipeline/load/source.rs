//! A loaded source file: its text and node positions, and locations built from JSON pointers.

use super::yaml::{Position, Positions};
use crate::base::diagnostic::Location;

/// Which end of a mapping entry a location points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The key (`on:` in `on: ...`); the value for sequence items.
    Key,
    /// The value.
    Value,
}

/// A protocol file as read: path for messages, text for snippets, positions for pointers.
#[derive(Debug, Clone, Default)]
pub struct Source {
    pub path: String,
    pub text: String,
    pub positions: Positions,
}

impl Source {
    /// The location of the node at `pointer` (or its nearest located ancestor).
    pub fn location(&self, pointer: &str, part: Part) -> Location {
        let node = self.positions.nearest(pointer);
        let position = match part {
            Part::Key => node.key.unwrap_or(node.value),
            Part::Value => node.value,
        };
        self.location_at(position, part)
    }

    /// The location of a position, with the source line and a marker as wide as the token there.
    /// The line is found from the position's byte offset, looking at most `EXCERPT_BYTES` either
    /// way, so locating each of 40,000 problems on one 900 KB line does not copy it each time.
    pub fn location_at(&self, position: Position, part: Part) -> Location {
        let text = self.text.as_str();
        let offset = char_boundary(text, position.offset.min(text.len()));
        let window_start = char_boundary(text, offset.saturating_sub(EXCERPT_BYTES));
        let window_end = char_boundary(text, (offset + EXCERPT_BYTES).min(text.len()));
        let start = text[window_start..offset]
            .rfind(['\n', '\r'])
            .map_or(window_start, |newline| window_start + newline + 1);
        let end = text[offset..window_end]
            .find(['\n', '\r'])
            .map_or(window_end, |newline| offset + newline);
        let cut_before =
            start == window_start && start > 0 && !text[..start].ends_with(['\n', '\r']);
        let cut_after = end == window_end && end < text.len();
        let mut source_line = String::with_capacity(end - start + 8);
        let mut first_column = 1;
        if cut_before {
            source_line.push('…');
            // The `…` stands in the column before the first character kept.
            let kept_before = text[start..offset].chars().count();
            first_column = position.column.saturating_sub(kept_before + 1).max(1);
        }
        source_line.push_str(&text[start..end]);
        if cut_after {
            source_line.push('…');
        }
        let column_in_line = position.column.saturating_sub(first_column) + 1;
        let width = token_width(&source_line, column_in_line, part);
        Location {
            file: self.path.clone(),
            position,
            source_line,
            first_column,
            width,
        }
    }
}

/// How far either side of a position its line is looked for (and shown from, if longer).
const EXCERPT_BYTES: usize = 512;

/// `offset`, or the nearest character boundary before it.
fn char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// How many characters the token starting at `column` (1-based) covers.
fn token_width(line: &str, column: usize, part: Part) -> usize {
    let rest: Vec<char> = line.chars().skip(column.saturating_sub(1)).collect();
    let Some(&first) = rest.first() else {
        return 1;
    };
    let width = match (first, part) {
        ('"' | '\'', _) => rest[1..]
            .iter()
            .position(|c| *c == first)
            .map_or(rest.len(), |end| end + 2),
        ('[' | '{' | '|' | '>', Part::Value) => 1,
        (_, Part::Key) => rest
            .iter()
            .position(|c| *c == ':' || c.is_whitespace())
            .unwrap_or(rest.len()),
        (_, Part::Value) => {
            let text: String = rest.iter().collect();
            let without_comment = text.split(" #").next().unwrap_or_default();
            let cut = without_comment
                .split([',', ']', '}'])
                .next()
                .unwrap_or_default();
            cut.trim_end().chars().count()
        }
    };
    width.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_covers_the_token() {
        assert_eq!(
            token_width("    target: retryin  # typo", 13, Part::Value),
            7
        );
        assert_eq!(token_width("    target: retryin", 5, Part::Key), 6);
        assert_eq!(token_width(r#"  guard: "a < 3""#, 10, Part::Value), 7);
        assert_eq!(token_width("  on: {call: x, ok: y}", 14, Part::Value), 1);
        assert_eq!(token_width("", 1, Part::Value), 1);
    }
}
