//! Durable runs: the SQLite store on a real file, snapshots restored mid-run, crashes mid-commit.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::snapshot::Snapshot;
use protocol_run::pipeline::compile::machine::Machine;
use protocol_run::runtime::run::restore::RestoreError;
use protocol_run::runtime::run::{Interpreter, Record, RecordingHost};
use protocol_run::store::{
    Finish, JournalEntry, JournalEvent, NewRun, RunStatus, SqliteStore, Store, StoreError,
    content_hash,
};

use crate::support::machine;

/// A directory of its own under the system's temporary directory, removed afterwards.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let directory = std::env::temp_dir().join(format!(
            "protocol-run-store-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&directory);
        Scratch(directory)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A compound state with history inside a parallel state, context used by templates.
const DURABLE: &str = r#"
id: durable
context: { count: 0, trail: "" }
states:
  idle:
    entry: [{ log: "enter idle" }]
    on: { go: work }
  work:
    type: parallel
    entry: [{ log: "enter work" }]
    exit: [{ log: "exit work at ${count}" }]
    states:
      left:
        states:
          l1:
            entry: [{ log: "enter l1" }, { assign: { count: "count + 1" } }]
            on: { next: l2 }
          l2:
            entry: [{ log: "enter l2 at ${count}" }, { assign: { count: "count + 10" } }]
            on: { next: l3 }
          l3: { entry: [{ log: "enter l3" }] }
      right:
        states:
          r1:
            entry: [{ log: "enter r1" }, { assign: { trail: "trail + 'a'" } }]
            on: { flip: r2 }
          r2:
            entry: [{ log: "enter r2" }, { assign: { trail: "trail + 'b'" } }]
            on: { flip: r1 }
      work_history: { type: history, history: deep }
    on:
      pause: paused
  paused:
    entry: [{ log: "paused at ${count} ${trail}" }]
    on:
      resume: work_history
      stop: done
  done: { type: final, exit_code: 0, output: { count: "${count}", trail: "${trail}" } }
"#;

fn event(machine: &Machine, name: &str) -> Event {
    Event::named(machine, name, Default::default(), Origin::External)
}

fn new_interpreter(machine: &Arc<Machine>) -> Interpreter {
    Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap())
}

fn new_run(id: &str, path: &str, started: u64) -> NewRun {
    NewRun {
        id: id.to_string(),
        protocol_path: path.to_string(),
        protocol_hash: content_hash(DURABLE),
        protocol_text: Some(DURABLE.to_string()),
        read_texts: Vec::new(),
        inputs: serde_json::json!({}),
        started_unix_milliseconds: started,
        grants: None,
        origin: protocol_run::store::RunOrigin::Run,
        holder: None,
        forked_from: None,
    }
}

fn counter_snapshot(count: u64) -> Snapshot {
    serde_json::from_value(serde_json::json!({
        "format": 1, "protocol": "counter", "configuration": ["counting"],
        "context": {"count": count}, "running": true
    }))
    .unwrap()
}

fn tick(sequence: u64) -> JournalEntry {
    JournalEntry {
        sequence,
        event: Some(JournalEvent {
            name: "tick".to_string(),
            data: serde_json::json!({"n": sequence}),
        }),
        transitions: vec!["/states/counting/on/tick/0".to_string()],
        actions: serde_json::json!({"logs": [format!("tick {sequence}")]}),
        unix_milliseconds: 10_000 + sequence,
        children: Vec::new(),
    }
}

