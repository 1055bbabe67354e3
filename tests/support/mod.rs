//! Test support: load YAML text into a running machine, send events, step virtual time, read the trace.

pub mod mcp_http_server;
pub mod mcp_raw;
pub mod npm_package;
pub mod postgres;
pub mod python_venv;
pub mod requirement;
pub mod timing;

use std::collections::VecDeque;
use std::sync::Arc;

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::effects::EffectRequest;
use protocol_run::pipeline::actions::{Host, LogRecord, SendRequest};
use protocol_run::pipeline::compile::machine::{Machine, StateId, TransitionId};
use protocol_run::runtime::run::Interpreter;

/// One observable step, in the order the engine did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `enter:STATE`
    Enter(String),
    /// `exit:STATE`
    Exit(String),
    /// `log:MESSAGE`
    Log(String),
}

/// Compiles YAML (panicking with the rendered diagnostics if it is invalid).
pub fn machine(yaml: &str) -> Arc<Machine> {
    let loaded = protocol_run::pipeline::load::load_text("test.yaml", yaml.to_string())
        .unwrap_or_else(|diagnostics| {
            panic!(
                "{}",
                protocol_run::base::diagnostic::render_all(&diagnostics)
            )
        });
    let machine = protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
        panic!(
            "{}",
            protocol_run::base::diagnostic::render_all(&diagnostics)
        )
    });
    Arc::new(machine)
}

/// Asserts that `rendered` diagnostics hold one whose message has `message` and whose
/// location is `location` (`FILE:LINE:COLUMN`).
pub fn assert_located(rendered: &str, message: &str, location: &str) {
    let at = rendered
        .find(message)
        .unwrap_or_else(|| panic!("no `{message}` in:\n{rendered}"));
    let diagnostic = rendered[at..].split("\n\n").next().unwrap_or_default();
    assert!(
        diagnostic.contains(&format!("--> {location}\n")),
        "`{message}` not at {location}:\n{rendered}"
    );
}

/// The diagnostics of an invalid protocol, rendered.
pub fn errors(yaml: &str) -> String {
    // As `validate` reads it: schema, structure and expression problems together.
    match protocol_run::pipeline::compile::set_aside::load_and_compile_text(
        "test.yaml",
        yaml.to_string(),
    ) {
        Err(diagnostics) => protocol_run::base::diagnostic::render_all(&diagnostics),
        Ok(_) => panic!("expected the protocol to be invalid"),
    }
}

/// A host with a virtual clock: delayed sends become timers that `advance` fires in order.
#[derive(Default)]
pub struct TestHost {
    machine: Option<Arc<Machine>>,
    pub steps: Vec<Step>,
    pub logs: Vec<LogRecord>,
    pub transitions: Vec<TransitionId>,
    pub external_queue: VecDeque<Event>,
    /// (deadline in virtual ms, sequence, send id, event)
    pub timers: Vec<(u64, u64, Option<String>, Event)>,
    pub now: u64,
    sequence: u64,
    /// Effects started; a test completes them with `Run::complete_effect`.
    pub effects: Vec<EffectRequest>,
    /// Directives emitted, as the JSON lines the CLI prints.
    pub directives: Vec<serde_json::Value>,
    /// Ids of child protocols started, and cancelled.
    pub invoked: Vec<String>,
    pub cancelled_invokes: Vec<String>,
}

impl Host for TestHost {
    fn log(&mut self, record: LogRecord) {
        self.steps.push(Step::Log(record.message.clone()));
        self.logs.push(record);
    }

    fn send(&mut self, request: SendRequest) {
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
        } else {
            self.sequence += 1;
            let id = request.id.as_deref().map(String::from);
            self.timers.push((
                self.now + request.delay_milliseconds,
                self.sequence,
                id,
                request.event,
            ));
            self.timers
                .sort_by_key(|(deadline, sequence, _, _)| (*deadline, *sequence));
        }
    }

    fn cancel(&mut self, send_id: &str) {
        self.timers
            .retain(|(_, _, id, _)| id.as_deref() != Some(send_id));
    }

    fn start_effect(&mut self, request: EffectRequest) {
        self.effects.push(request);
    }

    fn start_invoke(&mut self, request: protocol_run::pipeline::actions::InvokeRequest) {
        self.invoked.push(request.id.to_string());
    }

    fn cancel_invoke(&mut self, id: &str) {
        self.cancelled_invokes.push(id.to_string());
    }

    fn emit(&mut self, directive: protocol_run::pipeline::actions::Directive) {
        self.directives.push(directive.to_json());
    }

    fn state_entered(&mut self, state: StateId) {
        let name = self.machine.as_ref().unwrap().state(state).id.to_string();
        self.steps.push(Step::Enter(name));
    }

    fn state_exited(&mut self, state: StateId) {
        let name = self.machine.as_ref().unwrap().state(state).id.to_string();
        self.steps.push(Step::Exit(name));
    }

    fn transition_taken(&mut self, transition: TransitionId) {
        self.transitions.push(transition);
    }
}

