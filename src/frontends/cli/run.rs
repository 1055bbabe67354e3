//! `protocol-run run FILE.yaml`: bind inputs, drive the machine, exit with its final state's code.

use std::path::PathBuf;

use clap::Args;
use tracing_subscriber::layer::SubscriberExt;

use super::inputs_file::SuppliedInputs;
use super::{LogFormatArgument, exit_code};
use crate::base::durable::TimerPolicy;
use crate::effects::mock::Mocks;
use crate::pipeline::compile::inputs::{InputError, split_assignment};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::runtime::output::{LogFormat, LogLayer};
use crate::runtime::run::admission::{EventOutcome, EventReport, discarded_reason};
use crate::runtime::run::driver::{
    DriveOptions, EventSource, Observer, TimeMode, TracingObserver, drive_durable,
};
use crate::runtime::runs::start::{
    self, Place, Prepared, Refusal, Resumption, Resupplied, StoreCheckpoint,
};
use crate::runtime::telemetry::RunLog;
use crate::store::{SqliteStore, Store};

#[derive(Debug, Args)]
pub struct RunArguments {
    /// The protocol file.
    file: PathBuf,
    /// An input value; repeat for several. A bare KEY reads the variable KEY from the
    /// environment. With --resume, only the run's secret inputs, which are never stored.
    #[arg(long = "input", short = 'i', value_name = "KEY=VALUE")]
    inputs: Vec<String>,
    /// Input values from a YAML or JSON mapping of input name to value; an --input replaces
    /// the file's entry of the same name. With --resume, only secret inputs.
    #[arg(long = "inputs", value_name = "FILE")]
    inputs_file: Option<PathBuf>,
    /// Continue the latest unfinished run of this protocol instead of starting a new one.
    #[arg(long)]
    resume: bool,
    /// The new run's id (letters, digits, `-`, `_`, `.`; at most 64), instead of a timestamp;
    /// an id already used is refused.
    #[arg(long, value_name = "ID", conflicts_with = "resume")]
    run_id: Option<String>,
    #[command(flatten)]
    options: RunOptions,
}

/// `protocol-run resume RUN_ID`: continue a run from its last committed step.
#[derive(Debug, Args)]
pub struct ResumeArguments {
    #[command(flatten)]
    run: super::run_selection::RunSelection,
    /// A secret input of the run, supplied again (secret inputs are never stored); repeat for
    /// several.
    #[arg(long = "input", short = 'i', value_name = "KEY=VALUE")]
    secrets: Vec<String>,
    /// The run's secret inputs from a YAML or JSON mapping of input name to value; an
    /// --input replaces the file's entry of the same name.
    #[arg(long = "inputs", value_name = "FILE")]
    secrets_file: Option<PathBuf>,
    #[command(flatten)]
    options: RunOptions,
}

/// What a new run and a resumed run share.
#[derive(Debug, Args)]
pub struct RunOptions {
    /// External events as JSON lines `{"event": "name", "data": {...}}`, from a file or `-` (stdin).
    #[arg(long, value_name = "FILE|-")]
    events: Option<String>,
    /// How log lines are printed on stderr.
    #[arg(long, value_enum, default_value = "human")]
    log_format: LogFormatArgument,
    /// Let delays and timers elapse instantly, in order (deterministic runs and tests).
    #[arg(long)]
    virtual_time: bool,
    #[command(flatten)]
    state: super::run_selection::StateDirectory,
    /// How many runs' telemetry to keep (a run a process still drives is never pruned).
    #[arg(long, default_value_t = crate::runtime::telemetry::DEFAULT_RUNS_KEPT, value_name = "N")]
    keep_runs: usize,
    /// Replace an effectful action's outcome: `ID=timeout`, `ID=error:MESSAGE`, `ID=exit:N`,
    /// `ID=ok:STDOUT`, or a sequence such as `ID=timeout,timeout,ok:done`.
    #[arg(long = "mock", value_name = "ID=OUTCOME")]
    mocks: Vec<String>,
    #[command(flatten)]
    limits: super::limits::LimitOptions,
    /// Exit with 70 when an effect that was still running at the final state failed (by
    /// default that is a warning, `#effect_failed_after_finish`, and the state's exit code).
    #[arg(long)]
    strict_effects: bool,
    /// On resume: how the run's pending timers are re-armed.
    #[arg(long, value_enum, default_value = "deadline")]
    timers: TimerPolicy,
    /// On resume: continue although the protocol file changed since the run started, as long
    /// as every state and variable the run recorded still exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    narrowing: super::narrowing::Narrowing,
    /// The longest event line read; a longer one is reported and skipped.
    #[arg(long, default_value_t = crate::runtime::run::driver::MAX_EVENT_LINE_BYTES, value_name = "BYTES")]
    max_event_bytes: usize,
}

