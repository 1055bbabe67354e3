//! The reference workload's event loop: its events through `Interpreter::handle`, per event.
//!
//! `cargo bench --bench event_loop`. The machine is `benches/workload.yaml` compiled once; the
//! events are WORKLOAD.md's LCG sequence. `handle_one_event` times single calls on one long-lived
//! instance walking the sequence (state carries over, as in the workload); `pass` times whole
//! passes of 100,000 events on a fresh instance, reported per event.

use std::sync::{Arc, LazyLock};

use divan::Bencher;
use divan::counter::ItemsCount;
use protocol_run::base::event::{Event, Origin};
use protocol_run::effects::EffectRequest;
use protocol_run::pipeline::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use protocol_run::pipeline::compile::machine::{Machine, StateId};
use protocol_run::runtime::run::Interpreter;

fn main() {
    divan::main();
}

/// Events per `pass` sample.
const PASS_EVENTS: usize = 100_000;
const EVENT_NAMES: [&str; 5] = ["call", "ok", "fail", "ack", "healthy"];

struct Workload {
    machine: Arc<Machine>,
    events: Vec<Event>,
    /// WORKLOAD.md's sequence (seed 42), as indices into `events`.
    sequence: Vec<u8>,
}

static WORKLOAD: LazyLock<Workload> = LazyLock::new(|| {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/workload.yaml");
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
    let events = EVENT_NAMES
        .iter()
        .map(|name| {
            let event_type = machine.event_type(name).expect("a workload event");
            Event::of_type(&machine, event_type, Origin::External)
        })
        .collect();
    let mut seed: u32 = 42;
    let sequence = (0..1_000_000)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 16) % 5) as u8
        })
        .collect();
    Workload {
        machine,
        events,
        sequence,
    }
});

/// Counts entries per state, like the workload's instrumentation.
struct EntryCounter {
    entries: Vec<u64>,
}

impl Host for EntryCounter {
    fn log(&mut self, _record: LogRecord) {}
    fn send(&mut self, _request: SendRequest) {}
    fn cancel(&mut self, _send_id: &str) {}
    fn start_effect(&mut self, request: EffectRequest) {
        panic!("the workload starts no effects, but started {}", request.id);
    }
    fn start_invoke(&mut self, request: InvokeRequest) {
        panic!("the workload invokes nothing, but invoked {}", request.id);
    }
    fn cancel_invoke(&mut self, _id: &str) {}
    fn emit(&mut self, directive: Directive) {
        panic!("the workload emits nothing, but emitted {}", directive.name);
    }
    fn state_entered(&mut self, state: StateId) {
        self.entries[state.index()] += 1;
    }
}

fn started(workload: &Workload) -> (Interpreter, EntryCounter) {
    let mut interpreter = Interpreter::new(workload.machine.clone(), Vec::new());
    let mut counter = EntryCounter {
        entries: vec![0; workload.machine.states.len()],
    };
    interpreter
        .start(&mut counter)
        .expect("the workload starts");
    (interpreter, counter)
}

/// One `Interpreter::handle` call per iteration, on the next event of the sequence: 100 samples
/// of 10,000 calls, the whole 1,000,000-event sequence.
#[divan::bench(sample_count = 100, sample_size = 10_000)]
fn handle_one_event(bencher: Bencher) {
    let workload = &*WORKLOAD;
    let (mut interpreter, mut counter) = started(workload);
    let mut position = 0;
    bencher.bench_local(|| {
        let event = &workload.events[usize::from(workload.sequence[position])];
        position = (position + 1) % workload.sequence.len();
        interpreter
            .handle(divan::black_box(event), &mut counter)
            .expect("a macrostep")
    });
}

/// A fresh instance handling the first 100,000 events of the sequence; divan reports the time
/// per event (and events/s) through the items counter.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn pass(bencher: Bencher) {
    let workload = &*WORKLOAD;
    bencher
        .counter(ItemsCount::new(PASS_EVENTS))
        .with_inputs(|| started(workload))
        .bench_local_values(|(mut interpreter, mut counter)| {
            for &index in &workload.sequence[..PASS_EVENTS] {
                interpreter
                    .handle(&workload.events[usize::from(index)], &mut counter)
                    .expect("a macrostep");
            }
            (interpreter, counter)
        });
}

/// Creating and starting one instance (WORKLOAD.md's `startup`, warm).
#[divan::bench]
fn create_and_start(bencher: Bencher) {
    let workload = &*WORKLOAD;
    bencher.bench_local(|| started(workload));
}
