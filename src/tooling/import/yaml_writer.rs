//! A small YAML emitter for protocols: block style, and quotes wherever a plain scalar could be misread.

use serde_json::Value;

/// The first line of every written protocol, so editors find the schema.
pub const MODELINE: &str = "# yaml-language-server: $schema=../schemas/protocol.schema.json";

/// Words that some YAML reader would take for a boolean or null when written plain. Our loader
/// reads YAML 1.2, where only `true`, `false` and `null` are special, but quoting YAML 1.1's
/// booleans too keeps the file meaning the same in every editor and tool.
const AMBIGUOUS_WORDS: [&str; 7] = ["null", "true", "false", "yes", "no", "on", "off"];

/// YAML limits a key written without `?` to 1024 characters; longer keys (with a margin) are
/// written as explicit `? key` entries.
const MAX_IMPLICIT_KEY: usize = 1000;

/// Writes a protocol as YAML, starting with the modeline. The loader reads it back to the same
/// JSON value.
pub fn to_yaml(protocol: &Value) -> String {
    let mut output = String::with_capacity(1024);
    output.push_str(MODELINE);
    output.push('\n');
    match protocol {
        Value::Object(map) if !map.is_empty() => write_mapping(&mut output, map, 0, false),
        Value::Array(items) if !items.is_empty() => write_list(&mut output, items, 0, false),
        other => {
            write_inline(&mut output, other);
            output.push('\n');
        }
    }
    output
}

/// Writes the entries of a mapping at `indent`. When `continues_line`, the first entry follows
/// text already on the line (a list item's `- `), so it gets no indentation of its own.
fn write_mapping(
    output: &mut String,
    map: &serde_json::Map<String, Value>,
    indent: usize,
    continues_line: bool,
) {
    for (position, (key, value)) in map.iter().enumerate() {
        if position > 0 || !continues_line {
            push_indent(output, indent);
        }
        let mut written_key = String::new();
        write_scalar_string(&mut written_key, key);
        if written_key.chars().count() > MAX_IMPLICIT_KEY {
            output.push_str("? ");
            output.push_str(&written_key);
            output.push('\n');
            push_indent(output, indent);
        } else {
            output.push_str(&written_key);
        }
        output.push(':');
        write_nested(output, value, indent + 2);
    }
}

/// Writes the items of a list at `indent`; `continues_line` as for `write_mapping`.
fn write_list(output: &mut String, items: &[Value], indent: usize, continues_line: bool) {
    for (position, item) in items.iter().enumerate() {
        if position > 0 || !continues_line {
            push_indent(output, indent);
        }
        output.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => write_mapping(output, map, indent + 2, true),
            Value::Array(inner) if !inner.is_empty() => write_list(output, inner, indent + 2, true),
            scalar => {
                write_inline(output, scalar);
                output.push('\n');
            }
        }
    }
}

/// Writes the value of a mapping entry whose `key:` is already on the line.
fn write_nested(output: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            output.push('\n');
            write_mapping(output, map, indent, false);
        }
        Value::Array(items) if !items.is_empty() => {
            output.push('\n');
            write_list(output, items, indent, false);
        }
        scalar => {
            output.push(' ');
            write_inline(output, scalar);
            output.push('\n');
        }
    }
}

/// Scalars and empty collections, which fit on the current line.
fn write_inline(output: &mut String, value: &Value) {
    match value {
        Value::Null => output.push_str("null"),
        Value::Bool(flag) => output.push_str(if *flag { "true" } else { "false" }),
        // serde_json writes floats with a `.` or an exponent (`1.0`, `1e300`), which YAML 1.2
        // reads back as floats, and integers as digits only.
        Value::Number(number) => output.push_str(&number.to_string()),
        Value::String(text) => write_scalar_string(output, text),
        Value::Array(_) => output.push_str("[]"),
        Value::Object(_) => output.push_str("{}"),
    }
}

fn push_indent(output: &mut String, indent: usize) {
    output.extend(std::iter::repeat_n(' ', indent));
}

