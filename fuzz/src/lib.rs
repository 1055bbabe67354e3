//! What each fuzz target checks, shared with `tests/fuzz_regressions.rs` so a kept input runs
//! the same code in `cargo test` as it did under the fuzzer.
//!
//! Every function panics when the engine misbehaves (a panic inside the engine, an error
//! without a location, an illegal configuration), which is what the fuzzer reports as a crash.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol_run::base::diagnostic::Diagnostic;
use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::budget::{Budgets, StepBudgets};
use protocol_run::pipeline::compile::expression::{Expression, Names, Scope, Template};
use protocol_run::pipeline::compile::machine::{Machine, StateId, StateKind};
use protocol_run::pipeline::load::yaml::YamlLimits;
use protocol_run::runtime::run::algorithm::Limits;
use protocol_run::runtime::run::{Interpreter, RecordingHost};

/// The name protocols are loaded under; only used in messages.
pub const FILE: &str = "fuzz.yaml";

/// Microsteps per macrostep for generated machines: enough for any legal run of a small
/// machine, small enough that an eventless loop costs the fuzzer little time.
const MAX_MICROSTEPS: usize = 200;

/// Events sent with `send` and delivered back, per case, so a machine that sends to itself on
/// every event still ends.
const MAX_DELIVERED_SENDS: usize = 64;

/// In an `interpreter` event list: deliver the pending delayed event (`send` with a delay, or an
/// `after` timer) with the shortest delay.
pub const TIMER_EVENT: &str = "@timer";

/// `yaml_loader`: the raw YAML reader, then the whole loader (reader, schema, model).
pub fn yaml_loader(text: &str) {
    if let Err(errors) = protocol_run::pipeline::load::yaml::parse(text, &YamlLimits::default()) {
        assert!(
            !errors.is_empty(),
            "the YAML reader failed without an error"
        );
        for error in &errors {
            assert!(
                error.position.line >= 1 && error.position.offset <= text.len(),
                "YAML error outside the text: {error:?}"
            );
        }
    }
    if let Err(diagnostics) = protocol_run::pipeline::load::load_text(FILE, text.to_string()) {
        assert_located(&diagnostics);
    }
}

/// `pipeline`: load, validate and compile as `protocol-run validate` does, then lint as
/// `protocol-run check` does. Returns the machine when the protocol compiled.
pub fn pipeline(text: &str) -> Option<Machine> {
    let loaded = match protocol_run::pipeline::load::load_text(FILE, text.to_string()) {
        Ok(loaded) => loaded,
        Err(diagnostics) => {
            assert_located(&diagnostics);
            return None;
        }
    };
    match protocol_run::pipeline::compile::compile(&loaded) {
        Ok(machine) => {
            let warnings = protocol_run::tooling::lint::check(&loaded, &machine);
            // Rendering is what the CLI does with them; it must not panic either.
            let _ = protocol_run::base::diagnostic::render_all(&warnings);
            Some(machine)
        }
        Err(diagnostics) => {
            assert!(
                !diagnostics.is_empty(),
                "compiling failed without a diagnostic"
            );
            let _ = protocol_run::base::diagnostic::render_all(&diagnostics);
            None
        }
    }
}

/// Every diagnostic of a failed load points into the file, and renders.
fn assert_located(diagnostics: &[Diagnostic]) {
    assert!(
        !diagnostics.is_empty(),
        "loading failed without a diagnostic"
    );
    for diagnostic in diagnostics {
        // The summary of repeated messages ("... and N more like this") has no place of its own.
        if diagnostic.message.contains("more like this") {
            continue;
        }
        assert!(
            diagnostic.location.is_some(),
            "a load error without a location: {diagnostic:?}"
        );
    }
    let _ = protocol_run::base::diagnostic::render_all(diagnostics);
}

/// Context variables the `expressions` target's names know, by slot.
const CONTEXT: [&str; 8] = ["x", "y", "s", "b", "f", "l", "m", "n"];
/// Inputs, by slot.
const INPUTS: [&str; 2] = ["limit", "tool"];

fn expression_names() -> Names {
    let states = HashMap::from([("idle".to_string(), 1), ("busy".to_string(), 2)]);
    Names::new(CONTEXT.map(String::from), INPUTS.map(String::from), states)
}

fn expression_context() -> Vec<Value> {
    let mut map = indexmap::IndexMap::new();
    map.insert(Arc::from("k"), Value::Int(1));
    map.insert(Arc::from("name"), Value::string("disk"));
    vec![
        Value::Int(i64::MAX),
        Value::Int(-3),
        Value::string("héllo"),
        Value::Bool(true),
        Value::Float(0.5),
        Value::List(Arc::new(vec![
            Value::Int(1),
            Value::string("two"),
            Value::Null,
        ])),
        Value::Map(Arc::new(map)),
        Value::Null,
    ]
}

