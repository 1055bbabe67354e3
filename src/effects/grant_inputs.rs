//! Grants that name inputs (`write: ["${state_dir}/**"]`, `exec: ["${command[0]}"]`, `env: ["${variables}"]`): their placeholders, and their expansion into literal entries from a run's bound inputs.

use std::collections::BTreeMap;
use std::path::{Component, Path};

use crate::base::value::Value;

/// A piece of a grant as written: its own text, or a placeholder naming an input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GrantPiece<'a> {
    Text(&'a str),
    Input(Placeholder<'a>),
}

/// `${name}` (a string input, or each item of a list input) or `${name[N]}` (item N of a list).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placeholder<'a> {
    pub name: &'a str,
    pub index: Option<usize>,
}

/// What a grant's entries are, for the checks an input's value must pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GrantKind {
    /// A path glob or a program: the value is a literal path.
    Path,
    /// An environment variable's name.
    Variable,
}

/// The values of a protocol's inputs as its grants name them: each string input's value, each
/// list input's items (as strings); `None` for an input bound to nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GrantInputs(BTreeMap<String, Option<Vec<String>>>);

/// One entry of an expanded grant: pieces of text, each a pattern (`false`) or a literal taken
/// from an input (`true`).
pub type Expansion = Vec<(String, bool)>;

/// Splits a grant into its text and its placeholders; `Err` says what is malformed.
pub fn grant_pieces(grant: &str) -> Result<Vec<GrantPiece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = grant;
    while let Some(start) = rest.find("${") {
        let Some(length) = rest[start + 2..].find('}') else {
            return Err(format!(
                "the grant `{grant}` opens `${{` without closing it; write `${{name}}` to name \
                 an input"
            ));
        };
        if start > 0 {
            pieces.push(GrantPiece::Text(&rest[..start]));
        }
        let inside = &rest[start + 2..start + 2 + length];
        let placeholder = match inside.split_once('[') {
            None => Placeholder {
                name: inside,
                index: None,
            },
            Some((name, index)) => Placeholder {
                name,
                index: Some(
                    index
                        .strip_suffix(']')
                        .and_then(|digits| digits.parse().ok())
                        .ok_or_else(|| {
                            format!(
                                "the grant `{grant}` has `${{{inside}}}`; an item of a list \
                                 input is written `${{name[0]}}`"
                            )
                        })?,
                ),
            },
        };
        pieces.push(GrantPiece::Input(placeholder));
        rest = &rest[start + 3 + length..];
    }
    if !rest.is_empty() {
        pieces.push(GrantPiece::Text(rest));
    }
    Ok(pieces)
}

/// Whether a grant names an input.
pub fn names_inputs(grant: &str) -> bool {
    !named_inputs(grant).is_empty()
}

/// The names of the inputs a grant names (none when it is malformed: compiling reports that).
pub fn named_inputs(grant: &str) -> Vec<&str> {
    grant_pieces(grant)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|piece| match piece {
            GrantPiece::Input(placeholder) => Some(placeholder.name),
            GrantPiece::Text(_) => None,
        })
        .collect()
}

impl GrantInputs {
    /// Whether `name` has a value here.
    pub fn has_value(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(Option::is_some)
    }

    /// From inputs by name and their bound values.
    pub fn new<'a>(bound: impl IntoIterator<Item = (&'a str, &'a Value)>) -> GrantInputs {
        GrantInputs(
            bound
                .into_iter()
                .map(|(name, value)| {
                    let texts = match value {
                        Value::Null => None,
                        Value::List(items) => Some(items.iter().map(text_of).collect()),
                        other => Some(vec![text_of(other)]),
                    };
                    (name.to_string(), texts)
                })
                .collect(),
        )
    }

    /// The entries a grant stands for: one per combination of the items its placeholders name
    /// (a list input's items each give an entry; an empty list, a missing item or an empty
    /// value gives none).
    /// Every value is checked not to widen the grant beyond the literal path or name it gives.
    pub fn expand(&self, grant: &str, kind: GrantKind) -> Result<Vec<Expansion>, String> {
        let mut expansions: Vec<Expansion> = vec![Vec::new()];
        for piece in grant_pieces(grant)? {
            let choices: Vec<(String, bool)> = match piece {
                GrantPiece::Text(text) => vec![(text.to_string(), false)],
                GrantPiece::Input(placeholder) => self
                    .values(placeholder, grant)?
                    .into_iter()
                    // An empty value names nothing, so it grants nothing (`${dir}/**` would
                    // otherwise be `/**`).
                    .filter(|value| !value.is_empty())
                    .map(|value| check(placeholder.name, value, grant, kind).map(|()| value))
                    .map(|value| value.map(|value| (value.to_string(), true)))
                    .collect::<Result<_, _>>()?,
            };
            expansions = expansions
                .into_iter()
                .flat_map(|expansion| {
                    choices.iter().map(move |choice| {
                        let mut longer = expansion.clone();
                        longer.push(choice.clone());
                        longer
                    })
                })
                .collect();
        }
        Ok(expansions)
    }

    /// The values a placeholder stands for.
    fn values(&self, placeholder: Placeholder, grant: &str) -> Result<Vec<&str>, String> {
        let name = placeholder.name;
        let items = self.0.get(name).and_then(Option::as_ref).ok_or_else(|| {
            format!(
                "the grant `{grant}` names the input `{name}`, which has no value; supply it \
                 with --input {name}=..."
            )
        })?;
        match placeholder.index {
            None => Ok(items.iter().map(String::as_str).collect()),
            // A list too short names nothing, so it grants nothing.
            Some(index) => Ok(items.get(index).map(String::as_str).into_iter().collect()),
        }
    }
}

/// Refuses a value that would widen a grant beyond what it literally names: for a path, one
/// climbing with `..`; for a variable, anything but a plain name.
fn check(name: &str, value: &str, grant: &str, kind: GrantKind) -> Result<(), String> {
    let problem = match kind {
        GrantKind::Path
            if Path::new(value)
                .components()
                .any(|component| component == Component::ParentDir) =>
        {
            "climbs with `..`; a grant's path must not leave the directory it names: give the \
             path without `..`"
        }
        GrantKind::Variable
            if value.starts_with(|character: char| character.is_ascii_digit())
                || !value
                    .chars()
                    .all(|character| character.is_ascii_alphanumeric() || character == '_') =>
        {
            "is not a variable's name (letters, digits and `_`)"
        }
        _ => return Ok(()),
    };
    Err(format!(
        "the grant `{grant}` names the input `{name}` = `{value}`, which {problem}"
    ))
}

/// A value as a grant reads it: a string as it is, anything else as its JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.to_string(),
        other => other.to_json().to_string(),
    }
}
