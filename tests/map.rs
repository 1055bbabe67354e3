//! `map`: one effect per element, run in parallel within `max_concurrency`, results in item order, failures within a tolerance, items mockable, cancelled with their state.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Run, read_telemetry, run_binary, temporary_directory};

fn directory(name: &str) -> crate::support::TemporaryDirectory {
    temporary_directory("map", name)
}

/// Writes `protocol.yaml` and runs it to its end with a state directory of its own; returns
/// (exit code, stdout, stderr).
fn run(directory: &Path, yaml: &str, arguments: &[&str]) -> (i32, String, String) {
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    let state = directory.join("state");
    let mut all = vec!["protocol.yaml", "--state-dir", state.to_str().unwrap()];
    all.extend_from_slice(arguments);
    run_binary(directory, &all)
}

/// The `log` lines a run printed, without their time, level and tags.
fn logged(stderr: &str, prefix: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| line.split_once(prefix).map(|(_, rest)| rest))
        .map(|rest| rest.split(" #").next().unwrap_or(rest).trim().to_string())
        .collect()
}

/// Items sleep for less the later they come, so they end in reverse order; each writes
/// `start` and `end` lines to `trace` around its sleep.
const REVERSED: &str = r#"
id: reversed
inputs:
  words: { type: list, default: [alpha, beta, gamma, delta, epsilon] }
context: { word: null, position: null }
states:
  checking:
    entry:
      - map: words
        id: check
        item: word
        index: position
        max_concurrency: 2
        exec: [sh, -c, 'echo start >> trace; sleep $0; echo end >> trace; printf "%s:%s" $1 $2', "${string(0.1 * double(5 - position))}", "${position}", "${word}"]
        timeout: 20s
    on:
      done.map.check:
        target: done
        actions:
          - log: "results ${event.data.results.map(r, r.stdout)}"
          - log: "failed ${event.data.failed}"
          - log: "word ${word} position ${position}"
  done: { type: final }
"#;

#[test]
fn results_come_in_item_order_whatever_order_the_items_end_in() {
    let directory = directory("order");
    let (code, _, stderr) = run(&directory, REVERSED, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["0:alpha","1:beta","2:gamma","3:delta","4:epsilon"]"#]
    );
    assert_eq!(logged(&stderr, "INFO  failed "), ["0"]);
    // The item and index were bound only while each item's arguments were evaluated.
    assert_eq!(logged(&stderr, "INFO  word "), ["null position null"]);
    // Every item is an effect of its own, `check[i]`, in the telemetry.
    let started: Vec<String> = read_telemetry(&directory)
        .iter()
        // An effect's start (its `kind` is the action's, `exec`).
        .filter(|entry| entry["kind"] == "exec")
        .map(|entry| entry["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        started,
        ["check[0]", "check[1]", "check[2]", "check[3]", "check[4]"]
    );
}

#[test]
fn no_more_items_run_at_once_than_max_concurrency() {
    let directory = directory("concurrency");
    let (code, _, stderr) = run(&directory, REVERSED, &[]);
    assert_eq!(code, 0, "{stderr}");
    let trace = std::fs::read_to_string(directory.join("trace")).unwrap();
    let mut running = 0;
    let mut most = 0;
    for line in trace.lines() {
        match line {
            "start" => running += 1,
            "end" => running -= 1,
            other => panic!("{other}"),
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "{trace}");
    assert_eq!(trace.lines().count(), 10, "{trace}");
}

/// Items exit with the code they are given.
fn exits(codes: &str, tolerated: &str, concurrency: u32) -> String {
    format!(
        r#"
id: exits
context: {{ code: null }}
states:
  checking:
    entry:
      - map: {codes}
        id: check
        item: code
        max_concurrency: {concurrency}
        tolerated_failures: {tolerated}
        exec: [sh, -c, 'printf "out$0"; exit $0', "${{code}}"]
    on:
      done.map.check:
        target: done
        actions:
          - log: "results ${{event.data.results.map(r, r == null ? 'null' : r.stdout)}} failed ${{event.data.failed}}"
      error.map.check:
        target: failed
        actions:
          - log: "statuses ${{event.data.outcomes.map(o, o.status)}}"
          - log: "indexes ${{event.data.outcomes.map(o, o.index)}} ids ${{event.data.outcomes.map(o, o.id)}}"
          - log: "message ${{event.data.message}}"
          - log: "exit codes ${{event.data.outcomes.map(o, o.data == null ? -1 : o.data.exit_code)}}"
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 1 }}
"#
    )
}

#[test]
fn failures_within_a_count_complete_the_map_with_null_results() {
    let directory = directory("count");
    let (code, _, stderr) = run(&directory, &exits("[0, 3, 0, 4]", "2", 4), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["out0","null","out0","null"] failed 2"#]
    );
}

