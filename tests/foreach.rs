//! `foreach`: the body runs per element in order, the list is read once, errors stop the loop and its block, iterations are budgeted, misuse is a located load error.

use crate::support::{Run, errors, run_binary, temporary_directory};

#[test]
fn the_body_runs_for_each_element_in_order_with_item_and_index_bound() {
    let mut run = Run::start(
        r#"
id: order
context: { name: null, position: -1, seen: [], total: 0 }
states:
  a:
    entry:
      - log: "before"
      - foreach: "['x', 'y', 'z']"
        item: name
        index: position
        do:
          - log: "${position}:${name}"
          - assign: { seen: "seen + [name]", total: "total + position" }
          - log: "seen ${size(seen)}"
      - log: "after ${name} ${position}"
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:before",
            "log:0:x",
            "log:seen 1",
            "log:1:y",
            "log:seen 2",
            "log:2:z",
            "log:seen 3",
            // As in SCXML's datamodel, the item and index keep the last element's values.
            "log:after z 2",
        ]
    );
    assert_eq!(run.context("seen"), serde_json::json!(["x", "y", "z"]));
    assert_eq!(run.context("total"), serde_json::json!(3));
}

/// A YAML list is the elements as written: a string in it is text, not an expression.
#[test]
fn a_literal_list_is_walked_as_written() {
    let mut run = Run::start(
        r#"
id: literal
context: { step: null }
states:
  a:
    entry:
      - foreach: [build, "${step}", { name: deploy }, 3]
        item: step
        do: [{ log: "${step}" }]
"#,
    );
    assert_eq!(
        run.take_logs(),
        ["build", "${step}", r#"{"name":"deploy"}"#, "3"]
    );
    let rendered = load_errors("      - { foreach: { a: 1 }, item: commit }\n");
    assert!(
        rendered.contains("expected a list or a string, found a mapping")
            && rendered.contains("test.yaml:8:20"),
        "{rendered}"
    );
}

#[test]
fn nested_loops_run_the_inner_body_for_each_outer_element() {
    let run = Run::start(
        r#"
id: nested
context: { row: null, column: null, cells: [] }
states:
  a:
    entry:
      - foreach: "[1, 2]"
        item: row
        do:
          - foreach: "['a', 'b']"
            item: column
            do: [{ assign: { cells: "cells + [string(row) + column]" } }]
"#,
    );
    assert_eq!(
        run.context("cells"),
        serde_json::json!(["1a", "1b", "2a", "2b"])
    );
}

#[test]
fn an_empty_list_runs_nothing_and_leaves_the_item_as_it_was() {
    let mut run = Run::start(
        r#"
id: empty
context: { items: [], item: "untouched" }
states:
  a:
    entry:
      - foreach: items
        item: item
        do: [{ log: "never" }]
      - log: "done ${item}"
"#,
    );
    assert_eq!(run.take_logs(), ["done untouched"]);
}

/// SCXML evaluates the array once, a shallow copy: growing the variable in the body does not
/// add iterations.
#[test]
fn the_list_is_read_once_so_assigning_it_in_the_body_changes_nothing() {
    let run = Run::start(
        r#"
id: shallow
context: { queue: [1, 2, 3], item: 0, count: 0 }
states:
  a:
    entry:
      - foreach: queue
        item: item
        do:
          - assign: { queue: "queue + [item * 10]", count: "count + 1" }
"#,
    );
    assert_eq!(run.context("count"), serde_json::json!(3));
    assert_eq!(
        run.context("queue"),
        serde_json::json!([1, 2, 3, 10, 20, 30])
    );
}

#[test]
fn an_array_that_is_not_a_list_is_error_execution_and_nothing_of_the_block_runs() {
    let mut run = Run::start(
        r#"
id: not-a-list
context: { settings: { a: 1 }, item: null }
states:
  a:
    entry:
      - log: "before"
      - foreach: settings
        item: item
        do: [{ log: "body" }]
      - log: "after"
    on:
      error.execution:
        target: failed
        actions: [{ log: "${event.data.message}" }]
  failed: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:before",
            "exit:a",
            "log:foreach needs a list, and this is a map",
            "enter:failed",
        ]
    );
    assert_eq!(run.context("item"), serde_json::Value::Null);
}

