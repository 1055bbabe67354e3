//! The reference workload (`../shared/bench/WORKLOAD.md`, v1) written by hand, as a plain `match`
//! machine and as a `statig` machine: the baseline `benches/guard.py` holds `workload-bench` to.
//! `workload-baseline bench` prints one JSON line per machine with the same `checksum` as
//! `workload-bench bench`; `workload-baseline check` prints the two checksum lines only (one pass
//! each, for a test on a debug build).

use std::time::Instant;

use statig::prelude::*;

#[path = "workload/sequence.rs"]
mod sequence;

use sequence::{EVENTS, FNV_OFFSET, event_sequence, fnv1a};

const WARM_PASSES: usize = 25;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Call,
    Ok,
    Fail,
    Ack,
    Healthy,
}

/// WORKLOAD.md's event mapping: `EVENTS[(x >> 16) mod 5]`.
const EVENT_ORDER: [Event; 5] = [
    Event::Call,
    Event::Ok,
    Event::Fail,
    Event::Ack,
    Event::Healthy,
];

/// The instrumentation's counter index of each state, in WORKLOAD.md's order.
const IDLE: usize = 0;
const ATTEMPTING: usize = 1;
const SUCCEEDED: usize = 2;
const ESCALATED: usize = 3;
const NOTIFY: usize = 4;
const MONITOR: usize = 5;

/// The active leaf state, with WORKLOAD.md's leaf codes as discriminants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Idle = 0,
    Attempting = 1,
    Succeeded = 2,
    Notify = 4,
    Monitor = 5,
}

impl Leaf {
    fn name(self) -> &'static str {
        match self {
            Leaf::Idle => "idle",
            Leaf::Attempting => "attempting",
            Leaf::Succeeded => "succeeded",
            Leaf::Notify => "notify",
            Leaf::Monitor => "monitor",
        }
    }
}

/// What the checksum reads from an instance, whichever way the machine is written.
trait WorkloadMachine {
    const NAME: &'static str;
    /// Creates the instance and enters `idle`.
    fn start() -> Self;
    fn handle(&mut self, event: Event);
    fn leaf(&self) -> Leaf;
    fn counters(&self) -> &Counters;
}

/// The context and the per-state entry counters.
#[derive(Debug, Default)]
struct Counters {
    attempts: u32,
    failures: u32,
    entries: [u32; 6],
}

/// The machine as one `match` on (leaf, event).
struct PlainMachine {
    leaf: Leaf,
    counters: Counters,
}

impl PlainMachine {
    fn enter(&mut self, leaf: Leaf) {
        self.leaf = leaf;
        match leaf {
            Leaf::Idle => self.counters.entries[IDLE] += 1,
            Leaf::Attempting => {
                self.counters.entries[ATTEMPTING] += 1;
                self.counters.attempts += 1;
            }
            Leaf::Succeeded => self.counters.entries[SUCCEEDED] += 1,
            Leaf::Notify => self.counters.entries[NOTIFY] += 1,
            Leaf::Monitor => self.counters.entries[MONITOR] += 1,
        }
    }
}

impl WorkloadMachine for PlainMachine {
    const NAME: &'static str = "plain-match";

    fn start() -> Self {
        let mut machine = PlainMachine {
            leaf: Leaf::Idle,
            counters: Counters::default(),
        };
        machine.enter(Leaf::Idle);
        machine
    }

    fn handle(&mut self, event: Event) {
        match (self.leaf, event) {
            (Leaf::Idle, Event::Call) => self.enter(Leaf::Attempting),
            (Leaf::Attempting, Event::Ok) => self.enter(Leaf::Succeeded),
            (Leaf::Attempting, Event::Fail) if self.counters.attempts < 3 => {
                self.counters.failures += 1;
                self.enter(Leaf::Attempting);
            }
            (Leaf::Attempting, Event::Fail) => {
                // Entering the compound state: its own counter, then its initial child's.
                self.counters.entries[ESCALATED] += 1;
                self.enter(Leaf::Notify);
            }
            (Leaf::Succeeded, Event::Call) => {
                self.counters.attempts = 0;
                self.enter(Leaf::Attempting);
            }
            (Leaf::Notify, Event::Ack) => self.enter(Leaf::Monitor),
            (Leaf::Monitor, Event::Healthy) => {
                self.counters.attempts = 0;
                self.enter(Leaf::Idle);
            }
            _ => {}
        }
    }

