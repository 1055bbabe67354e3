//! Child protocols' own rows, through the real binary: listed by `runs` under their parent, read by `status`, held with their parent (never resumed on their own), stopped, resumed and ended with it.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::{run_binary_with_state, temporary_directory};

/// A parent whose child invokes a grandchild: `go` is forwarded down to the grandchild, which
/// ends, then its parent, then the run. `leave` takes the parent away from its child.
const PARENT: &str = r#"
id: parent
states:
  working:
    invoke: [{ id: kid, protocol: child.yaml, autoforward: true }]
    on:
      done.invoke.kid: done
      leave: idle
  idle:
    on: { end: done }
  done: { type: final }
"#;

const CHILD: &str = r#"
id: child
states:
  waiting:
    invoke: [{ id: grand, protocol: grandchild.yaml, autoforward: true }]
    on:
      done.invoke.grand: { target: finished }
  finished: { type: final, output: { from: child } }
"#;

const GRANDCHILD: &str = r#"
id: grandchild
states:
  waiting:
    on: { go: finished }
  finished: { type: final, output: { said: went } }
"#;

fn protocols(group: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("child-runs", group);
    std::fs::write(directory.join("parent.yaml"), PARENT).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    std::fs::write(directory.join("grandchild.yaml"), GRANDCHILD).unwrap();
    directory
}

/// The parent run, waiting for events on stdin (kept open).
fn start_parent(directory: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["parent.yaml", "--events", "-", "--state-dir", "state"])
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Every run `runs --json` lists, by id.
fn runs(directory: &Path) -> std::collections::BTreeMap<String, Value> {
    let (code, text) = run_binary_with_state(directory, &["runs", "--json"]);
    assert_eq!(code, 0, "{text}");
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|run| (run["run"].as_str().unwrap().to_string(), run))
        .collect()
}

/// Polls `runs --json` until `ready` holds of the runs (`support::eventually`).
fn wait_for_runs(
    directory: &Path,
    what: &str,
    ready: impl Fn(&std::collections::BTreeMap<String, Value>) -> bool,
) -> std::collections::BTreeMap<String, Value> {
    crate::support::eventually(what, || {
        let runs = if directory.join("state/state.db").exists() {
            runs(directory)
        } else {
            Default::default()
        };
        ready(&runs).then_some(runs)
    })
}

/// The one run with no parent.
fn root(runs: &std::collections::BTreeMap<String, Value>) -> String {
    let roots: Vec<&String> = runs
        .iter()
        .filter(|(_, run)| run["parent"].is_null())
        .map(|(id, _)| id)
        .collect();
    assert_eq!(roots.len(), 1, "{runs:?}");
    roots[0].clone()
}

/// The parent started in `directory`, once its grandchild's row is there: the parent's
/// process, the runs, and the ids of the run, its kid and its grandchild.
type Tree = (
    Child,
    std::collections::BTreeMap<String, Value>,
    [String; 3],
);

fn started_tree(directory: &Path) -> Tree {
    let parent = start_parent(directory);
    let runs = wait_for_runs(directory, "the grandchild's row", |runs| {
        runs.keys().any(|id| id.ends_with("/kid/grand"))
    });
    let run = root(&runs);
    let ids = [
        run.clone(),
        format!("{run}/kid"),
        format!("{run}/kid/grand"),
    ];
    (parent, runs, ids)
}

