//! The hot path allocates nothing: a counting allocator watches the reference workload.
//!
//! Its own test binary, because a global allocator would otherwise count every other test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use protocol_run::base::event::{Event, Origin};
use protocol_run::pipeline::actions::{Host, LogRecord, SendRequest};
use protocol_run::pipeline::compile::machine::{StateId, TransitionId};
use protocol_run::runtime::run::Interpreter;

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes asked for, net of those given back.
    static BYTES: Cell<i64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        BYTES.with(|bytes| bytes.set(bytes.get() + layout.size() as i64));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        BYTES.with(|bytes| bytes.set(bytes.get() - layout.size() as i64));
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        BYTES.with(|bytes| bytes.set(bytes.get() + new_size as i64 - layout.size() as i64));
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn bytes() -> i64 {
    BYTES.with(Cell::get)
}

fn workload_machine() -> Arc<protocol_run::pipeline::compile::machine::Machine> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/workload.yaml");
    let loaded = protocol_run::pipeline::load::load_file(std::path::Path::new(path)).unwrap();
    Arc::new(protocol_run::pipeline::compile::compile(&loaded).unwrap())
}

/// Counts entries, like the benchmark's instrumentation, and the host's observer calls: the
/// one call of a transition whose blocks only assign, and the calls of one state each.
#[derive(Default)]
struct CountingHost {
    entries: [u64; 16],
    transitions_passed: u64,
    separate_calls: u64,
    states_entered: u64,
}

impl Host for CountingHost {
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
        self.separate_calls += 1;
    }
    fn state_exited(&mut self, _state: StateId) {
        self.separate_calls += 1;
    }
    fn transition_taken(&mut self, _transition: TransitionId) {
        self.separate_calls += 1;
    }
    fn cancel_effects_of(&mut self, _state: StateId) {
        self.separate_calls += 1;
    }
    fn transition_passed(
        &mut self,
        _transition: TransitionId,
        _exited: &[StateId],
        entered: &[StateId],
    ) {
        self.transitions_passed += 1;
        for state in entered {
            self.entries[state.index()] += 1;
        }
        self.states_entered += entered.len() as u64;
    }
}

/// WORKLOAD.md's machine transcribed by hand, without the engine: what each event should do,
/// so the measured events can be checked to have taken the transitions the test claims to time.
struct Reference {
    state: &'static str,
    attempts: u32,
}

impl Reference {
    /// The states `event` enters, outer to inner; none when the machine ignores it.
    fn handle(&mut self, event: &str) -> &'static [&'static str] {
        match (self.state, event) {
            ("idle", "call") => {
                self.attempts += 1;
                self.state = "attempting";
                &["attempting"]
            }
            ("attempting", "ok") => {
                self.state = "succeeded";
                &["succeeded"]
            }
            ("attempting", "fail") if self.attempts < 3 => {
                self.attempts += 1;
                &["attempting"]
            }
            ("attempting", "fail") => {
                self.state = "notify";
                &["escalated", "notify"]
            }
            ("succeeded", "call") => {
                self.attempts = 1;
                self.state = "attempting";
                &["attempting"]
            }
            ("notify", "ack") => {
                self.state = "monitor";
                &["monitor"]
            }
            ("monitor", "healthy") => {
                self.attempts = 0;
                self.state = "idle";
                &["idle"]
            }
            _ => &[],
        }
    }
}

const WARM_UP_EVENTS: usize = 10_000;
const MEASURED_EVENTS: usize = 100_000;

const EVENT_NAMES: [&str; 5] = ["call", "ok", "fail", "ack", "healthy"];

/// The workload's events, by index into `EVENT_NAMES`.
fn workload_events(machine: &protocol_run::pipeline::compile::machine::Machine) -> Vec<Event> {
    EVENT_NAMES
        .iter()
        .map(|name| Event::of_type(machine, machine.event_type(name).unwrap(), Origin::External))
        .collect()
}

/// WORKLOAD.md's sequence of event indices, warm-up first.
fn workload_sequence() -> Vec<usize> {
    let mut seed: u32 = 42;
    (0..WARM_UP_EVENTS + MEASURED_EVENTS)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((seed >> 16) % 5) as usize
        })
        .collect()
}

