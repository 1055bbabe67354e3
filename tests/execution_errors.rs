//! `errors: strict` (the default): an `error.execution` is processed before eventless transitions, a failed guard takes nothing, and an unhandled one fails the run with exit 76; `errors: scxml` keeps W3C's order; `check` warns where a guard may read what a failed write left.

use serde_json::Value;

use crate::support::{run_binary, temporary_directory};

/// A review gate: `results` assigns the reviews (typed), and `deciding` approves when every
/// review approves. `ERRORS` is replaced by an `errors:` line or nothing, `HANDLER` by a handler
/// of `error.execution` in `deciding` or nothing.
const GATE: &str = r#"
id: gate
ERRORS
permissions: { exec: [], read: [], write: [], env: [] }
context: { reviews: [] }
types:
  reviews:
    type: array
    items:
      type: object
      properties: { verdict: { enum: [approve, reject] } }
      required: [verdict]
events:
  results: {}
states:
  waiting:
    on:
      results:
        target: deciding
        actions:
          - log: "assigning"
          - assign: { reviews: "event.data.items" }
          - log: "not reached: the failed assignment stops the block"
  deciding:
    entry: [{ log: "entering deciding" }]
    exit: [{ log: "exiting deciding" }]
    HANDLER
    always:
      - target: approved
        guard: "reviews.all(r, r.verdict == 'approve')"
      - target: rejected
  approved: { type: final, entry: [{ log: "approved" }] }
  rejected: { type: final, exit_code: 1 }
  broken: { type: final, exit_code: 3, entry: [{ log: "broken" }] }
"#;

/// One `reject` and one malformed review: the typed assignment fails.
const JUNK: &str = r#"{"event":"results","data":{"items":[{"verdict":"reject"},{"oops":1}]}}"#;

/// Writes the gate with `errors` and `handler` lines, and `JUNK` as `events.jsonl`, into a new
/// directory, and returns it.
pub(crate) fn write_gate(
    name: &str,
    errors: &str,
    handler: &str,
) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("execution-errors", name);
    let text = GATE.replace("ERRORS", errors).replace("HANDLER", handler);
    std::fs::write(directory.join("gate.yaml"), text).unwrap();
    std::fs::write(directory.join("events.jsonl"), format!("{JUNK}\n")).unwrap();
    directory
}

/// Writes the gate with `errors` and `handler` lines into a new directory, and runs it on `JUNK`.
fn run_gate(name: &str, errors: &str, handler: &str) -> (i32, String, String) {
    let directory = write_gate(name, errors, handler);
    run_binary(
        &directory,
        &[
            "gate.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    )
}

/// The `finished` object of a run's stdout.
pub(crate) fn finished(stdout: &str) -> Value {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|line| line.get("finished").cloned())
        .unwrap_or_else(|| panic!("no finished line in:\n{stdout}"))
}

/// The messages of the log lines on stderr that `wanted` names, in order.
fn logged<'a>(stderr: &str, wanted: &[&'a str]) -> Vec<&'a str> {
    stderr
        .lines()
        .filter_map(|line| {
            wanted
                .iter()
                .find(|message| line.contains(*message))
                .copied()
        })
        .collect()
}

