//! One convention across the commands that read runs: positional RUN_ID (the latest when
//! omitted), `--json`, help on every flag, chosen run ids, filters, stats across runs.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// Runs `protocols/NAME` from the repository under virtual time, recorded in `directory/state`.
fn run_protocol(directory: &Path, name: &str, extra: &[&str]) -> (i32, String, String) {
    let protocol = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocols")
        .join(name);
    let mut arguments = vec![
        protocol.to_str().unwrap(),
        "--virtual-time",
        "--state-dir",
        "state",
    ];
    arguments.extend_from_slice(extra);
    run_binary(directory, &arguments)
}

fn with_state<'a>(arguments: &[&'a str]) -> Vec<&'a str> {
    let mut arguments = arguments.to_vec();
    arguments.extend_from_slice(&["--state-dir", "state"]);
    arguments
}

#[test]
fn every_argument_of_every_command_has_help() {
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for argument in command.get_arguments() {
            let help = argument
                .get_help()
                .or(argument.get_long_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            if help.trim().is_empty() {
                missing.push(format!("{path} {}", argument.get_id()));
            }
        }
        for subcommand in command.get_subcommands() {
            let path = format!("{path} {}", subcommand.get_name());
            if subcommand.get_about().is_none() {
                missing.push(format!("{path} (the command)"));
            }
            walk(subcommand, &path, missing);
        }
    }
    let mut missing = Vec::new();
    walk(
        &protocol_run::frontends::cli::command(),
        "protocol-run",
        &mut missing,
    );
    assert!(missing.is_empty(), "without help: {missing:#?}");
}

