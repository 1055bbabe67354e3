//! Ownership on random machines: random effects of random durations, random events, checked after every macrostep.
//!
//! Each case is a statechart of nested states whose entry, exit and transition actions start
//! mocked effects (each a random number of virtual milliseconds, some `scope: run`, some a
//! `map` of such items, whose completion is an outcome like an effect's, some started twice by
//! a `foreach`), whose
//! transitions react to inputs and to the effects' outcomes, driven through the runtime
//! (`Session`) on virtual time by random events and clock moves. After the start and after
//! every macrostep:
//!
//! 1. no effect runs whose owner state is inactive, unless it is scoped to the run or the run
//!    has reached its final state (whose effects are awaited);
//! 2. no invocation ends twice, and an outcome handled is one whose invocation ended
//!    `completed` or `failed` (never `cancelled`) just then;
//!
//! and at the end every invocation started has ended exactly once. Some cases crash the engine
//! between inputs (everything not committed lost, running effects gone) and resume from the
//! last committed step: an invocation the crash interrupted ends then, and the resumed run
//! keeps every invariant.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use protocol_run::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::effects::mock::Mocks;
use protocol_run::pipeline::actions::{Directive, LogRecord};
use protocol_run::pipeline::compile::machine::StateId;
use protocol_run::runtime::run::Interpreter;
use protocol_run::runtime::run::driver::{DriverState, InputLineError, Observer, Session, Waited};

const CASES: u32 = 48;
/// Effect actions a machine may have, `e0` … (each action has its own id).
const MAX_EFFECTS: usize = 8;
const INPUT_EVENTS: [&str; 3] = ["a", "b", "c"];

/// One effect action: its timeout (virtual ms), the outcome of each run in turn (0: it times
/// out, taking its timeout; 1: it succeeds at once; 2: it fails at once), and its scope.
#[derive(Debug, Clone)]
struct EffectSpec {
    timeout_milliseconds: u64,
    script: Vec<u8>,
    run_scoped: bool,
    /// `on_interrupt: retry` (else `fail`).
    retried_on_resume: bool,
    /// A `map` of this effect: (items, `max_concurrency`, `tolerated_failures`); its items
    /// share the script, one outcome per item started.
    map: Option<(usize, u32, u32)>,
    /// Not a map: started twice per run of its block by a `foreach` over `[0, 1]`.
    looped: bool,
}

/// Where an effect action is written.
#[derive(Debug, Clone, Copy)]
enum Place {
    Entry,
    Exit,
    Transition,
}

#[derive(Debug, Clone)]
struct Case {
    /// Children per top-level state (0: atomic).
    children: Vec<usize>,
    /// Each effect: its spec, its state (an index into all states), where it is written, and
    /// for a transition, the event and target.
    effects: Vec<(EffectSpec, usize, Place, usize, usize)>,
    /// Per state: on each input event, a target (an index into all states).
    reactions: Vec<Vec<Option<usize>>>,
    /// Per effect: where its success and its failure go.
    outcomes: Vec<(Option<usize>, Option<usize>)>,
    final_state: bool,
    inputs: Vec<Input>,
}

#[derive(Debug, Clone)]
enum Input {
    Event(usize),
    /// The event is queued, then the next effect message is awaited before the queue is
    /// handled: an outcome can then wait behind an event that leaves its owner.
    Queued(usize),
    Advance(u64),
    /// The engine dies (`kill -9`): everything not committed is lost, running effects are
    /// gone with it; the run resumes from its last committed step.
    Crash,
}

