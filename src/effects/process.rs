//! Running a process in its own process group, with capped output and a timeout that kills the
//! whole group (SIGTERM, a grace period, then SIGKILL), so no grandchild survives.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// What to run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRequest {
    /// Program and arguments; each element is one argument, never split or interpreted.
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Variables added to (or overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    pub stdin: Option<String>,
    pub timeout: Option<Duration>,
    /// Bytes kept of stdout and of stderr each; the rest is read and dropped.
    pub output_limit: usize,
    /// Time between SIGTERM and SIGKILL on timeout.
    pub kill_grace: Duration,
    /// Written by the protocol as `shell: true` (a capability of its own).
    #[serde(default)]
    pub shell: bool,
    /// When the capabilities restrict the environment: the only variables inherited.
    #[serde(default)]
    pub inherit_env: Option<Vec<String>>,
    /// The file to run, resolved when the effect was admitted (a granted program, or a name
    /// found in an absolute `PATH` entry); `argv[0]` stays as written, so a multi-call binary
    /// behaves as the name it was granted under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
    /// Set in the process's environment as `PROTOCOL_RUN_EFFECT`, so that every process it
    /// starts, even one that left its group, can be found and stopped (see `stop_tagged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `RUN:INVOCATION`, given when the effect first started and kept with it (a resumed run
    /// starts it again with the same): each attempt's process gets it with the attempt's number
    /// as `PROTOCOL_RUN_IDEMPOTENCY_KEY` (`IDEMPOTENCY_KEY_VARIABLE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<String>,
    /// The exported trace this effect's attempts join (`--otlp`), given to the program as
    /// `TRACEPARENT` naming the attempt's span. Not kept with the run: a resumed run's exporter
    /// gives it again.
    #[serde(skip)]
    pub trace: Option<crate::base::trace_context::EffectTrace>,
}

/// The environment variable that marks an effect's processes and everything they start.
pub const EFFECT_TAG_VARIABLE: &str = "PROTOCOL_RUN_EFFECT";

/// The environment variable that gives an effect's process its idempotency key,
/// `RUN:INVOCATION:ATTEMPT`: the same for an attempt a resumed run starts again, another for
/// every new attempt, so that a program can make its own side effect happen once.
pub const IDEMPOTENCY_KEY_VARIABLE: &str = "PROTOCOL_RUN_IDEMPOTENCY_KEY";

/// A tag no other effect of any engine process on this machine has: this process's id, when
/// it started, and a count.
pub fn new_tag() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{}{count}", tag_prefix())
}

/// What every tag of this engine process starts with: its id and when it started.
pub fn tag_prefix() -> String {
    use std::sync::OnceLock;
    static STARTED: OnceLock<u64> = OnceLock::new();
    let started = STARTED.get_or_init(crate::base::clock::unix_milliseconds_now);
    format!("{}-{started}-", std::process::id())
}

/// Sends `signal` to every process whose environment carries `tag` (an effect's processes and
/// their descendants, including those that left the process group with `setsid` or a double
/// fork); returns how many were found. Reads `/proc`; elsewhere it finds none.
pub fn stop_tagged(tag: &str, signal: Signal) -> usize {
    let marker = format!("{EFFECT_TAG_VARIABLE}={tag}");
    stop_marked(signal, |variable| variable == marker.as_bytes())
}

/// `stop_tagged` for every tag that starts with `prefix` (`tag_prefix`: every effect of one
/// engine process).
pub fn stop_tagged_with_prefix(prefix: &str, signal: Signal) -> usize {
    let marker = format!("{EFFECT_TAG_VARIABLE}={prefix}");
    stop_marked(signal, |variable| variable.starts_with(marker.as_bytes()))
}

/// Sends `signal` to every process one of whose environment variables (`NAME=VALUE`) is
/// `marked`; returns how many were found.
fn stop_marked(signal: Signal, marked: impl Fn(&[u8]) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut found = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        // A process gone meanwhile, or not ours to read, is not one of the effect's.
        let Ok(environment) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environment.split(|byte| *byte == 0).any(&marked) {
            found += 1;
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
        }
    }
    found
}