/// A string plain when that is unambiguous, otherwise double-quoted with escapes.
fn write_scalar_string(output: &mut String, text: &str) {
    if is_safe_plain(text) {
        output.push_str(text);
    } else {
        write_double_quoted(output, text);
    }
}

/// Whether `text` can be written without quotes and read back as the same string. Deliberately
/// narrow: it starts with a letter or `_` (so it cannot be a number, an indicator, an anchor or
/// a tag), uses only characters with no meaning inside a plain scalar (no `:` or `#`, so no
/// `: ` or ` #`), does not end in a space (plain scalars are trimmed) and is not a word that
/// reads as a boolean or null.
fn is_safe_plain(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    // A duration literal (`2s`, `1500ms`, `1h30m`) starts with a digit but is no number in any
    // YAML version, and reads best plain.
    if first.is_ascii_digit() {
        return crate::base::model::Duration::parse(text).is_some()
            && !text.contains(char::is_whitespace);
    }
    if !(first.is_ascii_alphabetic() || first == '_') || text.ends_with(' ') {
        return false;
    }
    let allowed = |character: char| {
        character.is_ascii_alphanumeric()
            || matches!(
                character,
                ' ' | '_'
                    | '.'
                    | '-'
                    | '/'
                    | '+'
                    | '*'
                    | '<'
                    | '>'
                    | '='
                    | '('
                    | ')'
                    | '!'
                    | '&'
                    | '|'
                    | '%'
                    | '\''
            )
    };
    text.chars().all(allowed)
        && !AMBIGUOUS_WORDS
            .iter()
            .any(|word| word.eq_ignore_ascii_case(text))
}