fn case() -> impl Strategy<Value = Case> {
    (vec(0usize..3, 2..5), any::<bool>()).prop_flat_map(|(children, final_state)| {
        let states = children.len() + children.iter().sum::<usize>() + usize::from(final_state);
        let effect = (
            (
                1u64..40,
                vec(0u8..3, 1..6),
                prop::bool::weighted(0.2),
                any::<bool>(),
                prop::option::weighted(0.3, (0usize..5, 1u32..4, 0u32..3)),
                prop::bool::weighted(0.2),
            )
                .prop_map(
                    |(timeout_milliseconds, script, run_scoped, retried_on_resume, map, looped)| {
                        EffectSpec {
                            timeout_milliseconds,
                            script,
                            run_scoped,
                            retried_on_resume,
                            map,
                            looped,
                        }
                    },
                ),
            0..states,
            prop_oneof![
                3 => Just(Place::Entry),
                1 => Just(Place::Exit),
                2 => Just(Place::Transition),
            ],
            0..INPUT_EVENTS.len(),
            0..states,
        );
        let reaction = prop::option::weighted(0.5, 0..states);
        let outcome = (
            prop::option::weighted(0.5, 0..states),
            prop::option::weighted(0.3, 0..states),
        );
        let input = prop_oneof![
            3 => (0..INPUT_EVENTS.len()).prop_map(Input::Event),
            2 => (0..INPUT_EVENTS.len()).prop_map(Input::Queued),
            2 => (1u64..60).prop_map(Input::Advance),
            1 => Just(Input::Crash),
        ];
        (
            Just(children),
            vec(effect, 1..=MAX_EFFECTS),
            vec(vec(reaction, INPUT_EVENTS.len()), states),
            vec(outcome, MAX_EFFECTS),
            Just(final_state),
            vec(input, 0..14),
        )
            .prop_map(
                |(children, effects, reactions, outcomes, final_state, inputs)| Case {
                    children,
                    effects,
                    reactions,
                    outcomes,
                    final_state,
                    inputs,
                },
            )
    })
}

/// The states in document order: (id, parent index, is final).
fn states(case: &Case) -> Vec<(String, Option<usize>, bool)> {
    let mut states = Vec::new();
    for (top, children) in case.children.iter().enumerate() {
        let parent = states.len();
        states.push((format!("s{top}"), None, false));
        for child in 0..*children {
            states.push((format!("s{top}_{child}"), Some(parent), false));
        }
    }
    if case.final_state {
        states.push(("end".to_string(), None, true));
    }
    states
}

