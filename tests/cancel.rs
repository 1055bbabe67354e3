//! `protocol-run cancel`: a run a process holds (`run`, a `serve` host) is cancelled by that process through its inbox, one nobody holds is recorded cancelled at once; either way its effects' processes are stopped and it finishes with exit code 130.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::engine_death::running;
use crate::support;

/// Waits in `waiting` for `go`, while an effect sleeps (its pid in `nap.pid`).
const NAPPER: &str = r#"
id: napper
states:
  waiting:
    entry:
      - exec: [sh, -c, 'echo $$ > nap.pid; exec sleep 300']
        id: nap
        timeout: 600s
    on:
      go: done
      done.exec.nap: done
  done: { type: final }
"#;

fn napper(name: &str) -> support::TemporaryDirectory {
    let directory = support::temporary_directory("cancel", name);
    std::fs::write(directory.join("napper.yaml"), NAPPER).unwrap();
    directory
}

/// `protocol-run ARGUMENTS` in `directory`, stdin held open, stdout and stderr piped.
fn spawn(directory: &Path, arguments: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", "state"])
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The sleeping effect's pid, once it has written it.
fn nap_pid(directory: &Path) -> i32 {
    support::eventually("the effect's pid", || {
        std::fs::read_to_string(directory.join("nap.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

fn cancel(directory: &Path, run: &str) -> (i32, String, String) {
    support::run_binary(directory, &["cancel", run, "--state-dir", "state"])
}

fn status(directory: &Path, run: &str) -> Value {
    let (code, stdout, stderr) = support::run_binary(
        directory,
        &["status", run, "--json", "--state-dir", "state"],
    );
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn wait_until_stopped(pid: i32) {
    support::eventually("the effect's process to be stopped", || {
        (!running(pid)).then_some(())
    });
}

#[test]
fn a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox() {
    let directory = napper("held");
    // Its stdin stays open until it is waited for: the run waits for events, and its inbox.
    let run = spawn(
        &directory,
        &["run", "napper.yaml", "--run-id", "napping", "--events", "-"],
    );
    let pid = nap_pid(&directory);
    let (code, stdout, stderr) = cancel(&directory, "napping");
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "queued", "{answer}");
    assert_eq!(answer["entry"], 1, "{answer}");
    assert!(stderr.contains("held by another process"), "{stderr}");
    // The holder takes the request: it ends with 130, its effect's process stopped.
    let output = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stdout}\n{stderr}");
    let line: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(line["cancelled"]["entry"], 1, "{line}");
    assert_eq!(line["cancelled"]["states"][0], "waiting", "{line}");
    assert!(
        stderr.contains("run napping cancelled (inbox entry 1)"),
        "{stderr}"
    );
    wait_until_stopped(pid);
    let recorded = status(&directory, "napping");
    assert_eq!(recorded["status"], "finished", "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
    // A finished run has nothing left to cancel.
    let (code, _, stderr) = cancel(&directory, "napping");
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("has finished: there is nothing to cancel"),
        "{stderr}"
    );
}

#[test]
fn a_run_nobody_holds_is_recorded_cancelled_and_the_processes_it_left_are_stopped() {
    let directory = napper("unheld");
    let mut run = spawn(
        &directory,
        &["run", "napper.yaml", "--run-id", "left", "--events", "-"],
    );
    let pid = nap_pid(&directory);
    // The holder dies without a word; its effect, in a process group of its own, lives on.
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(running(pid), "the effect outlived its engine");
    let (code, stdout, stderr) = cancel(&directory, "left");
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "recorded", "{answer}");
    wait_until_stopped(pid);
    let recorded = status(&directory, "left");
    assert_eq!(recorded["status"], "finished", "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
}

#[test]
fn a_serve_host_cancels_its_instance_when_its_inbox_asks() {
    let directory = napper("serve");
    let mut host = spawn(
        &directory,
        &["serve", "napper.yaml", "--inbox-poll", "20ms"],
    );
    let mut input = host.stdin.take().unwrap();
    input.write_all(b"{\"instance\": \"i1\"}\n").unwrap();
    input.flush().unwrap();
    let pid = nap_pid(&directory);
    let (code, stdout, stderr) = cancel(&directory, "napper:i1");
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "queued", "{answer}");
    wait_until_stopped(pid);
    let recorded = support::eventually("the instance's cancel recorded", || {
        let recorded = status(&directory, "napper:i1");
        (recorded["status"] == "finished").then_some(recorded)
    });
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
    // The host goes on serving: a new instance starts.
    std::fs::remove_file(directory.join("nap.pid")).unwrap();
    input.write_all(b"{\"instance\": \"i2\"}\n").unwrap();
    input.flush().unwrap();
    let second = nap_pid(&directory);
    drop(input);
    host.kill().unwrap();
    let output = host.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("\"instance\":\"i1\"") && line.contains("\"cancelled\"")),
        "{stdout}"
    );
    let _ = std::process::Command::new("kill")
        .arg(second.to_string())
        .status();
}

#[test]
fn what_no_cancel_takes_is_refused_naming_why() {
    let directory = napper("refused");
    let (code, _, stderr) = cancel(&directory, "nothing");
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("no run `nothing`"), "{stderr}");
}
