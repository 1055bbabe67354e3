//! No event lost in silence: an event sent while the run is busy is deferred (with `defer:`) or discarded, and its sender is told on every path (`--events` file and stdin, `serve`, MCP `send_event`, a scenario); a deferred event survives `kill -9` and `resume`; `await` lines wait for a state.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::mcp_raw::{RawMcp, reported_run};
use crate::support::{run_binary, run_binary_with_input, temporary_directory};

/// A protocol busy in `working` (a `sleep` of `NAP` seconds) that takes `confirm` only once it
/// waits; `DEFER` is replaced by `working`'s `defer:` line, or by nothing.
const BUSY: &str = r#"
id: busy
events:
  confirm: {}
  other: {}
context: { confirms: 0 }
permissions: { exec: [sleep] }
states:
  working:
    DEFER
    entry:
      - { id: nap, exec: [sleep, "NAP"] }
    on:
      done.exec.nap: waiting
      error.exec.nap: waiting
  waiting:
    on:
      confirm:
        target: confirmed
        actions: [{ assign: { confirms: "confirms + 1" } }]
  confirmed: { type: final, exit_code: 0, output: { confirms: "${confirms}" } }
"#;

/// `BUSY` in `directory/busy.yaml`, deferring `confirm` in `working` or not, napping `nap` s.
fn write_busy(directory: &Path, defer: bool, nap: &str) {
    let defer = if defer { "defer: [confirm]" } else { "" };
    let text = BUSY.replace("DEFER", defer).replace("NAP", nap);
    std::fs::write(directory.join("busy.yaml"), text).unwrap();
}

/// The JSON lines of `stdout` that answer an input line, in order.
fn answers(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line.get("input_line").is_some())
        .collect()
}

/// Runs `busy.yaml` with `events` written to `file` as its `--events`, and `extra` arguments.
fn run_events(directory: &Path, file: &str, events: &str, extra: &[&str]) -> (i32, String, String) {
    std::fs::write(directory.join(file), events).unwrap();
    let mut arguments = vec!["busy.yaml", "--events", file];
    arguments.extend_from_slice(extra);
    run_binary(directory, &arguments)
}

/// Runs `serve busy.yaml` with `extra` arguments over `input`; its stdout and the JSON lines in it.
fn serve_lines(directory: &Path, extra: &[&str], input: &str) -> (String, Vec<Value>) {
    let mut arguments = vec!["serve", "busy.yaml"];
    arguments.extend_from_slice(extra);
    let output = run_binary_with_input(directory, &arguments, input.as_bytes());
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let lines = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    (stdout, lines)
}

/// The `finished` object of `stdout`'s last line.
fn finished(stdout: &str) -> Value {
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    last["finished"].clone()
}

