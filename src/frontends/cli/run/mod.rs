//! `protocol-run run FILE.yaml`: bind inputs, drive the machine, exit with its final state's code.

use std::path::PathBuf;

use clap::Args;
use tracing_subscriber::layer::SubscriberExt;

mod finish;
mod inputs;
mod observer;

use inputs::{GivenInputs, bind_inputs, event_source, parse_mocks, resupply};
use observer::RunObserver;

use super::{LogFormatArgument, exit_code};
use crate::base::durable::TimerPolicy;
use crate::runtime::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::runtime::output::{LogFormat, LogLayer};
use crate::runtime::run::driver::{
    DriveOptions, Observer, TimeMode, TracingObserver, drive_durable,
};
use crate::runtime::runs::start::{self, Place, Prepared, Refusal, Resumption, StoreCheckpoint};
use crate::runtime::telemetry::RunLog;
use crate::store::Store;

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
    #[command(flatten)]
    secrets: SecretInputs,
    #[command(flatten)]
    options: RunOptions,
}

/// `protocol-run redrive RUN_ID`.
#[derive(Debug, Args)]
pub struct RedriveArguments {
    /// The run to drive again (see `protocol-run runs`): one that stopped unfinished, or failed
    /// on an unhandled error.
    #[arg(value_name = "RUN_ID")]
    run_id: String,
    #[command(flatten)]
    secrets: SecretInputs,
    #[command(flatten)]
    options: RunOptions,
}

/// A recorded run's secret inputs, supplied again (`resume`, `redrive`).
#[derive(Debug, Args)]
struct SecretInputs {
    /// A secret input of the run, supplied again (secret inputs are never stored); repeat for
    /// several.
    #[arg(long = "input", short = 'i', value_name = "KEY=VALUE")]
    secrets: Vec<String>,
    /// The run's secret inputs from a YAML or JSON mapping of input name to value; an
    /// --input replaces the file's entry of the same name.
    #[arg(long = "inputs", value_name = "FILE")]
    secrets_file: Option<PathBuf>,
}

impl SecretInputs {
    fn given(&self) -> GivenInputs {
        GivenInputs {
            assignments: self.secrets.clone(),
            file: self.secrets_file.clone(),
        }
    }
}

/// `protocol-run fork RUN_ID --at STEP`.
#[derive(Debug, Args)]
pub struct ForkArguments {
    /// The run to fork (see `protocol-run runs`).
    #[arg(value_name = "RUN_ID")]
    source: String,
    /// The step whose state the new run starts from (`protocol-run status RUN_ID` shows the
    /// last ones).
    #[arg(long, value_name = "STEP")]
    at: u64,
    /// The new run's id (letters, digits, `-`, `_`, `.`; at most 64), instead of a timestamp.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Sets a context variable of the state forked from: `NAME=VALUE`, VALUE read as JSON when
    /// it is JSON (`3`, `true`, `{"a": 1}`) and as a string otherwise; repeat for several. The
    /// variable must be in the state.
    #[arg(long = "context-set", value_name = "NAME=VALUE")]
    context_set: Vec<String>,
    #[command(flatten)]
    options: RunOptions,
}

/// What a new run and a resumed run share.
#[derive(Debug, Args)]
pub struct RunOptions {
    /// External events as JSON lines `{"event": "name", "data": {...}}`, from a file or `-` (stdin);
    /// `inbox` reads no lines and waits, while the run is idle, for the events other processes
    /// queue in its inbox (`protocol-run ui`, a host on a shared store) until it finishes.
    /// The lines ready together are stepped and committed in one transaction; each line's outcome
    /// is written on stdout once its step is committed.
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
    /// `ID=ok:STDOUT`, `ID=truncated:STDOUT` (output cut at its limit), or a sequence such as
    /// `ID=timeout,timeout,ok:done`.
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
    /// On resume: move the run to the protocol file as it is now, although it changed since
    /// the run started, as long as every state and variable the run recorded still exists
    /// (without it, a run goes on with the text it started with). `--force` is the old name.
    #[arg(long = "upgrade", visible_alias = "force")]
    force: bool,
    #[command(flatten)]
    narrowing: super::narrowing::Narrowing,
    /// The longest event line read; a longer one is reported and skipped.
    #[arg(long, default_value_t = crate::runtime::run::driver::MAX_EVENT_LINE_BYTES, value_name = "BYTES")]
    max_event_bytes: usize,
    /// Export the run's trace over OTLP/HTTP (protobuf) to this collector, e.g.
    /// http://127.0.0.1:4318 (`/v1/traces` is added); without it, OTEL_EXPORTER_OTLP_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, choose the endpoint.
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// How often the run looks at its inbox in the store for events other processes queued
    /// (`protocol-run ui`, a host on a shared store), applied as input; from 10ms to a minute.
    /// Not on virtual time.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = super::serve::parse_inbox_poll)]
    inbox_poll: std::time::Duration,
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
    let given = arguments.secrets.given();
    // No id: the latest run that can still be resumed.
    let run_id = match super::run_selection::choose_run(
        &arguments.options.state,
        &arguments.run,
        super::run_selection::Latest::Unfinished,
        true,
    ) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    run_with_lifecycle(Start::Run(run_id, given), &arguments.options)
}

