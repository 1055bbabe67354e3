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

/// Pauses or continues process `pid` (SIGSTOP, SIGCONT): a holder that does not look meanwhile.
fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
}

/// Queues event `event` in `run`'s inbox, as another host would.
fn queue_event(directory: &Path, run: &str, event: &str) {
    use protocol_run::store::Store;
    let mut store = protocol_run::store::SqliteStore::open(directory.join("state")).unwrap();
    store
        .enqueue_event(run, event, &serde_json::Value::Null, 1)
        .unwrap();
}

/// The outcome of inbox entry `entry` of `run`, as `status --json` shows it.
fn entry_outcome(directory: &Path, run: &str, entry: u64) -> Value {
    use protocol_run::store::Store;
    let store = protocol_run::store::SqliteStore::open(directory.join("state")).unwrap();
    let states = store.inbox_states(&[(run.to_string(), entry)]).unwrap();
    match &states[0].state {
        protocol_run::store::InboxState::Applied { outcome, .. } => outcome.clone(),
        other => panic!("entry {entry} is {other:?}"),
    }
}

#[test]
fn a_cancel_taken_after_the_run_ended_is_discarded_and_the_end_kept() {
    let directory = napper("after-the-end");
    let run = spawn(
        &directory,
        &[],
        &["run", "napper.yaml", "--run-id", "ending", "--events", "-"],
    );
    nap_pid(&directory);
    // Paused, the holder takes both at its next look: `go` ends the run, then the cancel.
    signal(run.id(), nix::sys::signal::Signal::SIGSTOP);
    queue_event(&directory, "ending", "go");
    let (code, stdout, stderr) = cancel(&directory, &[], "ending");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"queued\""), "{stdout}");
    signal(run.id(), nix::sys::signal::Signal::SIGCONT);
    let output = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"finished\""), "{stdout}");
    let recorded = status(&directory, &[], "ending");
    assert_eq!(recorded["finish"]["state"], "done", "{recorded}");
    assert_eq!(entry_outcome(&directory, "ending", 1)["outcome"], "taken");
    let cancelled = entry_outcome(&directory, "ending", 2);
    assert_eq!(cancelled["outcome"], "discarded", "{cancelled}");
}

#[test]
fn a_holder_on_virtual_time_takes_the_cancel_before_it_stops_for_want_of_input() {
    let directory = support::temporary_directory("cancel", "virtual");
    std::fs::write(
        directory.join("waiter.yaml"),
        "id: waiter\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n",
    )
    .unwrap();
    let mut run = spawn(
        &directory,
        &[],
        &[
            "run",
            "waiter.yaml",
            "--run-id",
            "virtual",
            "--events",
            "-",
            "--virtual-time",
        ],
    );
    support::eventually("the run's start", || {
        let (code, stdout, _) =
            support::run_binary_in(&directory, &[], &["status", "virtual", "--json"]);
        (code == 0 && stdout.contains("\"status\":\"running\"")).then_some(())
    });
    let (code, stdout, stderr) = cancel(&directory, &[], "virtual");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"queued\""), "{stdout}");
    // Its input ends: before it stops, it looks at its inbox.
    drop(run.stdin.take());
    let output = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("\"cancelled\""), "{stdout}");
}

#[test]
fn a_cancel_left_by_a_holder_that_died_is_taken_by_the_next_one() {
    let directory = napper("next-holder");
    let mut run = spawn(
        &directory,
        &[],
        &["run", "napper.yaml", "--run-id", "orphan", "--events", "-"],
    );
    nap_pid(&directory);
    signal(run.id(), nix::sys::signal::Signal::SIGSTOP);
    let (code, stdout, stderr) = cancel(&directory, &[], "orphan");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"queued\""), "{stdout}");
    run.kill().unwrap();
    run.wait().unwrap();
    // Resumed with no events: it takes its inbox before it stops, and the cancel with it.
    let (code, stdout, stderr) = support::run_binary_in(&directory, &[], &["resume", "orphan"]);
    assert_eq!(code, 130, "{stdout}\n{stderr}");
    assert!(stdout.contains("\"cancelled\""), "{stdout}");
    assert_eq!(
        entry_outcome(&directory, "orphan", 1)["outcome"],
        "cancelled"
    );
}

#[test]
fn a_cancel_ends_an_await_at_once() {
    let directory = napper("await");
    let mut run = spawn(
        &directory,
        &[],
        &[
            "run",
            "napper.yaml",
            "--run-id",
            "awaiting",
            "--events",
            "-",
        ],
    );
    let mut input = run.stdin.take().unwrap();
    // `done` comes only with `go`, which nobody sends.
    writeln!(input, "{{\"await\": \"done\", \"timeout\": \"100s\"}}").unwrap();
    input.flush().unwrap();
    nap_pid(&directory);
    let (code, _, stderr) = cancel(&directory, &[], "awaiting");
    assert_eq!(code, 0, "{stderr}");
    let output = run.wait_with_output().unwrap();
    drop(input);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("\"await\":\"done\",\"outcome\":\"cancelled\""),
        "{stdout}"
    );
}

#[test]
fn a_cancel_recorded_for_a_run_nobody_holds_applies_what_waited_in_its_inbox() {
    let directory = napper("waited");
    let mut run = spawn(
        &directory,
        &[],
        &["run", "napper.yaml", "--run-id", "waited", "--events", "-"],
    );
    nap_pid(&directory);
    run.kill().unwrap();
    run.wait().unwrap();
    queue_event(&directory, "waited", "go");
    let (code, stdout, stderr) = cancel(&directory, &[], "waited");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"recorded\""), "{stdout}");
    let discarded = entry_outcome(&directory, "waited", 1);
    assert_eq!(discarded["outcome"], "discarded", "{discarded}");
}
