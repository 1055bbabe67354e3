//! `protocol-run serve FILE.yaml`: many instances of one protocol in one process, fed JSON lines tagged with an instance id, each recorded and resumed with the host.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use clap::Args;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::exit_code;
use crate::actions::{Directive, LogRecord};
use crate::compile::machine::Machine;
use crate::diagnostic::render_all;
use crate::run::Interpreter;
use crate::run::driver::{
    InputLineError, InputLines, Observer, drive_instance, spawn_stdin_reader,
};
use crate::run::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::store::{
    Finish, NewRun, RunStatus, SqliteStore, Store, commit_checkpoint, content_hash,
};

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
    /// Events one instance may have waiting; a line beyond it is reported and skipped.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_queue: usize,
    /// The longest input line; a longer one is reported and skipped.
    #[arg(long, default_value_t = crate::run::driver::MAX_EVENT_LINE_BYTES, value_name = "BYTES")]
    max_event_bytes: usize,
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
    let machine = match crate::compile::compile(&loaded) {
        Ok(machine) => Arc::new(machine),
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            return exit_code::INVALID;
        }
    };
    let store = match SqliteStore::open(&arguments.state_dir) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("error: {error}");
            return exit_code::IO;
        }
    };
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
    let protocol_path = arguments
        .file
        .canonicalize()
        .unwrap_or_else(|_| arguments.file.clone())
        .display()
        .to_string();
    let host = Host {
        prefix: format!("{}:", machine.id),
        machine,
        store: Rc::new(RefCell::new(store)),
        protocol_path,
        protocol_hash: content_hash(&text),
        protocol_text: text,
        instances: HashMap::new(),
        max_queue: arguments.max_queue.max(1),
        tasks: tokio::task::JoinSet::new(),
        output: Output::default(),
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, host.run(&arguments))
}

/// Every output line, to stdout and to each connected socket client.
#[derive(Clone, Default)]
struct Output {
    clients: Rc<RefCell<Vec<mpsc::UnboundedSender<String>>>>,
}

impl Output {
    fn line(&self, value: &serde_json::Value) {
        use std::io::Write;
        let text = value.to_string();
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
        self.clients
            .borrow_mut()
            .retain(|client| client.send(text.clone()).is_ok());
    }
}

struct Host {
    machine: Arc<Machine>,
    store: Rc<RefCell<SqliteStore>>,
    protocol_path: String,
    protocol_hash: String,
    protocol_text: String,
    /// Run ids are `<protocol id>:<instance>`.
    prefix: String,
    /// Live instances: where their event lines go.
    instances: HashMap<String, mpsc::Sender<Result<String, String>>>,
    /// Events one instance may have waiting.
    max_queue: usize,
    tasks: tokio::task::JoinSet<()>,
    output: Output,
}

