//! One kit of store behaviours run against every backend: SQLite (a file) and PostgreSQL (a real server), each check through the public `Store` trait only.

use std::sync::Arc;

use protocol_run::base::durable::{ChildChange, ChildState};
use protocol_run::base::snapshot::Snapshot;
use protocol_run::store::{
    Finish, Holder, JournalEntry, JournalEvent, NewRun, PostgresStore, RunCursor, RunOrigin,
    RunStatus, SqliteStore, Store, StoreError, Unclaimed, Write,
};

use crate::support;

mod inbox;
use inbox::{
    a_holder_whose_run_was_taken_over_applies_no_entry,
    an_entry_never_applied_is_set_aside_after_its_tries,
    inbox_entries_are_applied_once_in_arrival_order,
};

/// Where a check's store lives; each `open` is a connection of its own to the same data.
trait Backend: Send + Sync {
    fn open(&self) -> Box<dyn Store>;
}

struct Sqlite(crate::support::TemporaryDirectory);

impl Backend for Sqlite {
    fn open(&self) -> Box<dyn Store> {
        Box::new(SqliteStore::open(&self.0).unwrap())
    }
}

struct Postgres(support::postgres::TestDatabase);

impl Backend for Postgres {
    fn open(&self) -> Box<dyn Store> {
        Box::new(PostgresStore::connect(self.0.url()).unwrap())
    }
}

/// Each check, once per backend: `sqlite::NAME` and `postgres::NAME`.
macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $check() {
                    let directory = crate::support::temporary_directory(
                        "store-conformance",
                        stringify!($check),
                    );
                    super::$check(std::sync::Arc::new(super::Sqlite(directory)));
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $check() {
                    let test = concat!("store_conformance::postgres::", stringify!($check));
                    if let Some(database) = crate::support::postgres::database(test) {
                        super::$check(std::sync::Arc::new(super::Postgres(database)));
                    }
                }
            )*
        }
    };
}

conformance!(
    a_run_reads_back_as_it_was_created,
    the_state_after_every_step_is_rebuilt_exactly,
    refusals_say_which_run_and_why,
    a_failing_write_of_a_batch_leaves_nothing_of_the_batch,
    a_stop_releases_the_holder_and_a_step_runs_the_run_again,
    a_claim_takes_a_run_only_from_a_holder_that_is_gone,
    children_keep_rows_of_their_own_written_with_their_parents_steps,
    a_child_row_never_takes_over_another_run,
    another_connections_steps_are_continued_exactly,
    two_connections_racing_for_one_step_commit_it_once,
    runs_are_paged_newest_first_and_directives_counted,
    pruning_deletes_only_runs_that_ended_with_all_kept_of_them,
    a_holder_whose_run_was_taken_over_writes_to_it_no_more,
    inbox_entries_are_applied_once_in_arrival_order,
    an_entry_never_applied_is_set_aside_after_its_tries,
    a_holder_whose_run_was_taken_over_applies_no_entry,
    texts_are_kept_once_per_hash_and_read_back_by_it,
    a_failed_run_reopens_with_its_redrive_step_or_not_at_all,
    telemetry_is_kept_with_its_steps_in_order_and_goes_with_its_run,
);

pub(crate) fn new_run(id: &str) -> NewRun {
    NewRun {
        id: id.to_string(),
        protocol_path: "/protocols/p.yaml".to_string(),
        protocol_hash: "fnv1a64:0".to_string(),
        protocol_text: Some("id: p".to_string()),
        read_texts: Vec::new(),
        inputs: serde_json::json!({"n": 1}),
        started_unix_milliseconds: 1_000,
        grants: Some(serde_json::json!({"exec": []})),
        origin: RunOrigin::Run,
        holder: None,
        forked_from: None,
    }
}

/// A state that changes a little from step to step, and now and then a lot: the context
/// grows, shrinks and reorders, the configuration and timers change.
fn state(step: u64) -> Snapshot {
    let mut context = serde_json::Map::new();
    context.insert("count".into(), step.into());
    if step.is_multiple_of(3) {
        context.insert(
            format!("extra{}", step % 5),
            "x".repeat(step as usize % 7).into(),
        );
    }
    if step.is_multiple_of(11) {
        context.insert("first".into(), serde_json::json!({"nested": [step, step]}));
    }
    serde_json::from_value(serde_json::json!({
        "format": 1, "protocol": "p",
        "configuration": if step.is_multiple_of(4) { vec!["a"] } else { vec!["b", "c"] },
        "context": context, "running": true
    }))
    .unwrap()
}