/// Runs a protocol; every phase moves the run's lifecycle, and a move the lifecycle refuses is
/// an internal error (exit 70) rather than a silently wrong state.
pub fn run(arguments: RunArguments) -> u8 {
    let given = GivenInputs {
        assignments: arguments.inputs.clone(),
        file: arguments.inputs_file.clone(),
    };
    let start = if arguments.resume {
        Start::Latest(arguments.file.clone(), given)
    } else {
        Start::New {
            file: arguments.file.clone(),
            inputs: given,
            run_id: arguments.run_id.clone(),
        }
    };
    run_with_lifecycle(start, &arguments.options)
}

/// Continues a run by id.
pub fn resume(arguments: ResumeArguments) -> u8 {
    let given = GivenInputs {
        assignments: arguments.secrets.clone(),
        file: arguments.secrets_file.clone(),
    };
    // No id: the latest run that can still be resumed.
    let run_id = match super::run_selection::choose_run(
        &arguments.options.state.path,
        &arguments.run,
        super::run_selection::Latest::Unfinished,
        true,
    ) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    run_with_lifecycle(Start::Run(run_id, given), &arguments.options)
}

/// `--input KEY=VALUE`s and `--inputs FILE`, as given.
struct GivenInputs {
    assignments: Vec<String>,
    file: Option<PathBuf>,
}

/// Where a run comes from.
enum Start {
    New {
        file: PathBuf,
        inputs: GivenInputs,
        /// Chosen with `--run-id`.
        run_id: Option<String>,
    },
    /// The latest unfinished run of this protocol file, with its secret inputs supplied again.
    Latest(PathBuf, GivenInputs),
    /// A run by id, with its secret inputs supplied again.
    Run(String, GivenInputs),
}

fn run_with_lifecycle(start: Start, options: &RunOptions) -> u8 {
    let mut lifecycle = RunLifecycle::default();
    match run_phases(start, options, &mut lifecycle) {
        Ok(code) => code,
        Err(code) => {
            if lifecycle.state_name() != "failed"
                && lifecycle.advance(LifecycleEvent::Failed).is_err()
            {
                return exit_code::INTERNAL;
            }
            code
        }
    }
}

/// Applies a lifecycle move (`start::advance`), or exits 70 when the lifecycle refuses it.
fn advance(lifecycle: &mut RunLifecycle, event: LifecycleEvent) -> Result<(), u8> {
    start::advance(lifecycle, event).map_err(Refusal::report)
}

