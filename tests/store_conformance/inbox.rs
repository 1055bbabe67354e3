//! The kit's checks of a run's inbox: arrival order, each entry applied once and only by the run's holder, entries that keep failing set aside, and the inbox pruned with its run.

use std::sync::Arc;

use protocol_run::store::{InboxScope, InboxState, RunStatus, StoreError, Write};

use super::{Backend, finish, holder, new_run, step};

const PROTOCOL: &str = "/protocols/p.yaml";

fn apply(run: &str, entry: u64, step: Option<u64>) -> Write {
    Write::ApplyInbox {
        run: run.to_string(),
        entry,
        step,
        outcome: serde_json::json!({"event": "tick", "outcome": "taken"}),
        output: format!("{{\"instance\":\"{run}\",\"entry\":{entry}}}\n"),
    }
}

fn numbers(entries: &[protocol_run::store::InboxEntry]) -> Vec<(u64, u32)> {
    entries
        .iter()
        .map(|entry| (entry.entry, entry.tries))
        .collect()
}

pub(super) fn inbox_entries_are_applied_once_in_arrival_order(backend: Arc<dyn Backend>) {
    let mut holder_store = backend.open();
    let mut sender = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(1));
    holder_store.create_run(&held).unwrap();
    holder_store.commit_batch(&[step("r", 0)]).unwrap();
    for n in 1..=3 {
        let data = serde_json::json!({"n": n});
        assert_eq!(sender.enqueue_event("r", "tick", &data, 2_000).unwrap(), n);
    }
    let unknown = sender.enqueue_event("missing", "tick", &serde_json::json!({}), 2_000);
    assert!(
        matches!(&unknown, Err(StoreError::UnknownRun { run, .. }) if run == "missing"),
        "{unknown:?}"
    );
    // Only the run's holder takes its entries, and only for the protocol it serves.
    let other = holder_store
        .take_inbox(&holder(2), InboxScope::Protocol(PROTOCOL), 10)
        .unwrap();
    assert!(other.entries.is_empty() && other.set_aside.is_empty());
    let elsewhere = holder_store
        .take_inbox(
            &holder(1),
            InboxScope::Protocol("/protocols/other.yaml"),
            10,
        )
        .unwrap();
    assert!(elsewhere.entries.is_empty());
    // A take of one run's inbox (an `mcp` server's fleet of one run) leaves the others'.
    let mut beside = new_run("beside");
    beside.holder = Some(holder(1));
    holder_store.create_run(&beside).unwrap();
    sender
        .enqueue_event("beside", "tick", &serde_json::json!({}), 2_000)
        .unwrap();
    let alone = holder_store
        .take_inbox(&holder(1), InboxScope::Run("beside"), 10)
        .unwrap();
    assert_eq!(numbers(&alone.entries), [(1, 1)]);
    assert_eq!(alone.entries[0].run, "beside");
    holder_store
        .commit_batch(&[apply("beside", 1, None)])
        .unwrap();
    let taken = holder_store
        .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 2)
        .unwrap();
    assert_eq!(numbers(&taken.entries), [(1, 1), (2, 1)]);
    assert_eq!(taken.entries[0].data, serde_json::json!({"n": 1}));
    assert_eq!(taken.entries[0].event, "tick");
    holder_store
        .commit_batch(&[
            step("r", 1),
            apply("r", 1, Some(1)),
            step("r", 2),
            apply("r", 2, Some(2)),
        ])
        .unwrap();
    // Applied once: a second application is refused, and its whole batch with it.
    let again = holder_store.commit_batch(&[step("r", 3), apply("r", 1, Some(3))]);
    assert!(
        matches!(&again, Err(StoreError::InboxEntryNotWaiting { run, entry: 1, .. }) if run == "r"),
        "{again:?}"
    );
    assert_eq!(holder_store.journal("r").unwrap().len(), 3);
    let states = sender
        .inbox_states(&[
            ("r".to_string(), 1),
            ("r".to_string(), 3),
            ("r".to_string(), 9),
        ])
        .unwrap();
    assert_eq!(
        states.len(),
        2,
        "an entry the store does not have is left out"
    );
    assert_eq!(
        states[0].state,
        InboxState::Applied {
            outcome: serde_json::json!({"event": "tick", "outcome": "taken"}),
            output: "{\"instance\":\"r\",\"entry\":1}\n".to_string(),
            step: Some(1),
        }
    );
    assert_eq!(states[1].state, InboxState::Pending);
    // The next take goes on with what is left, in order.
    let taken = holder_store
        .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 10)
        .unwrap();
    assert_eq!(numbers(&taken.entries), [(3, 1)]);
    holder_store
        .commit_batch(&[step("r", 3), apply("r", 3, Some(3))])
        .unwrap();
    assert!(
        holder_store
            .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 10)
            .unwrap()
            .entries
            .is_empty()
    );
    // A finished run takes no more events, and its inbox goes with it when it is pruned.
    holder_store.finish_run("r", &finish(3_000)).unwrap();
    let late = sender.enqueue_event("r", "tick", &serde_json::json!({}), 4_000);
    assert!(
        matches!(&late, Err(StoreError::RunFinished { run, .. }) if run == "r"),
        "{late:?}"
    );
    let pruned = sender
        .prune_runs(10_000, &[RunStatus::Finished], 10)
        .unwrap();
    assert_eq!(pruned, ["r"]);
    assert!(
        sender
            .inbox_states(&[("r".to_string(), 1)])
            .unwrap()
            .is_empty()
    );
}