/// A YAML double-quoted scalar. Besides `"` and `\`, every character YAML does not allow
/// printed (C0 and C1 controls, DEL, the line and paragraph separators, the byte order mark and
/// the non-characters U+FFFE/U+FFFF) is escaped, so the file stays valid and readable.
fn write_double_quoted(output: &mut String, text: &str) {
    output.push('"');
    for character in text.chars() {
        match character {
            '"' => output.push_str("\\\""),
            '\\' => output.push_str("\\\\"),
            '\n' => output.push_str("\\n"),
            '\t' => output.push_str("\\t"),
            '\r' => output.push_str("\\r"),
            '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{feff}'
            | '\u{fffe}'
            | '\u{ffff}' => {
                output.push_str(&format!("\\u{:04x}", u32::from(character)));
            }
            other => output.push(other),
        }
    }
    output.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::load::yaml::{YamlLimits, parse};
    use serde_json::json;

    fn round_trip(value: &Value) -> Value {
        let text = to_yaml(value);
        match parse(&text, &YamlLimits::default()) {
            Ok(document) => document.value,
            Err(errors) => panic!("{errors:?} in\n{text}"),
        }
    }

    #[test]
    fn starts_with_the_modeline() {
        let text = to_yaml(&json!({"id": "x", "states": {"a": {}}}));
        assert!(text.starts_with(MODELINE), "{text}");
    }

    #[test]
    fn writes_block_style() {
        let value = json!({
            "id": "demo",
            "states": {
                "a": {"on": {"go": [{"target": "b", "guard": "count < 2"}, "c"]}},
                "b": {},
                "c": {"type": "final"}
            }
        });
        let expected = format!(
            "{MODELINE}\nid: demo\nstates:\n  a:\n    \"on\":\n      go:\n        - target: b\n          guard: count < 2\n        - c\n  b: {{}}\n  c:\n    type: final\n"
        );
        assert_eq!(to_yaml(&value), expected);
    }

    #[test]
    fn reads_back_the_same_values() {
        let strings = [
            "",
            " ",
            "a ",
            " a",
            "on",
            "On",
            "yes",
            "NO",
            "y",
            "null",
            "Null",
            "~",
            "true",
            "FALSE",
            "off",
            "1",
            "-1",
            "+1",
            "0x1F",
            "0o17",
            "1.5",
            "1e3",
            ".inf",
            "-.inf",
            ".nan",
            "a: b",
            "a:b",
            "a #b",
            "a#b",
            "#comment",
            "- item",
            "-",
            "?",
            "? x",
            ": x",
            "!tag",
            "&anchor",
            "*alias",
            "|",
            ">",
            "%directive",
            "@at",
            "`tick",
            "'single'",
            "\"double\"",
            "[list]",
            "{map}",
            "a, b",
            "x [0]",
            "${count}",
            "$${literal}",
            "line\nbreak",
            "tab\there",
            "trailing\n",
            "\r\n",
            "back\\slash",
            "quote\"inside",
            "it's",
            "unicode é ü 日本",
            "emoji 😀",
            "\u{7}bell",
            "\u{85}next line",
            "\u{2028}",
            "\u{feff}bom",
            "count + 1 > 2 && !done",
            "In('state')",
            "double(a) / double(b)",
            "done.state.x",
            "error.*",
            "*",
            "a b",
            "a  b",
            "---",
            "...",
            "--- x",
            "k:",
            "key: value",
            "2s",
            "1500ms",
            "1h30m",
            "0s",
            "1_000",
            "1:30",
            "12ms ",
            "=",
            "<<",
            "<< merge",
        ];
        let mut object = serde_json::Map::new();
        let long_key = "k".repeat(2_000);
        let long_quoted_key = "\"".repeat(600);
        let mut strings = strings.to_vec();
        strings.push(&long_key);
        strings.push(&long_quoted_key);
        for (index, text) in strings.iter().enumerate() {
            object.insert((*text).to_string(), json!(index));
            object.insert(format!("value {index}"), json!(text));
        }
        let value = json!({
            "strings": Value::Object(object),
            "list": strings,
            "numbers": [0, -1, 1, 1.5, -0.25, 1e300, 1e-7, 3.0, 18446744073709551615u64,
                        -9223372036854775808i64, 0.1],
            "scalars": [true, false, null],
            "empty": {"list": [], "map": {}, "string": ""},
            "nested": [[1, [2, []]], [{"a": {"b": [{}]}}], {"x": [[{"y": 1, "z": [1, 2]}]]}],
            "top": [{"a": 1, "b": {"c": [1, {"d": null}]}}],
        });
        assert_eq!(round_trip(&value), value);
        // Long keys in every position: top level, nested, first and later in a list item.
        let mut inner = serde_json::Map::new();
        inner.insert(long_key.clone(), json!({"x": [1, {"y": 2}]}));
        inner.insert("b".into(), json!([]));
        let mut later = serde_json::Map::new();
        later.insert("a".into(), json!(1));
        later.insert(long_key.clone(), json!("v"));
        let mut top = serde_json::Map::new();
        top.insert(long_key.clone(), json!([inner.clone(), later.clone()]));
        top.insert("nested".into(), Value::Object(inner));
        let value = Value::Object(top);
        assert_eq!(round_trip(&value), value);
    }

    #[test]
    fn a_scalar_or_empty_document_round_trips() {
        for value in [json!({}), json!([]), json!("on"), json!(1), json!([1, [2]])] {
            assert_eq!(round_trip(&value), value);
        }
    }

    #[test]
    fn quotes_only_what_needs_it() {
        assert!(is_safe_plain("done.state.x"));
        assert!(is_safe_plain("count < 2 && In('a')"));
        assert!(!is_safe_plain("on"));
        assert!(is_safe_plain("error.*"));
        assert!(!is_safe_plain("*"));
        assert!(!is_safe_plain("${x}"));
        assert!(!is_safe_plain("a: b"));
        assert!(is_safe_plain("1s"));
        assert!(is_safe_plain("1h30m"));
        assert!(!is_safe_plain("1"));
        assert!(!is_safe_plain("1e3"));
        assert!(!is_safe_plain("1.5s"));
    }
}