fn entry(sequence: u64) -> JournalEntry {
    JournalEntry {
        sequence,
        event: (sequence > 0).then(|| JournalEvent {
            name: "tick".to_string(),
            data: serde_json::json!({"n": sequence}),
        }),
        transitions: vec!["/states/a/on/tick/0".to_string()],
        actions: serde_json::json!([{"log": "went"}]),
        unix_milliseconds: 1_000 + sequence,
        children: Vec::new(),
    }
}

pub(crate) fn step(run: &str, sequence: u64) -> Write {
    Write::Step {
        run: run.to_string(),
        entry: entry(sequence),
        snapshot: Box::new(state(sequence)),
        finish: None,
        child_states: Vec::new(),
    }
}

pub(crate) fn finish(at: u64) -> Finish {
    Finish {
        final_state: Some("done".to_string()),
        exit_code: 0,
        output: serde_json::json!({"result": at}),
        unix_milliseconds: at,
    }
}

fn holder(pid: u32) -> Holder {
    Holder {
        process: "serve".to_string(),
        pid,
        lock: format!("/locks/{pid}"),
        host: None,
    }
}

fn a_run_reads_back_as_it_was_created(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    let record = store.run("r").unwrap().unwrap();
    assert_eq!(record.protocol_text.as_deref(), Some("id: p"));
    assert_eq!(record.inputs, serde_json::json!({"n": 1}));
    assert_eq!(record.grants, Some(serde_json::json!({"exec": []})));
    let summary = record.summary;
    assert_eq!(summary.status, RunStatus::Running);
    assert_eq!(summary.origin, Some(RunOrigin::Run));
    assert_eq!(summary.last_sequence, None);
    assert_eq!(store.run_summary("r").unwrap(), Some(summary.clone()));
    assert_eq!(store.list_runs().unwrap(), vec![summary]);
    assert!(store.run("other").unwrap().is_none());
    assert!(matches!(
        store.create_run(&new_run("r")),
        Err(StoreError::RunExists { .. })
    ));
    // What one connection committed, a second one reads.
    store.commit_batch(&[step("r", 0), step("r", 1)]).unwrap();
    let again = backend.open();
    let summary = again.run_summary("r").unwrap().unwrap();
    assert_eq!(summary.last_sequence, Some(1));
    assert_eq!(summary.last_step_unix_milliseconds, Some(1_001));
    assert_eq!(again.journal("r").unwrap(), vec![entry(0), entry(1)]);
}

fn the_state_after_every_step_is_rebuilt_exactly(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    // Past one full snapshot's span of deltas, in batches of several steps and one at a time.
    let last = 150;
    let mut sequence = 0;
    while sequence <= last {
        let batch: Vec<Write> = (sequence..=(sequence + sequence % 4).min(last))
            .map(|step| self::step("r", step))
            .collect();
        sequence += batch.len() as u64;
        store.commit_batch(&batch).unwrap();
    }
    let reader = backend.open();
    for store in [&store, &reader] {
        for step in 0..=last {
            let rebuilt = store.snapshot_at("r", step).unwrap().unwrap();
            assert_eq!(rebuilt.sequence, step);
            assert_eq!(rebuilt.unix_milliseconds, 1_000 + step);
            assert_eq!(rebuilt.snapshot, state(step), "the state after step {step}");
        }
        assert_eq!(store.snapshot_at("r", last + 1).unwrap(), None);
        let latest = store.latest_snapshot("r").unwrap().unwrap();
        assert_eq!((latest.sequence, latest.snapshot), (last, state(last)));
        let tail = store.journal_tail("r", 3).unwrap();
        assert_eq!(tail, vec![entry(148), entry(149), entry(150)]);
        let before = store.journal_before("r", 10, 2).unwrap();
        assert_eq!(before, vec![entry(8), entry(9)]);
        assert_eq!(store.journal("r").unwrap().len(), 151);
    }
}

fn refusals_say_which_run_and_why(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    let unknown = store.commit_step("nobody", &entry(0), &state(0), None);
    assert!(
        matches!(&unknown, Err(StoreError::UnknownRun { run, .. }) if run == "nobody"),
        "{unknown:?}"
    );
    store.create_run(&new_run("r")).unwrap();
    store.commit_batch(&[step("r", 0), step("r", 1)]).unwrap();
    let stale = store.commit_step("r", &entry(1), &state(1), None);
    assert!(
        matches!(
            &stale,
            Err(StoreError::StaleStep {
                sequence: 1,
                last: 1,
                ..
            })
        ),
        "{stale:?}"
    );
    store
        .commit_step("r", &entry(2), &state(2), Some(&finish(5_000)))
        .unwrap();
    let summary = store.run_summary("r").unwrap().unwrap();
    assert_eq!(summary.status, RunStatus::Finished);
    assert_eq!(summary.finish, Some(finish(5_000)));
    assert_eq!(summary.last_sequence, Some(2));
    for refused in [
        store.commit_step("r", &entry(3), &state(3), None),
        store.mark_stopped("r", 6_000),
        store.finish_run("r", &finish(6_000)),
    ] {
        assert!(
            matches!(&refused, Err(StoreError::RunFinished { run, .. }) if run == "r"),
            "{refused:?}"
        );
    }
    assert!(matches!(
        store.mark_running("nobody", 1),
        Err(StoreError::UnknownRun { .. })
    ));
}