#[test]
fn a_gate_fed_junk_fails_with_exit_76_and_never_approves() {
    let (code, stdout, stderr) = run_gate("junk", "", "");
    assert_eq!(code, 76, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let finished = finished(&stdout);
    assert_eq!(finished["state"], Value::Null);
    assert_eq!(finished["exit_code"], 76);
    assert_eq!(finished["error"]["event"], "error.execution");
    assert_eq!(finished["error"]["states"], serde_json::json!(["deciding"]));
    let message = finished["error"]["message"].as_str().unwrap();
    assert!(message.contains("`reviews` would not conform"), "{message}");
    // No transition after the error: the eventless guard never ran, nothing was approved.
    assert!(!stderr.contains("approved"), "{stderr}");
    assert!(
        stderr.contains("ERROR error.execution was not handled by any transition"),
        "{stderr}"
    );
    // Entered, then failed: the exit actions run as the interpreter exits.
    assert_eq!(
        logged(
            &stderr,
            &[
                "assigning",
                "not reached",
                "entering deciding",
                "exiting deciding"
            ]
        ),
        ["assigning", "entering deciding", "exiting deciding"]
    );
}

#[test]
fn a_failed_run_is_recorded_failed_with_its_error() {
    let directory = temporary_directory("execution-errors", "recorded");
    std::fs::write(
        directory.join("gate.yaml"),
        GATE.replace("ERRORS", "").replace("HANDLER", ""),
    )
    .unwrap();
    std::fs::write(directory.join("events.jsonl"), format!("{JUNK}\n")).unwrap();
    let (code, _, _) = run_binary(
        &directory,
        &[
            "gate.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 76);
    let (code, stdout, stderr) =
        run_binary(&directory, &["status", "--json", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stderr}");
    let status: Value = serde_json::from_str(&stdout).unwrap();
    let text = status.to_string();
    assert!(text.contains("\"exit_code\":76"), "{text}");
    assert!(text.contains("error.execution"), "{text}");
    assert!(text.contains("would not conform"), "{text}");
}

#[test]
fn a_handler_of_the_error_runs_before_the_eventless_transitions() {
    let handler = r#"on:
      error.execution:
        target: broken
        actions: [{ log: "handled: ${event.data.message}" }]"#;
    let (code, stdout, stderr) = run_gate("handled", "", handler);
    assert_eq!(code, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(finished(&stdout)["state"], "broken");
    assert_eq!(
        logged(
            &stderr,
            &[
                "assigning",
                "entering deciding",
                "exiting deciding",
                "handled:",
                "broken",
                "approved"
            ]
        ),
        [
            "assigning",
            "entering deciding",
            "exiting deciding",
            "handled:",
            "broken"
        ]
    );
}

#[test]
fn under_errors_scxml_the_eventless_guard_goes_first_as_w3c_orders() {
    let (code, stdout, stderr) = run_gate("scxml", "errors: scxml", "");
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(finished(&stdout)["state"], "approved");
    assert!(
        stderr.contains("WARN  error.execution was not handled by any transition"),
        "{stderr}"
    );
}

/// A protocol whose `go` has a guard that fails before an unguarded fallback.
const FALLBACK: &str = r#"
id: fallback
ERRORS
permissions: { exec: [], read: [], write: [], env: [] }
states:
  waiting:
    on:
      go:
        - target: checked
          guard: "event.data.count > 2"
        - target: fallen_back
  checked: { type: final }
  fallen_back: { type: final, exit_code: 2 }
"#;

fn run_fallback(name: &str, errors: &str) -> (i32, String, String) {
    let directory = temporary_directory("execution-errors", name);
    std::fs::write(
        directory.join("fallback.yaml"),
        FALLBACK.replace("ERRORS", errors),
    )
    .unwrap();
    // `count` is text: the comparison fails.
    std::fs::write(
        directory.join("events.jsonl"),
        "{\"event\":\"go\",\"data\":{\"count\":\"three\"}}\n",
    )
    .unwrap();
    run_binary(
        &directory,
        &[
            "fallback.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    )
}

#[test]
fn a_failed_guard_takes_no_fallback_and_fails_the_run() {
    let (code, stdout, stderr) = run_fallback("guard", "");
    assert_eq!(code, 76, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let finished = finished(&stdout);
    assert_eq!(finished["error"]["states"], serde_json::json!(["waiting"]));
    // Under W3C's rules the failed guard is false and the fallback is taken.
    let (code, stdout, _) = run_fallback("guard-scxml", "errors: scxml");
    assert_eq!(code, 2);
    assert_eq!(self::finished(&stdout)["state"], "fallen_back");
}

#[test]
fn an_output_that_fails_to_render_fails_the_run_it_would_have_ended() {
    let directory = temporary_directory("execution-errors", "output");
    std::fs::write(
        directory.join("output.yaml"),
        r#"
id: output
permissions: { exec: [], read: [], write: [], env: [] }
context: { ratio: 0 }
states:
  done: { type: final, output: { share: "${10 / ratio}" } }
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["output.yaml", "--state-dir", "state"]);
    assert_eq!(code, 76, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(finished(&stdout)["error"]["event"], "error.execution");
}

#[test]
fn a_child_that_fails_so_ends_its_invoke_with_the_error() {
    let directory = temporary_directory("execution-errors", "child");
    std::fs::write(
        directory.join("child.yaml"),
        r#"
id: child
permissions: { exec: [], read: [], write: [], env: [] }
context: { ratio: 0 }
states:
  dividing:
    entry: [{ assign: { ratio: "10 / ratio" } }]
    always: done
  done: { type: final }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("parent.yaml"),
        r#"
id: parent
permissions: { exec: [], read: ["**"], write: [], env: [] }
states:
  calling:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      done.invoke.kid: succeeded
      error.invoke.kid:
        target: failed
        actions: [{ log: "child said: ${event.data.message}" }]
  succeeded: { type: final }
  failed: { type: final, exit_code: 4 }
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["parent.yaml", "--state-dir", "state"]);
    assert_eq!(code, 4, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("child said: the child protocol failed with exit code 76: error.execution was not handled"),
        "{stderr}"
    );
}

#[test]
fn check_warns_where_an_eventless_guard_may_read_what_a_failed_write_left() {
    let directory = temporary_directory("execution-errors", "check");
    let write = |name: &str, errors: &str, handler: &str| {
        let text = GATE.replace("ERRORS", errors).replace("HANDLER", handler);
        std::fs::write(directory.join(name), text).unwrap();
    };
    write("scxml.yaml", "errors: scxml", "");
    write("strict.yaml", "", "");
    write(
        "staying.yaml",
        "",
        "on:\n      error.execution: { actions: [{ log: \"ignored\" }] }",
    );
    write("leaving.yaml", "", "on:\n      error.execution: broken");
    let warning = "this eventless guard reads `reviews`, which the assignment on line 22 may fail to write on the way into `deciding`";
    let (_, _, scxml) = run_binary(&directory, &["check", "scxml.yaml"]);
    assert!(scxml.contains(warning), "{scxml}");
    assert!(scxml.contains("under `errors: scxml`"), "{scxml}");
    assert!(scxml.contains("--> scxml.yaml:30:16"), "{scxml}");
    let (_, _, staying) = run_binary(&directory, &["check", "staying.yaml"]);
    assert!(staying.contains(warning), "{staying}");
    assert!(
        staying.contains("the targetless `error.execution` handler on line 28"),
        "{staying}"
    );
    // By default an unhandled error fails the run, and a handler with a target leaves: no trap.
    for safe in ["strict.yaml", "leaving.yaml"] {
        let (code, stdout, stderr) = run_binary(&directory, &["check", safe]);
        assert_eq!(code, 0, "{safe}: {stdout}{stderr}");
        assert!(
            !stderr.contains("eventless guard reads"),
            "{safe}: {stderr}"
        );
    }
}

#[test]
fn import_scxml_writes_errors_scxml() {
    let directory = temporary_directory("execution-errors", "import");
    std::fs::write(
        directory.join("doc.scxml"),
        r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a"><state id="a"/></scxml>"#,
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["import", "scxml", "doc.scxml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.lines().any(|line| line == "errors: scxml"),
        "{stdout}"
    );
}

#[test]
fn a_scenario_expects_the_failure_by_its_exit_code_and_error() {
    let directory = temporary_directory("execution-errors", "scenario");
    std::fs::write(
        directory.join("gate.yaml"),
        GATE.replace("ERRORS", "").replace("HANDLER", ""),
    )
    .unwrap();
    let scenario = |error: &str| {
        format!(
            "protocol: gate.yaml\nscenarios:\n  - name: junk\n    steps:\n      - send: results\n        data: {{ items: [{{ verdict: reject }}, {{ oops: 1 }}] }}\n      - expect: {{ configuration: [deciding], finished: {{ exit_code: 76, error: \"{error}\" }} }}\n"
        )
    };
    std::fs::write(
        directory.join("gate.scenario.yaml"),
        scenario("would not conform to its type"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "gate.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    std::fs::write(
        directory.join("gate.scenario.yaml"),
        scenario("something else"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "gate.scenario.yaml"]);
    assert_ne!(code, 0);
    assert!(
        format!("{stdout}{stderr}").contains("expected an error saying `something else`"),
        "{stdout}{stderr}"
    );
}

#[test]
fn a_handler_whose_guard_fails_is_named_in_the_failure() {
    let handler = r#"on:
      error.execution:
        target: broken
        guard: "event.data.missing.flag""#;
    let (code, stdout, stderr) = run_gate("handler-guard", "", handler);
    assert_eq!(code, 76, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let message = finished(&stdout)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("`reviews` would not conform"), "{message}");
    assert!(
        message.contains("a guard of its handler failed too: no key `missing`"),
        "{message}"
    );
}
