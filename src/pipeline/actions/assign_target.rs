//! An `assign` key as written: the variable, then map keys, each fixed (`.critic`, `['src/a.rs']`) or computed when the assignment runs (`[r.path]`).

/// One map key below the variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WrittenKey<'a> {
    /// `.critic`: the key itself.
    Fixed(&'a str),
    /// `[r.path]`: the expression between the brackets, and its byte offset in the whole key.
    Computed { text: &'a str, offset: usize },
}

/// A whole `assign` key: `verdicts`, `verdicts.critic`, `verdicts[r.path].notes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenTarget<'a> {
    pub variable: &'a str,
    pub keys: Vec<WrittenKey<'a>>,
}

/// Why a key is not a target: the message, and what to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub message: String,
    pub help: String,
}

/// What every malformed key is told to write.
const HOW: &str = "write the variable, then its keys: `.key` for a fixed one (letters, digits, \
                   `_` and `-`), `[expression]` for one computed when the assignment runs, \
                   e.g. `verdicts.critic` or `verdicts[r.path]`";

/// Splits an `assign` key into its variable and map keys.
pub fn parse(target: &str) -> Result<WrittenTarget<'_>, Malformed> {
    let malformed = |message: String| Malformed {
        message,
        help: HOW.to_string(),
    };
    let end = target.find(['.', '[']).unwrap_or(target.len());
    let variable = &target[..end];
    let mut keys = Vec::new();
    let mut position = end;
    while position < target.len() {
        let rest = &target[position..];
        if let Some(after) = rest.strip_prefix('.') {
            let length = after.find(['.', '[']).unwrap_or(after.len());
            let key = &after[..length];
            if key.is_empty() {
                return Err(malformed(format!(
                    "`{target}` is not a path: it has an empty key"
                )));
            }
            if !is_plain_key(key) {
                return Err(malformed(format!(
                    "`{target}` is not a path: `{key}` is not a map key"
                )));
            }
            keys.push(WrittenKey::Fixed(key));
            position += 1 + length;
        } else {
            // `[` here: `find` stopped at it, or a `]` left the text at one.
            let Some(body) = rest.strip_prefix('[') else {
                return Err(malformed(format!(
                    "`{target}` is not a path: `{rest}` follows a `]`"
                )));
            };
            let Some(length) = bracketed_length(body) else {
                return Err(malformed(format!(
                    "`{target}` is not a path: a `[` is not closed"
                )));
            };
            let text = &body[..length];
            if text.trim().is_empty() {
                return Err(malformed(format!(
                    "`{target}` is not a path: `[]` names no key"
                )));
            }
            keys.push(WrittenKey::Computed {
                text,
                offset: position + 1,
            });
            position += length + 2;
        }
    }
    Ok(WrittenTarget { variable, keys })
}

/// A key written after a `.`: letters, digits, `_` and `-`.
pub fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|character| character.is_alphanumeric() || character == '_' || character == '-')
}

/// The length in bytes of the expression that `text` starts with, up to its closing `]`:
/// brackets nest, and a quoted text may hold any of them.
fn bracketed_length(text: &str) -> Option<usize> {
    let characters: Vec<char> = text.chars().collect();
    let index = crate::pipeline::compile::expression::closing(&characters, 0, '[', ']')?;
    Some(
        characters[..index]
            .iter()
            .map(|character| character.len_utf8())
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fixed_and_computed_keys() {
        let parsed = parse("verdicts[r.path].notes['a]b'][m[0]]").unwrap();
        assert_eq!(parsed.variable, "verdicts");
        assert_eq!(
            parsed.keys,
            [
                WrittenKey::Computed {
                    text: "r.path",
                    offset: 9
                },
                WrittenKey::Fixed("notes"),
                WrittenKey::Computed {
                    text: "'a]b'",
                    offset: 23
                },
                WrittenKey::Computed {
                    text: "m[0]",
                    offset: 30
                },
            ]
        );
        assert_eq!(parse("count").unwrap().keys, []);
    }

    #[test]
    fn refuses_what_is_no_path() {
        for (bad, says) in [
            ("verdicts.", "an empty key"),
            ("verdicts..a", "an empty key"),
            ("verdicts.a b", "`a b` is not a map key"),
            ("verdicts[r.path", "a `[` is not closed"),
            ("verdicts[ ]", "`[]` names no key"),
            ("verdicts[a]b", "`b` follows a `]`"),
        ] {
            let problem = parse(bad).unwrap_err();
            assert!(problem.message.contains(says), "{bad}: {problem:?}");
        }
    }
}