fn a_failing_write_of_a_batch_leaves_nothing_of_the_batch(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    store.commit_batch(&[step("r", 0)]).unwrap();
    let batch = [
        Write::CreateRun(new_run("s")),
        step("s", 0),
        step("r", 1),
        // Refused: step 1 comes again.
        step("r", 1),
    ];
    assert!(matches!(
        store.commit_batch(&batch),
        Err(StoreError::StaleStep { .. })
    ));
    assert!(store.run("s").unwrap().is_none());
    assert_eq!(store.journal("r").unwrap(), vec![entry(0)]);
    // The store goes on from what was committed: the refused batch's states are not the base
    // of the next step's.
    store.commit_batch(&[step("r", 1), step("r", 2)]).unwrap();
    let reader = backend.open();
    for step in 0..=2 {
        let rebuilt = reader.snapshot_at("r", step).unwrap().unwrap();
        assert_eq!(rebuilt.snapshot, state(step));
    }
}

fn a_stop_releases_the_holder_and_a_step_runs_the_run_again(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(7));
    store.create_run(&held).unwrap();
    assert_eq!(
        store
            .latest_unfinished_run("/protocols/p.yaml")
            .unwrap()
            .map(|run| run.id),
        Some("r".to_string())
    );
    store.commit_batch(&[step("r", 0)]).unwrap();
    store.mark_stopped("r", 2_000).unwrap();
    let summary = store.run_summary("r").unwrap().unwrap();
    assert_eq!((summary.status, summary.holder), (RunStatus::Stopped, None));
    // Still unfinished: a resume finds it.
    assert!(
        store
            .latest_unfinished_run("/protocols/p.yaml")
            .unwrap()
            .is_some()
    );
    store.commit_batch(&[step("r", 1)]).unwrap();
    assert_eq!(
        store.run_summary("r").unwrap().unwrap().status,
        RunStatus::Running
    );
    store.finish_run("r", &finish(3_000)).unwrap();
    assert!(
        store
            .latest_unfinished_run("/protocols/p.yaml")
            .unwrap()
            .is_none()
    );
}

fn a_claim_takes_a_run_only_from_a_holder_that_is_gone(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    let runs = ["r".to_string(), "s".to_string(), "missing".to_string()];
    store.create_run(&new_run("r")).unwrap();
    store.create_run(&new_run("s")).unwrap();
    let claimed = store.claim_runs(&runs, &holder(1), &mut |_| true).unwrap();
    assert_eq!(claimed, [None, None, None]);
    assert_eq!(
        store.run_summary("r").unwrap().unwrap().holder,
        Some(holder(1))
    );
    // Another host, while the first still holds them: left to it, named.
    let mut other = backend.open();
    let claimed = other
        .claim_runs(&runs[..2], &holder(2), &mut |_| true)
        .unwrap();
    assert_eq!(
        claimed,
        [
            Some(Unclaimed::Held(holder(1))),
            Some(Unclaimed::Held(holder(1)))
        ]
    );
    // Once the first is gone, taken.
    let claimed = other
        .claim_runs(&runs[..1], &holder(2), &mut |seen| *seen != holder(1))
        .unwrap();
    assert_eq!(claimed, [None]);
    assert_eq!(
        store.run_summary("r").unwrap().unwrap().holder,
        Some(holder(2))
    );
    // A release by a holder that no longer holds the run changes nothing.
    store.release_runs(&runs[..2], &holder(1)).unwrap();
    assert_eq!(
        store.run_summary("r").unwrap().unwrap().holder,
        Some(holder(2))
    );
    assert_eq!(store.run_summary("s").unwrap().unwrap().holder, None);
    // A run that finished after a host read it unfinished is not taken by its claim.
    store.finish_run("s", &finish(2_000)).unwrap();
    let claimed = other
        .claim_runs(&runs[1..2], &holder(2), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [Some(Unclaimed::Finished)]);
    assert_eq!(store.run_summary("s").unwrap().unwrap().holder, None);
}

fn started(path: &str) -> ChildChange {
    ChildChange::Started {
        path: path.to_string(),
        protocol_path: format!("/protocols/{path}.yaml"),
        protocol_hash: "h".to_string(),
        inputs: serde_json::json!({"for": path}),
    }
}