#[test]
fn the_reference_workload_allocates_nothing_per_event() {
    let machine = workload_machine();
    let names = EVENT_NAMES;
    let events = workload_events(&machine);
    // WORKLOAD.md's sequence, made before anything is counted.
    let sequence = workload_sequence();
    let (warm_up, measured) = sequence.split_at(WARM_UP_EVENTS);

    let mut interpreter = Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap());
    let mut host = CountingHost::default();
    interpreter.start(&mut host).unwrap();
    // Warm up: every transition is taken and every scratch buffer reaches its size.
    for &index in warm_up {
        interpreter.handle(&events[index], &mut host).unwrap();
    }
    // Only the measured events' entries count: a machine that had fallen onto the path of
    // ignored events would show none.
    host.entries = [0; 16];
    let before = allocations();
    for &index in measured {
        interpreter.handle(&events[index], &mut host).unwrap();
    }
    let during = allocations() - before;
    assert_eq!(
        during, 0,
        "{during} allocations in {MEASURED_EVENTS} events"
    );

    let mut reference = Reference {
        state: "idle",
        attempts: 0,
    };
    for &index in warm_up {
        reference.handle(names[index]);
    }
    let mut expected = [0u64; 16];
    for &index in measured {
        for state in reference.handle(names[index]) {
            expected[machine.state_id(state).unwrap().index()] += 1;
        }
    }
    for state in [
        "idle",
        "attempting",
        "succeeded",
        "escalated",
        "notify",
        "monitor",
    ] {
        let index = machine.state_id(state).unwrap().index();
        assert!(
            expected[index] > 0,
            "the measured events never enter {state}"
        );
        assert_eq!(
            host.entries[index], expected[index],
            "entries of {state} in the measured events"
        );
    }
    assert_eq!(host.entries, expected);
}

/// A created and started instance of the reference workload holds at most 256 bytes: its own
/// size and what it allocated (issue 29's bound), in one allocation (its context; the
/// configuration of a machine of at most 64 states is in place, and an instance has no inputs,
/// limits or outcome of its own until it needs them).
#[test]
fn a_started_instance_of_the_reference_workload_holds_at_most_256_bytes() {
    let machine = workload_machine();
    let mut host = CountingHost::default();
    // The first start of a thread borrows the thread's scratch space and works out the
    // machine's transitions: what every later instance shares.
    let mut first = Interpreter::new(machine.clone(), Vec::new());
    first.start(&mut host).unwrap();
    let (allocations_before, bytes_before) = (allocations(), bytes());
    let mut instance = Interpreter::new(machine.clone(), Vec::new());
    instance.start(&mut host).unwrap();
    let (count, held) = (allocations() - allocations_before, bytes() - bytes_before);
    let size = std::mem::size_of::<Interpreter>() as i64;
    assert!(
        size + held <= 256,
        "an instance is {size} bytes and holds {held} more ({} in all)",
        size + held
    );
    assert_eq!(count, 1, "allocations to create and start an instance");
    assert!(instance.is_active("idle"));
}

/// Every block of the reference workload only assigns: each transition reaches the host in
/// one call (four or more before: taken, each state exited and its effects cancelled, each
/// state entered), with the states it entered, and no call of one state each.
#[test]
fn the_reference_workload_reaches_the_host_once_per_transition() {
    let machine = workload_machine();
    let events = workload_events(&machine);
    let sequence = workload_sequence();
    let mut interpreter = Interpreter::new(machine.clone(), Vec::new());
    let mut host = CountingHost::default();
    interpreter.start(&mut host).unwrap();
    let started = host.separate_calls;
    let mut reference = Reference {
        state: "idle",
        attempts: 0,
    };
    let (mut transitions, mut entries) = (0, 0);
    for &index in &sequence {
        interpreter.handle(&events[index], &mut host).unwrap();
        let entered = reference.handle(EVENT_NAMES[index]);
        transitions += u64::from(!entered.is_empty());
        entries += entered.len() as u64;
    }
    assert!(transitions > 10_000, "{transitions} transitions taken");
    assert_eq!(host.transitions_passed, transitions);
    assert_eq!(host.states_entered, entries);
    assert_eq!(
        host.separate_calls, started,
        "observer calls of one state each after the start"
    );
}

