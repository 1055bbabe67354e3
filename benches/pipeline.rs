//! Load + validate + compile of each protocol in `protocols/`, in-process and warm.
//!
//! `cargo bench --bench pipeline`. `load` reads the file, parses the YAML with positions,
//! validates it against the JSON Schema and builds the model; `compile` turns a loaded protocol
//! into the `Machine` tables; `load_and_compile` is both, what `protocol-run validate` does per
//! file. The schema validator is built once per process, before the first sample; the cold
//! figure (first load + compile in a fresh process) is printed as one JSON line first.

use std::path::{Path, PathBuf};

use divan::Bencher;
use protocol_run::pipeline::load::Loaded;

fn main() {
    cold_report();
    divan::main();
}

/// One JSON line: the first load + compile of `protocols/ittw.yaml` in this process (building
/// the schema validator and CEL's environment, and CEL's parser warming up), then the next.
fn cold_report() {
    let path = path("ittw.yaml");
    let mut timings = [0u128; 2];
    for timing in &mut timings {
        let started = std::time::Instant::now();
        let loaded = load(&path);
        protocol_run::pipeline::compile::compile(&loaded).expect("the protocol compiles");
        *timing = started.elapsed().as_nanos();
    }
    println!(
        "{}",
        serde_json::json!({
            "bench": "pipeline", "protocol": "ittw.yaml",
            "first_load_and_compile_ns": timings[0] as u64,
            "second_load_and_compile_ns": timings[1] as u64,
        })
    );
}

/// The protocol files (scenarios excluded), by name.
fn protocols() -> impl Iterator<Item = String> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols");
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .expect("protocols/ is readable")
        .map(|entry| entry.expect("a directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml") && !name.ends_with(".scenario.yaml"))
        .collect();
    names.sort();
    names.into_iter()
}

fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocols")
        .join(name)
}

fn load(path: &Path) -> Loaded {
    protocol_run::pipeline::load::load_file(path).unwrap_or_else(|error| panic!("{error}"))
}

#[divan::bench(args = protocols())]
fn load_and_compile(bencher: Bencher, name: &str) {
    let path = path(name);
    // Builds the schema validator, once per process, outside the timing.
    load(&path);
    bencher.bench(|| {
        let loaded = load(divan::black_box(&path));
        protocol_run::pipeline::compile::compile(&loaded).expect("the protocol compiles")
    });
}

#[divan::bench(args = protocols())]
fn load_only(bencher: Bencher, name: &str) {
    let path = path(name);
    load(&path);
    bencher.bench(|| load(divan::black_box(&path)));
}

#[divan::bench(args = protocols())]
fn compile_only(bencher: Bencher, name: &str) {
    let loaded = load(&path(name));
    bencher.bench(|| {
        protocol_run::pipeline::compile::compile(divan::black_box(&loaded))
            .expect("the protocol compiles")
    });
}
