//! The reference workload (`../shared/bench/WORKLOAD.md`, v1) through the real pipeline, printing
//! one JSON line per mode: `workload-bench bench` or `workload-bench mem`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::pipeline::actions::{Host, LogRecord, SendRequest};
use protocol_run::pipeline::compile::machine::{Machine, StateId};
use protocol_run::runtime::run::Interpreter;

#[path = "workload/sequence.rs"]
mod sequence;

use sequence::{EVENTS, FNV_OFFSET, event_sequence, fnv1a};

const WARM_PASSES: usize = 25;
const INSTANCES: usize = 100_000;
const EVENT_NAMES: [&str; 5] = ["call", "ok", "fail", "ack", "healthy"];
/// Instrumentation order of WORKLOAD.md.
const COUNTED_STATES: [&str; 6] = [
    "idle",
    "attempting",
    "succeeded",
    "escalated",
    "notify",
    "monitor",
];
/// Leaf codes of WORKLOAD.md section 3.
const LEAF_CODES: [(&str, u32); 5] = [
    ("idle", 0),
    ("attempting", 1),
    ("succeeded", 2),
    ("notify", 4),
    ("monitor", 5),
];

/// Counts entries per state index (the benchmark's observer).
struct EntryCounter {
    entries: Vec<u64>,
}

impl Host for EntryCounter {
    fn log(&mut self, _record: LogRecord) {}
    fn send(&mut self, _request: SendRequest) {}
    fn cancel(&mut self, _send_id: &str) {}
    fn start_invoke(&mut self, request: protocol_run::pipeline::actions::InvokeRequest) {
        panic!("the workload invokes nothing, but invoked {}", request.id);
    }
    fn cancel_invoke(&mut self, _id: &str) {}
    fn emit(&mut self, directive: protocol_run::pipeline::actions::Directive) {
        panic!(
            "the workload emits no directives, but emitted {}",
            directive.name
        );
    }
    fn start_effect(&mut self, request: protocol_run::effects::EffectRequest) {
        panic!("the workload starts no effects, but started {}", request.id);
    }
    fn state_entered(&mut self, state: StateId) {
        self.entries[state.index()] += 1;
    }
}

struct Workload {
    machine: Arc<Machine>,
    events: Vec<Event>,
    sequence: Vec<u8>,
    event_hash: u32,
    counted: [usize; 6],
    leaf_codes: Vec<(StateId, u32)>,
    attempts_slot: usize,
    failures_slot: usize,
}

impl Workload {
    fn define() -> (Workload, u128) {
        let started = Instant::now();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/workload.yaml");
        let loaded = protocol_run::pipeline::load::load_file(&path)
            .unwrap_or_else(|error| panic!("{error}"));
        let machine = Arc::new(
            protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
                panic!(
                    "{}",
                    protocol_run::base::diagnostic::render_all(&diagnostics)
                )
            }),
        );
        let define_ns = started.elapsed().as_nanos();
        let events = EVENT_NAMES
            .iter()
            .map(|name| {
                Event::of_type(
                    &machine,
                    machine.event_type(name).expect("workload event"),
                    Origin::External,
                )
            })
            .collect();
        let (sequence, event_hash) = event_sequence();
        let state = |name: &str| machine.state_id(name).expect("workload state");
        let counted = COUNTED_STATES.map(|name| state(name).index());
        let leaf_codes = LEAF_CODES
            .iter()
            .map(|(name, code)| (state(name), *code))
            .collect();
        let slot = |name: &str| {
            machine
                .context
                .iter()
                .position(|(variable, _)| variable == name)
                .expect("slot")
        };
        let workload = Workload {
            attempts_slot: slot("attempts"),
            failures_slot: slot("failures"),
            machine,
            events,
            sequence,
            event_hash,
            counted,
            leaf_codes,
        };
        (workload, define_ns)
    }

    fn start(&self) -> (Interpreter, EntryCounter) {
        let mut interpreter = Interpreter::new(self.machine.clone(), Vec::new());
        let mut counter = EntryCounter {
            entries: vec![0; self.machine.states.len()],
        };
        interpreter
            .start(&mut counter)
            .expect("the workload starts");
        (interpreter, counter)
    }

    fn integer(value: Option<&Value>) -> i64 {
        match value {
            Some(Value::Int(integer)) => *integer,
            _ => -1,
        }
    }

    fn leaf(&self, interpreter: &Interpreter) -> (u32, &str) {
        for (state, code) in &self.leaf_codes {
            if interpreter.configuration().any(|active| active == *state) {
                return (*code, &self.machine.state(*state).id);
            }
        }
        (u32::MAX, "?")
    }

    /// One pass on a fresh instance; with `trace`, the per-event trace hash too.
    fn pass(&self, trace: bool) -> (String, u128) {
        let (mut interpreter, mut counter) = self.start();
        let mut trace_hash = FNV_OFFSET;
        let started = Instant::now();
        for &index in &self.sequence {
            interpreter
                .handle(&self.events[index as usize], &mut counter)
                .expect("macrostep");
            if trace {
                let (leaf, _) = self.leaf(&interpreter);
                let attempts = Self::integer(interpreter.context_slot(self.attempts_slot));
                trace_hash = fnv1a(trace_hash, (leaf | ((attempts as u32) << 3)) as u8);
            }
        }
        let elapsed = started.elapsed().as_nanos();
        let entries: Vec<String> = self
            .counted
            .iter()
            .map(|index| counter.entries[*index].to_string())
            .collect();
        let (_, final_leaf) = self.leaf(&interpreter);
        let mut line = format!(
            "v1 n={EVENTS} ev={:08x} entries={} attempts={} failures={} final={final_leaf}",
            self.event_hash,
            entries.join(","),
            Self::integer(interpreter.context_slot(self.attempts_slot)),
            Self::integer(interpreter.context_slot(self.failures_slot)),
        );
        if trace {
            line.push_str(&format!(" trace={trace_hash:08x}"));
        }
        (line, elapsed)
    }
}

