//! `map` with an `invoke` body: one child protocol per element, results in item order, failures within a tolerance, cancelled with their state, durable across `kill -9`, misuse a located error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{run_binary, temporary_directory};

/// The child each item runs: it appends `start` and `end` to `trace` around a sleep of
/// `delay` seconds, writes its process id to `pid-<word>`, appends its word to `ran`, waits
/// for the file `go` when its word is `wait`, and exits with `code`.
const CHILD: &str = r#"
id: child
inputs:
  word: { type: string, required: true }
  delay: { type: string, default: "0" }
  code: { type: string, default: "0" }
states:
  working:
    entry:
      - exec: [sh, -c, 'echo $1 >> ran; echo $$ > pid-$1; echo start >> trace; sleep $0; if [ $1 = wait ]; then while [ ! -e go ]; do sleep 0.05; done; fi; echo end >> trace; printf "%s" $1; exit $2', "${delay}", "${word}", "${code}"]
        id: work
        timeout: 20s
        on_interrupt: retry
    on:
      done.exec.work: finished
      error.exec: broken
  finished:
    type: final
    output: { word: "${word}", stdout: "${event.data.stdout}" }
  broken:
    type: final
    exit_code: 3
    output: { word: "${word}" }
"#;

/// A directory holding `child.yaml` and `protocol.yaml` (the map `body` under `checking`).
fn setup(name: &str, protocol: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("map-children", name);
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    std::fs::write(directory.join("protocol.yaml"), protocol).unwrap();
    directory
}

fn run(directory: &Path, arguments: &[&str]) -> (i32, String, String) {
    let state = directory.join("state");
    let mut all = vec!["protocol.yaml", "--state-dir", state.to_str().unwrap()];
    all.extend_from_slice(arguments);
    run_binary(directory, &all)
}

/// The `log` lines a run printed after `prefix`, without their tags.
fn logged(stderr: &str, prefix: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| line.split_once(prefix).map(|(_, rest)| rest))
        .map(|rest| rest.split(" #").next().unwrap_or(rest).trim().to_string())
        .collect()
}

/// A parent mapping `items` (a YAML list of `{word, delay, code}`) over the child.
fn parent(items: &str, concurrency: u32, tolerated: &str) -> String {
    format!(
        r#"
id: parent
context: {{ entry: null, position: null }}
states:
  checking:
    entry:
      - map: {items}
        id: check
        item: entry
        index: position
        max_concurrency: {concurrency}
        tolerated_failures: {tolerated}
        invoke:
          protocol: child.yaml
          inputs: {{ word: "${{entry.word}}", delay: "${{entry.delay}}", code: "${{entry.code}}" }}
    on:
      done.map.check:
        target: done
        actions:
          - log: "results ${{event.data.results.map(r, r == null ? 'null' : r.stdout)}} failed ${{event.data.failed}}"
          - log: "entry ${{entry}} position ${{position}}"
      error.map.check:
        target: failed
        actions:
          - log: "statuses ${{event.data.outcomes.map(o, o.id + ' ' + o.status)}} message ${{event.data.message}}"
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 1 }}
"#
    )
}

fn item(word: &str, delay: f64, code: u32) -> String {
    format!(r#"{{ word: {word}, delay: "{delay}", code: "{code}" }}"#)
}

/// Five items, each sleeping less the later it comes, so they end in reverse order.
fn reversed() -> String {
    let words = ["alpha", "beta", "gamma", "delta", "epsilon"];
    let items: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(position, word)| item(word, 0.1 * (5 - position) as f64, 0))
        .collect();
    format!("[{}]", items.join(", "))
}

#[test]
fn results_come_in_item_order_within_max_concurrency() {
    let directory = setup("order", &parent(&reversed(), 2, "0"));
    let (code, _, stderr) = run(&directory, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["alpha","beta","gamma","delta","epsilon"] failed 0"#]
    );
    // The item and index were bound only while each child's inputs were rendered.
    assert_eq!(logged(&stderr, "INFO  entry "), ["null position null"]);
    let trace = std::fs::read_to_string(directory.join("trace")).unwrap();
    let (mut running, mut most) = (0, 0);
    for line in trace.lines() {
        running += if line == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 2, "{trace}");
    assert_eq!(trace.lines().count(), 10, "{trace}");
}

