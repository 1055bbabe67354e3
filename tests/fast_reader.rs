//! What the fast reader reads without CEL's parser (`now()`, `duration` inputs, fields, indexes, calls, methods) means what CEL means, and `validate` of the shipped protocols parses nothing with CEL.

use std::collections::HashMap;

use protocol_run::base::model::InputType;
use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::expression::{Expression, Names, Scope};

/// Context variables (`attempts`, `done`, `tool`, `failed_at`: a timestamp; `diagnostics`,
/// `errors`, `file`: a map, a list and a path, or values of other types) and inputs
/// (`timeout`, `recheck_every`: durations; `limit`: an int), as ITTW declares them.
pub(crate) fn names() -> Names {
    Names::new(
        [
            "attempts",
            "done",
            "tool",
            "failed_at",
            "diagnostics",
            "errors",
            "file",
        ]
        .map(String::from),
        ["timeout", "recheck_every", "limit"].map(String::from),
        HashMap::from([("idle".to_string(), 0), ("busy".to_string(), 1)]),
    )
    .with_input_types(vec![
        InputType::Duration,
        InputType::Duration,
        InputType::Integer,
    ])
}

/// The last clock in range, in Unix milliseconds (9999-12-31T23:59:59.999Z).
const LAST_CLOCK: u64 = 253_402_300_799_999;

/// Clocks: the epoch, a day of 2026, the last in range, the first past it, and past `i64`.
const CLOCKS: [u64; 5] = [0, 1_790_000_000_000, LAST_CLOCK, LAST_CLOCK + 1, u64::MAX];

/// Context and inputs leaning on the edges: ints at the ends of `i64`, zero (division), a
/// duration input holding a text (a type mismatch), timestamps before, at and after the clock.
fn slots(round: usize, clock: u64) -> (Vec<Value>, Vec<Value>) {
    let integers = [0, 1, -1, i64::MAX, i64::MIN, 90_000];
    let integer = |offset: usize| Value::Int(integers[(round + offset) % integers.len()]);
    let failed_at = match round % 3 {
        0 => protocol_run::base::time::from_unix_milliseconds(clock.min(LAST_CLOCK))
            .map_or(Value::Null, Value::Timestamp),
        1 => protocol_run::base::time::from_unix_milliseconds(1_000)
            .map_or(Value::Null, Value::Timestamp),
        _ => Value::Null,
    };
    let context = vec![
        integer(0),
        Value::Bool(round.is_multiple_of(2)),
        Value::string("grep"),
        failed_at,
        diagnostics(round),
        errors(round),
        [
            Value::string("/nonexistent/state.json"),
            Value::string("Cargo.toml"),
            Value::Int(1),
        ][round % 3]
            .clone(),
    ];
    let timeout = if round % 5 == 4 {
        Value::string("30s")
    } else {
        integer(1)
    };
    let inputs = vec![timeout, integer(2), integer(3)];
    (context, inputs)
}

/// A map (`parent_exists`, `target_size`, `nested.k`, `list`), or a value of another type.
fn diagnostics(round: usize) -> Value {
    let mut nested = indexmap::IndexMap::new();
    nested.insert(std::sync::Arc::from("k"), Value::Int(1));
    nested.insert(std::sync::Arc::from("b"), Value::string("x"));
    let mut map = indexmap::IndexMap::new();
    map.insert(
        std::sync::Arc::from("parent_exists"),
        Value::Bool(round < 5),
    );
    map.insert(
        std::sync::Arc::from("target_size"),
        Value::Int([0, 1, i64::MAX][round % 3]),
    );
    map.insert(
        std::sync::Arc::from("nested"),
        Value::Map(std::sync::Arc::new(nested)),
    );
    map.insert(
        std::sync::Arc::from("list"),
        Value::List(std::sync::Arc::new(vec![Value::Int(7), Value::Null])),
    );
    match round % 4 {
        3 => Value::Null,
        2 if round > 5 => Value::string("text"),
        _ => Value::Map(std::sync::Arc::new(map)),
    }
}

