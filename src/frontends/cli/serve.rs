//! `protocol-run serve FILE.yaml`: many instances of one protocol in one process, fed JSON lines tagged with an instance id, each recorded and resumed with the host.

use std::path::PathBuf;

use clap::Args;

use super::exit_code;
use crate::base::durable::TimerPolicy;
use crate::runtime::run::driver::spawn_stdin_batches;
use crate::runtime::runs::fleet::{Fleet, FleetEnd};
use crate::runtime::runs::retention::Retention;
use crate::runtime::runs::served::HostOperator;
use crate::runtime::runs::start::Refusal;
use crate::store::StoreChoice;

#[derive(Debug, Args)]
pub struct ServeArguments {
    /// The protocol every instance runs.
    file: PathBuf,
    /// Read event lines from clients of this Unix socket instead of stdin; every output line
    /// goes to stdout and to each connected client.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(flatten)]
    state: super::run_selection::StateDirectory,
    /// How the timers of instances resumed at start are re-armed.
    #[arg(long, value_enum, default_value = "deadline")]
    timers: TimerPolicy,
    /// Move the instances recorded under files that changed since to the files as they are now,
    /// if their states still exist (without it, they go on with the texts they started with).
    /// `--force` is the old name.
    #[arg(long = "upgrade", visible_alias = "force")]
    force: bool,
    /// The longest input line; a longer one is reported and skipped.
    #[arg(long, default_value_t = crate::runtime::run::driver::MAX_EVENT_LINE_BYTES, value_name = "BYTES")]
    max_event_bytes: usize,
    /// The most instances alive at once (each takes about 1 KB); a line that would create one
    /// more is refused.
    #[arg(long, default_value_t = DEFAULT_MAX_INSTANCES, value_name = "N")]
    max_instances: usize,
    /// With --socket: the most output bytes waiting for one client; a client that does not read
    /// is disconnected past it.
    #[arg(long, default_value_t = super::socket::MAX_CLIENT_QUEUE_BYTES, value_name = "BYTES")]
    max_client_queue_bytes: usize,
    #[command(flatten)]
    narrowing: super::narrowing::Narrowing,
    /// Pins an input for every instance: `NAME=VALUE`; repeat for several. A new instance takes
    /// it (its first line may not give it), a grant naming it is resolved from it, and a pinned
    /// secret input supplies the instances resumed at start (secrets are never stored).
    #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
    pinned_inputs: Vec<String>,
    /// Pins inputs from a YAML or JSON mapping of input name to value; an --input replaces the
    /// file's entry of the same name.
    #[arg(long = "inputs", value_name = "FILE")]
    pinned_inputs_file: Option<PathBuf>,
    #[command(flatten)]
    limits: super::limits::LimitOptions,
    /// Delete the store's runs (of any protocol) that finished longer ago than DURATION (`30d`,
    /// `12h`), with their journal, states and telemetry: at start, then every tenth of DURATION
    /// (a minute to an hour apart).
    #[arg(long, value_name = "DURATION", value_parser = Retention::parse)]
    retain: Option<Retention>,
    /// How often the host looks at the inboxes of the instances it holds, for events other
    /// processes queued (another host, `protocol-run ui`), and at the outcomes of those it queued
    /// (give or take a quarter, so that hosts do not look at once); from 10ms to a minute. On
    /// PostgreSQL the database also wakes it.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = parse_inbox_poll)]
    inbox_poll: std::time::Duration,
    /// Export each instance as its own trace over OTLP/HTTP (protobuf) to this collector, e.g.
    /// http://127.0.0.1:4318 (`/v1/traces` is added); without it, OTEL_EXPORTER_OTLP_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, choose the endpoint.
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
}

/// `--inbox-poll`: a duration from 10 ms (each look is a statement) to a minute (a queued
/// event waits at most this long).
pub(super) fn parse_inbox_poll(text: &str) -> Result<std::time::Duration, String> {
    let duration = crate::base::time::parse_duration(text)?;
    match u64::try_from(duration.num_milliseconds()) {
        Ok(milliseconds) if (10..=60_000).contains(&milliseconds) => {
            Ok(std::time::Duration::from_millis(milliseconds))
        }
        _ => Err(format!(
            "`{text}` is outside 10ms..1m: each look is a statement, and a queued event waits up \
             to one"
        )),
    }
}

