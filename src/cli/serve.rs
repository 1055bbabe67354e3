//! `protocol-run serve FILE.yaml`: many instances of one protocol in one process, fed JSON lines tagged with an instance id, each recorded and resumed with the host.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use clap::Args;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::exit_code;
use crate::diagnostic::render_all;
use crate::run::driver::{InputBatches, LineBatch, spawn_stdin_batches};
use crate::run::durable::TimerPolicy;
use crate::run::fleet::{Fleet, FleetEnd, Recording};
use crate::store::{SqliteStore, content_hash};

/// Where `serve` records its instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    Sqlite,
    Memory,
}

#[derive(Debug, Args)]
pub struct ServeArguments {
    /// The protocol every instance runs.
    file: PathBuf,
    /// Read event lines from clients of this Unix socket instead of stdin; every output line
    /// goes to stdout and to each connected client.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Where instances are recorded (`state.db`).
    #[arg(
        long,
        env = "PROTOCOL_RUN_STATE_DIR",
        default_value = ".protocol-run",
        value_name = "DIR"
    )]
    state_dir: PathBuf,
    /// How the timers of instances resumed at start are re-armed.
    #[arg(long, value_enum, default_value = "deadline")]
    timers: TimerPolicy,
    /// Resume instances although the protocol changed, if their states still exist.
    #[arg(long)]
    force: bool,
    /// Where instances are recorded: `sqlite` (durable: steps committed in batches, output
    /// lines written once their batch is committed) or `memory` (nothing recorded: instances
    /// end with the process, like Step Functions' Express workflows).
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// The longest input line; a longer one is reported and skipped.
    #[arg(long, default_value_t = crate::run::driver::MAX_EVENT_LINE_BYTES, value_name = "BYTES")]
    max_event_bytes: usize,
    #[command(flatten)]
    narrowing: super::narrowing::Narrowing,
    /// A secret input of the instances resumed at start (secret inputs are never stored):
    /// `NAME=VALUE`; repeat for several.
    #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
    secret_inputs: Vec<String>,
    #[command(flatten)]
    limits: super::limits::LimitOptions,
}

/// Runs the host until its input ends and every instance is idle (exit 0), or until SIGINT or
/// SIGTERM (exit 75, every instance kept for the next start).
pub fn serve(arguments: ServeArguments) -> u8 {
    let text = match crate::load::read_text(&arguments.file) {
        Ok(text) => text,
        Err(error) => {
            eprint!("{error}");
            return super::validate::load_error_code(&error);
        }
    };
    let loaded = match crate::load::load_text(&arguments.file.display().to_string(), text.clone()) {
        Ok(loaded) => loaded,
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            return exit_code::INVALID;
        }
    };
    let limit = match arguments.narrowing.limit(None) {
        Ok(limit) => limit,
        Err(code) => return code,
    };
    let machine = match crate::compile::compile_limited(&loaded, &Arc::default(), &limit) {
        Ok(machine) => Arc::new(machine),
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            return exit_code::INVALID;
        }
    };
    // One machine serves every instance, and a client's inputs must not choose what the host
    // grants: a grant naming an input is refused here rather than left to deny everything.
    if !machine.capabilities.is_resolved() {
        eprintln!(
            "error: {}: its `permissions` name inputs (`${{...}}`), which `serve` cannot resolve: \
             every instance shares one set of grants, and a client's input must not choose them; \
             write the paths in the grants, or start each run with `protocol-run run`",
            arguments.file.display()
        );
        return exit_code::INVALID;
    }
    let recording = if arguments.store == StoreKind::Sqlite {
        let store = match SqliteStore::open(&arguments.state_dir) {
            Ok(store) => store,
            Err(error) => {
                eprintln!("error: {error}");
                return exit_code::IO;
            }
        };
        Some(Recording {
            store: Box::new(store),
            protocol_path: arguments
                .file
                .canonicalize()
                .unwrap_or_else(|_| arguments.file.clone())
                .display()
                .to_string(),
            protocol_hash: content_hash(&text),
            protocol_text: text,
            grants: arguments.narrowing.recorded(),
        })
    } else {
        None
    };
    let location = recording
        .as_ref()
        .map(|recording| recording.store.location());
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return exit_code::INTERNAL;
        }
    };
    let secret_inputs = match secret_inputs(&machine, &arguments.secret_inputs) {
        Ok(secret_inputs) => secret_inputs,
        Err(code) => return code,
    };
    let clients: Clients = Rc::default();
    let output_clients = clients.clone();
    let mut fleet = Fleet::new(machine, recording)
        .with_limits(arguments.limits.limits())
        .with_output(move |bytes| {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(bytes);
            let _ = stdout.flush();
            let mut clients = output_clients.borrow_mut();
            if !clients.is_empty() {
                let text = String::from_utf8_lossy(bytes).into_owned();
                clients.retain(|client| client.send(text.clone()).is_ok());
            }
        });
    fleet.set_secret_inputs(secret_inputs);
    if let Err(message) = fleet.resume_recorded(arguments.timers, arguments.force) {
        eprintln!("error: {message}");
        return exit_code::INVALID;
    }
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let input = match &arguments.socket {
            Some(path) => match listen(path, clients) {
                Ok(input) => input,
                Err(code) => return code,
            },
            None => spawn_stdin_batches(arguments.max_event_bytes),
        };
        match fleet.run(input, stop_signal()).await {
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
    })
}

/// `--input NAME=VALUE` of `serve`: secret inputs (of the protocol or a child it invokes) for
/// the instances it resumes; any other input comes with an instance's first line.
fn secret_inputs(
    machine: &crate::compile::machine::Machine,
    texts: &[String],
) -> Result<Vec<(String, String)>, u8> {
    let names = machine.secret_input_names();
    let mut secret_inputs = Vec::new();
    for text in texts {
        let (name, value) = crate::compile::inputs::split_assignment(text).map_err(|error| {
            eprintln!("error: {error}");
            exit_code::USAGE
        })?;
        if !names.contains(&name.as_str()) {
            eprintln!(
                "error: --input {name}: serve takes only secret inputs, for the instances it \
                 resumes; an instance's other inputs come with its first line"
            );
            return Err(exit_code::USAGE);
        }
        secret_inputs.push((name, value));
    }
    Ok(secret_inputs)
}

/// Resolves on the first SIGINT or SIGTERM; never when they cannot be watched.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    // A busy instance's step does not yield to this task: it sees the flag, and parks.
    crate::compile::budget::watch_stop_signals();
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

/// Connected socket clients: each gets every output line.
type Clients = Rc<RefCell<Vec<mpsc::UnboundedSender<String>>>>;

/// Accepts clients on a Unix socket; their lines arrive on one channel.
fn listen(path: &std::path::Path, clients: Clients) -> Result<InputBatches, u8> {
    // A socket file left by a host that died would make the bind fail.
    if path.exists() {
        let _ = std::fs::remove_file(path);
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|error| {
        eprintln!("error: cannot listen on {}: {error}", path.display());
        exit_code::IO
    })?;
    let (sender, receiver) = mpsc::channel(1024);
    tokio::task::spawn_local(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (reader, mut writer) = stream.into_split();
            let (client, mut outgoing) = mpsc::unbounded_channel::<String>();
            clients.borrow_mut().push(client);
            tokio::task::spawn_local(async move {
                while let Some(lines) = outgoing.recv().await {
                    if writer.write_all(lines.as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
            let lines = sender.clone();
            tokio::task::spawn_local(async move {
                let mut reader = tokio::io::BufReader::new(reader).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if lines.send(LineBatch::of_line(&line)).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(receiver)
}
