//! What an `expect` step checks, and the one matching rule for the values it compares.

use crate::runtime::run::admission::EventOutcome;
use std::collections::BTreeSet;

use crate::base::model::scenario::{EffectExpectation, Expectation};
use crate::base::value::Value;
use crate::effects::EffectRequest;
use crate::effects::arguments::EffectArguments;
use crate::pipeline::actions::LogRecord;
use crate::runtime::run::Interpreter;

/// What happened since the previous `expect`.
pub struct SinceLast<'a> {
    pub logs: &'a [LogRecord],
    pub directives: &'a [serde_json::Value],
    pub effects: &'a [StartedEffect],
    /// What became of the events sent (event name, outcome), in order.
    pub outcomes: &'a [(String, EventOutcome)],
}

/// An effect as it started: its id and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedEffect {
    pub id: String,
    pub arguments: EffectArguments,
}

impl StartedEffect {
    pub fn of(request: &EffectRequest) -> StartedEffect {
        StartedEffect {
            id: request.id.to_string(),
            arguments: EffectArguments::of(request),
        }
    }

    fn describe(&self) -> String {
        let mut text = self.id.clone();
        if let Some(argv) = &self.arguments.argv {
            text.push_str(&format!(" argv {argv:?}"));
        }
        if let Some(path) = &self.arguments.path {
            text.push_str(&format!(" path {path:?}"));
        }
        text
    }
}

/// Every way the run differs from the expectation.
pub fn check(expect: &Expectation, interpreter: &Interpreter, since: SinceLast) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(expected) = &expect.configuration {
        let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
        // A finished run is in its final state (the configuration itself is empty by then).
        // A failed one is where it failed.
        let actual: BTreeSet<&str> = match interpreter.outcome() {
            Some(outcome) => match (&outcome.failure, outcome.state_name(interpreter.machine())) {
                (Some(failure), _) => failure.states.iter().map(|state| &**state).collect(),
                (None, state) => state.map(|state| &**state).into_iter().collect(),
            },
            None => interpreter.active_leaves().into_iter().collect(),
        };
        if expected != actual {
            problems.push(format!(
                "configuration: expected {expected:?}, seen {actual:?}"
            ));
        }
    }
    if let Some(context) = &expect.context {
        for (name, expected) in context {
            let actual = interpreter.context_value(name).map(Value::to_json);
            if !actual
                .as_ref()
                .is_some_and(|actual| matches(actual, expected))
            {
                let shown =
                    actual.map_or("no such variable".to_string(), |value| value.to_string());
                problems.push(format!(
                    "context `{name}`: expected {expected}, seen {shown}"
                ));
            }
        }
    }
    if let Some(expected) = &expect.tags {
        let emitted: Vec<&str> = since
            .logs
            .iter()
            .flat_map(|record| record.tags.iter().map(|tag| &**tag))
            .collect();
        // `tags: []` asserts that nothing tagged was logged.
        if expected.is_empty() && !emitted.is_empty() {
            problems.push(format!("tags: expected none, seen {emitted:?}"));
        } else if !is_subsequence(expected.iter().map(String::as_str), &emitted) {
            problems.push(format!(
                "tags: expected {expected:?} in this order, seen {emitted:?}"
            ));
        }
    }
    if let Some(expected) = &expect.directives {
        let shown = || {
            let shown: Vec<String> = since.directives.iter().map(|d| d.to_string()).collect();
            format!("[{}]", shown.join(", "))
        };
        if let Some(problem) = in_order(expected, since.directives, matches, shown, |d| {
            d.to_string()
        }) {
            problems.push(format!("directives: {problem}"));
        }
    }
    if let Some(expected) = &expect.effects {
        let shown = || {
            let shown: Vec<String> = since.effects.iter().map(StartedEffect::describe).collect();
            format!("[{}]", shown.join(", "))
        };
        let describe = |effect: &EffectExpectation| {
            serde_json::to_string(effect).unwrap_or_else(|_| effect.id.clone())
        };
        if let Some(problem) = in_order(expected, since.effects, effect_matches, shown, describe) {
            problems.push(format!("effects: {problem}"));
        }
        for effect in expected {
            if let Some(pattern) = &effect.content
                && let Err(error) = regex::Regex::new(pattern)
            {
                problems.push(format!("effects: invalid pattern `{pattern}`: {error}"));
            }
        }
    }
    if let Some(expected) = &expect.unhandled_errors {
        check_unhandled_errors(expected, since.logs, &mut problems);
    }
    if let Some(files) = &expect.files {
        check_files(files, &mut problems);
    }
    if let Some(finished) = &expect.finished {
        check_finished(finished, interpreter, &mut problems);
    }
    for (expected, outcome) in [
        (&expect.discarded, EventOutcome::Discarded),
        (&expect.deferred, EventOutcome::Deferred),
        (&expect.refused, EventOutcome::Refused),
    ] {
        let Some(event) = expected else { continue };
        if !since.outcomes.contains(&(event.clone(), outcome)) {
            let seen: Vec<String> = since
                .outcomes
                .iter()
                .map(|(event, outcome)| format!("{event} {}", outcome.name()))
                .collect();
            problems.push(format!(
                "{}: expected `{event}` {}, seen {seen:?}",
                outcome.name(),
                outcome.name()
            ));
        }
    }
    problems
}

