//! Scenario files as first-class files: checked by `validate` and `check`, run in scratch
//! directories, matched by one rule, asserting effects, and starting in a given configuration.

use std::path::Path;

use crate::support::{assert_diagnostic, run_binary, temporary_directory};
use protocol_run::tooling::scenario::runner::run_file;

/// A protocol with a compound state, a parallel one, a file write and a program run.
const WORKER: &str = r#"
id: worker
context: { attempts: 0, settings: { mode: fast, level: 1 }, items: [1, 2], entered: false }
states:
  idle:
    on:
      go: working
      split: both
  working:
    entry:
      - log: entered working
        tags: [working_entered]
      - assign: { entered: "true" }
    states:
      writing:
        entry:
          - write: out/flaky.jsonl
            append: { attempt: "${attempts}" }
            id: ledger
        on:
          # The read starts once the write is done: leaving the state first would cancel it.
          done.exec.ledger:
            actions:
              - exec: [cat, input.txt]
                id: reader
          done.exec.reader:
            target: finished_reading
            actions: [{ assign: { attempts: "attempts + 1" } }]
          error.exec.reader: failed
      finished_reading:
        entry:
          - log: finished reading
            tags: [finished_reading_entered]
        on:
          finish: done
  both:
    type: parallel
    states:
      left:
        states:
          left_one: {}
          left_two: { entry: [{ log: left two, tags: [left_two_entered] }] }
      right:
        states:
          right_one: { entry: [{ log: right one, tags: [right_one_entered] }] }
  done: { type: final, output: { attempts: "${attempts}", settings: { mode: fast, level: 1 } } }
  failed: { type: final, exit_code: 1 }
"#;

/// A directory holding `worker.yaml` and a scenario file `name` with `text`.
fn worker_with(group: &str, name: &str, text: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("scenario-files", group);
    std::fs::write(directory.join("worker.yaml"), WORKER).unwrap();
    std::fs::write(directory.join(name), text).unwrap();
    directory
}

/// The scenario at `index` of the report passed.
fn assert_passed(report: &protocol_run::tooling::scenario::runner::FileReport, index: usize) {
    let result = &report.results[index];
    assert!(result.failures.is_empty(), "{result:?}");
}

/// The path `test` printed for a kept scratch directory.
fn kept_directory(stdout: &str) -> Option<&Path> {
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("kept its scratch directory: "))
        .map(Path::new)
}

