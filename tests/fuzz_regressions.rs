//! Inputs kept from fuzzing (`tests/fixtures/fuzz/<target>/`), each run through the same checks
//! as its fuzz target: no panic, located errors, and an answer within a time bound.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../fuzz/src/lib.rs"]
mod harness;

/// Generous for a debug build: every kept input takes milliseconds in release.
const TIME_BOUND: Duration = Duration::from_secs(20);

fn inputs(target: &str) -> Vec<PathBuf> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no inputs in {}", directory.display());
    paths
}

/// Runs `check` on every input of `target` on its own thread, failing on a panic or when an
/// input takes longer than `TIME_BOUND`.
fn run_all(target: &str, check: fn(&str)) {
    for path in inputs(target) {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let (done, finished) = mpsc::channel();
        let started = Instant::now();
        let worker = std::thread::spawn(move || {
            check(&text);
            let _ = done.send(());
        });
        match finished.recv_timeout(TIME_BOUND) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("{}: no answer within {TIME_BOUND:?}", path.display())
            }
            // The sender was dropped without sending: the check panicked.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = worker.join();
                panic!("{}: the check panicked (message above)", path.display())
            }
        }
        assert!(worker.join().is_ok(), "{}", path.display());
        assert!(started.elapsed() < TIME_BOUND, "{}", path.display());
    }
}

#[test]
fn yaml_loader_inputs() {
    run_all("yaml_loader", harness::yaml_loader);
}

#[test]
fn pipeline_inputs() {
    run_all("pipeline", |text| {
        harness::pipeline(text);
    });
}

#[test]
fn expressions_inputs() {
    run_all("expressions", harness::expressions);
}

#[test]
fn scxml_import_inputs() {
    run_all("scxml_import", harness::scxml_import);
}

#[test]
fn interpreter_inputs() {
    run_all("interpreter", |text| {
        assert!(
            harness::interpreter_file(text),
            "a kept interpreter case must compile"
        );
    });
}
