//! `protocol-run run FILE.yaml`: bind inputs, drive the machine, exit with its final state's code.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tracing_subscriber::layer::SubscriberExt;

use super::validate::load_error_code;
use super::{LogFormatArgument, exit_code};
use crate::compile::inputs::split_assignment;
use crate::diagnostic::render_all;
use crate::effects::mock::Mocks;
use crate::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::output::{LogFormat, LogLayer};
use crate::run::Interpreter;
use crate::run::algorithm::Limits;
use crate::run::driver::{DriveOptions, EventSource, Observer, TimeMode, TracingObserver, drive};
use crate::telemetry::RunLog;

#[derive(Debug, Args)]
pub struct RunArguments {
    /// The protocol file.
    file: PathBuf,
    /// An input value; repeat for several.
    #[arg(long = "input", short = 'i', value_name = "KEY=VALUE")]
    inputs: Vec<String>,
    /// External events as JSON lines `{"event": "name", "data": {...}}`, from a file or `-` (stdin).
    #[arg(long, value_name = "FILE|-")]
    events: Option<String>,
    /// How log lines are printed on stderr.
    #[arg(long, value_enum, default_value = "human")]
    log_format: LogFormatArgument,
    /// Let delays and timers elapse instantly, in order (deterministic runs and tests).
    #[arg(long)]
    virtual_time: bool,
    /// Where run directories (telemetry) live.
    #[arg(
        long,
        env = "PROTOCOL_RUN_STATE_DIR",
        default_value = ".protocol-run",
        value_name = "DIR"
    )]
    state_dir: PathBuf,
    /// How many runs' telemetry to keep.
    #[arg(long, default_value_t = crate::telemetry::DEFAULT_RUNS_KEPT, value_name = "N")]
    keep_runs: usize,
    /// Replace an effectful action's outcome: `ID=timeout`, `ID=error:MESSAGE`, `ID=exit:N`,
    /// `ID=ok:STDOUT`, or a sequence such as `ID=timeout,timeout,ok:done`.
    #[arg(long = "mock", value_name = "ID=OUTCOME")]
    mocks: Vec<String>,
    /// Steps one macrostep may take (microsteps, and internal events that enable nothing)
    /// before the run is stopped as a loop.
    #[arg(long, default_value_t = Limits::default().max_microsteps)]
    max_microsteps: usize,
}

/// Runs a protocol; every phase moves the run's lifecycle, and a move the lifecycle refuses is
/// an internal error (exit 70) rather than a silently wrong state.
pub fn run(arguments: RunArguments) -> u8 {
    let mut lifecycle = RunLifecycle::default();
    match run_phases(&arguments, &mut lifecycle) {
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

/// Applies a lifecycle move, or turns a refused one into exit code 70.
fn advance(lifecycle: &mut RunLifecycle, event: LifecycleEvent) -> Result<(), u8> {
    lifecycle.advance(event).map_err(|refused| {
        eprintln!("internal error: {refused}");
        exit_code::INTERNAL
    })
}

fn run_phases(arguments: &RunArguments, lifecycle: &mut RunLifecycle) -> Result<u8, u8> {
    let loaded = crate::load::load_file(&arguments.file).map_err(|error| {
        eprint!("{error}");
        load_error_code(&error)
    })?;
    advance(lifecycle, LifecycleEvent::Loaded)?;
    let machine = crate::compile::compile(&loaded)
        .map(Arc::new)
        .map_err(|diagnostics| {
            eprint!("{}", render_all(&diagnostics));
            exit_code::INVALID
        })?;
    let inputs = bind_inputs(&machine, &arguments.inputs)?;
    let source = event_source(arguments.events.as_deref())?;
    let mocks = parse_mocks(&machine, &arguments.mocks)?;
    advance(lifecycle, LifecycleEvent::Validated)?;
    let format = match arguments.log_format {
        LogFormatArgument::Human => LogFormat::Human,
        LogFormatArgument::Json => LogFormat::Json,
    };
    let subscriber = tracing_subscriber::registry().with(LogLayer { format });
    let _guard = tracing::subscriber::set_default(subscriber);
    let run_id = crate::telemetry::new_run_id();
    let runs = crate::telemetry::runs_directory(&arguments.state_dir);
    let telemetry = match RunLog::create(&runs, &run_id, arguments.keep_runs) {
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
        printer: TracingObserver { run_id },
        telemetry,
    };
    let limits = Limits {
        max_microsteps: arguments.max_microsteps,
    };
    let mut interpreter = Interpreter::new(machine.clone(), inputs).with_limits(limits);
    let time_mode = if arguments.virtual_time {
        TimeMode::Virtual
    } else {
        TimeMode::Real
    };
    let options = DriveOptions { time_mode, mocks };
    let report = drive(&mut interpreter, source, options, &mut observer).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::INVALID
    })?;
    match report.outcome {
        Some(outcome) => {
            advance(lifecycle, LifecycleEvent::Finished)?;
            let state = &machine.state(outcome.final_state).id;
            let finished = serde_json::json!({"finished": {"state": &**state, "exit_code": outcome.exit_code, "output": outcome.output.to_json()}});
            println!("{finished}");
            Ok(outcome.exit_code)
        }
        None => {
            advance(lifecycle, LifecycleEvent::Abort)?;
            eprintln!(
                "run stopped unfinished in {}: no events left and no timer pending",
                report.active_states.join(", ")
            );
            Ok(exit_code::UNFINISHED)
        }
    }
}

/// Checks every `--input`, reporting all problems at once.
fn bind_inputs(
    machine: &crate::compile::machine::Machine,
    texts: &[String],
) -> Result<Vec<crate::value::Value>, u8> {
    let mut supplied = Vec::new();
    let mut problems = Vec::new();
    for text in texts {
        match split_assignment(text) {
            Ok(pair) => supplied.push(pair),
            Err(error) => problems.push(error),
        }
    }
    match machine.bind_inputs(&supplied) {
        Ok(inputs) if problems.is_empty() => return Ok(inputs),
        Ok(_) => {}
        Err(errors) => problems.extend(errors),
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    Err(exit_code::INVALID)
}

fn event_source(events: Option<&str>) -> Result<EventSource, u8> {
    match events {
        None => Ok(EventSource::None),
        Some("-") => Ok(EventSource::Stdin),
        Some(path) => std::fs::read_to_string(path)
            .map(EventSource::Lines)
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
fn parse_mocks(machine: &crate::compile::machine::Machine, texts: &[String]) -> Result<Mocks, u8> {
    let mocks = Mocks::parse(texts).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::USAGE
    })?;
    let mut unknown = false;
    for id in mocks.ids() {
        if !machine.action_ids.iter().any(|known| known == id) {
            let hint =
                crate::diagnostic::did_you_mean(id, machine.action_ids.iter().map(String::as_str))
                    .map(|hint| format!("; {hint}"))
                    .unwrap_or_else(|| {
                        format!("; its action ids are: {}", machine.action_ids.join(", "))
                    });
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
    fn log(&mut self, record: &crate::actions::LogRecord, time: &str) {
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

    fn directive(&mut self, directive: &crate::actions::Directive) {
        self.printer.directive(directive);
        let time = crate::clock::format_rfc3339(crate::clock::unix_milliseconds_now());
        self.write(&time, "directive", directive.to_json());
    }

    fn input_error(&mut self, error: &crate::run::driver::InputLineError) {
        self.printer.input_error(error);
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        self.write(time, kind, fields);
    }
}