/// The protocol as YAML (JSON is YAML), and the mocks of its effects.
fn render(case: &Case) -> (String, Vec<String>) {
    use serde_json::{Map, Value as Json, json};
    let states = states(case);
    let mut nodes: Vec<Map<String, Json>> = vec![Map::new(); states.len()];
    let mut mocks = Vec::new();
    let effect_json = |index: usize, spec: &EffectSpec| {
        let timeout = format!("{}ms", spec.timeout_milliseconds);
        let mut effect = json!({"exec": ["true"], "id": format!("e{index}"), "timeout": timeout});
        if spec.run_scoped {
            effect["scope"] = json!("run");
        }
        effect["on_interrupt"] = json!(if spec.retried_on_resume {
            "retry"
        } else {
            "fail"
        });
        if let Some((items, concurrency, tolerated)) = spec.map {
            effect["map"] = json!((0..items).collect::<Vec<usize>>());
            effect["item"] = json!("item");
            effect["max_concurrency"] = json!(concurrency);
            effect["tolerated_failures"] = json!(tolerated);
        } else if spec.looped {
            return json!({"foreach": [0, 1], "item": "item", "do": [effect]});
        }
        effect
    };
    let push = |node: &mut Map<String, Json>, key: &str, value: Json| {
        node.entry(key)
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .unwrap()
            .push(value);
    };
    let on = |node: &mut Map<String, Json>, event: String, transition: Json| {
        node.entry("on")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .unwrap()
            .entry(event)
            .or_insert(transition);
    };
    for (index, (spec, state, place, event, target)) in case.effects.iter().enumerate() {
        let state = *state;
        let effect = effect_json(index, spec);
        // A final state runs no exit actions and takes no transitions: its entry only.
        let place = if states[state].2 {
            Place::Entry
        } else {
            *place
        };
        match place {
            Place::Entry => push(&mut nodes[state], "entry", effect),
            Place::Exit => push(&mut nodes[state], "exit", effect),
            Place::Transition => on(
                &mut nodes[state],
                INPUT_EVENTS[*event].to_string(),
                json!({"target": states[*target].0, "actions": [effect]}),
            ),
        }
        let script: Vec<&str> = spec
            .script
            .iter()
            .map(|outcome| match outcome {
                0 => "timeout",
                1 => "ok:done",
                _ => "exit:1",
            })
            .collect();
        mocks.push(format!("e{index}={}", script.join(",")));
        let (success, failure) = case.outcomes[index];
        let family = if spec.map.is_some() { "map" } else { "exec" };
        if let Some(target) = success
            && !states[state].2
        {
            on(
                &mut nodes[state],
                format!("done.{family}.e{index}"),
                json!(states[target].0),
            );
        }
        if let Some(target) = failure
            && !states[state].2
        {
            on(
                &mut nodes[state],
                format!("error.{family}.e{index}"),
                json!(states[target].0),
            );
        }
    }
    for (state, reactions) in case.reactions.iter().enumerate() {
        if states[state].2 {
            continue;
        }
        for (event, target) in reactions.iter().enumerate() {
            if let Some(target) = target {
                on(
                    &mut nodes[state],
                    INPUT_EVENTS[event].to_string(),
                    json!(states[*target].0),
                );
            }
        }
    }
    // Nest children under their parents, last first so indices stay right.
    let mut top = Map::new();
    for index in (0..states.len()).rev() {
        let (id, parent, is_final) = &states[index];
        let mut node = std::mem::take(&mut nodes[index]);
        if *is_final {
            node.insert("type".into(), json!("final"));
        }
        match parent {
            Some(parent) => {
                let children = nodes[*parent]
                    .entry("states")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .unwrap();
                // Inserted in reverse: put back in document order below.
                children.insert(id.clone(), Json::Object(node));
            }
            None => {
                top.insert(id.clone(), Json::Object(node));
            }
        }
    }
    fn in_document_order(map: &mut Map<String, Json>) {
        let mut entries: Vec<(String, Json)> = std::mem::take(map).into_iter().collect();
        entries.reverse();
        for (key, mut value) in entries {
            if let Some(states) = value.get_mut("states").and_then(Json::as_object_mut) {
                in_document_order(states);
            }
            map.insert(key, value);
        }
    }
    in_document_order(&mut top);
    // `item` is the variable of the maps.
    let document = json!({"id": "owned", "context": {"item": null}, "states": top});
    (document.to_string(), mocks)
}

/// What the observer saw of each invocation: its owner and scope, and how it ended.
#[derive(Debug, Default)]
struct Ledger {
    started: HashMap<u64, (String, bool)>,
    ended: HashMap<u64, Vec<String>>,
    problems: Vec<String>,
    macrosteps: usize,
    cancelled: usize,
    delivered: usize,
    after_finish: usize,
    crashes: usize,
    /// Maps started, by invocation: a map survives a crash (its snapshot has it), so its end
    /// after a resume replaces the `interrupted` the crash gave it.
    maps: std::collections::HashSet<u64>,
    /// Maps that ended `completed` or `failed`, and their items started.
    maps_reported: usize,
    map_items: usize,
    /// The case was cut short: it still had effects running after `MAX_WAITS` waits.
    cut: bool,
}

impl Ledger {
    /// The engine died: every invocation still running was interrupted. Its end is the
    /// resumed run's: a retry starts a new invocation, a failure is delivered as its outcome.
    fn crash(&mut self) {
        self.crashes += 1;
        let running: Vec<u64> = self
            .started
            .keys()
            .filter(|invocation| !self.ended.contains_key(invocation))
            .copied()
            .collect();
        for invocation in running {
            self.ended
                .insert(invocation, vec!["interrupted".to_string()]);
        }
    }

    /// Invariant 1 over the interpreter as it is now.
    fn check_owners(&mut self, interpreter: &Interpreter, when: &str) {
        if !interpreter.is_running() {
            return;
        }
        let root = interpreter.machine().state(StateId::ROOT).id.to_string();
        for (invocation, (owner, run_scoped)) in &self.started {
            if self.ended.contains_key(invocation) || *run_scoped || *owner == root {
                continue;
            }
            if !interpreter.is_active(owner) {
                self.problems.push(format!(
                    "{when}: invocation {invocation} runs, but its owner `{owner}` is inactive \
                     (active: {:?})",
                    interpreter.active_leaves()
                ));
            }
        }
    }
}