fn children_keep_rows_of_their_own_written_with_their_parents_steps(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    let mut first = entry(0);
    first.children = vec![started("kid"), started("kid/grand")];
    let mut parent_state = state(0);
    parent_state.children = serde_json::from_value(serde_json::json!([
        {"id": "kid", "inputs": [], "sequence": 0, "committed_unix_milliseconds": 1000}
    ]))
    .unwrap();
    let kid_state = ChildState {
        path: "kid".to_string(),
        sequence: 0,
        committed_unix_milliseconds: 1_000,
        snapshot: state(40),
    };
    store
        .commit_batch(&[Write::Step {
            run: "r".to_string(),
            entry: first.clone(),
            snapshot: Box::new(parent_state.clone()),
            finish: None,
            child_states: vec![kid_state],
        }])
        .unwrap();
    let summary = |store: &dyn Store, id: &str| store.run_summary(id).unwrap().unwrap();
    let kid = summary(&*store, "r/kid");
    assert_eq!(kid.parent.as_deref(), Some("r"));
    assert_eq!(kid.origin, Some(RunOrigin::Child));
    assert_eq!(kid.protocol_path, "/protocols/kid.yaml");
    assert_eq!(
        store.run("r/kid").unwrap().unwrap().inputs,
        serde_json::json!({"for": "kid"})
    );
    assert_eq!(
        summary(&*store, "r/kid/grand").parent.as_deref(),
        Some("r/kid")
    );
    // The parent's latest snapshot has the child's state put back from the child's row.
    let latest = store.latest_snapshot("r").unwrap().unwrap();
    let restored = latest.snapshot.children[0].snapshot.as_deref().unwrap();
    assert_eq!(*restored, state(40));
    assert_eq!(
        store.latest_snapshot("r/kid").unwrap().unwrap().snapshot,
        state(40)
    );
    // A child is held with its parent: never claimed on its own.
    let claimed = store
        .claim_runs(&["r/kid".to_string()], &holder(1), &mut |_| true)
        .unwrap();
    assert_eq!(
        claimed,
        [Some(Unclaimed::Child {
            parent: "r".to_string()
        })]
    );
    // Stopping the parent stops its children; resuming it resumes them.
    store.mark_stopped("r", 1_500).unwrap();
    assert_eq!(summary(&*store, "r/kid/grand").status, RunStatus::Stopped);
    store.mark_running("r", 1_600).unwrap();
    assert_eq!(summary(&*store, "r/kid/grand").status, RunStatus::Running);
    let mut second = entry(1);
    second.children = vec![
        ChildChange::Stepped {
            path: "kid/grand".to_string(),
            sequence: 1,
        },
        ChildChange::Ended {
            path: "kid".to_string(),
            final_state: Some("done".to_string()),
            exit_code: 0,
            output: serde_json::json!({"said": "went"}),
        },
    ];
    store.commit_step("r", &second, &state(1), None).unwrap();
    let kid = summary(&*store, "r/kid").finish.unwrap();
    assert_eq!(kid.final_state.as_deref(), Some("done"));
    assert_eq!(kid.output, serde_json::json!({"said": "went"}));
    // Its own child ended with it, as cancelled.
    let grand = summary(&*store, "r/kid/grand");
    assert_eq!(grand.last_sequence, Some(1));
    assert_eq!(
        grand.finish.unwrap().exit_code,
        ChildChange::CANCELLED_EXIT_CODE
    );
    assert_eq!(store.journal("r").unwrap()[1].children, second.children);
    // The parent's end ends the children it left, as cancelled.
    let mut third = entry(2);
    third.children = vec![started("late")];
    store.commit_step("r", &third, &state(2), None).unwrap();
    store
        .commit_step("r", &entry(3), &state(3), Some(&finish(9_000)))
        .unwrap();
    let late = summary(&*store, "r/late").finish.unwrap();
    assert_eq!(late.exit_code, ChildChange::CANCELLED_EXIT_CODE);
    assert_eq!(late.final_state, None);
}

fn a_child_row_never_takes_over_another_run(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    store.create_run(&new_run("r/kid")).unwrap();
    let mut first = entry(0);
    first.children = vec![started("kid")];
    let refused = store.commit_step("r", &first, &state(0), None);
    assert!(
        matches!(&refused, Err(StoreError::RunExists { run, .. }) if run == "r/kid"),
        "{refused:?}"
    );
    // Refused whole: not even the parent's step was kept.
    assert!(store.journal("r").unwrap().is_empty());
    let other = store.run_summary("r/kid").unwrap().unwrap();
    assert_eq!((other.origin, other.parent), (Some(RunOrigin::Run), None));
}