/// Reading YAML allocates nothing per node for the node's position (issue 29): the pointers
/// are written into one text and found through one table, both grown by doubling. Beyond what
/// saphyr's parser allocates for the same text and what the value needs (a clone of it counts
/// that: each text, key, list and map), reading a list of 10,000 numbers or a mapping of 2,000
/// entries takes a few dozen allocations; a `String` per pointer took 10,000 and 2,000 more.
#[test]
fn reading_yaml_allocates_nothing_per_node_for_its_positions() {
    use protocol_run::pipeline::load::yaml::{YamlLimits, parse};
    let numbers: Vec<String> = (0..10_000).map(|number| number.to_string()).collect();
    let entries: Vec<String> = (0..2_000)
        .map(|number| format!("k{number}: {number}"))
        .collect();
    let list = format!("list: [{}]\n", numbers.join(", "));
    let mapping = entries.join("\n");
    for (text, pointer, at) in [(&list, "/list/9999", "9999"), (&mapping, "/k1999", "1999")] {
        let before = allocations();
        let mut parser = saphyr_parser::Parser::new_from_str(text);
        while let Some(event) = parser.next_event() {
            event.unwrap();
        }
        drop(parser);
        let parser = allocations() - before;
        let before = allocations();
        let document = parse(text, &YamlLimits::default()).unwrap();
        let reading = allocations() - before;
        let before = allocations();
        let value = document.value.clone();
        let value = allocations() - before - u64::from(value.is_null());
        let own = reading - parser - value;
        assert!(
            own < 100,
            "reading allocated {reading} times: {parser} in saphyr's parser, {value} for the \
             value, {own} of its own"
        );
        let node = document.positions.get(pointer).unwrap().value;
        assert_eq!(&text[node.offset..node.offset + 4], at);
    }
}

/// Each plain plan of the reference workload runs only the blocks that have actions (one
/// block per assignment written on its path, none for a transition with no actions), each
/// assignment as a planned raw int that covers its block, and changes the configuration by
/// one-word masks: what a transition costs is what it has to do.
#[test]
fn the_reference_workloads_plans_run_only_the_blocks_with_actions() {
    use protocol_run::pipeline::compile::machine::LeafPlan;
    let machine = workload_machine();
    let events = workload_events(&machine);
    let mut interpreter = Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap());
    let mut host = CountingHost::default();
    interpreter.start(&mut host).unwrap();
    for &index in &workload_sequence()[..WARM_UP_EVENTS] {
        interpreter.handle(&events[index], &mut host).unwrap();
    }
    let index = machine.candidates.as_ref().expect("a candidate table");
    let state = |name: &str| machine.state_id(name).unwrap();
    let event = |name: &str| machine.event_type(name).unwrap();
    // (leaf, event, blocks of each candidate in selection order)
    let expected: [(&str, &str, &[usize]); 6] = [
        ("idle", "call", &[1]),
        ("attempting", "ok", &[0]),
        ("attempting", "fail", &[2, 0]),
        ("succeeded", "call", &[2]),
        ("notify", "ack", &[0]),
        ("monitor", "healthy", &[1]),
    ];
    for (leaf, name, blocks) in expected {
        let candidates = index.candidates(state(leaf), event(name));
        let found: Vec<usize> = candidates
            .iter()
            .map(|candidate| match candidate.plan.get() {
                Some(LeafPlan::Plain(plan)) => {
                    for block in &plan.blocks {
                        assert_eq!(block.integers.len(), 1, "{leaf} on {name}");
                        assert_eq!(block.rest, None, "{leaf} on {name}");
                        assert!(block.change_before.masks.is_some(), "{leaf} on {name}");
                    }
                    assert!(plan.last_change.masks.is_some(), "{leaf} on {name}");
                    plan.blocks.len()
                }
                other => panic!("{leaf} on {name}: not a plain plan taken: {other:?}"),
            })
            .collect();
        assert_eq!(found, blocks, "{leaf} on {name}");
    }
}