/// `protocol-run fork`: records the new run, then drives it as `resume` would.
pub fn fork(arguments: ForkArguments) -> u8 {
    let mut context_set = Vec::new();
    for text in &arguments.context_set {
        let Some((name, value)) = text.split_once('=').filter(|(name, _)| !name.is_empty()) else {
            eprintln!("error: --context-set `{text}` is not NAME=VALUE");
            return exit_code::USAGE;
        };
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        context_set.push((name.to_string(), value));
    }
    let start = Start::Fork {
        source: arguments.source,
        step: arguments.at,
        run_id: arguments.run_id,
        context_set,
    };
    run_with_lifecycle(start, &arguments.options)
}

/// `protocol-run redrive`: records the redrive once the run is claimed, then drives it as
/// `resume` would.
pub fn redrive(arguments: RedriveArguments) -> u8 {
    let start = Start::Redrive(arguments.run_id, arguments.secrets.given());
    run_with_lifecycle(start, &arguments.options)
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
    /// A run by id driven again from before its failure (`runs::redrive`).
    Redrive(String, GivenInputs),
    /// A new run forked from `source`'s state after `step`.
    Fork {
        source: String,
        step: u64,
        run_id: Option<String>,
        context_set: Vec<(String, serde_json::Value)>,
    },
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
    let export = otlp_export(options.otlp.as_deref())?;
    let mut store = options.state.open_store_to_drive("run")?;
    // What a redrive recorded, logged once the run's log is open.
    let mut redrive_said = None;
    let limits = options.limits.limits();
    let prepared = match start {
        Start::New {
            file,
            inputs,
            run_id,
        } => {
            let run_id =
                super::run_id::new_run_id(run_id.as_deref(), &*store, &options.state.path)?;
            let place = Place {
                store: &mut *store,
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
            resume_run(&run.id, &secrets, None, options, &mut *store, lifecycle)
        }
        Start::Run(run_id, secrets) => {
            resume_run(&run_id, &secrets, None, options, &mut *store, lifecycle)
        }
        Start::Redrive(run_id, secrets) => {
            crate::runtime::runs::redrive::check(&*store, &run_id).map_err(Refusal::report)?;
            let mut tell = |redriven: &crate::runtime::runs::redrive::Redriven| {
                redrive_said = Some(redriven.description());
            };
            resume_run(
                &run_id,
                &secrets,
                Some(&mut tell),
                options,
                &mut *store,
                lifecycle,
            )
        }
        Start::Fork {
            source,
            step,
            run_id,
            context_set,
        } => {
            let run_id =
                super::run_id::new_run_id(run_id.as_deref(), &*store, &options.state.path)?;
            let fork = crate::runtime::runs::fork::Fork {
                source: &source,
                step,
                run_id: &run_id,
                context_set: &context_set,
                unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
            };
            crate::runtime::runs::fork::record(&mut *store, &fork).map_err(Refusal::report)?;
            eprintln!("run {run_id}: forked from run {source} at step {step}");
            let no_secrets = GivenInputs {
                assignments: Vec::new(),
                file: None,
            };
            resume_run(&run_id, &no_secrets, None, options, &mut *store, lifecycle)
        }
    }
    .map_err(Refusal::report)?;
    let Prepared {
        machine,
        interpreter,
        run_id,
        resume,
        lock,
        grants,
    } = prepared;
    let mut interpreter = interpreter.with_limits(limits);
    let source = event_source(options.events.as_deref(), options.virtual_time)?;
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
        stored: String::new(),
        entered: Vec::new(),
        held: Vec::new(),
    };
    let started = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
    for record in &grants {
        observer.log(record, &started);
    }
    if let Some(message) = redrive_said {
        let record = crate::base::log_record::LogRecord {
            level: crate::base::model::action::LogLevel::Info,
            message: format!("run {run_id} {message}"),
            tags: std::sync::Arc::from([std::sync::Arc::from("redrive")]),
            fields: Vec::new(),
            from: None,
        };
        observer.log(&record, &started);
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
    // The steps of one read batch of events are committed together, and what tells of them
    // goes out once they are (`RunObserver::release`).
    let mut trace = match export {
        Some(export) => Some(
            crate::runtime::otlp::begin_run_trace(
                export,
                &mut *store,
                &run_id,
                &machine.id,
                crate::runtime::otlp::environment_parent(),
            )
            .map_err(store_error)?,
        ),
        None => None,
    };
    if let Some(trace) = &mut trace {
        // A restored run is already in its states; a new one enters them as it starts.
        trace.states_restored(&interpreter.active_states());
    }
    // Held for as long as the run is driven; the events queued for it are taken as its holder.
    let holder = lock.holder().clone();
    let mut checkpoint = StoreCheckpoint::new(&mut *store, run_id.clone(), true)
        .taking_queued(holder, options.inbox_poll);
    let driven = match trace.as_mut() {
        Some(trace) => {
            let mut traced = crate::runtime::otlp::observer::TracedObserver {
                inner: &mut observer,
                trace,
            };
            drive_durable(
                &mut interpreter,
                source,
                drive_options,
                &mut traced,
                Some(&mut checkpoint),
                resume.as_ref(),
            )
        }
        None => drive_durable(
            &mut interpreter,
            source,
            drive_options,
            &mut observer,
            Some(&mut checkpoint),
            resume.as_ref(),
        ),
    };
    observer.commit_telemetry(&mut *store, &run_id);
    if let Some(trace) = &mut trace {
        crate::runtime::otlp::end_run_trace(trace, &driven, &mut *store, &run_id);
    }
    let report = driven.map_err(|error| {
        eprintln!("error: {}", crate::base::secrets::mask(&error.to_string()));
        error.exit_code()
    })?;
    let ended = finish::Ended {
        machine: &machine,
        run_id: &run_id,
        strict_effects: options.strict_effects,
    };
    ended.report(&report, &mut *store, lifecycle)
}

/// Resumes `run_id` with its secret inputs supplied again from `secret_inputs`; with
/// `redrive`, redriven first (told to it once recorded).
fn resume_run(
    run_id: &str,
    secret_inputs: &GivenInputs,
    redrive: Option<&mut dyn FnMut(&crate::runtime::runs::redrive::Redriven)>,
    options: &RunOptions,
    store: &mut dyn Store,
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
        // Reborrowed, so that it need not outlive what the resumption borrows.
        redrive: redrive.map(|tell| tell as &mut dyn FnMut(&_)),
    };
    start::restored_run(place, resumption)
}

/// The exporter `--otlp` or the `OTEL_EXPORTER_OTLP_*` variables ask for, if any; a bad
/// endpoint is a usage error.
pub(in crate::frontends::cli) fn otlp_export(
    flag: Option<&str>,
) -> Result<Option<std::sync::Arc<crate::runtime::otlp::Export>>, u8> {
    let Some(endpoint) = crate::runtime::otlp::chosen_endpoint(flag) else {
        return Ok(None);
    };
    match crate::runtime::otlp::Export::new(&endpoint) {
        Ok(export) => Ok(Some(std::sync::Arc::new(export))),
        Err(message) => {
            eprintln!("error: {message}");
            Err(exit_code::USAGE)
        }
    }
}

fn store_error(error: crate::store::StoreError) -> u8 {
    eprintln!("error: {error}");
    exit_code::IO
}