fn another_connections_steps_are_continued_exactly(backend: Arc<dyn Backend>) {
    let mut first = backend.open();
    let mut second = backend.open();
    first.create_run(&new_run("r")).unwrap();
    first
        .commit_batch(&[step("r", 0), step("r", 1), step("r", 2)])
        .unwrap();
    // A second host takes the run over and steps it...
    second.commit_batch(&[step("r", 3), step("r", 4)]).unwrap();
    // ...and the first, which last wrote step 2, writes step 5: its state after step 2 is not
    // the run's last, so step 5 is kept in full rather than as a delta of it.
    first.commit_batch(&[step("r", 5), step("r", 6)]).unwrap();
    for store in [&first, &second] {
        for step in 0..=6 {
            let rebuilt = store.snapshot_at("r", step).unwrap().unwrap();
            assert_eq!(rebuilt.snapshot, state(step), "the state after step {step}");
        }
    }
}

fn two_connections_racing_for_one_step_commit_it_once(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    store.create_run(&new_run("r")).unwrap();
    store.commit_batch(&[step("r", 0)]).unwrap();
    let rounds = 20;
    for round in 1..=rounds {
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let backend = backend.clone();
                std::thread::spawn(move || {
                    let mut store = backend.open();
                    store.commit_batch(&[step("r", round)])
                })
            })
            .collect();
        let results: Vec<_> = racers
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .collect();
        let committed = results.iter().filter(|result| result.is_ok()).count();
        assert_eq!(committed, 1, "round {round}: {results:?}");
        for result in results.iter().filter_map(|result| result.as_ref().err()) {
            assert!(
                matches!(
                    result,
                    StoreError::StaleStep { .. } | StoreError::Busy { .. }
                ),
                "round {round}: {result:?}"
            );
        }
    }
    let journal = store.journal("r").unwrap();
    assert_eq!(
        journal
            .iter()
            .map(|entry| entry.sequence)
            .collect::<Vec<_>>(),
        (0..=rounds).collect::<Vec<_>>()
    );
}

fn runs_are_paged_newest_first_and_directives_counted(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    for (index, id) in ["a", "b", "c", "d"].iter().enumerate() {
        let mut run = new_run(id);
        run.started_unix_milliseconds = 1_000 + index as u64 / 2;
        if *id == "d" {
            run.protocol_path = "/protocols/other.yaml".to_string();
        }
        store.create_run(&run).unwrap();
    }
    let ids = |runs: Vec<protocol_run::store::RunSummary>| {
        runs.into_iter().map(|run| run.id).collect::<Vec<_>>()
    };
    let page = store
        .runs_of_protocols(&["/protocols/p.yaml"], None, 2)
        .unwrap();
    assert_eq!(ids(page), ["c", "b"]);
    let after = RunCursor {
        started_unix_milliseconds: 1_000,
        id: "b".to_string(),
    };
    let page = store
        .runs_of_protocols(&["/protocols/p.yaml"], Some(&after), 2)
        .unwrap();
    assert_eq!(ids(page), ["a"]);
    let both = ["/protocols/p.yaml", "/protocols/other.yaml"];
    assert_eq!(
        ids(store.runs_of_protocols(&both, None, 10).unwrap()),
        ["d", "c", "b", "a"]
    );
    assert!(store.runs_of_protocols(&[], None, 10).unwrap().is_empty());
    let mut directed = entry(0);
    directed.actions = serde_json::json!([{"directive": "ask"}, {"log": "x"}, "directive"]);
    store.commit_step("a", &directed, &state(0), None).unwrap();
    let mut plain = entry(1);
    plain.actions = serde_json::json!({"directive": "not a list"});
    store.commit_step("a", &plain, &state(1), None).unwrap();
    let mut more = entry(2);
    more.actions = serde_json::json!([{"directive": null}, {"directive": {"to": "b"}}]);
    store.commit_step("a", &more, &state(2), None).unwrap();
    assert_eq!(store.directives_before("a", 0).unwrap(), 0);
    assert_eq!(store.directives_before("a", 2).unwrap(), 1);
    assert_eq!(store.directives_before("a", 3).unwrap(), 3);
}

