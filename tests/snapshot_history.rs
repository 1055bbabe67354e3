//! The state after every step of a real run is rebuilt from what the store keeps (a full snapshot every few steps, a delta of the step before otherwise) exactly as the engine had it, whether the run committed step by step or a batch at a time.

use std::sync::Arc;

use protocol_run::base::durable::{Checkpoint, CheckpointStep};
use protocol_run::base::snapshot::Snapshot;
use protocol_run::effects::mock::Mocks;
use protocol_run::runtime::run::Interpreter;
use protocol_run::runtime::run::driver::{
    DriveOptions, EventSource, TimeMode, TracingObserver, drive_durable,
};
use protocol_run::runtime::runs::start::StoreCheckpoint;
use protocol_run::store::{NewRun, RunOrigin, SqliteStore, Store};

use crate::durability::scratch;

/// Context variables that change every step, grow, and stay; a state that defers events, runs
/// an effect (mocked) and has a timer, so configuration, deferred events, effects and timers
/// change between steps too.
const PROTOCOL: &str = r#"
id: history
context: { total: 0, seen: [], note: "", pauses: 0 }
states:
  counting:
    on:
      add:
        target: counting
        actions: [{ assign: { total: "total + event.data.n", seen: "seen + [event.data.n]" } }]
      pause: paused
      stop: end
  paused:
    defer: [add]
    entry:
      - { assign: { pauses: "pauses + 1" } }
      - { id: wait, exec: [sleep, "1"], timeout: 100ms }
    after: [{ delay: 50ms, target: counting }]
    on:
      done.exec.wait: counting
      error.exec.wait: counting
      note:
        target: paused
        actions: [{ assign: { note: "event.data.text" } }]
      resume: counting
  end: { type: final, exit_code: 0, output: { total: "${total}" } }
"#;

/// 300 lines: additions, pauses with notes and deferred additions, moves of the virtual clock.
fn lines() -> String {
    let mut lines = Vec::new();
    for line in 1..=300u64 {
        lines.push(match line % 17 {
            5 => r#"{"event":"pause"}"#.to_string(),
            6 | 7 => format!(r#"{{"event":"add","data":{{"n":{line}}}}}"#),
            8 => format!(r#"{{"event":"note","data":{{"text":"at {line}"}}}}"#),
            9 => r#"{"advance":"30ms"}"#.to_string(),
            10 => r#"{"event":"resume"}"#.to_string(),
            _ => format!(r#"{{"event":"add","data":{{"n":{}}}}}"#, line % 5),
        });
    }
    lines.push(r#"{"event":"stop"}"#.to_string());
    lines.join("\n")
}

/// Keeps the snapshot of every step as the engine handed it over, then commits it.
struct Keeping<'a> {
    inner: StoreCheckpoint<'a>,
    kept: Vec<(u64, Snapshot)>,
}

impl Checkpoint for Keeping<'_> {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        self.kept.push((step.sequence, step.snapshot.clone()));
        self.inner.commit(step)
    }

    fn flush(&mut self) -> Result<(), String> {
        self.inner.flush()
    }
}

/// Runs the protocol over its lines into a fresh store; every step's snapshot as the engine had
/// it, and the store.
fn run(name: &str, batched: bool) -> (Vec<(u64, Snapshot)>, SqliteStore, String) {
    let directory = scratch(name);
    let mut store = SqliteStore::open(directory.join("state")).unwrap();
    let run_id = "history-run".to_string();
    store
        .create_run(&NewRun {
            id: run_id.clone(),
            protocol_path: "/history.yaml".to_string(),
            protocol_hash: protocol_run::store::content_hash(PROTOCOL),
            protocol_text: Some(PROTOCOL.to_string()),
            read_texts: Vec::new(),
            inputs: serde_json::json!({}),
            started_unix_milliseconds: 0,
            grants: None,
            origin: RunOrigin::Run,
            holder: None,
            forked_from: None,
        })
        .unwrap();
    let loaded = protocol_run::pipeline::load::load_text("history.yaml", PROTOCOL.into()).unwrap();
    let machine = Arc::new(protocol_run::pipeline::compile::compile(&loaded).unwrap());
    let mut interpreter = Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap());
    let options = DriveOptions {
        time_mode: TimeMode::Virtual,
        mocks: Mocks::parse(&["wait=ok,timeout,error:boom,ok,timeout".to_string()]).unwrap(),
        ..DriveOptions::default()
    };
    let mut observer = TracingObserver {
        run_id: run_id.clone(),
    };
    let mut checkpoint = Keeping {
        inner: StoreCheckpoint::new(&mut store, run_id.clone(), batched),
        kept: Vec::new(),
    };
    let report = drive_durable(
        &mut interpreter,
        EventSource::Lines(lines()),
        options,
        &mut observer,
        Some(&mut checkpoint),
        None,
    )
    .unwrap();
    assert!(report.outcome.is_some(), "the run reached `end`");
    let kept = checkpoint.kept;
    (kept, store, run_id)
}

fn assert_every_step_rebuilt(name: &str, batched: bool) {
    let (kept, store, run_id) = run(name, batched);
    assert!(kept.len() > 300, "{} steps", kept.len());
    let text = |snapshot: &Snapshot| serde_json::to_string(snapshot).unwrap();
    let mut changed_effects = 0;
    for (index, (step, snapshot)) in kept.iter().enumerate() {
        let rebuilt = store.snapshot_at(&run_id, *step).unwrap().unwrap();
        assert_eq!(rebuilt.sequence, *step);
        assert_eq!(text(&rebuilt.snapshot), text(snapshot), "step {step}");
        if index > 0 && kept[index - 1].1.effects != snapshot.effects {
            changed_effects += 1;
        }
    }
    assert!(
        changed_effects > 10,
        "effects started and ended: {changed_effects}"
    );
    let latest = store.latest_snapshot(&run_id).unwrap().unwrap();
    let (last_step, last) = kept.last().unwrap();
    assert_eq!(
        (latest.sequence, text(&latest.snapshot)),
        (*last_step, text(last))
    );
}

#[test]
fn every_step_of_a_run_committed_step_by_step_is_rebuilt_as_the_engine_had_it() {
    assert_every_step_rebuilt("history-steps", false);
}

#[test]
fn every_step_of_a_run_committed_in_batches_is_rebuilt_as_the_engine_had_it() {
    assert_every_step_rebuilt("history-batches", true);
}
