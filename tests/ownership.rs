//! Effects and children belong to the state that started them: awaited at the end of a run,
//! cancelled with their state, never delivered stale, never forged from input.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temporary_directory(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("ownership", name)
}

fn command(directory: &Path, arguments: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
    command
        .args(arguments)
        .args(["--state-dir", directory.join("state").to_str().unwrap()])
        .current_dir(directory);
    command
}

/// Writes `protocol.yaml` and runs it to its end; returns (exit code, stdout, stderr).
fn run(directory: &Path, yaml: &str, arguments: &[&str]) -> (i32, String, String) {
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    let state = directory.join("state");
    let mut all = vec!["protocol.yaml", "--state-dir", state.to_str().unwrap()];
    all.extend_from_slice(arguments);
    crate::support::run_binary(directory, &all)
}

/// Starts `protocol.yaml` reading events from a pipe.
fn start(directory: &Path, yaml: &str) -> Child {
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    command(directory, &["protocol.yaml", "--events", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (at most 20 s, for a loaded machine) until `path` exists.
fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn finished_line(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("{\"finished\""))
        .unwrap_or_else(|| panic!("no finished line in {stdout}"));
    serde_json::from_str::<serde_json::Value>(line).unwrap()["finished"].clone()
}

const LOST: &str = r#"
id: lost
context: { n: 0 }
states:
  loop:
    on:
      order:
        target: loop
        actions:
          - assign: { n: "n + 1" }
          - { write: "orders/order-${n}.json", content: '{"order": ${n}}', id: save }
          - { exec: [sh, -c, 'sleep 0.1; echo "charged card for order $0" >> charges.log', "${n}"], id: charge }
    always: { target: done, guard: "n == 5" }
  done: { type: final, output: { orders: "${n}" } }
"#;

#[test]
fn effects_still_running_at_the_final_state_are_awaited_and_listed() {
    let directory = temporary_directory("lost");
    let events = "{\"event\":\"order\"}\n".repeat(5);
    std::fs::write(directory.join("five.jsonl"), events).unwrap();
    let (code, stdout, stderr) = run(&directory, LOST, &["--events", "five.jsonl"]);
    assert_eq!(code, 0, "{stderr}");
    for order in 1..=5 {
        let text = std::fs::read_to_string(directory.join(format!("orders/order-{order}.json")))
            .unwrap_or_else(|error| panic!("order {order}: {error}"));
        assert_eq!(text, format!("{{\"order\": {order}}}"));
    }
    let mut charges: Vec<String> = std::fs::read_to_string(directory.join("charges.log"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    charges.sort();
    let expected: Vec<String> = (1..=5)
        .map(|order| format!("charged card for order {order}"))
        .collect();
    assert_eq!(charges, expected);
    let finished = finished_line(&stdout);
    assert_eq!(finished["output"]["orders"], 5);
    let effects = finished["effects"].as_array().unwrap();
    // Ten invocations (five of each action), each reported once, each completed.
    let mut invocations: Vec<u64> = effects
        .iter()
        .map(|effect| effect["invocation"].as_u64().unwrap())
        .collect();
    invocations.sort();
    assert_eq!(invocations, (0..10).collect::<Vec<u64>>(), "{finished}");
    assert!(
        effects
            .iter()
            .all(|effect| effect["outcome"] == "completed"),
        "{finished}"
    );
    // The store agrees: the run is finished, and nothing is left running.
    let output = command(&directory, &["status"]).output().unwrap();
    let status = String::from_utf8_lossy(&output.stdout);
    assert!(status.contains("status    finished"), "{status}");
    assert!(!status.contains("running   "), "{status}");
}

const FINAL_ENTRY: &str = r#"
id: final-entry
states:
  working:
    always: done
  done:
    type: final
    exit_code: 0
    entry:
      - { exec: [sh, -c, 'sleep 0.2; touch written; exit ${code}'], id: notify }
"#;

#[test]
fn effects_of_a_final_states_entry_complete_and_a_late_failure_is_reported() {
    let directory = temporary_directory("final-entry");
    let (code, stdout, stderr) = run(&directory, &FINAL_ENTRY.replace("${code}", "0"), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(directory.join("written").exists());
    let finished = finished_line(&stdout);
    assert_eq!(finished["effects"][0]["id"], "notify", "{finished}");
    assert_eq!(finished["effects"][0]["outcome"], "completed", "{finished}");

    let failing = FINAL_ENTRY.replace("${code}", "3");
    let (code, stdout, stderr) = run(&directory, &failing, &[]);
    assert_eq!(code, 0, "the state's exit code stands: {stderr}");
    assert!(stderr.contains("effect_failed_after_finish"), "{stderr}");
    assert!(
        stderr.contains("notify failed after the run finished"),
        "{stderr}"
    );
    let finished = finished_line(&stdout);
    assert_eq!(finished["effects"][0]["outcome"], "failed", "{finished}");
    assert_eq!(finished["effects"][0]["exit_code"], 3, "{finished}");

    let (code, _, stderr) = run(&directory, &failing, &["--strict-effects"]);
    assert_eq!(code, 70, "{stderr}");
}

/// Each visit of `auditing` starts `audit`, which says it started (`started-N`), works, and
/// says it finished (`finished-N`); its stdout is the visit's number.
const AUDITING: &str = r#"
id: auditing
context: { visit: 0 }
states:
  auditing:
    entry:
      - assign: { visit: "visit + 1" }
      - exec: [sh, -c, 'touch started-$0; sleep $1; touch finished-$0; printf $0', "${visit}", "${visit == 1 ? '3' : '0.2'}"]
        id: audit
    on:
      pause: paused
      done.exec.audit: { target: audited, actions: [{ assign: { audited: "event.data.stdout" } }] }
  paused:
    on: { resume: auditing }
  audited: { type: final, output: { visit: "${visit}", audited: "${audited}" } }
"#;

#[test]
fn leaving_a_state_stops_its_effect_and_its_outcome_never_reaches_the_next_visit() {
    let directory = temporary_directory("auditing");
    let yaml = AUDITING.replace(
        "context: { visit: 0 }",
        "context: { visit: 0, audited: '' }",
    );
    let mut child = start(&directory, &yaml);
    wait_for(&directory.join("started-1"));
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"event\":\"pause\"}\n{\"event\":\"resume\"}\n")
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let finished = finished_line(&stdout);
    // The outcome taken is the second visit's own.
    assert_eq!(finished["output"]["visit"], 2, "{finished}");
    assert_eq!(finished["output"]["audited"], "2", "{finished}");
    assert!(directory.join("finished-2").exists());
    // The first visit's process was stopped when `auditing` exited: it never finished, even
    // after the time it would have taken.
    std::thread::sleep(Duration::from_millis(3_500));
    assert!(
        !directory.join("finished-1").exists(),
        "the first visit's audit survived its state"
    );
    // Its cancellation is recorded in the telemetry.
    let telemetry = crate::support::read_telemetry(&directory);
    let cancelled: Vec<&serde_json::Value> = telemetry
        .iter()
        .filter(|entry| entry["kind"] == "effect" && entry["outcome"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{telemetry:#?}");
    assert_eq!(cancelled[0]["id"], "audit");
    assert_eq!(cancelled[0]["invocation"], 0);
    assert_eq!(cancelled[0]["owner"], "auditing");
}

const CHILD: &str = r#"
id: child
states:
  working:
    entry:
      - { exec: [sh, -c, 'touch child-started; sleep 1; touch child-finished'], id: work }
    on:
      done.exec.work: finished
  finished: { type: final }
"#;

const PARENT: &str = r#"
id: parent
states:
  waiting:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      cancel: cancelled
      done.invoke.kid: done
  cancelled: { type: final, exit_code: 2 }
  done: { type: final }
"#;

#[test]
fn leaving_the_invoking_state_stops_the_childs_processes() {
    let directory = temporary_directory("child");
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let mut child = start(&directory, PARENT);
    // The child's process runs: only now does leaving the state have something to stop.
    wait_for(&directory.join("child-started"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"event\":\"cancel\"}\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        !directory.join("child-finished").exists(),
        "the child's process survived the cancellation"
    );
}

const TESTS_THEN_DEPLOY: &str = r#"
id: deploy
states:
  testing:
    entry:
      - { exec: [sh, -c, 'sleep 0.3; exit 1'], id: tests }
    on:
      done.exec.tests: deploy
      error.exec.tests: { target: failed, actions: [{ log: "origin=${event.origin} type=${event.type}" }] }
  deploy: { type: final, exit_code: 0 }
  failed: { type: final, exit_code: 1 }
"#;

#[test]
fn input_cannot_forge_an_engine_event() {
    let directory = temporary_directory("forged");
    std::fs::write(
        directory.join("forged.jsonl"),
        concat!(
            "{\"event\":\"done.exec.tests\",\"data\":{\"exit_code\":0}}\n",
            "{\"event\":\"error.execution\"}\n",
            "{\"event\":\"error.permission.tests\"}\n",
            "{\"event\":\"timeout\"}\n",
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&directory, TESTS_THEN_DEPLOY, &["--events", "forged.jsonl"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    for line in 1..=4 {
        assert!(
            stderr.contains(&format!("events line {line}: `")),
            "line {line} not refused: {stderr}"
        );
    }
    assert!(stderr.contains("is an engine event"), "{stderr}");
    // The real outcome reached the protocol, as the engine's.
    assert!(stderr.contains("origin=platform type=external"), "{stderr}");
}

#[test]
fn serve_refuses_a_forged_engine_event_before_creating_anything() {
    let directory = temporary_directory("forged-serve");
    std::fs::write(directory.join("protocol.yaml"), TESTS_THEN_DEPLOY).unwrap();
    let mut child = command(&directory, &["serve", "protocol.yaml", "--store", "memory"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"instance\":\"a\",\"event\":\"done.exec.tests\"}\n{\"instance\":\"b\"}\n")
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is an engine event"), "{stderr}");
    // The refusal is said on stdout too, and `a` was never started.
    assert!(
        stdout.contains(r#"{"instance":"a","event":"done.exec.tests","outcome":"refused""#),
        "{stdout}"
    );
    assert!(!stdout.contains(r#"{"instance":"a","started""#), "{stdout}");
    // `b` ran its real tests, which fail, and waited for them after input ended.
    assert!(
        stdout.contains("\"instance\":\"b\"") && stdout.contains("\"state\":\"failed\""),
        "{stdout}"
    );
}

const ESCAPING: &str = r#"
id: escaping
states:
  working:
    entry:
      - exec: [sh, -c, 'setsid sh -c "sleep 1; touch escaped-setsid" & (setsid sh -c "sleep 1; touch escaped-double-fork" &) ; sleep 30']
        id: work
        timeout: 300ms
    on:
      error.exec.timeout.work: timed_out
  timed_out: { type: final, exit_code: 2 }
"#;

#[test]
fn a_grandchild_that_left_the_process_group_is_stopped_at_timeout() {
    let directory = temporary_directory("setsid");
    let (code, _, stderr) = run(&directory, ESCAPING, &[]);
    assert_eq!(code, 2, "{stderr}");
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        !directory.join("escaped-setsid").exists(),
        "setsid survived"
    );
    assert!(
        !directory.join("escaped-double-fork").exists(),
        "a double fork survived"
    );
}

/// The engine is killed with SIGKILL while `work` runs; `work` says which copy it is.
const INTERRUPTED: &str = r#"
id: interrupted
states:
  working:
    entry:
      - exec: [sh, -c, 'if [ -e first.pid ]; then echo second; else echo $$ > first.pid; sleep 30; fi']
        id: work
        on_interrupt: POLICY
    on:
      done.exec.work: done
      error.exec.work:
        target: failed
        actions:
          - log: "attempts=${event.data.attempts} timed_out=${event.data.timed_out} interrupted=${event.data.interrupted} exit_code=${event.data.exit_code} has_elapsed=${has(event.data.elapsed_ms)}"
  done: { type: final, exit_code: 0, output: { said: "${event.data.stdout}" } }
  failed: { type: final, exit_code: 1 }
"#;

/// Starts the protocol, waits until `work`'s first copy runs, kills the engine with SIGKILL
/// and resumes the run; returns the first copy's pid and the resume's (code, stdout, stderr).
fn kill_and_resume(directory: &Path, policy: &str) -> (i32, (i32, String, String)) {
    let yaml = INTERRUPTED.replace("POLICY", policy);
    let mut engine = start(directory, &yaml);
    let pid_file = directory.join("first.pid");
    wait_for(&pid_file);
    let pid = loop {
        // Written by `echo`: wait for the whole line.
        let text = std::fs::read_to_string(&pid_file).unwrap();
        if text.ends_with('\n') {
            break text.trim().parse::<i32>().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The step that started it is committed before the process runs.
    engine.kill().unwrap();
    engine.wait().unwrap();
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive, "the first copy should outlive the killed engine");
    let resumed = run(directory, &yaml, &["--resume"]);
    (pid, resumed)
}

fn is_gone(pid: i32) -> bool {
    // A zombie is gone too: it runs nothing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

#[test]
fn a_resumed_retry_never_runs_beside_the_interrupted_copy() {
    let directory = temporary_directory("resume-retry");
    let (pid, (code, stdout, stderr)) = kill_and_resume(&directory, "retry");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished_line(&stdout)["output"]["said"], "second\n");
    assert!(is_gone(pid), "the interrupted copy {pid} still runs");
}

#[test]
fn an_interrupted_failure_has_the_shape_of_any_failure() {
    let directory = temporary_directory("resume-fail");
    let (pid, (code, _, stderr)) = kill_and_resume(&directory, "fail");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(
            "attempts=1 timed_out=false interrupted=true exit_code=null has_elapsed=true"
        ),
        "{stderr}"
    );
    assert!(is_gone(pid), "the interrupted copy {pid} still runs");
}

const NOTIFYING: &str = r#"
id: notifying
states:
  working:
    entry:
      - exec: [sh, -c, 'sleep 0.3; touch notified']
        id: notify
        scope: run
    on:
      next: waiting
  waiting:
    on:
      done.exec.notify:
        target: done
        actions: [{ log: "notified by invocation ${event.data.invocation}" }]
  done: { type: final }
"#;

#[test]
fn an_effect_scoped_to_the_run_outlives_its_state_and_reports() {
    let directory = temporary_directory("scope-run");
    std::fs::write(directory.join("next.jsonl"), "{\"event\":\"next\"}\n").unwrap();
    let (code, _, stderr) = run(&directory, NOTIFYING, &["--events", "next.jsonl"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(directory.join("notified").exists());
    assert!(stderr.contains("notified by invocation 0"), "{stderr}");
    // Without `scope: run` the state's exit cancels it: the run stops unfinished.
    let owned = NOTIFYING.replace("        scope: run\n", "");
    let (code, _, stderr) = run(&directory, &owned, &["--events", "next.jsonl"]);
    assert_eq!(code, 75, "{stderr}");
}

/// `work` fails at once until its second attempt, which waits for `go` (the test creates it
/// after killing the engine) and then succeeds.
const RETRYING: &str = r#"
id: retrying
states:
  working:
    entry:
      - exec: [sh, -c, 'n=$(cat count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > count; [ $n -ge 2 ] || exit 1; while [ ! -e go ]; do sleep 0.02; done']
        id: work
        on_interrupt: retry
        retry: [{ error_equals: [error.exec], max_attempts: 5, interval: 10ms }]
    on:
      done.exec.work: { target: done, actions: [{ log: "succeeded on attempt ${event.data.attempts}" }] }
      error.exec.work: failed
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#;

#[test]
fn a_retry_plan_goes_on_from_its_attempt_after_a_resume() {
    let directory = temporary_directory("resume-attempts");
    let mut engine = start(&directory, RETRYING);
    // The second attempt is recorded in the store.
    crate::support::wait_for_status(
        &directory,
        &directory.join("state"),
        "attempt 2 recorded",
        |status| status["state"]["effect_attempts"][0]["attempt"] == 2,
    );
    engine.kill().unwrap();
    engine.wait().unwrap();
    std::fs::write(directory.join("go"), "").unwrap();
    let (code, _, stderr) = run(&directory, RETRYING, &["--resume"]);
    assert_eq!(code, 0, "{stderr}");
    // Attempt 2 ran again (its leftover stopped) and succeeded: the count went on from 2.
    assert!(stderr.contains("succeeded on attempt 2"), "{stderr}");
}

const SLEEPER: &str = r#"
id: sleeper
states:
  working:
    entry:
      - { exec: [sh, -c, 'touch started; sleep 30'], id: work }
    on:
      done.exec.work: done
  done: { type: final }
"#;

#[test]
fn a_signal_records_the_running_effects_as_interrupted() {
    let directory = temporary_directory("signal");
    let engine = start(&directory, SLEEPER);
    wait_for(&directory.join("started"));
    let terminated = Command::new("kill")
        .args(["-TERM", &engine.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let output = engine.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(75));
    let telemetry = crate::support::read_telemetry(&directory);
    let ends: Vec<&serde_json::Value> = telemetry
        .iter()
        .filter(|entry| entry["kind"] == "effect")
        .collect();
    assert_eq!(ends.len(), 1, "{telemetry:#?}");
    assert_eq!(ends[0]["outcome"], "interrupted");
    assert_eq!(ends[0]["id"], "work");
}

#[test]
fn serve_awaits_an_instances_effects_before_its_finished_line() {
    let directory = temporary_directory("serve-finish");
    std::fs::write(
        directory.join("protocol.yaml"),
        FINAL_ENTRY.replace("${code}", "0"),
    )
    .unwrap();
    let mut child = command(&directory, &["serve", "protocol.yaml", "--store", "memory"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"instance\":\"one\"}\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line: serde_json::Value = stdout
        .lines()
        .find(|line| line.contains("\"finished\""))
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap_or_else(|| panic!("no finished line: {stdout}"));
    assert_eq!(line["instance"], "one");
    assert_eq!(line["finished"]["effects"][0]["id"], "notify", "{line}");
    assert_eq!(line["finished"]["effects"][0]["outcome"], "completed");
    assert!(directory.join("written").exists());
}