fn peak_rss_kb() -> u64 {
    status_field("VmHWM:")
}

fn current_rss_kb() -> u64 {
    status_field("VmRSS:")
}

fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}

fn bench() {
    let (workload, define_ns) = Workload::define();
    let started = Instant::now();
    let first = workload.start();
    let startup_ns = started.elapsed().as_nanos();
    drop(first);
    let (cold_line, cold_ns) = workload.pass(false);
    let (verified_line, _) = workload.pass(true);
    let mut warm: Vec<u128> = Vec::with_capacity(WARM_PASSES);
    let mut agree = verified_line.starts_with(&cold_line);
    for _ in 0..WARM_PASSES {
        let (line, elapsed) = workload.pass(false);
        agree &= line == cold_line;
        warm.push(elapsed);
    }
    warm.sort_unstable();
    let median = warm[WARM_PASSES / 2] as f64;
    let best = warm[0] as f64;
    let digest = verified_line.bytes().fold(FNV_OFFSET, fnv1a);
    println!(
        "{}",
        serde_json::json!({
            "impl": "protocol-run", "mode": "bench", "events": EVENTS,
            "startup_ns": startup_ns as u64, "define_ns": define_ns as u64,
            "cold_ns_per_event": cold_ns as f64 / EVENTS as f64,
            "warm_eps": EVENTS as f64 / (median / 1e9),
            "warm_ns_per_event": median / EVENTS as f64,
            "best_ns_per_event": best / EVENTS as f64,
            "peak_rss_kb": peak_rss_kb(), "passes_agree": agree,
            "checksum": verified_line, "digest": format!("{digest:08x}"),
        })
    );
}

fn mem() {
    let (workload, _) = Workload::define();
    let before = current_rss_kb();
    let started = Instant::now();
    let mut instances = Vec::with_capacity(INSTANCES);
    for _ in 0..INSTANCES {
        instances.push(workload.start().0);
    }
    let create_ns = started.elapsed().as_nanos();
    let after = current_rss_kb();
    println!(
        "{}",
        serde_json::json!({
            "impl": "protocol-run", "mode": "mem",
            "bytes_per_instance": (after.saturating_sub(before) * 1024) as f64 / INSTANCES as f64,
            "create_ns_per_instance": create_ns as f64 / INSTANCES as f64,
            "size_of_instance": std::mem::size_of::<Interpreter>(),
        })
    );
    drop(instances);
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("bench") | None => bench(),
        Some("mem") => mem(),
        // One untimed pass, for profilers such as `valgrind --tool=callgrind`.
        Some("profile") => println!("{}", Workload::define().0.pass(false).0),
        Some(other) => {
            eprintln!("usage: workload-bench [bench|mem|profile] (not {other})");
            std::process::exit(64);
        }
    }
}