#[test]
fn failures_within_a_percentage_complete_the_map_and_beyond_it_fail_it() {
    let directory = directory("percentage");
    let (code, _, stderr) = run(&directory, &exits("[0, 3, 0, 4]", "'50%'", 4), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(logged(&stderr, "INFO  results ").len(), 1, "{stderr}");
    // 2 of 4 is more than 25%.
    let (code, _, stderr) = run(&directory, &exits("[0, 3, 0, 4]", "'25%'", 4), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  message "),
        ["2 of 4 items failed, more than the 1 tolerated"]
    );
}

#[test]
fn a_failure_beyond_the_tolerance_fails_the_map_once_with_each_items_outcome() {
    let directory = directory("outcomes");
    // One at a time: the second item fails, the two after it never start.
    let (code, _, stderr) = run(&directory, &exits("[0, 5, 0, 0]", "0", 1), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  statuses "),
        [r#"["ok","error","cancelled","cancelled"]"#]
    );
    assert_eq!(
        logged(&stderr, "INFO  indexes "),
        [r#"[0,1,2,3] ids ["check[0]","check[1]","check[2]","check[3]"]"#]
    );
    assert_eq!(logged(&stderr, "INFO  exit codes "), ["[0,5,-1,-1]"]);
    let entries = read_telemetry(&directory);
    let started = entries
        .iter()
        // An effect's start (its `kind` is the action's, `exec`).
        .filter(|entry| entry["kind"] == "exec")
        .count();
    assert_eq!(started, 2, "{entries:#?}");
    let ends: Vec<&serde_json::Value> = entries
        .iter()
        .filter(|entry| entry["kind"] == "map")
        .collect();
    assert_eq!(ends.len(), 1, "{entries:#?}");
    assert_eq!(ends[0]["outcome"], "failed");
    assert_eq!(ends[0]["event"], "error.map.check");
}

#[test]
fn an_item_that_times_out_is_a_failure_with_status_timeout() {
    let directory = directory("timeout");
    let yaml = r#"
id: slow
context: { pause: null }
states:
  checking:
    entry:
      - map: ["0", "30"]
        id: check
        item: pause
        exec: [sleep, "${pause}"]
        timeout: 300ms
    on:
      error.map.check:
        target: failed
        actions: [{ log: "statuses ${event.data.outcomes.map(o, o.status)}" }]
  failed: { type: final, exit_code: 1 }
"#;
    let begun = Instant::now();
    let (code, _, stderr) = run(&directory, yaml, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(logged(&stderr, "INFO  statuses "), [r#"["ok","timeout"]"#]);
    assert!(begun.elapsed() < Duration::from_secs(20));
}

#[test]
fn an_empty_list_completes_at_once_with_no_results() {
    let directory = directory("empty");
    let yaml = r#"
id: empty
context: { word: null }
states:
  checking:
    entry:
      - map: "[]"
        id: check
        item: word
        exec: [echo, "${word}"]
    on:
      done.map.check:
        target: done
        actions: [{ log: "results ${event.data.results}" }]
  done: { type: final }
"#;
    let (code, _, stderr) = run(&directory, yaml, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(logged(&stderr, "INFO  results "), ["[]"]);
}

/// Each item writes its process id, then sleeps; `stop` leaves the state.
const SLEEPERS: &str = r#"
id: sleepers
context: { number: null }
states:
  checking:
    entry:
      - map: [1, 2, 3]
        id: check
        item: number
        exec: [sh, -c, 'echo $$ > pid-$0; exec sleep 30', "${number}"]
    after:
      - delay: 20s
        target: too_late
    on:
      stop: stopped
      done.map.check: too_late
      error.map.check: too_late
  stopped:
    after: [{ delay: 200ms, target: done }]
    on:
      done.map.check: too_late
      error.map.check: too_late
  done: { type: final }
  too_late: { type: final, exit_code: 9 }
"#;

#[test]
fn leaving_the_state_cancels_the_items_and_kills_their_processes() {
    let directory = directory("cancel");
    std::fs::write(directory.join("protocol.yaml"), SLEEPERS).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["protocol.yaml", "--events", "-", "--state-dir"])
        .arg(directory.join("state"))
        .current_dir(&directory)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    let pid_files = ["pid-1", "pid-2", "pid-3"].map(|name| directory.join(name));
    while !pid_files
        .iter()
        .all(|file| std::fs::read_to_string(file).is_ok_and(|text| text.ends_with('\n')))
    {
        assert!(
            begun.elapsed() < Duration::from_secs(20),
            "the items never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"{\"event\":\"stop\"}\n").unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(begun.elapsed() < Duration::from_secs(20));
    for file in &pid_files {
        let pid: i32 = std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        assert!(
            !alive,
            "process {pid} of {} survived its state",
            file.display()
        );
    }
    let entries = read_telemetry(&directory);
    let cancelled: Vec<&str> = entries
        .iter()
        .filter(|entry| entry["kind"] == "effect" && entry["outcome"] == "cancelled")
        .map(|entry| entry["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        cancelled,
        ["check[0]", "check[1]", "check[2]"],
        "{entries:#?}"
    );
    assert!(
        entries
            .iter()
            .any(|entry| entry["kind"] == "map" && entry["outcome"] == "cancelled"),
        "{entries:#?}"
    );
}

#[test]
fn each_item_is_mocked_by_its_own_id_or_by_the_maps() {
    let directory = directory("mocks");
    let yaml = r#"
id: mocked
context: { word: null }
states:
  checking:
    entry:
      - map: [a, b, c]
        id: check
        item: word
        tolerated_failures: 1
        exec: [no-such-program, "${word}"]
        timeout: 1s
    on:
      done.map.check:
        target: done
        actions: [{ log: "outcomes ${event.data.outcomes.map(o, o.status + ':' + (o.data == null ? '' : o.data.stdout))}" }]
  done: { type: final }
"#;
    let (code, _, stderr) = run(
        &directory,
        yaml,
        &["--mock", "check[1]=timeout", "--mock", "check=ok:fine"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  outcomes "),
        [r#"["ok:fine","timeout:","ok:fine"]"#]
    );
    // An item of a map that does not exist is refused like any unknown id.
    let (code, _, stderr) = run(&directory, yaml, &["--mock", "chek[1]=timeout"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("`chek[1]`, which is not an action id") && stderr.contains("`check`"),
        "{stderr}"
    );
}

/// A pure run: the host that only records effects starts every item, each with its own
/// element, and the context keeps its values.
#[test]
fn each_item_evaluates_its_arguments_with_its_own_element() {
    let run = Run::start(
        r#"
id: pure
context: { word: keep, position: -1 }
states:
  a:
    entry:
      - map: "['x', 'y']"
        id: check
        item: word
        index: position
        exec: [echo, "${position}", "${word}"]
"#,
    );
    let started: Vec<(String, String)> = run
        .host
        .effects
        .iter()
        .map(|request| (request.id.to_string(), format!("{:?}", request.kind)))
        .collect();
    assert_eq!(started.len(), 2);
    assert_eq!(started[0].0, "check[0]");
    assert!(
        started[0].1.contains(r#"["echo", "0", "x"]"#),
        "{started:?}"
    );
    assert_eq!(started[1].0, "check[1]");
    assert!(
        started[1].1.contains(r#"["echo", "1", "y"]"#),
        "{started:?}"
    );
    assert_eq!(run.context("word"), serde_json::json!("keep"));
    assert_eq!(run.context("position"), serde_json::json!(-1));
}

#[test]
fn the_binary_runs_the_example_within_and_beyond_its_tolerance() {
    let directory = directory("example");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/features/map.yaml");
    let state = directory.join("state");
    let state = state.to_str().unwrap();
    let (code, _, stderr) = run_binary(&directory, &[example, "--state-dir", state]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results: "),
        [r#"["0:unit passed","1:lint passed","2:docs passed","3:e2e passed"]"#]
    );
    // One failure in four is the 25% tolerated.
    let arguments = [example, "--state-dir", state, "--mock", "check[1]=exit:1"];
    let (code, _, stderr) = run_binary(&directory, &arguments);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results: "),
        [r#"["0:unit passed","failed","2:docs passed","3:e2e passed"]"#]
    );
    let arguments = [
        example,
        "--state-dir",
        state,
        "--mock",
        "check[1]=exit:1",
        "--mock",
        "check[3]=error:no runner",
    ];
    let (code, _, stderr) = run_binary(&directory, &arguments);
    assert_eq!(code, 1, "{stderr}");
    // `check[2]` is a real process while the failures are mocked (instant): it has finished, or
    // is cancelled by the failure, depending on which comes first.
    assert!(
        [
            r#"2 of 4 items failed, more than the 1 tolerated: ["check[0] ok","check[1] error","check[2] ok","check[3] error"]"#,
            r#"2 of 4 items failed, more than the 1 tolerated: ["check[0] ok","check[1] error","check[2] cancelled","check[3] error"]"#,
        ]
        .iter()
        .any(|line| stderr.contains(line)),
        "{stderr}"
    );
}

/// A map the final state leaves running (scoped to the run) cannot report: the run finishes,
/// its running items are awaited like any effect, and it is recorded as `unreported`.
#[test]
fn a_map_still_running_at_the_final_state_does_not_hold_the_run() {
    let directory = directory("final");
    let yaml = r#"
id: final
context: { pause: null }
states:
  starting:
    entry:
      - map: ["0.2", "0.2", "0.2"]
        id: check
        item: pause
        max_concurrency: 2
        scope: run
        exec: [sleep, "${pause}"]
    always: done
  done: { type: final }
"#;
    let begun = Instant::now();
    let (code, stdout, stderr) = run(&directory, yaml, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(begun.elapsed() < Duration::from_secs(10));
    // The two items started are awaited; the third never starts.
    assert_eq!(
        stdout.matches(r#""outcome":"completed""#).count(),
        2,
        "{stdout}"
    );
    let entries = read_telemetry(&directory);
    assert!(
        entries
            .iter()
            .any(|entry| entry["kind"] == "map" && entry["outcome"] == "unreported"),
        "{entries:#?}"
    );
}