#[test]
fn run_ids_are_positional_or_the_latest_for_every_command() {
    let directory = temporary_directory("conventions", "positional");
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "first"]);
    assert_eq!(code, 3, "{stderr}");
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "second"]);
    assert_eq!(code, 3, "{stderr}");
    // No id: the latest run, named on stderr.
    for command in ["status", "logs", "stats"] {
        let (code, stdout, stderr) = run_binary(&directory, &with_state(&[command]));
        assert_eq!(code, 0, "{command}: {stderr}");
        assert!(
            stderr.starts_with("run second (the latest;"),
            "{command}: {stderr}"
        );
        assert!(!stdout.is_empty(), "{command}");
    }
    // JSON output goes without the note, for scripts that read both streams together.
    for command in ["status", "logs", "stats"] {
        let (code, stdout, stderr) = run_binary(&directory, &with_state(&[command, "--json"]));
        assert_eq!(code, 0, "{command}: {stderr}");
        assert!(stderr.is_empty(), "{command}: {stderr}");
        assert!(stdout.starts_with('{'), "{command}: {stdout}");
    }
    // A positional id, and the old `--run ID` spelling, read that run and say nothing more.
    for arguments in [["status", "first"], ["logs", "first"], ["stats", "first"]] {
        let (code, stdout, stderr) = run_binary(&directory, &with_state(&arguments));
        assert_eq!(code, 0, "{arguments:?}: {stderr}");
        assert!(stderr.is_empty(), "{arguments:?}: {stderr}");
        if arguments[0] != "logs" {
            assert!(stdout.contains("first"), "{arguments:?}: {stdout}");
        }
    }
    let (code, by_option, _) = run_binary(&directory, &with_state(&["logs", "--run", "first"]));
    let (_, by_position, _) = run_binary(&directory, &with_state(&["logs", "first"]));
    assert_eq!(code, 0);
    assert_eq!(by_option, by_position);
    let (code, _, stderr) = run_binary(
        &directory,
        &with_state(&["logs", "first", "--run", "second"]),
    );
    assert_eq!(code, 64, "both spellings at once: {stderr}");
    for command in ["status", "logs", "stats"] {
        let (code, _, stderr) = run_binary(&directory, &with_state(&[command, "third"]));
        assert_eq!(code, 66, "{command}: {stderr}");
        assert!(
            stderr.starts_with("error: no run `third` in state"),
            "{command}: {stderr}"
        );
    }
    // `resume` with no id takes the latest unfinished run: here there is none.
    let (code, _, stderr) = run_binary(&directory, &with_state(&["resume"]));
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("no unfinished run in state"), "{stderr}");
    let (code, _, stderr) = run_binary(&directory, &with_state(&["resume", "first"]));
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("run `first` has finished"), "{stderr}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn run_ids_chosen_with_run_id_are_checked() {
    let directory = temporary_directory("conventions", "run-id");
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "T-42"]);
    assert_eq!(code, 3, "{stderr}");
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "T-42"]);
    assert_eq!(code, 64, "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: --run-id `T-42` is already used by a finished run of {}; choose another id \
             (`protocol-run status T-42` shows that run)",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("protocols/retry-backoff.yaml")
                .canonicalize()
                .unwrap()
                .display()
        )
    );
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "../x"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("--run-id `../x` has `.`; use letters, digits, `-`, `_` and `.`"),
        "{stderr}"
    );
    let long = "x".repeat(65);
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", &long]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("is 65 characters long; the limit is 64 (MAX_RUN_ID_LENGTH)"),
        "{stderr}"
    );
    // Nothing was recorded for the refused ids.
    let (_, stdout, _) = run_binary(&directory, &with_state(&["runs"]));
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn runs_filter_by_protocol_status_and_start() {
    let directory = temporary_directory("conventions", "filters");
    let (code, _, stderr) =
        run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "escalated"]);
    assert_eq!(code, 3, "{stderr}");
    std::fs::write(directory.join("ok.jsonl"), "{\"event\": \"ok\"}\n").unwrap();
    let (code, _, stderr) = run_protocol(
        &directory,
        "retry-backoff.yaml",
        &["--run-id", "succeeded", "--events", "ok.jsonl"],
    );
    assert_eq!(code, 0, "{stderr}");
    // A file named apart from its protocol's id: `--protocol` takes either.
    std::fs::write(
        directory.join("renamed.yaml"),
        "id: other\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(
        &directory,
        &with_state(&["renamed.yaml", "--run-id", "stopped-one"]),
    );
    assert_eq!(code, 75, "{stderr}");
    let ids = |arguments: &[&str]| -> Vec<String> {
        let (code, stdout, stderr) = run_binary(&directory, &with_state(arguments));
        assert_eq!(code, 0, "{arguments:?}: {stderr}");
        stdout
            .lines()
            .map(|line| {
                let run: serde_json::Value = serde_json::from_str(line).unwrap();
                run["run"].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(
        ids(&["runs", "--json", "--protocol", "retry-backoff"]),
        ["succeeded", "escalated"]
    );
    assert_eq!(
        ids(&["runs", "--json", "--protocol", "other"]),
        ["stopped-one"]
    );
    assert_eq!(
        ids(&["runs", "--json", "--protocol", "renamed"]),
        ["stopped-one"]
    );
    assert_eq!(
        ids(&["runs", "--json", "--status", "failed"]),
        ["escalated"]
    );
    assert_eq!(
        ids(&["runs", "--json", "--status", "finished"]),
        ["succeeded"]
    );
    assert_eq!(
        ids(&["runs", "--json", "--status", "stopped"]),
        ["stopped-one"]
    );
    assert!(ids(&["runs", "--json", "--status", "running"]).is_empty());
    assert_eq!(ids(&["runs", "--json", "--since", "1h"]).len(), 3);
    assert!(ids(&["runs", "--json", "--since", "2999-01-01T00:00:00Z"]).is_empty());
    assert_eq!(
        ids(&["runs", "--json", "--since", "2000-01-01T00:00:00Z"]).len(),
        3
    );
    let (code, stdout, _) = run_binary(&directory, &with_state(&["runs", "--status", "failed"]));
    assert_eq!(code, 0);
    assert!(stdout.starts_with("escalated  failed    "), "{stdout}");
    let (code, _, stderr) = run_binary(&directory, &with_state(&["runs", "--since", "yesterday"]));
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains(
            "error: --since: `yesterday` is neither a duration such as `2h` or `1d` nor a \
             timestamp such as `2026-01-01T09:00:00Z`"
        ),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(&directory, &with_state(&["runs", "--status", "done"]));
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("[possible values: running, stopped, finished, failed, cancelled]"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn stats_prints_a_table_and_sums_the_runs_of_a_protocol() {
    let directory = temporary_directory("conventions", "stats");
    let retry = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/features/retry.yaml");
    for (id, mock, expected) in [
        ("second-time", "operation=timeout,ok:done", 0),
        (
            "never",
            "operation=timeout,timeout,timeout,timeout,timeout",
            3,
        ),
    ] {
        let (code, _, stderr) = run_binary(
            &directory,
            &with_state(&[
                retry.to_str().unwrap(),
                "--virtual-time",
                "--run-id",
                id,
                "--mock",
                mock,
            ]),
        );
        assert_eq!(code, expected, "{stderr}");
    }
    let (code, stdout, stderr) = run_binary(&directory, &with_state(&["stats", "second-time"]));
    assert_eq!(code, 0, "{stderr}");
    // A kernel without Landlock adds its warning's tag to the table.
    let stdout = stdout.replace("sandbox_unenforced                 1\n", "");
    assert_eq!(
        stdout,
        "run second-time\n\
         retry success     100% of 1 retried calls\n\
         attempts          2.0 on average for a retried call to succeed\n\
         \n\
         retried           succeeded  exhausted  cancelled   attempts\n\
         operation                 1          0          0          2\n\
         \n\
         action            succeeded     failed   timeouts\n\
         operation                 1          0          1\n\
         \n\
         state               entered       time    per run\n\
         calling                   1   122.000s   122.000s\n\
         succeeded                 1     0.000s     0.000s\n\
         \n\
         tag                            lines\n\
         grants                             1\n\
         operation_timeout_attempt          2\n\
         operation_timeout_retry            1\n\
         operation_timeout_success          1\n"
    );
    let (code, stdout, stderr) = run_binary(
        &directory,
        &with_state(&["stats", "--protocol", "retry-demo", "--json"]),
    );
    assert_eq!(code, 0, "{stderr}");
    let stats: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(stats["runs"], 2);
    assert_eq!(stats["retry_success_rate"], 0.5);
    assert_eq!(stats["average_attempts_to_success"], 2.0);
    assert_eq!(
        stats["retries_per_action"]["operation"],
        serde_json::json!({"succeeded": 1, "exhausted": 1, "cancelled": 0, "attempts": 7})
    );
    // Every attempt that timed out: one of `second-time`'s, five of `never`'s.
    assert_eq!(stats["timeouts_per_action"]["operation"], 6);
    assert_eq!(
        stats["entries_per_state"],
        serde_json::json!({"calling": 2, "succeeded": 1, "exhausted": 1})
    );
    let (code, stdout, _) = run_binary(
        &directory,
        &with_state(&["stats", "--protocol", "retry-demo"]),
    );
    assert_eq!(code, 0);
    assert!(
        stdout
            .starts_with("protocol retry-demo: 2 runs\nretry success     50% of 2 retried calls\n"),
        "{stdout}"
    );
    let (code, _, stderr) = run_binary(&directory, &with_state(&["stats", "--protocol", "ittw"]));
    assert_eq!(code, 66, "{stderr}");
    assert!(
        stderr.contains("error: no run of `ittw` with telemetry in state"),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(
        &directory,
        &with_state(&["stats", "never", "--protocol", "retry-demo"]),
    );
    assert_eq!(code, 64, "a run and a protocol at once: {stderr}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn status_names_transitions_by_their_states_and_event() {
    let directory = temporary_directory("conventions", "status");
    std::fs::write(
        directory.join("door.yaml"),
        "id: door\nstates:\n  closed:\n    on: { open: opened }\n  opened:\n    on:\n      \
         close: closed\n      knock: {}\n    after:\n      - { delay: 1s, target: shut }\n  \
         shut: { type: final }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        "{\"event\": \"open\"}\n{\"event\": \"knock\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "door.yaml",
            "--virtual-time",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run_binary(&directory, &with_state(&["status"]));
    assert_eq!(code, 0, "{stderr}");
    let steps: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("step "))
        .map(|line| line.splitn(4, ' ').nth(3).unwrap_or_default())
        .collect();
    assert_eq!(
        steps[steps.len() - 3..],
        [
            "open: closed → opened (open)",
            "knock: opened (knock)",
            "after.opened.0: opened → shut (after)"
        ]
        .map(|step| step.to_string())
    );
    let (_, stdout, _) = run_binary(&directory, &with_state(&["status", "--json"]));
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let last = status["last_events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["transitions"],
        serde_json::json!(["opened → shut (after)"])
    );
    assert_eq!(
        last["transition_pointers"],
        serde_json::json!(["/states/opened/after/0"])
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn resume_without_an_id_continues_the_latest_unfinished_run() {
    let directory = temporary_directory("conventions", "resume-latest");
    std::fs::write(
        directory.join("wait.yaml"),
        "id: wait\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n",
    )
    .unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
    let (code, _, stderr) = run_binary(
        &directory,
        &with_state(&["wait.yaml", "--run-id", "waiting-one"]),
    );
    assert_eq!(code, 75, "{stderr}");
    // A later run that finished is not the one `resume` takes.
    let (code, _, stderr) = run_protocol(&directory, "retry-backoff.yaml", &["--run-id", "later"]);
    assert_eq!(code, 3, "{stderr}");
    let (code, stdout, stderr) =
        run_binary(&directory, &with_state(&["resume", "--events", "go.jsonl"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.starts_with("run waiting-one (the latest;"),
        "{stderr}"
    );
    assert!(stdout.contains(r#""state":"done""#), "{stdout}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn telemetry_is_pruned_oldest_first_whatever_the_ids_are_called() {
    let directory = temporary_directory("conventions", "prune");
    for id in ["zz-first", "aa-second"] {
        let (code, _, stderr) = run_protocol(
            &directory,
            "retry-backoff.yaml",
            &["--run-id", id, "--keep-runs", "1"],
        );
        assert_eq!(code, 3, "{stderr}");
    }
    let kept: Vec<String> = std::fs::read_dir(directory.join("state/runs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(kept, ["aa-second"]);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn every_subcommand_is_recognised_and_any_other_first_word_is_a_file_to_run() {
    let directory = temporary_directory("conventions", "default-subcommand");
    for subcommand in protocol_run::frontends::cli::command().get_subcommands() {
        let name = subcommand.get_name();
        let (code, stdout, stderr) = run_binary(&directory, &[name, "--help"]);
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(
            stdout.contains(&format!("Usage: protocol-run {name}")),
            "{name} is read as a subcommand: {stdout}"
        );
    }
    // `validate.yaml` is a file, not the subcommand `validate`.
    for first in ["validate.yaml", "runs.yaml", "nosuch"] {
        let (code, stdout, _) = run_binary(&directory, &[first, "--help"]);
        assert_eq!(code, 0, "{first}");
        assert!(
            stdout.contains("Usage: protocol-run run [OPTIONS] <FILE>"),
            "{first} is a file to run: {stdout}"
        );
    }
}