pub(super) fn an_entry_never_applied_is_set_aside_after_its_tries(backend: Arc<dyn Backend>) {
    let mut store = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(1));
    store.create_run(&held).unwrap();
    store
        .enqueue_event("r", "poison", &serde_json::json!({}), 2_000)
        .unwrap();
    store
        .enqueue_event("r", "fine", &serde_json::json!({}), 2_000)
        .unwrap();
    // Its host dies each time before the step applying it commits: taken again, counted.
    let max = protocol_run::store::inbox::MAX_TRIES;
    for tries in 1..=max {
        let taken = store
            .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 1)
            .unwrap();
        assert_eq!(numbers(&taken.entries), [(1, tries)]);
        assert!(taken.set_aside.is_empty());
    }
    // Once more is too many: set aside, reported once, and the entry after it comes next.
    let taken = store
        .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 1)
        .unwrap();
    assert!(taken.entries.is_empty());
    assert_eq!(numbers(&taken.set_aside), [(1, max + 1)]);
    let taken = store
        .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 10)
        .unwrap();
    assert_eq!(numbers(&taken.entries), [(2, 1)]);
    assert!(taken.set_aside.is_empty());
    let states = store.inbox_states(&[("r".to_string(), 1)]).unwrap();
    assert_eq!(states[0].state, InboxState::SetAside);
    let refused = store.commit_batch(&[apply("r", 1, None)]);
    assert!(
        matches!(
            &refused,
            Err(StoreError::InboxEntryNotWaiting { entry: 1, .. })
        ),
        "{refused:?}"
    );
}

pub(super) fn a_holder_whose_run_was_taken_over_applies_no_entry(backend: Arc<dyn Backend>) {
    let mut first = backend.open();
    let mut second = backend.open();
    let mut held = new_run("r");
    held.holder = Some(holder(1));
    first.create_run(&held).unwrap();
    first.commit_batch(&[step("r", 0)]).unwrap();
    first
        .enqueue_event("r", "tick", &serde_json::json!({}), 2_000)
        .unwrap();
    let taken = first
        .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 10)
        .unwrap();
    assert_eq!(numbers(&taken.entries), [(1, 1)]);
    // The first holder pauses; a second takes the run over and, with it, its inbox.
    let claimed = second
        .claim_runs(&["r".to_string()], &holder(2), &mut |_| false)
        .unwrap();
    assert_eq!(claimed, [None]);
    let refused = first.commit_batch(&[step("r", 1), apply("r", 1, Some(1))]);
    assert!(
        matches!(&refused, Err(StoreError::Fenced { .. })),
        "{refused:?}"
    );
    assert!(
        first
            .take_inbox(&holder(1), InboxScope::Protocol(PROTOCOL), 10)
            .unwrap()
            .entries
            .is_empty()
    );
    let taken = second
        .take_inbox(&holder(2), InboxScope::Protocol(PROTOCOL), 10)
        .unwrap();
    assert_eq!(numbers(&taken.entries), [(1, 2)]);
    second
        .commit_batch(&[step("r", 1), apply("r", 1, Some(1))])
        .unwrap();
    let states = second.inbox_states(&[("r".to_string(), 1)]).unwrap();
    assert!(matches!(
        states[0].state,
        InboxState::Applied { step: Some(1), .. }
    ));
}
