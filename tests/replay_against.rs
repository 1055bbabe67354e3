//! `protocol-run replay [RUN_ID…] --against FILE`: recorded journals re-run against a new version of their protocol, with no effect run, and each run's first divergence reported (step, event, both sides, the place in FILE), through the real binary on SQLite and on PostgreSQL.

use crate::support;

/// Builds, then waits for an approval: an effect's outcome and an input event, both journaled.
const DEPLOY: &str = r#"
id: deploy
permissions: { exec: [echo] }
states:
  building:
    entry:
      - exec: [echo, ok]
        id: build
    on:
      done.exec.build: waiting
      error.exec.build: failed
  waiting:
    on:
      approve: done
      reject: failed
  done: { type: final, exit_code: 0 }
  failed: { type: final, exit_code: 1 }
"#;

/// The same behaviour written otherwise: states and `on:` entries reordered, transitions in
/// their list form (so at other pointers), one with a log action.
const REORDERED: &str = r#"
id: deploy
permissions: { exec: [echo] }
states:
  building:
    on:
      error.exec.build: failed
      done.exec.build: [{ target: waiting }]
    entry:
      - exec: [echo, ok]
        id: build
  waiting:
    on:
      reject: failed
      approve: [{ target: done, actions: [{ log: "approved" }] }]
  failed: { type: final, exit_code: 1 }
  done: { type: final, exit_code: 0 }
"#;

/// A directory with `deploy.yaml` and the versions above, and two runs of it recorded in the
/// store `environment` chooses: `finished` (built, approved: 3 steps) and `waiting` (built,
/// stopped waiting for approval: 2 steps).
fn recorded_runs(name: &str, environment: &[(&str, &str)]) -> crate::support::TemporaryDirectory {
    let directory = support::temporary_directory("replay_against", name);
    for (file, text) in [
        ("deploy.yaml", DEPLOY.to_string()),
        ("reordered.yaml", REORDERED.to_string()),
        // `approve` now fails the deployment.
        (
            "approve-fails.yaml",
            DEPLOY.replace("approve: done", "approve: failed"),
        ),
        // `waiting` renamed `pending`: the build's outcome now leads elsewhere.
        ("renamed.yaml", DEPLOY.replace("waiting", "pending")),
    ] {
        std::fs::write(directory.join(file), text).unwrap();
    }
    std::fs::write(
        directory.join("approve.jsonl"),
        "{\"await\": \"waiting\"}\n{\"event\": \"approve\"}\n",
    )
    .unwrap();
    std::fs::write(directory.join("built.jsonl"), "{\"await\": \"waiting\"}\n").unwrap();
    for (run, events, code) in [
        ("finished", "approve.jsonl", 0),
        ("waiting", "built.jsonl", 75),
    ] {
        let (exit, stdout, stderr) = support::run_binary_in(
            &directory,
            environment,
            &["run", "deploy.yaml", "--run-id", run, "--events", events],
        );
        assert_eq!(exit, code, "{run}: {stdout}{stderr}");
    }
    directory
}

