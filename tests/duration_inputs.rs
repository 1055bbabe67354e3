//! A `duration` input on its way: to a child's or a map item's `duration` input, and beside a timestamp (`now() - window`), with what still fails located at load.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// Writes the files into a fresh directory and runs `arguments` there (a run with a state
/// directory of its own).
fn run(name: &str, files: &[(&str, &str)], arguments: &[&str]) -> (i32, String, String) {
    let directory = temporary_directory("duration-inputs", name);
    for (file, text) in files {
        std::fs::write(directory.join(file), text).unwrap();
    }
    let state = directory.join("state");
    let mut all = arguments.to_vec();
    if arguments.first() != Some(&"validate") {
        all.extend_from_slice(&["--state-dir", state.to_str().unwrap()]);
    }
    run_binary(Path::new(&directory), &all)
}

/// The `log` lines a run printed.
fn logged(stderr: &str) -> Vec<String> {
    crate::support::logged(stderr, "INFO  ")
}

/// Waits its `wait` on the clock and says how long that was.
const CHILD: &str = r#"
id: child
inputs:
  wait: { type: duration, required: true }
context: { started: null }
states:
  waiting:
    entry: [{ assign: { started: now() } }]
    after: [{ delay: wait, target: done }]
  done: { type: final, output: { waited: "${now() - started}" } }
"#;

/// Gives its own `duration` input to a child, then to map items beside a duration value and a
/// literal, and moves a timestamp by it both ways: one the load knows (`now()`), and one only
/// the run does (a context variable).
const PARENT: &str = r#"
id: parent
inputs:
  wait: { type: duration, default: 10s }
context: { since: null, until: null, span: null, started: null }
states:
  single:
    entry:
      - assign: { since: "now() - wait", until: "wait + now()", started: now() }
      - log: "window ${until - since}, delay ${wait * 2}"
      - log: "around the start ${(started + wait) - (started - wait)}, a number ${1 + wait}"
      - log: "compared ${now() - since == wait} ${now() - since < wait} ${started - since >= wait}"
    invoke: [{ id: kid, protocol: child.yaml, inputs: { wait: "${wait}" } }]
    on:
      done.invoke.kid:
        target: many
        actions: [{ log: "child waited ${event.data.waited}" }]
  many:
    entry:
      - map: "[wait, duration('1.5s'), '2m']"
        id: fan
        item: span
        invoke: { protocol: child.yaml, inputs: { wait: "${span}" } }
    on:
      done.map.fan:
        target: done
        actions: [{ log: "items waited ${event.data.results.map(r, r.waited)}" }]
      error.map.fan: failed
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#;

#[test]
fn a_duration_input_reaches_a_child_and_moves_a_timestamp() {
    let (code, _, stderr) = run(
        "child",
        &[("parent.yaml", PARENT), ("child.yaml", CHILD)],
        &["parent.yaml", "--virtual-time"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr),
        [
            "window 20s, delay 20000",
            "around the start 20s, a number 10001",
            "compared true false true",
            "child waited 10s",
            r#"items waited ["10s","1.5s","2m"]"#,
        ],
        "{stderr}"
    );
}

#[test]
fn a_child_refuses_a_duration_it_cannot_hold_naming_the_input() {
    let parent = PARENT.replace("inputs: { wait: \"${wait}\" }", "inputs: { wait: \"-5s\" }");
    let (code, _, stderr) = run(
        "negative",
        &[("parent.yaml", &parent), ("child.yaml", CHILD)],
        &["parent.yaml", "--virtual-time"],
    );
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("`-5s` is negative, and a duration input is a span of time"),
        "{stderr}"
    );
}

/// `-` is checked where the types are known, with the help `+` has; an `integer` input is a
/// number there, and a `duration` input a number once it is computed with (`wait * 2`).
#[test]
fn what_still_fails_is_located_at_load_for_minus_as_for_plus() {
    let protocol = r#"
id: misuse
inputs:
  wait: { type: duration, default: 10s }
  count: { type: integer, default: 3 }
context: { at: null }
states:
  a:
    entry:
      - assign: { at: "now() - count" }
      - assign: { at: "now() + count" }
      - assign: { at: "wait - now()" }
      - assign: { at: "now() - wait * 2" }
      - assign: { at: "[1].map(wait, now() - wait)" }
"#;
    let (code, stdout, stderr) = run(
        "misuse",
        &[("misuse.yaml", protocol)],
        &["validate", "misuse.yaml"],
    );
    let rendered = format!("{stdout}{stderr}");
    assert_ne!(code, 0, "{rendered}");
    let errors: Vec<&str> = rendered.split("error: ").skip(1).collect();
    assert_eq!(errors.len(), 4, "{rendered}");
    let minus_help = |error: &str| {
        error
            .lines()
            .find(|line| line.contains("= help:"))
            .unwrap_or_default()
            .replace("now() - ", "now() + ")
    };
    for (error, location, says) in [
        (
            errors[0],
            "misuse.yaml:10:30",
            "`-` between a timestamp and a number",
        ),
        (
            errors[1],
            "misuse.yaml:11:30",
            "`+` between a timestamp and a number",
        ),
        (
            errors[2],
            "misuse.yaml:12:29",
            "`-` between a duration and a timestamp",
        ),
        (
            errors[3],
            "misuse.yaml:13:30",
            "`-` between a timestamp and a number",
        ),
    ] {
        assert!(
            error.contains(location) && error.contains(says),
            "{location} {says}:\n{rendered}"
        );
    }
    assert_eq!(minus_help(errors[0]), minus_help(errors[1]), "{rendered}");
    assert!(
        errors[0].contains("a `duration` input is milliseconds: `duration('1ms') * n`"),
        "{rendered}"
    );
}

/// Where the types are known only when it runs, `-` fails with the words `+` has, not CEL's
/// `Unsupported binary operator`.
#[test]
fn minus_at_run_time_says_what_plus_says() {
    let protocol = r#"
id: runtime
context: { at: null, milliseconds: 2000 }
states:
  a:
    entry: [{ assign: { at: "now() - milliseconds" } }]
    on:
      error.execution: { target: b, actions: [{ log: "${event.data.message}" }] }
  b:
    entry: [{ assign: { at: "now() + milliseconds" } }]
    on:
      error.execution: { target: c, actions: [{ log: "${event.data.message}" }] }
  c: { type: final }
"#;
    let (code, _, stderr) = run(
        "runtime",
        &[("runtime.yaml", protocol)],
        &["runtime.yaml", "--virtual-time"],
    );
    assert_eq!(code, 0, "{stderr}");
    let logs = logged(&stderr);
    assert_eq!(logs.len(), 2, "{stderr}");
    let unit = "is not defined: a number has no unit; write `duration('1ms') * n` for `n` milliseconds (a `duration` input is milliseconds)";
    assert!(
        logs[0].contains(&format!("timestamp - int {unit}")),
        "{stderr}"
    );
    assert!(
        logs[1].contains(&format!("timestamp + int {unit}")),
        "{stderr}"
    );
}
