//! Properties of the interpreter on random machines and random event sequences.
//!
//! A generator builds small statecharts (nested compound and parallel states, final states,
//! shallow and deep history, event, eventless and delayed transitions with guards over an
//! integer context variable or the event's data, `assign`, `raise`, `send` (delayed ones with
//! an id, which `cancel` withdraws), `log`, effects (`exec`, never run: the test's host
//! reports their outcomes as inputs), `map`s of them (each item an effect the host records),
//! `foreach`, and `if`/`elif`/`else` around them) and renders them as
//! YAML that must load and compile: a protocol that does not is a generator bug, unless the
//! diagnostic shows an engine bug. Four properties are checked:
//!
//! 1. after `start` and after every macrostep the configuration is legal;
//! 2. replaying the journal of external events (inputs, delivered `send`s, fired timers and
//!    delayed sends, effect outcomes) into a fresh instance gives the same snapshots, host
//!    records and effect requests, and restoring any snapshot then handling the rest of the
//!    journal ends in the same state, doing the same things;
//! 3. a machine whose only transitions are `after` timers and eventless ones takes the same
//!    transitions and ends the same way on virtual time and on real time;
//! 4. the tables compiled for speed (each state's candidate transitions per event, the fixed
//!    domain and entry set of transitions history plays no part in) change nothing: the journal
//!    replayed on the same machine compiled without them gives the same steps. Without them a
//!    machine without parallel states also loses its single-leaf path (selection from the one
//!    active leaf, events it ignores discarded before a macrostep), so that path is checked
//!    against the general algorithm too.
//!
//! Each property prints a few statistics (stderr, `--nocapture`) and asserts that the random
//! cases reached the features they are meant to exercise.
//!
//! Failing cases are kept. When a case fails, proptest appends its seed (with the shrunk case
//! as a comment) to `tests/properties.proptest-regressions` (properties 1, 2 and 4, which share
//! a generator) or `tests/properties-timers.proptest-regressions` (property 3), and every run
//! replays the seeds found there before it draws new cases. Commit the file with the fix: both
//! are absent until something fails. A seed names a case only for the generator that drew it,
//! so a failure that turns out to be an engine bug is also kept as a small named test next to
//! the code it concerns (as `a_history_state_and_a_state_inside_its_parallel_parent_are_refused_as_targets`
//! is here); after the generator changes, old seeds still run, as new random cases.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::{Map, Value as Json, json};
use tokio::time::Instant;

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::snapshot::Snapshot;
use protocol_run::base::value::Value;
use protocol_run::effects::EffectRequest;
use protocol_run::pipeline::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use protocol_run::pipeline::compile::machine::{Machine, Reach, StateId, StateKind, TransitionId};
use protocol_run::runtime::run::algorithm::{Limits, RunError};
use protocol_run::runtime::run::driver::{
    DriveOptions, EventSource, InputLineError, Observer, RunReport, TimeMode, drive,
};
use protocol_run::runtime::run::{Interpreter, Record, RecordingHost};

/// Cases of properties 1, 2 and 4 (each a machine and up to `MAX_INPUTS` inputs), not counting
/// the seeds replayed from `EVENT_REGRESSIONS`.
const EVENT_CASES: u32 = 64;
/// The most rounds of `EVENT_CASES` a property runs to reach its rare features.
const EVENT_ROUNDS: u32 = 4;
/// Where the seeds of failing cases are kept (see the header).
const EVENT_REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/properties.proptest-regressions"
);
const TIMER_REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/properties-timers.proptest-regressions"
);
/// Accepted cases of property 3: each runs on real time (again if it lagged), so it costs its
/// virtual duration in wall-clock time (bounded by `MAX_TIMER_RUN_MS`).
const TIMER_CASES: u32 = 10;
const MAX_INPUTS: usize = 12;
/// A low microstep limit, so a generated livelock (an acceptable outcome) stops quickly.
const MAX_MICROSTEPS: usize = 200;
/// Queued `send` events delivered after one input, at most; the rest are dropped (a `send`
/// loop would otherwise never end).
const MAX_SENDS_PER_INPUT: usize = 8;
/// External events delivered in one run, at most: property 2 resumes from every snapshot and
/// handles the rest of the journal, which costs the square of its length, and a run that many
/// `send`s keep busy would otherwise cost seconds.
const MAX_JOURNAL: usize = 40;
/// In a machine of properties 1 and 2, every transition that an event from inside the
/// machine (`raise`d, `done.state.*`, `error.*`) or no event may trigger counts itself against
/// a budget, `t < 4`, which only transitions on external events renew: a macrostep then takes
/// a bounded number of microsteps. A few eventless transitions are left unbounded, so runs
/// sometimes loop and hit the microstep limit, which is an acceptable outcome.
const MACROSTEP_BUDGET: u32 = 4;
/// Transitions a timer-only machine may take in all (`n < 8`, each increments `n`), so every
/// run ends: timers keep firing only while the budget lasts.
const TIMER_BUDGET: u32 = 8;
/// Two timers pending together must fall due at least this far apart (virtual milliseconds);
/// see `timer_only_machines_take_the_same_transitions_on_virtual_and_real_time`.
const MIN_TIMER_GAP_MS: u64 = 5;
/// Real-time runs of one case that may lag behind their schedule before the case is given up.
const MAX_REAL_TIME_ATTEMPTS: u32 = 3;
/// Longest virtual duration of a timer-only case, so the real-time runs stay short.
const MAX_TIMER_RUN_MS: u64 = 120;
/// How late a real-time transition may come: this much, plus a quarter of its planned offset
/// (lateness adds up over the macrosteps of a run). Generous for a loaded 2-core machine
/// running the other tests, yet a timer that waits twice its delay is late by its whole
/// planned offset, over the bound from about 30 ms on.
const LATENESS_ALLOWANCE_MS: u64 = 20;
/// Timer-only cases whose real-time runs may all come too late before the property fails: a
/// few are the machine being busy, more are timers that fire late.
const MAX_REJECTED_LATE: u32 = 3;

/// Event names the machines react to: the first four come from outside (inputs and `send`),
/// the last two from `raise`. Inputs also send `d`, which no descriptor names.
const EVENTS: [&str; 6] = ["a", "b", "c", "a.x", "r", "r.y"];
const EXTERNAL: usize = 4;
const INPUT_EVENTS: [&str; 5] = ["a", "b", "c", "a.x", "d"];
/// Ids of delayed sends, `later0` …: few, so that `cancel` often finds one pending.
const SEND_IDS: usize = 2;
/// Ids of effect actions, `e0` …: several actions may share one, as protocols may. Few, so
/// that transitions on an outcome often find it reported.
const EFFECT_IDS: usize = 1;

// ---------------------------------------------------------------------------------------------
// The generated model

/// Which machines to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Event, eventless and delayed transitions, every action kind.
    Events,
    /// Only `after` and eventless transitions, each with a target; no `raise` or `send`.
    Timers,
}

/// A guard over the context variable `x`, the event's data or the configuration.
#[derive(Debug, Clone)]
enum Guard {
    Below(i64),
    AtLeast(i64),
    Even,
    /// `has(event.data.n) && event.data.n < k`: false for data without `n`, an error (so
    /// `error.execution`) for an event without data, or for no event yet.
    DataBelow(i64),
    /// `event.data.n >= k`: an error whenever the data has no `n`.
    DataAtLeast(i64),
    /// `In('…')` of a state picked among all non-history states.
    In(Index),
    NotIn(Index),
}

#[derive(Debug, Clone)]
enum Act {
    Increment,
    Decrement,
    Set(i64),
    /// `x = 12 / x`: `error.execution` when `x` is 0.
    Divide,
    /// `x = event.data.n`, or with `has`, `x` kept when the data has no `n` (both an error
    /// when the event has no data).
    FromData {
        strict: bool,
    },
    /// The event, with data `{n: x}` when `true`.
    Raise(usize, bool),
    Send(usize, bool),
    /// A delayed `send` of an external event with the id `later<id>`.
    SendLater {
        event: usize,
        delay_ms: u64,
        id: usize,
    },
    /// `cancel: later<id>`.
    Cancel(usize),
    Log,
    /// `exec: ["true"]` with the id `e<id>`, owned by its state or (`scope: run`) the run.
    Effect {
        id: usize,
        run_scoped: bool,
    },
    /// `if`, then each `elif` in turn: a condition and its block; then `else`, if any.
    If {
        branches: Vec<(Guard, Vec<Act>)>,
        otherwise: Option<Vec<Act>>,
    },
    /// `map` over `array` into `item` (and `position` when `index`): one `exec: [true, ...]`
    /// per element, the id `m<n>` unique in the machine.
    Map {
        array: LoopArray,
        index: bool,
        run_scoped: bool,
    },
    /// `foreach` over `array` into `item` (and `position` when `index`), running the block.
    Foreach {
        array: LoopArray,
        index: bool,
        body: Vec<Act>,
    },
}

/// What a generated `foreach` walks.
#[derive(Debug, Clone, Copy)]
enum LoopArray {
    /// `[0, 1, …]` of this many elements (none included).
    Literal(usize),
    /// `[x, x + 1]`: the context as the loop starts.
    Context,
    /// `x`, not a list: `error.execution` before the body.
    NotAList,
}

#[derive(Debug, Clone)]
enum Descriptor {
    One(usize),
    Two(usize, usize),
    Any,
    Error,
    /// `done.state.<id>` of a compound or parallel state.
    Done(Index),
    /// An outcome of the effects `e<id>`: `done.exec.e<id>`, `error.exec.e<id>`,
    /// `error.exec.timeout.e<id>`, or (3) `error.exec`, any effect's failure.
    Outcome(u8, usize),
}

#[derive(Debug, Clone)]
struct Trans {
    descriptor: Descriptor,
    /// Indices into all states (history states included); a second target is kept only when
    /// it is in another region of a parallel state than the first.
    targets: Vec<Index>,
    guard: Option<Guard>,
    actions: Vec<Act>,
    internal: bool,
    /// Renews the budget (`t = 0`), on a transition only external events trigger.
    renew: bool,
    /// An eventless transition left out of the budget (properties 1 and 2 only).
    unbounded: bool,
}

