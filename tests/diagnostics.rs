//! Every bad protocol gets located errors (FILE:LINE:COL, the line, a marker, a fix), exit 65, fast.

use std::process::Command;

use crate::support::errors;

/// Runs `protocol-run validate` on `content` written to a temporary file; returns (exit code, stderr).
fn validate_file(name: &str, content: &[u8]) -> (i32, String) {
    let directory =
        std::env::temp_dir().join(format!("protocol-run-diagnostics-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join(name);
    std::fs::write(&path, content).unwrap();
    // Hostile shapes take a few one-state validates; a blowup would take thousands.
    let output = crate::support::timing::within(name, 50, || {
        Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .arg("validate")
            .arg(&path)
            .output()
            .unwrap()
    });
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (output.status.code().unwrap_or(-1), stderr)
}

#[test]
fn mistyped_target_suggests_the_state() {
    let text = errors("id: p\nstates:\n  idle:\n    on:\n      call: retryin\n  retrying: {}\n");
    assert!(text.contains("error: unknown target `retryin`"), "{text}");
    assert!(text.contains("--> test.yaml:5:13"), "{text}");
    assert!(text.contains("5 |       call: retryin"), "{text}");
    assert!(text.contains("|             ^^^^^^^"), "{text}");
    assert!(text.contains("help: did you mean `retrying`?"), "{text}");
}

#[test]
fn unknown_key_points_at_the_key() {
    let text = errors("id: p\nstates:\n  idle:\n    entyr: []\n");
    assert!(text.contains("error: unknown key `entyr`"), "{text}");
    assert!(text.contains("--> test.yaml:4:5"), "{text}");
    assert!(text.contains("did you mean `entry`?"), "{text}");
}

#[test]
fn duplicate_key_names_the_first() {
    let text = errors("id: p\nstates:\n  idle: {}\n  idle: {}\n");
    assert!(text.contains("error: duplicate key `idle`"), "{text}");
    assert!(text.contains("--> test.yaml:4:3"), "{text}");
    assert!(text.contains("line 3:3"), "{text}");
}

#[test]
fn duplicate_state_id_across_levels() {
    let text = errors("id: p\nstates:\n  a:\n    states:\n      x: {}\n  x: {}\n");
    assert!(text.contains("duplicate state id `x`"), "{text}");
    assert!(text.contains("--> test.yaml:6:3"), "{text}");
}

#[test]
fn bad_expressions_are_located_inside_the_string() {
    let text = errors(
        "id: p\ncontext: { attempts: 0 }\nstates:\n  a:\n    on:\n      go: { target: a, guard: \"attempt < 3\" }\n      stop: { target: a, guard: \"attempts <\" }\n",
    );
    assert!(text.contains("unknown name `attempt`"), "{text}");
    assert!(text.contains("--> test.yaml:6:32"), "{text}");
    assert!(text.contains("did you mean `attempts`?"), "{text}");
    assert!(text.contains("invalid expression"), "{text}");
    assert!(text.contains("2 errors"), "{text}");
}

#[test]
fn every_error_of_a_file_is_reported_at_once() {
    let text = errors(
        "id: p\ncontext: { n: 0 }\nstates:\n  a:\n    on:\n      x: nowhere\n      y: { target: a, guard: \"m > 1\" }\n    entry: [{ assign: { q: \"1\" } }]\n  f: { type: final, exit_code: 99 }\n",
    );
    for expected in [
        "unknown target `nowhere`",
        "unknown name `m`",
        "unknown context variable `q`",
        "exit code 99 is outside 0–63",
    ] {
        assert!(text.contains(expected), "missing {expected}: {text}");
    }
    assert!(text.contains("4 errors"), "{text}");
}

#[test]
fn structural_mistakes_are_caught_by_the_compiler() {
    // (protocol, the error's first line, where it points)
    let cases = [
        (
            "id: p\nstates:\n  h: { type: history }\n",
            "misplaced history state: it must be a child of a compound or parallel state",
            "3:3",
        ),
        (
            "id: p\nstates:\n  f:\n    type: final\n    states: { x: {} }\n",
            "a final state cannot have child states",
            "5:5",
        ),
        (
            "id: p\nstates:\n  a:\n    initial: b\n    states: { a1: {} }\n  b: {}\n",
            "invalid initial state `b`: it is not inside this state",
            "4:14",
        ),
        (
            "id: p\nstates:\n  a:\n    after: [{ target: a }]\n",
            "a transition under `after` needs a `delay` or an `until`",
            "4:13",
        ),
        (
            "id: p\nstates:\n  a: { on: { go: { target: [a, b] } } }\n  b: {}\n",
            "these targets cannot be active together",
            "3:28",
        ),
    ];
    for (yaml, message, location) in cases {
        let text = errors(yaml);
        assert!(
            text.starts_with(&format!("error: {message}\n --> test.yaml:{location}\n")),
            "expected {message:?} at {location} for {yaml:?}, got {text}"
        );
    }
    // Several targets of one event on a plain state are a valid shorthand, not a conflict.
    crate::support::machine("id: p\nstates:\n  a:\n    on: { go: [a, b] }\n  b: {}\n");
}

#[test]
fn a_mistake_inside_an_action_is_reported_against_that_action() {
    let text = errors(
        "id: p\nstates:\n  a:\n    entry:\n      - log: hi\n        levle: info\n      - lgo: hi\n",
    );
    assert!(
        text.contains("unknown key `levle`") && text.contains("did you mean `level`?"),
        "{text}"
    );
    assert!(
        text.contains("an action needs one of the keys that name its kind (log, assign")
            && text.contains("did you mean `log`?"),
        "{text}"
    );
}

#[test]
fn hostile_and_broken_files_give_a_located_error_fast() {
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9u8 {
        let name = (b'a' + level) as char;
        let previous = (b'a' + level - 1) as char;
        bomb.push_str(&format!(
            "{name}: &{name} [*{previous}, *{previous}, *{previous}, *{previous}, *{previous}]\n"
        ));
    }
    bomb.truncate(400);
    // (file name, content, the error's first line, where it points); the message is matched
    // from `error: ` to the end of its line, so the file name alone cannot satisfy it.
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "bomb.yaml",
            bomb.into_bytes(),
            "YAML anchors are not supported",
            "1:4",
        ),
        (
            "deep-flow.yaml",
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            "nesting deeper than 64 levels",
            // saphyr's scanner gives up at the 256th open bracket, before any event.
            "1:256",
        ),
        (
            "deep-block.yaml",
            "- ".repeat(100_000).into_bytes(),
            "nesting deeper than 64 levels",
            "1:129",
        ),
        (
            "cut.yaml",
            b"id: cut\nstates:\n  idle:\n    on: {call: [a, ".to_vec(),
            "While parsing a node, did not find expected node content",
            "4:20",
        ),
        (
            "cut-quote.yaml",
            b"id: cut\nstates:\n  idle:\n    entry: [{ log: \"unclosed".to_vec(),
            "While scanning a quoted scalar, found unexpected end of stream",
            "4:20",
        ),
        (
            "target.yaml",
            b"id: p\nstates:\n  a: { on: { go: b } }\n".to_vec(),
            "unknown target `b`",
            "3:18",
        ),
        ("empty.yaml", Vec::new(), "the file is empty", "1:1"),
    ];
    for (name, content, message, location) in cases {
        let (code, stderr) = validate_file(name, &content);
        assert_eq!(code, 65, "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {message}\n")),
            "{name}: expected `error: {message}` first in {stderr}"
        );
        assert!(
            stderr.contains(&format!("/{name}:{location}\n")),
            "{name}: expected it located at {name}:{location} in {stderr}"
        );
    }
    // Text that is not UTF-8: the error names the byte and points at it, after the valid text.
    let (code, stderr) = validate_file("binary.yaml", &[0xff, 0xfe, 0x00, 0x01]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.starts_with("error: /")
            && stderr.contains(
                "/binary.yaml: the file is not UTF-8 text (invalid byte 0xff at offset 0)\n"
            )
            && stderr.contains("/binary.yaml:1:1\n"),
        "{stderr}"
    );
    // Latin-1 saved text: the line and column of the first byte that is not UTF-8.
    let (code, stderr) = validate_file(
        "latin1.yaml",
        b"id: t\nstates:\n  a: { type: final }  # caf\xe9\n",
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("(invalid byte 0xe9 at offset 41)")
            && stderr.contains("/latin1.yaml:3:28\n")
            && stderr.contains("3 |   a: { type: final }  # caf\n"),
        "{stderr}"
    );
}

