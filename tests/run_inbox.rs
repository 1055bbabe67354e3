//! A single `protocol-run run` takes the events other processes queue in its inbox (the store): each admitted as every sender's and applied as input, its outcome committed with the step that applied it; an engine event queued there is refused by the holder, and the run goes on.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use protocol_run::store::{InboxState, SqliteStore, Store};

use crate::support;

/// `run protocols/ittw.yaml` as run `run` in `directory`, its path pinned to one that does not
/// exist (so it escalates and waits for guidance), its events on stdin (held open), its inbox
/// looked at every 20 ms; its output to `output`.
pub(crate) fn ittw_run(directory: &Path, run: &str, output: fn() -> Stdio) -> std::process::Child {
    ittw_run_on(directory, &[], run, output)
}

/// `ittw_run` on the store `environment` chooses.
pub(crate) fn ittw_run_on(
    directory: &Path,
    environment: &[(&str, &str)],
    run: &str,
    output: fn() -> Stdio,
) -> std::process::Child {
    let ittw = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/ittw.yaml");
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "run",
            ittw.to_str().unwrap(),
            "--state-dir",
            "state",
            "--run-id",
            run,
        ])
        .args([
            "-i",
            "path=/nonexistent/protocol-run-inbox",
            "--events",
            "-",
        ])
        .args(["--inbox-poll", "20ms"])
        .envs(environment.iter().copied())
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap()
}

#[test]
fn a_run_applies_the_events_queued_in_its_inbox_once_each() {
    let directory = support::temporary_directory("run-inbox", "ittw");
    // Its events from stdin, held open: the run waits for guidance, and for its inbox.
    let mut run = ittw_run(&directory, "r1", Stdio::piped);
    let mut store = support::eventually("the store", || {
        SqliteStore::open(directory.join("state")).ok()
    });
    support::eventually("ITTW waiting for guidance", || {
        store.latest_snapshot("r1").ok().flatten().filter(|stored| {
            stored
                .snapshot
                .configuration
                .iter()
                .any(|state| state == "waiting_for_guidance")
        })
    });
    // An engine event no sender may send, then the guidance.
    let data = serde_json::json!({"say": "from the inbox"});
    assert_eq!(
        store
            .enqueue_event("r1", "done.invoke.x", &serde_json::json!({}), 1)
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .enqueue_event("r1", "captain_guidance", &data, 2)
            .unwrap(),
        2
    );
    let output = {
        let _ = run.stdin.take().map(|mut stdin| stdin.flush());
        run.wait_with_output().unwrap()
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("\"guidance\":{\"say\":\"from the inbox\"}"),
        "{stdout}"
    );
    let mut entries = store.recent_inbox("r1", 10).unwrap();
    entries.reverse();
    let InboxState::Applied { outcome, step, .. } = &entries[0].state else {
        panic!("{entries:?}");
    };
    assert_eq!(outcome["outcome"], "refused", "{entries:?}");
    assert_eq!(*step, None, "refused before any step: {entries:?}");
    let InboxState::Applied { outcome, step, .. } = &entries[1].state else {
        panic!("{entries:?}");
    };
    assert_eq!(outcome["outcome"], "taken", "{entries:?}");
    // The step that applied it took the guidance, once.
    let journal = store.journal("r1").unwrap();
    let guided: Vec<u64> = journal
        .iter()
        .filter(|entry| {
            entry
                .event
                .as_ref()
                .is_some_and(|event| event.name == "captain_guidance")
        })
        .map(|entry| entry.sequence)
        .collect();
    assert_eq!(guided, vec![step.unwrap()], "{entries:?}");
}