#[derive(Debug, Clone)]
struct Timed {
    delay_ms: u64,
    transition: Trans,
}

#[derive(Debug, Clone, Default)]
struct Decor {
    entry: Vec<Act>,
    exit: Vec<Act>,
    on: Vec<Trans>,
    always: Vec<Trans>,
    after: Vec<Timed>,
}

#[derive(Debug, Clone)]
struct HistorySpec {
    deep: bool,
    /// The default target, among the parent's non-history descendants.
    target: Option<Index>,
}

#[derive(Debug, Clone)]
enum Shape {
    Atomic,
    Final {
        exit_code: u8,
        output: bool,
    },
    Compound {
        children: Vec<Node>,
        /// A non-history proper descendant.
        initial: Option<Index>,
        history: Option<HistorySpec>,
    },
    Parallel {
        children: Vec<Node>,
        history: Option<HistorySpec>,
    },
}

#[derive(Debug, Clone)]
struct Node {
    shape: Shape,
    decor: Decor,
}

/// The data an input event carries.
#[derive(Debug, Clone, Copy)]
enum Payload {
    None,
    /// `{"n": k}`, which data guards read.
    N(i64),
    /// `{"m": k}`: data, but without `n`.
    M(i64),
}

impl Payload {
    fn json(self) -> Json {
        match self {
            Payload::None => Json::Null,
            Payload::N(value) => json!({ "n": value }),
            Payload::M(value) => json!({ "m": value }),
        }
    }
}

/// How an effect ended, as the host reports it.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Done,
    Failed,
    TimedOut,
}

#[derive(Debug, Clone, Copy)]
enum Input {
    Event(usize, Payload),
    /// Reports the outcome of one of the pending effects (started, not yet reported, their
    /// owner not exited since).
    Outcome(Index, Ending),
    /// Fires one of the pending delayed sends (any of them: the interpreter must stay legal
    /// whatever order a host delivers events in).
    Tick(Index),
}

/// A generated machine, rendered, with the inputs to send it. Its `Debug` is the YAML, so a
/// failing case prints as a protocol one can run.
#[derive(Clone)]
struct Case {
    yaml: String,
    inputs: Vec<Input>,
}

/// A generated protocol, shown as YAML.
#[derive(Clone)]
struct Yaml(String);

impl fmt::Debug for Yaml {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "\n{}", self.0)
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|input| match input {
                Input::Event(event, Payload::None) => INPUT_EVENTS[*event].to_string(),
                Input::Event(event, payload) => {
                    format!("{} {}", INPUT_EVENTS[*event], payload.json())
                }
                Input::Tick(index) => format!("tick#{}", index.index(1000)),
                Input::Outcome(index, ending) => {
                    format!("{ending:?}#{}", index.index(1000))
                }
            })
            .collect();
        write!(formatter, "\n{}inputs: {inputs:?}\n", self.yaml)
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies

/// Guards; only machines of events read the event's data (a timer's has none).
fn guard(mode: Mode) -> BoxedStrategy<Guard> {
    let plain = prop_oneof![
        3 => (0i64..4).prop_map(Guard::Below),
        3 => (0i64..4).prop_map(Guard::AtLeast),
        2 => Just(Guard::Even),
        1 => any::<Index>().prop_map(Guard::In),
        1 => any::<Index>().prop_map(Guard::NotIn),
    ];
    match mode {
        Mode::Events => prop_oneof![
            8 => plain,
            4 => (1i64..5).prop_map(Guard::DataBelow),
            2 => (0i64..3).prop_map(Guard::DataAtLeast),
        ]
        .boxed(),
        Mode::Timers => plain.boxed(),
    }
}

/// How deep `if` actions nest.
const IF_DEPTH: u32 = 2;

/// An action, perhaps an `if` or a `foreach` of actions (nested up to `IF_DEPTH`).
fn action(mode: Mode) -> BoxedStrategy<Act> {
    nested_action(mode, IF_DEPTH)
}

fn nested_action(mode: Mode, depth: u32) -> BoxedStrategy<Act> {
    if depth == 0 {
        return simple_action(mode);
    }
    let inner = nested_action(mode, depth - 1);
    let block = move || vec(inner.clone(), 1..3);
    let conditional = (
        vec((guard(mode), block()), 1..4),
        option::weighted(0.5, block()),
    )
        .prop_map(|(branches, otherwise)| Act::If {
            branches,
            otherwise,
        });
    let foreach = (loop_array(), any::<bool>(), block())
        .prop_map(|(array, index, body)| Act::Foreach { array, index, body });
    prop_oneof![8 => simple_action(mode), 1 => conditional, 1 => foreach].boxed()
}

/// The list of a `foreach` or a `map`.
fn loop_array() -> impl Strategy<Value = LoopArray> {
    prop_oneof![
        3 => (0usize..4).prop_map(LoopArray::Literal),
        2 => Just(LoopArray::Context),
        1 => Just(LoopArray::NotAList),
    ]
}

fn simple_action(mode: Mode) -> BoxedStrategy<Act> {
    match mode {
        Mode::Events => prop_oneof![
            3 => Just(Act::Increment),
            2 => Just(Act::Decrement),
            2 => (0i64..4).prop_map(Act::Set),
            1 => Just(Act::Divide),
            1 => any::<bool>().prop_map(|strict| Act::FromData { strict }),
            2 => (EXTERNAL..EVENTS.len(), proptest::bool::weighted(0.5))
                .prop_map(|(event, data)| Act::Raise(event, data)),
            1 => (0..EXTERNAL, proptest::bool::weighted(0.5))
                .prop_map(|(event, data)| Act::Send(event, data)),
            2 => (0..EXTERNAL, 1u64..=30, 0..SEND_IDS)
                .prop_map(|(event, delay_ms, id)| Act::SendLater { event, delay_ms, id }),
            2 => (0..SEND_IDS).prop_map(Act::Cancel),
            2 => (0..EFFECT_IDS, proptest::bool::weighted(0.3))
                .prop_map(|(id, run_scoped)| Act::Effect { id, run_scoped }),
            1 => (loop_array(), any::<bool>(), proptest::bool::weighted(0.3))
                .prop_map(|(array, index, run_scoped)| Act::Map { array, index, run_scoped }),
            1 => Just(Act::Log),
        ]
        .boxed(),
        Mode::Timers => prop_oneof![
            3 => Just(Act::Increment),
            2 => Just(Act::Decrement),
            2 => (0i64..4).prop_map(Act::Set),
            1 => Just(Act::Divide),
            1 => Just(Act::Log),
        ]
        .boxed(),
    }
}

fn descriptor() -> impl Strategy<Value = Descriptor> {
    prop_oneof![
        8 => (0..EVENTS.len()).prop_map(Descriptor::One),
        2 => (0..EVENTS.len(), 0..EVENTS.len()).prop_map(|(a, b)| Descriptor::Two(a, b)),
        1 => Just(Descriptor::Any),
        1 => Just(Descriptor::Error),
        2 => any::<Index>().prop_map(Descriptor::Done),
        8 => (0u8..4, 0..EFFECT_IDS).prop_map(|(kind, id)| Descriptor::Outcome(kind, id)),
    ]
}

/// A transition; `targeted` ones always have one or two targets.
fn transition(mode: Mode, targeted: bool) -> BoxedStrategy<Trans> {
    let targets = if targeted {
        prop_oneof![8 => vec(any::<Index>(), 1), 2 => vec(any::<Index>(), 2)].boxed()
    } else {
        prop_oneof![
            1 => Just(Vec::new()),
            8 => vec(any::<Index>(), 1),
            2 => vec(any::<Index>(), 2),
        ]
        .boxed()
    };
    (
        descriptor(),
        targets,
        option::weighted(0.5, guard(mode)),
        vec(action(mode), 0..3),
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.3),
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(descriptor, targets, guard, actions, internal, renew, unbounded)| Trans {
                descriptor,
                targets,
                guard,
                actions,
                internal,
                renew,
                unbounded,
            },
        )
        .boxed()
}

fn timed(mode: Mode) -> impl Strategy<Value = Timed> {
    (1u64..=30, transition(mode, mode == Mode::Timers)).prop_map(|(delay_ms, transition)| Timed {
        delay_ms,
        transition,
    })
}

/// Entry and exit actions, and for a non-final state its transitions.
fn decor(mode: Mode, is_final: bool) -> BoxedStrategy<Decor> {
    let actions = || vec(action(mode), 0..2);
    if is_final {
        return (actions(), actions())
            .prop_map(|(entry, exit)| Decor {
                entry,
                exit,
                ..Decor::default()
            })
            .boxed();
    }
    let (on, always, after) = match mode {
        Mode::Events => (
            vec(transition(mode, false), 0..3).boxed(),
            prop_oneof![3 => Just(Vec::new()), 1 => vec(transition(mode, false), 1)].boxed(),
            prop_oneof![3 => Just(Vec::new()), 1 => vec(timed(mode), 1)].boxed(),
        ),
        Mode::Timers => (
            Just(Vec::new()).boxed(),
            prop_oneof![3 => Just(Vec::new()), 1 => vec(transition(mode, true), 1)].boxed(),
            vec(timed(mode), 0..3).boxed(),
        ),
    };
    (actions(), actions(), on, always, after)
        .prop_map(|(entry, exit, on, always, after)| Decor {
            entry,
            exit,
            on,
            always,
            after,
        })
        .boxed()
}

fn history() -> impl Strategy<Value = HistorySpec> {
    (any::<bool>(), option::weighted(0.5, any::<Index>()))
        .prop_map(|(deep, target)| HistorySpec { deep, target })
}

