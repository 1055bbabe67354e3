//! `errors: strict` at its edges, through the binary: an error raised as the run finishes, the fix `check` names under `errors: scxml`, what a sender is told of an event whose guard failed, a failed run's report after a restart, and what `test --generate` says of states a failure cut short.

use serde_json::{Value, json};

use crate::execution_errors::{finished, write_gate};
use crate::support::mcp_raw::{RawMcp, reported_run};
use crate::support::{run_binary, temporary_directory};

/// Writes `text` as `name` into a new directory of this module's and returns the directory.
fn protocol(test: &str, name: &str, text: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("execution-errors-edges", test);
    std::fs::write(directory.join(name), text).unwrap();
    directory
}

/// The final state's exit action fails as `exitInterpreter` runs it: that error was cleared
/// with the queue, unseen (no warning, exit 0). Under `errors: strict` an error the run meets
/// while it finishes fails it, as one queued when it reached its final state does.
#[test]
fn an_error_in_the_final_states_exit_actions_fails_the_run() {
    let directory = protocol(
        "final-exit",
        "finishing.yaml",
        r#"
id: finishing
permissions: { exec: [], read: [], write: [], env: [] }
context: { n: 0 }
states:
  working:
    always: done
  done:
    type: final
    exit: [{ assign: { n: "1 / n" } }, { log: "not reached" }]
"#,
    );
    let (code, stdout, stderr) =
        run_binary(&directory, &["finishing.yaml", "--state-dir", "state"]);
    assert_eq!(code, 76, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let finished = finished(&stdout);
    assert_eq!(finished["error"]["event"], "error.execution", "{finished}");
    assert!(
        finished["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("Division by zero")),
        "{finished}"
    );
    assert!(!stderr.contains("not reached"), "{stderr}");
}

/// The review gate of issue 28 under `errors: scxml`, with the handler `check`'s help asked
/// for: `error.execution` handled in `deciding` by a transition that leaves it. The eventless
/// guard is still taken before the error, so the gate still approves junk: the help must not
/// name that as the fix.
#[test]
fn the_scxml_warning_does_not_name_a_handler_as_its_fix() {
    let handler = "on: { error.execution: broken }";
    let directory = write_gate("edges-scxml-help", "errors: scxml", handler);
    let arguments = [
        "gate.yaml",
        "--events",
        "events.jsonl",
        "--state-dir",
        "state",
    ];
    let (code, stdout, _) = run_binary(&directory, &arguments);
    // What W3C's order does with the handler in place: the guard decided first.
    assert_eq!((code, &finished(&stdout)["state"]), (0, &json!("approved")));
    let (_, stdout, stderr) = run_binary(&directory, &["check", "gate.yaml"]);
    let output = format!("{stdout}{stderr}");
    assert!(
        output.contains("this eventless guard reads `reviews`"),
        "{output}"
    );
    assert!(
        !output.contains("handle `error.execution` in `deciding` with a transition that leaves it"),
        "check names a fix that does not work:\n{output}"
    );
}

/// `go`'s guard fails, so under `errors: strict` no transition is taken for it (not even the
/// unguarded fallback), and the error's handler ends the run. The sender was told `go` was
/// discarded because "the run has ended", which it had not when `go` came; and, with a handler
/// that stays, that "none held" of guards one of which failed, and that SCXML would discard it,
/// where SCXML would have taken the fallback.
#[test]
fn an_event_whose_guard_failed_is_said_so_to_its_sender() {
    let text = r#"
id: guarded
permissions: { exec: [], read: [], write: [], env: [] }
context: { n: 0 }
events: { go: {} }
states:
  waiting:
    on:
      go:
        - { target: divided, guard: "1 / n == 1" }
        - { target: fallback }
      error.execution: HANDLER
  divided: { type: final }
  fallback: { type: final, exit_code: 2 }
  handled: { type: final, exit_code: 3 }
"#;
    let directory = protocol(
        "guard-failed",
        "leaving.yaml",
        &text.replace("HANDLER", "handled"),
    );
    std::fs::write(
        directory.join("staying.yaml"),
        text.replace("HANDLER", "{ actions: [{ log: handled }] }"),
    )
    .unwrap();
    std::fs::write(directory.join("events.jsonl"), "{\"event\":\"go\"}\n").unwrap();
    for file in ["leaving.yaml", "staying.yaml"] {
        let (_, stdout, stderr) = run_binary(
            &directory,
            &[file, "--events", "events.jsonl", "--state-dir", "state"],
        );
        let line: Value = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| line["event"] == "go")
            .unwrap_or_else(|| panic!("no line for go:\n{stdout}\n{stderr}"));
        let reason = line["reason"].as_str().unwrap_or_default();
        assert!(
            !reason.contains("the run has ended")
                && !reason.contains("none held")
                && reason.contains("failed"),
            "{file}: the sender is not told that a guard failed: {line}"
        );
    }
}

/// A run failed by an unhandled error, read by `get_run` from a server that did not run it:
/// the report says its error where a live report does (`finished.error`), not as its output.
#[test]
fn a_failed_runs_report_names_its_error_the_same_after_a_restart() {
    let directory = protocol(
        "mcp-report",
        "gate.yaml",
        r#"
id: gate
permissions: { exec: [], read: [], write: [], env: [] }
context: { n: 0 }
events: { go: {} }
states:
  waiting:
    on:
      go: { target: deciding, actions: [{ assign: { n: "1 / n" } }] }
  deciding:
    always: done
  done: { type: final }
"#,
    );
    let mut server = RawMcp::start(&directory, &["gate.yaml"], json!({}));
    let run = reported_run(&server.call(1, "gate", json!({})));
    let live =
        server.call(2, "send_event", json!({"run": run, "event": "go"}))["structuredContent"]
            .clone();
    assert_eq!(live["finished"]["exit_code"], 76, "{live}");
    // An error ended it: `failed`, as docs/mcp.md defines it, live and stored alike.
    assert_eq!(live["status"], "failed", "{live}");
    assert_eq!(
        live["finished"]["error"]["event"], "error.execution",
        "{live}"
    );
    server.finish();

    let mut server = RawMcp::start(&directory, &["gate.yaml"], json!({}));
    let stored = server.call(3, "get_run", json!({"run": run}))["structuredContent"].clone();
    server.finish();
    assert_eq!(stored["finished"]["exit_code"], 76, "{stored}");
    assert_eq!(stored["status"], "failed", "{stored}");
    assert_eq!(
        stored["finished"]["error"], live["finished"]["error"],
        "stored: {stored}\nlive: {live}"
    );
}

/// `test --generate` on a protocol whose only way into `deciding` fails there: no eventless
/// transition of `deciding` ever ran, yet the reason given for the fallback not taken was that
/// "an earlier transition of `deciding` was taken each time".
#[test]
fn generate_does_not_say_a_transition_was_taken_where_the_run_failed() {
    let directory = protocol(
        "generate",
        "gate.yaml",
        r#"
id: gate
permissions: { exec: [], read: [], write: [], env: [] }
context: { n: 0 }
events: { go: {}, skip: {} }
states:
  waiting:
    on:
      go: { target: deciding, actions: [{ assign: { n: "10 / n" } }] }
      skip: approved
  deciding:
    always:
      - { target: approved, guard: "n > 0" }
      - { target: rejected }
  approved: { type: final }
  rejected: { type: final, exit_code: 1 }
"#,
    );
    let (code, stdout, stderr) = run_binary(&directory, &["test", "--generate", "gate.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let output = format!("{stdout}{stderr}");
    assert!(
        output.contains("deciding → rejected"),
        "the fallback is named as not taken:\n{output}"
    );
    assert!(
        !output.contains("an earlier transition of `deciding` was taken each time")
            && output.contains("the run failed in `deciding`"),
        "the reason given is false: the run failed in `deciding` before any of its transitions:\n{output}"
    );
}