#[test]
fn a_failing_child_within_the_tolerance_is_a_null_result() {
    let items = format!(
        "[{}, {}, {}]",
        item("a", 0.0, 0),
        item("b", 0.0, 1),
        item("c", 0.0, 0)
    );
    let directory = setup("tolerated", &parent(&items, 1, "1"));
    let (code, _, stderr) = run(&directory, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["a","null","c"] failed 1"#]
    );
}

#[test]
fn a_failing_child_past_the_tolerance_fails_the_map_and_the_rest_never_start() {
    let items = format!(
        "[{}, {}, {}]",
        item("a", 0.0, 0),
        item("b", 0.0, 1),
        item("c", 0.0, 0)
    );
    let directory = setup("failed", &parent(&items, 1, "0"));
    let (code, _, stderr) = run(&directory, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  statuses "),
        [
            r#"["check[0] ok","check[1] error","check[2] cancelled"] message 1 of 3 items failed, more than the 0 tolerated"#
        ]
    );
    let ran = std::fs::read_to_string(directory.join("ran")).unwrap();
    assert_eq!(ran, "a\nb\n");
}

#[test]
fn leaving_the_state_cancels_the_children_and_kills_their_processes() {
    let protocol = r#"
id: parent
context: { word: null }
states:
  checking:
    entry:
      - map: [x, y]
        id: check
        item: word
        invoke: { protocol: child.yaml, inputs: { word: "${word}", delay: "30" } }
    after:
      - delay: 20s
        target: too_late
    on:
      stop: stopped
      done.map.check: too_late
      error.map.check: too_late
  stopped:
    on:
      finish: done
      done.map.check: too_late
      error.map.check: too_late
  done: { type: final }
  too_late: { type: final, exit_code: 9 }
"#;
    let directory = setup("cancel", protocol);
    let mut engine = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["protocol.yaml", "--events", "-", "--state-dir"])
        .arg(directory.join("state"))
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    let pid_files = ["pid-x", "pid-y"].map(|name| directory.join(name));
    while !pid_files
        .iter()
        .all(|file| std::fs::read_to_string(file).is_ok_and(|text| text.ends_with('\n')))
    {
        assert!(
            begun.elapsed() < Duration::from_secs(20),
            "the children never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    use std::io::Write;
    let mut stdin = engine.stdin.take().unwrap();
    stdin.write_all(b"{\"event\":\"stop\"}\n").unwrap();
    // Killed when the state exits, while the run goes on (`stopped` waits for `finish`, which
    // is sent only once they are gone): not at its end.
    let alive = |file: &PathBuf| {
        let pid: i32 = std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
    };
    crate::support::eventually("the children's processes ending with their state", || {
        (!pid_files.iter().any(alive)).then_some(())
    });
    assert!(engine.try_wait().unwrap().is_none(), "the run ended first");
    stdin.write_all(b"{\"event\":\"finish\"}\n").unwrap();
    drop(stdin);
    let output = engine.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

#[test]
fn a_resumed_map_does_not_run_a_finished_child_again() {
    let items = format!(
        "[{}, {}, {}, {}]",
        item("a", 0.0, 0),
        item("b", 0.0, 0),
        item("wait", 0.0, 0),
        item("d", 0.0, 0)
    );
    let directory = setup("resume", &parent(&items, 3, "0"));
    let state = directory.join("state");
    let mut engine = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["protocol.yaml", "--state-dir", state.to_str().unwrap()])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    let ran = || std::fs::read_to_string(directory.join("ran")).unwrap_or_default();
    while ran().lines().count() < 4 {
        assert!(begun.elapsed() < Duration::from_secs(30), "ran: {}", ran());
        assert!(engine.try_wait().unwrap().is_none(), "the run ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The finished children's ends are committed with the step that records them.
    std::thread::sleep(Duration::from_millis(1000));
    // SIGKILL: no chance to clean up.
    engine.kill().unwrap();
    engine.wait().unwrap();
    std::fs::write(directory.join("go"), "").unwrap();
    let (code, _, stderr) = run(&directory, &["--resume"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["a","b","wait","d"] failed 0"#]
    );
    let mut ran: Vec<String> = ran().lines().map(String::from).collect();
    ran.sort();
    // The waiting child's process was interrupted and retried; the others ran once.
    assert_eq!(ran, ["a", "b", "d", "wait", "wait"]);
}

/// Validates `protocol` beside the child; returns what it printed.
fn validate(name: &str, protocol: &str) -> String {
    let directory = setup(name, protocol);
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
    assert_ne!(code, 0, "{stdout}{stderr}");
    format!("{stdout}{stderr}")
}

fn with_map(body: &str) -> String {
    format!(
        "id: bad\ncontext: {{ word: null }}\nstates:\n  a:\n    entry:\n      - map: [x]\n        id: check\n        item: word\n{body}"
    )
}

#[test]
fn misuse_is_a_located_load_error() {
    let rendered = validate(
        "both",
        &with_map(
            "        exec: [echo]\n        invoke: { protocol: child.yaml, inputs: { word: x } }\n",
        ),
    );
    // The map runs the effect it names first; `invoke` beside it is the key too many.
    assert!(
        rendered.contains("unknown key `invoke`")
            && rendered.contains("protocol.yaml:10:9")
            && rendered.contains(
                "allowed keys here: map, item, index, max_concurrency, tolerated_failures, exec,"
            ),
        "{rendered}"
    );
    let rendered = validate(
        "missing",
        &with_map("        invoke: { protocol: nowhere.yaml, inputs: { word: x } }\n"),
    );
    assert!(
        rendered.contains("protocol.yaml:9:29") && rendered.contains("nowhere.yaml"),
        "{rendered}"
    );
    let rendered = validate(
        "undeclared",
        &with_map("        invoke: { protocol: child.yaml, inputs: { word: x, wrod: y } }\n"),
    );
    assert!(
        rendered.contains("`child.yaml` has no input `wrod`")
            && rendered.contains("protocol.yaml:9:"),
        "{rendered}"
    );
    let rendered = validate(
        "required",
        &with_map("        invoke: { protocol: child.yaml, inputs: { delay: \"1\" } }\n"),
    );
    assert!(
        rendered.contains("the child protocol needs the input `word`")
            && rendered.contains("protocol.yaml:9:41"),
        "{rendered}"
    );
}

/// `--mock check[1]=...` scripts a child item's ending (nothing runs for it), `--mock check=...`
/// every item's: `ok:JSON` is the child's output, `exit:N` a failed item.
#[test]
fn a_child_item_is_mocked_like_an_effect() {
    let items = format!("[{}, {}]", item("a", 0.0, 0), item("b", 0.0, 0));
    let directory = setup("mock", &parent(&items, 1, "0"));
    let (code, _, stderr) = run(
        &directory,
        &["--mock", r#"check[1]=ok:{"stdout": "scripted"}"#],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  results "),
        [r#"["a","scripted"] failed 0"#]
    );
    // Only the first child ran.
    assert_eq!(
        std::fs::read_to_string(directory.join("ran")).unwrap(),
        "a\n"
    );
    // One item at a time: the first fails, the second never starts.
    let (code, _, stderr) = run(&directory, &["--mock", "check=exit:3"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(r#"statuses ["check[0] error","check[1] cancelled"]"#),
        "{stderr}"
    );
}

#[test]
fn the_binary_runs_the_example() {
    let directory = temporary_directory("map-children", "example");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/features/map-invoke.yaml"
    );
    let state = directory.join("state");
    let (code, _, stderr) = run_binary(
        &directory,
        &[example, "--state-dir", state.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  verdicts: "),
        [r#"["ada approves","grace approves","linus approves"]"#]
    );
}

/// A scenario mocks a child item as `--mock` does; `validate` accepts it, `test` runs it.
#[test]
fn a_scenario_mocks_a_child_item() {
    let directory = setup(
        "scenario",
        &parent(&format!("[{}]", item("a", 0.0, 0)), 1, "0"),
    );
    let scenario = "protocol: protocol.yaml\nscenarios:\n  - name: mocked\n    mocks:\n      check[0]: exit:1\n    steps:\n      - expect: { finished: { exit_code: 1 } }\n";
    std::fs::write(directory.join("protocol.scenario.yaml"), scenario).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = run_binary(&directory, &["test", "protocol.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}