/// A list of 0 to 2 texts, or a value of another type.
fn errors(round: usize) -> Value {
    match round % 4 {
        3 => Value::string("oops"),
        count => Value::List(std::sync::Arc::new(
            ["first", "second"]
                .iter()
                .take(count)
                .map(|text| Value::string(*text))
                .collect(),
        )),
    }
}

/// `text` compiles as it does through CEL's parser (the same problems, or none), is read
/// directly exactly when `read_directly` says, and evaluates as CEL evaluates it in every scope.
pub(crate) fn assert_same_as_cel(text: &str, read_directly: bool) {
    assert_same_as_cel_with(&names(), text, read_directly);
}

/// `assert_same_as_cel` with these names.
pub(crate) fn assert_same_as_cel_with(names: &Names, text: &str, read_directly: bool) {
    let compiled = Expression::compile(text, names);
    let through_cel = Expression::compile_with_cel(text, names);
    let (compiled, through_cel) = match (compiled, through_cel) {
        (Ok(compiled), Ok(through_cel)) => (compiled, through_cel),
        (Err(problems), Err(cel_problems)) => {
            assert_eq!(problems, cel_problems, "`{text}`");
            assert!(!read_directly, "`{text}` is refused, so not read directly");
            return;
        }
        (compiled, through_cel) => {
            panic!(
                "`{text}`: {:?} but CEL: {:?}",
                compiled.err(),
                through_cel.err()
            )
        }
    };
    assert_eq!(compiled.is_read_directly(), read_directly, "`{text}`");
    for round in 0..10 {
        for clock in CLOCKS {
            let (context, inputs) = slots(round, clock);
            let scope = Scope {
                names,
                context: &context,
                inputs: &inputs,
                event: None,
                is_active: &|state| (state + round).is_multiple_of(3),
                clock,
            };
            assert_eq!(
                compiled.evaluate(&scope),
                through_cel.evaluate_with_cel(&scope),
                "`{text}` at clock {clock} with {context:?} and {inputs:?}"
            );
        }
    }
}

#[test]
fn now_is_read_directly_and_means_what_cel_means() {
    for text in [
        "now()",
        "now ( )",
        "(now())",
        "now() < failed_at",
        "now() >= failed_at",
        "now() == failed_at",
        "failed_at != now()",
        "done ? now() : failed_at",
        "done ? now() : 0",
        "done && now()",
        "!now()",
        "-now()",
        "now() < tool",
        "now() < attempts",
    ] {
        assert_same_as_cel(text, true);
    }
}

#[test]
fn time_arithmetic_the_check_refuses_or_converts_still_goes_through_cel() {
    for text in [
        // Refused with the time check's words.
        "now() + 5",
        "now() < 5",
        "now() == 'x'",
        "now() + now()",
        // A `duration` input beside a time value, or beside a value only the run tells:
        // converted where it is evaluated.
        "now() - timeout",
        "now() < timeout",
        "failed_at + timeout",
        "attempts + timeout",
        "timeout - attempts",
        "timeout == failed_at",
        "done ? now() - recheck_every : failed_at",
        // Not in the fast reader's subset.
        "now().getHours()",
        "now(1)",
    ] {
        assert_same_as_cel(text, false);
    }
}

#[test]
fn duration_inputs_are_read_directly_where_they_stay_numbers() {
    for text in [
        "timeout",
        "recheck_every",
        "(timeout)",
        "timeout * attempts",
        "attempts * timeout",
        "timeout * 2",
        "timeout * 9223372036854775807",
        "timeout / attempts",
        "timeout / 0",
        "timeout % attempts",
        "timeout + 1",
        "1 - timeout",
        "timeout + limit",
        "timeout - recheck_every",
        "timeout < 5",
        "timeout >= limit",
        "timeout == recheck_every",
        "timeout == 'x'",
        "timeout + 'x'",
        "-timeout",
        "!timeout",
        "done ? timeout : recheck_every",
        "timeout * 2 > limit && done",
    ] {
        assert_same_as_cel(text, true);
    }
}

/// Every protocol and scenario in `protocols/`, and the reference workload: what `validate`
/// of each must do without CEL's parser.
fn shipped_files() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(root.join("protocols"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name.ends_with(".yaml"))
        .map(|name| format!("protocols/{name}"))
        .collect();
    files.sort();
    assert!(files.len() >= 16, "{files:?}");
    files.push("benches/workload.yaml".to_string());
    files
}

