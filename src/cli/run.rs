//! `protocol-run run FILE.yaml`: bind inputs, drive the machine, exit with its final state's code.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tracing_subscriber::layer::SubscriberExt;

use super::validate::load_error_code;
use super::{LogFormatArgument, exit_code};
use crate::compile::inputs::split_assignment;
use crate::diagnostic::render_all;
use crate::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::output::{LogFormat, LogLayer};
use crate::run::Interpreter;
use crate::run::algorithm::Limits;
use crate::run::driver::{EventSource, TimeMode, TracingObserver, drive};

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
    /// Microsteps one macrostep may take before the run is stopped as a loop.
    #[arg(long, default_value_t = Limits::default().max_microsteps)]
    max_microsteps: usize,
}

pub fn run(arguments: RunArguments) -> u8 {
    let mut lifecycle = RunLifecycle::default();
    let loaded = match crate::load::load_file(&arguments.file) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprint!("{error}");
            let _ = lifecycle.advance(LifecycleEvent::Failed);
            return load_error_code(&error);
        }
    };
    let _ = lifecycle.advance(LifecycleEvent::Loaded);
    let machine = match crate::compile::compile(&loaded) {
        Ok(machine) => Arc::new(machine),
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            let _ = lifecycle.advance(LifecycleEvent::Failed);
            return exit_code::INVALID;
        }
    };
    let mut supplied = Vec::new();
    let mut problems = Vec::new();
    for text in &arguments.inputs {
        match split_assignment(text) {
            Ok(pair) => supplied.push(pair),
            Err(error) => problems.push(error),
        }
    }
    let inputs = match machine.bind_inputs(&supplied) {
        Ok(inputs) if problems.is_empty() => inputs,
        Ok(_) => Vec::new(),
        Err(errors) => {
            problems.extend(errors);
            Vec::new()
        }
    };
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        let _ = lifecycle.advance(LifecycleEvent::Failed);
        return exit_code::INVALID;
    }
    let source = match arguments.events.as_deref() {
        None => EventSource::None,
        Some("-") => EventSource::Stdin,
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => EventSource::Lines(text),
            Err(error) => {
                eprintln!("error: cannot read events file {path}: {error}");
                let _ = lifecycle.advance(LifecycleEvent::Failed);
                return match error.kind() {
                    std::io::ErrorKind::NotFound => exit_code::NO_INPUT_FILE,
                    _ => exit_code::IO,
                };
            }
        },
    };
    let _ = lifecycle.advance(LifecycleEvent::Validated);
    let format = match arguments.log_format {
        LogFormatArgument::Human => LogFormat::Human,
        LogFormatArgument::Json => LogFormat::Json,
    };
    let subscriber = tracing_subscriber::registry().with(LogLayer { format });
    let _guard = tracing::subscriber::set_default(subscriber);
    let run_id = format!(
        "run-{}-{}",
        crate::clock::unix_milliseconds_now(),
        std::process::id()
    );
    let mut observer = TracingObserver { run_id };
    let limits = Limits {
        max_microsteps: arguments.max_microsteps,
    };
    let mut interpreter = Interpreter::new(machine.clone(), inputs).with_limits(limits);
    let time_mode = if arguments.virtual_time {
        TimeMode::Virtual
    } else {
        TimeMode::Real
    };
    match drive(&mut interpreter, source, time_mode, &mut observer) {
        Ok(report) => match report.outcome {
            Some(outcome) => {
                let _ = lifecycle.advance(LifecycleEvent::Finished);
                let state = &machine.state(outcome.final_state).id;
                println!(
                    "{}",
                    serde_json::json!({"finished": {"state": &**state, "exit_code": outcome.exit_code, "output": outcome.output.to_json()}})
                );
                outcome.exit_code
            }
            None => {
                let _ = lifecycle.advance(LifecycleEvent::Abort);
                eprintln!(
                    "run stopped unfinished in {}: no events left and no timer pending",
                    report.active_states.join(", ")
                );
                exit_code::UNFINISHED
            }
        },
        Err(error) => {
            let _ = lifecycle.advance(LifecycleEvent::Failed);
            eprintln!("error: {error}");
            exit_code::INVALID
        }
    }
}