fn run_phases(start: Start, options: &RunOptions, lifecycle: &mut RunLifecycle) -> Result<u8, u8> {
    let mut store = SqliteStore::open(&options.state.path).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
    let limits = options.limits.limits();
    let prepared = match start {
        Start::New {
            file,
            inputs,
            run_id,
        } => {
            let run_id = super::run_id::new_run_id(run_id.as_deref(), &store, &options.state.path)?;
            let place = Place {
                store: &mut store,
                state_path: &options.state.path,
                operator: &options.narrowing,
                lifecycle,
            };
            start::new_run(place, &file, &run_id, &mut |machine| {
                bind_inputs(machine, &inputs)
            })
        }
        Start::Latest(file, secrets) => {
            let path = start::canonical(&file);
            let Some(run) = store.latest_unfinished_run(&path).map_err(store_error)? else {
                eprintln!("error: no unfinished run of {path} in {}", store.location());
                return Err(exit_code::NO_INPUT_FILE);
            };
            resume_run(&run.id, &secrets, options, &mut store, lifecycle)
        }
        Start::Run(run_id, secrets) => {
            resume_run(&run_id, &secrets, options, &mut store, lifecycle)
        }
    }
    .map_err(Refusal::report)?;
    let Prepared {
        machine,
        interpreter,
        run_id,
        resume,
        lock: _lock,
        grants,
    } = prepared;
    let mut interpreter = interpreter.with_limits(limits);
    let source = event_source(options.events.as_deref())?;
    let mocks = parse_mocks(&machine, &options.mocks)?;
    advance(lifecycle, LifecycleEvent::Validated)?;
    let format = match options.log_format {
        LogFormatArgument::Human => LogFormat::Human,
        LogFormatArgument::Json => LogFormat::Json,
    };
    let subscriber = tracing_subscriber::registry().with(LogLayer { format });
    let _guard = tracing::subscriber::set_default(subscriber);
    let runs = crate::runtime::telemetry::runs_directory(&options.state.path);
    let telemetry = match RunLog::create(&runs, &run_id, options.keep_runs) {
        Ok(log) => Some(log),
        Err(error) => {
            eprintln!(
                "warning: no telemetry for this run: cannot write {}: {error}",
                runs.display()
            );
            None
        }
    };
    let mut observer = RunObserver {
        printer: TracingObserver {
            run_id: run_id.clone(),
        },
        telemetry,
    };
    let started = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
    for record in &grants {
        observer.log(record, &started);
    }
    let time_mode = if options.virtual_time {
        TimeMode::Virtual
    } else {
        TimeMode::Real
    };
    let drive_options = DriveOptions {
        time_mode,
        mocks,
        max_event_bytes: options.max_event_bytes,
    };
    let mut checkpoint = StoreCheckpoint {
        store: &mut store,
        run_id: run_id.clone(),
    };
    let report = drive_durable(
        &mut interpreter,
        source,
        drive_options,
        &mut observer,
        Some(&mut checkpoint),
        resume.as_ref(),
    )
    .map_err(|error| {
        eprintln!("error: {}", crate::base::secrets::mask(&error.to_string()));
        match error {
            // The store could not take a step (a full disk, a broken database): an I/O
            // failure, not a fault of the protocol.
            crate::runtime::run::algorithm::RunError::Checkpoint { .. } => exit_code::IO,
            // A step past its limits stops as a looping protocol does.
            crate::runtime::run::algorithm::RunError::MicrostepLimit { .. }
            | crate::runtime::run::algorithm::RunError::StepTime { .. } => exit_code::INVALID,
            // The driver reports a step interrupted as a run stopped by a signal.
            crate::runtime::run::algorithm::RunError::Interrupted { .. } => exit_code::UNFINISHED,
        }
    })?;
    let now = crate::base::clock::unix_milliseconds_now();
    match report
        .outcome
        .as_ref()
        .filter(|_| !report.stopped_by_signal)
    {
        Some(outcome) => {
            advance(lifecycle, LifecycleEvent::Finished)?;
            let state = &machine.state(outcome.final_state).id;
            // The commit that left no effect running finished the run in the store.
            let mut finished = serde_json::json!({"finished": {
                "state": &**state,
                "exit_code": outcome.exit_code,
                "output": outcome.output.to_json(),
                "effects": &report.effects,
            }});
            // Deferred events the end of the run discarded, each said once more here.
            if !report.discarded.is_empty() {
                finished["finished"]["discarded"] = report.discarded.clone().into();
            }
            println!("{}", crate::base::secrets::mask_json(&finished));
            if options.strict_effects && report.an_effect_failed_after_finish() {
                eprintln!(
                    "error: an effect failed after the run finished (--strict-effects); see the \
                     `effects` of the finished line"
                );
                return Ok(exit_code::INTERNAL);
            }
            Ok(outcome.exit_code)
        }
        None => {
            advance(lifecycle, LifecycleEvent::Abort)?;
            if let Err(error) = store.mark_stopped(&run_id, now) {
                eprintln!("warning: {error}");
            }
            if report.stopped_by_signal {
                eprintln!(
                    "run {run_id} stopped by a signal in {}; its last step is committed: \
                     `protocol-run resume {run_id}` continues it",
                    report.active_states.join(", ")
                );
            } else {
                eprintln!(
                    "run stopped unfinished in {}: no events left and no timer pending \
                     (`protocol-run resume {run_id}` continues it)",
                    report.active_states.join(", ")
                );
            }
            Ok(exit_code::UNFINISHED)
        }
    }
}

/// Resumes `run_id` with its secret inputs supplied again from `secret_inputs`.
fn resume_run(
    run_id: &str,
    secret_inputs: &GivenInputs,
    options: &RunOptions,
    store: &mut SqliteStore,
    lifecycle: &mut RunLifecycle,
) -> Result<Prepared, Refusal> {
    let place = Place {
        store,
        state_path: &options.state.path,
        operator: &options.narrowing,
        lifecycle,
    };
    let resumption = Resumption {
        run_id,
        force: options.force,
        timers: options.timers,
        resupply: &mut |machine, record| resupply(machine, record, secret_inputs),
    };
    start::restored_run(place, resumption)
}