#[test]
fn an_events_file_is_told_deferred_then_taken_discarded_and_refused() {
    let directory = temporary_directory("event-outcomes", "file-defer");
    write_busy(&directory, true, "0.2");
    let events = "{\"event\":\"confirm\"}\n{\"event\":\"other\"}\n{\"event\":\"nope\"}\n\n";
    let (code, stdout, stderr) = run_events(
        &directory,
        "events.jsonl",
        events,
        &["--state-dir", "state"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let told = answers(&stdout);
    let summary: Vec<(u64, &str, &str)> = told
        .iter()
        .map(|line| {
            (
                line["input_line"].as_u64().unwrap(),
                line["event"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "confirm", "deferred"),
            (2, "other", "discarded"),
            (3, "nope", "refused"),
            (1, "confirm", "taken"),
        ],
        "{stdout}"
    );
    assert!(
        told[0]["reason"]
            .as_str()
            .unwrap()
            .contains("state `working` defers it"),
        "{}",
        told[0]
    );
    assert!(
        told[1]["reason"].as_str().unwrap().contains("(working)"),
        "{}",
        told[1]
    );
    assert_eq!(told[3]["waited"], json!(true));
    assert_eq!(finished(&stdout)["output"], json!({"confirms": 1}));
    // The lost and refused events are warned about on stderr too.
    assert!(
        stderr.contains("events line 2: `other` discarded"),
        "{stderr}"
    );
    assert!(stderr.contains("events line 3"), "{stderr}");
}

#[test]
fn without_defer_an_event_sent_while_busy_is_told_discarded_on_stdin_too() {
    let directory = temporary_directory("event-outcomes", "stdin-discard");
    write_busy(&directory, false, "0.2");
    let output = run_binary_with_input(
        &directory,
        &["busy.yaml", "--events", "-", "--state-dir", "state"],
        b"{\"event\":\"confirm\"}\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The run then waits for the confirm it lost: it stops unfinished, not as if all went well.
    assert_eq!(output.status.code(), Some(75), "{stdout}{stderr}");
    let told = answers(&stdout);
    assert_eq!(told.len(), 1, "{stdout}");
    assert_eq!(told[0]["outcome"], json!("discarded"));
    assert_eq!(told[0]["input_line"], json!(1));
    assert!(
        stderr.contains("`confirm` discarded: no transition of the active states (working)"),
        "{stderr}"
    );
}

#[test]
fn the_telemetry_records_each_outcome_with_its_step() {
    let directory = temporary_directory("event-outcomes", "telemetry");
    write_busy(&directory, true, "0.1");
    let confirm = "{\"event\":\"confirm\"}\n";
    let (code, stdout, stderr) = run_events(
        &directory,
        "events.jsonl",
        confirm,
        &["--state-dir", "state"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let steps: Vec<(String, String)> = crate::support::read_telemetry(&directory)
        .into_iter()
        .filter(|entry| entry["kind"] == "step" && entry["event"] == "confirm")
        .map(|entry| {
            (
                entry["outcome"].as_str().unwrap_or_default().to_string(),
                entry["configuration"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("deferred".to_string(), r#"["working"]"#.to_string()),
            ("taken".to_string(), "[]".to_string()),
        ]
    );
}

/// Reads `stdout` lines until one satisfies `wanted`; fails after 20 s.
fn read_until(lines: &mut impl Iterator<Item = String>, wanted: impl Fn(&Value) -> bool) -> Value {
    for line in lines {
        if let Ok(value) = serde_json::from_str::<Value>(&line)
            && wanted(&value)
        {
            return value;
        }
    }
    panic!("stdout ended before the line looked for");
}

#[test]
fn a_deferred_event_survives_kill_9_and_resume_and_is_taken_once() {
    let directory = temporary_directory("event-outcomes", "kill-resume");
    // A nap long enough that the engine is killed while it runs.
    write_busy(&directory, true, "30");
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["busy.yaml", "--events", "-", "--state-dir", "state"])
        .args(["--run-id", "deferred-1"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    stdin.write_all(b"{\"event\":\"confirm\"}\n").unwrap();
    let deferred = read_until(&mut lines, |line| line.get("outcome").is_some());
    assert_eq!(deferred["outcome"], json!("deferred"), "{deferred}");
    // Told deferred only once the step that deferred it was committed: SIGKILL now.
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["resume", "deferred-1", "--state-dir", "state"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The nap was interrupted (and failed on resume): the run waits, and the confirm that
    // waited in the inbox is taken, once.
    assert_eq!(
        finished(&stdout)["output"],
        json!({"confirms": 1}),
        "{stdout}"
    );
}

#[test]
fn an_await_line_waits_for_its_state_and_times_out_as_specified() {
    let directory = temporary_directory("event-outcomes", "await");
    write_busy(&directory, false, "0.2");
    // Reached: the confirm after it is taken, where without the await it would be discarded.
    let events = "{\"await\":\"waiting\",\"timeout\":\"20s\"}\n{\"event\":\"confirm\"}\n";
    let (code, stdout, stderr) = run_events(
        &directory,
        "reached.jsonl",
        events,
        &["--state-dir", "state"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let told = answers(&stdout);
    assert_eq!(
        told[0],
        json!({"input_line": 1, "await": "waiting", "outcome": "reached"})
    );
    assert_eq!(told[1]["outcome"], json!("taken"));
    // Timed out (wall clock): a report line says so and the stream goes on.
    let events = "{\"await\":\"confirmed\",\"timeout\":\"50ms\"}\n{\"event\":\"other\"}\n";
    let (code, stdout, stderr) =
        run_events(&directory, "late.jsonl", events, &["--state-dir", "state"]);
    assert_eq!(code, 75, "{stdout}{stderr}");
    let told = answers(&stdout);
    assert_eq!(told[0]["outcome"], json!("timed_out"), "{stdout}");
    assert_eq!(told[0]["timeout_ms"], json!(50));
    assert_eq!(
        told[1]["event"],
        json!("other"),
        "the stream went on: {stdout}"
    );
    assert!(
        stderr.contains("was not reached within its timeout"),
        "{stderr}"
    );
    // Under virtual time the wait ends as soon as only input could move the run, whatever
    // the timeout: an hour is not waited.
    let events = "{\"await\":\"confirmed\",\"timeout\":\"1h\"}\n";
    let (code, stdout, _) = run_events(&directory, "virtual.jsonl", events, &["--virtual-time"]);
    assert_eq!(code, 75, "{stdout}");
    assert_eq!(
        answers(&stdout)[0]["outcome"],
        json!("timed_out"),
        "{stdout}"
    );
    // A state the protocol does not have is refused, with a suggestion.
    let typo = "{\"await\":\"waitin\"}\n";
    let (_, stdout, _) = run_events(&directory, "typo.jsonl", typo, &["--virtual-time"]);
    let refused = &answers(&stdout)[0];
    assert_eq!(refused["outcome"], json!("refused"), "{stdout}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("did you mean `waiting`?"),
        "{refused}"
    );
}

#[test]
fn a_serve_line_is_answered_with_its_events_outcome() {
    let directory = temporary_directory("event-outcomes", "serve");
    write_busy(&directory, false, "0.2");
    let input = concat!(
        "{\"instance\":\"a\",\"event\":\"confirm\"}\n",
        "{\"instance\":\"a\",\"event\":\"nope\"}\n",
        "{\"instance\":\"a\",\"event\":\"done.exec.nap\"}\n",
    );
    let (stdout, lines) = serve_lines(&directory, &["--state-dir", "state"], input);
    let lines: Vec<Value> = lines
        .into_iter()
        .filter(|line| line.get("outcome").is_some())
        .collect();
    let outcomes: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["event"].as_str().unwrap(),
                line["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("confirm", "discarded"),
            ("nope", "refused"),
            ("done.exec.nap", "refused"),
        ],
        "{stdout}"
    );
    assert!(lines.iter().all(|line| line["instance"] == "a"));
    assert!(
        lines[2]["reason"]
            .as_str()
            .unwrap()
            .contains("is an engine event"),
        "{}",
        lines[2]
    );
}

#[test]
fn mcp_send_event_reports_discarded_and_deferred_with_the_events_the_run_takes() {
    for (defer, expected) in [(false, "discarded"), (true, "deferred")] {
        let directory = temporary_directory("event-outcomes", &format!("mcp-{defer}"));
        write_busy(&directory, defer, "2");
        let mut server = RawMcp::start(&directory, &["busy.yaml"], json!({}));
        let started = server.call(1, "busy", json!({}));
        let run = reported_run(&started);
        let sent = server.call(2, "send_event", json!({"run": run, "event": "confirm"}));
        assert_ne!(sent["isError"], json!(true), "{sent}");
        let report = &sent["structuredContent"];
        assert_eq!(report["sent"]["outcome"], json!(expected), "{report}");
        assert_eq!(report["sent"]["event"], json!("confirm"));
        assert!(report["sent"]["reason"].is_string(), "{report}");
        assert_eq!(report["waiting"], json!("effect"), "{report}");
        if !defer {
            assert!(
                report["sent"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("no transition of the active states (working) takes `confirm`"),
                "{report}"
            );
        }
        let refused = server.call(3, "send_event", json!({"run": run, "event": "nope"}));
        assert_eq!(
            refused["structuredContent"]["sent"]["outcome"],
            json!("refused"),
            "{refused}"
        );
        let _ = server.call(4, "cancel_run", json!({"run": run}));
        server.finish();
    }
}

#[test]
fn a_scenario_expects_an_event_discarded_deferred_or_refused() {
    let directory = temporary_directory("event-outcomes", "scenario");
    // Busy on a timer: a scenario's steps come when no effect runs.
    let protocol = r#"
id: warming
events: { confirm: {}, other: {} }
context: { confirms: 0 }
states:
  warming:
    defer: [confirm]
    after: [{ delay: 1s, target: waiting }]
  waiting:
    on:
      confirm:
        target: confirmed
        actions: [{ assign: { confirms: "confirms + 1" } }]
  confirmed: { type: final, exit_code: 0, output: { confirms: "${confirms}" } }
"#;
    std::fs::write(directory.join("warming.yaml"), protocol).unwrap();
    let scenarios = r#"
protocol: warming.yaml
scenarios:
  - name: told what became of each event
    steps:
      - send: confirm
      - expect: { deferred: confirm }
      - send: other
      - expect: { discarded: other }
      - send: nope
      - expect: { refused: nope }
      - send: done.state.warming
      - expect: { refused: done.state.warming }
      - after: 2s
      - expect: { finished: { output: { confirms: 1 } } }
"#;
    std::fs::write(directory.join("warming.scenario.yaml"), scenarios).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "warming.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    // A refusal the next step does not expect is an error of the file, as before.
    let unexpected =
        "protocol: warming.yaml\nscenarios:\n  - name: x\n    steps:\n      - send: nope\n";
    std::fs::write(directory.join("nope.scenario.yaml"), unexpected).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "nope.scenario.yaml"]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("the protocol refuses event `nope`"),
        "{stdout}{stderr}"
    );
}

#[test]
fn defer_refuses_engine_events_and_undeclared_names_where_they_are_written() {
    let directory = temporary_directory("event-outcomes", "defer-errors");
    let text = BUSY
        .replace("DEFER", "defer: [done.exec.nap, confirn]")
        .replace("NAP", "1");
    std::fs::write(directory.join("busy.yaml"), text).unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "busy.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    crate::support::assert_diagnostic(
        &stderr,
        &["names engine events (`done.*`)", "busy.yaml:10:13"],
    );
    crate::support::assert_diagnostic(
        &stderr,
        &[
            "`confirn` matches no event declared",
            "did you mean `confirm`?",
        ],
    );
}

#[test]
fn a_serve_await_line_holds_the_input_until_its_state_or_its_timeout() {
    let directory = temporary_directory("event-outcomes", "serve-await");
    write_busy(&directory, false, "0.2");
    let input = concat!(
        "{\"instance\":\"a\"}\n",
        "{\"instance\":\"a\",\"await\":\"waiting\",\"timeout\":\"20s\"}\n",
        "{\"instance\":\"a\",\"event\":\"confirm\"}\n",
        "{\"instance\":\"b\"}\n",
        "{\"instance\":\"b\",\"await\":\"confirmed\",\"timeout\":\"50ms\"}\n",
        "{\"instance\":\"b\",\"event\":\"other\"}\n",
    );
    let (stdout, lines) = serve_lines(&directory, &["--store", "memory"], input);
    let position = |wanted: &dyn Fn(&Value) -> bool| {
        lines
            .iter()
            .position(wanted)
            .unwrap_or_else(|| panic!("{stdout}"))
    };
    let reached = position(&|line| line["instance"] == "a" && line["await"] == "waiting");
    assert_eq!(lines[reached]["outcome"], json!("reached"), "{stdout}");
    // The confirm waited for the state: taken (no outcome named), the run finished.
    let confirm = position(&|line| line["instance"] == "a" && line["event"] == "confirm");
    assert!(confirm > reached, "{stdout}");
    assert!(lines[confirm].get("outcome").is_none(), "{stdout}");
    assert_eq!(
        lines[confirm + 1]["finished"]["exit_code"],
        json!(0),
        "{stdout}"
    );
    let late = position(&|line| line["instance"] == "b" && line["await"] == "confirmed");
    assert_eq!(lines[late]["outcome"], json!("timed_out"), "{stdout}");
    let other = position(&|line| line["instance"] == "b" && line["event"] == "other");
    assert!(
        other > late,
        "the input went on after the timeout: {stdout}"
    );
}

#[test]
fn mcp_wait_for_state_answers_once_the_run_is_there() {
    let directory = temporary_directory("event-outcomes", "mcp-wait");
    write_busy(&directory, false, "0.3");
    let mut server = RawMcp::start(&directory, &["busy.yaml"], json!({}));
    let run = reported_run(&server.call(1, "busy", json!({})));
    let waited = server.call(
        2,
        "wait_for_state",
        json!({"run": run, "state": "waiting", "timeout": "20s"}),
    );
    let report = &waited["structuredContent"];
    assert_eq!(report["awaited"], json!("reached"), "{waited}");
    assert_eq!(report["states"], json!(["waiting"]), "{waited}");
    assert_eq!(report["waiting"], json!("input"));
    let sent = server.call(3, "send_event", json!({"run": run, "event": "confirm"}));
    assert_eq!(
        sent["structuredContent"]["sent"]["outcome"],
        json!("taken"),
        "{sent}"
    );
    assert_eq!(
        sent["structuredContent"]["status"],
        json!("finished"),
        "{sent}"
    );
    let unknown = server.call(4, "wait_for_state", json!({"run": run, "state": "waiting"}));
    assert_eq!(unknown["isError"], json!(true), "{unknown}");
    server.finish();
}

#[test]
fn mcp_events_sent_while_a_wait_for_state_waits_are_taken_and_end_it() {
    let mut server = crate::mcp_limits::waiter_server("wait-and-send", json!({}));
    let run = reported_run(&server.call(1, "waiter", json!({})));
    server.send(
        2,
        "tools/call",
        json!({"name": "wait_for_state",
               "arguments": {"run": run, "state": "done", "timeout": "10m"}}),
    );
    let sent = server.call(3, "send_event", json!({"run": run, "event": "go"}));
    assert_eq!(
        sent["structuredContent"]["sent"]["outcome"],
        json!("taken"),
        "{sent}"
    );
    let waited = server.response(2);
    assert_eq!(
        waited["result"]["structuredContent"]["awaited"],
        json!("reached"),
        "{waited}"
    );
    server.finish();
}
