//! `protocol-run redrive RUN`: a failed or stopped run driven again under its own id from its last step before the failure; only what failed runs again (an effect as a new attempt, a map's failed items, a failed child protocol), the journal records the redrive; refusals said. On SQLite and on PostgreSQL.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support;

/// An effect that fails until the file `mark` exists, each attempt's idempotency key appended
/// to `ran`; its failure fails the run (`error.execution`, unhandled).
const ONCE: &str = include_str!("fixtures/redrive/once.yaml");

/// A map over ten items, all running at once; items 3 and 7 fail until `mark` exists. Each
/// item appends its number to `ran`. Failed items are tolerated, so every item ends; then a
/// failure fails the run.
const MAPPED: &str = include_str!("fixtures/redrive/mapped.yaml");

/// An effect that waits for the file `go`, each attempt's idempotency key appended to `ran`;
/// its command holds a secret input, so the state it is in holds a secret.
const WAITS: &str = include_str!("fixtures/redrive/waits.yaml");

/// A parent whose child's effect fails until `mark` exists (each attempt's key appended to
/// `ran`), which fails the child, and the child's failure the parent.
const FAILING_PARENT: &str = include_str!("fixtures/redrive/failing-parent.yaml");

const FAILING_CHILD: &str = include_str!("fixtures/redrive/failing.yaml");

/// A parent whose effect fails until `mark` exists, which fails it, while its child (each
/// attempt's key appended to `kid-ran`) waits for `mark`; the child's end ends the parent.
const BUSY_PARENT: &str = include_str!("fixtures/redrive/busy.yaml");

const SLEEPY_CHILD: &str = include_str!("fixtures/redrive/sleepy.yaml");

/// A parent whose child ends at once, then the parent.
const PARENT: &str = include_str!("fixtures/redrive/parent.yaml");