/// The run's recorded inputs bound again, with its secret inputs from `--input` and `--inputs`
/// (and those secrets by name); a problem is reported here, located in the inputs file.
fn resupply(
    machine: &Machine,
    record: &crate::store::RunRecord,
    secret_inputs: &GivenInputs,
) -> Result<Resupplied, Refusal> {
    let run_id = &record.summary.id;
    let assignments = secret_inputs
        .assignments
        .iter()
        .map(|text| split_assignment(text))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| Refusal::error(error, exit_code::USAGE))?;
    let supplied = SuppliedInputs::gather(machine, secret_inputs.file.as_deref(), assignments)
        .map_err(Refusal::reported)?;
    let secrets = supplied.texts();
    let inputs = machine
        .bind_recorded_inputs(&record.inputs, &secrets)
        .map_err(|errors| {
            for error in &errors {
                match error {
                    InputError::NotSecret { name } if supplied.is_from_file(name) => {
                        let diagnostic = crate::base::diagnostic::Diagnostic::error(format!(
                            "input `{name}`: a resumed run keeps the inputs it started with; \
                             only its secret inputs are supplied again"
                        ))
                        .with_help(format!(
                            "remove `{name}` from this file: give a resume a file of the \
                             secret inputs only"
                        ));
                        let part = crate::pipeline::load::source::Part::Key;
                        match supplied.located(name, None, part, diagnostic) {
                            Some(located) => eprintln!("{located}"),
                            None => eprintln!("error: run `{run_id}`: {error}"),
                        }
                    }
                    _ => eprintln!("error: run `{run_id}`: {error}"),
                }
            }
            // Secrets not supplied again is the command line's fault, not the protocol's.
            let resupply = errors.iter().all(|error| {
                matches!(
                    error,
                    InputError::SecretNotStored { .. } | InputError::NotSecret { .. }
                )
            });
            Refusal::reported(if resupply {
                exit_code::USAGE
            } else {
                exit_code::INVALID
            })
        })?;
    Ok(Resupplied { inputs, secrets })
}

fn store_error(error: crate::store::StoreError) -> u8 {
    eprintln!("error: {error}");
    exit_code::IO
}

/// Checks every `--input` and the `--inputs` file's entries, reporting all problems at once.
fn bind_inputs(
    machine: &Machine,
    given: &GivenInputs,
) -> Result<Vec<crate::base::value::Value>, Refusal> {
    let mut assignments = Vec::new();
    let mut problems = Vec::new();
    for text in &given.assignments {
        match split_assignment(text) {
            Ok(pair) => assignments.push(pair),
            Err(error) => problems.push(error),
        }
    }
    let supplied = SuppliedInputs::gather(machine, given.file.as_deref(), assignments)
        .map_err(Refusal::reported)?;
    match machine.bind_input_values(&supplied.values) {
        Ok(inputs) if problems.is_empty() => return Ok(inputs),
        Ok(_) => {}
        Err(errors) => problems.extend(errors),
    }
    Err(Refusal::rendered(
        supplied.report(&problems),
        exit_code::INVALID,
    ))
}

fn event_source(events: Option<&str>) -> Result<EventSource, u8> {
    match events {
        None => Ok(EventSource::None),
        Some("-") => Ok(EventSource::Stdin),
        // Read line by line as the run goes, each line bounded as on stdin.
        Some(path) => std::fs::File::open(path)
            .and_then(|file| {
                if file.metadata()?.is_dir() {
                    return Err(std::io::Error::other("it is a directory"));
                }
                Ok(file)
            })
            .map(EventSource::File)
            .map_err(|error| {
                eprintln!("error: cannot read events file {path}: {error}");
                match error.kind() {
                    std::io::ErrorKind::NotFound => exit_code::NO_INPUT_FILE,
                    _ => exit_code::IO,
                }
            }),
    }
}

/// Parses `--mock` arguments; each must name an action id of the protocol.
fn parse_mocks(
    machine: &crate::pipeline::compile::machine::Machine,
    texts: &[String],
) -> Result<Mocks, u8> {
    let mocks = Mocks::parse(texts).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::USAGE
    })?;
    let mut unknown = false;
    for id in mocks.ids() {
        // A map's item `check[3]` is mocked under the map's id.
        let named = crate::effects::mock::map_of_item(id).unwrap_or(id);
        if machine.is_child_map_item(id) {
            continue;
        }
        if !machine.action_ids.iter().any(|known| known == named) {
            let hint = crate::base::diagnostic::did_you_mean(
                named,
                machine.action_ids.iter().map(String::as_str),
            )
            .map(|hint| format!("; {hint}"))
            .unwrap_or_else(|| format!("; its action ids are: {}", machine.action_ids.join(", ")));
            eprintln!(
                "error: --mock names `{id}`, which is not an action id of this protocol{hint}"
            );
            unknown = true;
        }
    }
    if unknown {
        Err(exit_code::USAGE)
    } else {
        Ok(mocks)
    }
}

