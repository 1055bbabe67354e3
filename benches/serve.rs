//! `serve`'s engine side with 100,000 instances, each with a pending timer, in one process.
//!
//! `cargo bench --bench serve`. The `serve` command itself cannot be driven in-process (its host
//! is private to the CLI, reads stdin and records every step in SQLite), so this bench rebuilds
//! its loop from the public API: one current-thread tokio runtime with a `LocalSet`, a reader
//! thread handing lines over a bounded channel (as `serve`'s stdin reader does), one task per
//! instance running `drive_instance` (as `serve` does), and JSON lines parsed and routed by
//! instance id as `serve` routes them. Left out: reading the bytes from stdin, the SQLite store
//! (each macrostep's checkpoint is built, then discarded) and writing output lines to stdout.
//!
//! Before the benches, one report line gives the RSS with 100,000 started instances alive.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use divan::Bencher;
use divan::counter::ItemsCount;
use protocol_run::actions::{Directive, LogRecord};
use protocol_run::compile::machine::Machine;
use protocol_run::run::Interpreter;
use protocol_run::run::driver::{InputLineError, InputLines, Observer, drive_instance};
use protocol_run::run::durable::{Checkpoint, CheckpointStep};
use tokio::sync::mpsc;

const INSTANCES: usize = 100_000;
/// Events per instance in `events`: 1,000,000 in total.
const EVENTS_PER_INSTANCE: usize = 10;
/// Events one instance may have waiting (`serve --max-queue`'s default).
const MAX_QUEUE: usize = 10_000;
/// The reader thread's channel (as `serve`'s stdin reader).
const READER_CAPACITY: usize = 1024;

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
    let loaded = protocol_run::load::load_text("serve-bench.yaml", PROTOCOL.to_string())
        .unwrap_or_else(|diagnostics| {
            panic!("{}", protocol_run::diagnostic::render_all(&diagnostics))
        });
    Arc::new(
        protocol_run::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
            panic!("{}", protocol_run::diagnostic::render_all(&diagnostics))
        }),
    )
});

fn main() {
    memory_report();
    divan::main();
}

/// What the instances reported: started instances and handled events.
#[derive(Default)]
struct Tally {
    started: Cell<usize>,
    steps: Cell<usize>,
}

struct CountingObserver {
    tally: Rc<Tally>,
}

impl Observer for CountingObserver {
    fn log(&mut self, _record: &LogRecord, _time: &str) {}
    fn directive(&mut self, _directive: &Directive) {}
    fn input_error(&mut self, error: &InputLineError) {
        panic!("line {}: {}", error.line, error.message);
    }
    fn record(&mut self, _time: &str, kind: &str, _fields: serde_json::Value) {
        let counter = match kind {
            "start" => &self.tally.started,
            "step" => &self.tally.steps,
            _ => return,
        };
        counter.set(counter.get() + 1);
    }
}

/// Builds each macrostep's checkpoint (as `serve` does) and drops it instead of storing it.
struct DiscardedCheckpoint;

impl Checkpoint for DiscardedCheckpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        divan::black_box(step);
        Ok(())
    }
}

/// `serve`'s host loop without the store: routes input lines to per-instance tasks.
struct Host {
    machine: Arc<Machine>,
    instances: HashMap<String, mpsc::Sender<Result<String, String>>>,
    tally: Rc<Tally>,
}

impl Host {
    /// One line `{"instance": ID, "event": NAME}` (`event` optional), as `serve` reads it.
    fn accept(&mut self, line: &str) {
        let json: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let object = json.as_object().expect("an object");
        let instance = object["instance"].as_str().expect("an instance id");
        if !self.instances.contains_key(instance) {
            self.create(instance);
        }
        let Some(event) = object.get("event") else {
            return;
        };
        let mut event_line = serde_json::Map::new();
        event_line.insert("event".into(), event.clone());
        self.instances[instance]
            .try_send(Ok(serde_json::Value::Object(event_line).to_string()))
            .expect("the instance is running and its queue has room");
    }

