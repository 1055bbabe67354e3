//! The SQLite store's own tests: schema, refusals, rollback, busy waits, children's rows, snapshots per step.

use super::schema::MIGRATIONS;
use super::*;
use crate::store::codec::states::FULL_SNAPSHOT_EVERY;
use crate::store::{ChildChange, JournalEvent, RunOrigin};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory of its own under the system's temporary directory, removed afterwards.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let directory = std::env::temp_dir().join(format!(
            "protocol-run-sqlite-{name}-{}-{}",
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

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: id.to_string(),
        protocol_path: "/protocols/p.yaml".to_string(),
        protocol_hash: super::super::content_hash("id: p"),
        protocol_text: Some("id: p".to_string()),
        read_texts: Vec::new(),
        inputs: serde_json::json!({"n": 1}),
        started_unix_milliseconds: 1_000,
        grants: None,
        origin: super::super::RunOrigin::Run,
        holder: None,
        forked_from: None,
    }
}

fn snapshot(count: u64) -> Snapshot {
    serde_json::from_value(serde_json::json!({
        "format": 1, "protocol": "p", "configuration": ["a"],
        "context": {"count": count}, "running": true
    }))
    .unwrap()
}

fn entry(sequence: u64) -> JournalEntry {
    JournalEntry {
        sequence,
        event: Some(JournalEvent {
            name: "tick".to_string(),
            data: serde_json::json!({"n": sequence}),
        }),
        transitions: vec!["/states/a/on/tick/0".to_string()],
        actions: serde_json::json!([]),
        unix_milliseconds: sequence.saturating_add(1_000),
        children: Vec::new(),
    }
}

fn count(store: &SqliteStore, table: &str) -> i64 {
    store
        .connection
        .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .unwrap()
}

/// A fresh store with run `r` at its step 0.
fn started(name: &str) -> (Scratch, SqliteStore) {
    let scratch = Scratch::new(name);
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    store
        .commit_step("r", &entry(0), &snapshot(0), None)
        .unwrap();
    (scratch, store)
}

/// The steps of `run` whose journal row keeps the whole state.
/// The steps of run `r` kept in full are `expected`. Secrets are registered for the whole
/// process, and other unit tests of this binary register some: once any is, every step is kept
/// in full (a delta is not masked), so then `expected` need only be among them.
fn assert_kept_in_full(store: &SqliteStore, expected: &[i64]) {
    let kept = kept_in_full(store, "r");
    if crate::base::secrets::active() {
        assert!(expected.iter().all(|step| kept.contains(step)), "{kept:?}");
    } else {
        assert_eq!(kept, expected);
    }
}