fn pruning_deletes_only_runs_that_ended_with_all_kept_of_them(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    // Ended at 2,000, 3,000 and 4,000; one stopped at 2,500; one still running.
    for (id, ended) in [("old", 2_000), ("middle", 3_000), ("new", 4_000)] {
        store.create_run(&new_run(id)).unwrap();
        let mut first = entry(0);
        first.children = vec![started("kid")];
        let kid = ChildState {
            path: "kid".to_string(),
            sequence: 0,
            committed_unix_milliseconds: 1_000,
            snapshot: state(1),
        };
        store
            .commit_batch(&[Write::Step {
                run: id.to_string(),
                entry: first,
                snapshot: Box::new(state(0)),
                finish: None,
                child_states: vec![kid],
            }])
            .unwrap();
        store
            .commit_step(id, &entry(1), &state(1), Some(&finish(ended)))
            .unwrap();
    }
    store.create_run(&new_run("stopped")).unwrap();
    store.mark_stopped("stopped", 2_500).unwrap();
    store.create_run(&new_run("live")).unwrap();
    let finished = [RunStatus::Finished];
    // A bounded batch, oldest first.
    assert_eq!(store.prune_runs(3_500, &finished, 1).unwrap(), ["old"]);
    assert_eq!(store.prune_runs(3_500, &finished, 10).unwrap(), ["middle"]);
    assert!(store.prune_runs(3_500, &finished, 10).unwrap().is_empty());
    for gone in ["old", "old/kid", "middle", "middle/kid"] {
        assert!(store.run(gone).unwrap().is_none(), "{gone}");
        assert!(store.journal(gone).unwrap().is_empty(), "{gone}");
        assert!(store.latest_snapshot(gone).unwrap().is_none(), "{gone}");
    }
    assert_eq!(store.journal("new").unwrap().len(), 2);
    assert_eq!(
        store.latest_snapshot("new/kid").unwrap().unwrap().snapshot,
        state(1)
    );
    // A running run is never pruned, even when asked for; a stopped one only when asked for.
    let everything = [RunStatus::Running, RunStatus::Stopped, RunStatus::Finished];
    assert!(store.prune_runs(2_000, &everything, 10).unwrap().is_empty());
    assert!(
        store
            .prune_runs(u64::MAX / 2, &[RunStatus::Running], 10)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.prune_runs(u64::MAX / 2, &everything, 10).unwrap(),
        ["stopped", "new"]
    );
    let left: Vec<String> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(left, ["live"]);
    // The store goes on: a run of a pruned id can be created again.
    store.create_run(&new_run("old")).unwrap();
}