/// The most instances one host keeps alive by default: about 1 GB of them.
const DEFAULT_MAX_INSTANCES: usize = 1_000_000;

/// Runs the host until its input ends and every instance is idle (exit 0), or until SIGINT or
/// SIGTERM (exit 75, every instance kept for the next start).
pub fn serve(arguments: ServeArguments) -> u8 {
    let limit = match arguments.narrowing.limit(None) {
        Ok(limit) => limit,
        Err(refusal) => return refusal.report(),
    };
    let export = match super::run::otlp_export(arguments.otlp.as_deref()) {
        Ok(export) => export,
        Err(code) => return code,
    };
    // One machine serves every instance, and a client's inputs must not choose what the host
    // grants: only pinned inputs resolve grants.
    let narrowing = arguments.narrowing.permissions();
    let operator = HostOperator {
        limit: &limit,
        narrowing: &narrowing,
    };
    let served = crate::runtime::runs::served::serve(&arguments.file, &operator, &mut |machine| {
        pinned_inputs(
            machine,
            &arguments.pinned_inputs,
            arguments.pinned_inputs_file.as_deref(),
        )
        .map_err(Refusal::reported)
    });
    let served = match served {
        Ok(served) => served,
        Err(refusal) => return refusal.report(),
    };
    // `--store memory` records nothing (instances end with the process, like Step Functions'
    // Express workflows); a durable store commits steps in batches and writes output lines once
    // their batch is. Its store is opened first: with a shared store the host's lease is taken
    // with it, and the holder the host's lock records names the lease. One host per state
    // directory: two would resume and drive the same instances. Its lock is the holder every
    // instance records (`runs::claims`).
    let durable = if arguments.state.store != StoreChoice::Memory {
        let store = match arguments.state.open_store_to_drive("serve") {
            Ok(store) => store,
            Err(code) => return code,
        };
        match crate::runtime::runs::claims::HolderLock::host(&arguments.state.path, "serve") {
            Ok(lock) => Some((store, lock)),
            Err(error) => {
                eprintln!("error: {error}");
                return error.exit_code();
            }
        }
    } else {
        None
    };
    if let Some(path) = &arguments.socket
        && let Err(message) = super::socket::claim_socket_path(path)
    {
        eprintln!("error: {message}");
        return exit_code::USAGE;
    }
    // The host's lock is held until the process ends.
    let (recording, _host_lock) = match durable {
        Some((store, lock)) => (
            Some(served.recording(
                store,
                arguments.narrowing.recorded(),
                crate::store::RunOrigin::Serve,
                lock.holder().clone(),
            )),
            Some(lock),
        ),
        None => (None, None),
    };
    if let Some(retention) = arguments.retain {
        if recording.is_none() {
            eprintln!("error: --retain needs a store that keeps instances (not --store memory)");
            return exit_code::USAGE;
        }
        if let Err(code) = super::run_selection::keep_pruning(&arguments.state, retention) {
            return code;
        }
    }
    let location = recording
        .as_ref()
        .map(|recording| recording.store.location());
    let runtime = match current_thread_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let clients = super::socket::Clients::new(arguments.max_client_queue_bytes);
    let output_clients = clients.clone();
    let reply_clients = clients.clone();
    let mut fleet = Fleet::new(served.machine.clone(), recording)
        .with_otlp(export.clone())
        .with_limits(arguments.limits.limits())
        .with_max_instances(arguments.max_instances)
        .with_output(move |bytes| {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(bytes);
            let _ = stdout.flush();
            output_clients.broadcast(bytes);
        })
        .with_problem_replies(move |origin, message| {
            let reply = serde_json::json!({
                "error": { "line": origin.line, "message": format!("{message}; line skipped") }
            });
            reply_clients.reply(origin.client, &format!("{reply}\n"));
        });
    fleet.set_pinned_inputs(served.pinned.clone());
    // Instances recorded under texts that changed since go on with them (pinned), each
    // version compiled as the file is, unless --force moves them to the file.
    let file = arguments.file.clone();
    let pins = served.pinned.clone();
    let (version_limit, version_narrowing) = (limit.clone(), narrowing.clone());
    fleet = fleet.with_pinned_versions(move |texts| {
        let operator = HostOperator {
            limit: &version_limit,
            narrowing: &version_narrowing,
        };
        crate::runtime::runs::served::pinned_version(&file, texts, &operator, &pins)
            .map_err(|refusal| refusal.text)
    });
    // On a shared store other hosts serve the same protocol: the runs of one that dies are
    // taken over as its lease runs out (or its lock is freed, on this machine), looked for
    // twice a lease.
    if let StoreChoice::Postgres(_) = &arguments.state.store {
        fleet = fleet.with_takeover(arguments.state.lease / 2, arguments.timers, arguments.force);
    }
    // Other processes (another host, `protocol-run ui`) queue events in the inboxes of the
    // instances held here: on PostgreSQL it is woken, on SQLite it polls.
    if location.is_some() {
        fleet = fleet.with_inboxes(arguments.inbox_poll);
    }
    if let Err(message) = fleet.resume_recorded(arguments.timers, arguments.force) {
        eprintln!("error: {message}");
        return exit_code::INVALID;
    }
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&runtime, async {
        let mut input = match &arguments.socket {
            Some(path) => {
                match super::socket::listen(path, clients, arguments.max_event_bytes) {
                    Ok(input) => input,
                    Err(message) => {
                        eprintln!("error: {message}");
                        return exit_code::IO;
                    }
                }
            }
            None => spawn_stdin_batches(arguments.max_event_bytes),
        };
        let stop = async {
            stop_signal().await;
            crate::runtime::run::stop::Stop::Park
        };
        let end = fleet.run(&mut input, stop).await;
        if fleet.store_failures() > 0 {
            eprintln!(
                "error: the store refused the steps of {} instance(s), each named with why on \
                 stdout; they resume from their last committed step",
                fleet.store_failures()
            );
            return exit_code::IO;
        }
        match end {
            FleetEnd::Drained => 0,
            FleetEnd::Stopped => {
                eprintln!(
                    "serve stopped by a signal; unfinished instances{} resume with the next `serve`",
                    location
                        .map(|location| format!(" kept in {location}"))
                        .unwrap_or_default()
                );
                exit_code::UNFINISHED
            }
        }
    });
    // The spans still queued go before the process ends.
    if let Some(export) = export {
        export.shutdown();
    }
    code
}

