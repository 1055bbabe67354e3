//! What the cursor is on, read from the text around it (it works on half-typed lines that no
//! YAML parser takes): which kind of name belongs there, and the word typed so far.

/// The kind of name that belongs at the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// After `target:` or `initial:`, an `on:` short form's value, inside `In('...')`.
    State,
    /// A key under `on:`.
    Event,
    /// Inside `${...}`, a guard, a condition or an assigned value.
    Expression,
    /// After `use:`.
    Block,
    /// After `retry:`.
    Policy,
    /// Anything else: hover and definition still look the word up everywhere.
    Other,
}

/// The cursor's slot, and the byte offset where the word being typed starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub slot: Slot,
    pub word_start: usize,
    /// The cursor itself, moved back onto a character boundary within the text.
    pub offset: usize,
}

/// Keys whose value is a state id (or a list of them).
const STATE_KEYS: [&str; 2] = ["target", "initial"];

/// Keys whose value is an expression.
const EXPRESSION_KEYS: [&str; 4] = ["guard", "if", "while", "until"];

/// Reads the slot at byte `offset` of `text`.
pub fn cursor_at(text: &str, offset: usize) -> Cursor {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |newline| newline + 1);
    let before = &text[line_start..offset];
    let slot = slot_of(text, line_start, before);
    let is_word = |character: char| match slot {
        Slot::Expression => character.is_alphanumeric() || character == '_',
        _ => character.is_alphanumeric() || "_-.".contains(character),
    };
    let word_length: usize = before
        .chars()
        .rev()
        .take_while(|character| is_word(*character))
        .map(char::len_utf8)
        .sum();
    Cursor {
        slot,
        word_start: offset - word_length,
        offset,
    }
}

/// The word the cursor is on (a name, an event, or a relative path), as a byte range.
pub fn word_around(text: &str, offset: usize) -> std::ops::Range<usize> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let is_word = |character: char| character.is_alphanumeric() || "_-./".contains(character);
    let start = offset
        - text[..offset]
            .chars()
            .rev()
            .take_while(|character| is_word(*character))
            .map(char::len_utf8)
            .sum::<usize>();
    let end = offset
        + text[offset..]
            .chars()
            .take_while(|character| is_word(*character))
            .map(char::len_utf8)
            .sum::<usize>();
    start..end
}

fn slot_of(text: &str, line_start: usize, before: &str) -> Slot {
    if let Some(call) = before.rfind("In(") {
        let argument = &before[call + 3..];
        let quotes = argument.matches(['\'', '"']).count();
        if quotes == 1 && !argument.contains(')') {
            return Slot::State;
        }
    }
    if let Some(open) = before.rfind("${")
        && !before[open..].contains('}')
    {
        return Slot::Expression;
    }
    // `on: { go: done, st` on one line: the flow mapping's own key decides.
    if let Some(open) = before.rfind('{')
        && !before[open..].contains('}')
        && last_key(&before[..open]) == Some("on")
    {
        let inside = &before[open + 1..];
        let entry = &inside[inside.rfind(',').map_or(0, |comma| comma + 1)..];
        return match last_key(entry) {
            Some(_) => Slot::State,
            None => Slot::Event,
        };
    }
    let parent = parent_key(text, line_start, indentation(before));
    match last_key(before) {
        Some(key) if STATE_KEYS.contains(&key) => Slot::State,
        Some(key) if EXPRESSION_KEYS.contains(&key) => Slot::Expression,
        Some("use") => Slot::Block,
        Some("retry") => Slot::Policy,
        // `assign: { name: value }` on one line, or `name: value` under `assign:`.
        Some(_) if before.contains("assign:") || parent.as_deref() == Some("assign") => {
            Slot::Expression
        }
        Some(_) if parent.as_deref() == Some("on") => Slot::State,
        Some(_) => Slot::Other,
        None => match parent.as_deref() {
            Some("on") => Slot::Event,
            Some(key) if before.trim_start().starts_with('-') && STATE_KEYS.contains(&key) => {
                Slot::State
            }
            Some("retry") if before.trim_start().starts_with('-') => Slot::Policy,
            _ => Slot::Other,
        },
    }
}

/// The key whose value the cursor is in on this line: the word before the last `: `
/// (`on: { go: ` gives `go`); none while a key is being typed.
pub(super) fn last_key(before: &str) -> Option<&str> {
    let (colon, _) = before.char_indices().rev().find(|(index, character)| {
        *character == ':'
            && before[index + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
    })?;
    let key_text = before[..colon].trim_end().trim_end_matches(['"', '\'']);
    let key_start = key_text
        .rfind(|character: char| character.is_whitespace() || "{,-'\"".contains(character))
        .map_or(0, |index| index + 1);
    Some(&key_text[key_start..])
}

/// How far the line is indented, a list item's `- ` counted as indentation (its keys line up
/// with the next line's).
pub(super) fn indentation(line: &str) -> usize {
    line.chars()
        .take_while(|character| *character == ' ' || *character == '-')
        .count()
}

/// The key of the nearest line above `line_start` indented less than `column`.
pub(super) fn parent_key(text: &str, line_start: usize, column: usize) -> Option<String> {
    let above = &text[..line_start];
    for line in above.lines().rev() {
        let content = line.trim_start_matches([' ', '-']);
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if indentation(line) < column {
            let key = content.split(':').next()?.trim().trim_matches(['"', '\'']);
            return Some(key.to_string());
        }
    }
    None
}

/// The `on:` key of the transition the cursor at byte `offset` is in (`approve` in
/// `on: { approve: { guard: "event.data.` or on the lines below `approve:`); `None` outside
/// a transition on an event (entry actions, `always`).
pub fn transition_event(text: &str, offset: usize) -> Option<String> {
    let keys = enclosing_keys(text, offset);
    let on = keys.iter().rposition(|key| key == "on")?;
    keys.get(on + 1).cloned()
}

/// The keys whose values hold the cursor, outermost first: those of the lines above it, each
/// indented less than the one below, then those open on its own line (flow mappings
/// included).
fn enclosing_keys(text: &str, offset: usize) -> Vec<String> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |newline| newline + 1);
    let before = &text[line_start..offset];
    let mut column = indentation(before);
    let mut above = Vec::new();
    for line in text[..line_start].lines().rev() {
        if column == 0 {
            break;
        }
        let content = line.trim_start_matches([' ', '-']);
        if content.is_empty() || content.starts_with('#') || indentation(line) >= column {
            continue;
        }
        column = indentation(line);
        if let Some(key) = line_keys(line).into_iter().next() {
            above.push(key);
        }
    }
    above.reverse();
    above.extend(line_keys(before));
    above
}

