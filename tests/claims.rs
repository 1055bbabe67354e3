//! One holder per run, whoever drives it: a `resume` of a run a live `serve` host drives is refused naming the host, and the host's effect runs on, once.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

use protocol_run::store::{SqliteStore, Store};

/// An effect that records its start (its shell's pid, one line per start) and runs until the
/// test creates `go`.
const APPENDER: &str = r#"
id: appender
states:
  working:
    entry:
      - exec: [sh, -c, "echo $$ >> starts.txt; while [ ! -e go ]; do sleep 0.02; done"]
        id: work
    on:
      done.exec.work: done
  done: { type: final }
"#;

fn binary(directory: &Path, arguments: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
    command
        .args(arguments)
        .args(["--state-dir", "state"])
        .current_dir(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The lines of `child`'s stdout, read on a thread of their own.
fn stdout_lines(child: &mut Child) -> Receiver<String> {
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// The starts the effect recorded: one shell pid per line.
fn starts(directory: &Path) -> Vec<String> {
    std::fs::read_to_string(directory.join("starts.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Polls `condition` every 20 ms until it holds. No clock bounds it: each condition also holds
/// when the process it waits on has exited, so a failure ends the wait instead of hanging it.
fn wait_until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_resume_of_a_live_serve_instance_exits_75_naming_the_host_and_its_effect_runs_once() {
    let directory = crate::support::temporary_directory("claims", "serve-resume");
    std::fs::write(directory.join("appender.yaml"), APPENDER).unwrap();
    let mut host = binary(&directory, &["serve", "appender.yaml"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stdout_lines(&mut host);
    let mut input = host.stdin.take().unwrap();
    input.write_all(b"{\"instance\": \"a\"}\n").unwrap();
    input.flush().unwrap();
    // The effect runs, and the instance's start is committed with the host as its holder.
    let recorded = || {
        starts(&directory).len() == 1
            && SqliteStore::open(directory.join("state"))
                .ok()
                .and_then(|store| store.run_summary("appender:a").ok().flatten())
                .is_some_and(|run| run.holder.is_some())
    };
    wait_until(|| recorded() || host.try_wait().unwrap().is_some());
    assert!(
        recorded(),
        "serve ended before the effect started and the instance was recorded"
    );
    let effect = starts(&directory)[0].clone();

    let mut resume = binary(&directory, &["resume", "appender:a"])
        .spawn()
        .unwrap();
    // A resume not refused would kill the effect and start it again: wait for either.
    wait_until(|| resume.try_wait().unwrap().is_some() || starts(&directory).len() > 1);
    let _ = resume.kill();
    let output = resume.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        starts(&directory),
        std::slice::from_ref(&effect),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    let expected = format!(
        "error: run `appender:a` is being run by another process (pid {}, holding ",
        host.id()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(
        stderr.contains("host.lock, a `serve` host); wait for it to end, or stop it, then resume"),
        "{stderr}"
    );
    // The host's effect was left running: it ends when told, and the instance with it.
    let shell = nix::unistd::Pid::from_raw(effect.parse().unwrap());
    assert_eq!(
        nix::sys::signal::kill(shell, None),
        Ok(()),
        "the effect was killed"
    );
    std::fs::write(directory.join("go"), "").unwrap();
    let finished = lines
        .iter()
        .find(|line| line.contains(r#""instance":"a","finished""#))
        .expect("serve ended before the instance finished");
    assert!(finished.contains(r#""state":"done""#), "{finished}");
    drop(input);
    let status = host.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(starts(&directory), [effect], "the effect ran once");
}
