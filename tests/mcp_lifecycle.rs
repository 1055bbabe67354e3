//! A run's life in `protocol-run mcp`, in raw JSON-RPC: an ended run leaves the server (its files and lock released, its report still answered), an event queued before a cancel is answered, a cancel survives a kill, and a run recorded unfinished but not live is cancelled under its lock.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp_limits::serve_waiter;
use crate::support::mcp_raw::{RawMcp, reported_run, tool_error};

/// `status RUN --json`, run from `directory` over its `state`.
fn status(directory: &Path, run: &str) -> Value {
    let (code, text) = crate::support::run_binary_with_state(directory, &["status", run, "--json"]);
    assert_eq!(code, 0, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// Starts a run of the waiter; its id.
fn start(server: &mut RawMcp, id: u64) -> String {
    let started = server.call(id, "waiter", json!({}));
    assert_eq!(
        started["structuredContent"]["status"],
        json!("running"),
        "{started}"
    );
    reported_run(&started)
}

/// The answers to the requests `ids`, in any order, by id.
fn answers(server: &mut RawMcp, ids: &[u64]) -> std::collections::HashMap<u64, Value> {
    let mut answers = std::collections::HashMap::new();
    while answers.len() < ids.len() {
        let response = server.next_response();
        let id = response["id"].as_u64().unwrap();
        assert!(ids.contains(&id), "{response}");
        answers.insert(id, response["result"].clone());
    }
    answers
}

/// `list_runs`'s runs (its first page).
fn listed_runs(server: &mut RawMcp, id: u64) -> Vec<Value> {
    let listed = server.call(id, "list_runs", json!({}));
    listed["structuredContent"]["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .clone()
}

/// The server's open files, and how many of them are run locks.
#[cfg(target_os = "linux")]
fn open_files(server: &RawMcp) -> (usize, usize) {
    let entries: Vec<_> = std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .unwrap()
        .filter_map(Result::ok)
        .collect();
    let locks = entries
        .iter()
        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
        .filter(|target| target.ends_with("run.lock"))
        .count();
    (entries.len(), locks)
}

#[cfg(target_os = "linux")]
#[test]
fn ended_runs_release_their_files_and_locks_and_still_answer() {
    let directory = crate::support::temporary_directory("mcp-lifecycle", "ended");
    let mut server = serve_waiter(&directory, &[], json!({}));
    // A first run opens what the server keeps for good (its runtime's handles).
    let mut runs = vec![start(&mut server, 1)];
    let went = server.call(2, "send_event", json!({"run": runs[0], "event": "go"}));
    assert_eq!(
        went["structuredContent"]["status"],
        json!("finished"),
        "{went}"
    );
    let settled = |server: &RawMcp, done: &dyn Fn((usize, usize)) -> bool| {
        // A fleet ends just after its last answer: give it a moment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done(open_files(server)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        open_files(server)
    };
    let baseline = settled(&server, &|(_, locks)| locks == 0);
    assert_eq!(baseline.1, 0, "the first run's lock is released");
    for index in 1..=40 {
        let run = start(&mut server, 10 + 2 * index);
        let went = server.call(
            11 + 2 * index,
            "send_event",
            json!({"run": run, "event": "go"}),
        );
        assert_eq!(
            went["structuredContent"]["status"],
            json!("finished"),
            "{went}"
        );
        runs.push(run);
    }
    assert_eq!(
        settled(&server, &|files| files == baseline),
        baseline,
        "files and run locks after 40 more runs ended"
    );

    for run in [&runs[0], &runs[40]] {
        let report = server.call(200, "get_run", json!({"run": run}));
        assert_eq!(
            report["structuredContent"]["status"],
            json!("finished"),
            "{report}"
        );
        assert_eq!(report["structuredContent"]["states"], json!([]), "{report}");
        let logs = server.call(201, "get_logs", json!({"run": run}));
        assert_eq!(logs["isError"], json!(false), "{logs}");
        let diagram = server.call(202, "get_diagram", json!({"run": run}));
        assert!(
            diagram["structuredContent"]["mermaid"].is_string(),
            "{diagram}"
        );
        let late = server.call(203, "send_event", json!({"run": run, "event": "go"}));
        assert_eq!(
            tool_error(&late),
            format!("run `{run}` has ended: finished")
        );
    }
    let listed = listed_runs(&mut server, 204);
    assert_eq!(listed.len(), 41);
    assert!(listed.iter().all(|run| run["status"] == json!("finished")));
    server.finish();
}

#[test]
fn an_event_queued_just_before_a_cancel_is_answered() {
    let directory = crate::support::temporary_directory("mcp-lifecycle", "queued");
    let mut server = serve_waiter(&directory, &[], json!({}));
    let mut queued = 0;
    for index in 0..20 {
        let base = 100 + 3 * index;
        let run = start(&mut server, base);
        let event = json!({"jsonrpc": "2.0", "id": base + 1, "method": "tools/call",
            "params": {"name": "send_event", "arguments": {"run": run, "event": "go"}}});
        let cancel = json!({"jsonrpc": "2.0", "id": base + 2, "method": "tools/call",
            "params": {"name": "cancel_run", "arguments": {"run": run}}});
        // One write: the event is queued for the run when the cancel arrives, or the run
        // took it just before.
        server.write(&format!("{event}\n{cancel}"));
        let answers = answers(&mut server, &[base + 1, base + 2]);
        let (event, cancel) = (&answers[&(base + 1)], &answers[&(base + 2)]);
        if cancel["isError"] == json!(true) {
            assert_eq!(
                event["structuredContent"]["status"],
                json!("finished"),
                "{event}"
            );
            assert_eq!(
                tool_error(cancel),
                format!("run `{run}` has ended: finished")
            );
        } else {
            assert_eq!(
                cancel["structuredContent"],
                json!({"run": run, "status": "cancelled", "exit_code": 130}),
            );
            assert_eq!(
                tool_error(event),
                format!("run `{run}` was cancelled before this event was taken")
            );
            queued += 1;
        }
    }
    eprintln!("{queued} of 20 events were queued when their run was cancelled");
    // Every request slot was given back: the server still answers.
    assert_eq!(listed_runs(&mut server, 999).len(), 20);
    server.finish();
}

#[test]
fn a_cancelled_run_stays_finished_when_the_server_is_killed_right_after() {
    let directory = crate::support::temporary_directory("mcp-lifecycle", "killed");
    let mut server = serve_waiter(&directory, &[], json!({}));
    let run = start(&mut server, 1);
    let cancelled = server.call(2, "cancel_run", json!({"run": run}));
    assert_eq!(cancelled["structuredContent"]["status"], json!("cancelled"));
    server.kill();
    let recorded = status(&directory, &run);
    assert_eq!(recorded["status"], json!("finished"), "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], json!(130), "{recorded}");

    let mut restarted = serve_waiter(&directory, &[], json!({}));
    let report = restarted.call(3, "get_run", json!({"run": run}));
    assert_eq!(
        report["structuredContent"]["status"],
        json!("finished"),
        "{report}"
    );
    assert_eq!(
        report["structuredContent"]["live"],
        json!(false),
        "{report}"
    );
    assert_eq!(
        report["structuredContent"]["finished"]["exit_code"],
        json!(130),
        "{report}"
    );
    let stderr = restarted.finish();
    assert!(!stderr.contains("mcp: resumed"), "{stderr}");
}

#[test]
fn a_run_recorded_unfinished_but_not_live_is_cancelled_under_its_lock() {
    let directory = crate::support::temporary_directory("mcp-lifecycle", "not-live");
    let mut first = serve_waiter(&directory, &[], json!({}));
    let run = start(&mut first, 1);
    let other = start(&mut first, 2);
    first.kill();

    // A client of the tasks extension, for `tasks/cancel`.
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut server = serve_waiter(&directory, &["--no-resume"], tasks);
    // Another process drives `run`: the cancel is refused, naming it.
    let mut holder = crate::mcp_restart::hold(&directory, &run);
    let refused = server.call(4, "cancel_run", json!({"run": run}));
    assert!(
        tool_error(&refused).starts_with(&format!(
            "run `{run}` is being run by another process (pid {}, holding ",
            holder.id()
        )),
        "{refused}"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();

    let cancelled = server.call(5, "cancel_run", json!({"run": run}));
    assert_eq!(
        cancelled["structuredContent"],
        json!({"run": run, "status": "cancelled", "exit_code": 130})
    );
    let recorded = status(&directory, &run);
    assert_eq!(recorded["status"], json!("finished"), "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], json!(130), "{recorded}");
    let again = server.call(6, "cancel_run", json!({"run": run}));
    assert_eq!(
        tool_error(&again),
        format!("run `{run}` has finished; get_run tells how")
    );

    // `tasks/cancel` cancels one left running by a killed server the same way.
    let task = server.request(7, "tasks/cancel", json!({"taskId": other}));
    assert!(task.get("error").is_none(), "{task}");
    let recorded = status(&directory, &other);
    assert_eq!(recorded["status"], json!("finished"), "{recorded}");
    assert_eq!(recorded["finish"]["exit_code"], json!(130), "{recorded}");
    server.finish();
}

/// Sleeps in its first state (an arbitrary length no other test sleeps, so its process is found
/// by its command line).
const NAPPER: &str = "id: napper
permissions: { exec: [sleep], write: [], read: [], env: [] }
states:
  napping:
    entry:
      - exec: [sleep, \"27.1828\"]
        id: nap
    on: { stop: done }
  done: { type: final }
";

/// The pids of napper's sleeps (a zombie has no command line, so it is not counted).
fn naps() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| cmdline == b"sleep\x0027.1828\x00")
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Kills the effect watchdog of the engine `pid` (`protocol-run __effect-watchdog PID-...`).
fn kill_watchdog_of(pid: u32) {
    let wanted = format!("__effect-watchdog\0{pid}-");
    let watchdogs: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&wanted))
        })
        .filter_map(|entry| entry.file_name().to_string_lossy().parse().ok())
        .collect();
    assert_eq!(watchdogs.len(), 1, "the server's watchdog: {watchdogs:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watchdogs[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Polls `naps` for up to 5 s until `done` holds of them.
fn naps_until(done: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..100 {
        let found = naps();
        if done(&found) {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    naps()
}

#[test]
fn cancelling_a_run_a_killed_server_left_stops_the_processes_it_left_running() {
    let directory = crate::support::temporary_directory("mcp-lifecycle", "leftovers");
    std::fs::write(directory.join("napper.yaml"), NAPPER).unwrap();
    let mut first = RawMcp::start(&directory, &["napper.yaml"], json!({}));
    let run = reported_run(&first.call(1, "napper", json!({})));
    assert_eq!(naps_until(|found| !found.is_empty()).len(), 1);
    // Its watchdog killed first (as a machine's crash would take both), the server is gone and
    // its effect's process is not.
    kill_watchdog_of(first.pid());
    first.kill();
    assert_eq!(naps().len(), 1, "the sleep outlived its server");

    let mut server = RawMcp::start(&directory, &["--no-resume", "napper.yaml"], json!({}));
    let cancelled = server.call(2, "cancel_run", json!({"run": run}));
    assert_eq!(
        cancelled["structuredContent"],
        json!({"run": run, "status": "cancelled", "exit_code": 130}),
        "{cancelled}"
    );
    assert_eq!(naps_until(<[String]>::is_empty), Vec::<String>::new());
    assert_eq!(status(&directory, &run)["finish"]["exit_code"], json!(130));
    server.finish();
}
