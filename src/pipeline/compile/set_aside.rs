//! A protocol with schema errors, checked as far as it can be: the invalid parts set aside, the rest compiled, every problem reported together in the file's order.

use std::cmp::Ordering;
use std::path::Path;

use serde_json::{Value, json};

use super::machine::Machine;
use crate::base::diagnostic::Diagnostic;
use crate::pipeline::load::set_aside::Violation;
use crate::pipeline::load::source::Source;
use crate::pipeline::load::{self, LoadError, Loaded, REPEATS_SHOWN, schema};

/// Past this many schema errors the rest is not compiled: the file is more mistake than
/// protocol, and finding what each mistake covers costs a walk over the file's nodes.
const MOST_SET_ASIDE: usize = 100;

/// Reads, loads and compiles a protocol file; every problem at once.
pub fn load_and_compile_file(path: &Path) -> Result<(Loaded, Machine), LoadError> {
    let text = load::read_text(path)?;
    load_and_compile_text(&path.display().to_string(), text).map_err(LoadError::Invalid)
}

/// Loads and compiles a protocol. With schema errors, the compiler still checks what they
/// leave usable (targets, expressions, names), and its findings join theirs in position order.
pub fn load_and_compile_text(
    path: &str,
    text: String,
) -> Result<(Loaded, Machine), Vec<Diagnostic>> {
    if let Some(refusal) = load::refuse_library(path) {
        return Err(refusal);
    }
    let (source, value, violations) =
        load::parse_checked(schema::DocumentKind::Protocol, path, text)?;
    if violations.is_empty() {
        let loaded = load::into_loaded(source, value)?;
        let machine = super::compile(&loaded)?;
        return Ok((loaded, machine));
    }
    let schema_errors: Vec<Diagnostic> = crate::base::diagnostic::limit_repeats(
        violations.iter().map(|v| v.diagnostic.clone()).collect(),
        REPEATS_SHOWN,
    );
    if violations.len() > MOST_SET_ASIDE {
        let mut diagnostics = schema_errors;
        diagnostics.push(Diagnostic::warning(format!(
            "more than {MOST_SET_ASIDE} schema errors: targets, expressions and names were not checked"
        )).with_help("fix these first; `validate` then checks the rest"));
        return Err(diagnostics);
    }
    let Some(found) = compile_the_rest(&source, &value, &violations) else {
        return Err(schema_errors);
    };
    let mut all = schema_errors;
    for diagnostic in found {
        if !all.contains(&diagnostic) {
            all.push(diagnostic);
        }
    }
    // Stable: diagnostics at one place keep their order; those without a place come last.
    all.sort_by_key(|diagnostic| {
        diagnostic
            .location
            .as_ref()
            .map_or((usize::MAX, usize::MAX), |location| {
                (location.position.line, location.position.column)
            })
    });
    Err(all)
}

/// The compiler's findings on the document without its unusable parts, except where those
/// parts make them unreliable; `None` when what is left is no protocol.
fn compile_the_rest(
    source: &Source,
    value: &Value,
    violations: &[Violation],
) -> Option<Vec<Diagnostic>> {
    let mut document = value.clone();
    let mut unusable: Vec<&str> = violations.iter().map(|v| v.unusable.as_str()).collect();
    // Deepest and last first, so setting one aside never moves another's place in a list.
    unusable.sort_by(|left, right| compare_pointers(right, left));
    unusable.dedup();
    // The compiler locates its findings by pointer: where a list item is set aside, the
    // positions of the items after it move up with them.
    let mut moved = source.clone();
    for pointer in unusable {
        if let Some((list, index)) = set_aside(&mut document, pointer)? {
            moved.positions.remove_list_item(list, index);
        }
    }
    let protocol = serde_json::from_value(document).ok()?;
    let loaded = Loaded {
        source: moved,
        protocol,
    };
    let found = match super::compile(&loaded) {
        Ok(_) => return Some(Vec::new()),
        Err(found) => found,
    };
    let unreliable: Vec<(usize, usize)> = violations
        .iter()
        .filter_map(|violation| source.positions.extent(&violation.unreliable))
        .map(|(first, last)| (first, line_end(&source.text, last)))
        .collect();
    Some(
        found
            .into_iter()
            .filter(|diagnostic| {
                diagnostic.location.as_ref().is_none_or(|location| {
                    let offset = location.position.offset;
                    !unreliable
                        .iter()
                        .any(|(first, last)| (*first..=*last).contains(&offset))
                })
            })
            .collect(),
    )
}

/// Removes the node at `pointer`; a state is emptied instead, so targets naming it still
/// resolve. `None` for the whole document; the list and the index when a list item went.
fn set_aside<'a>(document: &mut Value, pointer: &'a str) -> Option<Option<(&'a str, usize)>> {
    let (parent, last) = pointer.rsplit_once('/')?;
    let token = last.replace("~1", "/").replace("~0", "~");
    match document.pointer_mut(parent) {
        Some(Value::Object(entries)) if parent.ends_with("/states") => {
            if let Some(state) = entries.get_mut(&token) {
                *state = json!({});
            }
        }
        Some(Value::Object(entries)) => {
            entries.shift_remove(&token);
        }
        Some(Value::Array(items)) => {
            if let Ok(index) = token.parse::<usize>()
                && index < items.len()
            {
                items.remove(index);
                return Some(Some((parent, index)));
            }
        }
        // Already set aside with an ancestor.
        _ => {}
    }
    Some(None)
}

/// Document order of JSON pointers: token by token, list indices as numbers.
fn compare_pointers(left: &str, right: &str) -> Ordering {
    let mut left_tokens = left.split('/');
    let mut right_tokens = right.split('/');
    loop {
        match (left_tokens.next(), right_tokens.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(left), Some(right)) => {
                let order = match (left.parse::<usize>(), right.parse::<usize>()) {
                    (Ok(left), Ok(right)) => left.cmp(&right),
                    _ => left.cmp(right),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// The offset of the end of the line holding `offset`.
fn line_end(text: &str, offset: usize) -> usize {
    text.get(offset..)
        .and_then(|rest| rest.find('\n'))
        .map_or(text.len(), |newline| offset + newline)
}