/// `expressions`: compile the text as an expression and as a template against known names;
/// what compiles is evaluated, on the fast path and with full CEL, and the two must agree
/// whenever the fast path produces a value.
pub fn expressions(text: &str) {
    // Small budgets, so an input that would exhaust the default ones is caught quickly.
    let budgets = Budgets {
        max_value_bytes: 4096,
        max_evaluation_steps: 10_000,
        max_step_time: Some(Duration::from_secs(2)),
        ..Budgets::default()
    };
    let _budgets = StepBudgets::enter(Some(&budgets));
    let started = Instant::now();
    let names = expression_names();
    let context = expression_context();
    let inputs = vec![Value::Int(3), Value::string("grep")];
    let event = Event {
        name: Arc::from("error.exec.timeout"),
        event_type: None,
        data: Value::List(Arc::new(vec![Value::Int(7)])),
        origin: Origin::External,
        send_id: Some(Arc::from("s1")),
        invoke_id: None,
    };
    let scope = Scope {
        names: &names,
        context: &context,
        inputs: &inputs,
        event: Some(&event),
        is_active: &|state| state == 1,
        clock: 1_700_000_000_000,
    };
    match Expression::compile(text, &names) {
        Ok(expression) => {
            // What the fast reader reads, CEL's parser must read too.
            if expression.is_read_directly() {
                assert!(
                    Expression::compile_with_cel(text, &names).is_ok(),
                    "`{text}` was read directly, but CEL refuses it"
                );
            }
            let fast = expression.evaluate(&scope);
            let full = expression.evaluate_with_cel(&scope);
            if let Ok(value) = &fast {
                match &full {
                    Ok(other) => assert!(
                        same_value(value, other),
                        "`{text}`: evaluate gave {value:?}, evaluate_with_cel {other:?}"
                    ),
                    Err(error) if expression.has_fast_path() => {
                        // `evaluate` only differs from CEL when the fast path answered.
                        panic!("`{text}`: evaluate gave {value:?}, evaluate_with_cel {error}")
                    }
                    Err(_) => {}
                }
            }
            let _ = expression.evaluate_condition(&scope);
            // The budgets hold: no value past the bound, no evaluation past its work.
            for value in [&fast, &full].into_iter().flatten() {
                assert!(
                    value.size_in_bytes() <= budgets.max_value_bytes,
                    "`{text}` gave {} bytes, past the bound of {}",
                    value.size_in_bytes(),
                    budgets.max_value_bytes
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "`{text}` ran {:?}, past its work bound",
                started.elapsed()
            );
        }
        Err(problems) => {
            assert!(!problems.is_empty(), "`{text}`: refused without a problem");
            // Offsets count characters; the end itself is where "ends too early" points.
            let characters = text.chars().count();
            for problem in &problems {
                assert!(
                    problem.offset <= characters,
                    "`{text}`: problem offset {} past the end ({characters})",
                    problem.offset
                );
            }
        }
    }
    match Template::compile(text, &names) {
        Ok(template) => {
            let _ = template.render(&scope);
        }
        Err(problems) => {
            let characters = text.chars().count();
            for problem in &problems {
                assert!(
                    problem.offset <= characters,
                    "template `{text}`: problem offset {} past the end ({characters})",
                    problem.offset
                );
            }
        }
    }
}

/// Equal values, NaN equal to itself and maps compared regardless of key order.
fn same_value(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Float(left), Value::Float(right)) => {
            left == right || (left.is_nan() && right.is_nan())
        }
        (Value::List(left), Value::List(right)) => {
            left.len() == right.len()
                && left.iter().zip(right.iter()).all(|(l, r)| same_value(l, r))
        }
        (Value::Map(left), Value::Map(right)) => {
            left.len() == right.len()
                && left.iter().all(|(key, value)| {
                    right.get(key).is_some_and(|other| same_value(value, other))
                })
        }
        _ => left == right,
    }
}

/// `scxml_import`: import the document as `protocol-run import scxml` does; a document that
/// imports gives YAML that must load and compile (or be refused with located diagnostics).
pub fn scxml_import(text: &str) {
    match protocol_run::tooling::import::scxml_to_protocol(text) {
        Ok(protocol) => {
            let yaml = protocol_run::tooling::import::to_yaml(&protocol);
            pipeline(&yaml);
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "the import failed without an error");
            for error in &errors {
                let _ = error.render("fuzz.scxml");
                let _ = error.diagnostic("fuzz.scxml", text);
            }
        }
    }
}

