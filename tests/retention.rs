//! `runs prune --older-than`: the runs that ended before a time are deleted with their journal, states, children and telemetry, on SQLite and on PostgreSQL; a running or stopped run stays unless asked for (stopped) or never (running).

use std::path::Path;

use crate::support;

const QUICK: &str =
    "id: quick\npermissions: { exec: [] }\nstates:\n  done: { type: final, exit_code: 0 }\n";

/// Waits for `stop`, so it can be stopped or left running.
const WAITING: &str = "id: waiting\npermissions: { exec: [] }\nstates:\n  idle:\n    on: { go: done }\n  done: { type: final }\n";

/// `support::run_binary_in`, its stdout and stderr together.
fn protocol_run(
    directory: &Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> (i32, String) {
    let (code, stdout, stderr) = support::run_binary_in(directory, environment, arguments);
    (code, format!("{stdout}{stderr}"))
}

/// The ids `runs --json` lists.
fn listed(directory: &Path, environment: &[(&str, &str)]) -> Vec<String> {
    let (code, text) = protocol_run(directory, environment, &["runs", "--json"]);
    assert_eq!(code, 0, "{text}");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|run| run["run"].as_str().map(str::to_string))
        .collect()
}

fn prunes_ended_runs_and_their_telemetry(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("retention", name);
    std::fs::write(directory.join("quick.yaml"), QUICK).unwrap();
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    for id in ["done-1", "done-2"] {
        let (code, text) = protocol_run(
            &directory,
            environment,
            &["run", "quick.yaml", "--run-id", id],
        );
        assert_eq!(code, 0, "{text}");
    }
    // Stopped: no events left to wait for (exit 75, resumable).
    let (code, text) = protocol_run(
        &directory,
        environment,
        &[
            "run",
            "waiting.yaml",
            "--run-id",
            "stopped",
            "--events",
            "/dev/null",
        ],
    );
    assert_eq!(code, 75, "{text}");
    assert!(directory.join("state/runs/done-1").is_dir());
    // Nothing ended a day ago.
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["runs", "prune", "--older-than", "1d", "--json"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"pruned\":0"), "{text}");
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["runs", "prune", "--older-than", "0s"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("pruned 2 run(s)"), "{text}");
    assert_eq!(listed(&directory, environment), ["stopped"]);
    assert!(!directory.join("state/runs/done-1").exists());
    let (code, text) = protocol_run(&directory, environment, &["status", "done-1"]);
    assert_ne!(code, 0, "{text}");
    // A stopped run only when asked for.
    let (code, text) = protocol_run(
        &directory,
        environment,
        &[
            "runs",
            "prune",
            "--older-than",
            "0s",
            "--status",
            "stopped",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"pruned\":1"), "{text}");
    assert!(listed(&directory, environment).is_empty());
    // A bad time says what it takes.
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["runs", "prune", "--older-than", "soon"],
    );
    assert_eq!(code, 64, "{text}");
    assert!(text.contains("--older-than"), "{text}");
    // A host's --retain prunes when it starts (and then now and again).
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["run", "quick.yaml", "--run-id", "done-3"],
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(listed(&directory, environment), ["done-3"]);
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["serve", "waiting.yaml", "--retain", "0s"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(listed(&directory, environment).is_empty());
    // And so does an MCP server's (here one whose client goes at once).
    let (code, text) = protocol_run(
        &directory,
        environment,
        &["run", "quick.yaml", "--run-id", "done-4"],
    );
    assert_eq!(code, 0, "{text}");
    let (_, text) = protocol_run(
        &directory,
        environment,
        &["mcp", "quick.yaml", "--retain", "0s"],
    );
    assert!(listed(&directory, environment).is_empty(), "{text}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn sqlite_prunes_ended_runs_and_their_telemetry() {
    prunes_ended_runs_and_their_telemetry("sqlite", &[]);
}

#[test]
fn postgres_prunes_ended_runs_and_their_telemetry() {
    let Some(database) =
        support::postgres::database("retention::postgres_prunes_ended_runs_and_their_telemetry")
    else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    prunes_ended_runs_and_their_telemetry("postgres", &environment);
}
