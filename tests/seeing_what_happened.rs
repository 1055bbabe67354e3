//! What a run shows of what happened: a failed effect's error output (its tail, masked) in its telemetry line, `logs` and `status`; which map item a child's log line comes from; a deadline timer due at the deadline it was given.

use crate::support::{run_binary, temporary_directory, wait_for_status};

/// A program that writes fifteen lines and a secret to its error output, then exits 3; the
/// protocol handles the failure and finishes.
const FAILING: &str = r#"
id: failing
inputs:
  token: { type: string, required: true, secret: true }
states:
  building:
    entry:
      - exec: [sh, -c, 'for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo "noise $n" >&2; done; echo "cannot log in with $1" >&2; exit 3', sh, "${token}"]
        id: build
    on:
      error.exec.build: broken
  broken: { type: final, exit_code: 1 }
"#;

#[test]
fn a_failed_effects_error_output_is_in_its_telemetry_logs_and_status() {
    let directory = temporary_directory("seeing", "stderr");
    std::fs::write(directory.join("failing.yaml"), FAILING).unwrap();
    let token = format!("secret{}token", std::process::id());
    let input = format!("token={token}");
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "failing.yaml",
            "--input",
            &input,
            "--state-dir",
            "state",
            "--run-id",
            "failing-1",
        ],
    );
    assert_eq!(code, 1, "{stderr}");

    // The telemetry line of the outcome: the last ten lines, the secret masked.
    let telemetry =
        std::fs::read_to_string(directory.join("state/runs/failing-1/events.jsonl")).unwrap();
    assert!(!telemetry.contains(&token), "{telemetry}");
    let effect: serde_json::Value = telemetry
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|entry| entry["kind"] == "effect")
        .expect("the effect's outcome line");
    assert_eq!(effect["exit_code"], 3);
    assert_eq!(effect["message"], "exited with code 3");
    let tail = effect["stderr"].as_str().unwrap();
    let expected: Vec<String> = (7..=15)
        .map(|line| format!("noise {line}"))
        .chain(["cannot log in with ***token***".to_string()])
        .collect();
    assert_eq!(tail.lines().collect::<Vec<_>>(), expected, "{effect}");

    // `logs` shows the failure with that tail beneath it.
    let (code, logs, errors) =
        run_binary(&directory, &["logs", "failing-1", "--state-dir", "state"]);
    assert_eq!(code, 0, "{errors}");
    assert!(!logs.contains(&token), "{logs}");
    let failed = logs
        .lines()
        .position(|line| line.contains("WARN  build failed: exited with code 3 #effect_failed"))
        .unwrap_or_else(|| panic!("no failure line in:\n{logs}"));
    let shown: Vec<&str> = logs.lines().skip(failed + 1).take(10).collect();
    let expected_lines: Vec<String> = expected
        .iter()
        .map(|line| format!("    stderr | {line}"))
        .collect();
    assert_eq!(shown, expected_lines, "{logs}");
    // And filters by that tag and level.
    let (_, tagged, _) = run_binary(
        &directory,
        &[
            "logs",
            "failing-1",
            "--tag",
            "effect_failed",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(tagged.lines().count(), 11, "{tagged}");

    // `status` shows it under the step the failure took.
    let (code, status, errors) =
        run_binary(&directory, &["status", "failing-1", "--state-dir", "state"]);
    assert_eq!(code, 0, "{errors}");
    assert!(!status.contains(&token), "{status}");
    let step = status
        .lines()
        .position(|line| line.contains("error.exec.build: building → broken"))
        .unwrap_or_else(|| panic!("no failed step in:\n{status}"));
    let lines: Vec<&str> = status.lines().skip(step + 1).take(11).collect();
    assert_eq!(lines[0].trim(), "exited with code 3", "{status}");
    assert_eq!(
        lines[10].trim(),
        "stderr | cannot log in with ***token***",
        "{status}"
    );
    let (_, json, _) = run_binary(
        &directory,
        &["status", "failing-1", "--json", "--state-dir", "state"],
    );
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let failure = json["last_events"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|entry| entry["failure"].as_object())
        .expect("a failure among the last events");
    assert_eq!(failure["exit_code"], 3);
    assert_eq!(failure["stderr"].as_str().unwrap().lines().count(), 10);
}

/// Each item's child logs the same words; only where they come from tells the lines apart.
const REVIEWER: &str = r#"
id: reviewer
inputs:
  path: { type: string, required: true }
states:
  reviewing:
    entry:
      - log: style attempt 1/2
    always: done
  done: { type: final }
"#;

const GATE: &str = r#"
id: gate
context: { file: null }
states:
  fanning:
    entry:
      - map: [a.rs, b.rs, c.rs]
        id: review
        item: file
        invoke: { protocol: reviewer.yaml, inputs: { path: "${file}" } }
    on:
      done.map.review: done
  done: { type: final }
"#;

#[test]
fn a_map_items_log_lines_name_the_item() {
    let directory = temporary_directory("seeing", "map_items");
    std::fs::write(directory.join("reviewer.yaml"), REVIEWER).unwrap();
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    let expected = ["review[0]", "review[1]", "review[2]"];

    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "gate.yaml",
            "--virtual-time",
            "--state-dir",
            "state",
            "--run-id",
            "gate-1",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let mut human: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.split_once("INFO  "))
        .filter_map(|(_, rest)| rest.strip_suffix(": style attempt 1/2"))
        .collect();
    human.sort();
    assert_eq!(human, expected, "{stderr}");

    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "gate.yaml",
            "--virtual-time",
            "--log-format",
            "json",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let mut json: Vec<String> = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["message"] == "style attempt 1/2")
        .map(|line| line["from"].as_str().unwrap_or("(none)").to_string())
        .collect();
    json.sort();
    assert_eq!(json, expected, "{stderr}");

    // The run's telemetry keeps it, and `logs` shows it as the run did.
    let (_, logs, _) = run_binary(&directory, &["logs", "gate-1", "--state-dir", "state"]);
    let mut shown: Vec<&str> = logs
        .lines()
        .filter_map(|line| line.split_once("INFO  "))
        .filter_map(|(_, rest)| rest.strip_suffix(": style attempt 1/2"))
        .collect();
    shown.sort();
    assert_eq!(shown, expected, "{logs}");
}