/// The keys open at the end of `line`: its block key, then the key of each flow mapping or
/// list still open (`a: { b: [{ c: "x` gives `a`, `b`, `c`). Quoted text is skipped.
fn line_keys(line: &str) -> Vec<String> {
    // One entry per nesting level: the key whose value is being written there.
    let mut levels: Vec<Option<String>> = vec![None];
    let mut entry_start = 0;
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    let characters: Vec<(usize, char)> = line.char_indices().collect();
    for (position, &(index, character)) in characters.iter().enumerate() {
        let next = characters.get(position + 1).map(|(_, next)| *next);
        if let Some(open) = quote {
            let escaped = open == '"' && previous == '\\';
            if character == open && !escaped {
                quote = None;
            }
            previous = character;
            continue;
        }
        match character {
            // A quote opens a scalar only where one starts (`'` inside `In('x')` does not).
            '"' | '\''
                if line[entry_start..index]
                    .trim()
                    .trim_start_matches('-')
                    .trim()
                    .is_empty() =>
            {
                quote = Some(character);
            }
            '{' | '[' => {
                levels.push(None);
                entry_start = index + 1;
            }
            '}' | ']' => {
                if levels.len() > 1 {
                    levels.pop();
                }
                entry_start = index + 1;
            }
            ',' => {
                if let Some(level) = levels.last_mut() {
                    *level = None;
                }
                entry_start = index + 1;
            }
            ':' if next.is_none_or(char::is_whitespace) => {
                let key = line[entry_start..index]
                    .trim()
                    .trim_start_matches(['-', ' '])
                    .trim_matches(['"', '\'']);
                if let Some(level) = levels.last_mut() {
                    *level = Some(key.to_string());
                }
                entry_start = index + 1;
            }
            '#' if previous.is_whitespace() => break,
            _ => {}
        }
        previous = character;
    }
    levels.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(text: &str) -> Slot {
        cursor_at(text, text.len()).slot
    }

    #[test]
    fn reads_the_slot_from_the_text_before_the_cursor() {
        assert_eq!(
            slot("states:\n  a:\n    on:\n      go: { target: b"),
            Slot::State
        );
        assert_eq!(slot("    on:\n      go: re"), Slot::State);
        assert_eq!(slot("    on:\n      do"), Slot::Event);
        assert_eq!(
            slot("    always: { target: x, guard: att"),
            Slot::Expression
        );
        assert_eq!(slot("  - log: \"n=${cou"), Slot::Expression);
        assert_eq!(slot("    guard: In('ret"), Slot::State);
        assert_eq!(slot("      - use: sh"), Slot::Block);
        assert_eq!(slot("        retry: [default, qu"), Slot::Policy);
        assert_eq!(slot("  - assign:\n      count: cou"), Slot::Expression);
        assert_eq!(slot("id: x\ndescription: hel"), Slot::Other);
        assert_eq!(slot("    on: { go: done, st"), Slot::Event);
        assert_eq!(slot("    on: { go: do"), Slot::State);
        assert_eq!(slot("    on: { go: { target: do"), Slot::State);
        let text = "      do";
        assert_eq!(cursor_at(text, text.len()).word_start, 6);
    }

    #[test]
    fn finds_the_event_of_the_transition_around_the_cursor() {
        let event = |text: &str| transition_event(text, text.len());
        let flow = "states:\n  a:\n    on: { approve: { target: b, guard: \"event.data.";
        assert_eq!(event(flow).as_deref(), Some("approve"));
        let block = "states:\n  a:\n    on:\n      \"approve cancel\":\n        - guard: x\n          \
                     actions:\n            - assign: { note: \"'a: b' + event.data.";
        assert_eq!(event(block).as_deref(), Some("approve cancel"));
        let list = "    on:\n      approve:\n        actions: [{ log: \"${event.data.";
        assert_eq!(event(list).as_deref(), Some("approve"));
        // Entry actions are on no event, even below a state whose `on:` is written first.
        let entry = "  a:\n    on: { go: b }\n    entry:\n      - log: \"${event.data.";
        assert_eq!(event(entry), None);
        assert_eq!(event("    always: { guard: \"event.data."), None);
    }
}