/// `--input NAME=VALUE` and `--inputs FILE` of `serve`: inputs pinned for every instance (the
/// protocol's, or a secret input of a child it invokes, for the instances it resumes).
fn pinned_inputs(
    machine: &crate::pipeline::compile::machine::Machine,
    texts: &[String],
    file: Option<&std::path::Path>,
) -> Result<crate::runtime::runs::grants::PinnedInputs, u8> {
    let mut assignments = Vec::new();
    for text in texts {
        let pair = crate::pipeline::compile::inputs::split_assignment(text).map_err(|error| {
            eprintln!("error: {error}");
            exit_code::USAGE
        })?;
        assignments.push(pair);
    }
    let supplied = super::inputs_file::SuppliedInputs::gather(machine, file, assignments)?;
    let pinned = crate::runtime::runs::grants::PinnedInputs::new(supplied.values.clone());
    let taken = pinned.taken_by(machine);
    let mut refused = false;
    for name in pinned.names().filter(|name| !taken.is_pinned(name)) {
        refused = true;
        let message = format!(
            "`{}` takes no input `{name}` (nor does a child it invokes take a secret one of \
             that name)",
            machine.id
        );
        let diagnostic =
            crate::base::diagnostic::Diagnostic::error(format!("input `{name}`: {message}"))
                .with_help(format!("remove `{name}` from this file"));
        let part = crate::pipeline::load::source::Part::Key;
        match supplied.located(name, None, part, diagnostic) {
            Some(located) => eprintln!("{located}"),
            None => eprintln!("error: --input {name}: {message}"),
        }
    }
    if refused {
        return Err(exit_code::USAGE);
    }
    Ok(pinned)
}

/// Resolves on the first SIGINT or SIGTERM; never when they cannot be watched.
/// The single-threaded runtime a host runs on, or the exit code after saying why it could not
/// start.
pub(super) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the runtime: {error}");
            exit_code::INTERNAL
        })
}

pub(super) async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    // A busy instance's step does not yield to this task: it sees the flag, and parks.
    crate::pipeline::compile::budget::watch_stop_signals();
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        },
        _ => std::future::pending().await,
    }
}