/// SCXML: an error in a child element stops the `<foreach>` and the block that contains it.
#[test]
fn an_error_in_the_body_stops_the_loop_and_the_rest_of_its_block() {
    let mut run = Run::start(
        r#"
id: body-error
context: { entry: null, values: [] }
states:
  a:
    entry:
      - foreach: "[{'v': 1}, {'w': 2}, {'v': 3}]"
        item: entry
        do:
          - log: "start ${entry}"
          - assign: { values: "values + [entry.v]" }
          - log: "stored"
      - log: "after the loop"
    on:
      error.execution: { target: failed, actions: [{ log: "caught" }] }
  failed: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:start {\"v\":1}",
            "log:stored",
            "log:start {\"w\":2}",
            "exit:a",
            "log:caught",
            "enter:failed",
        ]
    );
    assert_eq!(run.context("values"), serde_json::json!([1]));
}

/// Each evaluation in the body starts its own step allowance, so the loop counts its own
/// iterations: 300 × 400 nested iterations are more than the default 100,000.
#[test]
fn nested_loops_past_max_evaluation_steps_stop_with_error_execution() {
    let list = |count: usize| {
        let items: Vec<String> = (0..count).map(|number| number.to_string()).collect();
        format!("[{}]", items.join(","))
    };
    let mut run = Run::start(&format!(
        r#"
id: hostile
context: {{ outer: 0, inner: 0, count: 0 }}
states:
  a:
    entry:
      - foreach: "{}"
        item: outer
        do:
          - foreach: "{}"
            item: inner
            do: [{{ assign: {{ count: "count + 1" }} }}]
    on:
      error.execution: {{ target: stopped, actions: [{{ log: "${{event.data.message}}" }}] }}
  stopped: {{}}
"#,
        list(300),
        list(400)
    ));
    let logs = run.take_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0].contains("more than 100000 iterations")
            && logs[0].contains("--max-evaluation-steps"),
        "{logs:?}"
    );
    // The outer loop's iterations count too: fewer than 100,000 bodies ran.
    let count = run.context("count").as_i64().unwrap();
    assert!((99_000..100_000).contains(&count), "{count}");
    assert_eq!(run.leaves(), ["stopped"]);

    // The next macrostep starts with a full allowance again.
    let mut run = Run::start(
        r#"
id: again
context: { item: 0, count: 0 }
states:
  a:
    on:
      go: { actions: [{ foreach: "[1, 2, 3]", item: item, do: [{ assign: { count: "count + 1" } }] }] }
"#,
    );
    for _ in 0..3 {
        run.send("go");
    }
    assert_eq!(run.context("count"), serde_json::json!(9));
}

#[test]
fn the_binary_runs_the_example_and_honours_max_evaluation_steps() {
    let directory = temporary_directory("foreach", "example");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/features/foreach.yaml"
    );
    let state = directory.join("state");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[example, "--state-dir", state.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let checks: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.split_once("checking ").map(|(_, rest)| rest))
        .collect();
    assert_eq!(checks, ["0: a1f", "1: b2e", "2: c3d"], "{stderr}");
    assert!(stdout.contains(r#""state":"done""#), "{stdout}");

    // Four commits with two iterations allowed: the loop stops at the third, the
    // `error.execution` goes unhandled, and the run is left waiting in `checking`.
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            example,
            "--input",
            "commits=[\"a\",\"b\",\"c\",\"d\"]",
            "--max-evaluation-steps",
            "2",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("checking 1: b"), "{stderr}");
    assert!(!stderr.contains("checking 2: c"), "{stderr}");
    assert!(
        stderr.contains("the foreach ran more than 2 iterations"),
        "{stderr}"
    );
}

/// What a protocol with `entry` set to `action` (YAML, indented for a list item) reports.
fn load_errors(action: &str) -> String {
    errors(&format!(
        r#"id: misuse
inputs:
  commits: {{ type: list, default: [] }}
context: {{ commit: null, position: 0 }}
states:
  a:
    entry:
{action}"#
    ))
}

