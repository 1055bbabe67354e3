//! The outcomes the generator and the explorer mock each effect with: only those it can have,
//! those its guards read, a child protocol's endings, and a failing call that works later.

use super::candidates::{Literal, compared_fields, literals, push_unique};
use super::probe::Setup;
use crate::pipeline::compile::machine::Machine;

/// `base` with one effect's mock changed, for each effect and each outcome worth trying.
pub fn mock_variants(machine: &Machine, guards: &[&str], base: &Setup) -> Vec<Setup> {
    let mut variants = Vec::new();
    let mut outcomes: Vec<String> = Vec::new();
    // Output an incompleteness check catches (`Terminated`) stands for a cut-off success.
    let incomplete = format!("ok:{}", crate::effects::STANDARD_INCOMPLETE_MARKERS[0]);
    for outcome in [
        "timeout",
        "error:failed",
        "exit:1",
        "timeout,ok:",
        "exit:1,ok:",
        &incomplete,
    ] {
        push_unique(&mut outcomes, outcome.to_string());
    }
    let mut texts: Vec<String> = Vec::new();
    for guard in guards {
        for literal in literals(guard) {
            if let Literal::Text(text) = literal {
                for word in alternatives(&text)
                    .into_iter()
                    .filter(|word| !word.contains(','))
                {
                    push_unique(&mut texts, word);
                }
            }
        }
    }
    // Outcome data guards read: output cut at its limit, the exit codes they compare.
    let outcome_guards: Vec<&str> = guards
        .iter()
        .copied()
        .filter(|guard| guard.contains("event.data."))
        .collect();
    if outcome_guards
        .iter()
        .any(|guard| guard.contains("event.data.truncated"))
    {
        push_unique(&mut outcomes, "truncated:".to_string());
    }
    for guard in outcome_guards
        .iter()
        .filter(|guard| guard.contains("event.data.exit_code"))
    {
        for literal in literals(guard) {
            if let Literal::Number(code) = literal
                && code.fract() == 0.0
                && code > 0.0
            {
                push_unique(&mut outcomes, format!("exit:{}", code as i64));
            }
        }
    }
    let shapes = crate::pipeline::actions::shape::effect_shapes(machine);
    for id in &machine.action_ids {
        let shape = shapes.iter().find(|shape| shape.id == *id);
        let mut tried: Vec<String> = match child_outcomes(machine, id) {
            Some(endings) => endings.into_iter().skip(1).collect(),
            None => outcomes
                .iter()
                .filter(|outcome| can_have(shape, outcome, &incomplete))
                .cloned()
                .collect(),
        };
        tried.extend(texts.iter().map(|text| format!("error:{text}")));
        tried.extend(texts.iter().map(|text| format!("ok:{text}")));
        for outcome in tried {
            let mut setup = base.clone();
            for (mocked, value) in &mut setup.mocks {
                if mocked == id {
                    *value = outcome.clone();
                }
            }
            variants.push(setup);
        }
    }
    variants
}

/// The outcomes a map's items of child protocol `id` are mocked with, if `id` is such a map:
/// each ending of the child (`ok:` its declared output, `exit:N` a failing final state), the
/// first successful one first.
pub fn child_outcomes(machine: &Machine, id: &str) -> Option<Vec<String>> {
    let (_, child) = machine.map_children.iter().find(|(map, _)| &**map == id)?;
    let mut endings = super::sample::child_endings(child, &compared_fields(machine));
    endings.sort_by_key(|(exit_code, _)| *exit_code != 0);
    let mut outcomes: Vec<String> = endings
        .into_iter()
        .map(|(exit_code, output)| match (exit_code, output) {
            (0, serde_json::Value::Null) => "ok:".to_string(),
            (0, output) => format!("ok:{output}"),
            (code, _) => format!("exit:{code}"),
        })
        .collect();
    outcomes.dedup();
    outcomes.push("error:failed".to_string());
    Some(outcomes)
}

/// Whether an effect of this shape can have the mocked `outcome`: a timeout only with a
/// `timeout`, an exit code and cut-off output only from a program (`exec`).
fn can_have(
    shape: Option<&crate::pipeline::actions::shape::EffectShape>,
    outcome: &str,
    incomplete: &str,
) -> bool {
    let times_out = shape.is_some_and(|shape| shape.can_time_out);
    let runs_a_program = shape.is_some_and(|shape| shape.runs_a_program);
    // Output cut at its limit: a program's, or a tool's (a search's matches).
    let has_output = shape.is_some_and(|shape| shape.runs_a_program || shape.is_tool);
    outcome.split(',').all(|part| match part {
        "timeout" => times_out,
        part if part.starts_with("exit:") || part == incomplete => runs_a_program,
        part if part.starts_with("truncated:") => has_output,
        _ => true,
    })
}

/// The words a `matches('(?i)a|b c')` pattern accepts, roughly: each alternative's text.
fn alternatives(text: &str) -> Vec<String> {
    text.trim_start_matches("(?i)")
        .split('|')
        .map(|part| part.trim_matches(|c: char| !c.is_alphanumeric() && c != ' '))
        .filter(|part| !part.is_empty())
        .map(String::from)
        .collect()
}

/// `setup` with one mock that fails (`timeout`, `error:...`, `exit:N`) changed to fail the same
/// way once or twice and then work, one setup each: a call made again later (a retry, a
/// re-check) succeeds, with whatever else the setup changed still in place.
pub fn recoveries(setup: &Setup) -> Vec<Setup> {
    let mut found = Vec::new();
    for (position, (_, outcome)) in setup.mocks.iter().enumerate() {
        let fails =
            outcome == "timeout" || outcome.starts_with("error:") || outcome.starts_with("exit:");
        if !fails || outcome.contains(',') {
            continue;
        }
        for recovering in [format!("{outcome},ok:"), format!("{outcome},{outcome},ok:")] {
            let mut changed = setup.clone();
            changed.mocks[position].1 = recovering;
            found.push(changed);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_offers_its_alternatives() {
        assert_eq!(
            alternatives("(?i)timeout|timed out"),
            vec!["timeout", "timed out"]
        );
    }
}
