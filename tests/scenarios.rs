//! Every scenario in the repository passes, and `protocol-run test` reports failures usefully.

use std::path::{Path, PathBuf};
use std::process::Command;

use protocol_run::tooling::scenario::runner::{find_scenario_files, run_file};

/// The scenario files the repository holds; a file that is not found (moved, renamed, or
/// skipped by the walk) would otherwise pass by not running.
const EXPECTED_SCENARIO_FILES: [&str; 12] = [
    "examples/bisect/bisect.scenario.yaml",
    "examples/features/scenarios.scenario.yaml",
    "examples/features/time.scenario.yaml",
    "examples/review-gate/review-gate.scenario.yaml",
    "protocols/agent-recovery.scenario.yaml",
    "protocols/escalation.scenario.yaml",
    "protocols/ittw.scenario.yaml",
    "protocols/resilience-environment-check.scenario.yaml",
    "protocols/resilience-state-validation.scenario.yaml",
    "protocols/resilience-tool-failure.scenario.yaml",
    "protocols/retry-backoff.scenario.yaml",
    "protocols/timeout-wrapper.scenario.yaml",
];

/// The names a scenario file declares, read from its text (`  - name: …` at the top list's
/// indentation), so the runner's results can be checked against them rather than trusted.
fn declared_scenario_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("  - name: "))
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn every_scenario_in_the_repository_passes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = find_scenario_files(&[root.join("protocols"), root.join("examples")]).unwrap();
    let found: Vec<String> = files
        .iter()
        .map(|file| {
            file.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(found, EXPECTED_SCENARIO_FILES);
    // As `protocol-run test` runs them: each scenario in a scratch directory of its own.
    let (code, stdout, stderr) =
        crate::support::run_binary(&root, &["test", "protocols", "examples"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let mut total = 0;
    for (file, relative) in files.iter().zip(&found) {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.starts_with("# yaml-language-server: $schema=")
                && text
                    .lines()
                    .next()
                    .unwrap()
                    .ends_with("schemas/scenario.schema.json"),
            "{relative} lacks the scenario schema modeline"
        );
        let declared = declared_scenario_names(&text);
        assert!(!declared.is_empty(), "{relative} declares no scenario");
        let prefix = format!("ok     {relative}: ");
        let ran: Vec<&str> = stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&prefix))
            .collect();
        assert_eq!(ran, declared, "{relative}: scenarios run");
        total += declared.len();
    }
    assert_eq!(
        stdout.lines().last().unwrap(),
        format!("{total} passed, 0 failed")
    );
}

#[test]
fn the_test_command_reports_expected_seen_and_trace_and_fails() {
    let directory =
        std::env::temp_dir().join(format!("protocol-run-scenarios-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let protocol = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/retry-backoff.yaml");
    let scenario = format!(
        "protocol: {}\nscenarios:\n  - name: passes\n    steps:\n      - send: ok\n      - expect: {{ finished: {{ exit_code: 0 }} }}\n  - name: wrong\n    steps:\n      - send: fail\n      - expect: {{ configuration: [escalated], context: {{ attempt: 5 }} }}\n",
        protocol.display()
    );
    let path = directory.join("x.scenario.yaml");
    std::fs::write(&path, scenario).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("test")
        .arg(&directory)
        .arg("--coverage")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ok     "), "{stdout}");
    assert!(
        stdout.contains(
            "step 2 (expect): configuration: expected {\"escalated\"}, seen {\"calling\"}"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("context `attempt`: expected 5, seen 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("trace:") && stdout.contains("fail → [\"calling\"]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("never taken: transition at /states/calling/after/0"),
        "{stdout}"
    );
    assert!(
        stdout.lines().last().unwrap() == "1 passed, 1 failed",
        "{stdout}"
    );
    // The failed scenario's scratch directory was kept and named.
    let kept = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("kept its scratch directory: "))
        .unwrap_or_else(|| panic!("no kept directory in {stdout}"));
    std::fs::remove_dir_all(kept).unwrap();
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A scenario's clock starts at a fixed instant (or the one it names), so timestamps and files
/// named after them can be asserted; `output` is matched key by key; states passed through in
/// the start macrostep and compound ancestors count as reached.
#[test]
fn scenarios_have_a_fixed_clock_partial_outputs_and_full_coverage() {
    let directory = std::env::temp_dir().join(format!(
        "protocol-run-scenario-clock-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::write(
        directory.join("stamp.yaml"),
        r#"
id: stamp
context: { at: "" }
states:
  outer:
    states:
      first: { always: second }
      second:
        on:
          go:
            target: done
            actions: [{ assign: { at: now() } }]
  done: { type: final, output: { at: "${at}", kind: stamp, detail: { a: 1, b: 2 } } }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("stamp.scenario.yaml"),
        r#"
protocol: stamp.yaml
scenarios:
  - name: default clock
    steps:
      - after: 90s
      - send: go
      - expect: { finished: { output: { at: "2026-01-01T00:01:30.000Z", detail: { b: 2 } } } }
  - name: own clock
    clock: "2030-06-01T12:00:00Z"
    steps:
      - send: go
      - expect: { finished: { output: { at: "2030-06-01T12:00:00.000Z" } } }
  - name: bad clock
    clock: "tomorrow"
    steps: []
"#,
    )
    .unwrap();
    let report = run_file(&directory.join("stamp.scenario.yaml"));
    assert!(report.error.is_none(), "{:?}", report.error);
    assert!(
        report.results[0].failures.is_empty(),
        "{:?}",
        report.results[0]
    );
    assert!(
        report.results[1].failures.is_empty(),
        "{:?}",
        report.results[1]
    );
    assert_eq!(
        report.results[2].failures,
        ["clock: `tomorrow` is not a UTC time such as `2026-01-01T00:00:00.000Z`"]
    );
    let coverage = report.coverage.unwrap();
    assert!(
        coverage.missed_states().is_empty(),
        "{:?}",
        coverage.missed_states()
    );
}

/// `tags: []` and `directives: []` assert that nothing was logged or emitted since the
/// previous expectation.
#[test]
fn empty_tag_and_directive_lists_assert_none() {
    let directory =
        std::env::temp_dir().join(format!("protocol-run-scenario-none-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::write(
        directory.join("noisy.yaml"),
        r#"
id: noisy
states:
  a:
    entry:
      - log: "hello"
        tags: [noisy]
      - emit: hello
    on: { go: done }
  done: { type: final }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("noisy.scenario.yaml"),
        r#"
protocol: noisy.yaml
scenarios:
  - name: something was said
    steps:
      - expect: { tags: [], directives: [] }
  - name: nothing more after it
    steps:
      - expect: { tags: [noisy], directives: [{ directive: hello }] }
      - send: go
      - expect: { tags: [], directives: [], finished: { exit_code: 0 } }
"#,
    )
    .unwrap();
    let report = run_file(&directory.join("noisy.scenario.yaml"));
    assert_eq!(
        report.results[0].failures,
        [r#"step 1 (expect): tags: expected none, seen ["noisy"]
directives: expected none, seen [{"directive":"hello"}]"#]
    );
    assert!(
        report.results[1].failures.is_empty(),
        "{:?}",
        report.results[1]
    );
}