#[test]
fn misuse_is_a_located_load_error() {
    let rendered = load_errors("      - { foreach: commits, do: [] }\n");
    assert!(
        rendered.contains("missing required key `item`"),
        "{rendered}"
    );
    assert!(rendered.contains("test.yaml:8:9"), "{rendered}");

    let rendered = load_errors("      - { foreach: commits, item: commit.sha }\n");
    assert!(
        rendered.contains("`commit.sha` is not a variable name")
            && rendered.contains("letters, digits and `_`")
            && rendered.contains("test.yaml:8:35"),
        "{rendered}"
    );

    let rendered = load_errors("      - { foreach: commits, item: commits }\n");
    assert!(
        rendered.contains("`commits` is an input, and inputs are read-only")
            && rendered.contains("test.yaml:8:35"),
        "{rendered}"
    );

    let rendered = load_errors("      - { foreach: commits, item: comit }\n");
    assert!(
        rendered.contains("unknown context variable `comit`")
            && rendered.contains("did you mean `commit`"),
        "{rendered}"
    );

    let rendered = load_errors("      - { foreach: commits, item: commit, index: commit }\n");
    assert!(
        rendered.contains("`commit` is already the item") && rendered.contains("test.yaml:8:50"),
        "{rendered}"
    );

    let rendered = load_errors("      - { foreach: commits, item: commit, index: missing }\n");
    assert!(
        rendered.contains("unknown context variable `missing`")
            && rendered.contains("declare it under `context:` first"),
        "{rendered}"
    );

    let rendered = load_errors("      - { foreach: 'commits +', item: commit }\n");
    assert!(rendered.contains("test.yaml:8:"), "{rendered}");

    // A mistake in the body is reported at its place in the body.
    let rendered = load_errors(
        "      - foreach: commits\n        item: commit\n        do: [{ assign: { nope: 1 } }]\n",
    );
    assert!(
        rendered.contains("unknown context variable `nope`")
            && rendered.contains("test.yaml:10:26"),
        "{rendered}"
    );
}

#[test]
fn validate_reports_every_misuse_with_its_line_through_the_binary() {
    let directory = temporary_directory("foreach", "validate");
    std::fs::write(
        directory.join("loop.yaml"),
        "id: loop\ncontext: { x: null }\nstates:\n  a:\n    entry:\n      - foreach: x\n        item: y\n        index: x\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "loop.yaml"]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    let output = format!("{stdout}{stderr}");
    assert!(
        output.contains("unknown context variable `y`") && output.contains("loop.yaml:7:15"),
        "{output}"
    );
}

/// The W3C-style fixture (tests 150, 152, 153, 155, 156) imported and run by the binary: it
/// ends in `pass` only if every loop behaved as SCXML says.
#[test]
fn an_imported_scxml_foreach_runs_to_pass() {
    let directory = temporary_directory("foreach", "scxml");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scxml/foreach.scxml"
    );
    let (code, stdout, stderr) = run_binary(&directory, &["import", "scxml", fixture]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("- foreach: Var6"), "{stdout}");
    std::fs::write(directory.join("foreach.yaml"), stdout).unwrap();
    let state = directory.join("state");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["foreach.yaml", "--state-dir", state.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(r#""state":"pass""#), "{stdout}");
}

/// With iterations allowed, a loop of a million bodies still stops at the step's time limit:
/// the loop looks at the clock as an evaluation does.
#[test]
fn a_long_loop_stops_at_max_step_time() {
    let directory = temporary_directory("foreach", "step-time");
    // 25 million iterations: far more than any machine runs in 10 ms, so the limit always stops
    // the loop (a million once finished in 90 ms, under a 100 ms limit).
    let numbers: Vec<String> = (0..5000).map(|number| number.to_string()).collect();
    std::fs::write(
        directory.join("slow.yaml"),
        format!(
            r#"id: slow
permissions: {{ exec: [], write: [], read: [], env: [] }}
context: {{ numbers: [{}], outer: 0, inner: 0, count: 0 }}
states:
  busy:
    entry:
      - foreach: numbers
        item: outer
        do:
          - foreach: numbers
            item: inner
            do: [{{ assign: {{ count: "count + 1" }} }}]
"#,
            numbers.join(", ")
        ),
    )
    .unwrap();
    let state = directory.join("state");
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "slow.yaml",
            "--max-evaluation-steps",
            "1000000000",
            "--max-step-time",
            "10ms",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 65, "{stdout}{stderr}");
    assert!(
        stderr.contains("the macrostep ran longer than 10ms in the states busy"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