fn replay(
    directory: &std::path::Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> (i32, String, String) {
    let mut line = vec!["replay"];
    line.extend_from_slice(arguments);
    support::run_binary_in(directory, environment, &line)
}

/// `replay` with `arguments`, which must exit with `code`: its stdout.
fn replay_exits(
    directory: &std::path::Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
    code: i32,
) -> String {
    let (exit, stdout, stderr) = replay(directory, environment, arguments);
    assert_eq!(exit, code, "{arguments:?}: {stdout}{stderr}");
    stdout
}

/// Asserts that `output` says `text`, showing it whole when it does not.
fn says(output: &str, text: impl AsRef<str>) {
    let text = text.as_ref();
    assert!(output.contains(text), "expected {text:?} in:\n{output}");
}

fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn against_the_same_file_every_run_replays_cleanly(name: &str, environment: &[(&str, &str)]) {
    let directory = recorded_runs(name, environment);
    let stdout = replay_exits(&directory, environment, &["--against", "deploy.yaml"], 0);
    says(&stdout, "run finished: replays cleanly (3 steps)");
    says(&stdout, "run waiting: replays cleanly (2 steps)");
    says(
        &stdout,
        "2 runs: 2 replay cleanly, 0 diverge, 0 not replayable",
    );
    // No effect ran again: the replay wrote nothing to the store's journal.
    let (_, status, _) =
        support::run_binary_in(&directory, environment, &["status", "finished", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["state"]["step"], 2, "{status}");
    let _ = std::fs::remove_dir_all(&directory);
}

fn a_reordered_version_that_does_the_same_replays_cleanly(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = recorded_runs(name, environment);
    // The runs were recorded for deploy.yaml: --protocol names them.
    let stdout = replay_exits(
        &directory,
        environment,
        &[
            "--against",
            "reordered.yaml",
            "--protocol",
            "deploy.yaml",
            "--format",
            "json",
        ],
        0,
    );
    let results = json_lines(&stdout);
    assert_eq!(
        results,
        vec![
            serde_json::json!({"run": "finished", "result": "clean", "steps": 3}),
            serde_json::json!({"run": "waiting", "result": "clean", "steps": 2}),
        ]
    );
    let _ = std::fs::remove_dir_all(&directory);
}

fn an_event_that_now_goes_elsewhere_diverges_at_its_step(name: &str, environment: &[(&str, &str)]) {
    let directory = recorded_runs(name, environment);
    let arguments = [
        "--against",
        "approve-fails.yaml",
        "--protocol",
        "deploy.yaml",
    ];
    let stdout = replay_exits(&directory, environment, &arguments, 1);
    says(
        &stdout,
        "run finished: diverges at step 2 (event `approve`): the journal took \
             `waiting → done (approve)`; the new version takes `waiting → failed (approve)`",
    );
    // Located at the transition the new version takes, with its line.
    says(&stdout, "--> approve-fails.yaml:14:7");
    says(&stdout, "14 |       approve: failed");
    says(
        &stdout,
        "the new version takes `waiting → failed (approve)` here",
    );
    // The waiting run never took `approve`: nothing of it diverges.
    says(&stdout, "run waiting: replays cleanly (2 steps)");
    let mut json_arguments = arguments.to_vec();
    json_arguments.extend(["--format", "json"]);
    let (code, stdout, _) = replay(&directory, environment, &json_arguments);
    assert_eq!(code, 1);
    let results = json_lines(&stdout);
    let divergence = &results[0]["divergence"];
    assert_eq!(results[0]["result"], "diverged", "{stdout}");
    assert_eq!(divergence["step"], 2);
    assert_eq!(divergence["event"], "approve");
    assert_eq!(divergence["difference"], "transitions");
    assert_eq!(divergence["location"], "approve-fails.yaml:14:7");
    assert_eq!(
        divergence["recorded"]["transitions"],
        serde_json::json!([{"name": "waiting → done (approve)", "pointer": "/states/waiting/on/approve"}])
    );
    assert_eq!(divergence["recorded"]["started"], serde_json::json!([]));
    assert_eq!(
        divergence["replayed"]["after"],
        serde_json::json!({"states": [], "deferred": [], "final_state": "failed", "exit_code": 1})
    );
    assert_eq!(results[1]["result"], "clean");
    let _ = std::fs::remove_dir_all(&directory);
}

fn a_finished_run_and_a_waiting_one_both_replay(name: &str, environment: &[(&str, &str)]) {
    let directory = recorded_runs(name, environment);
    let stdout = replay_exits(
        &directory,
        environment,
        &["waiting", "finished", "--against", "deploy.yaml"],
        0,
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "run waiting: replays cleanly (2 steps)",
            "run finished: replays cleanly (3 steps)"
        ],
        "{stdout}"
    );
    // The build's outcome leads to a state of another name: both diverge at that step, the
    // effect's outcome being a journaled event like any other.
    let stdout = replay_exits(
        &directory,
        environment,
        &["waiting", "finished", "--against", "renamed.yaml"],
        1,
    );
    for run in ["waiting", "finished"] {
        says(
            &stdout,
            format!(
                "run {run}: diverges at step 1 (event `done.exec.build`): the journal took \
                 `building → waiting (done.exec.build)`; the new version takes \
                 `building → pending (done.exec.build)`"
            ),
        );
    }
    says(&stdout, "--> renamed.yaml:10:7");
    // Another protocol id: a resume would refuse every run, so each diverges at its start.
    std::fs::write(
        directory.join("other-id.yaml"),
        DEPLOY.replace("id: deploy", "id: deployer"),
    )
    .unwrap();
    let stdout = replay_exits(
        &directory,
        environment,
        &["waiting", "--against", "other-id.yaml", "--format", "json"],
        1,
    );
    let divergence = &json_lines(&stdout)[0]["divergence"];
    assert_eq!(divergence["step"], 0, "{stdout}");
    assert_eq!(divergence["difference"], "protocol");
    assert_eq!(divergence["location"], "other-id.yaml:2:1");
    // An unknown run is named, and nothing is replayed.
    let (code, stdout, stderr) = replay(
        &directory,
        environment,
        &["finished", "nobody", "--against", "deploy.yaml"],
    );
    assert_eq!(code, 66, "{stdout}{stderr}");
    says(&stderr, "no run `nobody`");
    assert_eq!(stdout, "");
    let _ = std::fs::remove_dir_all(&directory);
}

fn a_bad_file_is_reported_where_it_is_wrong(name: &str, environment: &[(&str, &str)]) {
    let directory = recorded_runs(name, environment);
    std::fs::write(
        directory.join("broken.yaml"),
        DEPLOY.replace("approve: done", "approve: nowhere"),
    )
    .unwrap();
    let (code, stdout, stderr) = replay(
        &directory,
        environment,
        &["--against", "broken.yaml", "--protocol", "deploy.yaml"],
    );
    assert_eq!(code, 65, "{stdout}{stderr}");
    assert_eq!(stdout, "");
    support::assert_diagnostic(&stderr, &["nowhere", "--> broken.yaml:14:16"]);
    let (code, _, stderr) = replay(
        &directory,
        environment,
        &["--against", "missing.yaml", "--protocol", "deploy.yaml"],
    );
    assert_eq!(code, 66, "{stderr}");
    says(&stderr, "cannot read missing.yaml");
    let _ = std::fs::remove_dir_all(&directory);
}

/// A run with a secret input, which the store never keeps.
const SECRETIVE: &str = r#"
id: secretive
inputs:
  token: { type: string, secret: true }
permissions: { exec: [] }
states:
  idle:
    on:
      go: done
  done: { type: final }
"#;

fn a_run_with_a_secret_input_needs_it_again(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("replay_against", name);
    std::fs::write(directory.join("secretive.yaml"), SECRETIVE).unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        environment,
        &[
            "run",
            "secretive.yaml",
            "--run-id",
            "hidden",
            "--input",
            "token=sesame-42",
            "--events",
            "go.jsonl",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, _) = replay(&directory, environment, &["--against", "secretive.yaml"]);
    assert_eq!(code, 64, "{stdout}");
    says(
        &stdout,
        "run hidden: not replayable: its secret input `token` is not stored with it: pass \
             --input token=VALUE",
    );
    let stdout = replay_exits(
        &directory,
        environment,
        &["--against", "secretive.yaml", "--input", "token=sesame-42"],
        0,
    );
    says(&stdout, "run hidden: replays cleanly (2 steps)");
    // Only a secret input is taken: the others are the run's recorded ones.
    let (code, _, stderr) = replay(
        &directory,
        environment,
        &["--against", "secretive.yaml", "--input", "other=1"],
    );
    assert_eq!(code, 64, "{stderr}");
    says(
        &stderr,
        "--input `other`: secretive.yaml declares the secret inputs token",
    );
    let _ = std::fs::remove_dir_all(&directory);
}

fn a_version_that_starts_another_effect_diverges_where_it_starts(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = recorded_runs(name, environment);
    // The build's action has another id: the journal's outcome events would never come, and
    // the step that starts it already differs (as Temporal's replayer compares commands).
    std::fs::write(
        directory.join("compile.yaml"),
        DEPLOY
            .replace("id: build", "id: compile")
            .replace("exec.build", "exec.compile"),
    )
    .unwrap();
    let stdout = replay_exits(
        &directory,
        environment,
        &["finished", "--against", "compile.yaml"],
        1,
    );
    says(
        &stdout,
        "run finished: diverges at step 0 (the start): the journal's step started effect \
             `build`; the new version's starts effect `compile`",
    );
    says(&stdout, "--> compile.yaml:5:3");
    says(
        &stdout,
        "the new version starts effect `compile` in this state",
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// An approval that comes early waits in the inbox until the timer makes the gate ready (or
/// is discarded when the gate is cancelled first).
const GATE: &str = r#"
id: gate
permissions: { exec: [] }
states:
  preparing:
    defer: [approve]
    after:
      - delay: 1s
        target: ready
    on:
      cancel: cancelled
  cancelled: { type: final, exit_code: 1 }
  ready:
    on:
      approve: approved
  approved: { type: final }
"#;

fn deferring_otherwise_diverges_where_the_event_arrived(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("replay_against", name);
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    std::fs::write(
        directory.join("undeferred.yaml"),
        GATE.replace("    defer: [approve]\n", ""),
    )
    .unwrap();
    std::fs::write(directory.join("early.jsonl"), "{\"event\": \"approve\"}\n").unwrap();
    // Virtual time holds the timer until the events are read: `approve` comes first, is
    // deferred (step 1), and is taken once the timer fired (steps 2 and 3).
    let (code, stdout, stderr) = support::run_binary_in(
        &directory,
        environment,
        &[
            "run",
            "gate.yaml",
            "--run-id",
            "early",
            "--virtual-time",
            "--events",
            "early.jsonl",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    says(&stdout, "\"waited\":true");
    // Cancelled while `approve` waits: the run's end discards it (3 steps).
    std::fs::write(
        directory.join("cancel.jsonl"),
        "{\"event\": \"approve\"}\n{\"event\": \"cancel\"}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = support::run_binary_in(
        &directory,
        environment,
        &[
            "run",
            "gate.yaml",
            "--run-id",
            "cancelled",
            "--events",
            "cancel.jsonl",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let stdout = replay_exits(&directory, environment, &["--against", "gate.yaml"], 0);
    says(&stdout, "run early: replays cleanly (4 steps)");
    says(&stdout, "run cancelled: replays cleanly (3 steps)");
    let stdout = replay_exits(
        &directory,
        environment,
        &["--against", "undeferred.yaml", "--protocol", "gate.yaml"],
        1,
    );
    says(
        &stdout,
        "run early: diverges at step 1 (event `approve`): after it the journal's run had \
             `approve` waiting in its inbox (deferred by a state); the new version's has nothing",
    );
    says(&stdout, "--> undeferred.yaml:5:3");
    says(
        &stdout,
        "the new version's `preparing` does not defer `approve`",
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// Each check, once per store: `sqlite::NAME` and `postgres::NAME` (skipped, said, without a
/// PostgreSQL server).
macro_rules! on_both_stores {
    ($($check:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $check() {
                    super::$check(concat!(stringify!($check), "-sqlite"), &[]);
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $check() {
                    let test = concat!("replay_against::postgres::", stringify!($check));
                    let Some(database) = crate::support::postgres::database(test) else {
                        return;
                    };
                    let environment = [
                        ("PROTOCOL_RUN_STORE", "postgres"),
                        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
                    ];
                    super::$check(concat!(stringify!($check), "-postgres"), &environment);
                }
            )*
        }
    };
}

on_both_stores!(
    against_the_same_file_every_run_replays_cleanly,
    a_reordered_version_that_does_the_same_replays_cleanly,
    an_event_that_now_goes_elsewhere_diverges_at_its_step,
    a_finished_run_and_a_waiting_one_both_replay,
    a_bad_file_is_reported_where_it_is_wrong,
    a_run_with_a_secret_input_needs_it_again,
    deferring_otherwise_diverges_where_the_event_arrived,
    a_version_that_starts_another_effect_diverges_where_it_starts,
);
