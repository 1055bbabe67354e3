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

/// `protocol-run ARGUMENTS` in `directory` with `environment` (the store's choice), stdin held
/// open, stdout and stderr piped.
fn spawn(directory: &Path, environment: &[(&str, &str)], arguments: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", "state"])
        .envs(environment.iter().copied())
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

fn cancel(directory: &Path, environment: &[(&str, &str)], run: &str) -> (i32, String, String) {
    support::run_binary_in(directory, environment, &["cancel", run])
}

fn status(directory: &Path, environment: &[(&str, &str)], run: &str) -> Value {
    let (code, stdout, stderr) =
        support::run_binary_in(directory, environment, &["status", run, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn wait_until_stopped(pid: i32) {
    support::eventually("the effect's process to be stopped", || {
        (!running(pid)).then_some(())
    });
}

/// A test database on the PostgreSQL server, or `None` after the skip's line.
fn on_postgres(test: &str) -> Option<support::postgres::TestDatabase> {
    support::postgres::database(test)
}

#[test]
fn sqlite_a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox() {
    a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox("held", &[]);
}

#[test]
fn postgres_a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox() {
    let Some(database) = on_postgres("cancel::postgres_a_run_a_run_process_holds") else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox(
        "held-postgres",
        &environment,
    );
}

fn a_run_a_run_process_holds_is_cancelled_by_that_process_through_its_inbox(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = napper(name);
    // Its stdin stays open until it is waited for: the run waits for events, and its inbox.
    let run = spawn(
        &directory,
        environment,
        &["run", "napper.yaml", "--run-id", "napping", "--events", "-"],
    );
    let pid = nap_pid(&directory);
    let (code, stdout, stderr) = cancel(&directory, environment, "napping");
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
    let recorded = status(&directory, environment, "napping");
    assert_eq!(recorded["status"], "finished", "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
    // A finished run has nothing left to cancel.
    let (code, _, stderr) = cancel(&directory, environment, "napping");
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("has finished: there is nothing to cancel"),
        "{stderr}"
    );
}

#[test]
fn sqlite_a_run_nobody_holds_is_recorded_cancelled_with_no_process_of_it_left() {
    a_run_nobody_holds_is_recorded_cancelled_with_no_process_of_it_left("unheld", &[]);
}

#[test]
fn postgres_a_run_nobody_holds_is_recorded_cancelled_with_no_process_of_it_left() {
    let Some(database) = on_postgres("cancel::postgres_a_run_nobody_holds") else {
        return;
    };
    // The dead holder's lease runs out soon.
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
        ("PROTOCOL_RUN_LEASE", "1s"),
    ];
    a_run_nobody_holds_is_recorded_cancelled_with_no_process_of_it_left(
        "unheld-postgres",
        &environment,
    );
}

fn a_run_nobody_holds_is_recorded_cancelled_with_no_process_of_it_left(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = napper(name);
    let mut run = spawn(
        &directory,
        environment,
        &["run", "napper.yaml", "--run-id", "left", "--events", "-"],
    );
    let pid = nap_pid(&directory);
    // The holder dies without a word (its effect's process is stopped by its watchdog, or by
    // the cancel, whichever comes first).
    run.kill().unwrap();
    run.wait().unwrap();
    // On a shared store the claim waits for the dead holder's lease to run out.
    let (code, stdout, stderr) = support::eventually("a cancel that claims the run", || {
        let answer = cancel(&directory, environment, "left");
        (answer.0 == 0).then_some(answer)
    });
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "recorded", "{answer}");
    wait_until_stopped(pid);
    let recorded = status(&directory, environment, "left");
    assert_eq!(recorded["status"], "finished", "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
}

#[test]
fn a_serve_host_cancels_its_instance_when_its_inbox_asks() {
    let directory = napper("serve");
    let mut host = spawn(
        &directory,
        &[],
        &["serve", "napper.yaml", "--inbox-poll", "20ms"],
    );
    let mut input = host.stdin.take().unwrap();
    input.write_all(b"{\"instance\": \"i1\"}\n").unwrap();
    input.flush().unwrap();
    let pid = nap_pid(&directory);
    let (code, stdout, stderr) = cancel(&directory, &[], "napper:i1");
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "queued", "{answer}");
    wait_until_stopped(pid);
    let recorded = support::eventually("the instance's cancel recorded", || {
        let recorded = status(&directory, &[], "napper:i1");
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
    let (code, _, stderr) = cancel(&directory, &[], "nothing");
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("no run `nothing`"), "{stderr}");
}

#[test]
fn an_mcp_server_cancels_the_run_it_holds_when_its_inbox_asks() {
    let mut server = crate::mcp_limits::waiter_server("cancel-mcp", serde_json::json!({}));
    let started = server.call(1, "waiter", serde_json::json!({}));
    let run = crate::support::mcp_raw::reported_run(&started);
    let directory = server.directory().to_path_buf();
    let (code, stdout, stderr) = cancel(&directory, &[], &run);
    assert_eq!(code, 0, "{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["cancel"], "queued", "{answer}");
    // The server takes the request, and its clients read the run cancelled.
    let mut id = 1;
    let report = support::eventually("the run's cancel", || {
        id += 1;
        let report =
            server.call(id, "get_run", serde_json::json!({"run": run}))["structuredContent"]
                .clone();
        (report["status"] == "cancelled").then_some(report)
    });
    assert_eq!(report["states"][0], "waiting", "{report}");
    let recorded = status(&directory, &[], &run);
    assert_eq!(recorded["status"], "finished", "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], 130, "{recorded}");
}