/// A started machine with a virtual clock.
pub struct Run {
    pub machine: Arc<Machine>,
    pub interpreter: Interpreter,
    pub host: TestHost,
}

impl Run {
    /// Compiles and starts `yaml` with no inputs (defaults apply).
    pub fn start(yaml: &str) -> Run {
        Run::start_with_inputs(yaml, &[])
    }

    pub fn start_with_inputs(yaml: &str, inputs: &[(&str, &str)]) -> Run {
        Run::start_with_clock(yaml, inputs, 0)
    }

    /// Compiles and starts `yaml` with its clock (`now()`, virtual) at `unix_milliseconds`.
    pub fn start_at(yaml: &str, unix_milliseconds: u64) -> Run {
        Run::start_with_clock(yaml, &[], unix_milliseconds)
    }

    fn start_with_clock(yaml: &str, inputs: &[(&str, &str)], unix_milliseconds: u64) -> Run {
        let machine = machine(yaml);
        let supplied: Vec<(String, String)> = inputs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let inputs = machine.bind_inputs(&supplied).expect("inputs bind");
        let mut run = Run {
            interpreter: Interpreter::new(machine.clone(), inputs),
            host: TestHost {
                machine: Some(machine.clone()),
                now: unix_milliseconds,
                ..TestHost::default()
            },
            machine,
        };
        run.interpreter.set_clock(unix_milliseconds);
        run.interpreter.start(&mut run.host).expect("start");
        run.deliver_queued();
        run
    }

    /// Sends an external event (no data), then delivers any events it sent without delay.
    pub fn send(&mut self, name: &str) -> &mut Run {
        self.send_with(name, serde_json::Value::Null)
    }

    pub fn send_with(&mut self, name: &str, data: serde_json::Value) -> &mut Run {
        let event = Event::named(
            &self.machine,
            name,
            Value::from_json(&data),
            Origin::External,
        );
        self.interpreter.set_clock(self.host.now);
        self.interpreter
            .handle(&event, &mut self.host)
            .expect("macrostep");
        self.deliver_queued();
        self
    }

    /// Delivers queued external events (from `send` without delay) one at a time.
    pub fn deliver_queued(&mut self) {
        while let Some(event) = self.host.external_queue.pop_front() {
            self.interpreter.set_clock(self.host.now);
            self.interpreter
                .handle(&event, &mut self.host)
                .expect("macrostep");
        }
    }

    /// Advances virtual time by `milliseconds`, firing due timers one at a time, in order.
    pub fn advance(&mut self, milliseconds: u64) -> &mut Run {
        let until = self.host.now + milliseconds;
        loop {
            let due = self
                .host
                .timers
                .first()
                .filter(|(deadline, ..)| *deadline <= until)
                .cloned();
            let Some((deadline, ..)) = due else { break };
            let (_, _, _, event) = self.host.timers.remove(0);
            self.host.now = deadline;
            self.interpreter.set_clock(deadline);
            self.interpreter
                .handle(&event, &mut self.host)
                .expect("macrostep");
            self.deliver_queued();
        }
        self.host.now = until;
        self
    }

    /// Steps since the last call, as `enter:x`, `exit:x`, `log:m` strings.
    pub fn take_steps(&mut self) -> Vec<String> {
        std::mem::take(&mut self.host.steps)
            .into_iter()
            .map(|step| match step {
                Step::Enter(state) => format!("enter:{state}"),
                Step::Exit(state) => format!("exit:{state}"),
                Step::Log(message) => format!("log:{message}"),
            })
            .collect()
    }

    /// Only the log messages since the last `take_*` call.
    pub fn take_logs(&mut self) -> Vec<String> {
        self.take_steps()
            .into_iter()
            .filter_map(|step| step.strip_prefix("log:").map(String::from))
            .collect()
    }

    /// Active atomic states, sorted.
    pub fn leaves(&self) -> Vec<String> {
        let mut leaves: Vec<String> = self
            .interpreter
            .active_leaves()
            .into_iter()
            .map(String::from)
            .collect();
        leaves.sort();
        leaves
    }

    /// Every active state, in document order.
    pub fn configuration(&self) -> Vec<String> {
        self.interpreter
            .configuration()
            .map(|state| self.machine.state(state).id.to_string())
            .collect()
    }

    pub fn context(&self, name: &str) -> serde_json::Value {
        self.interpreter
            .context_value(name)
            .expect("context variable")
            .to_json()
    }
}