fn kept_in_full(store: &SqliteStore, run: &str) -> Vec<i64> {
    let mut statement = store
        .connection
        .prepare(
            "SELECT step FROM journal WHERE run_id = ?1 AND snapshot IS NOT NULL ORDER BY step",
        )
        .unwrap();
    statement
        .query_map([run], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn open_creates_the_directory_in_wal_mode_with_full_sync_at_the_latest_schema() {
    let scratch = Scratch::new("open");
    let store = SqliteStore::open(scratch.0.join("nested/state")).unwrap();
    assert!(scratch.0.join("nested/state/state.db").is_file());
    let pragma = |name: &str| -> String {
        store
            .connection
            .query_row(&format!("PRAGMA {name}"), [], |row| {
                row.get::<_, rusqlite::types::Value>(0)
            })
            .map(|value| format!("{value:?}"))
            .unwrap()
    };
    assert_eq!(pragma("journal_mode"), "Text(\"wal\")");
    assert_eq!(pragma("synchronous"), "Integer(2)"); // FULL
    assert_eq!(pragma("foreign_keys"), "Integer(1)");
    assert_eq!(pragma("cache_size"), format!("Integer(-{PAGE_CACHE_KIB})"));
    assert_eq!(
        pragma("wal_autocheckpoint"),
        format!("Integer({CHECKPOINT_PAGES})")
    );
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    drop(store);
    // Reopening applies nothing twice.
    let store = SqliteStore::open(scratch.0.join("nested/state")).unwrap();
    assert_eq!(count(&store, "schema_version"), 1);
}

#[test]
fn a_newer_schema_is_refused_naming_the_file() {
    let scratch = Scratch::new("newer");
    let store = SqliteStore::open(&scratch.0).unwrap();
    store
        .connection
        .execute("UPDATE schema_version SET version = 99", [])
        .unwrap();
    drop(store);
    let error = SqliteStore::open(&scratch.0).err().unwrap();
    let message = error.to_string();
    assert!(matches!(error, StoreError::NewerSchema { found: 99, .. }));
    assert!(
        message.contains("state.db") && message.contains("99"),
        "{message}"
    );
}

fn finish_at(step: u64) -> Finish {
    Finish {
        final_state: Some("done".to_string()),
        exit_code: 0,
        output: serde_json::json!({"n": step}),
        unix_milliseconds: step.saturating_add(1_000),
    }
}

fn step_write(run: &str, step: u64) -> Write {
    Write::Step {
        run: run.to_string(),
        entry: entry(step),
        snapshot: Box::new(snapshot(step)),
        finish: None,
        child_states: Vec::new(),
    }
}

#[test]
fn a_failing_second_statement_leaves_nothing_of_the_step() {
    let (_scratch, mut store) = started("rollback");
    // The journal insert with the state (first statement) succeeds, the run's end (second)
    // aborts.
    store
        .connection
        .execute_batch(
            "CREATE TEMP TRIGGER refuse_update BEFORE UPDATE ON runs \
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
    let error = store
        .commit_step("r", &entry(1), &snapshot(1), Some(&finish_at(1)))
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("state.db") && message.contains("commit step 1 of run `r`"),
        "{message}"
    );
    assert!(message.contains("injected failure"), "{message}");
    assert_eq!(count(&store, "journal"), 1);
    let latest = store.latest_snapshot("r").unwrap().unwrap();
    assert_eq!((latest.sequence, latest.snapshot), (0, snapshot(0)));
    assert_eq!(store.list_runs().unwrap()[0].last_sequence, Some(0));
    // Once the failure is gone the same step commits.
    store
        .connection
        .execute_batch("DROP TRIGGER refuse_update;")
        .unwrap();
    store
        .commit_step("r", &entry(1), &snapshot(1), Some(&finish_at(1)))
        .unwrap();
    assert_eq!(store.journal("r").unwrap().len(), 2);
    // The failed transaction forgot the state it was a delta of: step 1 is kept in full.
    assert_eq!(kept_in_full(&store, "r"), [0, 1]);
    assert_eq!(
        store.latest_snapshot("r").unwrap().unwrap().snapshot,
        snapshot(1)
    );
}

/// A batch whose second step fails leaves nothing of its first: both were in one transaction.
#[test]
fn a_failing_step_of_a_batch_leaves_nothing_of_the_batch() {
    let (_scratch, mut store) = started("batch-rollback");
    store
        .connection
        .execute_batch(
            "CREATE TEMP TRIGGER refuse_step BEFORE INSERT ON journal WHEN NEW.step = 2 \
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
    let error = store
        .commit_batch(&[step_write("r", 1), step_write("r", 2)])
        .unwrap_err();
    assert!(error.to_string().contains("injected failure"), "{error}");
    assert_eq!(count(&store, "journal"), 1);
    let summary = store.run_summary("r").unwrap().unwrap();
    assert_eq!(
        (summary.last_sequence, summary.last_step_unix_milliseconds),
        (Some(0), Some(1_000))
    );
    store
        .connection
        .execute_batch("DROP TRIGGER refuse_step;")
        .unwrap();
    store
        .commit_batch(&[step_write("r", 1), step_write("r", 2)])
        .unwrap();
    assert_eq!(kept_in_full(&store, "r").first(), Some(&0));
    assert_eq!(
        store.snapshot_at("r", 2).unwrap().unwrap().snapshot,
        snapshot(2)
    );
}

/// A running run's step writes one row, its journal entry: the run's row is not rewritten, its
/// last step and that step's time are read from the journal.
#[test]
fn a_running_runs_step_writes_only_its_journal_row() {
    let (_scratch, mut store) = started("one-row");
    let before = store.connection.total_changes();
    for step in 1..=20 {
        store
            .commit_step("r", &entry(step), &snapshot(step), None)
            .unwrap();
    }
    assert_eq!(store.connection.total_changes() - before, 20);
    let summary = store.run_summary("r").unwrap().unwrap();
    assert_eq!(
        (summary.status, summary.last_sequence),
        (RunStatus::Running, Some(20))
    );
    assert_eq!(summary.last_step_unix_milliseconds, Some(1_020));
    assert_eq!(store.list_runs().unwrap()[0].last_sequence, Some(20));
    // Its end writes the row, last step included.
    store
        .commit_step("r", &entry(21), &snapshot(21), Some(&finish_at(21)))
        .unwrap();
    let row: (Option<i64>, String) = store
        .connection
        .query_row(
            "SELECT last_step, status FROM runs WHERE id = 'r'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(row, (Some(21), "finished".to_string()));
}

/// What this store remembers of a run it steps (its last step, that it runs, its state for
/// the next delta) is dropped once another connection writes to the file: the other's stop,
/// step and end are seen, and the state after every step is still rebuilt.
#[test]
fn another_connections_writes_are_seen_before_the_next_step() {
    let (scratch, mut store) = started("other");
    for step in 1..=2 {
        store
            .commit_step("r", &entry(step), &snapshot(step), None)
            .unwrap();
    }
    let mut other = SqliteStore::open(&scratch.0).unwrap();
    other
        .commit_step("r", &entry(3), &snapshot(3), None)
        .unwrap();
    // Step 4, encoded as a delta of step 2 (the last this store wrote), is written whole.
    store
        .commit_step("r", &entry(4), &snapshot(4), None)
        .unwrap();
    for step in 0..=4 {
        assert_eq!(
            store.snapshot_at("r", step).unwrap().unwrap().snapshot,
            snapshot(step)
        );
    }
    other
        .commit_step("r", &entry(5), &snapshot(5), None)
        .unwrap();
    let error = store
        .commit_step("r", &entry(5), &snapshot(9), None)
        .unwrap_err();
    assert!(
        matches!(error, StoreError::StaleStep { last: 5, .. }),
        "{error}"
    );
    other.mark_stopped("r", 2_000).unwrap();
    store
        .commit_step("r", &entry(6), &snapshot(6), None)
        .unwrap();
    assert_eq!(
        store.run_summary("r").unwrap().unwrap().status,
        RunStatus::Running
    );
    other.finish_run("r", &finish_at(7)).unwrap();
    let error = store
        .commit_step("r", &entry(7), &snapshot(7), None)
        .unwrap_err();
    assert!(matches!(error, StoreError::RunFinished { .. }), "{error}");
    assert_eq!(store.journal("r").unwrap().len(), 7);
}

#[test]
fn a_busy_database_is_waited_for_then_reported() {
    let scratch = Scratch::new("busy");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    // Another connection (as another process would) holds the write lock.
    let other = Connection::open(store.path()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    store.set_busy_timeout(Duration::from_millis(40)).unwrap();
    let started = std::time::Instant::now();
    let error = store
        .commit_step("r", &entry(0), &snapshot(0), None)
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(40));
    assert!(matches!(error, StoreError::Busy { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("state.db") && message.contains("busy for over 40 ms"),
        "{message}"
    );
    other.execute_batch("COMMIT").unwrap();
    store
        .commit_step("r", &entry(0), &snapshot(0), None)
        .unwrap();
}

#[test]
fn refusals_say_which_run_and_why() {
    let scratch = Scratch::new("refusals");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    let error = store.create_run(&new_run("r")).unwrap_err();
    assert!(matches!(error, StoreError::RunExists { .. }), "{error}");
    let error = store
        .commit_step("nobody", &entry(0), &snapshot(0), None)
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownRun { .. }), "{error}");
    store
        .commit_step("r", &entry(3), &snapshot(3), None)
        .unwrap();
    for stale in [3, 2] {
        let error = store
            .commit_step("r", &entry(stale), &snapshot(9), None)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{}: run `r` is already at step 3; step {stale} must come after it",
                store.path().display()
            )
        );
    }
    assert_eq!(count(&store, "journal"), 1);
    let error = store.mark_stopped("nobody", 5).unwrap_err();
    assert!(matches!(error, StoreError::UnknownRun { .. }), "{error}");
    let error = store
        .commit_step("r", &entry(u64::MAX), &snapshot(0), None)
        .unwrap_err();
    assert!(matches!(error, StoreError::OutOfRange { .. }), "{error}");
}

#[test]
fn a_damaged_snapshot_is_reported_not_panicked_on() {
    let (_scratch, store) = started("damaged");
    store
        .connection
        .execute("UPDATE journal SET snapshot = '{\"format\": 1'", [])
        .unwrap();
    let error = store.latest_snapshot("r").unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("state.db") && message.contains("snapshot of run `r` is damaged"),
        "{message}"
    );
}

/// A step's child changes: `r/kid` and `r/kid/grand` started, stepped and ended, each in
/// the transaction of the step that made it.
#[test]
fn children_keep_rows_of_their_own_written_with_their_parents_steps() {
    let scratch = Scratch::new("children");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    let started = |path: &str| ChildChange::Started {
        path: path.to_string(),
        protocol_path: format!("/protocols/{path}.yaml"),
        protocol_hash: "h".to_string(),
        inputs: serde_json::json!({}),
    };
    let mut step = entry(0);
    step.children = vec![started("kid"), started("kid/grand")];
    store.commit_step("r", &step, &snapshot(0), None).unwrap();
    let run = |store: &SqliteStore, id: &str| store.run(id).unwrap().unwrap().summary;
    let kid = run(&store, "r/kid");
    assert_eq!(kid.parent.as_deref(), Some("r"));
    assert_eq!(kid.origin, Some(RunOrigin::Child));
    assert_eq!(kid.status, RunStatus::Running);
    assert_eq!(kid.started_unix_milliseconds, 1_000);
    assert_eq!(run(&store, "r/kid/grand").parent.as_deref(), Some("r/kid"));
    // A child is held with its parent: never claimed on its own.
    let holder = Holder {
        process: "resume".to_string(),
        pid: 1,
        lock: "/nowhere".to_string(),
        host: None,
    };
    let claimed = store
        .claim_runs(&["r/kid".to_string()], &holder, &mut |_| true)
        .unwrap();
    assert_eq!(
        claimed,
        [Some(Unclaimed::Child {
            parent: "r".to_string()
        })]
    );
    // Stopping the parent stops its children; resuming it resumes them.
    store.mark_stopped("r", 1_500).unwrap();
    assert_eq!(run(&store, "r/kid/grand").status, RunStatus::Stopped);
    store.mark_running("r", 1_600).unwrap();
    assert_eq!(run(&store, "r/kid/grand").status, RunStatus::Running);
    let mut step = entry(1);
    step.children = vec![
        ChildChange::Stepped {
            path: "kid/grand".to_string(),
            sequence: 1,
        },
        ChildChange::Ended {
            path: "kid/grand".to_string(),
            final_state: Some("done".to_string()),
            exit_code: 0,
            output: serde_json::json!({"said": "went"}),
        },
    ];
    store.commit_step("r", &step, &snapshot(1), None).unwrap();
    let grand = run(&store, "r/kid/grand");
    assert_eq!(grand.last_sequence, Some(1));
    let finish = grand.finish.unwrap();
    assert_eq!(finish.final_state.as_deref(), Some("done"));
    assert_eq!(finish.output, serde_json::json!({"said": "went"}));
    // The journal keeps what the step did to them.
    assert_eq!(store.journal("r").unwrap()[1].children, step.children);
    // The parent's end ends the children it left, as cancelled.
    let finish = Finish {
        final_state: Some("a".to_string()),
        exit_code: 0,
        output: serde_json::Value::Null,
        unix_milliseconds: 2_000,
    };
    store
        .commit_step("r", &entry(2), &snapshot(2), Some(&finish))
        .unwrap();
    let kid = run(&store, "r/kid").finish.unwrap();
    assert_eq!(kid.exit_code, ChildChange::CANCELLED_EXIT_CODE);
    assert_eq!(kid.final_state, None);
}

/// A row of a child's name that is not the run's child is never taken over: the step that
/// would is refused whole.
#[test]
fn a_child_row_never_takes_over_another_run() {
    let scratch = Scratch::new("children-clash");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    store.create_run(&new_run("r/kid")).unwrap();
    let mut step = entry(0);
    step.children = vec![ChildChange::Started {
        path: "kid".to_string(),
        protocol_path: "/protocols/kid.yaml".to_string(),
        protocol_hash: "h".to_string(),
        inputs: serde_json::json!({}),
    }];
    let error = store
        .commit_step("r", &step, &snapshot(0), None)
        .unwrap_err();
    assert!(
        error.to_string().contains("a run `r/kid` already exists"),
        "{error}"
    );
    assert_eq!(count(&store, "journal"), 0);
    let other = store.run("r/kid").unwrap().unwrap().summary;
    assert_eq!(other.origin, Some(RunOrigin::Run));
    assert_eq!(other.protocol_path, "/protocols/p.yaml");
}

/// Every statement a step runs is compiled once per connection: after ten steps the journal's
/// insert, taken from the cache, has run ten times (a statement compiled afresh for each step
/// would count one run at most).
#[test]
fn steps_reuse_their_compiled_statements() {
    let scratch = Scratch::new("statements");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    for step in 0..10 {
        store
            .commit_step("r", &entry(step), &snapshot(step), None)
            .unwrap();
    }
    let runs = |store: &SqliteStore, sql: &str| {
        store
            .connection
            .prepare_cached(sql)
            .unwrap()
            .get_status(rusqlite::StatementStatus::Run)
    };
    assert_eq!(runs(&store, steps::INSERT_JOURNAL), 10);
    // The run's row is read before its first step only: the others follow a step this store
    // committed.
    assert_eq!(runs(&store, steps::RUN_BEFORE_STEP), 1);
    // Neither builds a temporary index when it runs (a `CHECK (status IN (...))` would).
    for sql in [steps::INSERT_JOURNAL, steps::RUN_BEFORE_STEP] {
        let mut explain = store.connection.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let parameters: Vec<rusqlite::types::Value> =
            vec![rusqlite::types::Value::Null; explain.parameter_count()];
        let opcodes: Vec<String> = explain
            .query_map(rusqlite::params_from_iter(parameters), |row| row.get(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            !opcodes.iter().any(|opcode| opcode == "OpenEphemeral"),
            "{sql}: {opcodes:?}"
        );
    }
    // Runs created and stepped in one batch have their rows read: the statement is compiled
    // once, not again for each run's id.
    let mut writes = Vec::new();
    for other in 0..5 {
        let id = format!("other-{other}");
        writes.push(Write::CreateRun(new_run(&id)));
        writes.push(step_write(&id, 0));
    }
    store.commit_batch(&writes).unwrap();
    assert_eq!(runs(&store, steps::RUN_BEFORE_STEP), 6);
    let compiled_again = store
        .connection
        .prepare_cached(steps::RUN_BEFORE_STEP)
        .unwrap()
        .get_status(rusqlite::StatementStatus::RePrepare);
    assert_eq!(compiled_again, 0);
    // A stopped run that takes a step is running again.
    store.mark_stopped("r", 2_000).unwrap();
    store
        .commit_step("r", &entry(10), &snapshot(10), None)
        .unwrap();
    let summary = store.run("r").unwrap().unwrap().summary;
    assert_eq!(
        (summary.status, summary.last_sequence),
        (RunStatus::Running, Some(10))
    );
}

/// A state unlike the one before in a way that depends on `step`: context variables changed,
/// added, removed and reordered; configuration, timers, deferred events and the run's end.
fn varied(step: u64, last: u64) -> Snapshot {
    let mut context = serde_json::Map::new();
    if step % 50 == 25 {
        context.insert("fixed".into(), "first for once".into());
    }
    context.insert("count".into(), (step / 2).into());
    context.insert(
        "log".into(),
        (0..step % 5).map(|n| n * step).collect::<Vec<_>>().into(),
    );
    if step % 7 >= 3 {
        context.insert("extra".into(), serde_json::json!({"at": step % 7}));
    }
    if step % 50 != 25 {
        context.insert("fixed".into(), "x".into());
    }
    let mut json = serde_json::json!({
        "format": 1, "protocol": "p",
        "configuration": if step % 6 < 3 { ["a"] } else { ["b"] },
        "context": context, "running": step != last, "invocations": step / 10,
    });
    if step.is_multiple_of(4) {
        json["timers"] = serde_json::json!([{"event": "tick", "deadline_unix_milliseconds": step,
            "delay_milliseconds": 5, "private": false}]);
    }
    if step % 9 == 1 {
        json["deferred"] = serde_json::json!([{"event": "later", "ticket": step}]);
    }
    if step == last {
        json["outcome"] = serde_json::json!({"final_state": "done", "exit_code": 0, "output": 1});
    }
    serde_json::from_value(json).unwrap()
}

/// The state after every step is rebuilt exactly (order of context variables included) from
/// the nearest full snapshot and the deltas after it, whether the steps were committed one by
/// one or in batches; a full snapshot is kept every `FULL_SNAPSHOT_EVERY` steps.
#[test]
fn the_state_after_every_step_is_rebuilt_exactly() {
    let scratch = Scratch::new("per-step");
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    store.create_run(&new_run("r")).unwrap();
    let last = 200;
    let states: Vec<Snapshot> = (0..=last).map(|step| varied(step, last)).collect();
    let finish = Finish {
        final_state: Some("done".to_string()),
        exit_code: 0,
        output: serde_json::json!(1),
        unix_milliseconds: 9_000,
    };
    let mut step = 0;
    while step <= last {
        // Alone, then batches of growing size, some with another run's writes between.
        let size = (step % 13 + 1).min(last + 1 - step);
        let finish_of = |step: u64| (step == last).then(|| finish.clone());
        if size == 1 {
            let finish = finish_of(step);
            store
                .commit_step("r", &entry(step), &states[step as usize], finish.as_ref())
                .unwrap();
        } else {
            let mut writes = Vec::new();
            for step in step..step + size {
                writes.push(Write::Step {
                    run: "r".to_string(),
                    entry: entry(step),
                    snapshot: Box::new(states[step as usize].clone()),
                    finish: finish_of(step),
                    child_states: Vec::new(),
                });
                if step % 3 == 0 {
                    writes.push(Write::CreateRun(new_run(&format!("other-{step}"))));
                }
            }
            store.commit_batch(&writes).unwrap();
        }
        step += size;
    }
    let text = |snapshot: &Snapshot| serde_json::to_string(snapshot).unwrap();
    for step in 0..=last {
        let rebuilt = store.snapshot_at("r", step).unwrap().unwrap();
        assert_eq!(rebuilt.sequence, step);
        assert_eq!(rebuilt.unix_milliseconds, step + 1_000);
        assert_eq!(
            text(&rebuilt.snapshot),
            text(&states[step as usize]),
            "step {step}"
        );
    }
    assert_eq!(store.snapshot_at("r", last + 1).unwrap(), None);
    let latest = store.latest_snapshot("r").unwrap().unwrap();
    assert_eq!(
        (latest.sequence, text(&latest.snapshot)),
        (last, text(&states[last as usize]))
    );
    assert_kept_in_full(
        &store,
        &[
            0,
            FULL_SNAPSHOT_EVERY as i64,
            2 * FULL_SNAPSHOT_EVERY as i64,
            192,
        ],
    );
    // A delta is smaller than the state it stands for (there are deltas only while no other
    // test of this process has registered a secret: see `assert_kept_in_full`).
    if !crate::base::secrets::active() {
        let (deltas, fulls): (i64, i64) = store
            .connection
            .query_row(
                "SELECT SUM(length(snapshot_delta)), SUM(length(snapshot)) FROM journal",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert!(deltas / (last as i64 - 3) < fulls / 4, "{deltas} {fulls}");
    }
}

/// A store file at schema version `version`, as an older protocol-run left it, open for the
/// test to write its rows (the version itself is the test's to insert).
fn store_at_version(name: &str, version: usize) -> (Scratch, Connection) {
    let scratch = Scratch::new(name);
    std::fs::create_dir_all(&scratch.0).unwrap();
    let connection = Connection::open(scratch.0.join(SqliteStore::FILE_NAME)).unwrap();
    connection
        .execute_batch("CREATE TABLE schema_version (version BIGINT NOT NULL)")
        .unwrap();
    for migration in &MIGRATIONS[..version] {
        connection.execute_batch(migration).unwrap();
    }
    (scratch, connection)
}

/// A store written before states were kept per step is brought up to date: each run's latest
/// snapshot moves to its step's journal row and is read as before; an earlier step's state,
/// never kept, is refused with a message saying so.
#[test]
fn a_store_from_before_states_per_step_keeps_its_latest_snapshots() {
    let (scratch, connection) = store_at_version("migrate", 5);
    let old = text_of(&snapshot(7));
    connection
        .execute_batch(&format!(
            "INSERT INTO schema_version VALUES (5);
             INSERT INTO runs (id, protocol_path, protocol_hash, inputs, status, started_at,
                 updated_at, last_step) VALUES ('r', '/p.yaml', 'h', '{{}}', 'stopped', 1, 2, 1);
             INSERT INTO journal (run_id, step, transitions, actions, recorded_at)
                 VALUES ('r', 0, '[]', '[]', 1), ('r', 1, '[]', '[]', 2);
             INSERT INTO snapshots VALUES ('r', 1, '{old}', 2);"
        ))
        .unwrap();
    drop(connection);
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    assert_eq!(count(&store, "snapshots"), 0);
    let latest = store.latest_snapshot("r").unwrap().unwrap();
    assert_eq!((latest.sequence, latest.snapshot), (1, snapshot(7)));
    let error = store.snapshot_at("r", 0).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: the state of run `r` after step 0 was not kept: the step was recorded before \
             protocol-run kept the state of every step",
            store.path().display()
        )
    );
    // The run goes on: its next step is kept in full, then as deltas.
    for step in 2..5 {
        store
            .commit_step("r", &entry(step), &snapshot(step), None)
            .unwrap();
    }
    assert_kept_in_full(&store, &[1, 2]);
    assert_eq!(
        store.snapshot_at("r", 4).unwrap().unwrap().snapshot,
        snapshot(4)
    );
    assert_eq!(
        store.snapshot_at("r", 1).unwrap().unwrap().snapshot,
        snapshot(7)
    );
}

fn text_of(snapshot: &Snapshot) -> String {
    serde_json::to_string(snapshot).unwrap()
}

/// A store written at schema version 6, where every step rewrote the run's row, is brought to
/// version 7 and reads the same: each run's last step and its time, a child's from its own
/// row, the states; its runs take their next steps, a stale one still refused.
#[test]
fn a_store_from_before_last_steps_were_the_journals_reads_the_same() {
    let (scratch, connection) = store_at_version("migrate-7", 6);
    let state = |step: u64| text_of(&snapshot(step));
    connection
        .execute_batch(&format!(
            "INSERT INTO schema_version VALUES (6);
             INSERT INTO runs (id, protocol_path, protocol_hash, inputs, status, started_at,
                 updated_at, last_step, last_step_at) VALUES
                 ('r', '/p.yaml', 'h', '{{}}', 'running', 1, 1002, 2, 1002),
                 ('f', '/p.yaml', 'h', '{{}}', 'finished', 2, 1001, 1, 1001);
             INSERT INTO runs (id, protocol_path, protocol_hash, inputs, status, started_at,
                 updated_at, last_step, last_step_at, origin, parent, root) VALUES
                 ('r/c', '/c.yaml', 'h', '{{}}', 'running', 1, 7, 5, 7, 'child', 'r', 'r');
             INSERT INTO journal (run_id, step, transitions, actions, recorded_at, snapshot)
                 VALUES ('r', 0, '[]', '[]', 1000, '{}'), ('r', 1, '[]', '[]', 1001, '{}'),
                 ('r', 2, '[]', '[]', 1002, '{}'), ('f', 0, '[]', '[]', 1000, '{}'),
                 ('f', 1, '[]', '[]', 1001, '{}');",
            state(0),
            state(1),
            state(2),
            state(0),
            state(1)
        ))
        .unwrap();
    drop(connection);
    let mut store = SqliteStore::open(&scratch.0).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    let last = |store: &SqliteStore, run: &str| {
        let summary = store.run_summary(run).unwrap().unwrap();
        (
            summary.status,
            summary.last_sequence,
            summary.last_step_unix_milliseconds,
        )
    };
    assert_eq!(last(&store, "r"), (RunStatus::Running, Some(2), Some(1002)));
    assert_eq!(
        last(&store, "f"),
        (RunStatus::Finished, Some(1), Some(1001))
    );
    assert_eq!(last(&store, "r/c"), (RunStatus::Running, Some(5), Some(7)));
    let listed: Vec<(String, Option<u64>)> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|run| (run.id, run.last_sequence))
        .collect();
    assert_eq!(
        listed,
        [
            ("f".to_string(), Some(1)),
            ("r/c".to_string(), Some(5)),
            ("r".to_string(), Some(2))
        ]
    );
    assert_eq!(
        store.latest_snapshot("r").unwrap().unwrap().snapshot,
        snapshot(2)
    );
    let error = store
        .commit_step("r", &entry(2), &snapshot(9), None)
        .unwrap_err();
    assert!(
        matches!(error, StoreError::StaleStep { last: 2, .. }),
        "{error}"
    );
    let error = store
        .commit_step("f", &entry(2), &snapshot(2), None)
        .unwrap_err();
    assert!(matches!(error, StoreError::RunFinished { .. }), "{error}");
    store
        .commit_step("r", &entry(3), &snapshot(3), None)
        .unwrap();
    assert_eq!(last(&store, "r"), (RunStatus::Running, Some(3), Some(1003)));
    assert_eq!(
        store.snapshot_at("r", 3).unwrap().unwrap().snapshot,
        snapshot(3)
    );
}