fn a_holder_whose_run_was_taken_over_writes_to_it_no_more(backend: Arc<dyn Backend>) {
    let mut first = backend.open();
    let mut second = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(1));
    first.create_run(&held).unwrap();
    first.commit_batch(&[step("r", 0)]).unwrap();
    // The first holder is deemed gone (paused past its lease, partitioned): a second takes the
    // run over, and the run's fencing token moves on.
    let claimed = second
        .claim_runs(&["r".to_string()], &holder(2), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    let fenced = |result: Result<(), StoreError>, what: &str| {
        assert!(
            matches!(&result, Err(StoreError::Fenced { run, held: 0, current: 1, .. }) if run == "r"),
            "{what}: {result:?}"
        );
    };
    // The first comes back: whatever it writes is refused, and leaves nothing.
    fenced(first.commit_batch(&[step("r", 1)]), "a step");
    fenced(
        first.commit_step("r", &entry(1), &state(1), None),
        "a single step",
    );
    fenced(first.mark_stopped("r", 5_000), "a stop");
    fenced(first.finish_run("r", &finish(5_000)), "a finish");
    assert_eq!(first.journal("r").unwrap(), vec![entry(0)]);
    let summary = first.run_summary("r").unwrap().unwrap();
    assert_eq!(
        (summary.status, summary.holder),
        (RunStatus::Running, Some(holder(2)))
    );
    // The new holder goes on where the run was.
    second.commit_batch(&[step("r", 1), step("r", 2)]).unwrap();
    // Claimed back, the first writes again, and the second no longer does.
    let claimed = first
        .claim_runs(&["r".to_string()], &holder(1), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    first.commit_batch(&[step("r", 3)]).unwrap();
    let refused = second.commit_batch(&[step("r", 4)]);
    assert!(
        matches!(
            &refused,
            Err(StoreError::Fenced {
                held: 1,
                current: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(first.journal("r").unwrap().len(), 4);
    for step in 0..=3 {
        let rebuilt = second.snapshot_at("r", step).unwrap().unwrap();
        assert_eq!(rebuilt.snapshot, state(step));
    }
}

/// A redrive (`Write::Reopen` with the step that records it, one batch): a failed run, which
/// no claim takes, is claimed by its reopening, runs again with its end cleared, and is held
/// under a new fencing token; or, when the step is refused or another redrive reopened it
/// first, stays as it was. An unfinished run is reopened only by the store that claimed it.
fn a_failed_run_reopens_with_its_redrive_step_or_not_at_all(backend: Arc<dyn Backend>) {
    let mut first = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(1));
    first.create_run(&held).unwrap();
    let failed = Finish {
        final_state: None,
        exit_code: 76,
        output: serde_json::json!({"error": {"event": "error.execution"}}),
        unix_milliseconds: 2_000,
    };
    first.commit_batch(&[step("r", 0), step("r", 1)]).unwrap();
    first.finish_run("r", &failed).unwrap();
    let reopen = |by: u32| Write::Reopen {
        run: "r".to_string(),
        unix_milliseconds: 3_000,
        holder: holder(by),
    };
    // A step that is not the run's next: nothing of the batch is kept.
    let refused = first.commit_batch(&[reopen(1), step("r", 1)]);
    assert!(
        matches!(refused, Err(StoreError::StaleStep { .. })),
        "{refused:?}"
    );
    let summary = first.run_summary("r").unwrap().unwrap();
    assert_eq!(summary.status, RunStatus::Finished);
    assert_eq!(summary.finish.unwrap().exit_code, 76);
    assert_eq!((summary.redrives, summary.holder), (0, None));
    assert_eq!(first.journal("r").unwrap().len(), 2);
    // Two redrives at once: the first to commit reopens the run, the other reopens nothing.
    let mut second = backend.open();
    second.commit_batch(&[reopen(2), step("r", 2)]).unwrap();
    let late = first.commit_batch(&[reopen(1), step("r", 2)]);
    assert!(matches!(late, Err(StoreError::Database { .. })), "{late:?}");
    assert!(first.reopen_run("r", 3_000, &holder(1)).is_err());
    let summary = backend.open().run_summary("r").unwrap().unwrap();
    assert_eq!(summary.status, RunStatus::Running);
    assert_eq!(summary.finish, None);
    assert_eq!(summary.last_sequence, Some(2));
    assert_eq!((summary.redrives, summary.holder), (1, Some(holder(2))));
    assert_eq!(
        second.snapshot_at("r", 2).unwrap().unwrap().snapshot,
        state(2)
    );
    // The reopening's token is the redrive's: it writes on, until another claims the run.
    second.commit_batch(&[step("r", 3)]).unwrap();
    let mut third = backend.open();
    let claimed = third
        .claim_runs(&["r".to_string()], &holder(3), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    let fenced = second.commit_batch(&[step("r", 4)]);
    assert!(
        matches!(fenced, Err(StoreError::Fenced { .. })),
        "{fenced:?}"
    );
    // A stopped run is reopened by the store that claimed it.
    third.mark_stopped("r", 4_000).unwrap();
    let claimed = third
        .claim_runs(&["r".to_string()], &holder(3), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    third.commit_batch(&[reopen(3), step("r", 4)]).unwrap();
    third.commit_batch(&[step("r", 5)]).unwrap();
    let summary = third.run_summary("r").unwrap().unwrap();
    assert_eq!((summary.status, summary.redrives), (RunStatus::Running, 2));
}

fn telemetry(run: &str, lines: &str) -> Write {
    Write::Telemetry {
        run: run.to_string(),
        lines: lines.to_string(),
    }
}

fn telemetry_is_kept_with_its_steps_in_order_and_goes_with_its_run(backend: Arc<dyn Backend>) {
    let (mut first, mut second) = (backend.open(), backend.open());
    let mut held = new_run("t");
    held.holder = Some(holder(1));
    first.create_run(&held).unwrap();
    assert!(first.telemetry("t").unwrap().is_empty());
    first
        .commit_batch(&[step("t", 0), telemetry("t", "{\"n\":0}\n")])
        .unwrap();
    // A batch refused (its step is stale) keeps none of its telemetry.
    assert!(
        first
            .commit_batch(&[step("t", 0), telemetry("t", "{\"lost\":true}\n")])
            .is_err()
    );
    // Another holder takes the run over and goes on: its parts come after the first's, which
    // may write no more.
    let claimed = second
        .claim_runs(&["t".to_string()], &holder(2), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    assert!(matches!(
        first.append_telemetry("t", "{\"late\":true}\n"),
        Err(StoreError::Fenced { .. })
    ));
    second
        .commit_batch(&[step("t", 1), telemetry("t", "{\"n\":1}\n{\"n\":2}\n")])
        .unwrap();
    second
        .commit_step("t", &entry(2), &state(2), Some(&finish(5_000)))
        .unwrap();
    // What is recorded after the last step (the finish) is kept too.
    second.append_telemetry("t", "{\"n\":3}\n").unwrap();
    let parts = ["{\"n\":0}\n", "{\"n\":1}\n{\"n\":2}\n", "{\"n\":3}\n"];
    assert_eq!(first.telemetry("t").unwrap(), parts);
    assert_eq!(second.telemetry("t").unwrap(), parts);
    // Telemetry names a run the store has.
    assert!(second.append_telemetry("unknown", "{}\n").is_err());
    assert_eq!(
        second
            .prune_runs(6_000, &[RunStatus::Finished], 10)
            .unwrap(),
        ["t"]
    );
    assert!(first.telemetry("t").unwrap().is_empty());
}

/// Leases are the shared store's: a holder on another machine lives while its lease does.
mod leases {
    use super::*;

    fn leased(pid: u32, lease: &str) -> Holder {
        Holder {
            host: Some(lease.to_string()),
            ..holder(pid)
        }
    }

    /// Whether `lease` has run out by the database's clock.
    fn ran_out(database: &support::postgres::TestDatabase, lease: &str) -> bool {
        let mut client = database.connect();
        let row = client
            .query_one(
                "SELECT expires_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT \
                 FROM hosts WHERE id = $1",
                &[&lease],
            )
            .unwrap();
        row.get(0)
    }

    #[test]
    fn a_host_whose_lease_ran_out_writes_nothing_and_its_runs_are_taken_over() {
        let test = "store_conformance::leases::a_host_whose_lease_ran_out_writes_nothing_and_its_runs_are_taken_over";
        let Some(database) = support::postgres::database(test) else {
            return;
        };
        let open = || PostgresStore::connect(database.url()).unwrap();
        let (mut first, mut second) = (open(), open());
        first.renew_lease("host-a", 60_000).unwrap();
        second.renew_lease("host-b", 60_000).unwrap();
        let mut run = new_run("r");
        run.holder = Some(leased(1, "host-a"));
        first.create_run(&run).unwrap();
        first.commit_batch(&[step("r", 0)]).unwrap();
        // While host-a's lease lasts, its run is its own for a host on another machine (which
        // cannot probe its lock file: `holds` says live).
        let claimed = second
            .claim_runs(&["r".to_string()], &leased(2, "host-b"), &mut |_| true)
            .unwrap();
        assert_eq!(claimed, [Some(Unclaimed::Held(leased(1, "host-a")))]);
        // On host-a's own machine its lock file tells at once: killed, its lock is free, and a
        // run of its is taken while its lease still lasts.
        let mut killed = new_run("s");
        killed.holder = Some(leased(1, "host-a"));
        first.create_run(&killed).unwrap();
        let claimed = second
            .claim_runs(&["s".to_string()], &leased(2, "host-b"), &mut |_| false)
            .unwrap();
        assert_eq!(claimed, [None]);
        // host-a is paused past its lease (here: renewed for a moment, then left).
        first.renew_lease("host-a", 1).unwrap();
        support::eventually("host-a's lease runs out", || {
            ran_out(&database, "host-a").then_some(())
        });
        // It writes nothing more, even before anyone took its run.
        let refused = first.commit_batch(&[step("r", 1)]);
        assert!(
            matches!(&refused, Err(StoreError::LeaseLost { host, .. }) if host == "host-a"),
            "{refused:?}"
        );
        assert!(matches!(
            first.renew_lease("host-a", 60_000),
            Err(StoreError::LeaseLost { .. })
        ));
        assert!(matches!(
            first.mark_stopped("r", 9_000),
            Err(StoreError::LeaseLost { .. })
        ));
        // host-b takes the run over and goes on from its last committed step.
        let claimed = second
            .claim_runs(&["r".to_string()], &leased(2, "host-b"), &mut |_| true)
            .unwrap();
        assert_eq!(claimed, [None]);
        second.commit_batch(&[step("r", 1)]).unwrap();
        assert_eq!(second.journal("r").unwrap(), vec![entry(0), entry(1)]);
        assert_eq!(
            second.run_summary("r").unwrap().unwrap().holder,
            Some(leased(2, "host-b"))
        );
    }
}

/// The texts runs started with are kept once per content hash, whether a run is created alone
/// or in a batch, and read back by hash, on another connection too; a run's record has its
/// protocol's text.
fn texts_are_kept_once_per_hash_and_read_back_by_it(backend: Arc<dyn Backend>) {
    use protocol_run::store::content_hash;
    let library: Arc<str> = Arc::from("blocks: {}\n");
    let with_library = |id: &str| NewRun {
        read_texts: vec![library.clone()],
        ..new_run(id)
    };
    let mut store = backend.open();
    store.create_run(&with_library("alone")).unwrap();
    store
        .commit_batch(&[
            Write::CreateRun(with_library("first")),
            Write::CreateRun(with_library("second")),
        ])
        .unwrap();
    let again = backend.open();
    let hashes = [
        content_hash("id: p"),
        content_hash(&library),
        content_hash("never kept"),
    ];
    let kept = again.protocol_texts(&hashes).unwrap();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[&hashes[0]], "id: p");
    assert_eq!(kept[&hashes[1]], *library);
    for run in ["alone", "first", "second"] {
        let record = again.run(run).unwrap().unwrap();
        assert_eq!(record.protocol_text.as_deref(), Some("id: p"), "{run}");
    }
}