/// `interpreter`: compile `yaml` (a generated protocol, so it should compile; one that does not
/// is skipped), run it over `events`, and check the configuration after every macrostep.
/// Returns whether the protocol compiled.
pub fn interpreter(yaml: &str, events: &[&str]) -> bool {
    let Ok(loaded) = protocol_run::pipeline::load::load_text(FILE, yaml.to_string()) else {
        return false;
    };
    let Ok(machine) = protocol_run::pipeline::compile::compile(&loaded) else {
        return false;
    };
    let machine = Arc::new(machine);
    let inputs = machine
        .bind_inputs(&[])
        .expect("generated protocols have no required inputs");
    let mut interpreter = Interpreter::new(machine.clone(), inputs).with_limits(Limits {
        max_microsteps: MAX_MICROSTEPS,
        ..Limits::default()
    });
    let mut host = RecordingHost::for_machine(machine.clone());
    if interpreter.start(&mut host).is_err() {
        return true;
    }
    check_configuration(&interpreter, &machine);
    let mut delivered = 0;
    for name in events {
        let event = if *name == TIMER_EVENT {
            let Some(next) = (0..host.delayed.len()).min_by_key(|index| host.delayed[*index].0)
            else {
                continue;
            };
            host.delayed.remove(next).2
        } else {
            Event::named(&machine, name, Value::Null, Origin::External)
        };
        if interpreter.handle(&event, &mut host).is_err() {
            return true;
        }
        check_configuration(&interpreter, &machine);
        // Sends without delay go to the external queue: deliver them as the driver would.
        while let Some(sent) = host.external_queue.pop_front() {
            if delivered == MAX_DELIVERED_SENDS {
                host.external_queue.clear();
                break;
            }
            delivered += 1;
            if interpreter.handle(&sent, &mut host).is_err() {
                return true;
            }
            check_configuration(&interpreter, &machine);
        }
    }
    true
}

/// An `interpreter` case as kept on disk: a first line `# events: a b @timer`, then the protocol.
pub fn interpreter_file(text: &str) -> bool {
    let events: Vec<&str> = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("# events:"))
        .map(|events| events.split_whitespace().collect())
        .unwrap_or_default();
    interpreter(text, &events)
}

/// The configuration is legal: a running machine's active states have active parents, every
/// active compound state has exactly one active child, every active parallel state all its
/// regions, no history pseudo-state is active, and at least one atomic state is active; a
/// finished machine has left every state.
pub fn check_configuration(interpreter: &Interpreter, machine: &Machine) {
    let active: Vec<StateId> = interpreter.configuration().collect();
    let is_active = |state: StateId| state == StateId::ROOT || active.contains(&state);
    let name = |state: StateId| machine.state(state).id.to_string();
    if !interpreter.is_running() {
        if interpreter.outcome().is_some() {
            let left: Vec<String> = active
                .iter()
                .copied()
                .filter(|state| *state != StateId::ROOT)
                .map(name)
                .collect();
            assert!(
                left.is_empty(),
                "finished with states still active: {left:?}"
            );
        }
        return;
    }
    let mut atomic = 0;
    // The root is never in the configuration, but is always "active": it must have one child.
    let root = std::iter::once(StateId::ROOT);
    for state in root.chain(
        active
            .iter()
            .copied()
            .filter(|state| *state != StateId::ROOT),
    ) {
        let node = machine.state(state);
        if let Some(parent) = node.parent {
            assert!(
                is_active(parent),
                "`{}` is active but its parent `{}` is not",
                node.id,
                name(parent)
            );
        }
        let regions = node
            .children
            .iter()
            .copied()
            .filter(|child| !machine.state(*child).is_history());
        match node.kind {
            StateKind::History { .. } => panic!("history state `{}` is active", node.id),
            StateKind::Atomic | StateKind::Final => atomic += 1,
            StateKind::Compound | StateKind::Root => {
                let children: Vec<String> = regions.filter(|c| is_active(*c)).map(name).collect();
                assert!(
                    children.len() == 1,
                    "compound `{}` has active children {children:?}, not exactly one",
                    node.id
                );
            }
            StateKind::Parallel => {
                let inactive: Vec<String> = regions.filter(|c| !is_active(*c)).map(name).collect();
                assert!(
                    inactive.is_empty(),
                    "parallel `{}` is active but its regions {inactive:?} are not",
                    node.id
                );
            }
        }
    }
    assert!(atomic > 0, "a running machine with no active atomic state");
}
