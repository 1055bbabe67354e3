//! `events:`: declared input is admitted on every entry path (events lines, `serve`, scenarios, parent and child) or refused and not delivered; `on:` keys no event can match are errors (warnings in `check` without `events:`); `event.data.<key>` is checked.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::{Run, assert_diagnostic, errors, run_binary, temporary_directory};

const REVIEW_GATE: &str = include_str!("../examples/review-gate/review-gate.yaml");

/// A protocol with one declared event and a transition on it.
const GATE: &str = r#"
id: gate
events:
  verdict:
    type: object
    properties: { verdict: { enum: [approved, rejected] }, reason: { type: string } }
    required: [verdict]
    additionalProperties: false
context: { seen: [] }
states:
  waiting:
    on:
      verdict:
        - guard: event.data.verdict == 'approved'
          target: approved
          actions: [{ assign: { seen: "seen + [event.data.verdict]" } }]
        - target: rejected
  approved: { type: final }
  rejected: { type: final, exit_code: 1 }
"#;

fn warnings(yaml: &str) -> String {
    let loaded = protocol_run::pipeline::load::load_text("test.yaml", yaml.to_string()).unwrap();
    let machine = protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
        panic!(
            "{}",
            protocol_run::base::diagnostic::render_all(&diagnostics)
        )
    });
    protocol_run::base::diagnostic::render_all(&protocol_run::tooling::lint::check(
        &loaded, &machine,
    ))
}

#[test]
fn a_misspelt_event_name_is_refused_by_validate_with_a_suggestion() {
    let typo = REVIEW_GATE.replace(
        "              critic.verdict:",
        "              critic.verdcit:",
    );
    let rendered = errors(&typo);
    assert!(
        rendered.contains(
            "error: no event `critic.verdcit` can occur: it is not declared under `events:`"
        ) && rendered.contains("test.yaml:64:15")
            && rendered.contains("= help: did you mean `critic.verdict`?"),
        "{rendered}"
    );
    assert!(rendered.ends_with("1 error\n"), "{rendered}");
    // The command says the same, and fails.
    let directory = temporary_directory("declared-events", "validate");
    std::fs::write(directory.join("review-gate.yaml"), &typo).unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "review-gate.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("review-gate.yaml:64:15")
            && stderr.contains("did you mean `critic.verdict`?"),
        "{stderr}"
    );
}

#[test]
fn engine_events_match_only_for_what_exists() {
    let protocol = |handler: &str| {
        format!(
            r#"
id: engine
events: {{ go: {{}} }}
states:
  a:
    entry:
      - {{ exec: [echo, hi], id: test }}
      - {{ raise: "step.${{1}}" }}
      - {{ raise: retry }}
    invoke: [{{ id: helper, protocol: child.yaml }}]
    on:
      {handler}: b
  b: {{ type: final }}
"#
        )
    };
    let directory = temporary_directory("declared-events", "engine");
    std::fs::write(
        directory.join("child.yaml"),
        "id: child\nstates: { c: { type: final } }\n",
    )
    .unwrap();
    let compile = |handler: &str| {
        let path = directory.join("engine.yaml");
        std::fs::write(&path, protocol(handler)).unwrap();
        let loaded = protocol_run::pipeline::load::load_file(&path).unwrap();
        protocol_run::pipeline::compile::compile(&loaded)
            .err()
            .map(|diagnostics| protocol_run::base::diagnostic::render_all(&diagnostics))
    };
    for fine in [
        "go",
        "done.exec.test",
        "error.exec.test",
        "error.exec.timeout.test",
        "error.incomplete.test",
        "error.permission.test",
        "done.exec",
        "error",
        "error.*",
        "'*'",
        "done.state.a",
        "done.invoke.helper",
        "error.invoke.helper",
        "error.execution",
        "error.communication",
        "step.7",
        "retry",
    ] {
        assert_eq!(compile(fine), None, "{fine}");
    }
    for (typo, suggestion) in [
        ("done.exec.tset", "did you mean `done.exec.test`?"),
        ("done.invoke.helpr", "did you mean `done.invoke.helper`?"),
        ("done.state.nothing", "did you mean `done.state.engine`?"),
        (
            "critic.verdict",
            "declare it under `events:` if it comes from outside",
        ),
        ("retyr", "did you mean `retry`?"),
    ] {
        let rendered = compile(typo).unwrap_or_else(|| panic!("{typo} was accepted"));
        assert!(
            rendered.contains(&format!("error: no event `{typo}` can occur"))
                && rendered.contains("engine.yaml:12:7")
                && rendered.contains(suggestion),
            "{rendered}"
        );
    }
}