/// Each expected item matches a seen one after the previous match; `[]` asserts none was seen.
fn in_order<E, S>(
    expected: &[E],
    seen: &[S],
    is_match: impl Fn(&S, &E) -> bool,
    shown: impl Fn() -> String,
    describe: impl Fn(&E) -> String,
) -> Option<String> {
    if expected.is_empty() && !seen.is_empty() {
        return Some(format!("expected none, seen {}", shown()));
    }
    let mut position = 0;
    for item in expected {
        match seen[position..]
            .iter()
            .position(|candidate| is_match(candidate, item))
        {
            Some(found) => position += found + 1,
            None => {
                return Some(format!(
                    "expected {} (in order), seen {}",
                    describe(item),
                    shown()
                ));
            }
        }
    }
    None
}

fn effect_matches(started: &StartedEffect, expected: &EffectExpectation) -> bool {
    let arguments = &started.arguments;
    started.id == expected.id
        && expected
            .argv
            .as_ref()
            .is_none_or(|argv| arguments.argv.as_ref() == Some(argv))
        && expected
            .path
            .as_ref()
            .is_none_or(|path| arguments.path.as_ref() == Some(path))
        && expected.content.as_ref().is_none_or(|pattern| {
            let content = arguments.content.as_deref().unwrap_or_default();
            regex::Regex::new(pattern).is_ok_and(|pattern| pattern.is_match(content))
        })
}

/// The error events no transition handled, read from the engine's `unhandled_error` warnings:
/// the names expected in order, or none for `[]`.
fn check_unhandled_errors(expected: &[String], logs: &[LogRecord], problems: &mut Vec<String>) {
    let warnings: Vec<&LogRecord> = logs
        .iter()
        .filter(|record| record.tags.iter().any(|tag| &**tag == "unhandled_error"))
        .collect();
    let names: Vec<&str> = warnings
        .iter()
        .filter_map(|record| {
            record
                .fields
                .iter()
                .find(|(key, _)| &**key == "event")
                .and_then(|(_, value)| match value {
                    Value::String(name) => Some(&**name),
                    _ => None,
                })
        })
        .collect();
    let messages: Vec<&str> = warnings
        .iter()
        .map(|record| record.message.as_str())
        .collect();
    if expected.is_empty() && !warnings.is_empty() {
        problems.push(format!(
            "unhandled_errors: expected none, seen {messages:?}"
        ));
    } else if !is_subsequence(expected.iter().map(String::as_str), &names) {
        problems.push(format!(
            "unhandled_errors: expected {expected:?} in this order, seen {messages:?}"
        ));
    }
}

