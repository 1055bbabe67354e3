//! What the generator and the explorer try: events with data drawn from the guards, input
//! values from their declarations, and mock outcomes for each effect id.

use std::collections::BTreeSet;

use super::probe::Setup;
use crate::base::model::input::InputType;
use crate::base::model::scenario::SendStep;
use crate::pipeline::compile::machine::{EventDescriptor, Machine};

/// Most data values tried for one event, input values for one input, outcomes for one effect.
pub const MAX_CANDIDATES: usize = 10;

/// Everything that can be varied, read from the machine.
#[derive(Debug, Clone)]
pub struct Alphabet {
    /// External events, each with one candidate payload.
    pub sends: Vec<SendStep>,
    /// Required inputs given a first value, every effect mocked to succeed.
    pub base: Setup,
    /// The base with one input or one mock changed.
    pub variants: Vec<Setup>,
}

/// A literal written in a guard: quoted text, a number, or a boolean.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Literal {
    Text(String),
    Number(f64),
    Boolean(bool),
}

pub(super) fn literals(text: &str) -> Vec<Literal> {
    let pattern = regex::Regex::new(
        r#"'([^']*)'|"([^"]*)"|(?:^|[^\w.])(-?\d+(?:\.\d+)?)\b|\b(true|false)\b"#,
    )
    .expect("the literal pattern is valid");
    pattern
        .captures_iter(text)
        .filter_map(|found| {
            if let Some(quoted) = found.get(1).or_else(|| found.get(2)) {
                Some(Literal::Text(quoted.as_str().to_string()))
            } else if let Some(number) = found.get(3) {
                number.as_str().parse().ok().map(Literal::Number)
            } else {
                found
                    .get(4)
                    .map(|word| Literal::Boolean(word.as_str() == "true"))
            }
        })
        .collect()
}

/// A number and its neighbours, so `<`, `<=`, `==` and `>` each come out true and false.
fn around(number: f64) -> Vec<serde_json::Value> {
    [number - 1.0, number, number + 1.0]
        .into_iter()
        .map(|value| {
            if value.fract() == 0.0 {
                serde_json::json!(value as i64)
            } else {
                serde_json::json!(value)
            }
        })
        .collect()
}

fn values_of(literal: &Literal) -> Vec<serde_json::Value> {
    match literal {
        Literal::Text(text) => vec![serde_json::json!(text), serde_json::json!("")],
        Literal::Number(number) => around(*number),
        Literal::Boolean(_) => vec![serde_json::json!(true), serde_json::json!(false)],
    }
}

pub(super) fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if list.len() < MAX_CANDIDATES && !list.contains(&item) {
        list.push(item);
    }
}

impl Alphabet {
    pub fn of(machine: &Machine) -> Alphabet {
        let guards: Vec<&str> = machine
            .transitions
            .iter()
            .filter_map(|transition| transition.guard.as_ref().map(|guard| &*guard.text))
            .collect();
        Alphabet {
            sends: sends(machine),
            base: base(machine),
            variants: variants(machine, &guards),
        }
    }
}

