//! `serve`'s host (`run::fleet::Fleet`) in-process: timers of many instances on one heap, effects
//! reporting to the right instance, steps committed in batches before their output.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use protocol_run::pipeline::compile::machine::Machine;
use protocol_run::runtime::run::stop::Stop;
use protocol_run::runtime::runs::fleet::{Fleet, FleetEnd, Recording};
use protocol_run::store::{SqliteStore, Store, StoreError, Write};
use tokio::sync::mpsc;

fn machine(yaml: &str) -> Arc<Machine> {
    let loaded = protocol_run::pipeline::load::load_text("fleet.yaml", yaml.to_string())
        .unwrap_or_else(|diagnostics| {
            panic!(
                "{}",
                protocol_run::base::diagnostic::render_all(&diagnostics)
            )
        });
    Arc::new(
        protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
            panic!(
                "{}",
                protocol_run::base::diagnostic::render_all(&diagnostics)
            )
        }),
    )
}

/// Runs `fleet` on `lines` (one batch, then the end of input) on tokio's paused clock, until it
/// drains; returns its output lines.
fn run_to_the_end(fleet: Fleet, lines: &[&str], virtual_time: bool) -> Vec<String> {
    let output = Rc::new(RefCell::new(Vec::new()));
    let collected = output.clone();
    let mut fleet = fleet.with_output(move |bytes| collected.borrow_mut().extend_from_slice(bytes));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(virtual_time)
        .build()
        .unwrap();
    let (sender, mut receiver) = mpsc::channel(1);
    sender.try_send(lines.iter().copied().collect()).unwrap();
    drop(sender);
    let local = tokio::task::LocalSet::new();
    let end = local.block_on(
        &runtime,
        fleet.run(&mut receiver, std::future::pending::<Stop>()),
    );
    assert_eq!(end, FleetEnd::Drained);
    let text = String::from_utf8(output.borrow().clone()).unwrap();
    text.lines().map(String::from).collect()
}

fn finished_order(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line.contains("\"finished\""))
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).unwrap();
            format!(
                "{}:{}",
                json["instance"].as_str().unwrap(),
                json["finished"]["state"].as_str().unwrap()
            )
        })
        .collect()
}

const TIMED: &str = r#"
id: timed
inputs: { wait: { type: duration } }
states:
  waiting:
    on: { go: moved }
    after: [{ delay: wait, target: late }]
  moved:
    after: [{ delay: 100ms, target: on_time }]
  late: { type: final, exit_code: 1 }
  on_time: { type: final }
"#;

/// Each instance's timer is in one heap: they fire in deadline order, whatever order the
/// instances were created in.
#[test]
fn timers_of_many_instances_fire_in_deadline_order() {
    let fleet = Fleet::new(machine(TIMED), None);
    let output = run_to_the_end(
        fleet,
        &[
            r#"{"instance": "a", "inputs": {"wait": "30ms"}}"#,
            r#"{"instance": "b", "inputs": {"wait": "10ms"}}"#,
            r#"{"instance": "c", "inputs": {"wait": "20ms"}}"#,
        ],
        true,
    );
    assert_eq!(
        finished_order(&output),
        ["b:late", "c:late", "a:late"],
        "{output:?}"
    );
}