impl Host {
    async fn run(mut self, arguments: &ServeArguments) -> u8 {
        if let Err(code) = self.resume_recorded(arguments) {
            return code;
        }
        let mut lines = match &arguments.socket {
            Some(path) => match self.listen(path) {
                Ok(lines) => lines,
                Err(code) => return code,
            },
            None => spawn_stdin_reader(arguments.max_event_bytes),
        };
        let mut signals = match (
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()),
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()),
        ) {
            (Ok(interrupt), Ok(terminate)) => Some((interrupt, terminate)),
            _ => None,
        };
        let mut line_number = 0;
        let mut reading = true;
        loop {
            let stop = async {
                match signals.as_mut() {
                    Some((interrupt, terminate)) => tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                line = lines.recv(), if reading => match line {
                    Some(Ok(line)) => {
                        line_number += 1;
                        self.accept(line_number, &line);
                    }
                    Some(Err(message)) => {
                        line_number += 1;
                        eprintln!("warning: input line {line_number}: {message}; line skipped");
                    }
                    None => {
                        // No more input: instances finish what their timers and effects still
                        // hold, then the host ends.
                        reading = false;
                        self.instances.clear();
                    }
                },
                finished = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    if let Some(Err(error)) = finished
                        && error.is_panic()
                    {
                        eprintln!("internal error: an instance panicked: {error}");
                    }
                }
                () = stop => return self.stop(),
                else => return 0,
            }
            if !reading && self.tasks.is_empty() {
                return 0;
            }
        }
    }

    /// Stops every instance between macrosteps: their last steps are committed, so each is
    /// marked stopped and resumes with the next `serve`.
    fn stop(mut self) -> u8 {
        self.tasks.abort_all();
        let now = crate::clock::unix_milliseconds_now();
        let mut store = self.store.borrow_mut();
        let runs = store.list_runs().unwrap_or_default();
        for run in runs
            .iter()
            .filter(|run| run.id.starts_with(&self.prefix) && run.status == RunStatus::Running)
        {
            if let Err(error) = store.mark_stopped(&run.id, now) {
                eprintln!("warning: {error}");
            }
        }
        eprintln!(
            "serve stopped by a signal; {} instance(s) kept in {} resume with the next `serve`",
            self.instances.len(),
            store.location()
        );
        exit_code::UNFINISHED
    }

    /// Accepts clients on a Unix socket; their lines arrive on one channel.
    fn listen(&self, path: &std::path::Path) -> Result<InputLines, u8> {
        // A socket file left by a host that died would make the bind fail.
        if path.exists() {
            let _ = std::fs::remove_file(path);
        }
        let listener = tokio::net::UnixListener::bind(path).map_err(|error| {
            eprintln!("error: cannot listen on {}: {error}", path.display());
            exit_code::IO
        })?;
        let (sender, receiver) = mpsc::channel(1024);
        let clients = self.output.clients.clone();
        tokio::task::spawn_local(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (reader, mut writer) = stream.into_split();
                let (client, mut outgoing) = mpsc::unbounded_channel::<String>();
                clients.borrow_mut().push(client);
                tokio::task::spawn_local(async move {
                    while let Some(line) = outgoing.recv().await {
                        if writer
                            .write_all(format!("{line}\n").as_bytes())
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                });
                let lines = sender.clone();
                tokio::task::spawn_local(async move {
                    let mut reader = tokio::io::BufReader::new(reader).lines();
                    while let Ok(Some(line)) = reader.next_line().await {
                        if lines.send(Ok(line)).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Ok(receiver)
    }

    /// One input line: `{"instance": ID, "inputs": {...}, "event": NAME, "data": {...}}`, where
    /// `inputs` counts only when the line creates the instance and `event` is optional.
    fn accept(&mut self, line_number: usize, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        let problem = |message: String| {
            eprintln!("warning: input line {line_number}: {message}; line skipped");
        };
        let json: serde_json::Value = match serde_json::from_str(line) {
            Ok(json) => json,
            Err(error) => return problem(format!("not JSON: {error}")),
        };
        let Some(object) = json.as_object() else {
            return problem(
                "expected an object like {\"instance\": \"task-1\", \"event\": \"go\"}".into(),
            );
        };
        if let Some(key) = object
            .keys()
            .find(|key| !matches!(key.as_str(), "instance" | "inputs" | "event" | "data"))
        {
            return problem(format!(
                "unknown key `{key}`; a line has `instance`, and optional `inputs`, `event`, `data`"
            ));
        }
        let Some(instance) = object
            .get("instance")
            .and_then(serde_json::Value::as_str)
            .filter(|instance| !instance.is_empty())
        else {
            return problem("missing `instance` (a non-empty string)".into());
        };
        if !self.instances.contains_key(instance)
            && let Err(message) = self.create(instance, object.get("inputs"))
        {
            return problem(message);
        }
        let Some(event) = object.get("event") else {
            return;
        };
        let mut event_line = serde_json::Map::new();
        event_line.insert("event".into(), event.clone());
        if let Some(data) = object.get("data") {
            event_line.insert("data".into(), data.clone());
        }
        let Some(sender) = self.instances.get(instance) else {
            return problem(format!("instance `{instance}` has finished"));
        };
        match sender.try_send(Ok(serde_json::Value::Object(event_line).to_string())) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => problem(format!(
                "instance `{instance}` already has {} events waiting, the limit; raise it with \
                 --max-queue",
                self.max_queue
            )),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                problem(format!("instance `{instance}` has finished"));
            }
        }
    }

    /// Starts a new instance with the inputs of its first line.
    fn create(&mut self, instance: &str, inputs: Option<&serde_json::Value>) -> Result<(), String> {
        let run_id = format!("{}{instance}", self.prefix);
        if let Some(run) = self
            .store
            .borrow()
            .run(&run_id)
            .map_err(|error| error.to_string())?
        {
            return Err(match run.summary.status {
                RunStatus::Finished => format!("instance `{instance}` has finished"),
                _ => format!("instance `{instance}` exists but is not running here"),
            });
        }
        let supplied: Vec<(String, serde_json::Value)> = match inputs {
            None => Vec::new(),
            Some(serde_json::Value::Object(inputs)) => inputs
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            Some(other) => return Err(format!("`inputs` must be an object, not {other}")),
        };
        let values = self
            .machine
            .bind_input_values(&supplied)
            .map_err(|errors| {
                let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("instance `{instance}`: {}", messages.join("; "))
            })?;
        self.store
            .borrow_mut()
            .create_run(&NewRun {
                id: run_id.clone(),
                protocol_path: self.protocol_path.clone(),
                protocol_hash: self.protocol_hash.clone(),
                protocol_text: Some(self.protocol_text.clone()),
                inputs: self.machine.recorded_inputs(&values),
                started_unix_milliseconds: crate::clock::unix_milliseconds_now(),
            })
            .map_err(|error| error.to_string())?;
        let interpreter = Interpreter::new(self.machine.clone(), values);
        self.spawn(instance, run_id, interpreter, None);
        Ok(())
    }

    /// Resumes every unfinished instance of this protocol recorded by an earlier host.
    fn resume_recorded(&mut self, arguments: &ServeArguments) -> Result<(), u8> {
        let runs = self.store.borrow().list_runs().map_err(|error| {
            eprintln!("error: {error}");
            exit_code::IO
        })?;
        let recorded: Vec<_> = runs
            .into_iter()
            .filter(|run| {
                run.id.starts_with(&self.prefix)
                    && run.protocol_path == self.protocol_path
                    && run.status != RunStatus::Finished
            })
            .collect();
        for run in recorded {
            if run.protocol_hash != self.protocol_hash && !arguments.force {
                eprintln!(
                    "error: {} changed since instance `{}` started; restore the file, or pass \
                     --force to resume instances whose states still exist",
                    self.protocol_path,
                    &run.id[self.prefix.len()..]
                );
                return Err(exit_code::INVALID);
            }
            let instance = run.id[self.prefix.len()..].to_string();
            match self.restore(&run.id, arguments.timers) {
                Ok((interpreter, resume)) => self.spawn(&instance, run.id, interpreter, resume),
                Err(message) => eprintln!("error: instance `{instance}` cannot resume: {message}"),
            }
        }
        Ok(())
    }

    fn restore(
        &self,
        run_id: &str,
        timers: TimerPolicy,
    ) -> Result<(Interpreter, Option<Resume>), String> {
        let store = self.store.borrow();
        let record = store
            .run(run_id)
            .map_err(|error| error.to_string())?
            .ok_or_else(|| format!("no run `{run_id}`"))?;
        let recorded: Vec<(String, serde_json::Value)> = record
            .inputs
            .as_object()
            .map(|inputs| {
                inputs
                    .iter()
                    .filter(|(_, value)| !value.is_null())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let values = self
            .machine
            .bind_input_values(&recorded)
            .map_err(|errors| format!("{errors:?}"))?;
        match store
            .latest_snapshot(run_id)
            .map_err(|error| error.to_string())?
        {
            None => Ok((Interpreter::new(self.machine.clone(), values), None)),
            Some(stored) => {
                let interpreter =
                    Interpreter::restore(self.machine.clone(), values, &stored.snapshot)
                        .map_err(|error| error.to_string())?;
                Ok((
                    interpreter,
                    Some(Resume {
                        snapshot: stored.snapshot,
                        sequence: stored.sequence,
                        committed_unix_milliseconds: stored.unix_milliseconds,
                        timers,
                    }),
                ))
            }
        }
    }

    /// Runs an instance as a local task.
    fn spawn(
        &mut self,
        instance: &str,
        run_id: String,
        mut interpreter: Interpreter,
        resume: Option<Resume>,
    ) {
        let (sender, receiver) = mpsc::channel(self.max_queue);
        self.instances.insert(instance.to_string(), sender);
        let store = self.store.clone();
        let output = self.output.clone();
        let instance = instance.to_string();
        let machine = self.machine.clone();
        self.tasks.spawn_local(async move {
            let mut observer = InstanceObserver {
                instance: instance.clone(),
                output: output.clone(),
            };
            let mut checkpoint = SharedCheckpoint {
                store: store.clone(),
                run_id: run_id.clone(),
            };
            let report = drive_instance(
                &mut interpreter,
                receiver,
                &mut observer,
                &mut checkpoint,
                resume.as_ref(),
            )
            .await;
            let now = crate::clock::unix_milliseconds_now();
            let mut store = store.borrow_mut();
            let recorded = match report {
                Ok(report) => match report.outcome {
                    // The step that reached the final state finished the run in the store.
                    Some(outcome) => {
                        let state = machine.state(outcome.final_state).id.to_string();
                        output.line(&serde_json::json!({
                            "instance": instance,
                            "finished": {"state": state, "exit_code": outcome.exit_code, "output": outcome.output.to_json()},
                        }));
                        Ok(())
                    }
                    // Input ended with nothing left to wait for: kept for the next host.
                    None => store.mark_stopped(&run_id, now),
                },
                Err(error) => {
                    output.line(&serde_json::json!({"instance": instance, "error": error.to_string()}));
                    store.finish_run(
                        &run_id,
                        &Finish {
                            final_state: None,
                            exit_code: exit_code::INVALID.into(),
                            output: serde_json::Value::Null,
                            unix_milliseconds: now,
                        },
                    )
                }
            };
            if let Err(error) = recorded {
                eprintln!("warning: instance `{instance}`: {error}");
            }
        });
    }
}

/// Commits an instance's steps to the host's one store.
struct SharedCheckpoint {
    store: Rc<RefCell<SqliteStore>>,
    run_id: String,
}

impl Checkpoint for SharedCheckpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        commit_checkpoint(&mut *self.store.borrow_mut(), &self.run_id, step)
            .map_err(|error| error.to_string())
    }
}

/// Tags everything an instance says with its id: directives and state changes on stdout, logs
/// on stderr, all as JSON lines.
struct InstanceObserver {
    instance: String,
    output: Output,
}

impl Observer for InstanceObserver {
    fn log(&mut self, record: &LogRecord, time: &str) {
        let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
        let fields: serde_json::Map<String, serde_json::Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        eprintln!(
            "{}",
            serde_json::json!({
                "instance": self.instance,
                "time": time,
                "level": format!("{:?}", record.level).to_lowercase(),
                "message": record.message,
                "tags": tags,
                "fields": fields,
            })
        );
    }

    fn directive(&mut self, directive: &Directive) {
        let mut line = serde_json::Map::new();
        line.insert("instance".into(), self.instance.clone().into());
        if let serde_json::Value::Object(fields) = directive.to_json() {
            line.extend(fields);
        }
        self.output.line(&serde_json::Value::Object(line));
    }

    fn input_error(&mut self, error: &InputLineError) {
        eprintln!(
            "warning: instance `{}`: {}; event skipped",
            self.instance, error.message
        );
    }

    fn record(&mut self, _time: &str, kind: &str, fields: serde_json::Value) {
        let line = match kind {
            "start" => serde_json::json!({
                "instance": self.instance,
                "started": true,
                "configuration": fields["configuration"],
            }),
            "resume" => serde_json::json!({
                "instance": self.instance,
                "resumed": fields["step"],
                "configuration": fields["configuration"],
            }),
            "step" => serde_json::json!({
                "instance": self.instance,
                "event": fields["event"],
                "configuration": fields["configuration"],
            }),
            _ => return,
        };
        self.output.line(&line);
    }
}
