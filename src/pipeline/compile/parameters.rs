//! Block parameters in expressions: each name read is replaced by `(argument)`, token by token.

/// A block parameter bound for one `use`: its name and the CEL text it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub name: String,
    pub argument: String,
}

/// An expression with its parameters replaced, and where each replacement came from, so a
/// problem found in the result is reported where the author wrote the name.
#[derive(Debug)]
pub struct Substituted {
    pub text: String,
    /// Each replacement: its start and length in `text`, and the name's start and length in
    /// the original, in characters.
    replacements: Vec<Replacement>,
}

#[derive(Debug)]
struct Replacement {
    start: usize,
    length: usize,
    original_start: usize,
    original_length: usize,
}

impl Substituted {
    /// The offset in the original text of a character offset in the substituted one: inside a
    /// replacement, the name it replaced.
    pub fn original_offset(&self, offset: usize) -> usize {
        let mut shift: isize = 0;
        for replacement in &self.replacements {
            if offset < replacement.start {
                break;
            }
            if offset < replacement.start + replacement.length {
                return replacement.original_start;
            }
            shift += replacement.length as isize - replacement.original_length as isize;
        }
        (offset as isize - shift).max(0) as usize
    }
}

/// Replaces each parameter read in `text` by its argument in parentheses. A name is a read
/// unless it follows a `.` (a field, `a.path`), is called (`path(...)`), or sits inside a
/// string literal; the parentheses keep the argument one operand whatever it contains.
pub fn substitute(text: &str, bindings: &[Binding]) -> Substituted {
    let characters: Vec<char> = text.chars().collect();
    let mut output = String::with_capacity(text.len());
    let mut output_length = 0;
    let mut replacements = Vec::new();
    let mut index = 0;
    let mut previous_significant: Option<char> = None;
    while index < characters.len() {
        let character = characters[index];
        if character == '\'' || character == '"' {
            let end = string_end(&characters, index, false);
            copy(&characters[index..end], &mut output, &mut output_length);
            previous_significant = Some(character);
            index = end;
            continue;
        }
        if character.is_ascii_digit() {
            // A number with its suffixes and exponent (`1e3`, `0x1F`, `3u`): no name inside.
            let end = word_end(&characters, index);
            copy(&characters[index..end], &mut output, &mut output_length);
            previous_significant = Some(character);
            index = end;
            continue;
        }
        if character.is_ascii_alphabetic() || character == '_' {
            let end = word_end(&characters, index);
            let word: String = characters[index..end].iter().collect();
            if matches!(characters.get(end), Some('\'' | '"'))
                && matches!(word.to_ascii_lowercase().as_str(), "r" | "b" | "rb" | "br")
            {
                // A string with a prefix: `r'...'`, `b"..."`.
                let raw = word.to_ascii_lowercase().contains('r');
                let string_end = string_end(&characters, end, raw);
                copy(
                    &characters[index..string_end],
                    &mut output,
                    &mut output_length,
                );
                previous_significant = Some('"');
                index = string_end;
                continue;
            }
            let next_significant = characters[end..]
                .iter()
                .find(|next| !next.is_whitespace())
                .copied();
            let is_read = previous_significant != Some('.') && next_significant != Some('(');
            match bindings.iter().find(|binding| binding.name == word) {
                Some(binding) if is_read => {
                    let replacement = format!("({})", binding.argument);
                    let length = replacement.chars().count();
                    replacements.push(Replacement {
                        start: output_length,
                        length,
                        original_start: index,
                        original_length: end - index,
                    });
                    output.push_str(&replacement);
                    output_length += length;
                }
                _ => copy(&characters[index..end], &mut output, &mut output_length),
            }
            previous_significant = Some('a');
            index = end;
            continue;
        }
        output.push(character);
        output_length += 1;
        if !character.is_whitespace() {
            previous_significant = Some(character);
        }
        index += 1;
    }
    Substituted {
        text: output,
        replacements,
    }
}

/// The text of a plain string literal (`'x'` or `"x"`, perhaps in parentheses, with no escape
/// or quote inside), which is known when the protocol loads.
pub fn string_literal(argument: &str) -> Option<&str> {
    let mut text = argument.trim();
    while let Some(inner) = text
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
    {
        text = inner.trim();
    }
    let quote = text
        .chars()
        .next()
        .filter(|first| *first == '\'' || *first == '"')?;
    let inner = text.strip_prefix(quote)?.strip_suffix(quote)?;
    (!inner.contains([quote, '\\'])).then_some(inner)
}

fn copy(characters: &[char], output: &mut String, length: &mut usize) {
    output.extend(characters);
    *length += characters.len();
}

/// The end of the letters, digits and `_` starting at `start`.
fn word_end(characters: &[char], start: usize) -> usize {
    characters[start..]
        .iter()
        .position(|character| !(character.is_ascii_alphanumeric() || *character == '_'))
        .map_or(characters.len(), |length| start + length)
}

/// The index just past the string literal opening at `start` (single or triple quoted); the
/// end of the text when it is not closed, which the parser reports.
fn string_end(characters: &[char], start: usize, raw: bool) -> usize {
    let quote = characters[start];
    let triple =
        characters.get(start + 1) == Some(&quote) && characters.get(start + 2) == Some(&quote);
    let mut index = start + if triple { 3 } else { 1 };
    while index < characters.len() {
        let character = characters[index];
        if character == '\\' && !raw {
            index += 2;
            continue;
        }
        if character == quote {
            if !triple {
                return index + 1;
            }
            if characters.get(index + 1) == Some(&quote)
                && characters.get(index + 2) == Some(&quote)
            {
                return index + 3;
            }
        }
        index += 1;
    }
    characters.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(name: &str, argument: &str) -> Vec<Binding> {
        vec![Binding {
            name: name.into(),
            argument: argument.into(),
        }]
    }

    #[test]
    fn replaces_reads_only() {
        let bindings = bind("kind", "a + b");
        let substituted = substitute("kind == 'kind' && x.kind == kind(1) || kind", &bindings);
        assert_eq!(
            substituted.text,
            "(a + b) == 'kind' && x.kind == kind(1) || (a + b)"
        );
    }

    #[test]
    fn skips_prefixed_strings_and_numbers() {
        let bindings = bind("e3", "0");
        assert_eq!(
            substitute("1e3 + r'e3' + e3", &bindings).text,
            "1e3 + r'e3' + (0)"
        );
    }

    #[test]
    fn a_plain_string_literal_is_known_at_load_time() {
        assert_eq!(string_literal("'tool_call'"), Some("tool_call"));
        assert_eq!(string_literal("( (\"grep\") )"), Some("grep"));
        assert_eq!(string_literal("'a' + 'b'"), None);
        assert_eq!(string_literal("name"), None);
        assert_eq!(string_literal("'it\\'s'"), None);
    }

    #[test]
    fn maps_offsets_back_to_the_name() {
        let bindings = bind("n", "count * 2");
        let substituted = substitute("n + missing", &bindings);
        assert_eq!(substituted.text, "(count * 2) + missing");
        // `missing` starts at 14 after, at 4 before; any offset inside the argument is the name.
        assert_eq!(substituted.original_offset(14), 4);
        assert_eq!(substituted.original_offset(5), 0);
        assert_eq!(substituted.original_offset(0), 0);
    }
}