    fn leaf(&self) -> Leaf {
        self.leaf
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// The machine's shared storage under statig: transition actions run in the handler, before
/// statig's exit and entry actions, which is SCXML's order here (the machine has no exit actions).
#[derive(Debug, Default)]
struct Retry {
    counters: Counters,
}

#[state_machine(initial = "State::idle()", state(derive(Debug, Clone, Copy)))]
impl Retry {
    #[state(entry_action = "enter_idle")]
    fn idle(event: &Event) -> Outcome<State> {
        match event {
            Event::Call => Transition(State::attempting()),
            _ => Handled,
        }
    }

    #[state(entry_action = "enter_attempting")]
    fn attempting(&mut self, event: &Event) -> Outcome<State> {
        match event {
            Event::Ok => Transition(State::succeeded()),
            Event::Fail if self.counters.attempts < 3 => {
                self.counters.failures += 1;
                Transition(State::attempting())
            }
            Event::Fail => Transition(State::notify()),
            _ => Handled,
        }
    }

    #[state(entry_action = "enter_succeeded")]
    fn succeeded(&mut self, event: &Event) -> Outcome<State> {
        match event {
            Event::Call => {
                self.counters.attempts = 0;
                Transition(State::attempting())
            }
            _ => Handled,
        }
    }

    #[superstate(entry_action = "enter_escalated")]
    fn escalated(event: &Event) -> Outcome<State> {
        let _ = event;
        Handled
    }

    #[state(superstate = "escalated", entry_action = "enter_notify")]
    fn notify(event: &Event) -> Outcome<State> {
        match event {
            Event::Ack => Transition(State::monitor()),
            _ => Super,
        }
    }

    #[state(superstate = "escalated", entry_action = "enter_monitor")]
    fn monitor(&mut self, event: &Event) -> Outcome<State> {
        match event {
            Event::Healthy => {
                self.counters.attempts = 0;
                Transition(State::idle())
            }
            _ => Super,
        }
    }

    #[action]
    fn enter_idle(&mut self) {
        self.counters.entries[IDLE] += 1;
    }

    #[action]
    fn enter_attempting(&mut self) {
        self.counters.entries[ATTEMPTING] += 1;
        self.counters.attempts += 1;
    }

    #[action]
    fn enter_succeeded(&mut self) {
        self.counters.entries[SUCCEEDED] += 1;
    }

    #[action]
    fn enter_escalated(&mut self) {
        self.counters.entries[ESCALATED] += 1;
    }

    #[action]
    fn enter_notify(&mut self) {
        self.counters.entries[NOTIFY] += 1;
    }

    #[action]
    fn enter_monitor(&mut self) {
        self.counters.entries[MONITOR] += 1;
    }
}

/// The statig machine, initialized (`init` enters `idle`).
struct StatigMachine(statig::blocking::InitializedStateMachine<Retry>);

impl WorkloadMachine for StatigMachine {
    const NAME: &'static str = "statig";

    fn start() -> Self {
        StatigMachine(Retry::default().uninitialized_state_machine().init())
    }

    fn handle(&mut self, event: Event) {
        self.0.handle(&event);
    }

    fn leaf(&self) -> Leaf {
        match self.0.state() {
            State::Idle {} => Leaf::Idle,
            State::Attempting {} => Leaf::Attempting,
            State::Succeeded {} => Leaf::Succeeded,
            State::Notify {} => Leaf::Notify,
            State::Monitor {} => Leaf::Monitor,
        }
    }

    fn counters(&self) -> &Counters {
        &self.0.inner().counters
    }
}

/// One pass of a fresh instance over the sequence: the checksum line (with the trace hash when
/// `trace` is set, which is then not a timing) and the nanoseconds the events took.
fn pass<M: WorkloadMachine>(sequence: &[u8], event_hash: u32, trace: bool) -> (String, u128) {
    let mut machine = M::start();
    let mut trace_hash = FNV_OFFSET;
    let started = Instant::now();
    for &index in sequence {
        machine.handle(EVENT_ORDER[usize::from(index)]);
        if trace {
            let byte = machine.leaf() as u32 | (machine.counters().attempts << 3);
            trace_hash = fnv1a(trace_hash, byte as u8);
        }
    }
    let elapsed = started.elapsed().as_nanos();
    let machine = std::hint::black_box(machine);
    let counters = machine.counters();
    let entries: Vec<String> = counters.entries.iter().map(u32::to_string).collect();
    let mut line = format!(
        "v1 n={EVENTS} ev={event_hash:08x} entries={} attempts={} failures={} final={}",
        entries.join(","),
        counters.attempts,
        counters.failures,
        machine.leaf().name(),
    );
    if trace {
        line.push_str(&format!(" trace={trace_hash:08x}"));
    }
    (line, elapsed)
}

/// `workload-bench bench`'s measurement for one machine, as one JSON line.
fn bench<M: WorkloadMachine>(sequence: &[u8], event_hash: u32) {
    let started = Instant::now();
    let first = std::hint::black_box(M::start());
    let startup_ns = started.elapsed().as_nanos();
    drop(first);
    let (cold_line, cold_ns) = pass::<M>(sequence, event_hash, false);
    let (verified_line, _) = pass::<M>(sequence, event_hash, true);
    let mut agree = verified_line.starts_with(&cold_line);
    let mut warm: Vec<u128> = (0..WARM_PASSES)
        .map(|_| {
            let (line, elapsed) = pass::<M>(sequence, event_hash, false);
            agree &= line == cold_line;
            elapsed
        })
        .collect();
    warm.sort_unstable();
    let median = warm[WARM_PASSES / 2] as f64;
    let digest = verified_line.bytes().fold(FNV_OFFSET, fnv1a);
    println!(
        "{}",
        serde_json::json!({
            "impl": M::NAME, "mode": "bench", "events": EVENTS,
            "startup_ns": startup_ns as u64,
            "cold_ns_per_event": cold_ns as f64 / EVENTS as f64,
            "warm_ns_per_event": median / EVENTS as f64,
            "best_ns_per_event": warm[0] as f64 / EVENTS as f64,
            "passes_agree": agree,
            "checksum": verified_line, "digest": format!("{digest:08x}"),
        })
    );
}

fn main() {
    let (sequence, event_hash) = event_sequence();
    match std::env::args().nth(1).as_deref() {
        Some("bench") | None => {
            bench::<PlainMachine>(&sequence, event_hash);
            bench::<StatigMachine>(&sequence, event_hash);
        }
        Some("check") => {
            println!("{}", pass::<PlainMachine>(&sequence, event_hash, true).0);
            println!("{}", pass::<StatigMachine>(&sequence, event_hash, true).0);
        }
        Some(other) => {
            eprintln!("usage: workload-baseline [bench|check] (not {other})");
            std::process::exit(64);
        }
    }
}