/// A fresh directory for one test, `protocol-run-<group>-<name>-<pid>` in the temporary
/// directory (emptied if a former run left it), removed when the test passes and kept, with a
/// line naming it, when it fails.
pub fn temporary_directory(group: &str, name: &str) -> TemporaryDirectory {
    let directory = std::env::temp_dir().join(format!(
        "protocol-run-{group}-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    TemporaryDirectory(directory)
}

/// A test's directory: a path everywhere a path is taken, removed when dropped unless the test
/// is failing (thousands of runs of the suite filled a machine's disk with them).
#[derive(Debug)]
pub struct TemporaryDirectory(std::path::PathBuf);

impl std::ops::Deref for TemporaryDirectory {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &std::path::PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for TemporaryDirectory {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TemporaryDirectory {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl serde::Serialize for TemporaryDirectory {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl Drop for TemporaryDirectory {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for a look: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs the built `protocol-run` in `directory` with `arguments` and stdin closed; returns
/// (exit code, stdout, stderr).
pub fn run_binary(directory: &std::path::Path, arguments: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .current_dir(directory)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Runs the built `protocol-run` in `directory` with `arguments`, `input` written to its stdin
/// (then closed); returns its output.
pub fn run_binary_with_input(
    directory: &std::path::Path,
    arguments: &[&str],
    input: &[u8],
) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Runs the built `protocol-run` in `directory` with `arguments`, `--state-dir state`, the
/// variables of `environment` (a store chosen by `PROTOCOL_RUN_STORE`, say) and stdin closed;
/// returns (exit code, stdout, stderr).
pub fn run_binary_in(
    directory: &std::path::Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", "state"])
        .envs(environment.iter().copied())
        .current_dir(directory)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Runs the built `protocol-run` in `directory` with `arguments`, `--state-dir DIRECTORY/state`
/// and stdin closed; returns (exit code, stdout then stderr), for a test that checks both.
pub fn run_binary_with_state(directory: &std::path::Path, arguments: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .arg("--state-dir")
        .arg(directory.join("state"))
        .current_dir(directory)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// How long `eventually` waits before it calls a wait a hang: a guard for a condition that holds
/// within milliseconds, not a bound on how fast it must hold.
pub const HANG: std::time::Duration = std::time::Duration::from_secs(120);

/// Polls `probe` every 10 ms until it gives a value; fails, naming `what`, only past `HANG`.
pub fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(started.elapsed() < HANG, "{what} never happened");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Polls `status --json` of the one run in `state` (run from `directory`) until `ready` holds
/// of it; fails, naming `what`, only past `HANG` (a run's first step can take over 20 s to show
/// while the whole suite loads both cores, as a CI run saw once).
pub fn wait_for_status(
    directory: &std::path::Path,
    state: &std::path::Path,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) {
    let started = std::time::Instant::now();
    loop {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["status", "--json", "--state-dir", state.to_str().unwrap()])
            .current_dir(directory)
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
        if ready(&status) {
            return;
        }
        assert!(started.elapsed() < HANG, "{what} never happened: {status}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Asserts that one diagnostic of `rendered` (blocks are separated by blank lines) says each of
/// `parts` (its message, its `FILE:LINE:COL`, its help).
pub fn assert_diagnostic(rendered: &str, parts: &[&str]) {
    let found = rendered
        .split("\n\n")
        .any(|block| parts.iter().all(|part| block.contains(part)));
    assert!(found, "no diagnostic saying {parts:?} in:\n{rendered}");
}

/// Every telemetry entry of the one run recorded under `directory/state`.
pub fn read_telemetry(directory: &std::path::Path) -> Vec<serde_json::Value> {
    let runs = directory.join("state/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .expect("a run's telemetry")
        .unwrap()
        .path();
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every protocol shipped in `protocols/` and anywhere under `examples/`, sorted (not
/// scenarios, not libraries).
pub fn shipped_protocols() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pending = vec![root.join("protocols"), root.join("examples")];
    let mut paths = Vec::new();
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("a directory") {
            let path = entry.expect("an entry").path();
            let name = path.to_string_lossy().to_string();
            if path.is_dir() {
                pending.push(path);
            } else if name.ends_with(".yaml")
                && !name.ends_with(".scenario.yaml")
                && !name.ends_with(".library.yaml")
            {
                paths.push(path);
            }
        }
    }
    paths.sort();
    assert!(paths.len() > 30, "found only {paths:?}");
    paths
}

/// A protocol file compiled (panicking with the file's name if it does not load or compile).
pub fn compiled_file(path: &std::path::Path) -> Machine {
    let loaded = protocol_run::pipeline::load::load_file(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    protocol_run::pipeline::compile::compile(&loaded)
        .unwrap_or_else(|_| panic!("{} does not compile", path.display()))
}

/// A small deterministic generator (xorshift), so a failing case is named by its seed.
pub struct Random(pub u64);

impl Random {
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The `log` lines a run printed on `stderr`, each after `prefix` (`"INFO  "`, or a level and
/// the message's start), without their time, level and tags.
pub fn logged(stderr: &str, prefix: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| line.split_once(prefix).map(|(_, rest)| rest))
        .map(|rest| rest.split(" #").next().unwrap_or(rest).trim().to_string())
        .collect()
}