/// Stops every process carrying `tag` and waits (up to `patience`) until none is left: a
/// resumed run does this before an interrupted effect is retried or failed, so no two copies
/// ever run. Says whether any was found.
pub fn stop_tagged_and_wait(tag: &str, patience: Duration) -> bool {
    let started = std::time::Instant::now();
    let found = stop_tagged(tag, Signal::SIGKILL) > 0;
    while found && started.elapsed() < patience && stop_tagged(tag, Signal::SIGKILL) > 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    found
}

impl ProcessRequest {
    pub fn new(argv: Vec<String>) -> ProcessRequest {
        ProcessRequest {
            argv,
            cwd: None,
            env: Vec::new(),
            stdin: None,
            timeout: None,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            kill_grace: DEFAULT_KILL_GRACE,
            shell: false,
            inherit_env: None,
            program: None,
            tag: None,
            idempotency: None,
            trace: None,
        }
    }
}

/// Bytes of stdout and of stderr kept by default.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;
/// Time between SIGTERM and SIGKILL by default.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// After the main process exits, how long leftover members of its group may keep the output
/// pipes open before they are killed.
const LINGER: Duration = Duration::from_millis(200);

/// How a process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessOutcome {
    /// The exit code, or None when a signal ended it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Whether stdout or stderr was cut at the limit.
    pub truncated: bool,
    pub duration: Duration,
    pub timed_out: bool,
}

/// Why a process could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("nothing to run: the argument list is empty")]
    EmptyArgv,
    #[error("cannot start `{program}`: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("lost track of `{program}`: {error}")]
    Wait {
        program: String,
        error: std::io::Error,
    },
}

/// Kills the whole group, and every process carrying the effect's tag, if the run is abandoned
/// (its future dropped, e.g. the engine stops).
struct GroupGuard {
    group: Option<Pid>,
    tag: Option<String>,
}

impl GroupGuard {
    fn signal(&self, signal: Signal) {
        if let Some(group) = self.group {
            // The group may already be gone; that is the outcome we want.
            let _ = killpg(group, signal);
        }
        if let Some(tag) = &self.tag {
            stop_tagged(tag, signal);
        }
    }
}

impl GroupGuard {
    /// Kills whatever is left of the effect, and stops watching it: the watchdog need not.
    fn release(&mut self) {
        self.signal(Signal::SIGKILL);
        if let Some(group) = self.group.take() {
            crate::effects::watchdog::forget(group);
        }
        self.tag = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.release();
    }
}

