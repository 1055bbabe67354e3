//! Runs scenario files against the real protocol: virtual time, mocks, real effects otherwise,
//! and a report of what was expected and what was seen, with the event trace leading there.

use crate::runtime::run::admission::{EventOutcome, EventReport};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::expectation::{SinceLast, StartedEffect};
use super::scratch::Scratch;
use crate::base::diagnostic::render_all;
use crate::base::event::{Event, Origin};
use crate::base::model::Duration;
use crate::base::model::scenario::{Scenario, ScenarioFile, SendOutcome, Step};
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::Loaded;
use crate::pipeline::load::schema::DocumentKind;
use crate::runtime::run::Interpreter;
use crate::runtime::run::algorithm::Limits;
use crate::runtime::run::driver::{DriverState, InputLineError, Observer, Session};

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub name: String,
    /// Empty when the scenario passed.
    pub failures: Vec<String>,
    /// The events handled and the configuration after each, for failure reports.
    pub trace: Vec<String>,
    /// The scratch directory the scenario ran in, kept because it failed.
    pub directory: Option<PathBuf>,
}

/// What a scenario file produced: its results, or why it could not run.
#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: PathBuf,
    pub results: Vec<ScenarioResult>,
    /// Set when the file or its protocol is invalid: everything in it counts as failed.
    pub error: Option<String>,
    /// States and transitions (by source pointer) of the protocol, and those the scenarios reached.
    pub coverage: Option<Coverage>,
}

/// What the scenarios of one file reached in their protocol.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    pub protocol: String,
    pub states: Vec<String>,
    pub transitions: Vec<String>,
    pub reached_states: BTreeSet<String>,
    pub taken_transitions: BTreeSet<String>,
}

impl Coverage {
    pub fn missed_states(&self) -> Vec<&str> {
        self.states
            .iter()
            .filter(|state| !self.reached_states.contains(*state))
            .map(String::as_str)
            .collect()
    }

    pub fn missed_transitions(&self) -> Vec<&str> {
        self.transitions
            .iter()
            .filter(|transition| !self.taken_transitions.contains(*transition))
            .map(String::as_str)
            .collect()
    }
}

/// Runs every scenario of a file, its effects under the protocol's own permissions.
pub fn run_file(path: &Path) -> FileReport {
    run_file_limited(path, &Capabilities::unrestricted())
}

/// Runs every scenario of a file, its real (unmocked) effects under the grants `run` would
/// give: the protocol's permissions within `limit` (the operator's narrowing), those naming
/// inputs resolved from each scenario's inputs.
pub fn run_file_limited(path: &Path, limit: &Capabilities) -> FileReport {
    run_file_under(path, limit, Limits::default())
}

/// `run_file_limited`, each macrostep under `limits` (`--max-microsteps`, the budgets), in the
/// current working directory.
pub fn run_file_under(path: &Path, limit: &Capabilities, limits: Limits) -> FileReport {
    run_file_with(path, limit, limits, false)
}

/// `run_file_under`, each scenario in a scratch directory of its own, the working directory of
/// its run (see `scratch::Scratch`: the process's working directory changes meanwhile, so
/// nothing else in the process may use relative paths; the `test` command runs nothing else).
pub fn run_file_in_scratch(path: &Path, limit: &Capabilities, limits: Limits) -> FileReport {
    run_file_with(path, limit, limits, true)
}