/// Prints logs and directives, and writes every entry to the run's telemetry.
struct RunObserver {
    printer: TracingObserver,
    telemetry: Option<RunLog>,
}

impl RunObserver {
    fn write(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        if let Some(log) = &mut self.telemetry
            && let Err(error) = log.record(time, kind, fields)
        {
            eprintln!(
                "warning: telemetry stopped: cannot write {}: {error}",
                log.path().display()
            );
            self.telemetry = None;
        }
    }
}

impl Observer for RunObserver {
    fn log(&mut self, record: &crate::pipeline::actions::LogRecord, time: &str) {
        self.printer.log(record, time);
        let fields: serde_json::Map<String, serde_json::Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
        let level = format!("{:?}", record.level).to_lowercase();
        self.write(time, "log", serde_json::json!({"level": level, "message": record.message, "tags": tags, "fields": fields}));
    }

    fn directive(&mut self, directive: &crate::pipeline::actions::Directive) {
        self.printer.directive(directive);
        let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
        self.write(&time, "directive", directive.to_json());
    }

    fn input_error(&mut self, error: &crate::runtime::run::driver::InputLineError) {
        self.printer.input_error(error);
        // An agent reads stdout: every events line gets its outcome there, a refusal too.
        let line = serde_json::json!({
            "input_line": error.line,
            "event": error.event,
            "outcome": "refused",
            "reason": crate::base::secrets::mask(&error.message),
        });
        println!("{line}");
    }

    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &crate::base::event::Event,
        interpreter: &crate::runtime::run::Interpreter,
        outcome: Option<&EventReport>,
    ) {
        if let Some(report) = outcome {
            // Spelled out for a reader: the states the event met, and what they take.
            let mut report = report.clone();
            if report.outcome == EventOutcome::Discarded && interpreter.is_running() {
                let states = interpreter.active_leaves();
                let machine = interpreter.machine();
                let reason = discarded_reason(machine, &event.name, &states);
                report.reason = Some(reason.into());
            }
            tell_events_line(&report);
        }
        let fields = crate::runtime::run::driver::step_fields(event, interpreter, outcome);
        let time = crate::base::clock::format_rfc3339(unix_milliseconds);
        self.write(&time, "step", fields);
    }

    fn awaited(
        &mut self,
        line: usize,
        awaited: &crate::runtime::run::input::Await,
        end: crate::runtime::run::awaiting::AwaitEnd,
    ) {
        let mut report = serde_json::json!({
            "input_line": line,
            "await": awaited.state,
            "outcome": end.name(),
        });
        if end == crate::runtime::run::awaiting::AwaitEnd::TimedOut {
            report["timeout_ms"] = (awaited.timeout.as_millis() as u64).into();
            eprintln!(
                "warning: events line {line}: `{}` was not reached within its timeout; the events go on",
                crate::base::text::escape_controls(&awaited.state)
            );
        }
        println!("{report}");
        let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
        self.write(&time, "await", report);
    }

    fn event_outcome(&mut self, time: &str, report: &EventReport) {
        tell_events_line(report);
        self.write(time, "event", report.to_json());
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        self.write(time, kind, fields);
    }
}

/// Tells an events line's sender what became of its event: one JSON line on stdout (an agent
/// reads stdout), and a warning on stderr when it was discarded or refused. Events that came
/// from no line (a `send`, a child's) are in the telemetry only.
fn tell_events_line(report: &EventReport) {
    let Some(line_number) = report.ticket else {
        return;
    };
    if matches!(
        report.outcome,
        EventOutcome::Discarded | EventOutcome::Refused
    ) {
        eprintln!(
            "warning: events line {line_number}: `{}` {}: {}",
            crate::base::text::escape_controls(&report.event),
            report.outcome.name(),
            crate::base::text::escape_controls(&crate::base::secrets::mask(
                report.reason.as_deref().unwrap_or_default()
            ))
        );
    }
    let mut line = serde_json::json!({"input_line": line_number});
    if let (Some(object), serde_json::Value::Object(mut fields)) =
        (line.as_object_mut(), report.to_json())
    {
        fields.remove("ticket");
        object.extend(fields);
    }
    println!("{}", crate::base::secrets::mask_json(&line));
}