fn node(mode: Mode) -> BoxedStrategy<Node> {
    let leaf = prop_oneof![
        4 => decor(mode, false).prop_map(|decor| Node { shape: Shape::Atomic, decor }),
        1 => (0u8..4, any::<bool>(), decor(mode, true)).prop_map(|(exit_code, output, decor)| {
            Node { shape: Shape::Final { exit_code, output }, decor }
        }),
    ];
    leaf.prop_recursive(3, 8, 3, move |inner| {
        prop_oneof![
            3 => (
                vec(inner.clone(), 1..4),
                option::weighted(0.3, any::<Index>()),
                option::weighted(0.5, history()),
                decor(mode, false),
            )
                .prop_map(|(children, initial, history, decor)| Node {
                    shape: Shape::Compound { children, initial, history },
                    decor,
                }),
            2 => (vec(inner, 2..4), option::weighted(0.4, history()), decor(mode, false))
                .prop_map(|(children, history, decor)| Node {
                    shape: Shape::Parallel { children, history },
                    decor,
                }),
        ]
    })
    .boxed()
}

/// One to three top-level states, usually followed by a top-level final state, so that some
/// runs finish.
fn chart(mode: Mode) -> impl Strategy<Value = String> {
    let last =
        (0u8..4, any::<bool>(), decor(mode, true)).prop_map(|(exit_code, output, decor)| Node {
            shape: Shape::Final { exit_code, output },
            decor,
        });
    (vec(node(mode), 1..3), option::weighted(0.8, last)).prop_map(move |(mut states, last)| {
        states.extend(last);
        render(&states, mode)
    })
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        2 => Just(Payload::None),
        3 => (0i64..4).prop_map(Payload::N),
        1 => (0i64..4).prop_map(Payload::M),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        4 => (0..INPUT_EVENTS.len(), payload()).prop_map(|(event, payload)| Input::Event(event, payload)),
        2 => any::<Index>().prop_map(Input::Tick),
        3 => (
            any::<Index>(),
            prop_oneof![3 => Just(Ending::Done), 2 => Just(Ending::Failed), 1 => Just(Ending::TimedOut)],
        )
            .prop_map(|(index, ending)| Input::Outcome(index, ending)),
    ]
}

/// A random chart and inputs. One case in five keeps the default `errors: strict`, where an
/// unhandled error ends the run; the rest say `errors: scxml`, so most runs go on past the errors
/// the random data raises and reach the features `non_vacuous` counts.
fn event_case() -> impl Strategy<Value = Case> {
    (
        chart(Mode::Events),
        vec(input(), 0..=MAX_INPUTS),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(yaml, inputs, strict)| Case {
            yaml: if strict {
                yaml
            } else {
                yaml.replacen("id: random\n", "id: random\nerrors: scxml\n", 1)
            },
            inputs,
        })
}

// ---------------------------------------------------------------------------------------------
// Rendering: the tree laid out in document order (ids `s0`, `s1`, … in pre-order, a history
// state last among its siblings), then written as YAML.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlatKind {
    Atomic,
    Final,
    Compound,
    Parallel,
    History,
}

#[derive(Default)]
struct Layout {
    parent: Vec<Option<usize>>,
    kind: Vec<FlatKind>,
    /// One past the last descendant.
    end: Vec<usize>,
}

impl Layout {
    fn push(&mut self, parent: Option<usize>, kind: FlatKind) -> usize {
        self.parent.push(parent);
        self.kind.push(kind);
        self.end.push(self.parent.len());
        self.parent.len() - 1
    }

    fn add(&mut self, node: &Node, parent: Option<usize>) {
        let kind = match node.shape {
            Shape::Atomic => FlatKind::Atomic,
            Shape::Final { .. } => FlatKind::Final,
            Shape::Compound { .. } => FlatKind::Compound,
            Shape::Parallel { .. } => FlatKind::Parallel,
        };
        let index = self.push(parent, kind);
        if let Shape::Compound {
            children, history, ..
        }
        | Shape::Parallel { children, history } = &node.shape
        {
            for child in children {
                self.add(child, Some(index));
            }
            if history.is_some() {
                self.push(Some(index), FlatKind::History);
            }
        }
        self.end[index] = self.parent.len();
    }

    fn len(&self) -> usize {
        self.parent.len()
    }

    fn chain(&self, state: usize) -> Vec<usize> {
        std::iter::successors(Some(state), |s| self.parent[*s]).collect()
    }

    /// What the compiler accepts as several targets: neither contains the other and their
    /// nearest common ancestor is a parallel state, a history state standing for its parent
    /// (restoring it re-enters all of the parent's regions). A target set the compiler refuses
    /// would make the generated protocol fail to compile, so this rule mirrors it; the refusal
    /// of a history state together with a state inside its parallel parent is checked by
    /// `a_history_state_and_a_state_inside_its_parallel_parent_are_refused_as_targets`.
    fn orthogonal(&self, left: usize, right: usize) -> bool {
        let stand_in = |state: usize| match self.kind[state] {
            FlatKind::History => self.parent[state].expect("a history state has a parent"),
            _ => state,
        };
        let (left, right) = (stand_in(left), stand_in(right));
        let right_chain = self.chain(right);
        let Some(common) = self
            .chain(left)
            .into_iter()
            .find(|state| right_chain.contains(state))
        else {
            return false;
        };
        common != left && common != right && self.kind[common] == FlatKind::Parallel
    }

    fn non_history_descendants(&self, state: usize) -> Vec<usize> {
        (state + 1..self.end[state])
            .filter(|s| self.kind[*s] != FlatKind::History)
            .collect()
    }
}

/// `target: [h, b]`, `h` the history of the parallel `p` and `b` inside one of `p`'s regions:
/// `h` and `b` have `p` as their nearest common ancestor, but restoring `h` enters `b`'s region
/// too, which would leave that region with two active children (the engine once accepted this
/// and did so). The generator's `Layout::orthogonal` relies on the refusal.
#[test]
fn a_history_state_and_a_state_inside_its_parallel_parent_are_refused_as_targets() {
    let text = crate::support::errors(
        "id: repro\nstates:\n  p:\n    type: parallel\n    states:\n      r1: {}\n      r2:\n        states:\n          a: {}\n          b: {}\n      h: { type: history }\n    on:\n      go: { target: [h, b] }\n",
    );
    assert!(
        text.starts_with("error: these targets cannot be active together\n  --> test.yaml:13:21\n"),
        "{text}"
    );
}

fn id(state: usize) -> String {
    format!("s{state}")
}

fn pick(list: &[usize], index: &Index) -> Option<usize> {
    (!list.is_empty()).then(|| list[index.index(list.len())])
}

/// Where a transition is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    On,
    Always,
    /// Under `after`, with its delay in milliseconds.
    After(u64),
}

struct Renderer {
    layout: Layout,
    mode: Mode,
    non_history: Vec<usize>,
    containers: Vec<usize>,
    next: usize,
    /// Maps rendered so far: each gets an id of its own.
    maps: std::cell::Cell<usize>,
}

fn render(states: &[Node], mode: Mode) -> String {
    let mut layout = Layout::default();
    for state in states {
        layout.add(state, None);
    }
    let non_history = (0..layout.len())
        .filter(|s| layout.kind[*s] != FlatKind::History)
        .collect();
    let containers = (0..layout.len())
        .filter(|s| matches!(layout.kind[*s], FlatKind::Compound | FlatKind::Parallel))
        .collect();
    let mut renderer = Renderer {
        layout,
        mode,
        non_history,
        containers,
        next: 0,
        maps: std::cell::Cell::new(0),
    };
    let mut rendered = Map::new();
    for state in states {
        let (name, value) = renderer.state(state);
        rendered.insert(name, value);
    }
    let context = match mode {
        Mode::Events => json!({"x": 0, "t": 0, "item": 0, "position": 0}),
        Mode::Timers => json!({"x": 0, "n": 0, "item": 0, "position": 0}),
    };
    let document = json!({"id": "random", "context": context, "states": rendered});
    let mut text = String::new();
    write_block(&document, 0, Block::State, &mut text);
    text
}

impl Renderer {
    fn state(&mut self, node: &Node) -> (String, Json) {
        let index = self.next;
        self.next += 1;
        let mut state = Map::new();
        match &node.shape {
            Shape::Atomic => {}
            Shape::Final { exit_code, output } => {
                state.insert("type".into(), json!("final"));
                state.insert("exit_code".into(), json!(exit_code));
                if *output {
                    state.insert("output".into(), json!({"x": "${x}"}));
                }
            }
            Shape::Compound { initial, .. } => {
                if let Some(initial) = initial {
                    let inside = self.layout.non_history_descendants(index);
                    if let Some(target) = pick(&inside, initial) {
                        state.insert("initial".into(), json!(id(target)));
                    }
                }
            }
            Shape::Parallel { .. } => {
                state.insert("type".into(), json!("parallel"));
            }
        }
        self.decor(&node.decor, &mut state);
        if let Shape::Compound {
            children, history, ..
        }
        | Shape::Parallel { children, history } = &node.shape
        {
            let mut rendered = Map::new();
            for child in children {
                let (name, value) = self.state(child);
                rendered.insert(name, value);
            }
            if let Some(history) = history {
                let history_index = self.next;
                self.next += 1;
                let mut spec = Map::new();
                spec.insert("type".into(), json!("history"));
                let depth = if history.deep { "deep" } else { "shallow" };
                spec.insert("history".into(), json!(depth));
                if let Some(target) = &history.target {
                    let inside = self.layout.non_history_descendants(index);
                    if let Some(target) = pick(&inside, target) {
                        spec.insert("target".into(), json!(id(target)));
                    }
                }
                rendered.insert(id(history_index), Json::Object(spec));
            }
            state.insert("states".into(), Json::Object(rendered));
        }
        (id(index), Json::Object(state))
    }

