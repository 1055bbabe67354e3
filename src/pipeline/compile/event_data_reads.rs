//! `event.data.<key>` read in a transition on declared events: the key must be one the events' schemas list.

use super::Compiler;
use super::expression::ExpressionProblem;
use super::machine::EventDescriptor;
use crate::base::diagnostic::did_you_mean;
use crate::base::model;

const READ: &str = "event.data.";

/// Reports each `event.data.<key>` in the guard and actions of `transition` whose key none of
/// its events' schemas lists. Checked only when every descriptor is a declared event whose
/// schema lists `properties`: otherwise the data's shape is not known here.
pub fn check(
    compiler: &mut Compiler,
    events: &[EventDescriptor],
    transition: &model::Transition,
    pointer: &str,
) {
    if events.is_empty() {
        return;
    }
    let mut known: Vec<String> = Vec::new();
    for descriptor in events {
        let EventDescriptor::Prefix(name) = descriptor else {
            return;
        };
        let Some(properties) = compiler
            .declared_event(name)
            .and_then(|schema| schema.property_names())
        else {
            return;
        };
        known.extend(properties.into_iter().map(str::to_string));
    }
    let mut strings = Vec::new();
    if let Some(guard) = &transition.guard {
        strings.push((format!("{pointer}/guard"), guard.clone()));
    }
    if let Ok(actions) = serde_json::to_value(&transition.actions) {
        collect_strings(&actions, &format!("{pointer}/actions"), &mut strings);
    }
    let names: Vec<&str> = events
        .iter()
        .filter_map(|descriptor| match descriptor {
            EventDescriptor::Prefix(name) => Some(&**name),
            EventDescriptor::Any => None,
        })
        .collect();
    for (string_pointer, text) in strings {
        let problems: Vec<ExpressionProblem> = reads(&text)
            .filter(|(_, key)| !known.iter().any(|property| property == key))
            .map(|(offset, key)| ExpressionProblem {
                offset: offset + READ.len(),
                message: format!(
                    "`{key}` is not in the data of {}",
                    names
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
                help: Some(
                    did_you_mean(key, known.iter().map(String::as_str)).unwrap_or_else(|| {
                        format!("its schema under `events:` lists: {}", known.join(", "))
                    }),
                ),
            })
            .collect();
        if !problems.is_empty() {
            compiler.expression_problems(&string_pointer, problems);
        }
    }
}

/// Each `event.data.<key>` in `text`: the offset of `event` and the key.
fn reads(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.match_indices(READ).filter_map(|(offset, _)| {
        // `myevent.data.x` is some other name's field.
        let preceded = text[..offset]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        let rest = &text[offset + READ.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (!preceded && end > 0).then(|| (offset, &rest[..end]))
    })
}

/// Every string in `value` with its JSON pointer.
fn collect_strings(value: &serde_json::Value, pointer: &str, strings: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::String(text) if text.contains(READ) => {
            strings.push((pointer.to_string(), text.clone()))
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                collect_strings(item, &format!("{pointer}/{index}"), strings);
            }
        }
        serde_json::Value::Object(entries) => {
            for (key, entry) in entries {
                let token = crate::pipeline::load::yaml::escape_pointer_token(key);
                collect_strings(entry, &format!("{pointer}/{token}"), strings);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::reads;

    #[test]
    fn reads_are_found_with_their_offsets() {
        let found: Vec<(usize, &str)> =
            reads("event.data.verdict == 'x' && has(event.data.reason) && myevent.data.y")
                .collect();
        assert_eq!(found, [(0, "verdict"), (33, "reason")]);
    }
}