fn run_file_with(path: &Path, limit: &Capabilities, limits: Limits, scratch: bool) -> FileReport {
    let mut report = FileReport {
        path: path.to_path_buf(),
        results: Vec::new(),
        error: None,
        coverage: None,
    };
    // Absolute, so the protocol is still found from inside a scratch directory.
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let (file, protocol, machine) = match load_scenario_file_limited(&absolute, limit) {
        Ok(loaded) => loaded,
        Err(message) => {
            report.error = Some(message);
            return report;
        }
    };
    let mut coverage = Coverage {
        protocol: file.protocol.clone(),
        states: machine
            .states
            .iter()
            .skip(1)
            .filter(|state| !state.is_history())
            .map(|state| state.id.to_string())
            .collect(),
        transitions: super::coverage::coverable(&machine)
            .map(|transition| transition.pointer.clone())
            .collect(),
        ..Coverage::default()
    };
    let subject = Subject {
        protocol: &protocol,
        limit,
        machine: &machine,
        limits,
    };
    for scenario in &file.scenarios {
        let result = if scratch {
            run_scenario_in_scratch(&subject, scenario, &mut coverage)
        } else if scenario.files.is_empty() {
            run_scenario(&subject, subject.machine.clone(), scenario, &mut coverage)
        } else {
            failed(
                scenario,
                "files: written into a scratch directory, which only `protocol-run test` gives"
                    .to_string(),
            )
        };
        report.results.push(result);
    }
    report.coverage = Some(coverage);
    report
}

/// Whether `path` names a scenario file (`*.scenario.yaml`) rather than a protocol.
pub fn is_scenario_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name.to_string_lossy().ends_with(".scenario.yaml"))
}

/// Loads the scenario file and compiles its protocol.
pub fn load_scenario_file(path: &Path) -> Result<(ScenarioFile, Arc<Machine>), String> {
    load_scenario_file_limited(path, &Capabilities::unrestricted())
        .map(|(file, _, machine)| (file, machine))
}

/// Loads the scenario file and compiles its protocol within `limit`.
fn load_scenario_file_limited(
    path: &Path,
    limit: &Capabilities,
) -> Result<(ScenarioFile, Loaded, Arc<Machine>), String> {
    let text = crate::pipeline::load::read_text(path).map_err(|error| error.to_string())?;
    let (_, value) = crate::pipeline::load::parse_document(
        DocumentKind::Scenario,
        &path.display().to_string(),
        text,
    )
    .map_err(|diagnostics| render_all(&diagnostics))?;
    let file: ScenarioFile = serde_json::from_value(value).map_err(|error| {
        format!(
            "error: {}: the scenario file does not fit the model: {error}",
            path.display()
        )
    })?;
    let protocol_path = path.parent().unwrap_or(Path::new("")).join(&file.protocol);
    let loaded =
        crate::pipeline::load::load_file(&protocol_path).map_err(|error| error.to_string())?;
    let machine = crate::pipeline::compile::compile_limited(&loaded, &Arc::default(), limit)
        .map_err(|diagnostics| render_all(&diagnostics))?;
    Ok((file, loaded, Arc::new(machine)))
}

/// A scenario file's protocol: as loaded, the operator's limit, and compiled within it.
struct Subject<'a> {
    protocol: &'a Loaded,
    limit: &'a Capabilities,
    machine: &'a Arc<Machine>,
    /// Each macrostep's limits.
    limits: Limits,
}

/// What the observer saw since the run started.
#[derive(Default)]
struct Seen {
    logs: Vec<LogRecord>,
    directives: Vec<serde_json::Value>,
    effects: Vec<StartedEffect>,
    trace: Vec<String>,
    reached_states: BTreeSet<String>,
    taken_transitions: BTreeSet<String>,
    input_errors: Vec<String>,
    /// What became of each event sent, in order.
    outcomes: Vec<(String, EventOutcome)>,
}

struct Collector {
    seen: Rc<RefCell<Seen>>,
}

impl Observer for Collector {
    fn log(&mut self, record: &LogRecord, _time: &str) {
        self.seen.borrow_mut().logs.push(record.clone());
    }

    fn directive(&mut self, directive: &Directive) {
        self.seen.borrow_mut().directives.push(directive.to_json());
    }