const CHILD: &str = include_str!("fixtures/redrive/child.yaml");

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// The lines of `file` in `directory`, none when it is not there.
fn lines(directory: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(directory.join(file))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// `status RUN --json`.
fn status(directory: &Path, environment: &[(&str, &str)], run: &str) -> serde_json::Value {
    let (code, stdout, stderr) =
        support::run_binary_in(directory, environment, &["status", run, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    json(&stdout)
}

/// What `status` says of each of the run's last steps without an event.
fn step_kinds(status: &serde_json::Value) -> Vec<String> {
    status["last_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["what"].as_str().map(String::from))
        .collect()
}

/// Runs `protocol` as `run`, which fails (exit 76, recorded as such), redrives it `unfixed`
/// times before the fix (each fails again: the run's own outcome), writes `mark` and edits the
/// protocol file, then redrives the run to its end (exit 0) with the text it started with,
/// whose journal then replays cleanly; the last redrive's stdout and stderr.
fn fail_then_redrive(
    directory: &Path,
    environment: &[(&str, &str)],
    protocol: &str,
    run: &str,
    unfixed: usize,
) -> (String, String) {
    std::fs::write(directory.join("protocol.yaml"), protocol).unwrap();
    let (code, _, stderr) = support::run_binary_in(
        directory,
        environment,
        &["run", "protocol.yaml", "--run-id", run],
    );
    assert_eq!(code, 76, "{stderr}");
    assert_eq!(
        status(directory, environment, run)["finish"]["exit_code"],
        76
    );
    // `resume` takes no finished run, and says what does.
    let (code, _, stderr) = support::run_binary_in(directory, environment, &["resume", run]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains(&format!("`protocol-run redrive {run}` drives it again")),
        "{stderr}"
    );
    for _ in 0..unfixed {
        let (code, _, stderr) = support::run_binary_in(directory, environment, &["redrive", run]);
        assert_eq!(code, 76, "{stderr}");
    }
    std::fs::write(directory.join("mark"), "").unwrap();
    // The file changed meanwhile: the redrive goes on with the text the run started with.
    std::fs::write(
        directory.join("protocol.yaml"),
        format!("{protocol}# edited after the run failed\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = support::run_binary_in(directory, environment, &["redrive", run]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("it goes on with the text it started with"),
        "{stderr}"
    );
    // Its journal, redrives included, replays cleanly against the protocol it ran.
    let (code, replayed, errors) = support::run_binary_in(
        directory,
        environment,
        &["replay", run, "--against", "protocol.yaml"],
    );
    assert_eq!(code, 0, "{replayed}{errors}");
    assert!(replayed.contains("replays cleanly"), "{replayed}");
    (stdout, stderr)
}

fn redrives_a_failed_effect(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("effect-{name}"));
    let (stdout, stderr) = fail_then_redrive(&directory, environment, ONCE, "r", 0);
    assert!(stdout.contains(r#""result":"fine""#), "{stdout}");
    assert!(
        stderr.contains("run r redriven from step 0 (it failed at step 1); again: check"),
        "{stderr}"
    );
    let after = status(&directory, environment, "r");
    assert_eq!(after["status"], "finished");
    assert_eq!(after["finish"]["state"], "done");
    assert_eq!(after["redrives"], 1);
    let (_, runs, _) = support::run_binary_in(&directory, environment, &["runs"]);
    assert!(runs.contains("(redriven once)"), "{runs}");
    assert!(
        step_kinds(&after).contains(&"(redrive from step 0)".to_string()),
        "{after}"
    );
    // Twice in all, the second a new attempt with a key of its own.
    let keys = lines(&directory, "ran");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1]);
    assert!(keys.iter().all(|key| key.starts_with("r:")), "{keys:?}");
    let (_, logs, _) = support::run_binary_in(&directory, environment, &["logs", "r"]);
    assert!(logs.contains("redriven from step 0"), "{logs}");
    let _ = std::fs::remove_dir_all(&directory);
}

fn redrives_only_the_failed_items_of_a_map(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("map-{name}"));
    let (stdout, stderr) = fail_then_redrive(&directory, environment, MAPPED, "m", 0);
    assert!(stderr.contains("again: check[3], check[7]"), "{stderr}");
    // The results complete, in item order.
    let results: Vec<String> = (0..10).map(|item| format!("\"r{item}\"")).collect();
    assert!(
        stdout.contains(&format!("\"results\":[{}]", results.join(","))),
        "{stdout}"
    );
    // Items 3 and 7 ran twice, every other once.
    let ran = lines(&directory, "ran");
    for item in 0..10 {
        let times = ran.iter().filter(|line| **line == item.to_string()).count();
        let expected = if item == 3 || item == 7 { 2 } else { 1 };
        assert_eq!(times, expected, "item {item}: {ran:?}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

fn redrives_a_failed_child_protocol(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("child-{name}"));
    std::fs::write(directory.join("failing.yaml"), FAILING_CHILD).unwrap();
    let (stdout, stderr) = fail_then_redrive(&directory, environment, FAILING_PARENT, "p", 1);
    assert!(stdout.contains(r#""kid":"done""#), "{stdout}");
    assert!(stderr.contains("again: kid"), "{stderr}");
    assert_eq!(
        status(&directory, environment, "p/kid")["finish"]["state"],
        "finished"
    );
    // Redriven twice (the first failed again, exit 76): the child started over each time, its
    // effect under a key of its own.
    assert_eq!(status(&directory, environment, "p")["redrives"], 2);
    let keys = lines(&directory, "ran");
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(
        keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2],
        "{keys:?}"
    );
    assert!(keys.iter().all(|key| key.starts_with("p/kid:")), "{keys:?}");
    let _ = std::fs::remove_dir_all(&directory);
}

/// `protocol-run ARGUMENTS --state-dir state` in `directory`, its output discarded.
fn spawn(
    directory: &Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", "state"])
        .envs(environment.iter().copied())
        .current_dir(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until run `run`'s last committed step has the effect `wait` running and its process
/// has started.
fn wait_for_the_effect(directory: &Path, environment: &[(&str, &str)], run: &str) {
    support::eventually("the effect running", || {
        let (code, stdout, _) =
            support::run_binary_in(directory, environment, &["status", run, "--json"]);
        let running =
            code == 0 && json(&stdout)["state"]["running_effects"] == serde_json::json!(["wait"]);
        (running && !lines(directory, "ran").is_empty()).then_some(())
    });
}

fn redrives_a_stopped_run(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("stopped-{name}"));
    std::fs::write(directory.join("waits.yaml"), WAITS).unwrap();
    let mut child = spawn(
        &directory,
        environment,
        &["run", "waits.yaml", "--run-id", "s", "-i", "token=hunter22"],
    );
    wait_for_the_effect(&directory, environment, "s");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(75));
    let stopped = status(&directory, environment, "s");
    assert_eq!(stopped["status"], "stopped");
    let last = stopped["state"]["step"].as_u64().unwrap();
    std::fs::write(directory.join("go"), "").unwrap();
    // Its secret input, never stored, is supplied again, as to `resume`.
    let (code, _, stderr) = support::run_binary_in(&directory, environment, &["redrive", "s"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("secret input `token`"), "{stderr}");
    let (code, stdout, stderr) = support::run_binary_in(
        &directory,
        environment,
        &["redrive", "s", "-i", "token=hunter22"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""went":true"#), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "redriven from step {last} (it had stopped); again: wait"
        )),
        "{stderr}"
    );
    let after = status(&directory, environment, "s");
    assert_eq!(after["finish"]["state"], "done");
    assert!(
        step_kinds(&after).contains(&format!("(redrive from step {last})")),
        "{after}"
    );
    // The state the redrive wrote with the secret put back was masked again: on SQLite, no file
    // of the store holds it.
    for file in ["state.db", "state.db-wal"] {
        let bytes = std::fs::read(directory.join("state").join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(8).any(|window| window == b"hunter22"),
            "{file} holds the secret"
        );
    }
    // The interrupted attempt ran again as a new one, with a key of its own.
    let keys = lines(&directory, "ran");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1]);
    let _ = std::fs::remove_dir_all(&directory);
}

/// Each refusal exits non-zero naming the run; a run whose live holder refused the redrive is
/// redriven once that holder is killed.
fn refuses_what_it_cannot_redrive(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("refusals-{name}"));
    std::fs::write(directory.join("parent.yaml"), PARENT).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    std::fs::write(directory.join("waits.yaml"), WAITS).unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        environment,
        &["run", "parent.yaml", "--run-id", "p"],
    );
    assert_eq!(code, 0, "{stderr}");
    for (run, code, said) in [
        (
            "p",
            64,
            "run `p` has finished in its final state `done` (exit code 0): a finished run is \
             not resumed nor redriven; `protocol-run fork p --at STEP`",
        ),
        (
            "p/kid",
            64,
            "run `p/kid` is a child protocol of run `p`: redrive `p`",
        ),
        ("nobody", 66, "no run `nobody`"),
    ] {
        let (exit, _, stderr) = support::run_binary_in(&directory, environment, &["redrive", run]);
        assert_eq!(exit, code, "{run}: {stderr}");
        assert!(stderr.contains(said), "{run}: {stderr}");
    }
    // A run its holder still drives.
    let mut child = spawn(
        &directory,
        environment,
        &["run", "waits.yaml", "--run-id", "w", "-i", "token=hunter22"],
    );
    wait_for_the_effect(&directory, environment, "w");
    let (exit, _, stderr) = support::run_binary_in(&directory, environment, &["redrive", "w"]);
    assert_eq!(exit, 75, "{stderr}");
    assert!(
        stderr.contains("run `w` is being run by another process"),
        "{stderr}"
    );
    // The refused redrive touched nothing: its effect ran once.
    assert_eq!(lines(&directory, "ran").len(), 1);
    // Once its holder is killed (`kill -9`: the run is left `running`), it is redriven.
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(directory.join("go"), "").unwrap();
    let (exit, _, stderr) = support::run_binary_in(
        &directory,
        environment,
        &["redrive", "w", "-i", "token=hunter22"],
    );
    assert_eq!(exit, 0, "{stderr}");
    assert!(
        stderr.contains("(its process had died); again: wait"),
        "{stderr}"
    );
    assert_eq!(lines(&directory, "ran").len(), 2);
    let _ = std::fs::remove_dir_all(&directory);
}

/// A parent that failed while its child ran: the run's end ended the child, and a redrive
/// starts it again from its beginning (a new attempt of its effect, with a key of its own)
/// beside the parent's failed effect; both then end well.
fn redrives_a_run_whose_child_was_running(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("redrive", &format!("running-child-{name}"));
    std::fs::write(directory.join("busy.yaml"), BUSY_PARENT).unwrap();
    std::fs::write(directory.join("sleepy.yaml"), SLEEPY_CHILD).unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        environment,
        &["run", "busy.yaml", "--run-id", "b"],
    );
    assert_eq!(code, 76, "{stderr}");
    assert_eq!(lines(&directory, "kid-ran").len(), 1, "{stderr}");
    std::fs::write(directory.join("mark"), "").unwrap();
    let (code, _, stderr) = support::run_binary_in(&directory, environment, &["redrive", "b"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("again: check, kid"), "{stderr}");
    let keys = lines(&directory, "kid-ran");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1]);
    let status = status(&directory, environment, "b");
    assert_eq!(status["finish"]["state"], "done", "{status}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn sqlite_redrives_a_run_whose_child_was_running() {
    redrives_a_run_whose_child_was_running("sqlite", &[]);
}

#[test]
fn postgres_redrives_a_run_whose_child_was_running() {
    on_postgres(
        "redrive-running-child",
        redrives_a_run_whose_child_was_running,
    );
}

/// Runs `body` on a PostgreSQL database of its own, when a server is at hand.
fn on_postgres(test: &str, body: fn(&str, &[(&str, &str)])) {
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    body("postgres", &environment);
}

#[test]
fn sqlite_redrives_a_failed_effect() {
    redrives_a_failed_effect("sqlite", &[]);
}

#[test]
fn postgres_redrives_a_failed_effect() {
    on_postgres(
        "redrive::postgres_redrives_a_failed_effect",
        redrives_a_failed_effect,
    );
}

#[test]
fn sqlite_redrives_only_the_failed_items_of_a_map() {
    redrives_only_the_failed_items_of_a_map("sqlite", &[]);
}

#[test]
fn postgres_redrives_only_the_failed_items_of_a_map() {
    on_postgres(
        "redrive::postgres_redrives_only_the_failed_items_of_a_map",
        redrives_only_the_failed_items_of_a_map,
    );
}

#[test]
fn sqlite_redrives_a_failed_child_protocol() {
    redrives_a_failed_child_protocol("sqlite", &[]);
}

#[test]
fn postgres_redrives_a_failed_child_protocol() {
    on_postgres(
        "redrive::postgres_redrives_a_failed_child_protocol",
        redrives_a_failed_child_protocol,
    );
}

#[test]
fn sqlite_redrives_a_stopped_run() {
    redrives_a_stopped_run("sqlite", &[]);
}

#[test]
fn postgres_redrives_a_stopped_run() {
    on_postgres(
        "redrive::postgres_redrives_a_stopped_run",
        redrives_a_stopped_run,
    );
}

#[test]
fn sqlite_refuses_what_it_cannot_redrive() {
    refuses_what_it_cannot_redrive("sqlite", &[]);
}

#[test]
fn postgres_refuses_what_it_cannot_redrive() {
    on_postgres(
        "redrive::postgres_refuses_what_it_cannot_redrive",
        refuses_what_it_cannot_redrive,
    );
}

/// `redrive_run` on an MCP server: a run of a served protocol that failed is driven again from
/// its last step before the failure, its failed effect a new attempt, and finishes; a live
/// run, and one that finished in a final state, are refused saying why.
#[test]
fn mcp_redrives_a_failed_run_of_a_served_protocol() {
    use serde_json::json;
    let directory = support::temporary_directory("redrive", "mcp");
    std::fs::write(directory.join("once.yaml"), ONCE).unwrap();
    let mut server = support::mcp_raw::RawMcp::start(&directory, &["once.yaml"], json!({}));
    let started = server.call(1, "once", json!({}));
    let run = support::mcp_raw::reported_run(&started);
    let mut id = 1;
    let failed = support::eventually("the run's failure", || {
        id += 1;
        let report = server.call(id, "get_run", json!({"run": run}));
        (report["structuredContent"]["status"] == json!("failed")).then_some(report)
    });
    assert_eq!(lines(&directory, "ran").len(), 1, "{failed}");
    std::fs::write(directory.join("mark"), "").unwrap();
    let redriven = server.call(100, "redrive_run", json!({"run": run}));
    assert_eq!(redriven["isError"], json!(false), "{redriven}");
    let report = &redriven["structuredContent"];
    assert_eq!(report["redriven"]["again"], json!(["check"]), "{redriven}");
    assert_eq!(report["redriven"]["from_step"], json!(0), "{redriven}");
    let finished = support::eventually("the redriven run's end", || {
        id += 1;
        let report = server.call(id, "get_run", json!({"run": run}));
        (report["structuredContent"]["status"] == json!("finished")).then_some(report)
    });
    assert_eq!(
        finished["structuredContent"]["finished"]["output"],
        json!({"result": "fine"}),
        "{finished}"
    );
    // Two attempts, each with its own idempotency key.
    let keys = lines(&directory, "ran");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1]);
    let again = server.call(200, "redrive_run", json!({"run": run}));
    assert_eq!(again["isError"], json!(true), "{again}");
    assert!(
        support::mcp_raw::tool_error(&again).contains("finished"),
        "{again}"
    );
    server.finish();
}
