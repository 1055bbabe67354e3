//! Durable runs as a user runs them: killed at random and resumed, stopped by a signal, refused
//! when the protocol changed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use protocol_run::store::{SqliteStore, Store};

pub(crate) fn scratch(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("durable", name)
}

pub(crate) fn command(directory: &Path, arguments: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
    command
        .args(arguments)
        .args(["--state-dir", directory.join("state").to_str().unwrap()])
        .current_dir(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

pub(crate) fn finish(command: &mut Command) -> (i32, String, String) {
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Ten rounds of a real process then a timer; the process is safe to repeat.
const STEPS: &str = r#"
id: durable-steps
context: { step: 0 }
states:
  working:
    entry:
      - exec: [sh, -c, "echo ${step}"]
        id: work
        on_interrupt: retry
    on:
      done.exec.work: waiting
  waiting:
    after:
      - delay: 30ms
        guard: step < 9
        target: working
        actions: [{ assign: { step: "step + 1" } }]
      - delay: 30ms
        target: done
  done: { type: final, output: { step: "${step}" } }
"#;

/// What the journal of the (only) run in `directory` says happened: event and transitions.
fn journal(directory: &Path) -> Vec<(Option<String>, Vec<String>)> {
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    store
        .journal(&runs[0].id)
        .unwrap()
        .into_iter()
        // A resume is a step of its own; what the run did is the rest.
        .filter(|entry| {
            !entry
                .actions
                .as_array()
                .is_some_and(|actions| actions.iter().any(|action| action.get("resumed").is_some()))
        })
        .map(|entry| (entry.event.map(|event| event.name), entry.transitions))
        .collect()
}

/// A tiny deterministic generator, so a failure can be replayed from its seed.
struct Random(u64);

impl Random {
    fn below(&mut self, limit: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % limit
    }
}

/// The (only) run in `directory`, if it has finished: final state and output.
fn finished_run(directory: &Path) -> Option<(Option<String>, serde_json::Value)> {
    if !directory.join("state/state.db").exists() {
        return None;
    }
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let runs = store.list_runs().unwrap();
    let finish = runs.first()?.finish.clone()?;
    Some((finish.final_state, finish.output))
}

fn has_run(directory: &Path) -> bool {
    directory.join("state/state.db").exists()
        && !SqliteStore::open(directory.join("state"))
            .unwrap()
            .list_runs()
            .unwrap()
            .is_empty()
}

#[test]
fn a_run_killed_at_random_points_and_resumed_ends_like_an_uninterrupted_one() {
    let reference = scratch("reference");
    std::fs::write(reference.join("steps.yaml"), STEPS).unwrap();
    let (code, _, stderr) = finish(&mut command(&reference, &["steps.yaml"]));
    assert_eq!(code, 0, "{stderr}");
    let expected_journal = journal(&reference);
    assert!(expected_journal.len() > 20, "{expected_journal:?}");
    let expected_finish = finished_run(&reference).unwrap();
    assert_eq!(expected_finish.1, serde_json::json!({ "step": 9 }));

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut random = Random(seed);
    let mut kills = 0;
    let mut round = 0;
    while kills < 20 {
        round += 1;
        let directory = scratch(&format!("killed-{round}"));
        std::fs::write(directory.join("steps.yaml"), STEPS).unwrap();
        let mut attempts = 0;
        while finished_run(&directory).is_none() {
            attempts += 1;
            assert!(attempts < 40, "seed {seed}: round {round} never finished");
            // Resume the run once one is recorded, else start it.
            let arguments: &[&str] = if has_run(&directory) {
                &["steps.yaml", "--resume"]
            } else {
                &["steps.yaml"]
            };
            let mut child = command(&directory, arguments).spawn().unwrap();
            if kills < 20 && attempts <= 6 {
                std::thread::sleep(Duration::from_millis(random.below(250)));
                if child.try_wait().unwrap().is_none() {
                    // SIGKILL: no chance to clean up.
                    child.kill().unwrap();
                    child.wait().unwrap();
                    kills += 1;
                    continue;
                }
            }
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.code() == Some(0) || finished_run(&directory).is_some(),
                "seed {seed}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert_eq!(
            finished_run(&directory).unwrap(),
            expected_finish,
            "seed {seed}: round {round}"
        );
        assert_eq!(
            journal(&directory),
            expected_journal,
            "seed {seed}: round {round}"
        );
    }
}

const WAITING: &str = r#"
id: durable-waiting
context: { ticks: 0 }
states:
  waiting:
    entry: [{ log: "entered waiting", tags: [entered] }]
    on:
      tick:
        actions: [{ assign: { ticks: "ticks + 1" } }, { log: "tick ${ticks}" }]
      answer: answered
    after:
      - delay: 3s
        target: timed_out
  answered: { type: final, output: { ticks: "${ticks}" } }
  timed_out: { type: final, exit_code: 2, output: { ticks: "${ticks}" } }
"#;

/// A run waiting for events on stdin, once its stderr showed `ready` (the protocol's entry log,
/// written after the engine installed its signal handlers: a loaded machine can take far longer
/// than any fixed sleep to get there).
pub(crate) fn spawn_ready(
    directory: &Path,
    arguments: &[&str],
    ready: &str,
) -> (std::process::Child, StderrLines) {
    use std::io::BufRead;
    let mut child = command(directory, arguments)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    wait_for(&mut lines, ready);
    (child, lines)
}

pub(crate) type StderrLines = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

fn wait_for(lines: &mut StderrLines, text: &str) {
    for line in lines.by_ref() {
        if line.unwrap().contains(text) {
            return;
        }
    }
    panic!("the run ended before logging {text:?}");
}

/// SIGTERM, then the exit code and the rest of stderr.
pub(crate) fn terminate(child: std::process::Child, lines: StderrLines) -> (Option<i32>, String) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let rest: Vec<String> = lines.map(|line| line.unwrap()).collect();
    let output = child.wait_with_output().unwrap();
    (output.status.code(), rest.join("\n"))
}

/// Starts a run that waits for events, and stops it with SIGTERM.
fn stop_with_sigterm(directory: &Path, protocol: &str) -> String {
    let (child, lines) = spawn_ready(directory, &[protocol, "--events", "-"], "entered waiting");
    let (code, stderr) = terminate(child, lines);
    assert_eq!(code, Some(75), "{stderr}");
    stderr
}

/// SIGTERM stops the run between macrosteps with exit 75; `resume` continues without
/// entering again, and the timer keeps its original deadline.
#[test]
fn a_signal_stops_gracefully_and_resume_continues_without_re_entering() {
    let directory = scratch("signal");
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    let (mut child, mut lines) = spawn_ready(
        &directory,
        &["waiting.yaml", "--events", "-"],
        "entered waiting",
    );
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"event\": \"tick\"}\n").unwrap();
    wait_for(&mut lines, "tick 1");
    let (code, stderr) = terminate(child, lines);
    drop(stdin);
    assert_eq!(code, Some(75), "{stderr}");
    assert!(
        stderr.contains("stopped by a signal in waiting"),
        "{stderr}"
    );
    let run_id = stderr
        .split("`protocol-run resume ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_string();
    let journal = SqliteStore::open(directory.join("state"))
        .unwrap()
        .journal(&run_id)
        .unwrap();
    assert_eq!(
        journal[0].actions,
        serde_json::json!([{ "log": "entered waiting", "tags": ["entered"] }])
    );
    assert_eq!(journal[1].event.as_ref().unwrap().name, "tick");
    let (code, stdout, _) = finish(&mut command(&directory, &["status", &run_id, "--json"]));
    assert_eq!(code, 0);
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(status["status"], "stopped");
    assert_eq!(
        status["state"]["configuration"],
        serde_json::json!(["waiting"])
    );
    assert_eq!(status["state"]["context"]["ticks"], 1);
    assert_eq!(status["state"]["timers"][0]["event"], "after.waiting.0");
    // No answer comes: the timer fires at its original deadline, 3 s after the start, not 3 s
    // after the resume (a second later here).
    std::thread::sleep(Duration::from_secs(1));
    let (code, stdout, stderr) = finish(&mut command(&directory, &["resume", &run_id]));
    assert_eq!(code, 2, "{stderr}");
    let run = SqliteStore::open(directory.join("state"))
        .unwrap()
        .run(&run_id)
        .unwrap()
        .unwrap()
        .summary;
    let fired_after = run.finish.unwrap().unix_milliseconds - run.started_unix_milliseconds;
    assert!(
        (3000..3900).contains(&fired_after),
        "fired {fired_after} ms after the start"
    );
    assert!(
        !stderr.contains("entered waiting"),
        "entry ran again: {stderr}"
    );
    assert!(stdout.contains(r#""output":{"ticks":1}"#), "{stdout}");
    let (code, stdout, _) = finish(&mut command(&directory, &["runs"]));
    assert_eq!(code, 0);
    // Finished with exit code 2: `runs` calls that `failed`.
    assert!(
        stdout.contains(&run_id) && stdout.contains("failed"),
        "{stdout}"
    );
    let (code, _, stderr) = finish(&mut command(&directory, &["resume", &run_id]));
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("has finished"), "{stderr}");
}

/// A run whose protocol file changed goes on with the text it started with (pinned), even when
/// the file no longer has the state the run is in; `--upgrade` (once `--force`) moves it to the
/// file's text when every recorded state still exists, and is refused when one is gone.
#[test]
fn a_changed_protocol_runs_pinned_unless_upgraded_and_still_compatible() {
    let renamed = WAITING.replace("  waiting:", "  pending:");
    assert_ne!(renamed, WAITING);
    // Pinned: the file lost the run's state, and the run goes on as it started.
    let directory = scratch("changed-pinned");
    let path = directory.join("waiting.yaml");
    std::fs::write(&path, WAITING).unwrap();
    stop_with_sigterm(&directory, "waiting.yaml");
    std::fs::write(&path, &renamed).unwrap();
    let (code, stdout, stderr) = finish(&mut command(
        &directory,
        &["waiting.yaml", "--resume", "--timers", "restart"],
    ));
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.contains(r#""ticks":0"#), "{stdout}");
    assert!(
        stderr.contains("changed since the run started; it goes on with the text it started with"),
        "{stderr}"
    );
    // Upgraded: refused while the run's state is gone from the file, taken once it is back.
    let directory = scratch("changed-upgraded");
    let path = directory.join("waiting.yaml");
    std::fs::write(&path, WAITING).unwrap();
    stop_with_sigterm(&directory, "waiting.yaml");
    std::fs::write(&path, &renamed).unwrap();
    let (code, _, stderr) = finish(&mut command(
        &directory,
        &["waiting.yaml", "--resume", "--upgrade"],
    ));
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains(
            "the snapshot's configuration names the state `waiting`, which the protocol does \
             not have"
        ),
        "{stderr}"
    );
    // A comment changes the hash, nothing else: `--force`, the old name, upgrades too.
    std::fs::write(&path, format!("# edited\n{WAITING}")).unwrap();
    let (code, stdout, stderr) = finish(&mut command(
        &directory,
        &["waiting.yaml", "--resume", "--force", "--timers", "restart"],
    ));
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.contains(r#""ticks":0"#), "{stdout}");
    assert!(!stderr.contains("goes on with the text"), "{stderr}");
}

/// The ids of the effects the (only) run in `directory` has running at its last committed step.
fn running_effects(directory: &Path) -> Vec<String> {
    let (code, stdout, stderr) = finish(&mut command(directory, &["status", "--json"]));
    if code != 0 {
        // No run recorded yet.
        assert!(stderr.contains("no runs"), "{stderr}");
        return Vec::new();
    }
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // `state` is null until the run's first step is committed.
    status["state"]["running_effects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|effect| effect.as_str().unwrap().to_string())
        .collect()
}

/// A process that was running when the engine died: `fail` (the default for `exec`) delivers
/// its failure event with `interrupted: true`.
#[test]
fn an_interrupted_process_fails_on_resume_by_default() {
    let directory = scratch("interrupted");
    std::fs::write(
        directory.join("slow.yaml"),
        r#"
id: slow
states:
  running:
    entry: [{ exec: [sh, -c, "touch started && exec sleep 30"], id: slow }]
    on:
      done.exec.slow: done
      error.exec.slow:
        target: interrupted
        actions: [{ log: "interrupted=${event.data.interrupted}" }]
  done: { type: final }
  interrupted: { type: final, exit_code: 3 }
"#,
    )
    .unwrap();
    let mut child = command(&directory, &["slow.yaml"]).spawn().unwrap();
    // Killed only once the process runs (it wrote its marker) and the step that started it is
    // committed (the store lists it as running): else there is nothing interrupted to resume.
    let begun = std::time::Instant::now();
    while !(directory.join("started").exists() && running_effects(&directory) == ["slow"]) {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "the process never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, _, stderr) = finish(&mut command(&directory, &["slow.yaml", "--resume"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("interrupted=true"), "{stderr}");
}

const TASK: &str = r#"
id: task
inputs:
  wait: { type: duration, default: 60s }
states:
  waiting:
    on:
      answer: answered
    after:
      - delay: wait
        target: timed_out
  answered: { type: final, output: { how: answered } }
  timed_out: { type: final, exit_code: 2, output: { how: timed_out } }
"#;

/// `serve` runs 1,000 instances with a pending timer each; killed with SIGKILL, the next
/// `serve` resumes every unfinished one (timers re-armed) and they take events again.
#[test]
fn serve_resumes_a_thousand_instances_after_a_kill() {
    use std::io::{BufRead, Write};
    let directory = scratch("serve");
    std::fs::write(directory.join("task.yaml"), TASK).unwrap();
    let mut host = command(&directory, &["serve", "task.yaml"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    let mut lines = String::new();
    for index in 0..1000 {
        lines.push_str(&format!("{{\"instance\": \"t{index}\"}}\n"));
    }
    // One answered before the kill: it must stay finished.
    lines.push_str("{\"instance\": \"t0\", \"event\": \"answer\"}\n");
    // One that nobody answers, with a timer short enough to fire after the restart.
    lines.push_str(&format!(
        "{{\"instance\": \"late\", \"inputs\": {{\"wait\": \"{LATE_WAIT_MS}ms\"}}}}\n"
    ));
    stdin.write_all(lines.as_bytes()).unwrap();
    let stdout = std::io::BufReader::new(host.stdout.take().unwrap());
    let mut started = 0;
    let mut answered = false;
    let mut late_started = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        started += usize::from(line.contains("\"started\":true"));
        answered |= line.contains(r#""instance":"t0","finished""#);
        if line.contains(r#""instance":"late","started":true"#) {
            late_started = Some(std::time::Instant::now());
        }
        if started == 1001 && answered && late_started.is_some() {
            break;
        }
    }
    assert_eq!(started, 1001);
    host.kill().unwrap();
    host.wait().unwrap();
    drop(stdin);
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let late = store
        .list_runs()
        .unwrap()
        .into_iter()
        .find(|run| run.id == "task:late")
        .unwrap();
    assert!(
        late.finish.is_none(),
        "`late` timed out before the kill, {LATE_WAIT_MS} ms after its start: {late:?}"
    );
    // Down for half of `late`'s wait: re-armed with its whole delay, or with what it had left
    // at its last step, it would fire that much later than its deadline.
    std::thread::sleep(
        Duration::from_millis(LATE_WAIT_MS / 2).saturating_sub(late_started.unwrap().elapsed()),
    );

    let mut answers = String::new();
    for index in 1..1000 {
        answers.push_str(&format!(
            "{{\"instance\": \"t{index}\", \"event\": \"answer\"}}\n"
        ));
    }
    let mut host = command(&directory, &["serve", "task.yaml"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    let output = host.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // Every instance but t0 was unfinished at the kill: resumed with its timer pending (or,
    // if killed before its start was committed, started over), then answered.
    let resumed = stdout.matches("\"resumed\":").count();
    let restarted = stdout.matches("\"started\":true").count();
    let answered = stdout.matches(r#""finished":{"state":"answered""#).count();
    assert_eq!((resumed + restarted, answered), (1000, 999), "{stderr}");
    assert!(resumed >= 990, "only {resumed} resumed: {stderr}");
    assert!(
        !stdout.contains(r#""instance":"t0""#),
        "t0 had finished: {stdout}"
    );
    // `late`'s re-armed timer fired in the new host, at its original deadline.
    assert!(
        stdout.contains(r#"{"instance":"late","finished":{"state":"timed_out","exit_code":2"#),
        "{stdout}"
    );
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1001);
    assert!(
        runs.iter()
            .all(|run| run.status == protocol_run::store::RunStatus::Finished)
    );
    let late = runs.iter().find(|run| run.id == "task:late").unwrap();
    let fired_after =
        late.finish.as_ref().unwrap().unix_milliseconds - late.started_unix_milliseconds;
    // Both stamps are whole milliseconds, taken a moment from when the timer was set and fired.
    assert!(
        (LATE_WAIT_MS - 10..LATE_WAIT_MS + LATE_WAIT_MS / 2).contains(&fired_after),
        "`late` timed out {fired_after} ms after its start"
    );
}

/// The timer of `serve_resumes_a_thousand_instances_after_a_kill`'s unanswered instance: long
/// enough for the first host to be killed before it fires, short enough to wait for.
const LATE_WAIT_MS: u64 = 2000;

/// A timer whose deadline passed while the engine was down fires as soon as the run resumes.
#[test]
fn a_timer_due_while_the_engine_was_down_fires_on_resume() {
    let directory = scratch("overdue");
    std::fs::write(
        directory.join("short.yaml"),
        WAITING.replace("delay: 3s", "delay: 1s"),
    )
    .unwrap();
    let begun = std::time::Instant::now();
    // On virtual time the clock stands still while the event stream is open, so the timer
    // cannot fire before SIGTERM however slow the machine; its deadline is still recorded as
    // one second after the start, in real time.
    let (child, lines) = spawn_ready(
        &directory,
        &["short.yaml", "--virtual-time", "--events", "-"],
        "entered waiting",
    );
    let (code, stderr) = terminate(child, lines);
    assert_eq!(code, Some(75), "{stderr}");
    assert_eq!(
        running_timers(&directory),
        ["after.waiting.0"],
        "the run stopped with its timer pending"
    );
    std::thread::sleep(Duration::from_millis(1200).saturating_sub(begun.elapsed()));
    let (code, stdout, stderr) = finish(&mut command(&directory, &["short.yaml", "--resume"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.contains("timed_out"), "{stdout}");
    // At once: re-armed with its whole second again (or what was left of it), it would fire a
    // second or so after the resume, by the engine's own clock (which no process start adds to).
    let after = fired_after_resume(&directory, "after.waiting.0");
    assert!(after < 700, "the timer fired {after} ms after the resume");
}

/// How long after the run's (last) resume, by the times its telemetry records, the first step
/// taking `event` came.
pub(crate) fn fired_after_resume(directory: &Path, event: &str) -> u64 {
    let records = crate::support::read_telemetry(directory);
    let time = |record: &serde_json::Value| {
        let text = record["time"].as_str().unwrap_or_default();
        protocol_run::base::time::parse_timestamp(text)
            .ok()
            .and_then(|timestamp| protocol_run::base::time::unix_milliseconds(&timestamp))
            .unwrap_or_else(|| panic!("no time in {record}"))
    };
    let resumed = records
        .iter()
        .rposition(|record| record["kind"] == "resume")
        .unwrap_or_else(|| panic!("no resume in {records:?}"));
    let fired = records[resumed..]
        .iter()
        .find(|record| record["kind"] == "step" && record["event"] == event)
        .unwrap_or_else(|| panic!("no step taking {event} after the resume: {records:?}"));
    time(fired).saturating_sub(time(&records[resumed]))
}

/// The events of the timers pending at the (only) run's last committed step.
fn running_timers(directory: &Path) -> Vec<String> {
    let (code, stdout, stderr) = finish(&mut command(directory, &["status", "--json"]));
    assert_eq!(code, 0, "{stderr}");
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    status["state"]["timers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|timer| timer["event"].as_str().unwrap().to_string())
        .collect()
}

/// With `--socket`, clients send event lines over a Unix socket and get every output line back.
#[test]
fn serve_takes_events_on_a_unix_socket() {
    use std::io::{BufRead, Write};
    let directory = scratch("socket");
    std::fs::write(directory.join("task.yaml"), TASK).unwrap();
    let socket = directory.join("host.sock");
    let mut host = command(
        &directory,
        &["serve", "task.yaml", "--socket", socket.to_str().unwrap()],
    )
    .spawn()
    .unwrap();
    let mut client = None;
    for _ in 0..100 {
        match std::os::unix::net::UnixStream::connect(&socket) {
            Ok(stream) => {
                client = Some(stream);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut client = client.expect("the host listens");
    client
        .write_all(b"{\"instance\": \"s1\", \"event\": \"answer\"}\n")
        .unwrap();
    let mut reader = std::io::BufReader::new(client.try_clone().unwrap());
    let mut seen = Vec::new();
    while !seen.iter().any(|line: &String| line.contains("finished")) {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{seen:?}");
        seen.push(line);
    }
    assert!(
        seen.last()
            .unwrap()
            .contains(r#""instance":"s1","finished":{"state":"answered""#),
        "{seen:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(host.wait().unwrap().code(), Some(75));
}