    fn decor(&self, decor: &Decor, state: &mut Map<String, Json>) {
        if !decor.entry.is_empty() {
            let entry = decor
                .entry
                .iter()
                .map(|action| self.action(action))
                .collect();
            state.insert("entry".into(), Json::Array(entry));
        }
        if !decor.exit.is_empty() {
            let exit = decor
                .exit
                .iter()
                .map(|action| self.action(action))
                .collect();
            state.insert("exit".into(), Json::Array(exit));
        }
        let mut on: Map<String, Json> = Map::new();
        for transition in &decor.on {
            let key = self.descriptor(&transition.descriptor);
            let value = self.transition(transition, Place::On);
            match on.get_mut(&key) {
                Some(Json::Array(list)) => list.push(value),
                _ => {
                    on.insert(key, Json::Array(vec![value]));
                }
            }
        }
        if !on.is_empty() {
            state.insert("on".into(), Json::Object(on));
        }
        if !decor.always.is_empty() {
            let always = decor
                .always
                .iter()
                .map(|transition| self.transition(transition, Place::Always))
                .collect();
            state.insert("always".into(), Json::Array(always));
        }
        if !decor.after.is_empty() {
            let after = decor
                .after
                .iter()
                .map(|timed| self.transition(&timed.transition, Place::After(timed.delay_ms)))
                .collect();
            state.insert("after".into(), Json::Array(after));
        }
    }

    fn descriptor(&self, descriptor: &Descriptor) -> String {
        match descriptor {
            Descriptor::One(event) => EVENTS[*event].to_string(),
            Descriptor::Two(first, second) if first == second => EVENTS[*first].to_string(),
            Descriptor::Two(first, second) => format!("{} {}", EVENTS[*first], EVENTS[*second]),
            Descriptor::Any => "*".to_string(),
            Descriptor::Error => "error".to_string(),
            Descriptor::Outcome(0, id) => format!("done.exec.{}", effect_id(*id)),
            Descriptor::Outcome(1, id) => format!("error.exec.{}", effect_id(*id)),
            Descriptor::Outcome(2, id) => format!("error.exec.timeout.{}", effect_id(*id)),
            Descriptor::Outcome(..) => "error.exec".to_string(),
            Descriptor::Done(index) => match pick(&self.containers, index) {
                Some(state) => format!("done.state.{}", id(state)),
                None => EVENTS[0].to_string(),
            },
        }
    }

    fn guard(&self, guard: &Guard) -> String {
        match guard {
            Guard::Below(k) => format!("x < {k}"),
            Guard::AtLeast(k) => format!("x >= {k}"),
            Guard::Even => "x % 2 == 0".to_string(),
            Guard::DataBelow(k) => format!("has(event.data.n) && event.data.n < {k}"),
            Guard::DataAtLeast(k) => format!("event.data.n >= {k}"),
            Guard::In(index) => format!(
                "In('{}')",
                id(self.non_history[index.index(self.non_history.len())])
            ),
            Guard::NotIn(index) => format!(
                "!In('{}')",
                id(self.non_history[index.index(self.non_history.len())])
            ),
        }
    }

    /// A transition under `on` (no delay, not eventless), `always` or `after` (a delay). The
    /// budgets that make runs settle are added here (see `MACROSTEP_BUDGET` and
    /// `TIMER_BUDGET`).
    fn transition(&self, transition: &Trans, place: Place) -> Json {
        let mut spec = Map::new();
        if let Place::After(delay) = place {
            spec.insert("delay".into(), json!(format!("{delay}ms")));
        }
        let mut targets: Vec<usize> = Vec::new();
        let all: Vec<usize> = (0..self.layout.len()).collect();
        for index in &transition.targets {
            let target = all[index.index(all.len())];
            if targets
                .iter()
                .all(|chosen| self.layout.orthogonal(*chosen, target))
            {
                targets.push(target);
            }
        }
        match targets.as_slice() {
            [] => {}
            [one] => {
                spec.insert("target".into(), json!(id(*one)));
            }
            many => {
                let ids: Vec<String> = many.iter().map(|state| id(*state)).collect();
                spec.insert("target".into(), json!(ids));
            }
        }
        let budget = match (self.mode, place) {
            (Mode::Events, Place::Always) if transition.unbounded => None,
            (Mode::Events, Place::Always) => Some(("t", MACROSTEP_BUDGET)),
            (Mode::Events, Place::On) if !external_only(&transition.descriptor) => {
                Some(("t", MACROSTEP_BUDGET))
            }
            (Mode::Events, _) => None,
            (Mode::Timers, _) => Some(("n", TIMER_BUDGET)),
        };
        // Only a transition triggered by an external event (the first microstep of a
        // macrostep) may renew the budget.
        let renew = self.mode == Mode::Events && budget.is_none() && transition.renew;
        let guard = transition.guard.as_ref().map(|guard| self.guard(guard));
        let guard = match (budget, guard) {
            (Some((name, limit)), Some(guard)) => Some(format!("{name} < {limit} && ({guard})")),
            (Some((name, limit)), None) => Some(format!("{name} < {limit}")),
            (None, guard) => guard,
        };
        if let Some(guard) = guard {
            spec.insert("guard".into(), json!(guard));
        }
        let mut actions: Vec<Json> = Vec::new();
        if let Some((name, _)) = budget {
            actions.push(json!({"assign": {name: format!("{name} + 1")}}));
        }
        if renew {
            actions.push(json!({"assign": {"t": 0}}));
        }
        actions.extend(transition.actions.iter().map(|action| self.action(action)));
        if !actions.is_empty() {
            spec.insert("actions".into(), Json::Array(actions));
        }
        if transition.internal {
            spec.insert("type".into(), json!("internal"));
        }
        Json::Object(spec)
    }
}

/// Whether only external events (inputs, `send`, timers) match the descriptor.
fn external_only(descriptor: &Descriptor) -> bool {
    match descriptor {
        Descriptor::One(event) => *event < EXTERNAL,
        Descriptor::Two(first, second) => *first < EXTERNAL && *second < EXTERNAL,
        // Outcomes come from outside, as the host reports them.
        Descriptor::Outcome(..) => true,
        Descriptor::Any | Descriptor::Error | Descriptor::Done(_) => false,
    }
}

/// A loop's list as written: a literal list, one built from the context, or an int.
fn loop_array_text(array: &LoopArray) -> String {
    match array {
        LoopArray::Literal(count) => {
            let items: Vec<String> = (0..*count).map(|item| item.to_string()).collect();
            format!("[{}]", items.join(", "))
        }
        LoopArray::Context => "[x, x + 1]".to_string(),
        LoopArray::NotAList => "x".to_string(),
    }
}

fn effect_id(id: usize) -> String {
    format!("e{id}")
}

fn send_id(id: usize) -> String {
    format!("later{id}")
}

impl Renderer {
    /// An action's JSON. Each branch of an `if` begins with a `log` naming it (`then`, `elif`,
    /// `else`), which the statistics count.
    fn action(&self, action: &Act) -> Json {
        match action {
            Act::Increment => json!({"assign": {"x": "x + 1"}}),
            Act::Decrement => json!({"assign": {"x": "x - 1"}}),
            Act::Set(value) => json!({"assign": {"x": value}}),
            Act::Divide => json!({"assign": {"x": "12 / x"}}),
            Act::FromData { strict: true } => json!({"assign": {"x": "event.data.n"}}),
            Act::FromData { strict: false } => {
                json!({"assign": {"x": "has(event.data.n) ? event.data.n : x"}})
            }
            Act::Raise(event, false) => json!({"raise": EVENTS[*event]}),
            Act::Raise(event, true) => json!({"raise": EVENTS[*event], "data": {"n": "${x}"}}),
            Act::Send(event, false) => json!({"send": EVENTS[*event]}),
            Act::Send(event, true) => json!({"send": EVENTS[*event], "data": {"n": "${x}"}}),
            Act::SendLater {
                event,
                delay_ms,
                id,
            } => {
                json!({"send": EVENTS[*event], "delay": format!("{delay_ms}ms"), "id": send_id(*id)})
            }
            Act::Cancel(id) => json!({"cancel": send_id(*id)}),
            Act::Log => json!({"log": "x=${x}"}),
            Act::Effect { id, run_scoped } => {
                let mut spec = json!({"exec": ["true"], "id": effect_id(*id)});
                if *run_scoped {
                    spec["scope"] = json!("run");
                }
                spec
            }
            Act::If {
                branches,
                otherwise,
            } => {
                let block = |actions: &[Act], branch: &str| -> Json {
                    let marker = json!({ "log": branch });
                    let actions = actions.iter().map(|action| self.action(action));
                    Json::Array(std::iter::once(marker).chain(actions).collect())
                };
                let (first, others) = branches.split_first().expect("an `if` has a condition");
                let mut spec = Map::new();
                spec.insert("if".into(), json!(self.guard(&first.0)));
                spec.insert("then".into(), block(&first.1, "then"));
                if !others.is_empty() {
                    let elif = others
                    .iter()
                    .map(|(guard, actions)| {
                        json!({"if": self.guard(guard), "then": block(actions, "elif")})
                    })
                    .collect();
                    spec.insert("elif".into(), Json::Array(elif));
                }
                if let Some(otherwise) = otherwise {
                    spec.insert("else".into(), block(otherwise, "else"));
                }
                Json::Object(spec)
            }
            // The body begins with a `loop` log, which the statistics count.
            Act::Map {
                array,
                index,
                run_scoped,
            } => {
                let number = self.maps.get();
                self.maps.set(number + 1);
                let mut spec = json!({
                    "map": loop_array_text(array),
                    "id": format!("m{number}"),
                    "item": "item",
                    "exec": ["true", "${item}"],
                });
                if *index {
                    spec["index"] = json!("position");
                    spec["exec"] = json!(["true", "${item}", "${position}"]);
                }
                if *run_scoped {
                    spec["scope"] = json!("run");
                }
                spec
            }
            Act::Foreach { array, index, body } => {
                let array = loop_array_text(array);
                let marker = json!({ "log": "loop" });
                let actions = body.iter().map(|action| self.action(action));
                let mut spec = json!({
                    "foreach": array,
                    "item": "item",
                    "do": Json::Array(std::iter::once(marker).chain(actions).collect()),
                });
                if *index {
                    spec["index"] = json!("position");
                }
                spec
            }
        }
    }
}