/// Runs the process to completion, timeout or cancellation.
pub async fn run_process(
    request: &ProcessRequest,
    grant: Option<&crate::effects::sandbox::Grant>,
    cancellation: &mut super::Cancellation,
) -> Result<ProcessOutcome, ProcessError> {
    let program = request.argv.first().ok_or(ProcessError::EmptyArgv)?.clone();
    // A name is found here, not by the system's `execvp`, which would also search `.` and empty
    // `PATH` entries; the action's own `PATH` counts when it sets one.
    let resolved = match &request.program {
        Some(resolved) => resolved.clone(),
        // A path is taken as written (relative to `cwd`, as the system would).
        None if program.contains('/') => PathBuf::from(&program),
        None => {
            let search = request
                .env
                .iter()
                .rev()
                .find(|(name, _)| name == "PATH")
                .map(|(_, value)| std::ffi::OsString::from(value));
            crate::effects::capabilities::resolve_program_on(&program, search).ok_or_else(|| {
                ProcessError::Spawn {
                    program: program.clone(),
                    error: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "not found in the absolute directories of PATH",
                    ),
                }
            })?
        }
    };
    let mut command = Command::new(&resolved);
    // As written: a multi-call binary acts as the name it was granted under.
    command.arg0(&program);
    if let Some(inherited) = &request.inherit_env {
        // Only the permitted variables reach the process.
        command.env_clear();
        for name in inherited {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
    }
    command
        .args(&request.argv[1..])
        .envs(request.env.iter().map(|(key, value)| (key, value)))
        .stdin(if request.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(tag) = &request.tag {
        command.env(EFFECT_TAG_VARIABLE, tag);
    }
    if let Some(key) = &request.idempotency {
        command.env(IDEMPOTENCY_KEY_VARIABLE, key);
    }
    // Injected like the tag and the key, grant or no grant: it names this attempt's span, so
    // the programs it starts can join the run's trace.
    if let Some(trace) = &request.trace {
        command.env(
            crate::base::trace_context::TRACEPARENT_VARIABLE,
            trace.traceparent(),
        );
    }
    if let Some(cwd) = &request.cwd {
        command.current_dir(cwd);
    }
    if let Some(grant) = grant.filter(|grant| grant.confines()) {
        // Built here, at each attempt, from the paths as they are now; applied in the child
        // between fork and exec, so nothing the program does escapes it.
        let program_file = match &request.cwd {
            Some(cwd) if resolved.is_relative() => cwd.join(&resolved),
            _ => resolved.clone(),
        };
        let program_file = program_file.canonicalize().unwrap_or(program_file);
        let mut confinement = grant
            .confinement(crate::effects::sandbox::Confined::Process {
                program: &program_file,
            })
            .map_err(|error| ProcessError::Spawn {
                program: program.clone(),
                error: std::io::Error::other(error.to_string()),
            })?;
        // SAFETY: `enforce` makes only system calls (prctl, landlock_restrict_self, close)
        // and allocates nothing on success, as the child of a fork must.
        unsafe {
            command.pre_exec(move || confinement.enforce());
        }
    }
    crate::effects::watchdog::ready();
    let started = Instant::now();
    let mut child = command.spawn().map_err(|error| ProcessError::Spawn {
        program: program.clone(),
        error,
    })?;
    let mut guard = GroupGuard {
        group: child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
        tag: request.tag.clone(),
    };
    // Should this engine be killed, its watchdog stops the group (and the tagged processes).
    if let Some(group) = guard.group {
        crate::effects::watchdog::watch(group);
    }
    if let (Some(input), Some(mut stdin)) = (&request.stdin, child.stdin.take()) {
        let input = input.clone().into_bytes();
        tokio::spawn(async move {
            // A process that exits without reading its input is not an error.
            let _ = stdin.write_all(&input).await;
        });
    }
    let stdout = tokio::spawn(read_capped(child.stdout.take(), request.output_limit));
    let stderr = tokio::spawn(read_capped(child.stderr.take(), request.output_limit));
    let (status, timed_out) =
        wait_or_kill(&mut child, &guard, request, &program, cancellation).await?;
    // Leftover members of the group may hold the pipes open: give them a moment, then kill them.
    let output =
        crate::base::clock::real_timeout(LINGER, async { (stdout.await, stderr.await) }).await;
    // Whatever the effect started is stopped with it, in its group or not.
    guard.release();
    let ((stdout, stdout_truncated), (stderr, stderr_truncated)) = match output {
        Some((Ok(stdout), Ok(stderr))) => (stdout, stderr),
        _ => ((String::new(), true), (String::new(), true)),
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(ProcessOutcome {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        truncated: stdout_truncated || stderr_truncated,
        duration: started.elapsed(),
        timed_out,
    })
}

/// Waits for the process; on timeout or cancellation, SIGTERM to the group, the grace period,
/// then SIGKILL. Says whether it timed out.
async fn wait_or_kill(
    child: &mut Child,
    guard: &GroupGuard,
    request: &ProcessRequest,
    program: &str,
    cancellation: &mut super::Cancellation,
) -> Result<(std::process::ExitStatus, bool), ProcessError> {
    let wait_error = |error| ProcessError::Wait {
        program: program.to_string(),
        error,
    };
    // Real time: a real process runs on the wall clock even when the run's clock is virtual.
    let waited = async {
        match request.timeout {
            Some(timeout) => crate::base::clock::real_timeout(timeout, child.wait()).await,
            None => Some(child.wait().await),
        }
    };
    let timed_out = tokio::select! {
        biased;
        waited = waited => match waited {
            Some(status) => return Ok((status.map_err(wait_error)?, false)),
            None => true,
        },
        () = cancellation.cancelled() => false,
    };
    guard.signal(Signal::SIGTERM);
    let status = match crate::base::clock::real_timeout(request.kill_grace, child.wait()).await {
        Some(status) => status.map_err(wait_error)?,
        None => {
            guard.signal(Signal::SIGKILL);
            child.wait().await.map_err(wait_error)?
        }
    };
    Ok((status, timed_out))
}

/// Reads a pipe to its end, keeping at most `limit` bytes; returns the text and whether it was cut.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, limit: usize) -> (String, bool) {
    let Some(mut pipe) = pipe else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    let mut truncated = false;
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..read.min(room)]);
                truncated |= read > room;
            }
        }
    }
    if truncated {
        // A secret cut by the limit would leave its first characters, which masking cannot tell.
        kept.truncate(kept.len() - crate::base::secrets::secret_begun_at_end(&kept));
    }
    (String::from_utf8_lossy(&kept).into_owned(), truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| word.to_string()).collect()
    }

    #[test]
    fn captures_output_exit_code_stdin_cwd_and_env() {
        let mut request =
            ProcessRequest::new(argv(&["sh", "-c", "cat; pwd; echo $GREETING >&2; exit 3"]));
        request.stdin = Some("from stdin\n".into());
        request.cwd = Some(PathBuf::from("/tmp"));
        request.env = vec![("GREETING".into(), "hello".into())];
        let outcome = runtime()
            .block_on(run_process(&request, None, &mut Default::default()))
            .unwrap();
        assert_eq!(outcome.exit_code, Some(3));
        assert_eq!(outcome.stdout, "from stdin\n/tmp\n");
        assert_eq!(outcome.stderr, "hello\n");
        assert!(!outcome.truncated && !outcome.timed_out);
    }

    #[test]
    fn arguments_are_never_interpreted_by_a_shell() {
        let request = ProcessRequest::new(argv(&["echo", "; rm -rf /tmp/x", "$(id)", "a\nb"]));
        let outcome = runtime()
            .block_on(run_process(&request, None, &mut Default::default()))
            .unwrap();
        assert_eq!(outcome.stdout, "; rm -rf /tmp/x $(id) a\nb\n");
    }

    #[test]
    fn output_is_capped_with_a_flag() {
        let mut request = ProcessRequest::new(argv(&["sh", "-c", "yes x | head -c 100000"]));
        request.output_limit = 1000;
        let outcome = runtime()
            .block_on(run_process(&request, None, &mut Default::default()))
            .unwrap();
        assert_eq!(outcome.stdout.len(), 1000);
        assert!(outcome.truncated);
        assert_eq!(outcome.exit_code, Some(0));
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let marker =
            std::env::temp_dir().join(format!("protocol-run-grandchild-{}", std::process::id()));
        let script = format!("(sleep 30; touch {}) & sleep 30", marker.display());
        let mut request = ProcessRequest::new(argv(&["sh", "-c", &script]));
        request.timeout = Some(Duration::from_millis(200));
        request.kill_grace = Duration::from_millis(100);
        let started = std::time::Instant::now();
        let outcome = runtime()
            .block_on(run_process(&request, None, &mut Default::default()))
            .unwrap();
        assert!(outcome.timed_out);
        assert_eq!(outcome.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        // No member of the group is left: `pgrep -g` finds none with that group id.
        let leftovers = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ps -eo args | grep -c '[t]ouch {}'",
                marker.display()
            ))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&leftovers.stdout).trim(), "0");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let request = ProcessRequest::new(argv(&["definitely-not-a-program-xyz"]));
        let error = runtime()
            .block_on(run_process(&request, None, &mut Default::default()))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("cannot start `definitely-not-a-program-xyz`")
        );
    }
}