/// Keeps the last step committed, as a store would.
struct LastStep {
    last: Rc<RefCell<Option<CheckpointStep>>>,
}

impl Checkpoint for LastStep {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        *self.last.borrow_mut() = Some(step);
        Ok(())
    }
}

struct LedgerObserver {
    ledger: Rc<RefCell<Ledger>>,
}

impl Observer for LedgerObserver {
    fn log(&mut self, _record: &LogRecord, _time: &str) {}
    fn directive(&mut self, _directive: &Directive) {}
    fn input_error(&mut self, _error: &InputLineError) {}

    fn record(&mut self, _time: &str, kind: &str, fields: serde_json::Value) {
        let mut ledger = self.ledger.borrow_mut();
        let Some(invocation) = fields["invocation"].as_u64() else {
            return;
        };
        match kind {
            "map_started" => {
                let owner = fields["owner"].as_str().unwrap_or_default().to_string();
                let run_scoped = fields["scope"] == "run";
                ledger.maps.insert(invocation);
                if ledger
                    .started
                    .insert(invocation, (owner, run_scoped))
                    .is_some()
                {
                    ledger
                        .problems
                        .push(format!("map invocation {invocation} started twice"));
                }
            }
            "map" => {
                let outcome = fields["outcome"].as_str().unwrap_or("?").to_string();
                if outcome == "completed" || outcome == "failed" {
                    ledger.maps_reported += 1;
                }
                let ends = ledger.ended.entry(invocation).or_default();
                // A map the crash interrupted goes on after the resume: this is its end.
                if ends.as_slice() == ["interrupted"] {
                    ends.clear();
                }
                ends.push(outcome);
                if ends.len() > 1 {
                    let ends = ends.clone();
                    ledger
                        .problems
                        .push(format!("map invocation {invocation} ended {ends:?}"));
                }
            }
            "effect_started" => {
                if fields["id"].as_str().is_some_and(|id| id.contains('[')) {
                    ledger.map_items += 1;
                }
                let owner = fields["owner"].as_str().unwrap_or_default().to_string();
                let run_scoped = fields["scope"] == "run";
                if ledger
                    .started
                    .insert(invocation, (owner, run_scoped))
                    .is_some()
                {
                    ledger
                        .problems
                        .push(format!("invocation {invocation} started twice"));
                }
            }
            "effect" => {
                let outcome = fields["outcome"].as_str().unwrap_or("?").to_string();
                match outcome.as_str() {
                    "cancelled" => ledger.cancelled += 1,
                    _ if fields["after_finish"] == true => ledger.after_finish += 1,
                    _ => {}
                }
                let ends = ledger.ended.entry(invocation).or_default();
                // A resumed run records how an invocation its crash interrupted ended: the
                // same end the crash gave it, not a second one.
                if outcome == "interrupted" && ends.as_slice() == ["interrupted"] {
                    return;
                }
                ends.push(outcome);
                if ends.len() > 1 {
                    let ends = ends.clone();
                    ledger
                        .problems
                        .push(format!("invocation {invocation} ended {ends:?}"));
                }
            }
            _ => {}
        }
    }

    fn step(
        &mut self,
        _unix_milliseconds: u64,
        event: &Event,
        interpreter: &Interpreter,
        _outcome: Option<&protocol_run::runtime::run::admission::EventReport>,
    ) {
        let mut ledger = self.ledger.borrow_mut();
        ledger.macrosteps += 1;
        if let Some(Value::Int(invocation)) = event.data.get("invocation")
            && event.origin == Origin::Outcome
        {
            ledger.delivered += 1;
            let invocation = *invocation as u64;
            match ledger.ended.get(&invocation).map(Vec::as_slice) {
                Some([outcome]) if outcome == "completed" || outcome == "failed" => {}
                // An interrupted invocation's failure, delivered by the resumed run.
                Some([outcome])
                    if outcome == "interrupted" && event.data.get("interrupted").is_some() => {}
                other => {
                    let message = format!(
                        "the outcome of invocation {invocation} ({}) was handled, but it ended {other:?}",
                        event.name
                    );
                    ledger.problems.push(message);
                }
            }
        }
        ledger.check_owners(interpreter, &format!("after `{}`", event.name));
    }
}