#[test]
fn without_events_check_warns_about_engine_events_only() {
    let found = warnings(
        r#"
id: lint
permissions: { exec: [echo], write: [], read: [], env: [] }
states:
  a:
    entry: [{ exec: [echo, hi], id: test }]
    on:
      done.exec.tset: b
      done.exec.test: b
      approve: b
  b: { type: final }
"#,
    );
    assert_eq!(
        found,
        "warning: no event `done.exec.tset` can occur: the engine reports no such event for this \
         protocol\n --> test.yaml:8:7\n  |\n8 |       done.exec.tset: b\n  |       \
         ^^^^^^^^^^^^^^\n  = help: did you mean `done.exec.test`?\n\n1 warning\n"
    );
}

#[test]
fn bad_declarations_are_located_errors() {
    let rendered = errors(
        r#"
id: bad
events:
  done.custom: {}
  "critic.*": {}
  critic.verdict: { type: 12 }
  "bad name": {}
states:
  a: {}
"#,
    );
    for (message, place) in [
        ("`done.custom` is an engine event", "test.yaml:4:3"),
        (
            "`critic.*` is a pattern; `events:` declares single events",
            "test.yaml:5:3",
        ),
        (
            "the data schema of event `critic.verdict`: not a valid JSON Schema",
            "test.yaml:6:19",
        ),
        ("`bad name` is not a valid event name", "test.yaml:7:3"),
    ] {
        assert_diagnostic(&rendered, &[message, place]);
    }
}

#[test]
fn a_schema_that_is_not_an_object_is_refused_when_the_file_is_read() {
    let rendered = errors(
        "id: bad\nevents: { go: 12 }\ntypes: { n: [] }\ncontext: { n: 0 }\nstates: { a: {} }\n",
    );
    assert_diagnostic(
        &rendered,
        &[
            "expected a boolean or a mapping, found the number 12",
            "test.yaml:2:15",
        ],
    );
    assert_diagnostic(
        &rendered,
        &[
            "expected a boolean or a mapping, found a list",
            "test.yaml:3:13",
        ],
    );
    assert!(!rendered.contains("quote the value"), "{rendered}");
}

#[test]
fn reading_an_unknown_key_of_declared_data_is_a_located_error() {
    let rendered = errors(&GATE.replace(
        "guard: event.data.verdict == 'approved'",
        "guard: event.data.verdit == 'approved'",
    ));
    assert!(
        rendered.contains("error: `verdit` is not in the data of `verdict`")
            && rendered.contains("test.yaml:14:29")
            && rendered.contains("= help: did you mean `verdict`?"),
        "{rendered}"
    );
    // A template reads data too; an undeclared shape (`{}`) is not checked.
    let rendered = errors(&GATE.replace(
        "target: rejected",
        "target: rejected\n          actions: [{ log: \"${event.data.why}\" }]",
    ));
    assert!(
        rendered.contains("`why` is not in the data of `verdict`")
            && rendered.contains("its schema under `events:` lists: verdict, reason"),
        "{rendered}"
    );
    Run::start(
        "id: open\nevents: { verdict: {} }\nstates:\n  a:\n    on:\n      verdict: { guard: event.data.anything == 1, target: b }\n  b: { type: final }\n",
    );
}

