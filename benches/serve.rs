//! `serve`'s host (`run::fleet::Fleet`) with 100,000 instances, each with a pending timer, in one process.
//!
//! `cargo bench --bench serve`. The bench drives the same `Fleet` that `serve` runs, without a
//! store (`serve --store memory`): every JSON line is parsed and routed by instance id, each
//! batch of 1,024 lines is followed by a commit that writes the batch's output lines (to a
//! counting sink here, to stdout in `serve`). Left out: reading the bytes from stdin on the
//! reader thread and handing batches over. The real process, durable or not, is measured with
//! the driver in docs/performance.md.
//!
//! Before the benches, one report line gives the RSS with 100,000 started instances alive.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use divan::Bencher;
use divan::counter::ItemsCount;
use protocol_run::pipeline::compile::machine::Machine;
use protocol_run::runtime::run::Interpreter;
use protocol_run::runtime::runs::fleet::Fleet;

const INSTANCES: usize = 100_000;
/// Events per instance in `events`: 1,000,000 in total.
const EVENTS_PER_INSTANCE: usize = 10;
/// Lines per batch: what `serve`'s reader hands over at most at once.
const BATCH: usize = 1024;

/// A small protocol: an idle state with an hour-long timer pending, and a targetless
/// transition that counts pings without leaving the state (so the timer stays armed).
const PROTOCOL: &str = r#"
id: serve-bench
version: "1"
context: { pings: 0 }
states:
  waiting:
    on:
      ping:
        actions: [{ assign: { pings: "pings + 1" } }]
      stop: done
    after:
      - { delay: 1h, target: done }
  done: { type: final, exit_code: 0 }
"#;

static MACHINE: LazyLock<Arc<Machine>> = LazyLock::new(|| {
    let loaded = protocol_run::pipeline::load::load_text("serve-bench.yaml", PROTOCOL.to_string())
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
});

fn main() {
    memory_report();
    divan::main();
}

/// A fleet whose output lines are counted, on a runtime (as `serve` runs it).
struct Server {
    fleet: Fleet,
    lines_out: Rc<Cell<usize>>,
    runtime: tokio::runtime::Runtime,
}

impl Server {
    fn new() -> Server {
        let lines_out = Rc::new(Cell::new(0));
        let counter = lines_out.clone();
        Server {
            fleet: Fleet::new(MACHINE.clone(), None).with_output(move |bytes| {
                let lines = bytes.iter().filter(|byte| **byte == b'\n').count();
                counter.set(counter.get() + lines);
            }),
            lines_out,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
        }
    }

    /// Accepts `lines` in batches, committing after each, and checks that each line was
    /// answered by one output line (`started` or the step's).
    fn run(&mut self, lines: &[String]) {
        let before = self.lines_out.get();
        let Server { fleet, runtime, .. } = self;
        runtime.block_on(async {
            for batch in lines.chunks(BATCH) {
                for line in batch {
                    fleet.accept_line(line);
                }
                fleet.commit();
            }
        });
        assert_eq!(self.lines_out.get() - before, lines.len());
    }
}

fn creation_lines() -> Vec<String> {
    (0..INSTANCES)
        .map(|instance| format!("{{\"instance\": \"task-{instance}\"}}"))
        .collect()
}

fn event_lines() -> Vec<String> {
    (0..EVENTS_PER_INSTANCE * INSTANCES)
        .map(|index| {
            format!(
                "{{\"instance\": \"task-{}\", \"event\": \"ping\"}}",
                index % INSTANCES
            )
        })
        .collect()
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// One JSON line: RSS before and after starting 100,000 instances (all kept alive, each with
/// its timer pending), then after 1,000,000 events.
fn memory_report() {
    let creations = creation_lines();
    let events = event_lines();
    let mut host = Server::new();
    let before_kb = status_kb("VmRSS:");
    let started = Instant::now();
    host.run(&creations);
    let create_ns = started.elapsed().as_nanos() as f64;
    let after_kb = status_kb("VmRSS:");
    assert_eq!(host.fleet.live(), INSTANCES);
    let started = Instant::now();
    host.run(&events);
    let events_ns = started.elapsed().as_nanos() as f64;
    println!(
        "{}",
        serde_json::json!({
            "bench": "serve", "instances": INSTANCES,
            "rss_before_kb": before_kb, "rss_started_kb": after_kb,
            "bytes_per_started_instance": ((after_kb - before_kb) * 1024) as f64 / INSTANCES as f64,
            "interpreter_bytes": std::mem::size_of::<Interpreter>(),
            "create_ns_per_instance": create_ns / INSTANCES as f64,
            "events": EVENTS_PER_INSTANCE * INSTANCES,
            "events_per_second": (EVENTS_PER_INSTANCE * INSTANCES) as f64 / (events_ns / 1e9),
            "rss_after_events_kb": status_kb("VmRSS:"), "peak_rss_kb": status_kb("VmHWM:"),
        })
    );
}

/// Creating and starting 100,000 instances from their first lines.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn create_and_start_100k(bencher: Bencher) {
    let lines = creation_lines();
    bencher
        .counter(ItemsCount::new(INSTANCES))
        .with_inputs(Server::new)
        .bench_local_values(|mut host| {
            host.run(&lines);
            host
        });
}

/// 1,000,000 event lines spread over 100,000 started instances, parsing included.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn events_1m_over_100k_instances(bencher: Bencher) {
    let creations = creation_lines();
    let events = event_lines();
    bencher
        .counter(ItemsCount::new(EVENTS_PER_INSTANCE * INSTANCES))
        .with_inputs(|| {
            let mut host = Server::new();
            host.run(&creations);
            host
        })
        .bench_local_values(|mut host| {
            host.run(&events);
            host
        });
}