    fn input_error(&mut self, error: &InputLineError) {
        self.seen
            .borrow_mut()
            .input_errors
            .push(error.message.clone());
    }

    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &Event,
        interpreter: &crate::runtime::run::Interpreter,
        outcome: Option<&EventReport>,
    ) {
        if let Some(report) = outcome {
            self.event_outcome("", report);
        }
        let fields = crate::runtime::run::driver::step_fields(event, interpreter, outcome);
        let time = crate::base::clock::format_rfc3339(unix_milliseconds);
        self.record(&time, "step", fields);
    }

    fn event_outcome(&mut self, _time: &str, report: &EventReport) {
        let outcome = (report.event.to_string(), report.outcome);
        self.seen.borrow_mut().outcomes.push(outcome);
    }

    fn effect_started(&mut self, request: &crate::effects::EffectRequest) {
        self.seen
            .borrow_mut()
            .effects
            .push(StartedEffect::of(request));
    }

    fn state_entered(&mut self, state: &str) {
        self.seen
            .borrow_mut()
            .reached_states
            .insert(state.to_string());
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        let mut seen = self.seen.borrow_mut();
        if let Some(states) = fields["configuration"].as_array() {
            for state in states.iter().filter_map(serde_json::Value::as_str) {
                seen.reached_states.insert(state.to_string());
            }
        }
        match kind {
            "transition" => {
                if let Some(at) = fields["at"].as_str() {
                    seen.taken_transitions.insert(at.to_string());
                }
                // A final state is left as soon as the run ends: count the targets as reached.
                for target in fields["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(serde_json::Value::as_str)
                {
                    seen.reached_states.insert(target.to_string());
                }
            }
            "step" => {
                let clock = time.get(11..23).unwrap_or(time);
                seen.trace.push(format!(
                    "{clock} {} → {}",
                    fields["event"].as_str().unwrap_or("?"),
                    fields["configuration"]
                ));
            }
            _ => {}
        }
    }
}

/// Where a scenario's clock starts unless it says otherwise: a fixed instant, so `now()`,
/// timestamps and the files named after them are the same on every run.
pub const DEFAULT_CLOCK: &str = "2026-01-01T00:00:00.000Z";

/// A result that failed before the run started.
fn failed(scenario: &Scenario, failure: String) -> ScenarioResult {
    ScenarioResult {
        name: scenario.name.clone(),
        failures: vec![failure],
        trace: Vec::new(),
        directory: None,
    }
}

/// Runs the scenario in a fresh scratch directory, its protocol compiled there (relative grants
/// resolve there too); keeps the directory if the scenario fails.
fn run_scenario_in_scratch(
    subject: &Subject,
    scenario: &Scenario,
    coverage: &mut Coverage,
) -> ScenarioResult {
    let scratch = match Scratch::enter(&scenario.files) {
        Ok(scratch) => scratch,
        Err(message) => return failed(scenario, message),
    };
    let mut result = match crate::pipeline::compile::compile_limited(
        subject.protocol,
        &Arc::default(),
        subject.limit,
    ) {
        Ok(machine) => run_scenario(subject, Arc::new(machine), scenario, coverage),
        Err(diagnostics) => failed(scenario, render_all(&diagnostics)),
    };
    result.directory = scratch.leave(!result.failures.is_empty());
    result
}

