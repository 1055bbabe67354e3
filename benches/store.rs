//! One macrostep's commit to the SQLite store on a real file (`cargo bench --bench store`).

use std::path::PathBuf;
use std::sync::Arc;

use divan::Bencher;
use protocol_run::runtime::run::{Interpreter, RecordingHost};
use protocol_run::store::{JournalEntry, JournalEvent, NewRun, SqliteStore, Store, content_hash};

fn main() {
    divan::main();
}

/// A directory of this process under the system's temporary directory, removed afterwards.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let directory =
            std::env::temp_dir().join(format!("protocol-run-bench-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        Scratch(directory)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A journal entry of the size a small step writes: one event, one transition, one log line.
fn step(sequence: u64) -> JournalEntry {
    JournalEntry {
        sequence,
        event: Some(JournalEvent {
            name: "tick".to_string(),
            data: serde_json::json!({ "n": sequence }),
        }),
        transitions: vec!["/states/counting/on/tick/0".to_string()],
        actions: serde_json::json!({ "logs": [format!("tick {sequence}")] }),
        unix_milliseconds: 10_000 + sequence,
        children: Vec::new(),
    }
}

/// `Store::commit_step` per iteration: a journal entry plus the snapshot of
/// `benches/workload.yaml` just started, each commit a new step of one run. The store runs with
/// `synchronous=FULL`, so each commit waits for the disk and the figure depends on the file
/// system far more than on the code: 20 samples of 5 commits.
#[divan::bench(sample_count = 20, sample_size = 5)]
fn commit_step(bencher: Bencher) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/workload.yaml");
    let text = std::fs::read_to_string(path).expect("the workload is readable");
    let loaded = protocol_run::pipeline::load::load_file(std::path::Path::new(path))
        .unwrap_or_else(|error| panic!("{error}"));
    let machine = Arc::new(
        protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
            panic!(
                "{}",
                protocol_run::base::diagnostic::render_all(&diagnostics)
            )
        }),
    );
    let mut interpreter = Interpreter::new(machine.clone(), Vec::new());
    interpreter
        .start(&mut RecordingHost::for_machine(machine))
        .expect("the workload starts");
    let snapshot = interpreter.snapshot();

    let scratch = Scratch::new();
    let mut store = SqliteStore::open(&scratch.0).expect("the store opens");
    store
        .create_run(&NewRun {
            id: "timed".to_string(),
            protocol_path: path.to_string(),
            protocol_hash: content_hash(&text),
            protocol_text: Some(text),
            read_texts: Vec::new(),
            inputs: serde_json::json!({}),
            started_unix_milliseconds: 1,
            grants: None,
            origin: protocol_run::store::RunOrigin::Run,
            holder: None,
            forked_from: None,
        })
        .expect("the run is created");
    // The store refuses a sequence not above the last one, so each commit takes the next.
    let mut sequence = 0;
    bencher.bench_local(|| {
        store
            .commit_step("timed", &step(sequence), divan::black_box(&snapshot), None)
            .expect("the step commits");
        sequence += 1;
    });
}
