//! The binary as a user runs it: exit codes, inputs, events, log formats.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn protocol_run(arguments: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Writes a protocol to a temporary directory of this test process and test, and returns its
/// path; tests run in parallel, so two of them must never share a file.
fn temporary_protocol(test: &str, name: &str, text: &str) -> std::path::PathBuf {
    let directory =
        std::env::temp_dir().join(format!("protocol-run-cli-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_run_exits_with_its_final_states_code_and_prints_tags() {
    let (code, stdout, stderr) =
        protocol_run(&["protocols/retry-backoff.yaml", "--virtual-time"], "");
    assert_eq!(code, 3, "{stderr}");
    assert!(stdout.contains(r#""state":"escalated""#), "{stdout}");
    assert!(
        stderr.contains("#tool_call_timeout #tool_call_retry"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("#tool_call_attempt").count(), 3, "{stderr}");
}

#[test]
fn events_from_stdin_drive_the_run() {
    let events =
        "{\"event\": \"fail\", \"data\": {\"error\": \"EIO\"}}\nnot json\n{\"event\": \"ok\"}\n";
    let (code, stdout, stderr) = protocol_run(
        &["run", "protocols/retry-backoff.yaml", "--events", "-"],
        events,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""output":{"attempts":2}"#), "{stdout}");
    assert!(stderr.contains("attempt 1 failed: EIO"), "{stderr}");
    assert!(stderr.contains("events line 2: not JSON"), "{stderr}");
}

#[test]
fn json_logs_carry_tags_as_an_array() {
    let (_, _, stderr) = protocol_run(
        &[
            "protocols/retry-backoff.yaml",
            "--virtual-time",
            "--log-format",
            "json",
        ],
        "",
    );
    // The first line after the run's grants (and, on a kernel without Landlock, the warning
    // that it does not confine).
    let first: serde_json::Value = stderr
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|line| {
            line["tags"] != serde_json::json!(["grants"])
                && line["tags"] != serde_json::json!(["sandbox_unenforced"])
        })
        .unwrap();
    assert_eq!(first["tags"], serde_json::json!(["tool_call_attempt"]));
    assert_eq!(first["fields"]["attempt"], 1);
    assert_eq!(first["level"], "INFO");
}

#[test]
fn virtual_time_shows_virtual_timestamps() {
    let (_, _, stderr) = protocol_run(
        &[
            "protocols/retry-backoff.yaml",
            "--virtual-time",
            "--log-format",
            "json",
        ],
        "",
    );
    // The protocol's own lines: the run's grants are stamped before its clock starts.
    let times: Vec<String> = stderr
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|line| line["tags"] != serde_json::json!(["grants"]))
        .map(|line| line["time"].as_str().unwrap().to_string())
        .collect();
    // 2 s, then 4 s more: the attempts' timeouts, elapsed instantly.
    let seconds = |time: &str| -> f64 {
        let clock = &time[11..23];
        let parts: Vec<f64> = clock.split(':').map(|part| part.parse().unwrap()).collect();
        parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
    };
    let first = seconds(&times[0]);
    let last = seconds(times.last().unwrap());
    assert!((last - first - 12.0).abs() < 0.01, "{times:?}");
}

#[test]
fn bad_inputs_are_refused_before_the_run_with_exit_65() {
    let cases = [
        (
            vec!["--input", "max_attempts=0"],
            "input `max_attempts`: 0 is below the minimum 1",
        ),
        (
            vec!["--input", "base_timeout=fast"],
            "`fast` is not a duration",
        ),
        (vec!["--input", "base_timeout=1h"], "above the maximum 10m"),
        (
            vec!["--input", "max_atempts=2"],
            "unknown input `max_atempts`; did you mean `max_attempts`?",
        ),
        (vec!["--input", "novalue"], "is not KEY=VALUE"),
    ];
    for (extra, expected) in cases {
        let mut arguments = vec!["protocols/retry-backoff.yaml"];
        arguments.extend(extra);
        let (code, _, stderr) = protocol_run(&arguments, "");
        assert_eq!(code, 65, "{stderr}");
        assert!(stderr.contains(expected), "expected {expected:?}: {stderr}");
    }
}

#[test]
fn inputs_change_the_run() {
    let (code, stdout, stderr) = protocol_run(
        &[
            "protocols/retry-backoff.yaml",
            "--virtual-time",
            "-i",
            "max_attempts=1",
            "-i",
            "base_timeout=500ms",
        ],
        "",
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stdout.contains(r#""attempts":1"#), "{stdout}");
    assert!(stderr.contains("timeout 500 ms"), "{stderr}");
}

#[test]
fn usage_errors_exit_64_and_a_missing_file_66() {
    assert_eq!(protocol_run(&["run"], "").0, 64);
    assert_eq!(protocol_run(&["validate", "--bogus"], "").0, 64);
    assert_eq!(protocol_run(&["protocols/nope.yaml"], "").0, 66);
    let (code, stdout, _) = protocol_run(&["--help"], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("validate"));
}

#[test]
fn a_run_with_nothing_left_to_do_stops_unfinished() {
    let path = temporary_protocol(
        "a_run_with_nothing_left_to_do_stops_unfinished",
        "waiting.yaml",
        "id: waiting\nstates:\n  idle: { on: { go: done } }\n  done: { type: final }\n",
    );
    let (code, _, stderr) = protocol_run(&[path.to_str().unwrap()], "");
    assert_eq!(code, 75, "{stderr}");
    assert!(stderr.contains("unfinished in idle"), "{stderr}");
}

#[test]
fn an_eventless_loop_is_stopped_and_named() {
    let path = temporary_protocol(
        "an_eventless_loop_is_stopped_and_named",
        "loop.yaml",
        "id: loop\nstates:\n  ping: { always: pong }\n  pong: { always: ping }\n",
    );
    let (code, _, stderr) = protocol_run(&[path.to_str().unwrap(), "--max-microsteps", "100"], "");
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("the protocol looped") && stderr.contains("ping, pong"),
        "{stderr}"
    );
}

#[test]
fn logs_and_stats_read_a_real_runs_telemetry() {
    let state =
        std::env::temp_dir().join(format!("protocol-run-telemetry-cli-{}", std::process::id()));
    let state_dir = state.to_str().unwrap();
    let (code, _, stderr) = protocol_run(
        &[
            "protocols/retry-backoff.yaml",
            "--virtual-time",
            "--state-dir",
            state_dir,
        ],
        "",
    );
    assert_eq!(code, 3, "{stderr}");
    let (code, stdout, _) = protocol_run(
        &["logs", "--state-dir", state_dir, "--tag", "tool_call_retry"],
        "",
    );
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(
        stdout.contains("attempt 1 timed out #tool_call_timeout #tool_call_retry"),
        "{stdout}"
    );
    let (_, stdout, _) = protocol_run(
        &[
            "logs",
            "--state-dir",
            state_dir,
            "--level",
            "error",
            "--json",
        ],
        "",
    );
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        line["tags"],
        serde_json::json!(["tool_call_exhausted", "escalation"])
    );
    let (code, stdout, _) = protocol_run(&["stats", "--state-dir", state_dir, "--json"], "");
    assert_eq!(code, 0);
    let stats: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // Timeouts of 2 s, 4 s and 6 s, all spent in `calling`, on the virtual clock.
    assert_eq!(stats["time_in_state_ms"]["calling"], 12_000);
    assert_eq!(stats["tags"]["tool_call_attempt"], 3);
    let runs = std::fs::read_dir(state.join("runs")).unwrap().count();
    assert_eq!(runs, 1);
    std::fs::remove_dir_all(&state).unwrap();
}

#[test]
fn new_scaffolds_a_protocol_whose_scenarios_pass() {
    let directory = std::env::temp_dir().join(format!("protocol-run-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(directory.join("protocols")).unwrap();
    std::fs::create_dir_all(directory.join("schemas")).unwrap();
    for schema in ["protocol.schema.json", "scenario.schema.json"] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("schemas")
                .join(schema),
            directory.join("schemas").join(schema),
        )
        .unwrap();
    }
    let run = |arguments: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(arguments)
            .current_dir(&directory)
            .output()
            .unwrap()
    };
    assert!(run(&["new", "health-check"]).status.success());
    let text = std::fs::read_to_string(directory.join("protocols/health-check.yaml")).unwrap();
    assert!(text.starts_with("# yaml-language-server: $schema=../schemas/protocol.schema.json\n"));
    let tested = run(&["test", "protocols"]);
    assert!(
        tested.status.success(),
        "{}",
        String::from_utf8_lossy(&tested.stdout)
    );
    assert!(String::from_utf8_lossy(&tested.stdout).ends_with("3 passed, 0 failed\n"));
    assert_eq!(
        run(&["new", "health-check"]).status.code(),
        Some(64),
        "never overwrites"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, stdout, _) = protocol_run(&["completions", shell], "");
        assert_eq!(code, 0);
        assert!(stdout.contains("validate"), "{shell}");
    }
}

#[test]
fn check_reports_located_warnings_and_denies_them_on_request() {
    let path = temporary_protocol(
        "check_reports_located_warnings_and_denies_them_on_request",
        "lint.yaml",
        "id: lint\ncontext: { unused: 1 }\nstates:\n  a: { on: { go: b } }\n  b: {}\n  lonely: {}\n",
    );
    let path = path.to_str().unwrap();
    let (code, _, stderr) = protocol_run(&["check", path], "");
    assert_eq!(code, 0, "warnings alone do not fail: {stderr}");
    assert!(
        stderr.contains("state `lonely` is unreachable") && stderr.contains("lint.yaml:6:3"),
        "{stderr}"
    );
    assert!(
        stderr.contains("state `b` can never be left and is not final"),
        "{stderr}"
    );
    assert!(
        stderr.contains("context variable `unused` is never read"),
        "{stderr}"
    );
    assert_eq!(protocol_run(&["check", path, "--deny-warnings"], "").0, 65);
    let (code, stdout, _) = protocol_run(
        &["check", "protocols/retry-backoff.yaml", "--deny-warnings"],
        "",
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("no warnings"));
}

#[test]
fn graph_draws_mermaid_and_dot() {
    let (code, stdout, _) = protocol_run(&["graph", "protocols/ittw.yaml"], "");
    assert_eq!(code, 0);
    assert!(stdout.starts_with("stateDiagram-v2"), "{stdout}");
    assert!(stdout.contains("after recheck_every"), "{stdout}");
    let (code, stdout, _) = protocol_run(
        &["graph", "protocols/retry-backoff.yaml", "--format", "dot"],
        "",
    );
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("digraph") && stdout.contains("exit 3"),
        "{stdout}"
    );
}

#[test]
fn import_turns_scxml_into_a_protocol_that_validates() {
    let (code, yaml, stderr) = protocol_run(
        &["import", "scxml", "tests/fixtures/scxml/media_player.scxml"],
        "",
    );
    assert_eq!(code, 0, "{stderr}");
    let path = temporary_protocol(
        "import_turns_scxml_into_a_protocol_that_validates",
        "imported.yaml",
        &yaml,
    );
    let (code, stdout, stderr) = protocol_run(&["validate", path.to_str().unwrap()], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    let bad = temporary_protocol(
        "import_turns_scxml_into_a_protocol_that_validates",
        "bad.scxml",
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" version=\"1.0\">\n<state id=\"a\"><onentry><script>x = 1</script></onentry></state>\n</scxml>\n",
    );
    let (code, _, stderr) = protocol_run(&["import", "scxml", bad.to_str().unwrap()], "");
    assert_eq!(code, 65);
    assert!(
        stderr.contains("<script>") && stderr.contains("bad.scxml:2:"),
        "{stderr}"
    );
}

const WAITING: &str = r#"
id: waiting
states:
  waiting:
    entry: [{ log: "waiting" }]
    on:
      answer: answered
      tick: { target: waiting, actions: [{ log: "tick" }] }
    after:
      - delay: 1m
        target: timed_out
  answered: { type: final, exit_code: 0 }
  timed_out: { type: final, exit_code: 3 }
"#;

/// While the event stream is open, virtual time stands still: a slow answer still beats a
/// one-minute timer, however long the writer takes.
#[test]
fn virtual_time_waits_for_an_open_event_stream() {
    let path = temporary_protocol(
        "virtual_time_waits_for_an_open_event_stream",
        "waiting.yaml",
        WAITING,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([path.to_str().unwrap(), "--virtual-time", "--events", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    stdin.write_all(b"{\"event\": \"answer\"}\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `{"advance": ...}` lines move the virtual clock, in order with the events around them; at the
/// end of the stream the remaining timers fire.
#[test]
fn advance_lines_move_the_virtual_clock() {
    let path = temporary_protocol(
        "advance_lines_move_the_virtual_clock",
        "waiting-advance.yaml",
        WAITING,
    );
    let (code, _, stderr) = protocol_run(
        &[path.to_str().unwrap(), "--virtual-time", "--events", "-"],
        "{\"advance\": \"59s\"}\n{\"event\": \"tick\"}\n{\"advance\": \"59s\"}\n{\"event\": \"answer\"}\n",
    );
    // The tick re-entered `waiting` and restarted its timer, so 59 s later it has not fired.
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.matches("INFO  waiting").count(), 2, "{stderr}");
    let (code, _, stderr) = protocol_run(
        &[path.to_str().unwrap(), "--virtual-time", "--events", "-"],
        "{\"advance\": \"1m\"}\n{\"event\": \"answer\"}\n",
    );
    assert_eq!(code, 3, "{stderr}");
    let (code, _, stderr) = protocol_run(
        &[path.to_str().unwrap(), "--events", "-"],
        "{\"advance\": \"1m\"}\n{\"event\": \"answer\"}\n",
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("line 1: `advance` moves the virtual clock: run with --virtual-time"),
        "{stderr}"
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    use std::io::BufRead;
    let files = vec![concat!(env!("CARGO_MANIFEST_DIR"), "/protocols/ittw.yaml"); 2_000];
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("validate")
        .args(&files)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -1`: one line read, then the pipe is closed.
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("ok: "), "{first}");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        output.status.signal(),
        Some(13),
        "ended by SIGPIPE, as `cat` would be"
    );
}

#[test]
fn event_data_cannot_forge_a_log_line_or_drive_the_terminal() {
    let directory = crate::support::temporary_directory("cli", "forged-log");
    std::fs::write(
        directory.join("echo.yaml"),
        "id: echo\nstates:\n  waiting:\n    on:\n      say: { target: done, actions: [{ log: \"said ${event.data.text}\" }] }\n  done: { type: final }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        "{\"event\":\"say\",\"data\":{\"text\":\"hi\\n2026-01-01T00:00:00.000Z ERROR forged \\u001b[31mred\\r\"}}\n",
    )
    .unwrap();
    let state = directory.join("state");
    let (code, _, stderr) = crate::support::run_binary(
        &directory,
        &[
            "echo.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("said"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].ends_with(r"said hi\n2026-01-01T00:00:00.000Z ERROR forged \u{1b}[31mred\r"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("\n2026-01-01") && !stderr.contains('\u{1b}'),
        "{stderr:?}"
    );
}

#[test]
fn validate_checks_scenario_files_as_scenarios() {
    let protocols = concat!(env!("CARGO_MANIFEST_DIR"), "/protocols");
    let mut files: Vec<String> = std::fs::read_dir(protocols)
        .unwrap()
        .map(|entry| entry.unwrap().path().display().to_string())
        .filter(|path| path.ends_with(".yaml"))
        .collect();
    files.sort();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("validate")
        .args(&files)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("ittw.scenario.yaml (scenarios of protocol `ittw`, "),
        "{stdout}"
    );
    // A scenario file with a mistake is located like a protocol's.
    let directory = crate::support::temporary_directory("cli", "bad-scenario");
    std::fs::copy(
        format!("{protocols}/retry-backoff.yaml"),
        directory.join("retry-backoff.yaml"),
    )
    .unwrap();
    std::fs::write(
        directory.join("bad.scenario.yaml"),
        "protocol: retry-backoff.yaml\nscenarios:\n  - name: x\n    steps: [{ sned: go }]\n",
    )
    .unwrap();
    let (code, _, stderr) =
        crate::support::run_binary(&directory, &["validate", "bad.scenario.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("bad.scenario.yaml:4:"), "{stderr}");
}

/// `validate FILE...` with plain file names is read without clap (issue 29); every file of
/// `protocols/`, a file with errors, a missing one and a library give the same output and exit
/// code as when clap reads the same line (after `--`, which only clap reads).
#[test]
fn validate_of_plain_files_answers_as_through_clap() {
    let directory = crate::support::temporary_directory("cli", "plain-validate");
    std::fs::write(
        directory.join("bad.yaml"),
        "id: bad\nstates:\n  a: {on: {go: nowhere}}\n",
    )
    .unwrap();
    let protocols = concat!(env!("CARGO_MANIFEST_DIR"), "/protocols");
    let mut lines: Vec<Vec<String>> = std::fs::read_dir(protocols)
        .unwrap()
        .map(|entry| vec![entry.unwrap().path().display().to_string()])
        .collect();
    lines.push(vec!["bad.yaml".into()]);
    lines.push(vec!["missing.yaml".into()]);
    lines.push(vec![
        format!("{protocols}/ittw.yaml"),
        "bad.yaml".into(),
        "x y.yaml".into(),
    ]);
    for files in lines {
        let plain: Vec<&str> = ["validate"]
            .into_iter()
            .chain(files.iter().map(String::as_str))
            .collect();
        let through_clap: Vec<&str> = ["validate", "--"]
            .into_iter()
            .chain(files.iter().map(String::as_str))
            .collect();
        let answer = crate::support::run_binary(&directory, &plain);
        assert_eq!(
            answer,
            crate::support::run_binary(&directory, &through_clap),
            "{files:?}"
        );
        assert!(answer.1.contains("ok: ") || answer.0 != 0, "{answer:?}");
    }
    // Without a file, or with a flag, clap answers as before.
    let (code, _, stderr) = crate::support::run_binary(&directory, &["validate"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("<FILES>..."), "{stderr}");
    let (code, stdout, _) = crate::support::run_binary(&directory, &["validate", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Check protocol files"), "{stdout}");
}