#[test]
fn a_bad_events_line_is_refused_and_not_delivered() {
    let directory = temporary_directory("declared-events", "lines");
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        [
            r#"{"event": "verdict", "data": {"verdict": "maybe"}}"#,
            r#"{"event": "verdcit", "data": {"verdict": "rejected"}}"#,
            r#"{"event": "verdict", "data": {"verdict": "approved", "extra": 1}}"#,
            r#"{"event": "verdict", "data": {"verdict": "approved"}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "run",
            "gate.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(r#""state":"approved""#), "{stdout}");
    for expected in [
        "events line 1: event `verdict` has data that does not conform: at `/verdict`: \"maybe\" is not one of",
        "events line 2: `verdcit` is not an event this protocol takes; did you mean `verdict`? (declared under `events:`: verdict); line skipped",
        "events line 3: event `verdict` has data that does not conform: at `/`: Additional properties are not allowed ('extra' was unexpected)",
    ] {
        assert!(stderr.contains(expected), "{expected}\n{stderr}");
    }
}

#[test]
fn serve_refuses_a_bad_event_for_its_instance_only() {
    let directory = temporary_directory("declared-events", "serve");
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    let mut host = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["serve", "gate.yaml", "--store", "memory"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(
            b"{\"instance\": \"one\", \"event\": \"verdict\", \"data\": {\"verdict\": 3}}\n\
              {\"instance\": \"one\", \"event\": \"verdict\", \"data\": {\"verdict\": \"rejected\"}}\n",
        )
        .unwrap();
    let output = host.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "input line 1: event `verdict` has data that does not conform: at `/verdict`"
        ),
        "{stderr}"
    );
    let finished: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("finished"))
        .collect();
    assert_eq!(finished.len(), 1, "{stdout}");
    assert!(finished[0].contains(r#""state":"rejected""#), "{stdout}");
}

#[test]
fn a_scenario_send_that_is_refused_fails_its_step() {
    let directory = temporary_directory("declared-events", "scenario");
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    let scenario = directory.join("gate.scenario.yaml");
    std::fs::write(
        &scenario,
        "protocol: gate.yaml\nscenarios:\n  - name: bad data\n    steps:\n      - send: verdict\n        data: { verdict: maybe }\n",
    )
    .unwrap();
    let report = protocol_run::tooling::scenario::runner::run_file(&scenario);
    let text = format!("{report:?}");
    assert!(
        text.contains(
            "the event is refused: event `verdict` has data that does not conform: at `/verdict`"
        ),
        "{text}"
    );
}

#[test]
fn a_child_event_the_parent_does_not_declare_is_an_error_communication() {
    let (code, stdout, stderr) = run_parent_and_child(
        "child",
        r#"
id: child
states:
  c:
    entry:
      - { send: progress, to: parent, data: { percent: "high" } }
      - { send: progress, to: parent, data: { percent: 50 } }
    on: { never: d }
  d: { type: final }
"#,
        r#"
id: parent
events:
  progress: { type: object, properties: { percent: { type: integer } }, required: [percent] }
states:
  a:
    invoke: [{ id: worker, protocol: child.yaml }]
    on:
      error.communication:
        actions: [{ log: "refused ${event.data.event} from ${event.data.from}: ${event.data.message}" }]
      progress: { target: b, actions: [{ log: "progress ${event.data.percent}" }] }
  b: { type: final }
"#,
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let refused = stderr
        .find("refused progress from worker: event `progress` has data that does not conform: at `/percent`")
        .unwrap_or_else(|| panic!("{stderr}"));
    let delivered = stderr
        .find("progress 50")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(refused < delivered, "{stderr}");
}

#[test]
fn the_review_gate_refuses_a_bad_verdict_at_run_time_and_goes_on() {
    let directory = temporary_directory("declared-events", "review-gate");
    std::fs::write(directory.join("review-gate.yaml"), REVIEW_GATE).unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        [
            r#"{"event": "developer.submitted", "data": {"change": "PR-9"}}"#,
            r#"{"event": "critic.verdict", "data": {"verdict": "rejected"}}"#,
            r#"{"event": "critic.verdcit", "data": {"verdict": "rejected", "reason": "x"}}"#,
            r#"{"event": "critic.verdict", "data": {"verdict": "approved", "reason": "ok"}}"#,
            r#"{"event": "auditor.verdict", "data": {"verdict": "approved", "reason": "ok"}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "run",
            "review-gate.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(r#""verdicts":{"critic":"approved","auditor":"approved"}"#),
        "{stdout}"
    );
    assert!(
        stderr.contains("events line 2: event `critic.verdict` has data that does not conform: at `/`: \"reason\" is a required property; line skipped")
            && stderr.contains("events line 3: `critic.verdcit` is not an event this protocol takes; did you mean `critic.verdict`?"),
        "{stderr}"
    );
}

#[test]
fn the_feature_example_admits_declared_data_only() {
    let machine = crate::support::machine(include_str!("../examples/features/events.yaml"));
    let parse = |line: &str| {
        protocol_run::runtime::run::input::parse_event_line(&machine, line).map(|_| ())
    };
    assert_eq!(
        parse(r#"{"event": "approve", "data": {"by": "ana"}}"#),
        Ok(())
    );
    assert_eq!(parse(r#"{"event": "cancel", "data": [1, 2]}"#), Ok(()));
    assert_eq!(
        parse(r#"{"event": "approve", "data": {"by": ""}}"#),
        Err("event `approve` has data that does not conform: at `/by`: \"\" is shorter than 1 character".into())
    );
    assert_eq!(
        parse(r#"{"event": "aprove"}"#),
        Err("`aprove` is not an event this protocol takes; did you mean `approve`? (declared under `events:`: approve, cancel)".into())
    );
}

#[test]
fn a_parent_event_the_child_does_not_declare_is_an_error_communication_in_the_child() {
    let (code, stdout, stderr) = run_parent_and_child(
        "parent",
        r#"
id: child
events:
  work: { type: object, properties: { n: { type: integer } }, required: [n] }
states:
  waiting:
    entry: [{ send: ready, to: parent }]
    on:
      error.communication:
        target: done
        actions: [{ log: "child refused ${event.data.event} from ${event.data.from}: ${event.data.message}" }]
      work: done
  done: { type: final }
"#,
        r#"
id: parent
states:
  a:
    invoke: [{ id: worker, protocol: child.yaml }]
    on:
      ready: { actions: [{ send: work, to: worker, data: { n: "many" } }] }
      done.invoke.worker: b
  b: { type: final }
"#,
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "child refused work from parent: event `work` has data that does not conform: at `/n`"
        ),
        "{stderr}"
    );
}

/// Runs `parent` (which invokes `child.yaml`) with the binary; returns (exit code, stdout,
/// stderr).
fn run_parent_and_child(name: &str, child: &str, parent: &str) -> (i32, String, String) {
    run_parent_and_child_on(name, child, parent, "")
}

/// `run_parent_and_child` with `events` (JSON lines) as the parent's input.
fn run_parent_and_child_on(
    name: &str,
    child: &str,
    parent: &str,
    events: &str,
) -> (i32, String, String) {
    let directory = temporary_directory("declared-events", name);
    std::fs::write(directory.join("child.yaml"), child).unwrap();
    std::fs::write(directory.join("parent.yaml"), parent).unwrap();
    std::fs::write(directory.join("events.jsonl"), events).unwrap();
    run_binary(
        &directory,
        &[
            "run",
            "parent.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    )
}

#[test]
fn autoforward_gives_a_child_only_the_events_it_declares() {
    let (code, stdout, stderr) = run_parent_and_child_on(
        "autoforward",
        r#"
id: child
events: { work: { type: object, required: [n] } }
states:
  waiting:
    on:
      error.communication:
        actions: [{ log: "child refused ${event.data.event}" }]
      work: { target: done, actions: [{ log: "child works on ${event.data.n}" }] }
  done: { type: final }
"#,
        r#"
id: parent
states:
  a:
    invoke: [{ id: worker, protocol: child.yaml, autoforward: true }]
    on:
      chatter: {}
      work: {}
      done.invoke.worker: b
  b: { type: final }
"#,
        "{\"event\": \"chatter\"}\n{\"event\": \"work\"}\n{\"event\": \"work\", \"data\": {\"n\": 3}}\n",
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("child refused chatter"), "{stderr}");
    let refused = stderr
        .find("child refused work")
        .unwrap_or_else(|| panic!("{stderr}"));
    let worked = stderr
        .find("child works on 3")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(refused < worked, "{stderr}");
}
