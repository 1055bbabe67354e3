//! Effects as a user runs them: real processes, tools and files, retries under virtual time,
//! failures routed to the right transitions.

use std::process::{Command, Stdio};

fn temporary_directory(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("effects", name)
}

/// Writes the protocol into `directory` and runs it; returns (exit code, stdout, stderr).
fn run_protocol(
    directory: &std::path::Path,
    yaml: &str,
    arguments: &[&str],
) -> (i32, String, String) {
    let path = directory.join("protocol.yaml");
    std::fs::write(&path, yaml).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg(&path)
        .args(["--state-dir", directory.join("state").to_str().unwrap()])
        .args(arguments)
        .current_dir(directory)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

const ROUTING: &str = r#"
id: routing
inputs: { command: { type: list, items: string } }
states:
  calling:
    entry:
      - exec: "${command}"
        id: op
        timeout: 300ms
    on:
      done.exec.op: { target: succeeded, actions: [{ log: "out=${event.data.stdout}" }] }
      error.exec.timeout.op: timed_out
      error.exec: { target: failed, actions: [{ log: "code=${event.data.exit_code}" }] }
  succeeded: { type: final, exit_code: 0 }
  timed_out: { type: final, exit_code: 2 }
  failed: { type: final, exit_code: 3 }
"#;

#[test]
fn outcomes_are_routed_to_the_right_transition() {
    let directory = temporary_directory("routing");
    let yaml = ROUTING.replace("exec: \"${command}\"", "exec: [sh, -c, \"${command[0]}\"]");
    let (code, _, stderr) = run_protocol(&directory, &yaml, &["-i", r#"command=["echo hi"]"#]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("out=hi"), "{stderr}");
    let (code, _, stderr) = run_protocol(&directory, &yaml, &["-i", r#"command=["exit 7"]"#]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("code=7"), "{stderr}");
    let started = std::time::Instant::now();
    let (code, _, stderr) = run_protocol(
        &directory,
        &yaml,
        &["-i", r#"command=["sleep 30 & sleep 30"]"#],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_retry_ladder_gets_the_exact_attempt_timeouts_under_virtual_time() {
    let directory = temporary_directory("ladder");
    let yaml = r#"
id: ladder
states:
  calling:
    entry:
      - exec: [sleep, "1000"]
        id: operation
        timeout: 2m
        timeout_multipliers: [1, 2, 3, 5, 10]
        retry: [{ error_equals: [error.exec.timeout], max_attempts: 5, interval: 2s, backoff_rate: 1 }]
        telemetry: adr018
    on:
      done.exec.operation: { target: done, actions: [{ log: "result ${event.data.stdout}" }] }
      error.exec: failed
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#;
    let started = std::time::Instant::now();
    let (code, _, stderr) = run_protocol(
        &directory,
        yaml,
        &[
            "--virtual-time",
            "--mock",
            "operation=timeout,timeout,ok:fine",
            "--log-format",
            "json",
        ],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "virtual time elapsed instantly"
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let timeouts: Vec<i64> = lines
        .iter()
        .filter(|line| line["tags"] == serde_json::json!(["adr018_timeout_attempt"]))
        .map(|line| line["fields"]["timeout_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(timeouts, [120_000, 240_000, 360_000]);
    let success = lines
        .iter()
        .find(|line| line["tags"] == serde_json::json!(["adr018_timeout_success"]))
        .unwrap();
    assert_eq!(success["fields"]["attempts"], 3);
    assert_eq!(success["fields"]["final_timeout_ms"], 360_000);
    assert!(lines.iter().any(|line| line["message"] == "result fine"));
    // Exhausted: five attempts, then the failure reaches the protocol.
    let (code, _, stderr) = run_protocol(
        &directory,
        yaml,
        &["--virtual-time", "--mock", "operation=timeout"],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("#adr018_timeout_exhausted attempts=5"),
        "{stderr}"
    );
}

#[test]
fn incomplete_output_is_detected_and_retried() {
    let directory = temporary_directory("incomplete");
    let yaml = r#"
id: incomplete
states:
  calling:
    entry:
      - exec: [echo]
        id: op
        incomplete_markers: true
        retry: [{ error_equals: [error.incomplete], max_attempts: 2, interval: 1s }]
    on:
      done.exec.op: done
      error.incomplete.op: { target: failed, actions: [{ log: "gave up: ${event.data.message}" }] }
  done: { type: final }
  failed: { type: final, exit_code: 4 }
"#;
    let (code, _, stderr) = run_protocol(
        &directory,
        yaml,
        &[
            "--virtual-time",
            "--mock",
            "op=ok:partial... (truncated),ok:whole",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("#op_incomplete_output"), "{stderr}");
    let (code, _, stderr) = run_protocol(
        &directory,
        yaml,
        &["--virtual-time", "--mock", "op=ok:Killed"],
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("gave up: incomplete output: `Killed`"),
        "{stderr}"
    );
}

#[test]
fn tools_read_list_and_search_real_files() {
    let directory = temporary_directory("tools");
    std::fs::create_dir_all(directory.join("data/sub")).unwrap();
    std::fs::write(directory.join("data/a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(directory.join("data/sub/b.txt"), "gamma beta\n").unwrap();
    let yaml = r#"
id: tools
context: { seen: 0 }
states:
  working:
    entry:
      - read_file: data/a.txt
        id: read
      - list_dir: data
        id: list
      - grep_search: beta
        path: data
        id: grep
      - grep_search: nothing-here
        path: data
        id: miss
    on:
      done.exec.read: { actions: [{ log: "read ${event.data.bytes}: ${event.data.stdout}" }, { assign: { seen: "seen + 1" } }] }
      done.exec.list: { actions: [{ log: "list ${event.data.entries}" }, { assign: { seen: "seen + 1" } }] }
      done.exec.grep: { actions: [{ log: "grep ${event.data.matches}" }, { assign: { seen: "seen + 1" } }] }
      error.exec.miss: { actions: [{ log: "miss ${event.data.message}" }, { assign: { seen: "seen + 1" } }] }
    always: { target: done, guard: seen == 4 }
  done: { type: final }
"#;
    let (code, _, stderr) = run_protocol(&directory, yaml, &[]);
    assert_eq!(code, 0, "{stderr}");
    // The human log writes the newlines of the data as escapes: one record, one line.
    assert!(stderr.contains(r"read 11: alpha\nbeta\n"), "{stderr}");
    assert!(stderr.contains(r#"list ["a.txt","sub/"]"#), "{stderr}");
    assert!(stderr.contains("grep 2"), "{stderr}");
    assert!(
        stderr.contains("miss no line matches `nothing-here`"),
        "{stderr}"
    );
}

#[test]
fn files_are_written_appended_and_restored() {
    let directory = temporary_directory("files");
    std::fs::write(directory.join("workflow.json"), r#"{"name": "kept"}"#).unwrap();
    std::fs::write(directory.join("state.json"), r#"{"ok": true}"#).unwrap();
    let yaml = r##"
id: files
context: { done: 0 }
states:
  writing:
    entry:
      - write: out/report.md
        content: "# Report\n\nlevel ${1 + 2}\n"
        id: report
      - write: out/ledger.jsonl
        append: { event: first, n: 1 }
        id: ledger
      - write: workflow.json
        json_append: { array: /failure_escalations, item: { level: 3, resolution: checkpointed } }
        id: workflow
      - backup: state.json
        to: state.json.bak
        id: backup
    on:
      done.exec: { actions: [{ assign: { done: "done + 1" } }] }
      error.exec: { target: failed, actions: [{ log: "failed ${event.data.message}" }] }
    always: { target: corrupting, guard: done == 4 }
  corrupting:
    entry:
      - write: state.json
        content: "{not json"
        id: corrupt
    on:
      done.exec.corrupt: restoring
  restoring:
    entry:
      - if: "!json_valid('state.json')"
        then: [{ restore: state.json, from: state.json.bak, id: restore }]
    on:
      done.exec.restore: finished
  finished: { type: final }
  failed: { type: final, exit_code: 1 }
"##;
    let (code, _, stderr) = run_protocol(&directory, yaml, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(directory.join("out/report.md")).unwrap(),
        "# Report\n\nlevel 3\n"
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("out/ledger.jsonl")).unwrap(),
        "{\"event\":\"first\",\"n\":1}\n"
    );
    let workflow: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(directory.join("workflow.json")).unwrap())
            .unwrap();
    assert_eq!(workflow["name"], "kept");
    assert_eq!(
        workflow["failure_escalations"][0]["resolution"],
        "checkpointed"
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("state.json")).unwrap(),
        r#"{"ok": true}"#
    );
}

/// What `a_killed_run_never_leaves_a_partially_written_file` writes, over and over: a header
/// naming the round and the write, the body, and a footer repeating the header.
const REWRITING: &str = r#"
id: rewriting
inputs:
  content: { type: string }
  round: { type: integer }
context: { writes: 0 }
states:
  writing:
    entry:
      - assign: { writes: "writes + 1" }
      - write: target.txt
        content: "begin ${round} ${writes}\n${content}\nend ${round} ${writes}\n"
        id: write
    on:
      done.exec.write: writing
"#;

/// The (round, write) of a complete `REWRITING` file; `None` for anything else.
fn complete_write(text: &str, body: &str) -> Option<(u64, u64)> {
    let (header, rest) = text.split_once('\n')?;
    let numbers = header.strip_prefix("begin ")?;
    let rest = rest.strip_prefix(body)?;
    (rest == format!("\nend {numbers}\n")).then_some(())?;
    let (round, write) = numbers.split_once(' ')?;
    Some((round.parse().ok()?, write.parse().ok()?))
}

/// The first line of the file at `path`, if it has one yet.
fn header(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut start = [0; 64];
    let read = std::fs::File::open(path).ok()?.read(&mut start).ok()?;
    let text = std::str::from_utf8(&start[..read]).ok()?;
    Some(text.split_once('\n')?.0.to_string())
}

/// The temporary files `write` leaves in `directory` (a kill between creating one and renaming
/// it over the target leaves it behind), by name.
fn temporary_files(directory: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(directory)
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().to_string())
        .filter(|name| name.starts_with(".target.txt.") && name.ends_with(".tmp"))
        .collect()
}

/// Kills of `a_killed_run_never_leaves_a_partially_written_file`, each of a fresh run.
const ROUNDS: u64 = 10;

/// Runs that rewrite one file in a loop are killed (SIGKILL) while a write is under way: the
/// target is always one complete write, from this round or an earlier one, never a mix or a
/// cut; what a kill leaves is its own temporary file, at most one.
#[test]
fn a_killed_run_never_leaves_a_partially_written_file() {
    let directory = temporary_directory("killed");
    let content = "x".repeat(100_000);
    let path = directory.join("protocol.yaml");
    std::fs::write(&path, REWRITING).unwrap();
    let mut killed_mid_write = 0;
    for round in 1..=ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .arg(&path)
            .args(["--state-dir", directory.join("state").to_str().unwrap()])
            .arg("--input")
            .arg(format!("content={content}"))
            .arg("--input")
            .arg(format!("round={round}"))
            .current_dir(&directory)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let own_prefix = format!(".target.txt.{}.", child.id());
        // Killed once this run has written the file and the moment its next write is seen
        // under way, not at a fixed time that a slow start could outlast.
        let begun = std::time::Instant::now();
        let mut wrote = false;
        loop {
            assert!(
                begun.elapsed() < std::time::Duration::from_secs(30),
                "round {round}: the writes never began"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "round {round}: the run ended"
            );
            if !wrote {
                wrote = header(&directory.join("target.txt"))
                    .is_some_and(|header| header.starts_with(&format!("begin {round} ")));
            } else if temporary_files(&directory)
                .iter()
                .any(|name| name.starts_with(&own_prefix))
            {
                break;
            }
            std::thread::yield_now();
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let written = std::fs::read_to_string(directory.join("target.txt")).unwrap();
        let (written_round, write) = complete_write(&written, &content).unwrap_or_else(|| {
            panic!(
                "round {round}: a partial file of {} bytes, starting {:?}",
                written.len(),
                &written[..written.len().min(30)]
            )
        });
        assert!(
            written_round <= round && write >= 1,
            "round {round}: {written_round} {write}"
        );
        let left: Vec<String> = temporary_files(&directory)
            .into_iter()
            .filter(|name| name.starts_with(&own_prefix))
            .collect();
        assert!(left.len() <= 1, "round {round}: {left:?}");
        killed_mid_write += left.len();
    }
    // Every temporary file left is a killed run's, one per run at most (checked above); and
    // enough kills landed inside a write for the rounds to have tested something (nearly all
    // do, the kill following the sight of the temporary file at once).
    let left = temporary_files(&directory);
    assert_eq!(left.len(), killed_mid_write, "{left:?}");
    assert!(
        killed_mid_write >= ROUNDS as usize * 3 / 10,
        "only {killed_mid_write} kills of {ROUNDS} landed inside a write"
    );
    eprintln!("{killed_mid_write} of {ROUNDS} kills landed inside a write");
}

const CHILD: &str = r#"
id: child
inputs:
  command: { type: string, required: true }
  label: { type: string, default: unnamed }
states:
  running:
    entry:
      - exec: [sh, -c, "${command}"]
        id: op
    on:
      done.exec.op: ok
      error.exec: failed
  ok: { type: final, output: { stdout: "${event.data.stdout}", label: "${label}" } }
  failed: { type: final, exit_code: 3, output: { error: "${event.data.message}" } }
"#;

const PARENT: &str = r#"
id: parent
inputs: { command: { type: string } }
states:
  calling:
    invoke:
      - protocol: child.yaml
        id: wrapper
        inputs: { command: "${command}", label: from-parent }
    on:
      done.invoke.wrapper: { target: done, actions: [{ log: "got ${event.data.stdout} ${event.data.label}" }] }
      error.invoke.wrapper: { target: failed, actions: [{ log: "failed: ${event.data.message}" }] }
      cancel: cancelled
  done: { type: final }
  failed: { type: final, exit_code: 1 }
  cancelled: { type: final, exit_code: 2 }
"#;

#[test]
fn a_child_protocols_output_reaches_its_parent() {
    let directory = temporary_directory("invoke");
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let (code, _, stderr) = run_protocol(&directory, PARENT, &["-i", "command=printf hello"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("got hello from-parent"), "{stderr}");
    let (code, _, stderr) = run_protocol(&directory, PARENT, &["-i", "command=exit 4"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("failed: the child protocol ended in `failed` with exit code 3"),
        "{stderr}"
    );
}

#[test]
fn invoke_mistakes_are_located() {
    let directory = temporary_directory("invoke-errors");
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let yaml = "id: bad\nstates:\n  a:\n    invoke:\n      - { protocol: child.yaml, id: w, inputs: { comand: x } }\n      - { protocol: missing.yaml, id: m }\n      - { protocol: protocol.yaml, id: self }\n";
    let (code, _, stderr) = run_protocol(&directory, yaml, &[]);
    assert_eq!(code, 65, "{stderr}");
    for expected in [
        "`child.yaml` has no input `comand`",
        "did you mean `command`?",
        "the child protocol needs the input `command`",
        "missing.yaml: no such file",
        "invoke cycle",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in {stderr}"
        );
    }
}

/// Under virtual time a real process still gets its real timeout: it is not cut short by a
/// clock that jumps ahead, and it is still killed when it overruns.
#[test]
fn real_processes_are_timed_on_the_real_clock_under_virtual_time() {
    let directory = temporary_directory("real-clock");
    let yaml = r#"
id: real-clock
inputs:
  seconds: { type: string, default: "0" }
states:
  running:
    entry:
      - exec: [sh, -c, "sleep ${seconds}; echo finished"]
        id: work
        timeout: 700ms
    after:
      - delay: 1h
        target: stalled
    on:
      done.exec.work: done
      error.exec.timeout.work: timed_out
  done: { type: final }
  timed_out: { type: final, exit_code: 2 }
  stalled: { type: final, exit_code: 3 }
"#;
    let (code, _, stderr) = run_protocol(
        &directory,
        yaml,
        &["--virtual-time", "--input", "seconds=0.2"],
    );
    assert_eq!(
        code, 3,
        "the hour-long timer fires instantly, before the process ends: {stderr}"
    );
    // Without a competing timer, the process's own outcome decides.
    std::fs::write(
        directory.join("protocol.yaml"),
        yaml.replace(
            "    after:\n      - delay: 1h\n        target: stalled\n",
            "",
        ),
    )
    .unwrap();
    let scenario = r#"
protocol: protocol.yaml
scenarios:
  - name: a quick process beats its real timeout
    inputs: { seconds: "0.2" }
    steps:
      - expect: { finished: { state: done } }
  - name: a slow one is killed at its real timeout
    inputs: { seconds: "5" }
    steps:
      - expect: { finished: { state: timed_out } }
"#;
    let scenario_path = directory.join("protocol.scenario.yaml");
    std::fs::write(&scenario_path, scenario).unwrap();
    let started = std::time::Instant::now();
    let report = protocol_run::tooling::scenario::runner::run_file(&scenario_path);
    for result in &report.results {
        assert!(
            result.failures.is_empty(),
            "{}: {:?}",
            result.name,
            result.failures
        );
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(700)
            && elapsed < std::time::Duration::from_secs(4),
        "{elapsed:?}"
    );
}
