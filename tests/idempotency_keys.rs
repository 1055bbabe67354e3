//! Effects' idempotency keys (`PROTOCOL_RUN_IDEMPOTENCY_KEY`, `RUN:INVOCATION:ATTEMPT`): a new attempt gets a new key, an attempt a resumed run starts again keeps its key, and a `serve` instance's effects carry its run's id.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support;

/// Writes its key, then fails the first time (so the retry runs a second attempt).
const RETRIED: &str = r#"
id: retried
states:
  calling:
    entry:
      - exec: [sh, -c, 'echo "$PROTOCOL_RUN_IDEMPOTENCY_KEY" >> keys.txt; [ "$(wc -l < keys.txt)" -ge 2 ]']
        id: op
        retry: [{ error_equals: [error.exec], max_attempts: 3, interval: 1s }]
    on:
      done.exec.op: ok
  ok: { type: final }
"#;

/// Writes its key; the first time it then waits to be killed with its engine.
const INTERRUPTED: &str = r#"
id: interrupted
states:
  calling:
    entry:
      - exec: [sh, -c, 'echo "$PROTOCOL_RUN_IDEMPOTENCY_KEY" >> keys.txt; if [ ! -e marker ]; then touch marker; sleep 1000; fi']
        id: op
        on_interrupt: retry
    on:
      done.exec.op: ok
  ok: { type: final }
"#;

fn keys(directory: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(directory.join("keys.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn each_attempt_gets_its_own_key() {
    let directory = support::temporary_directory("idempotency", "attempts");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[],
        &["run", "retried.yaml", "--run-id", "r1", "--virtual-time"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(keys(&directory), ["r1:0:1", "r1:0:2"]);
}

#[test]
fn an_attempt_a_resumed_run_starts_again_keeps_its_key() {
    let directory = support::temporary_directory("idempotency", "resumed");
    std::fs::write(directory.join("interrupted.yaml"), INTERRUPTED).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "run",
            "interrupted.yaml",
            "--run-id",
            "r2",
            "--state-dir",
            "state",
        ])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::eventually("the first attempt writes its key", || {
        directory.join("marker").exists().then_some(())
    });
    // Killed mid-attempt: the attempt is started again on resume, as the same attempt.
    run.kill().unwrap();
    run.wait().unwrap();
    let (code, _, stderr) = support::run_binary_in(&directory, &[], &["resume", "r2"]);
    assert_eq!(code, 0, "{stderr}");
    let keys = keys(&directory);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], "r2:0:1");
    assert_eq!(keys[1], keys[0], "the attempt started again keeps its key");
}

#[test]
fn a_served_instances_effects_carry_its_runs_id() {
    let directory = support::temporary_directory("idempotency", "served");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["serve", "retried.yaml", "--state-dir", "state"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(serve.stdin.take().unwrap(), "{{\"instance\": \"i1\"}}").unwrap();
    let status = serve.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let (_, stdout, _) = support::run_binary_in(&directory, &[], &["runs", "--json"]);
    let run: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let id = run["run"].as_str().unwrap();
    assert!(id.ends_with("i1"), "{id}");
    assert_eq!(keys(&directory), [format!("{id}:0:1"), format!("{id}:0:2")]);
}