#[test]
fn a_missing_file_exits_66() {
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["validate", "/nonexistent/protocol.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no such file"));
}

/// A function CEL has elsewhere but expressions here do not (a global `max`, `contains`) is
/// refused where it is written, with what to write instead, rather than passing the check and
/// failing as "not defined" when the run reaches it. (`timestamp` and `duration` once were such
/// functions; they are defined now, see `tests/time.rs`.)
#[test]
fn a_function_expressions_do_not_have_is_refused_at_load_with_what_to_write() {
    let errors = crate::support::errors(
        r#"
id: missing-functions
context: { d: 0 }
states:
  s:
    entry:
      - assign: { d: "max(1, 2)" }
      - assign: { d: "contains('ab')" }
    always: e
  e: { type: final }
"#,
    );
    assert!(errors.contains("write `math.greatest(a, b)`"), "{errors}");
    assert!(
        errors.contains("call it on the text: `text.contains(x)`"),
        "{errors}"
    );
}

/// An unknown function is underlined at its name, where the author misspelled it, not at the
/// parentheses CEL places the call at: in an assigned value, a template (after a non-ASCII
/// character, whose bytes once shifted the place) and a guard alike; so is an unknown method
/// and a namespaced function.
#[test]
fn an_unknown_function_is_underlined_at_its_name() {
    let protocol = r#"id: unknown-function
context: { t: 0 }
states:
  a:
    entry:
      - assign: { t: "noww()" }
      - log: "é at ${ 'é' + noww()}"
    always: { target: b, guard: "'é' == 'x' || noww () > 1 || t.frob() || math.gretest(1, 2)" }
  b: { type: final }
"#;
    let (code, text) = validate_file("unknown-function.yaml", protocol.as_bytes());
    assert_eq!(code, 65, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    // (what, line, column, how many characters are underlined)
    for (what, line, column, width) in [
        ("assign", 6, 23, 4),
        ("template", 7, 29, 4),
        ("guard", 8, 48, 4),
        ("method", 8, 65, 4),
        ("namespaced", 8, 75, 12),
    ] {
        let location = format!("/unknown-function.yaml:{line}:{column}");
        // Under the location: a bar, the source line, then the marker (its column counted
        // after `|`).
        let marker = format!("|{}{}", " ".repeat(column), "^".repeat(width));
        let found = lines.iter().enumerate().any(|(index, shown)| {
            shown.ends_with(&location)
                && lines
                    .get(index + 3)
                    .is_some_and(|under| under.trim_start() == marker)
        });
        assert!(
            found,
            "{what}: `{location}` not underlined `{marker}` in\n{text}"
        );
    }
}

/// The CLI explains the branch named by the action's kind key, as the editor does: an `exec`
/// with a wrong `timeout` and a misspelt retrier key gets exactly those two errors.
#[test]
fn a_choice_is_explained_by_the_branch_its_kind_key_names() {
    let text = errors(
        "id: p\nstates:\n  a:\n    entry:\n      - exec: [echo, hi]\n        id: e\n        timeout: true\n        retry:\n          - backof_rate: 2\n  done: { type: final }\n",
    );
    assert_eq!(
        text,
        "error: expected a string, found the boolean true
 --> test.yaml:7:18
  |
7 |         timeout: true
  |                  ^^^^
  = help: quote the value to make it a string

error: unknown key `backof_rate`
 --> test.yaml:9:13
  |
9 |           - backof_rate: 2
  |             ^^^^^^^^^^^ not allowed here
  = help: did you mean `backoff_rate`?

2 errors
"
    );
}

#[test]
fn a_value_of_no_allowed_type_names_every_type_the_key_takes() {
    let text = errors("id: p\nstates:\n  a:\n    entry:\n      - exec: 5\n        id: x\n");
    assert!(
        text.starts_with(
            "error: expected a list or a string, found the number 5\n --> test.yaml:5:15\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("1 error\n"), "{text}");
}

#[test]
fn an_enumeration_mistake_lists_the_allowed_values_and_suggests_the_nearest() {
    let text = errors("id: p\ninputs:\n  n: { type: interger }\nstates:\n  a:\n    type: finale\n");
    assert_eq!(
        text,
        "error: the string \"interger\" is not an allowed value
 --> test.yaml:3:14
  |
3 |   n: { type: interger }
  |              ^^^^^^^^
  = help: did you mean `integer`? (allowed values: string, integer, number, boolean, duration, list, enum)

error: the string \"finale\" is not an allowed value
 --> test.yaml:6:11
  |
6 |     type: finale
  |           ^^^^^^
  = help: did you mean `final`? (allowed values: atomic, compound, parallel, final, history)

2 errors
"
    );
    // Far from every value: the list alone.
    let text = errors("id: p\nstates:\n  a:\n    type: zzzzzzzz\n");
    assert!(
        text.contains("= help: allowed values: atomic, compound, parallel, final, history\n"),
        "{text}"
    );
}

/// A scenario step is a choice told apart by its key too: a mistake in an `expect` step is
/// reported against `expect`, and a step with no step key says which keys there are.
#[test]
fn a_scenario_step_is_explained_by_its_kind_key() {
    let protocol = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocols/retry-backoff.yaml")
        .display()
        .to_string();
    let scenario = format!(
        "protocol: {protocol}\nscenarios:\n  - name: t\n    steps:\n      - expect: {{ state: [x] }}\n      - sedn: go\n"
    );
    let (code, stderr) = validate_file("steps.scenario.yaml", scenario.as_bytes());
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.starts_with("error: unknown key `state`\n")
            && stderr.contains("/steps.scenario.yaml:5:19\n")
            && stderr.contains(
                "= help: allowed keys here: configuration, context, tags, directives, effects, files, finished, discarded, deferred, refused, unhandled_errors\n"
            ),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: a step needs one of the keys that name its kind (")
            && stderr.contains("/steps.scenario.yaml:6:9\n")
            && stderr.contains("= help: did you mean `send`?\n"),
        "{stderr}"
    );
    assert!(stderr.ends_with("2 errors\n"), "{stderr}");
}

/// Schema errors no longer hide what the compiler finds in the rest of the file: targets,
/// expressions and schema mistakes come together, in the file's order. What a schema mistake
/// makes unreliable (the other keys of an `exec` whose `timeout` is wrong, a state whose `type`
/// is misspelt) is not second-guessed.
#[test]
fn schema_structure_and_expression_problems_are_reported_together_in_order() {
    let text = errors(
        r#"id: p
context: { n: 0 }
states:
  a:
    entyr: []
    on:
      go: nowhere
      x: { target: a, guard: "m > 1", delay: 1s }
    entry:
      - exec: [ls]
        id: e
        timeout: true
        cwd: "${unknown_in_a_set_aside_action}"
      - log: "${q}"
  b:
    type: finale
    exit_code: 3
"#,
    );
    let headlines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("error:") || line.contains("--> "))
        .map(str::trim)
        .collect();
    assert_eq!(
        headlines,
        [
            "error: unknown key `entyr`",
            "--> test.yaml:5:5",
            "error: unknown target `nowhere`",
            "--> test.yaml:7:11",
            "error: unknown name `m`",
            "--> test.yaml:8:31",
            "error: unknown key `delay`",
            "--> test.yaml:8:39",
            "error: expected a string, found the boolean true",
            "--> test.yaml:12:18",
            "error: unknown name `q`",
            "--> test.yaml:14:17",
            "error: the string \"finale\" is not an allowed value",
            "--> test.yaml:16:11",
        ],
        "{text}"
    );
    assert!(
        text.contains(
            "= help: `delay` belongs to transitions under `after`: move this transition to the state's `after:` list\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("7 errors\n"), "{text}");
}

/// What cannot be read as a protocol once its mistakes are set aside (no `states`) gets the
/// schema errors alone.
#[test]
fn a_file_that_is_no_protocol_without_its_mistakes_gets_the_schema_errors_alone() {
    let text = errors("id: p\nstates: 5\n");
    assert!(
        text.starts_with("error: expected a mapping, found the number 5\n --> test.yaml:2:9\n"),
        "{text}"
    );
    assert!(text.ends_with("1 error\n"), "{text}");
}

#[test]
fn the_validate_command_shows_schema_and_target_errors_together() {
    let (code, stderr) = validate_file(
        "together.yaml",
        b"id: p\nstates:\n  a:\n    entyr: []\n    on: { go: nowhere }\n",
    );
    assert_eq!(code, 65, "{stderr}");
    let schema_error = stderr.find("error: unknown key `entyr`");
    let target_error = stderr.find("error: unknown target `nowhere`");
    assert!(
        schema_error.is_some() && schema_error < target_error,
        "{stderr}"
    );
    assert!(stderr.ends_with("2 errors\n"), "{stderr}");
}

/// Past 100 schema errors the rest is not compiled, and the output says so.
#[test]
fn past_a_hundred_schema_errors_the_rest_is_not_checked_and_that_is_said() {
    let mut yaml = String::from("id: p\nstates:\n  a:\n    on: { go: nowhere }\n");
    for index in 0..101 {
        yaml.push_str(&format!("  s{index}: {{ entyr: [] }}\n"));
    }
    let text = errors(&yaml);
    assert!(!text.contains("unknown target"), "{text}");
    assert!(
        text.contains(
            "warning: more than 100 schema errors: targets, expressions and names were not checked\n"
        ),
        "{text}"
    );
}

/// `check protocols/*.yaml` names the scenario files beside the protocols: each is checked as
/// a scenario file, not refused as a protocol.
#[test]
fn check_reads_a_scenario_file_as_one() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("check")
        .arg(repository.join("protocols/ittw.yaml"))
        .arg(repository.join("protocols/ittw.scenario.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("/protocols/ittw.scenario.yaml (scenarios, no warnings)"),
        "{stdout}"
    );
}

/// A key on the wrong kind of state is refused by the schema for editors, and reported once by
/// the CLI, with the compiler's words; the state's other problems still show.
#[test]
fn a_key_of_another_kind_of_state_is_reported_once() {
    let text = errors(
        "id: p\nstates:\n  a:\n    exit_code: 3\n    on: { go: nowhere }\n  b:\n    type: final\n    history: deep\n",
    );
    let headlines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("error:") || line.contains("--> "))
        .map(str::trim)
        .collect();
    assert_eq!(
        headlines,
        [
            "error: only final states have an exit code",
            "--> test.yaml:4:5",
            "error: unknown target `nowhere`",
            "--> test.yaml:5:15",
            "error: `history` belongs to history states (`type: history`)",
            "--> test.yaml:8:5",
        ],
        "{text}"
    );
}

/// A list item that is no action is set aside alone: the actions beside it are still checked,
/// and located where they are written.
#[test]
fn the_actions_beside_one_that_is_no_action_are_still_checked() {
    let text = errors(
        "id: p\ncontext: { n: 0 }\nstates:\n  a:\n    entry:\n      - log: \"${n}\"\n      - lgo: hi\n      - log: \"${missing}\"\n        level: info\n",
    );
    let headlines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("error:") || line.contains("--> "))
        .map(str::trim)
        .collect();
    assert_eq!(
        headlines,
        [
            "error: an action needs one of the keys that name its kind (log, assign, raise, send, \
             cancel, if, foreach, map, exec, emit, read_file, list_dir, grep_search, write, backup, \
             restore, call, use); this one has none",
            "--> test.yaml:7:9",
            "error: unknown name `missing`",
            "--> test.yaml:8:17",
        ],
        "{text}"
    );
}

#[test]
fn a_comma_in_unquoted_flow_text_is_told_to_be_quoted() {
    let (code, stderr) = validate_file(
        "flow-comma.yaml",
        b"id: flow\ninputs:\n  path: { type: string, description: relative to repo, absolute otherwise }\nstates:\n  a: { type: final }\n",
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("unknown key `absolute otherwise`"),
        "{stderr}"
    );
    assert!(stderr.contains("flow-comma.yaml:3:56"), "{stderr}");
    assert!(
        stderr.contains("quote that text: `description: \"relative to repo, absolute otherwise\"`"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_state_in_in_is_underlined_at_its_id() {
    let (code, stderr) = validate_file(
        "in-state.yaml",
        b"id: t\nstates:\n  idle:\n    always: { target: done, guard: \"In('idel')\" }\n  done: { type: final }\n",
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("unknown state `idel` in `In`"), "{stderr}");
    assert!(stderr.contains("in-state.yaml:4:41"), "{stderr}");
    assert!(
        stderr.contains("\n  |                                         ^^^^\n"),
        "{stderr}"
    );
}
