//! Byte offsets in a document ↔ LSP positions (0-based line, column in UTF-16 code units).

use lsp_types::{Position, Range};

/// The LSP position of a byte offset (clamped to the text, and back to a character boundary).
pub fn position_of(text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.matches('\n').count();
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    Position::new(saturating_u32(line), saturating_u32(character))
}

/// The byte offset of an LSP position; a line past the end gives the end of the text, a
/// column past the end of its line the end of that line (as the protocol asks).
pub fn offset_of(text: &str, position: Position) -> usize {
    let mut line_start = 0;
    for _ in 0..position.line {
        match text[line_start..].find('\n') {
            Some(newline) => line_start += newline + 1,
            None => return text.len(),
        }
    }
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |newline| line_start + newline);
    let mut units = 0;
    for (index, character) in text[line_start..line_end].char_indices() {
        if units >= position.character as usize {
            return line_start + index;
        }
        units += character.len_utf16();
    }
    line_end
}

/// The range of the token `width` characters long starting at `offset`, kept on its line.
pub fn token_range(text: &str, offset: usize, width: usize) -> Range {
    let start = position_of(text, offset);
    let mut end_offset = offset.min(text.len());
    for character in text[end_offset..].chars().take(width.max(1)) {
        if character == '\n' {
            break;
        }
        end_offset += character.len_utf8();
    }
    Range::new(start, position_of(text, end_offset))
}

/// The byte offset of a 1-based line and 1-based column counted in characters (the engine's
/// `Position`, whose byte offset inside an expression is that of the expression's start).
pub fn offset_of_line_column(text: &str, line: usize, column: usize) -> usize {
    let line_start = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>();
    let rest = &text[line_start..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    rest[..line_end]
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(line_start + line_end, |(index, _)| line_start + index)
}

fn saturating_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_code_units() {
        // `é` is 2 bytes and 1 UTF-16 unit; `𝄞` is 4 bytes and 2 units.
        let text = "a: 1\nb: é𝄞x\n";
        let x = text.find('x').unwrap();
        assert_eq!(position_of(text, x), Position::new(1, 6));
        assert_eq!(offset_of(text, Position::new(1, 6)), x);
        assert_eq!(offset_of(text, Position::new(1, 99)), text.len() - 1);
        assert_eq!(offset_of(text, Position::new(9, 0)), text.len());
        assert_eq!(token_range(text, x, 5).end, Position::new(1, 7));
        assert_eq!(offset_of_line_column(text, 2, 6), x);
        assert_eq!(offset_of_line_column(text, 2, 60), text.len() - 1);
    }
}
