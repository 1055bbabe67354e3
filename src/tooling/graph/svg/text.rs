//! Text in the SVG: escaping, an estimate of its width, and a bound on its length.

/// The font is monospaced so that widths can be known without measuring glyphs.
pub(super) const FONT_SIZE: f64 = 12.0;
pub(super) const CHARACTER_WIDTH: f64 = 7.3;
pub(super) const LINE_HEIGHT: f64 = 15.0;
/// Longer lines (a long guard) are cut with `…`; the whole text stays in a `<title>`.
pub(super) const MAX_LINE_CHARACTERS: usize = 60;

/// The width a line takes once shortened.
pub(super) fn text_width(line: &str) -> f64 {
    line.chars().count().min(MAX_LINE_CHARACTERS) as f64 * CHARACTER_WIDTH
}

/// The line as drawn: at most `MAX_LINE_CHARACTERS` characters.
pub(super) fn shortened(line: &str) -> std::borrow::Cow<'_, str> {
    if line.chars().count() <= MAX_LINE_CHARACTERS {
        return line.into();
    }
    let kept: String = line.chars().take(MAX_LINE_CHARACTERS - 1).collect();
    format!("{kept}…").into()
}

/// Text for XML content and attribute values alike; control characters, which XML 1.0
/// forbids, become spaces.
pub(super) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(' '),
            control if control.is_control() => escaped.push(' '),
            other => escaped.push(other),
        }
    }
    escaped
}