fn sends(machine: &Machine) -> Vec<SendStep> {
    let timer_events: BTreeSet<&str> = machine
        .states
        .iter()
        .flat_map(|state| state.timers.iter().map(|timer| &*timer.event))
        .collect();
    let field = regex::Regex::new(r"event\.data\.([A-Za-z_][A-Za-z0-9_]*)")
        .expect("the field pattern is valid");
    let mut names: Vec<&str> = Vec::new();
    for transition in &machine.transitions {
        for event in &transition.events {
            if let EventDescriptor::Prefix(name) = event
                && !timer_events.contains(&**name)
                && !["error", "done"].contains(&name.split('.').next().unwrap_or_default())
                && !names.contains(&&**name)
            {
                names.push(name);
            }
        }
    }
    let compared_fields = compared_fields(machine);
    let mut sends = Vec::new();
    for name in names {
        // Declared data: one that fits its schema, and that with one property changed; what
        // the guards try goes over the fitting one, so a required field stays given.
        let schema = machine
            .declared_events
            .as_ref()
            .and_then(|declared| declared.schema(name))
            .map(|schema| &*schema.schema);
        let fitting = schema.map_or(serde_json::Value::Null, super::sample::instance);
        let mut payloads: Vec<serde_json::Value> = Vec::new();
        if !fitting.is_null() {
            push_unique(&mut payloads, fitting.clone());
        }
        for variant in schema.map(super::sample::variants).unwrap_or_default() {
            push_unique(&mut payloads, variant);
        }
        let mut guarded: Vec<serde_json::Value> = Vec::new();
        let guards = machine.transitions.iter().filter(|transition| {
            transition
                .events
                .iter()
                .any(|event| matches!(event, EventDescriptor::Prefix(prefix) if &**prefix == name))
        });
        for guard in guards.filter_map(|transition| transition.guard.as_ref()) {
            let found = literals(&guard.text);
            for capture in field.captures_iter(&guard.text) {
                let key = capture[1].to_string();
                let mut values: Vec<serde_json::Value> = found.iter().flat_map(values_of).collect();
                values.extend([serde_json::json!(true), serde_json::json!("x")]);
                for value in values {
                    push_unique(&mut guarded, serde_json::json!({ key.clone(): value }));
                }
            }
        }
        // Data kept in context and tested later (`assign: { review: event.data }`, then
        // `review.signal == 'PASSED'`): each field compared with a literal anywhere.
        for (key, value) in &compared_fields {
            push_unique(&mut guarded, serde_json::json!({ key.clone(): value }));
        }
        let room = MAX_CANDIDATES.saturating_sub(payloads.len().min(MAX_CANDIDATES / 2));
        for data in guarded.into_iter().take(room) {
            let data = super::sample::over(&fitting, &data);
            if !payloads.contains(&data) {
                payloads.push(data);
            }
        }
        sends.push(SendStep {
            send: name.to_string(),
            data: None,
            outcome: None,
        });
        sends.extend(payloads.into_iter().map(|data| SendStep {
            send: name.to_string(),
            data: Some(data),
            outcome: None,
        }));
    }
    sends
}