/// A timer cancelled by leaving its state never fires, though its heap entry stays: the entry
/// fires nothing, and the instance's next timer is armed in its place.
#[test]
fn a_cancelled_timer_fires_nothing_and_the_next_one_is_armed() {
    let fleet = Fleet::new(machine(TIMED), None);
    let output = run_to_the_end(
        fleet,
        &[
            r#"{"instance": "a", "inputs": {"wait": "50ms"}}"#,
            r#"{"instance": "a", "event": "go"}"#,
            r#"{"instance": "b", "inputs": {"wait": "60ms"}}"#,
        ],
        true,
    );
    assert_eq!(
        finished_order(&output),
        ["b:late", "a:on_time"],
        "{output:?}"
    );
    assert!(
        output.contains(&r#"{"instance":"a","event":"go","configuration":["moved"]}"#.to_string()),
        "{output:?}"
    );
}

/// Effects of different instances report on the fleet's one channel, each to its own instance.
#[test]
fn effects_report_to_the_instance_that_started_them() {
    let yaml = r#"
id: echoing
inputs: { word: { type: string } }
states:
  calling:
    entry:
      - exec: [echo, "${word}"]
        id: say
    on:
      done.exec.say: { target: said, actions: [{ assign: { heard: event.data.stdout } }] }
      error.exec: failed
  said: { type: final, output: { heard: "${heard}" } }
  failed: { type: final, exit_code: 1 }
context: { heard: "" }
"#;
    let fleet = Fleet::new(machine(yaml), None);
    let output = run_to_the_end(
        fleet,
        &[
            r#"{"instance": "x", "inputs": {"word": "ex"}}"#,
            r#"{"instance": "y", "inputs": {"word": "why"}}"#,
        ],
        false,
    );
    for (instance, word) in [("x", "ex"), ("y", "why")] {
        let finished = output
            .iter()
            .find(|line| line.contains(&format!(r#""instance":"{instance}","finished""#)))
            .unwrap_or_else(|| panic!("{instance} did not finish: {output:?}"));
        assert!(
            finished.contains(&format!(r#""heard":"{word}"#)),
            "{finished}"
        );
    }
}

/// Counts batches and passes them to SQLite.
struct CountingStore {
    inner: SqliteStore,
    batches: Arc<AtomicUsize>,
    writes: Arc<AtomicUsize>,
}

impl Store for CountingStore {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create_run(&mut self, run: &protocol_run::store::NewRun) -> Result<(), StoreError> {
        self.inner.create_run(run)
    }
    fn commit_step(
        &mut self,
        run: &str,
        entry: &protocol_run::store::JournalEntry,
        snapshot: &protocol_run::base::snapshot::Snapshot,
        finish: Option<&protocol_run::store::Finish>,
    ) -> Result<(), StoreError> {
        self.inner.commit_step(run, entry, snapshot, finish)
    }
    fn commit_child_states(
        &mut self,
        run: &str,
        states: &[protocol_run::store::ChildState],
    ) -> Result<(), StoreError> {
        self.inner.commit_child_states(run, states)
    }
    fn latest_snapshot(
        &self,
        run: &str,
    ) -> Result<Option<protocol_run::store::StoredSnapshot>, StoreError> {
        self.inner.latest_snapshot(run)
    }
    fn run(&self, run: &str) -> Result<Option<protocol_run::store::RunRecord>, StoreError> {
        self.inner.run(run)
    }
    fn list_runs(&self) -> Result<Vec<protocol_run::store::RunSummary>, StoreError> {
        self.inner.list_runs()
    }
    fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<protocol_run::store::RunSummary>, StoreError> {
        self.inner.unfinished_runs(protocol_path, count)
    }
    fn journal(&self, run: &str) -> Result<Vec<protocol_run::store::JournalEntry>, StoreError> {
        self.inner.journal(run)
    }
    fn journal_tail(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<protocol_run::store::JournalEntry>, StoreError> {
        self.inner.journal_tail(run, count)
    }
    fn journal_before(
        &self,
        run: &str,
        before: u64,
        count: usize,
    ) -> Result<Vec<protocol_run::store::JournalEntry>, StoreError> {
        self.inner.journal_before(run, before, count)
    }
    fn mark_stopped(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        self.inner.mark_stopped(run, unix_milliseconds)
    }
    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        self.inner.mark_running(run, unix_milliseconds)
    }
    fn finish_run(
        &mut self,
        run: &str,
        finish: &protocol_run::store::Finish,
    ) -> Result<(), StoreError> {
        self.inner.finish_run(run, finish)
    }
    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &protocol_run::store::Holder,
        holds: &mut dyn FnMut(&protocol_run::store::Holder) -> bool,
    ) -> Result<Vec<Option<protocol_run::store::Unclaimed>>, StoreError> {
        self.inner.claim_runs(runs, holder, holds)
    }
    fn run_summary(
        &self,
        run: &str,
    ) -> Result<Option<protocol_run::store::RunSummary>, StoreError> {
        self.inner.run_summary(run)
    }
    fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&protocol_run::store::RunCursor>,
        count: usize,
    ) -> Result<Vec<protocol_run::store::RunSummary>, StoreError> {
        self.inner.runs_of_protocols(paths, after, count)
    }
    fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError> {
        self.inner.directives_before(run, before)
    }
    fn snapshot_at(
        &self,
        run: &str,
        step: u64,
    ) -> Result<Option<protocol_run::store::StoredSnapshot>, StoreError> {
        self.inner.snapshot_at(run, step)
    }
    fn renew_lease(&mut self, host: &str, ttl_milliseconds: u64) -> Result<(), StoreError> {
        self.inner.renew_lease(host, ttl_milliseconds)
    }
    fn enqueue(
        &mut self,
        run: &str,
        kind: protocol_run::store::inbox::EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        self.inner
            .enqueue(run, kind, event, data, unix_milliseconds)
    }
    fn take_inbox(
        &mut self,
        holder: &protocol_run::store::Holder,
        scope: protocol_run::store::InboxScope,
        limit: usize,
    ) -> Result<protocol_run::store::TakenInbox, StoreError> {
        self.inner.take_inbox(holder, scope, limit)
    }
    fn apply_inbox(
        &mut self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        self.inner.apply_inbox(run, entry, step, outcome, output)
    }
    fn recent_inbox(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<protocol_run::store::InboxRecord>, StoreError> {
        self.inner.recent_inbox(run, count)
    }
    fn inbox_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<protocol_run::store::InboxRecord>, StoreError> {
        self.inner.inbox_states(entries)
    }
    fn prune_runs(
        &mut self,
        before_unix_milliseconds: u64,
        statuses: &[protocol_run::store::RunStatus],
        count: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner
            .prune_runs(before_unix_milliseconds, statuses, count)
    }
    fn release_runs(
        &mut self,
        runs: &[String],
        holder: &protocol_run::store::Holder,
    ) -> Result<(), StoreError> {
        self.inner.release_runs(runs, holder)
    }
    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.inner.commit_batch(writes)?;
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.writes.fetch_add(writes.len(), Ordering::SeqCst);
        Ok(())
    }
    fn protocol_texts(
        &self,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.inner.protocol_texts(hashes)
    }
    fn append_telemetry(&mut self, run: &str, lines: &str) -> Result<(), StoreError> {
        self.inner.append_telemetry(run, lines)
    }
    fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        self.inner.telemetry(run)
    }

    fn save_trace(&mut self, run: &str, trace: &str) -> Result<(), StoreError> {
        self.inner.save_trace(run, trace)
    }

    fn trace(&self, run: &str) -> Result<Option<String>, StoreError> {
        self.inner.trace(run)
    }
}

/// A batch of lines is one transaction: the instances it creates, each start, each step, and the
/// run a step finishes. Its output is written only after the commit, and the store then holds
/// exactly what the output reported.
#[test]
fn a_batch_is_committed_once_before_its_output_is_written() {
    let directory = std::env::temp_dir().join(format!("protocol-run-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let yaml = "id: counter\ncontext: { n: 0 }\nstates:\n  open:\n    on:\n      add: { actions: [{ assign: { n: \"n + 1\" } }] }\n      close: closed\n  closed: { type: final, output: { n: \"${n}\" } }\n";
    let batches = Arc::new(AtomicUsize::new(0));
    let writes = Arc::new(AtomicUsize::new(0));
    let store = CountingStore {
        inner: SqliteStore::open(&directory).unwrap(),
        batches: batches.clone(),
        writes: writes.clone(),
    };
    let seen_at_output = Rc::new(RefCell::new(Vec::new()));
    let seen = seen_at_output.clone();
    let counted = batches.clone();
    let mut fleet = Fleet::new(
        machine(yaml),
        Some(Recording {
            store: Box::new(store),
            protocol_path: "/counter.yaml".into(),
            protocol_hash: "h".into(),
            protocol_text: yaml.into(),
            read_texts: Vec::new(),
            grants: None,
            origin: protocol_run::store::RunOrigin::Serve,
            holder: protocol_run::store::Holder {
                process: "serve".into(),
                pid: std::process::id(),
                lock: directory.join("host.lock").display().to_string(),
                host: None,
            },
        }),
    )
    .with_output(move |bytes| {
        seen.borrow_mut()
            .push((counted.load(Ordering::SeqCst), bytes.len()));
    });
    for line in [
        r#"{"instance": "one"}"#,
        r#"{"instance": "two", "event": "add"}"#,
        r#"{"instance": "one", "event": "add"}"#,
        r#"{"instance": "one", "event": "add"}"#,
        r#"{"instance": "one", "event": "close"}"#,
        r#"{"instance": "one", "event": "add"}"#,
    ] {
        fleet.accept_line(line);
    }
    assert_eq!(batches.load(Ordering::SeqCst), 0, "nothing committed yet");
    fleet.commit();
    // Two creations, two starts, four steps (the last line is refused: `one` has finished),
    // and each instance's telemetry of the batch, one write an instance.
    assert_eq!(batches.load(Ordering::SeqCst), 1);
    assert_eq!(writes.load(Ordering::SeqCst), 10);
    assert_eq!(seen_at_output.borrow().len(), 1);
    assert_eq!(seen_at_output.borrow()[0].0, 1, "output before its commit");
    drop(fleet);
    let store = SqliteStore::open(&directory).unwrap();
    let one = store.run("counter:one").unwrap().unwrap().summary;
    assert_eq!(one.finish.unwrap().output, serde_json::json!({"n": 2}));
    assert_eq!(one.last_sequence, Some(3));
    let two = store.run("counter:two").unwrap().unwrap().summary;
    assert_eq!(two.last_sequence, Some(1));
    assert_eq!(
        store
            .latest_snapshot("counter:two")
            .unwrap()
            .unwrap()
            .sequence,
        1
    );
    // One part for `one`'s batch: its start, the step that entered `closed` (the two that
    // entered no state are the journal's alone) and its finish, in order.
    let parts = store.telemetry("counter:one").unwrap();
    assert_eq!(parts.len(), 1, "{parts:?}");
    let kinds: Vec<serde_json::Value> = parts[0]
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["kind"].clone())
        .collect();
    assert_eq!(kinds, ["start", "step", "finish"], "{parts:?}");
    let _ = std::fs::remove_dir_all(&directory);
}