fn run_scenario(
    subject: &Subject,
    compiled: Arc<Machine>,
    scenario: &Scenario,
    coverage: &mut Coverage,
) -> ScenarioResult {
    let mut result = ScenarioResult {
        name: scenario.name.clone(),
        failures: Vec::new(),
        trace: Vec::new(),
        directory: None,
    };
    let inputs: Vec<(String, serde_json::Value)> = scenario
        .inputs
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let inputs = match compiled.bind_input_values(&inputs) {
        Ok(inputs) => inputs,
        Err(errors) => {
            result
                .failures
                .extend(errors.iter().map(|error| format!("inputs: {error}")));
            return result;
        }
    };
    // The author running `test` is the operator: the grants `run` would resolve from these
    // inputs, by the same rule, before anything runs.
    let machine = match crate::runtime::runs::grants::for_operator(
        subject.protocol,
        subject.limit,
        compiled,
        &inputs,
    ) {
        Ok(machine) => machine,
        Err(diagnostics) => {
            result
                .failures
                .push(format!("grants: {}", render_all(&diagnostics)));
            return result;
        }
    };
    let machine = &machine;
    let mocks = match super::mocks::mocks_of(scenario) {
        Ok(mocks) => mocks,
        Err(error) => {
            result.failures.push(format!("mocks: {error}"));
            return result;
        }
    };
    let runtime = match virtual_time_runtime() {
        Ok(runtime) => runtime,
        Err(message) => {
            result.failures.push(message);
            return result;
        }
    };
    let seen = Rc::new(RefCell::new(Seen::default()));
    let local = tokio::task::LocalSet::new();
    let failures = local.block_on(&runtime, async {
        let start = match &scenario.start {
            None => None,
            Some(start) => match super::start::start_snapshot(machine, start) {
                Ok(snapshot) => Some(snapshot),
                Err(message) => return vec![message],
            },
        };
        let interpreter = match &start {
            None => Interpreter::new(machine.clone(), inputs),
            Some(snapshot) => match Interpreter::restore(machine.clone(), inputs, snapshot) {
                Ok(interpreter) => interpreter,
                Err(error) => return vec![format!("start: {error}")],
            },
        };
        let mut interpreter = interpreter.with_limits(subject.limits);
        let mut observer = Collector { seen: seen.clone() };
        let mut state = DriverState::new();
        let mut session = Session::new(
            &mut interpreter,
            &mut state,
            Arc::new(Mutex::new(mocks)),
            &mut observer,
        );
        let mut failures = Vec::new();
        let clock = scenario.clock.as_deref().unwrap_or(DEFAULT_CLOCK);
        match crate::base::clock::parse_rfc3339(clock) {
            Some(milliseconds) => session.set_wall_clock(milliseconds),
            None => {
                failures.push(format!(
                    "clock: `{clock}` is not a UTC time such as `{DEFAULT_CLOCK}`"
                ));
                return failures;
            }
        }
        let began = match &scenario.start {
            None => session.start(),
            // The states listed are entered (their entry actions run), their ancestors not.
            Some(start) => {
                let mut states: Vec<_> = start
                    .configuration
                    .iter()
                    .filter_map(|state| machine.state_id(state))
                    .collect();
                // In document order, as entering them by one transition would.
                states.sort();
                session.start_in(&states)
            }
        };
        if let Err(error) = began.map_err(|error| error.to_string()) {
            failures.push(format!("start: {error}"));
            return failures;
        }
        // What the start set off (effects of entry actions) happens before the first step.
        if let Err(error) = settle(&mut session).await {
            failures.push(format!("start: {error}"));
            return failures;
        }
        let mut since = (0, 0, 0, 0);
        for (index, step) in scenario.steps.iter().enumerate() {
            let number = index + 1;
            let outcome = match step {
                Step::Send(send) => {
                    let expects_refusal = send.outcome == Some(SendOutcome::Refused)
                        || expects_refusal(scenario.steps.get(index + 1), &send.send);
                    let data_json = send.data.as_ref().unwrap_or(&serde_json::Value::Null);
                    // Refused as an events line would be: not delivered, and the step fails
                    // unless it (or the next step) expects the refusal.
                    match crate::runtime::run::admission::admit_json(machine, &send.send, data_json)
                    {
                        Ok(()) => {
                            let before = seen.borrow().outcomes.len();
                            let data = Value::from_json(data_json);
                            session.send(Event::named(machine, &send.send, data, Origin::External));
                            let settled = settle(&mut session).await;
                            settled.and_then(|()| {
                                let seen = seen.borrow();
                                let told = seen.outcomes[before..]
                                    .iter()
                                    .find(|(event, _)| *event == send.send)
                                    .map(|(_, outcome)| *outcome);
                                expected_outcome(send.outcome, told)
                            })
                        }
                        Err(_) if expects_refusal => {
                            let refused = (send.send.clone(), EventOutcome::Refused);
                            seen.borrow_mut().outcomes.push(refused);
                            Ok(())
                        }
                        Err(refusal) => Err(format!("the event is refused: {refusal}")),
                    }
                }
                Step::After(after) => match Duration::parse(&after.after) {
                    Some(duration) => advance(&mut session, duration.as_std()).await,
                    None => Err(format!(
                        "`{}` is not a duration such as `100ms`",
                        after.after
                    )),
                },
                Step::Expect(expect) => {
                    let seen = seen.borrow();
                    let problems = super::expectation::check(
                        &expect.expect,
                        session.interpreter,
                        SinceLast {
                            logs: &seen.logs[since.0..],
                            directives: &seen.directives[since.1..],
                            effects: &seen.effects[since.2..],
                            outcomes: &seen.outcomes[since.3..],
                        },
                    );
                    since = (
                        seen.logs.len(),
                        seen.directives.len(),
                        seen.effects.len(),
                        seen.outcomes.len(),
                    );
                    if problems.is_empty() {
                        Ok(())
                    } else {
                        Err(problems.join("\n"))
                    }
                }
            };
            if let Err(message) = outcome {
                failures.push(format!("step {number} ({}): {message}", describe(step)));
                break;
            }
        }
        session.finish();
        failures
    });
    let seen = seen.borrow();
    result.failures = failures;
    result.trace = seen.trace.clone();
    coverage
        .reached_states
        .extend(seen.reached_states.iter().cloned());
    coverage
        .taken_transitions
        .extend(seen.taken_transitions.iter().cloned());
    result
}