    /// Starts an instance as a local task (called inside the `LocalSet`).
    fn create(&mut self, instance: &str) {
        let values = self.machine.bind_input_values(&[]).expect("no inputs");
        let interpreter = Interpreter::new(self.machine.clone(), values);
        let (sender, receiver) = mpsc::channel(MAX_QUEUE);
        self.instances.insert(instance.to_string(), sender);
        let observer = CountingObserver {
            tally: self.tally.clone(),
        };
        tokio::task::spawn_local(instance_task(interpreter, receiver, observer));
    }
}

/// What `serve` spawns per instance: `drive_instance` until the instance ends.
async fn instance_task(
    mut interpreter: Interpreter,
    receiver: InputLines,
    mut observer: CountingObserver,
) {
    let mut checkpoint = DiscardedCheckpoint;
    let report = drive_instance(
        &mut interpreter,
        receiver,
        &mut observer,
        &mut checkpoint,
        None,
    )
    .await;
    report.expect("the instance runs");
}

/// The host with its runtime, as `serve` sets them up.
struct Server {
    host: Host,
    runtime: tokio::runtime::Runtime,
    local: tokio::task::LocalSet,
}

impl Server {
    fn new() -> Server {
        Server {
            host: Host {
                machine: MACHINE.clone(),
                instances: HashMap::new(),
                tally: Rc::default(),
            },
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
            local: tokio::task::LocalSet::new(),
        }
    }

    /// Feeds `lines` from a reader thread and runs until every instance has started and
    /// `steps` events have been handled in total.
    fn run(&mut self, lines: Vec<String>, steps: usize) {
        let mut receiver = spawn_reader(lines);
        let Server {
            host,
            runtime,
            local,
        } = self;
        local.block_on(runtime, async {
            while let Some(line) = receiver.recv().await {
                host.accept(&line.expect("a readable line"));
            }
            while host.tally.started.get() < host.instances.len() || host.tally.steps.get() < steps
            {
                tokio::task::yield_now().await;
            }
        });
    }
}

/// A thread handing `lines` over, waiting while the channel is full (as `serve`'s stdin reader).
fn spawn_reader(lines: Vec<String>) -> InputLines {
    let (sender, receiver) = mpsc::channel(READER_CAPACITY);
    std::thread::spawn(move || {
        for line in lines {
            if sender.blocking_send(Ok(line)).is_err() {
                break;
            }
        }
    });
    receiver
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
    let mut host = Server::new();
    let before_kb = status_kb("VmRSS:");
    let started = Instant::now();
    host.run(creation_lines(), 0);
    let create_ns = started.elapsed().as_nanos() as f64;
    let after_kb = status_kb("VmRSS:");
    let lines = event_lines();
    let started = Instant::now();
    host.run(lines, EVENTS_PER_INSTANCE * INSTANCES);
    let events_ns = started.elapsed().as_nanos() as f64;
    // The part of each instance that lives in its task: the `drive_instance` future.
    let task_bytes = std::mem::size_of_val(&instance_task(
        Interpreter::new(MACHINE.clone(), Vec::new()),
        mpsc::channel(1).1,
        CountingObserver {
            tally: Rc::default(),
        },
    ));
    println!(
        "{}",
        serde_json::json!({
            "bench": "serve", "instances": INSTANCES,
            "rss_before_kb": before_kb, "rss_started_kb": after_kb,
            "bytes_per_started_instance": ((after_kb - before_kb) * 1024) as f64 / INSTANCES as f64,
            "instance_future_bytes": task_bytes,
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
    bencher
        .counter(ItemsCount::new(INSTANCES))
        .with_inputs(|| (Server::new(), creation_lines()))
        .bench_local_values(|(mut host, lines)| {
            host.run(lines, 0);
            host
        });
}

/// 1,000,000 event lines spread over 100,000 started instances, parsing included.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn events_1m_over_100k_instances(bencher: Bencher) {
    bencher
        .counter(ItemsCount::new(EVENTS_PER_INSTANCE * INSTANCES))
        .with_inputs(|| {
            let mut host = Server::new();
            host.run(creation_lines(), 0);
            (host, event_lines())
        })
        .bench_local_values(|(mut host, lines)| {
            host.run(lines, EVENTS_PER_INSTANCE * INSTANCES);
            host
        });
}
