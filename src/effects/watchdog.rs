//! A watchdog process that outlives a killed engine just long enough to stop its effects: it holds one end of a socket pair whose other end only the engine has, and when that closes (the engine exited or was killed, even with SIGKILL) it kills every effect group the engine told it of and every process carrying the engine's effect tags.

use std::collections::HashSet;
use std::io::BufRead;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::sys::signal::{SigHandler, Signal, killpg, signal};
use nix::unistd::Pid;

/// The first argument that makes the `protocol-run` binary a watchdog (not a command a user
/// types: it is refused by the command line otherwise).
pub const ARGUMENT: &str = "__effect-watchdog";

/// How many times the watchdog looks again for tagged processes: one found may have started
/// another meanwhile.
const TAG_ROUNDS: usize = 50;

/// The binary to start as the watchdog, once `enable` said which; `None` in a program that did
/// not enable it (the library in a test, which stops its effects itself).
static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// This engine's end of the watchdog's input (a socket pair, which a write to a gone watchdog
/// answers with `EPIPE` rather than a SIGPIPE that would end the engine), made with the first
/// effect process; `None` if it could not start (said once on stderr).
static PIPE: OnceLock<Mutex<Option<UnixStream>>> = OnceLock::new();

/// Makes this process start a watchdog (this same binary, `ARGUMENT`) with its first effect
/// process. Called by the `protocol-run` binary at start.
pub fn enable() {
    if let Ok(program) = std::env::current_exe() {
        let _ = PROGRAM.set(program);
    }
}

/// Starts the watchdog if it is enabled and not started yet: called before an effect process
/// is, so that no moment exists where one runs unwatched.
pub fn ready() {
    if let Some(program) = PROGRAM.get() {
        PIPE.get_or_init(|| Mutex::new(start(program)));
    }
}

/// Tells the watchdog about the effect process group `group` just started.
pub fn watch(group: Pid) {
    tell(&format!("+{group}\n"));
}

/// Tells the watchdog the effect process group `group` was stopped and reaped.
pub fn forget(group: Pid) {
    tell(&format!("-{group}\n"));
}

fn tell(line: &str) {
    let Some(program) = PROGRAM.get() else {
        return;
    };
    let pipe = PIPE.get_or_init(|| Mutex::new(start(program)));
    let mut pipe = pipe.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(stream) = pipe.as_ref()
        && !send_all(stream, line.as_bytes())
    {
        eprintln!(
            "warning: the effect watchdog ended: effect processes may outlive this engine if it \
             is killed"
        );
        *pipe = None;
    }
}

/// Writes all of `bytes` with `MSG_NOSIGNAL`; false when the watchdog is gone.
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> bool {
    use nix::libc;
    while !bytes.is_empty() {
        // SAFETY: a write of a live buffer to a descriptor this process owns.
        let sent = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if sent < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        bytes = &bytes[sent as usize..];
    }
    true
}

/// Starts the watchdog: its own process group (a signal to the engine's group does not reach
/// it), its input the other end of a socket pair, no output (it must not hold the engine's
/// output open), the engine's tag prefix as its argument.
fn start(program: &PathBuf) -> Option<UnixStream> {
    use std::os::unix::process::CommandExt;
    let failed = |error: std::io::Error| {
        eprintln!(
            "warning: cannot start the effect watchdog ({}: {error}): effect processes may \
             outlive this engine if it is killed",
            program.display()
        );
    };
    // Both ends close on exec: the watchdog's is made its stdin, and no effect inherits either.
    let (engine_end, watchdog_end) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(error) => {
            failed(error);
            return None;
        }
    };
    let started = Command::new(program)
        .arg(ARGUMENT)
        .arg(crate::effects::process::tag_prefix())
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(watchdog_end)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    match started {
        // Never waited for: it exits when this process's end closes, and is then reaped by
        // init.
        Ok(_) => Some(engine_end),
        Err(error) => {
            failed(error);
            None
        }
    }
}

/// The watchdog itself (`protocol-run __effect-watchdog TAG_PREFIX`): reads `+GROUP` and
/// `-GROUP` lines until its input ends, then kills every group still listed and every process
/// whose effect tag starts with `TAG_PREFIX`. Returns the exit code.
pub fn serve(arguments: &[String]) -> u8 {
    let [prefix] = arguments else {
        eprintln!("error: {ARGUMENT} takes one argument, the engine's effect tag prefix");
        return crate::base::exit_code::USAGE;
    };
    // The engine's terminal signals are the engine's to handle; this process waits for its
    // pipe to close whatever happens to the engine.
    for ignored in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        // SAFETY: ignoring a signal installs no handler code.
        unsafe {
            let _ = signal(ignored, SigHandler::SigIgn);
        }
    }
    let mut groups: HashSet<i32> = HashSet::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            break;
        };
        let (sign, number) = line.split_at(line.len().min(1));
        match (sign, number.parse::<i32>()) {
            ("+", Ok(group)) if group > 1 => {
                groups.insert(group);
            }
            ("-", Ok(group)) => {
                groups.remove(&group);
            }
            _ => {}
        }
    }
    for group in groups {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
    // Processes that left their group (`setsid`, a double fork) still carry the tag.
    for _ in 0..TAG_ROUNDS {
        if crate::effects::process::stop_tagged_with_prefix(prefix, Signal::SIGKILL) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    0
}