#[test]
fn validate_parses_no_expression_of_the_shipped_protocols_with_cel() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in shipped_files() {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["validate", &file])
            .current_dir(root)
            .env("PROTOCOL_RUN_REPORT_CEL", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{file}: {stderr}");
        let report = stderr
            .lines()
            .find_map(|line| line.strip_prefix("cel: "))
            .unwrap_or_else(|| panic!("{file}: no report of CEL's use in {stderr}"));
        assert_eq!(
            report, "0 parsed with CEL's parser, environment not built",
            "{file}: {stderr}"
        );
    }
}

#[test]
fn fields_indexes_and_calls_are_read_directly_and_mean_what_cel_means() {
    for text in [
        "diagnostics.parent_exists",
        "!diagnostics.parent_exists",
        "diagnostics.target_size + 1",
        "diagnostics.nested",
        "diagnostics.nested.k",
        "diagnostics.nested.nosuch",
        "diagnostics.nosuch",
        "diagnostics.list[0]",
        "diagnostics.list[1]",
        "diagnostics.list[2]",
        "diagnostics['parent_exists']",
        "diagnostics['nosuch']",
        "diagnostics[0]",
        "diagnostics.parent_exists ? 'exists' : 'missing'",
        "errors[0]",
        "(errors)[0]",
        "(diagnostics).nested.k",
        "errors[1]",
        "errors[attempts]",
        "errors[-1]",
        "errors['0']",
        "errors[0] == 'first'",
        "errors.x",
        "tool[0]",
        "tool.x",
        "attempts[0]",
        "timeout[0]",
        "errors[timeout * 0]",
        "size(errors)",
        "size(tool)",
        "size(diagnostics)",
        "size(attempts)",
        "size(errors) > 0 && errors[0] != ''",
        "attempts < size(errors)",
        "json_valid(file)",
        "exists(file) ? 'does not parse' : 'is missing'",
        "file_size(file)",
        "is_dir(file)",
        "command_exists(tool)",
        "json_valid(file) && tool == 'grep'",
        "now_ms()",
        "now_ms() - timeout",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in [
        // A duration input beside a value only the run tells: converted, so CEL's.
        "errors[0] + timeout",
        "size(errors) < timeout && diagnostics.x < timeout",
        // Outside the subset.
        "size(errors, 1)",
        "diagnostics.?x",
        "In('nosuch')",
        // Refused by the load-time check, in CEL's words.
        "errors.nosuch()",
        "nosuch(errors)",
        "errors[nosuch]",
    ] {
        assert_same_as_cel(text, false);
    }
}

#[test]
fn methods_are_read_directly_and_mean_what_cel_means() {
    for text in [
        "tool.size()",
        "errors.size()",
        "diagnostics.size()",
        "attempts.size()",
        "tool.endsWith('p')",
        "tool.startsWith(1)",
        "tool.matches('(?i)GR')",
        "tool.matches('(')",
        "errors.join(', ')",
        "errors.join()",
        "tool.split('r')",
        "tool.substring(1)",
        "tool.substring(attempts)",
        "tool.substring(0, size(tool) - 1)",
        "tool.lastIndexOf('p') < 0 ? '.' : tool.substring(0, tool.lastIndexOf('p'))",
        "tool.charAt(10)",
        "errors.sort()",
        "errors.sort().join('-')",
        "tool.upperAscii()",
        "diagnostics.nested.k.size()",
        "event.data.size()",
        "timeout.size()",
        "(errors + [tool]).join('\\n')",
        "(tool + '/x').endsWith('x')",
        "(diagnostics).list[0]",
        "(done ? errors : [])[0]",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in [
        // Unknown methods are refused by the load-time check, in its words.
        "tool.nosuch()",
        "errors.lenght()",
        // A namespace's functions.
        "math.abs(attempts)",
        // A `duration` input beside a value only the run tells, in an argument.
        "errors.join(timeout + attempts)",
    ] {
        assert_same_as_cel(text, false);
    }
}