/// Each field any guard compares with quoted text (`review.signal == 'PASSED'`), with that text.
pub(super) fn compared_fields(machine: &Machine) -> Vec<(String, String)> {
    let comparison = regex::Regex::new(r#"\.([A-Za-z_][A-Za-z0-9_]*)\s*==\s*'([^']*)'"#)
        .expect("the comparison pattern is valid");
    machine
        .transitions
        .iter()
        .filter_map(|transition| transition.guard.as_ref())
        .flat_map(|guard| {
            comparison
                .captures_iter(&guard.text)
                .map(|found| (found[1].to_string(), found[2].to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A first value for each required input without a default, and `ok:` for every effect (a
/// child's declared output for a map's child items).
fn base(machine: &Machine) -> Setup {
    let inputs = machine
        .inputs
        .iter()
        .filter(|input| input.required && input.default.is_none())
        .map(|input| {
            let value = match input.kind {
                InputType::Enum => input.values.first().cloned().unwrap_or_default(),
                InputType::Integer | InputType::Number => input
                    .minimum
                    .map_or("1".to_string(), |minimum| minimum.to_string()),
                InputType::Boolean => "false".to_string(),
                InputType::Duration => input
                    .minimum
                    .map_or("1s".to_string(), |minimum| format!("{minimum}ms")),
                InputType::List => r#"["x"]"#.to_string(),
                _ => "x".to_string(),
            };
            (input.name.clone(), value)
        })
        .collect();
    let mocks = machine
        .action_ids
        .iter()
        .map(|id| {
            let first = super::outcomes::child_outcomes(machine, id)
                .and_then(|outcomes| outcomes.into_iter().next());
            (id.clone(), first.unwrap_or_else(|| "ok:".to_string()))
        })
        .collect();
    Setup { inputs, mocks }
}

fn variants(machine: &Machine, guards: &[&str]) -> Vec<Setup> {
    let base = base(machine);
    let mut variants = Vec::new();
    for input in &machine.inputs {
        let mut values: Vec<String> = input.values.clone();
        match input.kind {
            InputType::Boolean => values.extend(["true".into(), "false".into()]),
            // A name a lookup such as `command_exists` finds, and one it does not.
            InputType::List => values.extend([r#"["sh"]"#.into(), r#"["x"]"#.into()]),
            InputType::Integer | InputType::Number => {
                values.extend(
                    input
                        .minimum
                        .iter()
                        .chain(&input.maximum)
                        .map(f64::to_string),
                );
                for guard in guards.iter().filter(|guard| guard.contains(&*input.name)) {
                    for literal in literals(guard) {
                        if let Literal::Number(number) = literal {
                            values.extend(around(number).iter().map(ToString::to_string));
                        }
                    }
                }
            }
            InputType::String => {
                for guard in guards.iter().filter(|guard| guard.contains(&*input.name)) {
                    for literal in literals(guard) {
                        if let Literal::Text(text) = literal {
                            values.push(text);
                        }
                    }
                }
            }
            _ => {}
        }
        let mut tried = Vec::new();
        for value in values {
            push_unique(&mut tried, value);
        }
        for value in tried {
            let mut setup = base.clone();
            setup.inputs.retain(|(name, _)| name != &input.name);
            setup.inputs.push((input.name.clone(), value));
            if setup != base {
                variants.push(setup);
            }
        }
    }
    variants.extend(super::outcomes::mock_variants(machine, guards, &base));
    variants
}

/// `setup` with the one change `variant` makes to `base` as well, or None when `setup` already
/// changes that input or mock.
pub fn combine(base: &Setup, setup: &Setup, variant: &Setup) -> Option<Setup> {
    let mut combined = setup.clone();
    let lists = [
        (&base.inputs, &variant.inputs, &mut combined.inputs),
        (&base.mocks, &variant.mocks, &mut combined.mocks),
    ];
    let mut changed = false;
    for (base_list, variant_list, combined_list) in lists {
        for entry in variant_list
            .iter()
            .filter(|entry| !base_list.contains(entry))
        {
            let base_value = base_list.iter().find(|(name, _)| name == &entry.0);
            match combined_list.iter_mut().find(|(name, _)| name == &entry.0) {
                Some(current) if Some(&*current) != base_value => return None,
                Some(current) => current.1 = entry.1.clone(),
                None => combined_list.push(entry.clone()),
            }
            changed = true;
        }
    }
    changed.then_some(combined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_literals_of_a_guard() {
        let found = literals(
            "has(event.data.signal) && event.data.signal == 'AUDIT_FAILED' && attempt <= 3 && !ok == true",
        );
        assert_eq!(
            found,
            vec![
                Literal::Text("AUDIT_FAILED".into()),
                Literal::Number(3.0),
                Literal::Boolean(true)
            ]
        );
    }

    #[test]
    fn combining_adds_one_change_unless_it_is_already_changed() {
        let setup = |mocks: &[(&str, &str)]| Setup {
            inputs: Vec::new(),
            mocks: mocks
                .iter()
                .map(|(id, outcome)| (id.to_string(), outcome.to_string()))
                .collect(),
        };
        let base = setup(&[("a", "ok:"), ("b", "ok:")]);
        let a_times_out = setup(&[("a", "timeout"), ("b", "ok:")]);
        let b_fails = setup(&[("a", "ok:"), ("b", "error:failed")]);
        assert_eq!(
            combine(&base, &a_times_out, &b_fails),
            Some(setup(&[("a", "timeout"), ("b", "error:failed")]))
        );
        let a_fails = setup(&[("a", "error:failed"), ("b", "ok:")]);
        assert_eq!(combine(&base, &a_times_out, &a_fails), None);
    }
}