#[test]
fn a_child_keeps_a_row_of_its_own_held_with_its_parent_through_a_kill_and_a_resume() {
    let directory = protocols("kill");
    let (mut parent, runs, [run, kid, grand]) = started_tree(&directory);
    assert_eq!(runs[&kid]["parent"], json!(run), "{runs:?}");
    assert_eq!(runs[&kid]["status"], json!("running"));
    let child_file = directory.join("child.yaml").canonicalize().unwrap();
    assert_eq!(
        runs[&kid]["protocol"],
        json!(child_file.display().to_string())
    );
    assert_eq!(runs[&grand]["parent"], json!(kid), "{runs:?}");

    // A child's state is read from its row, once its start is committed.
    let status = crate::support::eventually("the grandchild's committed start", || {
        let (code, text) = run_binary_with_state(&directory, &["status", &grand, "--json"]);
        assert_eq!(code, 0, "{text}");
        let status: Value = serde_json::from_str(&text).unwrap();
        (status["state"]["configuration"] == json!(["waiting"])).then_some(status)
    });
    assert_eq!(status["origin"], json!("child"), "{status}");

    // Each child's state is in its own row: the parent's snapshot names its kid without it,
    // so a child's step does not rewrite the tree.
    let database = rusqlite::Connection::open(directory.join("state/state.db")).unwrap();
    let stored = |id: &str| -> Value {
        let text: String = database
            .query_row(
                "SELECT snapshot FROM snapshots WHERE run_id = ?1",
                [id],
                |row| row.get(0),
            )
            .unwrap();
        serde_json::from_str(&text).unwrap()
    };
    // The parent's own state is kept with its journal, as a delta of the step before it or in
    // full; rebuilt without its children's states.
    let parent_state = {
        use protocol_run::store::Store;
        let store = protocol_run::store::SqliteStore::open(directory.join("state")).unwrap();
        let last = store
            .run(&run)
            .unwrap()
            .unwrap()
            .summary
            .last_sequence
            .unwrap();
        store
            .snapshot_at(&run, last)
            .unwrap()
            .unwrap()
            .snapshot
            .to_json()
    };
    assert_eq!(
        parent_state["children"][0]["id"],
        json!("kid"),
        "{parent_state}"
    );
    assert!(
        parent_state["children"][0].get("snapshot").is_none(),
        "{parent_state}"
    );
    assert!(stored(&kid)["children"][0].get("snapshot").is_none());
    assert_eq!(stored(&grand)["configuration"], json!(["waiting"]));
    drop(database);

    // Held with its parent: the child is never resumed on its own, while its parent runs or
    // after it died; its parent, while live, is refused to a second driver.
    let (code, text) = run_binary_with_state(&directory, &["resume", &kid]);
    assert_eq!(code, 64, "{text}");
    assert!(
        text.contains(&format!(
            "run `{kid}` is a child protocol of run `{run}`: it runs, stops and resumes with it"
        )),
        "{text}"
    );
    let (code, text) = run_binary_with_state(&directory, &["resume", &run]);
    assert_eq!(code, 75, "{text}");
    assert!(text.contains("is being run by another process"), "{text}");

    parent.kill().unwrap();
    parent.wait().unwrap();
    let (code, text) = run_binary_with_state(&directory, &["resume", &grand]);
    assert_eq!(code, 64, "{text}");
    assert!(text.contains(&format!("resume `{kid}`")), "{text}");
    assert_eq!(runs_status(&directory, &grand), "running");
    // Refused before any lock is taken: the parent's run directory holds no lock of a child.
    assert!(!directory.join("state/runs").join(&run).join("kid").exists());

    // The parent resumed: `go` reaches the grandchild, and each ends in its own row.
    std::fs::write(directory.join("go.jsonl"), "{\"event\":\"go\"}\n").unwrap();
    let (code, text) = run_binary_with_state(&directory, &["resume", &run, "--events", "go.jsonl"]);
    assert_eq!(code, 0, "{text}");
    let runs = self::runs(&directory);
    for (id, parent) in [
        (&run, Value::Null),
        (&kid, json!(run)),
        (&grand, json!(kid)),
    ] {
        assert_eq!(runs[id]["status"], json!("finished"), "{id}: {runs:?}");
        assert_eq!(runs[id]["exit_code"], json!(0), "{id}: {runs:?}");
        assert_eq!(runs[id]["parent"], parent, "{id}: {runs:?}");
    }
    // The grandchild's row tells how it ended.
    let (_, text) = run_binary_with_state(&directory, &["status", &grand, "--json"]);
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["finish"]["state"], json!("finished"), "{status}");
    assert_eq!(
        status["finish"]["output"],
        json!({"said": "went"}),
        "{status}"
    );
    // `status` with no id names the parent, the latest run started on its own.
    let (_, text) = run_binary_with_state(&directory, &["status", "--json"]);
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["run"], json!(run), "{status}");
}

fn runs_status(directory: &Path, id: &str) -> String {
    runs(directory)[id]["status"].as_str().unwrap().to_string()
}

#[test]
fn a_stopped_parent_stops_its_children_and_a_child_left_behind_is_cancelled() {
    let directory = protocols("stop");
    let (mut parent, _, [run, kid, grand]) = started_tree(&directory);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(parent.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(parent.wait().unwrap().code(), Some(75));
    let runs = self::runs(&directory);
    for id in [&run, &kid, &grand] {
        assert_eq!(runs[id]["status"], json!("stopped"), "{id}: {runs:?}");
    }

    // Resumed, the parent leaves the state that invoked its child: the child and the
    // grandchild end as cancelled (exit code 130, no final state); the run goes on.
    let mut resumed = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["resume", &run, "--events", "-", "--state-dir", "state"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = resumed.stdin.take().unwrap();
    writeln!(input, "{{\"event\":\"leave\"}}").unwrap();
    let runs = wait_for_runs(&directory, "the children cancelled", |runs| {
        runs.get(&grand)
            .is_some_and(|grand| !grand["exit_code"].is_null())
    });
    for id in [&kid, &grand] {
        // `runs` shows a run cancelled (130, no final state) as cancelled.
        assert_eq!(runs[id]["status"], json!("cancelled"), "{id}: {runs:?}");
        assert_eq!(runs[id]["exit_code"], json!(130), "{id}: {runs:?}");
    }
    assert_eq!(runs[&run]["status"], json!("running"), "{runs:?}");
    writeln!(input, "{{\"event\":\"end\"}}").unwrap();
    drop(input);
    let output = resumed.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (_, text) = run_binary_with_state(&directory, &["status", &kid, "--json"]);
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["finish"]["state"], Value::Null, "{status}");
    assert_eq!(status["finish"]["exit_code"], json!(130), "{status}");
}

#[test]
fn a_serve_instance_name_may_not_name_a_child() {
    let directory = protocols("serve");
    let output = crate::support::run_binary_with_input(
        &directory,
        &["serve", "grandchild.yaml", "--state-dir", "state"],
        b"{\"instance\": \"a/grand\", \"event\": \"go\"}\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("an instance name may not contain `/`"),
        "{stderr}"
    );
    let runs = runs(&directory);
    assert!(runs.is_empty(), "{runs:?}");
}
