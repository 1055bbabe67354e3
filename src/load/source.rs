//! A loaded source file: its text and node positions, and locations built from JSON pointers.

use super::yaml::{Position, Positions};
use crate::diagnostic::Location;

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
    pub fn location_at(&self, position: Position, part: Part) -> Location {
        let source_line = self
            .text
            .lines()
            .nth(position.line.saturating_sub(1))
            .unwrap_or_default()
            .to_string();
        let width = token_width(&source_line, position.column, part);
        Location {
            file: self.path.clone(),
            position,
            source_line,
            width,
        }
    }
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