/// Waits a case may take per input, and at its end, before it counts as endless (a machine
/// whose instant outcomes re-enter the state that starts them loops without time passing).
const MAX_WAITS: usize = 300;

/// Runs one case; the ledger says whether it was cut short as endless.
fn run_case(case: &Case) -> Result<Ledger, String> {
    let (yaml, mock_arguments) = render(case);
    let loaded =
        protocol_run::pipeline::load::load_text("owned.yaml", yaml.clone()).map_err(|errors| {
            format!(
                "{}\n{yaml}",
                protocol_run::base::diagnostic::render_all(&errors)
            )
        })?;
    let machine = protocol_run::pipeline::compile::compile(&loaded).map_err(|errors| {
        format!(
            "{}\n{yaml}",
            protocol_run::base::diagnostic::render_all(&errors)
        )
    })?;
    let machine = Arc::new(machine);
    let mocks = Mocks::parse(&mock_arguments).map_err(|error| error.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let ledger = Rc::new(RefCell::new(Ledger::default()));
    let local = tokio::task::LocalSet::new();
    let mocks = Arc::new(Mutex::new(mocks));
    let result: Result<bool, String> = local.block_on(&runtime, async {
        let last_step: Rc<RefCell<Option<CheckpointStep>>> = Rc::default();
        let mut resume: Option<Resume> = None;
        let mut inputs = case.inputs.iter();
        loop {
            let mut interpreter = match &resume {
                Some(resume) => Interpreter::restore(machine.clone(), Vec::new(), &resume.snapshot)
                    .map_err(|error| error.to_string())?,
                None => Interpreter::new(machine.clone(), Vec::new()),
            };
            let mut observer = LedgerObserver {
                ledger: ledger.clone(),
            };
            let mut state = DriverState::new();
            let mut checkpoint = LastStep {
                last: last_step.clone(),
            };
            let mut session =
                Session::new(&mut interpreter, &mut state, mocks.clone(), &mut observer)
                    .with_checkpoint(&mut checkpoint);
            match &resume {
                Some(resume) => {
                    session.resume(resume).map_err(|error| error.to_string())?;
                    session.handle_queued().map_err(|error| error.to_string())?;
                }
                None => session.start().map_err(|error| error.to_string())?,
            }
            ledger
                .borrow_mut()
                .check_owners(session.interpreter, "after the start or resume");
            let mut crashed = false;
            for input in inputs.by_ref() {
                match input {
                    Input::Event(event) => {
                        let name = INPUT_EVENTS[*event];
                        session.send(Event::named(&machine, name, Value::Null, Origin::External));
                        session.handle_queued().map_err(|error| error.to_string())?;
                    }
                    Input::Queued(event) => {
                        let name = INPUT_EVENTS[*event];
                        session.send(Event::named(&machine, name, Value::Null, Origin::External));
                        if session.effects_running() {
                            let until = tokio::time::Instant::now() + Duration::from_millis(50);
                            session.wait(Some(until), None).await;
                        }
                        session.handle_queued().map_err(|error| error.to_string())?;
                        session
                            .commit_between_steps()
                            .map_err(|error| error.to_string())?;
                    }
                    Input::Advance(milliseconds) => {
                        // `Session::advance`, with a bound: instant outcomes that re-enter the
                        // state that starts them loop without time passing.
                        let target =
                            tokio::time::Instant::now() + Duration::from_millis(*milliseconds);
                        let mut waits = 0;
                        loop {
                            session.handle_queued().map_err(|error| error.to_string())?;
                            let busy = session.effects_running()
                                || session.next_deadline().is_some_and(|next| next <= target);
                            if !busy || !session.is_running() {
                                tokio::time::sleep_until(target).await;
                                break;
                            }
                            waits += 1;
                            if waits > MAX_WAITS {
                                return Ok(true);
                            }
                            let waited = session.wait(Some(target), None).await;
                            // As the run loop does after each wait.
                            session
                                .commit_between_steps()
                                .map_err(|error| error.to_string())?;
                            if let Waited::Deadline = waited {
                                break;
                            }
                        }
                    }
                    Input::Crash => {
                        crashed = true;
                        break;
                    }
                }
            }
            if crashed {
                // The engine is gone with everything it ran; what was committed survives.
                drop(session);
                ledger.borrow_mut().crash();
                let step = last_step.borrow().clone().ok_or("nothing was committed")?;
                resume = Some(Resume {
                    snapshot: step.snapshot,
                    sequence: step.sequence,
                    committed_unix_milliseconds: step.unix_milliseconds,
                    timers: TimerPolicy::Deadline,
                    children_again: Vec::new(),
                });
                continue;
            }
            // Then everything still running is let end, the outcomes handled as they come.
            for _ in 0..MAX_WAITS {
                session.handle_queued().map_err(|error| error.to_string())?;
                if !session.effects_running() {
                    session.finish();
                    return Ok(false);
                }
                session.wait(None, None).await;
                session
                    .commit_between_steps()
                    .map_err(|error| error.to_string())?;
            }
            return Ok(true);
        }
    });
    let cut = result?;
    let mut ledger = Rc::try_unwrap(ledger)
        .map_err(|_| "the ledger is still shared".to_string())?
        .into_inner();
    ledger.cut = cut;
    Ok(ledger)
}

#[test]
fn no_effect_outlives_its_owner_and_every_one_ends_exactly_once() {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let totals = RefCell::new((0usize, 0usize, 0usize, 0usize, 0usize));
    let maps = RefCell::new((0usize, 0usize, 0usize));
    let crashes = RefCell::new(0usize);
    let cut = RefCell::new(0u32);
    let result = runner.run(&case(), |case| {
        let ledger = run_case(&case).map_err(TestCaseError::fail)?;
        let mut problems = ledger.problems.clone();
        for invocation in ledger.started.keys() {
            if !ledger.cut && !ledger.ended.contains_key(invocation) {
                problems.push(format!("invocation {invocation} never ended"));
            }
        }
        if !problems.is_empty() {
            let (yaml, mocks) = render(&case);
            return Err(TestCaseError::fail(format!(
                "{}\nprotocol: {yaml}\nmocks: {mocks:?}\ninputs: {:?}",
                problems.join("\n"),
                case.inputs
            )));
        }
        *cut.borrow_mut() += u32::from(ledger.cut);
        *crashes.borrow_mut() += ledger.crashes;
        let mut maps = maps.borrow_mut();
        maps.0 += ledger.maps.len();
        maps.1 += ledger.maps_reported;
        maps.2 += ledger.map_items;
        let mut totals = totals.borrow_mut();
        totals.0 += ledger.started.len();
        totals.1 += ledger.cancelled;
        totals.2 += ledger.delivered;
        totals.3 += ledger.after_finish;
        totals.4 += ledger.macrosteps;
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    let (started, cancelled, delivered, after_finish, macrosteps) = *totals.borrow();
    let cut = *cut.borrow();
    eprintln!(
        "ownership: {started} invocations, {cancelled} cancelled, {delivered} delivered, \
         {after_finish} awaited after the finish, {macrosteps} macrosteps, {cut} cases endless"
    );
    assert!(cut < CASES / 2, "{cut} of {CASES} cases were endless");
    let crashes = *crashes.borrow();
    eprintln!("ownership: {crashes} crashes resumed");
    assert!(crashes > 10, "{crashes} crashes");
    // The random cases reached what they are meant to check.
    assert!(started > 100, "{started} invocations");
    assert!(cancelled > 10, "{cancelled} cancelled");
    assert!(delivered > 10, "{delivered} delivered");
    let (maps, maps_reported, map_items) = *maps.borrow();
    eprintln!("ownership: {maps} maps, {maps_reported} reported, {map_items} items started");
    assert!(
        maps > 5 && maps_reported > 0 && map_items > 5,
        "maps: {maps}, {maps_reported}, {map_items}"
    );
}
