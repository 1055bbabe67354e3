//! The fast reader's tokens: CEL's lexemes within the subset, strings unescaped; anything else ends the reading.

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token<'t> {
    Int(&'t str),
    String(Cow<'t, str>),
    Name(&'t str),
    /// Punctuation and operators, as written.
    Symbol(&'static str),
}

/// Symbols, longest first so `<=` is not read as `<` then `=`.
const SYMBOLS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "-", "+", "*", "/", "%", "?", ":", "(", ")",
    ".", "[", "]", ",", "{", "}",
];

/// Splits `text` into tokens; `None` for anything outside the subset.
pub(super) fn tokens(text: &str) -> Option<Vec<Token<'_>>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let rest = &text[index..];
        if matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c') {
            index += 1;
        } else if byte.is_ascii_digit() {
            let length = rest.bytes().take_while(u8::is_ascii_digit).count();
            // `0x…`, `1.5`, `1e3`, `1u`, `1abc`: hex, doubles, uints and worse are CEL's.
            if rest[length..]
                .bytes()
                .next()
                .is_some_and(|next| next.is_ascii_alphanumeric() || next == b'_' || next == b'.')
            {
                return None;
            }
            found.push(Token::Int(&rest[..length]));
            index += length;
        } else if byte.is_ascii_alphabetic() || byte == b'_' {
            let length = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            // `r'…'`, `b"…"`: raw strings and bytes.
            if matches!(rest[length..].bytes().next(), Some(b'\'' | b'"')) {
                return None;
            }
            found.push(Token::Name(&rest[..length]));
            index += length;
        } else if byte == b'\'' || byte == b'"' {
            let (content, length) = string_literal(rest)?;
            found.push(Token::String(content));
            index += length;
        } else {
            // `//` comments, backticks, `=`, `&`, `|` alone, non-ASCII.
            if rest.starts_with("//") {
                return None;
            }
            let symbol = SYMBOLS.iter().find(|symbol| rest.starts_with(**symbol))?;
            found.push(Token::Symbol(symbol));
            index += symbol.len();
        }
    }
    Some(found)
}

/// The quoted string `rest` starts with, unescaped, and its length in `rest`. Only the escapes
/// `\n \r \t \\ \' \"` are read; any other, a line break and triple-quoted strings are CEL's.
fn string_literal(rest: &str) -> Option<(Cow<'_, str>, usize)> {
    let quote = rest.chars().next()?;
    let body = &rest[1..];
    let end = body.find([quote, '\\'])?;
    if body[end..].starts_with(quote) {
        let content = &body[..end];
        // An empty string followed by a quote opens a triple-quoted string.
        if content.contains(['\n', '\r']) || body[end + 1..].starts_with(quote) {
            return None;
        }
        return Some((Cow::Borrowed(content), end + 2));
    }
    let mut content = String::new();
    let mut characters = body.char_indices();
    while let Some((position, character)) = characters.next() {
        match character {
            '\n' | '\r' => return None,
            '\\' => content.push(match characters.next()?.1 {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                escaped @ ('\\' | '\'' | '"') => escaped,
                _ => return None,
            }),
            _ if character == quote => return Some((Cow::Owned(content), position + 2)),
            _ => content.push(character),
        }
    }
    None
}