// YAML output: mappings of states in block style, everything else in flow style.

fn plain(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "null"
        )
}

fn scalar(text: &str) -> String {
    if plain(text) {
        text.to_string()
    } else {
        Json::String(text.to_string()).to_string()
    }
}

fn flow(value: &Json) -> String {
    match value {
        Json::String(text) => scalar(text),
        Json::Array(items) => {
            let items: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", items.join(", "))
        }
        Json::Object(entries) if entries.is_empty() => "{}".to_string(),
        Json::Object(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|(key, value)| format!("{}: {}", scalar(key), flow(value)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
        other => other.to_string(),
    }
}

/// What a block mapping holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// The document or one state: `states` and `on` are blocks, the rest flow.
    State,
    /// State ids to states.
    States,
    /// Event descriptors to transitions (in flow style).
    On,
}

fn write_block(value: &Json, indent: usize, block: Block, out: &mut String) {
    let Json::Object(entries) = value else {
        unreachable!("only mappings are written in block style")
    };
    let pad = " ".repeat(indent);
    for (key, value) in entries {
        let inner = match (block, key.as_str()) {
            (Block::State, "states") => Some(Block::States),
            (Block::State, "on") => Some(Block::On),
            (Block::States, _) => Some(Block::State),
            _ => None,
        };
        match (inner, value) {
            (Some(inner), Json::Object(entries)) if !entries.is_empty() => {
                out.push_str(&format!("{pad}{}:\n", scalar(key)));
                write_block(value, indent + 2, inner, out);
            }
            _ => out.push_str(&format!("{pad}{}: {}\n", scalar(key), flow(value))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running

fn compile(yaml: &str) -> Result<Arc<Machine>, String> {
    let render = protocol_run::base::diagnostic::render_all;
    let loaded = protocol_run::pipeline::load::load_text("random.yaml", yaml.to_string())
        .map_err(|diagnostics| render(&diagnostics))?;
    protocol_run::pipeline::compile::compile(&loaded)
        .map(Arc::new)
        .map_err(|diagnostics| render(&diagnostics))
}

fn limits() -> Limits {
    Limits {
        max_microsteps: MAX_MICROSTEPS,
        ..Limits::default()
    }
}

fn fresh(machine: &Arc<Machine>) -> Interpreter {
    let inputs = machine.bind_inputs(&[]).expect("no inputs to bind");
    Interpreter::new(machine.clone(), inputs).with_limits(limits())
}

/// The configuration rules of SCXML, and how the engine ends a run.
fn check_legal(interpreter: &Interpreter) -> Result<(), String> {
    let machine = interpreter.machine();
    let active: Vec<StateId> = interpreter.configuration().collect();
    let name = |state: StateId| machine.state(state).id.to_string();
    let names = || active.iter().map(|state| name(*state)).collect::<Vec<_>>();
    let regions = |state: StateId| {
        machine
            .state(state)
            .children
            .iter()
            .copied()
            .filter(|child| !machine.state(*child).is_history())
            .collect::<Vec<_>>()
    };
    if let Some(outcome) = interpreter.outcome() {
        // `exitInterpreter` exits every state: a finished run has none left.
        if interpreter.is_running() {
            return Err("a run with an outcome is still running".into());
        }
        if !active.is_empty() {
            return Err(format!(
                "a finished run still has active states {:?}",
                names()
            ));
        }
        // An unhandled `error.execution` ends a run with no final state, failed.
        let Some(final_state) = outcome.final_state else {
            return match &outcome.failure {
                Some(_) if outcome.exit_code == 76 => Ok(()),
                _ => Err(format!(
                    "the run ended with no final state and no failure: {outcome:?}"
                )),
            };
        };
        let final_state = machine.state(final_state);
        if final_state.kind != StateKind::Final || final_state.parent != Some(StateId::ROOT) {
            return Err(format!(
                "the run ended in `{}`, not a top-level final state",
                final_state.id
            ));
        }
        return Ok(());
    }
    // Running, or stopped by the microstep limit between two microsteps.
    let top_level = regions(StateId::ROOT)
        .into_iter()
        .filter(|state| active.contains(state))
        .count();
    if top_level != 1 {
        return Err(format!(
            "{top_level} top-level states are active in {:?}",
            names()
        ));
    }
    for &state in &active {
        let node = machine.state(state);
        match node.kind {
            StateKind::Root => return Err("the root is in the configuration".into()),
            StateKind::History { .. } => {
                return Err(format!("the history state `{}` is active", node.id));
            }
            StateKind::Final if node.parent == Some(StateId::ROOT) => {
                return Err(format!(
                    "the top-level final state `{}` is active in a running instance",
                    node.id
                ));
            }
            StateKind::Compound => {
                let children = regions(state)
                    .into_iter()
                    .filter(|child| active.contains(child))
                    .count();
                if children != 1 {
                    return Err(format!(
                        "the compound state `{}` has {children} active children in {:?}",
                        node.id,
                        names()
                    ));
                }
            }
            StateKind::Parallel => {
                if let Some(region) = regions(state)
                    .into_iter()
                    .find(|region| !active.contains(region))
                {
                    return Err(format!(
                        "the region `{}` of the active parallel state `{}` is not active in {:?}",
                        name(region),
                        node.id,
                        names()
                    ));
                }
            }
            _ => {}
        }
        if let Some(parent) = node.parent
            && parent != StateId::ROOT
            && !active.contains(&parent)
        {
            return Err(format!(
                "`{}` is active but its parent `{}` is not, in {:?}",
                node.id,
                name(parent),
                names()
            ));
        }
    }
    Ok(())
}

/// One run of a machine on its inputs: the journal of external events delivered, and after
/// `start` (index 0) and after each event (index i + 1) the result, the snapshot and how many
/// host records there were.
struct Trace {
    journal: Vec<Event>,
    results: Vec<Result<(), RunError>>,
    snapshots: Vec<Snapshot>,
    marks: Vec<usize>,
    records: Vec<Record>,
    /// The effects started, in order, and after each step how many there were.
    effects: Vec<EffectRequest>,
    effect_marks: Vec<usize>,
}

struct Runner {
    interpreter: Interpreter,
    host: RecordingHost,
    trace: Trace,
    /// Effects whose outcome may be reported: indices into `host.effects`.
    pending: Vec<usize>,
    /// Records and effects already looked at by `follow_effects`.
    seen_records: usize,
    seen_effects: usize,
}

impl Runner {
    /// Whether no more events are delivered: the run finished, or the journal is full.
    fn done(&self) -> bool {
        !self.interpreter.is_running() || self.trace.journal.len() >= MAX_JOURNAL
    }

    /// Records the step just taken and checks the configuration.
    fn after_step(&mut self, result: Result<(), RunError>) -> Result<(), String> {
        let legal = check_legal(&self.interpreter);
        self.trace.snapshots.push(self.interpreter.snapshot());
        self.trace.marks.push(self.host.records.len());
        self.trace.effect_marks.push(self.host.effects.len());
        self.follow_effects();
        let step = self.trace.results.len();
        // The events delivered so far (step 0 is `start`), to reproduce a failure by hand.
        let delivered = || {
            let names: Vec<&str> = self.trace.journal.iter().map(|e| &*e.name).collect();
            format!("events delivered after start: {names:?}")
        };
        if let Err(error) = &result
            && !matches!(error, RunError::MicrostepLimit { .. })
        {
            return Err(format!("step {step}: {error}\n{}", delivered()));
        }
        self.trace.results.push(result);
        legal.map_err(|problem| format!("after step {step}: {problem}\n{}", delivered()))
    }

    /// Keeps `pending` as a runtime would: an effect started is pending until its outcome is
    /// reported, or its owner state exits (a runtime cancels it then, its outcome never
    /// delivered; effects scoped to the run stay).
    fn follow_effects(&mut self) {
        let machine = self.interpreter.machine().clone();
        for record in &self.host.records[self.seen_records..] {
            match record {
                Record::Effect { .. } => {
                    self.pending.push(self.seen_effects);
                    self.seen_effects += 1;
                }
                Record::Exited(name) => {
                    let effects = &self.host.effects;
                    self.pending.retain(|index| {
                        let request = &effects[*index];
                        request.owner == StateId::ROOT || *machine.state(request.owner).id != **name
                    });
                }
                _ => {}
            }
        }
        self.seen_records = self.host.records.len();
    }

    /// The event that reports how a pending effect ended, which is no longer pending.
    fn report(&mut self, index: &Index, ending: Ending) -> Option<Event> {
        if self.pending.is_empty() {
            return None;
        }
        let invocation = self.pending.remove(index.index(self.pending.len()));
        let request = &self.host.effects[invocation];
        let (event_type, data) = match ending {
            Ending::Done => (request.events.done, json!({})),
            Ending::Failed => (request.events.failed, json!({"message": "failed"})),
            Ending::TimedOut => (request.events.timed_out, json!({"message": "timed out"})),
        };
        let mut data = data;
        data["id"] = json!(*request.id);
        data["invocation"] = json!(invocation + 1);
        let machine = self.interpreter.machine();
        Some(
            Event::of_type(machine, event_type, Origin::Outcome).with_data(Value::from_json(&data)),
        )
    }

    fn handle(&mut self, event: Event) -> Result<(), String> {
        let result = self.interpreter.handle(&event, &mut self.host);
        self.trace.journal.push(event);
        self.after_step(result)
    }

    /// Delivers what `send` queued, a bounded number of events.
    fn deliver_sends(&mut self) -> Result<(), String> {
        let mut delivered = 0;
        while let Some(event) = self.host.external_queue.pop_front() {
            if self.done() || delivered == MAX_SENDS_PER_INPUT {
                self.host.external_queue.clear();
                break;
            }
            self.handle(event)?;
            delivered += 1;
        }
        Ok(())
    }
}

/// Runs `inputs` through a fresh instance, checking the configuration after every macrostep.
fn run_checked(machine: &Arc<Machine>, inputs: &[Input]) -> Result<Trace, String> {
    let mut runner = Runner {
        interpreter: fresh(machine),
        host: RecordingHost::for_machine(machine.clone()),
        trace: Trace {
            journal: Vec::new(),
            results: Vec::new(),
            snapshots: Vec::new(),
            marks: Vec::new(),
            records: Vec::new(),
            effects: Vec::new(),
            effect_marks: Vec::new(),
        },
        pending: Vec::new(),
        seen_records: 0,
        seen_effects: 0,
    };
    let result = runner.interpreter.start(&mut runner.host);
    runner.after_step(result)?;
    runner.deliver_sends()?;
    for input in inputs {
        if runner.done() {
            break;
        }
        let event = match input {
            Input::Event(event, payload) => Event::named(
                machine,
                INPUT_EVENTS[*event],
                Value::from_json(&payload.json()),
                Origin::External,
            ),
            Input::Tick(index) => {
                if runner.host.delayed.is_empty() {
                    continue;
                }
                let position = index.index(runner.host.delayed.len());
                runner.host.delayed.remove(position).2
            }
            Input::Outcome(index, ending) => match runner.report(index, *ending) {
                Some(event) => event,
                None => continue,
            },
        };
        runner.handle(event)?;
        runner.deliver_sends()?;
    }
    runner.trace.records = std::mem::take(&mut runner.host.records);
    runner.trace.effects = std::mem::take(&mut runner.host.effects);
    Ok(runner.trace)
}

/// Property 2: the journal replayed into a fresh instance, and from every snapshot restored.
fn check_replay(machine: &Arc<Machine>, trace: &Trace) -> Result<(), String> {
    let mut replayed = fresh(machine);
    let mut host = RecordingHost::for_machine(machine.clone());
    let result = replayed.start(&mut host);
    let mut steps = vec![(result, replayed.snapshot())];
    for event in &trace.journal {
        let result = replayed.handle(event, &mut host);
        steps.push((result, replayed.snapshot()));
    }
    for (step, (result, snapshot)) in steps.iter().enumerate() {
        if *result != trace.results[step] {
            return Err(format!(
                "replay step {step}: {result:?}, the run had {:?}",
                trace.results[step]
            ));
        }
        if *snapshot != trace.snapshots[step] {
            return Err(format!(
                "replay step {step}: snapshot\n{}\nthe run had\n{}",
                snapshot.to_json(),
                trace.snapshots[step].to_json()
            ));
        }
    }
    if host.records != trace.records {
        return Err(format!(
            "the replay did other things:\n{:?}\nthe run did\n{:?}",
            host.records, trace.records
        ));
    }
    if host.effects != trace.effects {
        return Err(format!(
            "the replay started other effects:\n{:#?}\nthe run started\n{:#?}",
            host.effects, trace.effects
        ));
    }
    let inputs = machine.bind_inputs(&[]).expect("no inputs to bind");
    let last = trace.snapshots.last().expect("a snapshot after start");
    for (step, snapshot) in trace.snapshots.iter().enumerate() {
        let mut restored = Interpreter::restore(machine.clone(), inputs.clone(), snapshot)
            .map_err(|error| format!("restoring the snapshot of step {step}: {error}"))?
            .with_limits(limits());
        let mut host = RecordingHost::for_machine(machine.clone());
        for (offset, event) in trace.journal[step..].iter().enumerate() {
            let result = restored.handle(event, &mut host);
            let original = &trace.results[step + offset + 1];
            if result != *original {
                return Err(format!(
                    "restored at step {step}, step {}: {result:?}, the run had {original:?}",
                    step + offset + 1
                ));
            }
        }
        let end = restored.snapshot();
        if end != *last {
            return Err(format!(
                "restored at step {step}, the run ends in\n{}\ninstead of\n{}",
                end.to_json(),
                last.to_json()
            ));
        }
        if host.effects[..] != trace.effects[trace.effect_marks[step]..] {
            return Err(format!(
                "restored at step {step}, the run started other effects:\n{:#?}\ninstead of\n{:#?}",
                host.effects,
                &trace.effects[trace.effect_marks[step]..]
            ));
        }
        if host.records[..] != trace.records[trace.marks[step]..] {
            return Err(format!(
                "restored at step {step}, the run went on differently:\n{:?}\ninstead of\n{:?}",
                host.records,
                &trace.records[trace.marks[step]..]
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Default)]
struct EventStatistics {
    cases: u32,
    macrosteps: usize,
    finished: u32,
    livelocked: u32,
    with_parallel: u32,
    with_history: u32,
    /// Runs that took a transition to a history state.
    into_history: u32,
    largest_configuration: usize,
    largest_machine: usize,
    /// Transitions taken whose guard read the event's data.
    data_guards_passed: usize,
    /// Errors from reading `event.data.n` that is not there (left unhandled, so logged).
    data_errors: usize,
    /// Delayed `send`s with an id, delivered, and withdrawn by `cancel` while pending.
    delayed_sends: usize,
    delayed_delivered: usize,
    delayed_cancelled: usize,
    /// Effects started, outcomes reported, those that took a transition (on any descriptor,
    /// eventless ones after it included), and transitions taken on an outcome's own descriptor
    /// (`done.exec.…`, `error.exec…`).
    effects_started: usize,
    outcomes_reported: usize,
    outcomes_handled: usize,
    outcome_transitions: usize,
    /// Branches of `if` actions run: `then`, an `elif`, `else`.
    then_runs: usize,
    elif_runs: usize,
    else_runs: usize,
    /// Bodies of `foreach` run, and loops refused for walking what is not a list.
    loop_runs: usize,
    loops_refused: usize,
    /// Items of maps started, and maps refused for walking what is not a list.
    map_items: usize,
    maps_refused: usize,
}

impl EventStatistics {
    /// The features `non_vacuous` needs in at least one case, each with the message it fails
    /// with: those a round of random cases can miss by chance.
    fn rare_features(&self) -> [(bool, &'static str); 9] {
        [
            (self.finished > 0, "no run finishes"),
            (
                self.into_history > 0,
                "no run takes a transition to a history state",
            ),
            (
                self.data_guards_passed > 0,
                "no transition whose guard reads the event's data is taken",
            ),
            (self.data_errors > 0, "no run reads data that is not there"),
            (
                self.delayed_delivered > 0 && self.delayed_cancelled > 0,
                "delayed sends with an id are never delivered or never cancelled",
            ),
            (
                self.then_runs > 0 && self.elif_runs > 0 && self.else_runs > 0,
                "some branch of `if` never runs",
            ),
            (self.loop_runs > 0, "no `foreach` body runs"),
            (self.map_items > 0, "no `map` item starts"),
            (
                self.effects_started > 0 && self.outcomes_reported > 0,
                "effects never start, or no outcome is reported",
            ),
        ]
    }

    fn rare_features_reached(&self) -> bool {
        self.rare_features().iter().all(|(reached, _)| *reached)
    }

    fn add(&mut self, machine: &Machine, trace: &Trace) {
        self.cases += 1;
        self.macrosteps += trace.snapshots.len();
        self.largest_machine = self.largest_machine.max(machine.states.len() - 1);
        let last = trace.snapshots.last().expect("a snapshot after start");
        if last.outcome.is_some() {
            self.finished += 1;
        }
        if trace.results.iter().any(Result::is_err) {
            self.livelocked += 1;
        }
        let parallel = trace.snapshots.iter().any(|snapshot| {
            snapshot.configuration.iter().any(|state| {
                machine
                    .state_id(state)
                    .is_some_and(|state| machine.state(state).kind == StateKind::Parallel)
            })
        });
        self.with_parallel += u32::from(parallel);
        let history = trace
            .snapshots
            .iter()
            .any(|snapshot| !snapshot.history.is_empty());
        self.with_history += u32::from(history);
        let into_history = trace.records.iter().any(|record| {
            let Record::Transition(pointer) = record else {
                return false;
            };
            machine.transitions.iter().any(|transition| {
                transition.pointer == *pointer
                    && transition
                        .targets
                        .iter()
                        .any(|target| machine.state(*target).is_history())
            })
        });
        self.into_history += u32::from(into_history);
        let largest = trace
            .snapshots
            .iter()
            .map(|snapshot| snapshot.configuration.len())
            .max()
            .unwrap_or(0);
        self.largest_configuration = self.largest_configuration.max(largest);
        for record in &trace.records {
            match record {
                Record::Transition(pointer) => {
                    let on_outcome =
                        pointer.contains("/on/done.exec") || pointer.contains("/on/error.exec");
                    self.outcome_transitions += usize::from(on_outcome);
                    let reads_data = machine.transitions.iter().any(|transition| {
                        transition.pointer == *pointer
                            && transition
                                .guard
                                .as_ref()
                                .is_some_and(|guard| guard.text.contains("event.data"))
                    });
                    self.data_guards_passed += usize::from(reads_data);
                }
                // `no key` for data without `n`, no overload of `.` for no data or no event.
                Record::Log(message)
                    if message.contains("no key `n`") || message.contains("'_._'") =>
                {
                    self.data_errors += 1;
                }
                Record::Log(message) if message == "then" => self.then_runs += 1,
                Record::Log(message) if message == "elif" => self.elif_runs += 1,
                Record::Log(message) if message == "else" => self.else_runs += 1,
                Record::Log(message) if message == "loop" => self.loop_runs += 1,
                Record::Log(message) if message.contains("foreach needs a list") => {
                    self.loops_refused += 1;
                }
                Record::Log(message) if message.contains("map needs a list") => {
                    self.maps_refused += 1;
                }
                _ => {}
            }
        }
        self.add_delayed(trace);
        self.effects_started += trace.effects.len();
        self.map_items += trace
            .effects
            .iter()
            .filter(|effect| effect.id.contains('['))
            .count();
        for (index, event) in trace.journal.iter().enumerate() {
            if event.origin != Origin::Outcome {
                continue;
            }
            self.outcomes_reported += 1;
            // The event is handled by step `index + 1`.
            let records = &trace.records[trace.marks[index]..trace.marks[index + 1]];
            let handled = records
                .iter()
                .any(|record| matches!(record, Record::Transition(_)));
            self.outcomes_handled += usize::from(handled);
        }
    }

    /// Follows the delayed sends with an id through the run: each step first delivers its
    /// event (one of them, or not), then does what its records say.
    fn add_delayed(&mut self, trace: &Trace) {
        let ours = |id: &str| id.starts_with("later");
        // Per id, how many are pending.
        let mut pending: Vec<(String, usize)> = Vec::new();
        let count = |pending: &mut Vec<(String, usize)>, id: &str| -> usize {
            match pending.iter().position(|(known, _)| known == id) {
                Some(index) => index,
                None => {
                    pending.push((id.to_string(), 0));
                    pending.len() - 1
                }
            }
        };
        for step in 0..trace.marks.len() {
            if let Some(id) = step
                .checked_sub(1)
                .and_then(|index| trace.journal[index].send_id.as_deref())
                .filter(|id| ours(id))
            {
                let index = count(&mut pending, id);
                pending[index].1 = pending[index].1.saturating_sub(1);
                self.delayed_delivered += 1;
            }
            let first = step
                .checked_sub(1)
                .map_or(0, |previous| trace.marks[previous]);
            for record in &trace.records[first..trace.marks[step]] {
                match record {
                    Record::Send {
                        id: Some(id),
                        delay_milliseconds,
                        ..
                    } if ours(id) && *delay_milliseconds > 0 => {
                        let index = count(&mut pending, id);
                        pending[index].1 += 1;
                        self.delayed_sends += 1;
                    }
                    Record::Cancel(id) if ours(id) => {
                        let index = count(&mut pending, id);
                        if pending[index].1 > 0 {
                            self.delayed_cancelled += 1;
                            pending[index].1 = 0;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn event_runner() -> TestRunner {
    TestRunner::new(Config {
        cases: EVENT_CASES,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(EVENT_REGRESSIONS))),
        ..Config::default()
    })
}

fn checked(case: &Case) -> Result<(Arc<Machine>, Trace), TestCaseError> {
    let machine = compile(&case.yaml).map_err(|diagnostics| {
        TestCaseError::fail(format!(
            "the generated protocol does not compile:\n{diagnostics}"
        ))
    })?;
    let trace = run_checked(&machine, &case.inputs).map_err(TestCaseError::fail)?;
    Ok((machine, trace))
}

fn non_vacuous(statistics: &EventStatistics) {
    eprintln!("{statistics:#?}");
    let cases = statistics.cases;
    // Loose bounds (the expected shares are about 15%, 45%, 40% and 20%): the random cases
    // must reach these features without the test failing by chance.
    assert!(
        statistics.with_parallel * 10 >= cases,
        "few runs enter a parallel state"
    );
    assert!(
        statistics.with_history * 10 >= cases,
        "few runs record history"
    );
    // Loops refused and outcomes that take a transition are fewer (a few in 64 cases, rarely
    // none), so they are printed, not asserted.
    for (reached, message) in statistics.rare_features() {
        assert!(reached, "{message}");
    }
    assert!(
        statistics.livelocked * 4 <= cases,
        "too many runs loop: {} of {cases}",
        statistics.livelocked
    );
}

#[test]
fn the_configuration_is_legal_after_every_macrostep() {
    run_event_cases(|_, _| Ok(()));
}

#[test]
fn the_journal_replayed_or_resumed_from_any_snapshot_gives_the_same_state() {
    run_event_cases(|machine, trace| check_replay(machine, trace).map_err(TestCaseError::fail));
}

/// Runs `EVENT_CASES` random cases through `check` (after the checks every case gets), in more
/// rounds of as many while a rare feature was reached by none (at most `EVENT_ROUNDS`: a round
/// without, say, a cancelled delayed send happens by chance), then asserts they were reached.
fn run_event_cases(check: impl Fn(&Arc<Machine>, &Trace) -> Result<(), TestCaseError>) {
    let statistics = RefCell::new(EventStatistics::default());
    for _ in 0..EVENT_ROUNDS {
        let result = event_runner().run(&event_case(), |case| {
            let (machine, trace) = checked(&case)?;
            check(&machine, &trace)?;
            statistics.borrow_mut().add(&machine, &trace);
            Ok(())
        });
        if let Err(error) = result {
            panic!("{error}");
        }
        if statistics.borrow().rare_features_reached() {
            break;
        }
    }
    non_vacuous(&statistics.into_inner());
}

/// How often property 4's machines had the tables it strips.
#[derive(Debug, Default)]
struct TableStatistics {
    /// Cases run, replayed seeds included.
    cases: u32,
    /// Machines with a candidate index.
    indexed: u32,
    /// Transitions with a fixed reach, over all machines.
    fixed: usize,
    /// Machines without parallel states, on the single-leaf path.
    single_leaf: u32,
    /// Those of them without eventless transitions either, which discard ignored events.
    ignoring: u32,
}

#[test]
fn the_tables_compiled_for_speed_change_nothing() {
    let statistics = RefCell::new(TableStatistics::default());
    let result = event_runner().run(&event_case(), |case| {
        let (machine, trace) = checked(&case)?;
        let mut plain = compile(&case.yaml).map_err(TestCaseError::fail)?;
        let stripped = Arc::get_mut(&mut plain).expect("a machine just compiled is not shared");
        stripped.candidates = None;
        for transition in &mut stripped.transitions {
            transition.reach = std::sync::OnceLock::from(Reach::Dynamic);
        }
        let mut statistics = statistics.borrow_mut();
        statistics.cases += 1;
        statistics.indexed += u32::from(machine.candidates.is_some());
        // What each transition's reach is once worked out (the run above worked out those it took).
        statistics.fixed += (0..machine.transitions.len() as u32)
            .filter(|index| {
                matches!(
                    protocol_run::runtime::run::algorithm::fixed_reach(
                        &machine,
                        TransitionId(*index)
                    ),
                    Reach::Fixed { .. }
                )
            })
            .count();
        statistics.single_leaf += u32::from(machine.single_leaf);
        statistics.ignoring += u32::from(machine.single_leaf && !machine.has_eventless);
        check_replay(&plain, &trace).map_err(TestCaseError::fail)
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    let statistics = statistics.into_inner();
    eprintln!("{statistics:#?}");
    // About half the machines have no parallel state, and a quarter of those no eventless
    // transition: these bounds fail only if the generator stops producing them.
    assert!(
        statistics.single_leaf >= 8 && statistics.ignoring >= 2,
        "the single-leaf path was barely reached: {statistics:?}"
    );
    assert!(
        statistics.indexed == statistics.cases,
        "not every machine had a candidate index: {statistics:?}"
    );
    assert!(
        statistics.fixed > statistics.cases as usize,
        "few transitions had a fixed reach: {statistics:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Property 3: virtual time and real time

/// The transitions a driven run takes, when, and how it finishes.
#[derive(Debug, Default)]
struct TransitionLog {
    transitions: Vec<Json>,
    /// When each transition was taken, on the run's clock (tokio's, virtual or real).
    times: Vec<Instant>,
    /// When the first record came.
    first: Option<Instant>,
    finish: Option<Json>,
}

impl Observer for TransitionLog {
    fn log(&mut self, _record: &LogRecord, _time: &str) {}

    fn directive(&mut self, _directive: &Directive) {}

    fn input_error(&mut self, _error: &InputLineError) {}

    fn record(&mut self, _time: &str, kind: &str, fields: Json) {
        let now = Instant::now();
        self.first.get_or_insert(now);
        match kind {
            "transition" => {
                self.transitions.push(fields);
                self.times.push(now);
            }
            "finish" => self.finish = Some(fields),
            _ => {}
        }
    }
}

#[derive(Debug)]
struct Driven {
    transitions: Vec<Json>,
    finish: Option<Json>,
    report: RunReport,
    /// When each transition was taken, from the start of the run.
    offsets: Vec<Duration>,
}

impl Driven {
    /// The same run, whenever its transitions were taken.
    fn same_as(&self, other: &Driven) -> bool {
        self.transitions == other.transitions
            && self.finish == other.finish
            && self.report == other.report
    }

    /// How many transitions both runs took alike before the first where they differ.
    fn common_prefix(&self, planned: &Driven) -> usize {
        self.transitions
            .iter()
            .zip(&planned.transitions)
            .take_while(|(mine, theirs)| mine == theirs)
            .count()
    }

    /// How much later than `planned` this run took its transitions, at worst, up to and
    /// including the first one where the two differ.
    fn lateness(&self, planned: &Driven) -> Duration {
        let common = self.transitions.len().min(planned.transitions.len());
        let end = (self.common_prefix(planned) + 1).min(common);
        (0..end)
            .map(|index| self.offsets[index].saturating_sub(planned.offsets[index]))
            .max()
            .unwrap_or_default()
    }

    /// The first transition, of those both runs took alike, that this run took before its
    /// planned time: its index and how early it came. A timer waits at least its delay, so on
    /// real time nothing may come sooner than on virtual time.
    fn early(&self, planned: &Driven) -> Option<(usize, Duration)> {
        (0..self.common_prefix(planned)).find_map(|index| {
            let early = planned.offsets[index].checked_sub(self.offsets[index])?;
            (!early.is_zero()).then_some((index, early))
        })
    }

    /// Whether every transition came within `LATENESS_ALLOWANCE_MS` plus a quarter of its
    /// planned offset.
    fn on_time(&self, planned: &Driven) -> bool {
        (0..self.common_prefix(planned)).all(|index| {
            let allowed = Duration::from_millis(LATENESS_ALLOWANCE_MS) + planned.offsets[index] / 4;
            self.offsets[index] <= planned.offsets[index] + allowed
        })
    }
}

/// Drives a fresh instance with no events. On virtual time, transition times are measured
/// from the first record (the clock stands still until the run waits for a timer); on real
/// time, from just before `drive` is called, so the time it takes to start counts as lateness.
fn drive_on(machine: &Arc<Machine>, time_mode: TimeMode) -> Result<Driven, String> {
    let mut interpreter = fresh(machine);
    let mut log = TransitionLog::default();
    let options = DriveOptions {
        time_mode,
        ..DriveOptions::default()
    };
    let called = Instant::now();
    let report = drive(&mut interpreter, EventSource::None, options, &mut log)
        .map_err(|error| format!("{time_mode:?} time: {error}"))?;
    let origin = match time_mode {
        TimeMode::Virtual => log.first.unwrap_or(called),
        TimeMode::Real => called,
    };
    Ok(Driven {
        transitions: log.transitions,
        finish: log.finish,
        report,
        offsets: log.times.iter().map(|time| *time - origin).collect(),
    })
}

/// A host on a virtual clock, as simple as can be: timers fire one at a time in order of
/// deadline (then of setting), and it measures how close two pending timers come.
#[derive(Default)]
struct VirtualClock {
    now: u64,
    sequence: u64,
    /// (deadline, sequence, send id, event), sorted.
    timers: Vec<(u64, u64, Option<String>, Event)>,
    transitions: Vec<TransitionId>,
}

impl Host for VirtualClock {
    fn log(&mut self, _record: LogRecord) {}

    fn send(&mut self, request: SendRequest) {
        assert!(
            request.delay_milliseconds > 0,
            "timer-only machines send nothing"
        );
        self.sequence += 1;
        let id = request.id.as_deref().map(String::from);
        let deadline = self.now + request.delay_milliseconds;
        self.timers
            .push((deadline, self.sequence, id, request.event));
        self.timers
            .sort_by_key(|(deadline, sequence, ..)| (*deadline, *sequence));
    }

    fn cancel(&mut self, send_id: &str) {
        self.timers
            .retain(|(_, _, id, _)| id.as_deref() != Some(send_id));
    }

    fn start_effect(&mut self, _request: EffectRequest) {
        unreachable!("timer-only machines run no effects")
    }

    fn start_invoke(&mut self, _request: InvokeRequest) {
        unreachable!("timer-only machines invoke nothing")
    }

    fn cancel_invoke(&mut self, _id: &str) {}

    fn emit(&mut self, _directive: Directive) {}

    fn transition_taken(&mut self, transition: TransitionId) {
        self.transitions.push(transition);
    }
}

/// What a run on `VirtualClock` shows before any real time is spent: the transitions it takes
/// (by pointer), how long it lasts and how close two pending timers come.
struct Simulated {
    pointers: Vec<String>,
    duration_ms: u64,
    closest_timers_ms: u64,
}

fn simulate(machine: &Arc<Machine>) -> Result<Simulated, String> {
    let mut interpreter = fresh(machine);
    let mut clock = VirtualClock::default();
    let mut closest = u64::MAX;
    interpreter
        .start(&mut clock)
        .map_err(|error| error.to_string())?;
    while interpreter.is_running() && !clock.timers.is_empty() {
        let (deadline, _, _, event) = clock.timers.remove(0);
        if let Some((next, ..)) = clock.timers.first() {
            closest = closest.min(next - deadline);
        }
        clock.now = deadline;
        interpreter
            .handle(&event, &mut clock)
            .map_err(|error| error.to_string())?;
    }
    Ok(Simulated {
        pointers: clock
            .transitions
            .iter()
            .map(|transition| machine.transition(*transition).pointer.clone())
            .collect(),
        duration_ms: clock.now,
        closest_timers_ms: closest,
    })
}

#[derive(Debug, Default)]
struct TimerStatistics {
    cases: u32,
    rejected_close_timers: u32,
    rejected_long: u32,
    rejected_idle: u32,
    /// Real-time runs that came later than allowed, or differed after falling behind by the
    /// gap (run again).
    late_runs: u32,
    rejected_late: u32,
    /// The latest an accepted real-time run took a transition, against virtual time.
    worst_lateness: Duration,
    timer_transitions: usize,
    finished: u32,
    virtual_ms: u64,
    real_wall_ms: u128,
}

/// Property 3. Each accepted machine is driven by `driver::drive` with no event source, once on
/// virtual time and once on real time; the transitions taken (the `transition` records), the
/// `finish` record and the report must be the same. The virtual-time run must also take the
/// transitions `VirtualClock` takes. On real time no transition may come before its virtual
/// time, and none later than `LATENESS_ALLOWANCE_MS` plus a quarter of it (a run that does is
/// run again; more than `MAX_REJECTED_LATE` cases that keep lagging fail the property).
///
/// Why timers that race must fall due at least `MIN_TIMER_GAP_MS` apart: the driver fires the
/// pending timer with the earliest deadline, and on real time a deadline is "when it was set"
/// plus its delay. A timer set by a macrostep that ran late (the thread was descheduled, the
/// machine is busy building) gets a deadline later than its virtual one by that lateness, and
/// two timers set in different macrosteps drift by different amounts. If two timers pending
/// together were due at the same virtual millisecond, or 1–2 ms apart, real time could fire
/// them in the other order and the runs would differ with no fault in the engine. With 5 ms
/// between any two pending deadlines, the lateness of a short run would have to differ by 5 ms
/// between two macrosteps to reorder them, while delays stay small (1–30 ms) and a real-time
/// case costs tens of milliseconds. `VirtualClock` measures the closest pair of pending
/// deadlines over the whole run and cases under the gap are rejected, as are cases that last
/// longer than `MAX_TIMER_RUN_MS` or in which no timer transition is taken.
#[test]
fn timer_only_machines_take_the_same_transitions_on_virtual_and_real_time() {
    let statistics = RefCell::new(TimerStatistics::default());
    let mut runner = TestRunner::new(Config {
        cases: TIMER_CASES,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(TIMER_REGRESSIONS))),
        max_global_rejects: 4096,
        ..Config::default()
    });
    let result = runner.run(&chart(Mode::Timers).prop_map(Yaml), |yaml| {
        let machine = compile(&yaml.0).map_err(|diagnostics| {
            TestCaseError::fail(format!(
                "the generated protocol does not compile:\n{diagnostics}"
            ))
        })?;
        let simulated = simulate(&machine).map_err(TestCaseError::fail)?;
        if simulated.closest_timers_ms < MIN_TIMER_GAP_MS {
            statistics.borrow_mut().rejected_close_timers += 1;
            return Err(TestCaseError::reject("two timers race too closely"));
        }
        if simulated.duration_ms > MAX_TIMER_RUN_MS {
            statistics.borrow_mut().rejected_long += 1;
            return Err(TestCaseError::reject("too long for real time"));
        }
        let timer_transitions = simulated
            .pointers
            .iter()
            .filter(|pointer| pointer.contains("/after/"))
            .count();
        if timer_transitions == 0 {
            statistics.borrow_mut().rejected_idle += 1;
            return Err(TestCaseError::reject("no timer transition is taken"));
        }
        let on_virtual = drive_on(&machine, TimeMode::Virtual).map_err(TestCaseError::fail)?;
        let pointers: Vec<&str> = on_virtual
            .transitions
            .iter()
            .map(|transition| transition["at"].as_str().unwrap_or_default())
            .collect();
        if pointers != simulated.pointers {
            return Err(TestCaseError::fail(format!(
                "the driver on virtual time took {pointers:?}, the virtual clock {:?}",
                simulated.pointers
            )));
        }
        let started = std::time::Instant::now();
        let mut attempt = 1;
        let on_real = loop {
            let on_real = drive_on(&machine, TimeMode::Real).map_err(TestCaseError::fail)?;
            if let Some((index, early)) = on_real.early(&on_virtual) {
                return Err(TestCaseError::fail(format!(
                    "transition {index} came {early:?} early on real time\non virtual time:\n\
                     {on_virtual:#?}\non real time:\n{on_real:#?}"
                )));
            }
            let same = on_real.same_as(&on_virtual);
            if same && on_real.on_time(&on_virtual) {
                break on_real;
            }
            // A real-time run that fell behind its schedule by the gap may legitimately
            // reorder timers: run it again, as one that came too late, and give up on the case
            // if it keeps lagging.
            let lateness = on_real.lateness(&on_virtual);
            if !same && lateness < Duration::from_millis(MIN_TIMER_GAP_MS) {
                return Err(TestCaseError::fail(format!(
                    "at most {lateness:?} late, the real-time run differs\non virtual time:\n\
                     {on_virtual:#?}\non real time:\n{on_real:#?}"
                )));
            }
            let mut statistics = statistics.borrow_mut();
            statistics.late_runs += 1;
            if attempt == MAX_REAL_TIME_ATTEMPTS {
                statistics.rejected_late += 1;
                if statistics.rejected_late > MAX_REJECTED_LATE {
                    return Err(TestCaseError::fail(format!(
                        "{} cases' real-time runs all came too late; the last, {lateness:?} \
                         late:\non virtual time:\n{on_virtual:#?}\non real time:\n{on_real:#?}",
                        statistics.rejected_late
                    )));
                }
                return Err(TestCaseError::reject("the real-time runs kept lagging"));
            }
            attempt += 1;
        };
        let wall = started.elapsed().as_millis();
        let mut statistics = statistics.borrow_mut();
        statistics.cases += 1;
        statistics.timer_transitions += timer_transitions;
        statistics.finished += u32::from(on_real.report.outcome.is_some());
        statistics.virtual_ms += simulated.duration_ms;
        statistics.real_wall_ms += wall;
        statistics.worst_lateness = statistics.worst_lateness.max(on_real.lateness(&on_virtual));
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    // Not vacuous by construction: every accepted case takes at least one timer transition.
    eprintln!("{:#?}", statistics.into_inner());
}