#[test]
fn each_scenario_runs_in_a_scratch_directory_removed_when_it_passes_and_kept_when_it_fails() {
    let directory = worker_with(
        "scratch",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: reads the file it was given
    files: { input.txt: "hello\n", nested/deeper/note.txt: "x" }
    steps:
      - send: go
      - expect:
          configuration: [finished_reading]
          files: { out/flaky.jsonl: attempt, input.txt: hello, nested/deeper/note.txt: x }
  - name: has no file to read
    steps:
      - send: go
      - expect: { configuration: [finished_reading] }
"#,
    );
    let (code, stdout, stderr) = run_binary(&directory, &["test", "worker.scenario.yaml"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("ok     worker.scenario.yaml: reads the file it was given"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "step 2 (expect): configuration: expected {\"finished_reading\"}, seen {\"failed\"}"
        ),
        "{stdout}"
    );
    // Nothing lands in the working directory of `test`.
    assert!(!directory.join("out").exists(), "{stdout}");
    let kept = kept_directory(&stdout).expect("the failed scenario's directory is printed");
    assert!(kept.join("out/flaky.jsonl").is_file(), "{}", kept.display());
    // Only the failed scenario's directory is kept.
    assert_eq!(stdout.matches("kept its scratch directory").count(), 1);
    std::fs::remove_dir_all(kept).unwrap();
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_seeded_file_outside_the_scratch_directory_fails_the_scenario() {
    let directory = worker_with(
        "escape",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: escapes
    files: { ../outside.txt: "x" }
    steps: []
"#,
    );
    let (code, stdout, _) = run_binary(&directory, &["test"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(
            "files: `../outside.txt` is not a relative path inside the scratch directory"
        ),
        "{stdout}"
    );
    assert!(!directory.parent().unwrap().join("outside.txt").exists());
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn effects_are_asserted_with_their_arguments_in_order_since_the_last_expect() {
    let directory = worker_with(
        "effects",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: the write and the program, with their arguments
    files: { input.txt: "hello\n" }
    steps:
      - send: go
      - expect:
          effects:
            - { id: ledger, path: out/flaky.jsonl, content: '"attempt":\s*"?0' }
            - { id: reader, argv: [cat, input.txt] }
      - expect: { effects: [] }
  - name: wrong arguments, wrong order, and none expected
    mocks: { reader: "ok:hello" }
    steps:
      - send: go
      - expect:
          effects: [{ id: reader, argv: [cat, other.txt] }]
      - send: finish
  - name: order matters
    mocks: { reader: "ok:hello" }
    steps:
      - send: go
      - expect:
          effects: [{ id: reader }, { id: ledger }]
  - name: an empty list asserts none
    mocks: { reader: "ok:hello" }
    steps:
      - send: go
      - expect: { effects: [] }
"#,
    );
    let (code, stdout, stderr) = run_binary(&directory, &["test", "worker.scenario.yaml"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("ok     worker.scenario.yaml: the write and the program"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            r#"step 2 (expect): effects: expected {"id":"reader","argv":["cat","other.txt"]} (in order), seen [ledger path "out/flaky.jsonl", reader argv ["cat", "input.txt"]]"#
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"effects: expected {"id":"ledger"} (in order)"#),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            r#"effects: expected none, seen [ledger path "out/flaky.jsonl", reader argv ["cat", "input.txt"]]"#
        ),
        "{stdout}"
    );
    for kept in stdout.lines().filter_map(|line| {
        line.trim()
            .strip_prefix("kept its scratch directory: ")
            .map(Path::new)
    }) {
        std::fs::remove_dir_all(kept).unwrap();
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

/// `context`, `directives` and `output` follow one rule: a map matches by the keys it gives,
/// lists and scalars exactly; a finished run's configuration is its final state.
#[test]
fn context_and_output_match_maps_by_their_keys_and_lists_exactly() {
    let directory = worker_with(
        "matching",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: subsets of maps, whole lists, the final state as configuration
    start: { configuration: [finished_reading] }
    steps:
      - expect: { context: { settings: { mode: fast }, items: [1, 2] } }
      - send: finish
      - expect:
          configuration: [done]
          finished: { state: done, output: { settings: { level: 1 } } }
  - name: a list is not matched by a part of it
    start: { configuration: [finished_reading] }
    steps:
      - expect: { context: { items: [1], settings: { mode: slow } } }
"#,
    );
    let report = run_file(&directory.join("worker.scenario.yaml"));
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_passed(&report, 0);
    assert_eq!(
        report.results[1].failures,
        [
            "step 1 (expect): context `items`: expected [1], seen [1,2]\n\
          context `settings`: expected {\"mode\":\"slow\"}, seen {\"mode\":\"fast\",\"level\":1}"
        ]
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// `start:` enters the states listed (their entry actions run) inside their ancestors (whose
/// entry actions do not); the context given replaces the initial values.
#[test]
fn a_scenario_can_start_in_a_given_configuration_and_context() {
    let directory = worker_with(
        "start",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: starts in one state
    start: { configuration: [finished_reading], context: { attempts: 7 } }
    steps:
      - expect:
          configuration: [finished_reading]
          # The ancestor `working` is active but was not entered.
          context: { attempts: 7, entered: false }
          tags: [finished_reading_entered]
          effects: []
      - send: finish
      - expect: { finished: { output: { attempts: 7 } } }
  - name: starts in both regions of a parallel state, entered in document order
    start: { configuration: [right_one, left_two] }
    steps:
      - expect:
          configuration: [left_two, right_one]
          tags: [left_two_entered, right_one_entered]
  - name: not a configuration
    start: { configuration: [working] }
    steps: []
"#,
    );
    let report = run_file(&directory.join("worker.scenario.yaml"));
    assert_passed(&report, 0);
    assert_passed(&report, 1);
    assert_eq!(
        report.results[2].failures,
        [
            "start: compound state `working` needs one active child: add one of `writing`, `finished_reading`"
        ]
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// Every name a scenario file uses is checked against its protocol, each error located.
#[test]
fn validate_reports_every_unknown_name_of_a_scenario_file_located() {
    let directory = worker_with(
        "names",
        "worker.scenario.yaml",
        r#"protocol: worker.yaml
scenarios:
  - name: wrong names
    inputs: { path: a.txt }
    mocks: { readr: "ok:x", "reader[3]": "ok:y", ledger: "sometimes" }
    start: { configuration: [left_one, writing], context: { attempt: 1 } }
    steps:
      - expect: { configuration: [finished_readin] }
      - expect: { finished: { state: dne } }
      - expect: { effects: [{ id: ledgr }] }
      - expect: { effects: [{ id: ledger, content: "(" }], files: { a.txt: "[" } }
  - name: illegal starts
    start: { configuration: [left_one, left_two] }
    steps: []
  - name: a parallel state without its regions
    start: { configuration: [both] }
    steps: []
"#,
    );
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "worker.scenario.yaml"]);
    assert_eq!(code, 65, "{stdout}{stderr}");
    let at = |line_column: &str| format!("worker.scenario.yaml:{line_column}");
    assert_diagnostic(&stderr, &["inputs: unknown input `path`", &at("4:15")]);
    assert_diagnostic(
        &stderr,
        &[
            "`readr` is not an effect id of protocol `worker`",
            &at("5:14"),
            "did you mean `reader`?",
        ],
    );
    assert!(!stderr.contains("`reader[3]`"), "{stderr}");
    assert_diagnostic(
        &stderr,
        &["mock `ledger`: `sometimes` is not an outcome", &at("5:58")],
    );
    assert_diagnostic(
        &stderr,
        &[
            "not a configuration the protocol can be in: only one top-level state can be active, \
             not `working`, `both`",
            &at("6:29"),
        ],
    );
    assert_diagnostic(
        &stderr,
        &[
            "protocol `worker` declares no context variable `attempt`",
            &at("6:61"),
            "did you mean `attempts`?",
        ],
    );
    assert_diagnostic(
        &stderr,
        &[
            "no state `finished_readin` in protocol `worker`",
            &at("8:35"),
            "did you mean `finished_reading`?",
        ],
    );
    assert_diagnostic(
        &stderr,
        &["no state `dne` in protocol `worker`", &at("9:38")],
    );
    assert_diagnostic(
        &stderr,
        &[
            "`ledgr` is not an effect id",
            &at("10:35"),
            "did you mean `ledger`?",
        ],
    );
    assert_diagnostic(
        &stderr,
        &[
            "`(` is not a regular expression: unclosed group",
            &at("11:52"),
        ],
    );
    assert_diagnostic(&stderr, &["`[` is not a regular expression", &at("11:76")]);
    assert_diagnostic(
        &stderr,
        &[
            "only one child of compound state `left` can be active, not `left_one`, `left_two`",
            &at("13:29"),
        ],
    );
    assert_diagnostic(
        &stderr,
        &[
            "every region of parallel state `both` is active with it: add a state of `left`, `right`",
            &at("16:29"),
        ],
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_scenario_file_whose_protocol_is_missing_or_invalid_is_reported_where_it_names_it() {
    let directory = temporary_directory("scenario-files", "protocol");
    std::fs::write(
        directory.join("a.scenario.yaml"),
        "protocol: nowhere.yaml\nscenarios: []\n",
    )
    .unwrap();
    std::fs::write(directory.join("broken.yaml"), "id: broken\nstates: {}\n").unwrap();
    std::fs::write(
        directory.join("b.scenario.yaml"),
        "protocol: broken.yaml\nscenarios: []\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "a.scenario.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            "the protocol `nowhere.yaml` does not exist",
            "a.scenario.yaml:1:11",
            "relative to the scenario file",
        ],
    );
    let (code, _, stderr) = run_binary(&directory, &["check", "b.scenario.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            "the protocol `broken.yaml` is not valid",
            "b.scenario.yaml:1:11",
        ],
    );
    assert!(stderr.contains("broken.yaml:"), "{stderr}");
    std::fs::remove_dir_all(&directory).unwrap();
}

/// With `events:` declared, a send the protocol refuses is an error; without, a send no `on:`
/// handles is a warning of `check` only.
#[test]
fn sent_events_are_checked_against_what_the_protocol_takes() {
    let directory = worker_with(
        "events",
        "cases.yaml",
        "protocol: worker.yaml\nscenarios:\n  - name: n\n    steps:\n      - send: og\n      - send: finish.now\n",
    );
    std::fs::write(
        directory.join("declared.yaml"),
        "id: declared\nevents: { approve: {} }\nstates:\n  waiting: { on: { approve: done } }\n  done: { type: final }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("declared.scenario.yaml"),
        "protocol: declared.yaml\nscenarios:\n  - name: n\n    steps:\n      - send: aprove\n",
    )
    .unwrap();
    // Recognised by its content: `cases.yaml` has `protocol:` and `scenarios:`.
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "cases.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("ok: cases.yaml (scenarios of protocol `worker`, 1 scenario)"),
        "{stdout}"
    );
    let (code, _, stderr) = run_binary(&directory, &["check", "cases.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            // `check`'s own warning for a protocol's `send`, with its suggestion.
            "warning: event `og` is sent but no transition handles it",
            "cases.yaml:5:15",
            "did you mean `go`?",
        ],
    );
    // `finish` handles `finish.now` (SCXML prefix matching).
    assert!(!stderr.contains("finish.now"), "{stderr}");
    let (code, _, _) = run_binary(&directory, &["check", "--deny-warnings", "cases.yaml"]);
    assert_eq!(code, 65);
    let (code, _, stderr) = run_binary(&directory, &["validate", "declared.scenario.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            "the protocol refuses event `aprove`",
            "declared.scenario.yaml:5:15",
        ],
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A mock keyed on arguments scripts the calls its `when` matches; a call none matches fails.
#[test]
fn mocks_may_be_keyed_on_the_call_arguments() {
    let directory = worker_with(
        "keyed",
        "worker.scenario.yaml",
        r#"
protocol: worker.yaml
scenarios:
  - name: the matching entry answers
    mocks:
      ledger: "ok:"
      reader:
        - { when: { argv: [cat, other.txt] }, result: "error:not this one" }
        - { when: { argv: [cat, input.txt] }, result: "ok:hi" }
    steps:
      - send: go
      - expect: { configuration: [finished_reading] }
  - name: no entry matches
    mocks:
      ledger: "ok:"
      reader: [{ when: { argv: [cat, other.txt] }, result: "ok:hi" }]
    steps:
      - send: go
      - expect: { configuration: [failed] }
"#,
    );
    let report = run_file(&directory.join("worker.scenario.yaml"));
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_passed(&report, 0);
    assert_passed(&report, 1);
    std::fs::write(
        directory.join("bad.scenario.yaml"),
        "protocol: worker.yaml\nscenarios:\n  - name: n\n    mocks:\n      reader: [{ result: sometimes }]\n    steps: []\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "bad.scenario.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            "mock `reader`: `sometimes` is not an outcome",
            "bad.scenario.yaml:5:26",
        ],
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A protocol whose `revise` must carry `content`, and that keeps the time it finished.
const REVISING: &str = r#"
id: revising
events:
  revise:
    type: object
    properties: { content: { type: string } }
    required: [content]
  note: {}
  hold: {}
context: { stamp: null }
states:
  drafting:
    defer: [hold]
    on:
      revise: waiting
  waiting:
    after:
      - delay: 20s
        target: done
        actions: [{ assign: { stamp: "now()" } }]
  done: { type: final, output: { stamp: "${stamp}" } }
"#;

/// A `send` expects what becomes of it in the words the engine tells a sender: a refusal
/// (data off the schema) is expected rather than a mistake of the file, and time values
/// compare as instants however they are written.
#[test]
fn a_send_expects_its_outcome_and_times_compare_as_instants() {
    let directory = temporary_directory("scenario-files", "outcomes");
    std::fs::write(directory.join("revising.yaml"), REVISING).unwrap();
    let scenarios = r#"protocol: revising.yaml
scenarios:
  - name: each outcome in the engine's words
    steps:
      - { send: revise, data: {}, outcome: refused }
      - { send: hold, outcome: deferred }
      - { send: note, outcome: discarded }
      - { send: revise, data: { content: new text }, outcome: taken }
      - after: 20s
      - expect:
          context: { stamp: "2026-01-01T00:00:20Z" }
          finished: { output: { stamp: "2026-01-01T00:00:20+00:00" } }
"#;
    std::fs::write(directory.join("revising.scenario.yaml"), scenarios).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["check", "revising.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Meant to be discarded: no warning that nothing handles `note`.
    assert!(!stderr.contains("`note`"), "{stderr}");
    let (code, stdout, stderr) = run_binary(&directory, &["test", "revising.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");

    // An outcome other than the one expected fails the step, naming both.
    let wrong = r#"protocol: revising.yaml
scenarios:
  - name: expects a refusal of what is taken
    steps:
      - { send: revise, data: { content: x }, outcome: refused }
  - name: expects taken what is discarded
    steps:
      - { send: note, outcome: taken }
  - name: another instant
    steps:
      - { send: revise, data: { content: x } }
      - after: 20s
      - expect: { context: { stamp: "2026-01-01T00:00:21Z" } }
"#;
    std::fs::write(directory.join("wrong.scenario.yaml"), wrong).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "wrong.scenario.yaml"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    for failure in [
        "step 1 (send revise): outcome: expected the event refused, it was taken",
        "step 1 (send note): outcome: expected the event taken, it was discarded",
        "context `stamp`: expected \"2026-01-01T00:00:21Z\", seen \"2026-01-01T00:00:20.000Z\"",
        "0 passed, 3 failed",
    ] {
        assert!(stdout.contains(failure), "{failure} in\n{stdout}");
    }
    std::fs::remove_dir_all(&directory).unwrap();
}
