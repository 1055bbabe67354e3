//! One in-memory run of a protocol for the generator and the explorer: steps in, what happened out.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

use super::runner::{DEFAULT_CLOCK, advance, settle};
use crate::base::event::{Event, Origin};
use crate::base::model::Duration;
use crate::base::model::scenario::Step;
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::effects::mock::Mocks;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::Loaded;
use crate::runtime::run::Interpreter;
use crate::runtime::run::algorithm::Limits;
use crate::runtime::run::driver::{DriverState, InputLineError, Observer, Session};

/// What a run did: the transitions it took, where it ended, and what went wrong.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// Pointers of the transitions taken, in order (repeats included).
    pub taken: Vec<String>,
    pub configuration: Vec<String>,
    /// Every state entered on the way, for the reasons of the unreached.
    pub entered: Vec<String>,
    pub context: serde_json::Value,
    /// The final state (none when an unhandled error failed the run) and exit code, when the
    /// run finished.
    pub finished: Option<(Option<String>, u8)>,
    /// The states an unhandled `error.execution` failed the run in (`errors: strict`).
    pub failed_in: Vec<String>,
    /// Milliseconds until the next pending timer after the last step.
    pub next_timer: Option<u64>,
    /// Milliseconds until each pending timer, earliest first: two runs in the same
    /// configuration and context with other timers pending go on differently (the deadline
    /// after a reminder of the same state).
    pub timers: Vec<u64>,
    /// Error events no transition handled (the engine's `unhandled_error` warning).
    pub unhandled_errors: Vec<String>,
    /// Effects started whose ending (outcome, cancellation) was never recorded, by id.
    pub lost_effects: Vec<String>,
    /// Why the run stopped early: a step refused, a limit of the engine hit.
    pub failure: Option<String>,
    /// How many steps ran before `failure`.
    pub steps_run: usize,
}

/// Inputs and mocks a probe runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Setup {
    pub inputs: Vec<(String, String)>,
    pub mocks: Vec<(String, String)>,
}

impl Setup {
    pub fn inputs_json(&self) -> IndexMap<String, serde_json::Value> {
        self.inputs
            .iter()
            .map(|(name, value)| {
                let parsed = serde_json::from_str(value)
                    .unwrap_or_else(|_| serde_json::Value::String(value.clone()));
                (name.clone(), parsed)
            })
            .collect()
    }

    pub fn mocks_map(&self) -> IndexMap<String, crate::base::model::scenario::MockScript> {
        self.mocks
            .iter()
            .map(|(id, script)| (id.clone(), script.clone().into()))
            .collect()
    }
}

#[derive(Default)]
struct Watched {
    taken: Vec<String>,
    entered: Vec<String>,
    /// Invocation and id of each effect started, and the invocations whose ending was recorded.
    started: Vec<(u64, String)>,
    ended: Vec<u64>,
    unhandled_errors: Vec<String>,
}

struct Watcher {
    watched: Rc<RefCell<Watched>>,
}

impl Observer for Watcher {
    fn log(&mut self, record: &LogRecord, _time: &str) {
        if record.tags.iter().any(|tag| &**tag == "unhandled_error") {
            self.watched
                .borrow_mut()
                .unhandled_errors
                .push(record.message.to_string());
        }
    }

    fn directive(&mut self, _directive: &Directive) {}

    fn record(&mut self, _time: &str, kind: &str, fields: serde_json::Value) {
        let invocation = fields["invocation"].as_u64().unwrap_or_default();
        let mut watched = self.watched.borrow_mut();
        match kind {
            "effect_started" => {
                let id = fields["id"].as_str().unwrap_or("?").to_string();
                watched.started.push((invocation, id));
            }
            "effect" => watched.ended.push(invocation),
            _ => {}
        }
    }

    fn state_entered(&mut self, state: &str) {
        let mut watched = self.watched.borrow_mut();
        if !watched.entered.iter().any(|entered| entered == state) {
            watched.entered.push(state.to_string());
        }
    }

    fn input_error(&mut self, _error: &InputLineError) {}

    fn step(
        &mut self,
        _unix_milliseconds: u64,
        _event: &Event,
        _interpreter: &Interpreter,
        _outcome: Option<&crate::runtime::run::admission::EventReport>,
    ) {
    }

    fn transition(
        &mut self,
        _now: &dyn Fn() -> u64,
        machine: &Machine,
        transition: crate::pipeline::compile::machine::TransitionId,
    ) {
        let pointer = machine.transition(transition).pointer.clone();
        self.watched.borrow_mut().taken.push(pointer);
    }
}

/// Input values by name, as a setup gives them.
type Inputs = Vec<(String, String)>;

/// A protocol as loaded and compiled, with its grants resolved per set of inputs as a
/// scenario's would be (kept: the search runs many probes under one setup).
pub struct Target {
    pub loaded: Loaded,
    pub machine: Arc<Machine>,
    resolved: RefCell<HashMap<Inputs, Arc<Machine>>>,
}

impl Target {
    /// Loads and compiles `path`; the error is rendered for the author.
    pub fn load(path: &Path) -> Result<Target, String> {
        let loaded = crate::pipeline::load::load_file(path).map_err(|error| error.to_string())?;
        let machine = crate::pipeline::compile::compile(&loaded)
            .map_err(|diagnostics| crate::base::diagnostic::render_all(&diagnostics))?;
        Ok(Target {
            loaded,
            machine: Arc::new(machine),
            resolved: RefCell::default(),
        })
    }