#[test]
fn runs_steps_and_snapshots_round_trip_through_the_file() {
    let scratch = Scratch::new("round-trip");
    let directory = scratch.0.join(".protocol-run");
    {
        let mut store = SqliteStore::open(&directory).unwrap();
        store
            .create_run(&new_run("old", "/p/durable.yaml", 100))
            .unwrap();
        store
            .create_run(&new_run("new", "/p/durable.yaml", 200))
            .unwrap();
        store
            .create_run(&new_run("other", "/p/other.yaml", 300))
            .unwrap();
        let start = JournalEntry {
            sequence: 0,
            event: None,
            transitions: vec![],
            actions: serde_json::json!(null),
            unix_milliseconds: 200,
            children: Vec::new(),
        };
        store
            .commit_step("new", &start, &counter_snapshot(0), None)
            .unwrap();
        for sequence in 1..=3 {
            store
                .commit_step("new", &tick(sequence), &counter_snapshot(sequence), None)
                .unwrap();
        }
        store.mark_stopped("old", 150).unwrap();
        let finish = Finish {
            final_state: Some("done".to_string()),
            exit_code: 3,
            output: serde_json::json!({"count": 1}),
            unix_milliseconds: 400,
        };
        store
            .commit_step("other", &tick(0), &counter_snapshot(1), Some(&finish))
            .unwrap();
    }
    // Everything comes back from a fresh connection to the file.
    let mut store = SqliteStore::open(&directory).unwrap();
    let runs = store.list_runs().unwrap();
    let listed: Vec<(&str, RunStatus, Option<u64>, Option<u64>)> = runs
        .iter()
        .map(|run| {
            (
                run.id.as_str(),
                run.status,
                run.last_sequence,
                run.last_step_unix_milliseconds,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("other", RunStatus::Finished, Some(0), Some(10_000)),
            ("new", RunStatus::Running, Some(3), Some(10_003)),
            ("old", RunStatus::Stopped, None, None),
        ]
    );
    let finish = runs[0].finish.as_ref().unwrap();
    assert_eq!(
        (
            finish.final_state.as_deref(),
            finish.exit_code,
            &finish.output
        ),
        (Some("done"), 3, &serde_json::json!({"count": 1}))
    );
    assert_eq!(runs[1].protocol_path, "/p/durable.yaml");
    assert_eq!(runs[1].protocol_hash, content_hash(DURABLE));

    let record = store.run("new").unwrap().unwrap();
    assert_eq!(record.protocol_text.as_deref(), Some(DURABLE));
    assert_eq!(record.inputs, serde_json::json!({}));
    assert_eq!(record.summary.started_unix_milliseconds, 200);
    assert!(store.run("nobody").unwrap().is_none());

    let latest = store.latest_snapshot("new").unwrap().unwrap();
    assert_eq!(
        (latest.sequence, latest.unix_milliseconds, latest.snapshot),
        (3, 10_003, counter_snapshot(3))
    );
    assert!(store.latest_snapshot("old").unwrap().is_none());

    let journal = store.journal("new").unwrap();
    assert_eq!(journal.len(), 4);
    assert_eq!(journal[0].event, None);
    assert_eq!(journal[2], tick(2));
    let tail = store.journal_tail("new", 2).unwrap();
    assert_eq!(tail, [tick(2), tick(3)]);

    // `--resume`: the latest unfinished run of the path, stopped or running.
    let unfinished = store.latest_unfinished_run("/p/durable.yaml").unwrap();
    assert_eq!(unfinished.unwrap().id, "new");
    assert!(
        store
            .latest_unfinished_run("/p/other.yaml")
            .unwrap()
            .is_none()
    );
    store.mark_stopped("new", 500).unwrap();
    store.mark_running("new", 600).unwrap();
    let finish = Finish {
        final_state: None,
        exit_code: 70,
        output: serde_json::Value::Null,
        unix_milliseconds: 700,
    };
    store.finish_run("new", &finish).unwrap();
    let unfinished = store.latest_unfinished_run("/p/durable.yaml").unwrap();
    assert_eq!(unfinished.unwrap().id, "old");
    let error = store.mark_running("new", 800).unwrap_err();
    assert!(matches!(error, StoreError::RunFinished { .. }), "{error}");
}

#[test]
fn a_step_refused_late_in_its_transaction_leaves_nothing_behind() {
    let scratch = Scratch::new("refused");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r", "/p.yaml", 1)).unwrap();
    let finish = Finish {
        final_state: Some("done".to_string()),
        exit_code: 0,
        output: serde_json::json!({}),
        unix_milliseconds: 5,
    };
    store
        .commit_step("r", &tick(0), &counter_snapshot(0), Some(&finish))
        .unwrap();
    // The journal row and the snapshot go in first; the run's update then finds it finished and
    // the whole step is rolled back.
    let error = store
        .commit_step("r", &tick(1), &counter_snapshot(1), None)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: run `r` has finished; it takes no more steps",
            store.path().display()
        )
    );
    assert_eq!(store.journal("r").unwrap(), [tick(0)]);
    let latest = store.latest_snapshot("r").unwrap().unwrap();
    assert_eq!((latest.sequence, latest.snapshot), (0, counter_snapshot(0)));
    let error = store.finish_run("r", &finish).unwrap_err();
    assert!(matches!(error, StoreError::RunFinished { .. }), "{error}");
}

/// Drives both interpreters with the same events; returns what the second one did.
fn drive_both(
    machine: &Arc<Machine>,
    original: &mut Interpreter,
    restored: &mut Interpreter,
    names: &[&str],
) -> Vec<Record> {
    let mut original_host = RecordingHost::for_machine(machine.clone());
    let mut restored_host = RecordingHost::for_machine(machine.clone());
    for name in names {
        original
            .handle(&event(machine, name), &mut original_host)
            .unwrap();
        restored
            .handle(&event(machine, name), &mut restored_host)
            .unwrap();
        assert_eq!(restored.snapshot(), original.snapshot(), "after {name}");
    }
    assert_eq!(restored_host.records, original_host.records);
    restored_host.records
}

