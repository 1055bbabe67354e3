//! Child protocols are actors: events in (`send ... to: <invoke id>`, `autoforward`) and out
//! (`send ... to: parent`), directives tagged with the child's path.

use std::path::Path;
use std::process::{Command, Stdio};

fn temporary_directory(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("children", name)
}

/// Writes the files, runs `parent.yaml` with `arguments`; returns (exit code, stdout, stderr).
fn run(directory: &Path, files: &[(&str, &str)], arguments: &[&str]) -> (i32, String, String) {
    for (name, text) in files {
        std::fs::write(directory.join(name), text).unwrap();
    }
    let state = directory.join("state");
    let mut all = vec!["parent.yaml", "--state-dir", state.to_str().unwrap()];
    all.extend_from_slice(arguments);
    crate::support::run_binary(directory, &all)
}

const PING_PARENT: &str = r#"
id: parent
states:
  talking:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      ready:
        actions:
          - log: "ready from ${event.origin} (${event.invokeid})"
          - { send: ping, to: kid, data: { n: 41 } }
      pong:
        target: done
        actions: [{ log: "pong ${event.data.n} from ${event.origin}" }]
  done: { type: final, output: { n: "${event.data.n}" } }
"#;

const PING_CHILD: &str = r#"
id: child
states:
  waiting:
    entry:
      - { send: ready, to: parent }
      - { emit: child_waiting, data: { at: waiting } }
    on:
      ping:
        target: answered
        actions:
          - { send: pong, to: parent, data: { n: "${event.data.n + 1}" } }
  answered:
    on: { never: answered }
"#;

#[test]
fn a_child_takes_events_from_its_parent_and_answers_it() {
    let directory = temporary_directory("ping");
    let (code, stdout, stderr) = run(
        &directory,
        &[("parent.yaml", PING_PARENT), ("child.yaml", PING_CHILD)],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("ready from kid (kid)"), "{stderr}");
    assert!(stderr.contains("pong 42 from kid"), "{stderr}");
    assert!(stdout.contains("\"output\":{\"n\":42}"), "{stdout}");
    // The child's directive says where it comes from.
    let directive: serde_json::Value = stdout
        .lines()
        .find(|line| line.contains("child_waiting"))
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap_or_else(|| panic!("no directive in {stdout}"));
    assert_eq!(
        directive,
        serde_json::json!({"directive": "child_waiting", "at": "waiting", "from": "kid"})
    );
}

const FORWARDING_PARENT: &str = r#"
id: parent
states:
  listening:
    invoke: [{ id: kid, protocol: child.yaml, autoforward: true }]
    on:
      heard: { target: done, actions: [{ log: "the child heard ${event.data.what}" }] }
  done: { type: final }
"#;

const FORWARDING_CHILD: &str = r#"
id: child
states:
  listening:
    on:
      hello: { actions: [{ send: heard, to: parent, data: { what: "${event.data.what}" } }] }
"#;