/// A deadline an hour away, kept in the context: `status` shows both.
const DEADLINE: &str = r#"
id: deadline
context: { due: null }
states:
  waiting:
    entry:
      - assign: { due: "now() + duration('1h')" }
    after:
      - until: due
        target: late
  late: { type: final }
"#;

/// The docs promise a deadline fires at its instant, to the millisecond, never before: the
/// timer `status` shows is due at that instant, not a millisecond earlier. On a real clock, so
/// that the run's start, the deadline's evaluation and the commit fall between milliseconds;
/// several runs, since which side of a millisecond each falls on is chance.
#[test]
fn a_deadline_timer_is_due_at_its_deadline() {
    let directory = temporary_directory("seeing", "deadline");
    std::fs::write(directory.join("deadline.yaml"), DEADLINE).unwrap();
    for attempt in 0..8 {
        let state = directory.join(format!("state-{attempt}"));
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["deadline.yaml", "--state-dir", state.to_str().unwrap()])
            .current_dir(&directory)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for_status(&directory, &state, "the deadline's timer", |status| {
            status["state"]["timers"]
                .as_array()
                .is_some_and(|timers| !timers.is_empty())
        });
        let (_, text, _) = run_binary(
            &directory,
            &["status", "--json", "--state-dir", state.to_str().unwrap()],
        );
        run.kill().unwrap();
        run.wait().unwrap();
        let status: serde_json::Value = serde_json::from_str(&text).unwrap();
        let due = &status["state"]["context"]["due"];
        let timer = &status["state"]["timers"][0];
        assert_eq!(timer["deadline"], true, "{status}");
        assert_eq!(&timer["due"], due, "run {attempt}: {status}");
    }
}