#[test]
fn a_run_snapshotted_mid_way_resumes_identically_without_entry_actions() {
    let machine = machine(DURABLE);
    let mut original = new_interpreter(&machine);
    let mut host = RecordingHost::for_machine(machine.clone());
    original.start(&mut host).unwrap();
    // Into the parallel state, move both regions, leave and come back through deep history.
    for name in ["go", "next", "flip", "pause", "resume"] {
        original.handle(&event(&machine, name), &mut host).unwrap();
    }
    assert_eq!(original.active_leaves(), ["l2", "r2"]);
    let snapshot = original.snapshot();
    assert_eq!(
        snapshot.configuration,
        ["work", "left", "l2", "right", "r2"]
    );
    assert_eq!(
        serde_json::Value::Object(snapshot.context.clone()),
        serde_json::json!({"count": 21, "trail": "abb"})
    );
    assert_eq!(
        serde_json::to_value(&snapshot.history).unwrap(),
        serde_json::json!({"work_history": ["l2", "r2"]})
    );

    // Through the store and a fresh connection, as a resumed process would read it.
    let scratch = Scratch::new("resume");
    {
        let mut store = SqliteStore::open(&scratch.0).unwrap();
        store
            .create_run(&new_run("r", "/p/durable.yaml", 1))
            .unwrap();
        store.commit_step("r", &tick(5), &snapshot, None).unwrap();
    }
    let stored = SqliteStore::open(&scratch.0)
        .unwrap()
        .latest_snapshot("r")
        .unwrap()
        .unwrap();
    assert_eq!(stored.snapshot, snapshot);

    let mut restored = Interpreter::restore(
        machine.clone(),
        machine.bind_inputs(&[]).unwrap(),
        &stored.snapshot,
    )
    .unwrap();
    assert!(restored.is_running());
    assert_eq!(restored.active_leaves(), ["l2", "r2"]);
    assert_eq!(restored.context_json(), original.context_json());
    assert_eq!(restored.snapshot(), snapshot);

    // The next event: only l2 → l3, nothing entered again; `count` carried over.
    let records = drive_both(&machine, &mut original, &mut restored, &["next"]);
    assert_eq!(
        records,
        [
            Record::Transition("/states/work/states/left/states/l2/on/next".to_string()),
            Record::Exited("l2".to_string()),
            Record::Entered("l3".to_string()),
            Record::Log("enter l3".to_string()),
        ]
    );
    // Out and back through the restored history, then to the end.
    let records = drive_both(
        &machine,
        &mut original,
        &mut restored,
        &["pause", "resume", "flip", "pause", "stop"],
    );
    let logs: Vec<&str> = records
        .iter()
        .filter_map(|record| match record {
            Record::Log(message) => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [
            "exit work at 21",
            "paused at 21 abb",
            "enter work",
            "enter l3",
            "enter r2",
            "enter r1",
            "exit work at 21",
            "paused at 21 abbba",
        ]
    );
    let outcome = restored.outcome().unwrap();
    assert_eq!(
        outcome.output.to_json(),
        serde_json::json!({"count": 21, "trail": "abbba"})
    );
    assert_eq!(restored.snapshot().outcome, original.snapshot().outcome);
}

#[test]
fn restore_refuses_a_machine_without_the_snapshots_states_or_variables() {
    let machine = machine(DURABLE);
    let mut interpreter = new_interpreter(&machine);
    let mut host = RecordingHost::for_machine(machine.clone());
    interpreter.start(&mut host).unwrap();
    for name in ["go", "next", "pause", "resume"] {
        interpreter
            .handle(&event(&machine, name), &mut host)
            .unwrap();
    }
    let snapshot = interpreter.snapshot();
    let restore = |yaml: &str| {
        let changed = crate::support::machine(yaml);
        let inputs = changed.bind_inputs(&[]).unwrap();
        Interpreter::restore(changed, inputs, &snapshot)
            .err()
            .unwrap()
    };

    let error = restore(&DURABLE.replace("l2", "l2_renamed"));
    assert_eq!(
        error,
        RestoreError::UnknownState {
            path: "test.yaml".to_string(),
            part: "configuration".to_string(),
            state: "l2".to_string(),
        }
    );
    assert_eq!(
        error.to_string(),
        "test.yaml: the snapshot's configuration names the state `l2`, which the protocol does not have"
    );

    let error = restore(&DURABLE.replace("work_history", "work_memory"));
    assert!(
        error
            .to_string()
            .contains("history names the state `work_history`"),
        "{error}"
    );

    let error = restore(
        &DURABLE
            .replace(
                r#"context: { count: 0, trail: "" }"#,
                "context: { count: 0 }",
            )
            .replace(r#", { assign: { trail: "trail + 'a'" } }"#, "")
            .replace(r#", { assign: { trail: "trail + 'b'" } }"#, "")
            .replace(" ${trail}", "")
            .replace(r#", trail: "${trail}""#, ""),
    );
    assert_eq!(
        error.to_string(),
        "test.yaml: the snapshot's context has the variable `trail`, which the protocol does not declare"
    );

    // Every state still exists, but `right` is now a compound state with `r1` and `r2` inside
    // `left`: the configuration is not one the protocol can be in.
    let moved = DURABLE
        .replace(
            "          l3: { entry: [{ log: \"enter l3\" }] }\n      right:\n        states:\n",
            "          l3: { entry: [{ log: \"enter l3\" }] }\n",
        )
        .replace(
            "      work_history:",
            "      right: { states: { r3: {} } }\n      work_history:",
        );
    let error = restore(&moved);
    assert!(
        matches!(&error, RestoreError::InvalidConfiguration { reason, .. }
            if reason.contains("`left` must have exactly one active child")),
        "{error}"
    );

    let error = restore(&DURABLE.replace("id: durable", "id: another"));
    assert!(
        error
            .to_string()
            .contains("snapshot is of protocol `durable`"),
        "{error}"
    );

    // The snapshot as JSON keeps every field; an unknown one is refused when read.
    let json = serde_json::to_string(&snapshot).unwrap();
    assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), snapshot);
    let mut extra = snapshot.to_json();
    extra["surprise"] = serde_json::json!(1);
    assert!(serde_json::from_value::<Snapshot>(extra).is_err());
}

const CHILD_DIRECTORY: &str = "PROTOCOL_RUN_STORE_CRASH_DIRECTORY";

/// Not a test on its own: the child process of the SIGKILL test, which starts it (`--ignored`)
/// and kills it while it commits steps. Ignored, so it never counts as a test that passed.
#[test]
#[ignore = "the child process of a_process_killed_while_committing_leaves_every_committed_step_whole"]
fn commit_loop_child() {
    let Some(directory) = std::env::var_os(CHILD_DIRECTORY) else {
        return;
    };
    let mut store = SqliteStore::open(PathBuf::from(directory)).unwrap();
    let first = store
        .latest_snapshot("crash")
        .unwrap()
        .map_or(0, |stored| stored.sequence + 1);
    // Bounded, in case the parent is gone (then printing fails and ends it sooner).
    for sequence in first..first + 20_000 {
        store
            .commit_step("crash", &tick(sequence), &counter_snapshot(sequence), None)
            .unwrap();
        println!("committed {sequence}");
    }
}

#[test]
fn a_process_killed_while_committing_leaves_every_committed_step_whole() {
    let scratch = Scratch::new("crash");
    SqliteStore::open(&scratch.0)
        .unwrap()
        .create_run(&new_run("crash", "/p/counter.yaml", 1))
        .unwrap();
    // Killed after a few commits, then more: each time from where the last crash left it.
    for kill_after in [2, 15, 40] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "store::commit_loop_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIRECTORY, &scratch.0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut printed = 0;
        let mut last_printed = None;
        while printed < kill_after {
            let line = lines.next().expect("the child stopped committing").unwrap();
            if let Some(sequence) = line.strip_prefix("committed ") {
                last_printed = Some(sequence.parse::<u64>().unwrap());
                printed += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL, most likely in the middle of a commit
        child.wait().unwrap();

        let store = SqliteStore::open(&scratch.0).unwrap();
        let check = rusqlite::Connection::open(store.path()).unwrap();
        let integrity: String = check
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
        let journal = store.journal("crash").unwrap();
        let last = journal.last().unwrap().sequence;
        assert!(last >= last_printed.unwrap());
        // Every step is whole: journal rows 0..=last with their own data, and the snapshot of
        // the last one.
        for (index, entry) in journal.iter().enumerate() {
            assert_eq!(*entry, tick(index as u64));
        }
        let latest = store.latest_snapshot("crash").unwrap().unwrap();
        assert_eq!(
            (latest.sequence, latest.snapshot),
            (last, counter_snapshot(last))
        );
        assert_eq!(store.list_runs().unwrap()[0].last_sequence, Some(last));
    }
    let store = SqliteStore::open(&scratch.0).unwrap();
    assert!(store.journal("crash").unwrap().len() >= 2 + 15 + 40);
}

/// A state directory the store makes is its operator's alone: runs' contexts and event data are
/// not for other users of the machine.
#[test]
fn a_state_directory_made_by_the_store_is_the_operators_alone() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = crate::support::temporary_directory("store", "mode");
    let directory = scratch.join("made/state");
    protocol_run::store::SqliteStore::open(&directory).unwrap();
    let mode = std::fs::metadata(&directory).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
}