#[test]
fn autoforward_gives_the_child_its_parents_external_events() {
    let directory = temporary_directory("autoforward");
    std::fs::write(
        directory.join("events.jsonl"),
        "{\"event\":\"hello\",\"data\":{\"what\":\"hi\"}}\n",
    )
    .unwrap();
    let (code, _, stderr) = run(
        &directory,
        &[
            ("parent.yaml", FORWARDING_PARENT),
            ("child.yaml", FORWARDING_CHILD),
        ],
        &["--events", "events.jsonl"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("the child heard hi"), "{stderr}");
}

#[test]
fn a_send_nobody_can_receive_raises_error_communication() {
    let directory = temporary_directory("unreachable");
    let parent = r#"
id: parent
states:
  alone:
    entry: [{ send: hello, to: parent }]
    on:
      error.communication:
        target: failed
        actions: [{ log: "cannot: ${event.data.message}" }]
  failed: { type: final, exit_code: 1 }
"#;
    let (code, _, stderr) = run(&directory, &[("parent.yaml", parent)], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot: this run was not invoked by a parent"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_send_target_is_a_located_error() {
    let directory = temporary_directory("unknown-target");
    let parent = PING_PARENT.replace("to: kid,", "to: kdi,");
    let (code, _, stderr) = run(
        &directory,
        &[("parent.yaml", &parent), ("child.yaml", PING_CHILD)],
        &[],
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("no invoke has the id `kdi`"), "{stderr}");
    assert!(stderr.contains("--> parent.yaml:10:31"), "{stderr}");
    assert!(stderr.contains("did you mean `kid`?"), "{stderr}");
}

const DURABLE_PARENT: &str = r#"
id: parent
states:
  working:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      go: { actions: [{ send: go, to: kid }] }
      done.invoke.kid: { target: done, actions: [{ log: "the child said ${event.data.said}" }] }
  done: { type: final }
"#;

/// The child appends to `entries.log` on entry (a second line would mean it was re-entered),
/// then waits for `go`; a timer of its own (30 s) must not restart on resume either.
const DURABLE_CHILD: &str = r#"
id: child
states:
  waiting:
    entry:
      - { write: entries.log, append: "entered", id: note }
    on:
      go: finished
    after:
      - { delay: 30s, target: gave_up }
  finished: { type: final, output: { said: "went" } }
  gave_up: { type: final, exit_code: 1 }
"#;

#[test]
fn a_child_survives_its_parent_being_killed_and_resumes_without_entering_again() {
    let directory = temporary_directory("durable");
    std::fs::write(directory.join("parent.yaml"), DURABLE_PARENT).unwrap();
    std::fs::write(directory.join("child.yaml"), DURABLE_CHILD).unwrap();
    let state = directory.join("state");
    let state = state.to_str().unwrap();
    let mut parent = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["parent.yaml", "--state-dir", state, "--events", "-"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child's step (entered, its write done) is committed in the parent's run.
    crate::support::wait_for_status(
        &directory,
        Path::new(state),
        "the child's committed step",
        |status| {
            let child = &status["state"]["children"][0];
            child["id"] == "kid"
                && child["configuration"] == serde_json::json!(["waiting"])
                && child["running_effects"] == serde_json::json!([])
        },
    );
    parent.kill().unwrap();
    parent.wait().unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\":\"go\"}\n").unwrap();
    let resumed = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["parent.yaml", "--resume", "--state-dir", state])
        .args(["--events", "go.jsonl"])
        .current_dir(&directory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the child said went"), "{stderr}");
    let entries = std::fs::read_to_string(directory.join("entries.log")).unwrap();
    assert_eq!(entries, "entered\n", "the child was entered again");
}

/// An effect `a` that runs until its directory holds `released`, then prints `real`.
const WAITING_EFFECT: &str =
    r#"[sh, -c, "while [ ! -f released ]; do sleep 0.01; done; echo real"]"#;

#[test]
fn a_child_cannot_send_its_parent_the_outcome_of_the_parents_effect() {
    let directory = temporary_directory("forged-outcome-to-parent");
    let parent = format!(
        r#"
id: parent
states:
  working:
    entry: [{{ exec: {WAITING_EFFECT}, id: a }}]
    invoke: [{{ id: kid, protocol: child.yaml }}]
    on:
      done.exec.a: {{ target: finished, actions: [{{ log: "a finished: ${{event.data.stdout}}" }}] }}
      error.communication:
        actions:
          - log: "refused ${{event.data.event}} from ${{event.data.from}}"
          - {{ exec: [touch, released], id: release }}
  finished: {{ type: final }}
"#
    );
    let child = r#"
id: child
states:
  forging:
    entry: [{ send: done.exec.a, to: parent }]
    on: { never: forging }
"#;
    let (code, _, stderr) = run(
        &directory,
        &[("parent.yaml", &parent), ("child.yaml", child)],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("refused done.exec.a from kid"), "{stderr}");
    assert!(
        stderr.contains("refused `done.exec.a` from kid: `done.exec.a` is an engine event"),
        "the refusal is a warning too: {stderr}"
    );
    // The parent's effect completed with its own outcome, once its process ended.
    assert!(stderr.contains("a finished: real"), "{stderr}");
}

#[test]
fn a_parent_cannot_send_its_child_the_outcome_of_the_childs_effect() {
    let directory = temporary_directory("forged-outcome-to-child");
    let parent = r#"
id: parent
states:
  working:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      ready: { actions: [{ send: error.exec.x, to: kid }] }
      done.invoke.kid: finished
  finished: { type: final }
"#;
    let child = format!(
        r#"
id: child
states:
  working:
    entry:
      - {{ exec: {WAITING_EFFECT}, id: x }}
      - {{ send: ready, to: parent }}
    on:
      done.exec.x: {{ target: finished, actions: [{{ log: "x finished: ${{event.data.stdout}}" }}] }}
      error.exec.x: {{ target: finished, actions: [{{ log: "x failed" }}] }}
      error.communication:
        actions:
          - log: "child refused ${{event.data.event}} from ${{event.data.from}}"
          - {{ exec: [touch, released], id: release }}
  finished: {{ type: final }}
"#
    );
    let (code, _, stderr) = run(
        &directory,
        &[("parent.yaml", parent), ("child.yaml", &child)],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("child refused error.exec.x from parent"),
        "{stderr}"
    );
    assert!(stderr.contains("x finished: real"), "{stderr}");
    assert!(!stderr.contains("x failed"), "{stderr}");
}

/// Reads `${dir}/secret.txt`, then writes `${dir}/planted.txt`: granted exactly `dir`, which its
/// parent passes.
const PATH_CHILD: &str = r#"
id: child
inputs:
  dir: { type: string, required: true }
permissions: { write: ["${dir}/**"], read: ["${dir}/**"], exec: [] }
states:
  reading:
    entry: [{ read_file: "${dir}/secret.txt", id: peek }]
    on:
      done.exec.peek: { target: writing, actions: [{ log: "child read ${event.data.stdout}" }] }
      error.permission.peek: { target: writing, actions: [{ log: "child denied reading ${event.data.subject}" }] }
  writing:
    entry: [{ write: "${dir}/planted.txt", content: planted, id: plant }]
    on:
      done.exec.plant: { target: done, actions: [{ log: "child wrote" }] }
      error.permission.plant: { target: denied, actions: [{ log: "child denied writing ${event.data.subject}" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;

/// Granted its input `area` (and the child's file), it invokes the child, and maps it, on
/// `target`.
const PATH_PARENT: &str = r#"
id: parent
inputs:
  area: { type: string, required: true }
  target: { type: string, required: true }
permissions: { write: ["${area}/**"], read: ["${area}/**", "child.yaml"], exec: [] }
context: { item: null }
states:
  invoking:
    invoke: [{ id: kid, protocol: child.yaml, inputs: { dir: "${target}" } }]
    on:
      done.invoke.kid: mapping
      error.invoke.kid: { target: mapping, actions: [{ log: "invoked child failed" }] }
  mapping:
    entry:
      - map: "[target]"
        id: each
        item: item
        invoke: { protocol: child.yaml, inputs: { dir: "${item}" } }
    on:
      done.map.each: done
      error.map.each: { target: failed, actions: [{ log: "mapped child failed" }] }
  done: { type: final }
  failed: { type: final, exit_code: 4 }
"#;

#[test]
fn a_child_never_reads_or_writes_beyond_its_parents_grants_whatever_path_its_parent_passes() {
    let directory = temporary_directory("child-path-grants");
    let outside = crate::support::temporary_directory("children", "child-path-grants-outside");
    std::fs::write(outside.join("secret.txt"), "outside-secret").unwrap();
    let files = [("parent.yaml", PATH_PARENT), ("child.yaml", PATH_CHILD)];
    let target = format!("target={}", outside.display());
    let (code, _, stderr) = run(&directory, &files, &["-i", "area=inside", "-i", &target]);
    assert_eq!(code, 4, "{stderr}");
    let denied_reading = format!("child denied reading {}/secret.txt", outside.display());
    let denied_writing = format!("child denied writing {}/planted.txt", outside.display());
    assert_eq!(stderr.matches(&denied_reading).count(), 2, "{stderr}");
    assert_eq!(stderr.matches(&denied_writing).count(), 2, "{stderr}");
    assert!(stderr.contains("invoked child failed") && stderr.contains("mapped child failed"));
    assert!(!stderr.contains("outside-secret"), "{stderr}");
    assert!(!outside.join("planted.txt").exists());
    // Within the parent's grants, the child's own grant is its input.
    std::fs::create_dir_all(directory.join("inside/work")).unwrap();
    std::fs::write(directory.join("inside/work/secret.txt"), "inside-secret").unwrap();
    let (code, _, stderr) = run(
        &directory,
        &files,
        &["-i", "area=inside", "-i", "target=inside/work"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("child read inside-secret").count(),
        2,
        "{stderr}"
    );
    assert!(directory.join("inside/work/planted.txt").exists());
}

#[test]
fn a_child_whose_exec_grant_names_an_input_still_withholds_the_shell() {
    let directory = temporary_directory("child-shell");
    let parent = r#"
id: parent
permissions: { exec: [sh, echo], shell: true }
states:
  calling:
    invoke: [{ id: kid, protocol: child.yaml, inputs: { program: echo } }]
    on:
      done.invoke.kid: done
      error.invoke.kid: { target: failed, actions: [{ log: "child failed" }] }
  done: { type: final }
  failed: { type: final, exit_code: 4 }
"#;
    // Declaring `exec` without `shell: true` withholds the shell, whatever the parent allows.
    let child = r#"
id: child
inputs: { program: { type: string, required: true } }
permissions: { exec: ["${program}"] }
states:
  running:
    entry: [{ exec: "echo shell-ran", shell: true, id: act }]
    on:
      done.exec.act: done
      error.permission.act: { target: denied, actions: [{ log: "child denied the shell" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;
    let (code, _, stderr) = run(
        &directory,
        &[("parent.yaml", parent), ("child.yaml", child)],
        &[],
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("child denied the shell"), "{stderr}");
}
