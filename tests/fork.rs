//! `protocol-run fork RUN --at STEP`: a new run from the state after a step of another, its context changed where asked, recorded as forked from it and driven from there; the source untouched; refusals said. On SQLite and on PostgreSQL.

use crate::support;

const COUNT: &str = r#"
id: count
permissions: { exec: [] }
context: { n: 0 }
states:
  counting:
    on:
      tick: { actions: [{ assign: { n: "n + 1" } }] }
      stop: done
  done: { type: final, exit_code: 0, output: { n: "${n}" } }
"#;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap()
}

fn forks_a_run_from_a_step(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("fork", name);
    std::fs::write(directory.join("count.yaml"), COUNT).unwrap();
    let events = |lines: &[&str], file: &str| {
        let text: String = lines
            .iter()
            .map(|event| format!("{{\"event\":\"{event}\"}}\n"))
            .collect();
        std::fs::write(directory.join(file), text).unwrap();
    };
    events(&["tick", "tick", "tick", "stop"], "source.jsonl");
    events(&["tick", "stop"], "fork.jsonl");
    let (code, stdout, stderr) = support::run_binary_in(
        &directory,
        environment,
        &[
            "run",
            "count.yaml",
            "--run-id",
            "source",
            "--events",
            "source.jsonl",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"n\":3"), "{stdout}");
    // From the state after step 1 (one tick), with n set to 10: one tick more, then stop.
    let (code, stdout, stderr) = support::run_binary_in(
        &directory,
        environment,
        &[
            "fork",
            "source",
            "--at",
            "1",
            "--run-id",
            "forked",
            "--context-set",
            "n=10",
            "--events",
            "fork.jsonl",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"n\":11"), "{stdout}");
    assert!(
        stderr.contains("run forked: forked from run source at step 1"),
        "{stderr}"
    );
    let (code, stdout, stderr) =
        support::run_binary_in(&directory, environment, &["status", "forked", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let status = json(&stdout);
    assert_eq!(
        status["forked_from"],
        serde_json::json!({"run": "source", "step": 1})
    );
    assert_eq!(status["finish"]["output"], serde_json::json!({"n": 11}));
    let (_, stdout, _) = support::run_binary_in(&directory, environment, &["runs", "--json"]);
    let forked = stdout
        .lines()
        .map(json)
        .find(|run| run["run"] == "forked")
        .unwrap();
    assert_eq!(forked["forked_from"]["run"], "source");
    // The source is as it was.
    let (_, stdout, _) =
        support::run_binary_in(&directory, environment, &["status", "source", "--json"]);
    let source = json(&stdout);
    assert_eq!(source["finish"]["output"], serde_json::json!({"n": 3}));
    assert_eq!(source["forked_from"], serde_json::Value::Null);
    // Refusals, each saying why.
    for (arguments, code, said) in [
        (
            vec!["fork", "source", "--at", "4"],
            64,
            "that step ended the run",
        ),
        (
            vec!["fork", "source", "--at", "9"],
            64,
            "has no step 9 (its last is 4)",
        ),
        (
            vec!["fork", "source", "--at", "1", "--context-set", "m=1"],
            64,
            "has no variable m",
        ),
        (vec!["fork", "nobody", "--at", "1"], 66, "no run `nobody`"),
        (
            vec!["fork", "source", "--at", "1", "--context-set", "=1"],
            64,
            "is not NAME=VALUE",
        ),
    ] {
        let (exit, _, stderr) = support::run_binary_in(&directory, environment, &arguments);
        assert_eq!(exit, code, "{arguments:?}: {stderr}");
        assert!(stderr.contains(said), "{arguments:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn sqlite_forks_a_run_from_a_step() {
    forks_a_run_from_a_step("sqlite", &[]);
}

#[test]
fn postgres_forks_a_run_from_a_step() {
    let Some(database) = support::postgres::database("fork::postgres_forks_a_run_from_a_step")
    else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    forks_a_run_from_a_step("postgres", &environment);
}
