//! Child protocols are actors: events in (`send ... to: <invoke id>`, `autoforward`) and out
//! (`send ... to: parent`), directives tagged with the child's path.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn temporary_directory(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!(
        "protocol-run-children-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Writes the files, runs `parent.yaml` with `arguments`; returns (exit code, stdout, stderr).
fn run(directory: &Path, files: &[(&str, &str)], arguments: &[&str]) -> (i32, String, String) {
    for (name, text) in files {
        std::fs::write(directory.join(name), text).unwrap();
    }
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("parent.yaml")
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