fn describe(step: &Step) -> String {
    match step {
        Step::Send(send) => format!("send {}", send.send),
        Step::After(after) => format!("after {}", after.after),
        Step::Expect(_) => "expect".into(),
    }
}

/// Runs until nothing more happens without time passing (effects still running are awaited, on
/// the virtual clock).
pub(super) async fn settle(session: &mut Session<'_>) -> Result<(), String> {
    loop {
        session.handle_queued().map_err(|error| error.to_string())?;
        // After the final state too: the effects it left running are awaited.
        if !session.effects_running() {
            return Ok(());
        }
        session.wait(None, None).await;
    }
}

/// Lets `duration` of virtual time pass, handling what falls due, in order.
pub(super) async fn advance(
    session: &mut Session<'_>,
    duration: std::time::Duration,
) -> Result<(), String> {
    session
        .advance(duration)
        .await
        .map_err(|error| error.to_string())?;
    settle(session).await
}

/// Scenario files under the paths given: files as they are, directories searched for
/// `*.scenario.yaml`, in sorted order.
pub fn find_scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut pending = vec![path.clone()];
            while let Some(directory) = pending.pop() {
                let entries = std::fs::read_dir(&directory).map_err(|error| {
                    format!("error: cannot read {}: {error}", directory.display())
                })?;
                for entry in entries.filter_map(Result::ok) {
                    let entry_path = entry.path();
                    let name = entry.file_name().to_string_lossy().to_string();
                    if entry_path.is_dir() {
                        if !name.starts_with('.') && name != "target" && name != "node_modules" {
                            pending.push(entry_path);
                        }
                    } else if is_scenario_file(&entry_path) {
                        files.push(entry_path);
                    }
                }
            }
        } else if path.exists() {
            files.push(path.clone());
        } else {
            return Err(format!(
                "error: cannot read {}: no such file",
                path.display()
            ));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The runtime a scenario (or a probe of `test --generate`) runs on: one thread, its clock
/// paused, so timers fire as the steps advance virtual time.
pub(super) fn virtual_time_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))
}

/// Whether the outcome the engine told the sender (`told`) is the one the `send` expects.
fn expected_outcome(
    expected: Option<SendOutcome>,
    told: Option<EventOutcome>,
) -> Result<(), String> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let expected = match expected {
        SendOutcome::Taken => EventOutcome::Taken,
        SendOutcome::Deferred => EventOutcome::Deferred,
        SendOutcome::Discarded => EventOutcome::Discarded,
        SendOutcome::Refused => EventOutcome::Refused,
    };
    match told {
        Some(told) if told == expected => Ok(()),
        Some(told) => Err(format!(
            "outcome: expected the event {}, it was {}",
            expected.name(),
            told.name()
        )),
        None => Err(format!(
            "outcome: expected the event {}, the engine told nothing of it",
            expected.name()
        )),
    }
}

/// Whether `next` is an `expect` of `event`'s refusal.
pub(super) fn expects_refusal(next: Option<&Step>, event: &str) -> bool {
    matches!(next, Some(Step::Expect(expect)) if expect.expect.refused.as_deref() == Some(event))
}