    /// The machine with grants resolved from the inputs, and the bound inputs.
    fn bind(&self, setup: &Setup) -> Result<(Arc<Machine>, Vec<Value>), String> {
        let inputs: Vec<(String, serde_json::Value)> = setup.inputs_json().into_iter().collect();
        let inputs = self.machine.bind_input_values(&inputs).map_err(|errors| {
            let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!("inputs: {}", shown.join("; "))
        })?;
        if let Some(machine) = self.resolved.borrow().get(&setup.inputs) {
            return Ok((machine.clone(), inputs));
        }
        // Generated tests run as the author would run the protocol (`run`'s rule).
        let machine = crate::runtime::runs::grants::for_operator(
            &self.loaded,
            &Capabilities::unrestricted(),
            self.machine.clone(),
            &inputs,
        )
        .map_err(|diagnostics| {
            format!(
                "grants: {}",
                crate::base::diagnostic::render_all(&diagnostics)
            )
        })?;
        self.resolved
            .borrow_mut()
            .insert(setup.inputs.clone(), machine.clone());
        Ok((machine, inputs))
    }
}

/// Runs `steps` on a fresh instance of the target under `setup`, on virtual time.
pub fn probe(target: &Target, setup: &Setup, steps: &[Step], limits: Limits) -> Probe {
    let mut result = Probe::default();
    let (machine, inputs) = match target.bind(setup) {
        Ok(bound) => bound,
        Err(failure) => {
            result.failure = Some(failure);
            return result;
        }
    };
    let machine = &machine;
    let mock_arguments: Vec<String> = setup
        .mocks
        .iter()
        .map(|(id, outcome)| format!("{id}={outcome}"))
        .collect();
    let mocks = match Mocks::parse(&mock_arguments) {
        Ok(mocks) => mocks,
        Err(error) => {
            result.failure = Some(format!("mocks: {error}"));
            return result;
        }
    };
    let runtime = match super::runner::virtual_time_runtime() {
        Ok(runtime) => runtime,
        Err(message) => {
            result.failure = Some(message);
            return result;
        }
    };
    let watched = Rc::new(RefCell::new(Watched::default()));
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut interpreter = Interpreter::new(machine.clone(), inputs).with_limits(limits);
        let mut observer = Watcher {
            watched: watched.clone(),
        };
        let mut state = DriverState::new();
        let mut session = Session::new(
            &mut interpreter,
            &mut state,
            Arc::new(Mutex::new(mocks)),
            &mut observer,
        );
        if let Some(milliseconds) = crate::base::clock::parse_rfc3339(DEFAULT_CLOCK) {
            session.set_wall_clock(milliseconds);
        }
        let started = match session.start() {
            Ok(()) => settle(&mut session).await,
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = started {
            result.failure = Some(format!("start: {error}"));
        } else {
            for step in steps {
                let outcome = run_step(&mut session, machine, step).await;
                if let Err(message) = outcome {
                    result.failure = Some(message);
                    break;
                }
                result.steps_run += 1;
            }
        }
        let interpreter = &*session.interpreter;
        result.configuration = interpreter
            .active_leaves()
            .into_iter()
            .map(String::from)
            .collect();
        result.context = interpreter.context_json();
        result.finished = interpreter.outcome().map(|outcome| {
            let state = outcome.state_name(interpreter.machine());
            (state.map(|state| state.to_string()), outcome.exit_code)
        });
        result.failed_in = interpreter
            .outcome()
            .and_then(|outcome| outcome.failure.as_ref())
            .map(|failure| {
                failure
                    .states
                    .iter()
                    .map(|state| state.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let now = tokio::time::Instant::now();
        let left = |deadline: tokio::time::Instant| {
            let left = deadline.saturating_duration_since(now);
            u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
        };
        result.timers = session.timer_deadlines().map(left).collect();
        result.next_timer = result.timers.first().copied();
        // Effects still running after the last step are not lost: the run was left there.
        let settled = !session.effects_running();
        session.finish();
        if settled {
            let watched = watched.borrow();
            result.lost_effects = watched
                .started
                .iter()
                .filter(|(invocation, _)| !watched.ended.contains(invocation))
                .map(|(_, id)| id.clone())
                .collect();
        }
    });
    let watched = watched.borrow();
    result.taken = watched.taken.clone();
    result.entered = watched.entered.clone();
    result.unhandled_errors = watched.unhandled_errors.clone();
    result
}

async fn run_step(session: &mut Session<'_>, machine: &Machine, step: &Step) -> Result<(), String> {
    match step {
        Step::Send(send) => {
            let data_json = send.data.as_ref().unwrap_or(&serde_json::Value::Null);
            crate::runtime::run::admission::admit_json(machine, &send.send, data_json).map_err(
                |refusal| format!("send {}: the event is refused: {refusal}", send.send),
            )?;
            let data = Value::from_json(data_json);
            session.send(Event::named(machine, &send.send, data, Origin::External));
            settle(session)
                .await
                .map_err(|error| format!("send {}: {error}", send.send))
        }
        Step::After(after) => match Duration::parse(&after.after) {
            Some(duration) => advance(session, duration.as_std())
                .await
                .map_err(|error| format!("after {}: {error}", after.after)),
            None => Err(format!("`{}` is not a duration", after.after)),
        },
        Step::Expect(_) => Ok(()),
    }
}