fn check_files(files: &indexmap::IndexMap<String, String>, problems: &mut Vec<String>) {
    for (path, pattern) in files {
        match (std::fs::read_to_string(path), regex::Regex::new(pattern)) {
            (_, Err(error)) => problems.push(format!(
                "file `{path}`: invalid pattern `{pattern}`: {error}"
            )),
            (Err(error), _) => problems.push(format!("file `{path}`: {error}")),
            (Ok(content), Ok(pattern)) if !pattern.is_match(&content) => {
                let shown: String = content.chars().take(200).collect();
                problems.push(format!(
                    "file `{path}`: content does not match `{pattern}`; it begins {shown:?}"
                ));
            }
            _ => {}
        }
    }
}

fn check_finished(
    finished: &crate::base::model::scenario::Finished,
    interpreter: &Interpreter,
    problems: &mut Vec<String>,
) {
    let Some(outcome) = interpreter.outcome() else {
        problems.push(format!(
            "finished: the run is still in {:?}",
            interpreter.active_leaves()
        ));
        return;
    };
    let state = match (&outcome.failure, outcome.state_name(interpreter.machine())) {
        (Some(failure), _) => format!("failed by {}: {}", failure.event, failure.message),
        (None, state) => state.map_or_else(String::new, |state| state.to_string()),
    };
    if let Some(expected) = &finished.error {
        match &outcome.failure {
            Some(failure) if failure.message.contains(expected.as_str()) => {}
            Some(failure) => problems.push(format!(
                "finished: expected an error saying `{expected}`, seen `{}`",
                failure.message
            )),
            None => problems.push(format!(
                "finished: expected an error saying `{expected}`, but the run ended in `{state}`"
            )),
        }
    }
    if let Some(code) = finished.exit_code
        && code != outcome.exit_code
    {
        problems.push(format!(
            "finished: expected exit code {code}, seen {} (in `{state}`)",
            outcome.exit_code
        ));
    }
    if let Some(expected) = finished.state.as_deref()
        && expected != state
    {
        problems.push(format!(
            "finished: expected final state `{expected}`, seen `{state}`"
        ));
    }
    if let Some(output) = &finished.output
        && !matches(&outcome.output.to_json(), output)
    {
        problems.push(format!(
            "finished: expected output {output}, seen {}",
            outcome.output.to_json()
        ));
    }
}

fn is_subsequence<'a>(expected: impl IntoIterator<Item = &'a str>, actual: &[&str]) -> bool {
    let mut remaining = actual.iter();
    expected
        .into_iter()
        .all(|wanted| remaining.any(|tag| *tag == wanted))
}

/// The one rule for `context`, `directives` and `output`: a map matches when every key it gives
/// matches (recursively; other keys may be there too); lists and scalars must be equal.
pub fn matches(actual: &serde_json::Value, expected: &serde_json::Value) -> bool {
    match (actual, expected) {
        (serde_json::Value::Object(actual), serde_json::Value::Object(expected)) => expected
            .iter()
            .all(|(key, value)| actual.get(key).is_some_and(|found| matches(found, value))),
        (serde_json::Value::String(actual), serde_json::Value::String(expected)) => {
            actual == expected || same_time(actual, expected)
        }
        _ => actual == expected,
    }
}

/// Whether two texts are the same instant (`…00:20Z` and `…00:20.000+00:00`) or the same span
/// (`90s` and `1m30s`): time values compare as what they mean, not as how they are written.
fn same_time(actual: &str, expected: &str) -> bool {
    use crate::base::time::{parse_duration, parse_timestamp};
    if let (Ok(actual), Ok(expected)) = (parse_timestamp(actual), parse_timestamp(expected)) {
        return actual == expected;
    }
    // A bare number (`0`) is not taken for a duration: only a text with a unit.
    let has_unit = |text: &str| text.chars().any(char::is_alphabetic);
    has_unit(actual)
        && has_unit(expected)
        && matches!(
            (parse_duration(actual), parse_duration(expected)),
            (Ok(actual), Ok(expected)) if actual == expected
        )
}
