//! Inputs as a user gives them: lists from `a,b` and JSON read as their item type, `--inputs FILE` with `--input` over it, and `$${` for a literal `${` in templates.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// Logs its list inputs, so that a test reads back what they were bound to.
const LISTS: &str = r#"
id: lists
inputs:
  commits: { type: list, items: string, required: true }
  counts: { type: list, items: integer, default: [] }
  ratios: { type: list, items: number, default: [] }
  flags: { type: list, items: boolean, default: [] }
  waits: { type: list, items: duration, default: [] }
  anything: { type: list, default: [] }
  token: { type: string, secret: true }
permissions: { exec: [], write: [], read: [], env: [] }
states:
  report:
    entry:
      - log: "commits=${commits} counts=${counts} ratios=${ratios} flags=${flags} waits=${waits} anything=${anything} token=${token}"
    always: done
  done: { type: final }
"#;

/// A test's directory with `LISTS` in it as `lists.yaml`.
fn directory(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("inputs", name);
    std::fs::write(directory.join("lists.yaml"), LISTS).unwrap();
    directory
}

/// Runs `lists.yaml` with `arguments`; returns (exit code, stdout, stderr).
fn run_lists(directory: &Path, arguments: &[&str]) -> (i32, String, String) {
    let mut all = vec![
        "run",
        "lists.yaml",
        "--virtual-time",
        "--state-dir",
        "state",
    ];
    all.extend_from_slice(arguments);
    run_binary(directory, &all)
}

#[test]
fn a_list_is_given_as_comma_separated_items_read_as_the_item_type() {
    let directory = directory("comma");
    let (code, _, stderr) = run_lists(
        &directory,
        &[
            "-i",
            "commits=a1, b2",
            "-i",
            "counts=1,2",
            "-i",
            "ratios=0.5,2",
            "-i",
            "flags=true,false",
            "-i",
            "waits=1s,2m",
            "-i",
            "anything=x,3",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            r#"commits=["a1","b2"] counts=[1,2] ratios=[0.5,2] flags=[true,false] waits=[1000,120000] anything=["x","3"]"#
        ),
        "{stderr}"
    );
    // An empty text is the empty list.
    let (code, _, stderr) = run_lists(&directory, &["-i", "commits="]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("commits=[] "), "{stderr}");
}

#[test]
fn a_json_list_has_its_items_read_as_the_item_type() {
    let directory = directory("json");
    let (code, _, stderr) = run_lists(
        &directory,
        &[
            "-i",
            "commits=[true, 1.5, \"a,b\"]",
            "-i",
            r#"counts=["3", 4]"#,
            "-i",
            r#"ratios=["2.5", 1]"#,
            "-i",
            r#"flags=["true", false]"#,
            "-i",
            r#"waits=["1m30s"]"#,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            r#"commits=["true","1.5","a,b"] counts=[3,4] ratios=[2.5,1] flags=[true,false] waits=[90000]"#
        ),
        "{stderr}"
    );
}

#[test]
fn an_item_that_is_not_of_the_item_type_is_refused_naming_the_input_and_the_item() {
    let directory = directory("bad-items");
    let cases: [(&str, &str); 6] = [
        (
            "counts=1,x",
            r#"error: input `counts`: item 1: expected integer, got "x""#,
        ),
        (
            "counts=[1, 2.5]",
            "error: input `counts`: item 1: expected integer, got 2.5",
        ),
        (
            "flags=true,yes",
            r#"error: input `flags`: item 1: expected boolean, got "yes""#,
        ),
        (
            "waits=1s,soon",
            "error: input `waits`: item 1: `soon` is not a duration",
        ),
        (
            "commits=[a, [b]]",
            r#"error: input `commits`: item 1: expected string, got ["b"]"#,
        ),
        (
            "commits=a,,b",
            "error: input `commits`: item 1: empty (a stray comma in `a,,b`?)",
        ),
    ];
    for (argument, expected) in cases {
        let mut arguments = vec!["-i", argument];
        if !argument.starts_with("commits") {
            arguments.extend(["-i", "commits=a"]);
        }
        let (code, _, stderr) = run_lists(&directory, &arguments);
        assert_eq!(code, 65, "{argument}: {stderr}");
        assert!(stderr.contains(expected), "{argument}: {stderr}");
    }
}

#[test]
fn a_list_of_durations_is_recorded_as_literals_and_bound_again_the_same() {
    let machine = crate::support::machine(LISTS);
    let supplied = [
        ("commits".to_string(), serde_json::json!([true, 2])),
        ("waits".to_string(), serde_json::json!("1m30s, 2s")),
    ];
    let values = machine.bind_input_values(&supplied).unwrap();
    let recorded = machine.recorded_inputs(&values);
    assert_eq!(recorded["commits"], serde_json::json!(["true", "2"]));
    assert_eq!(recorded["waits"], serde_json::json!(["1m30s", "2s"]));
    assert_eq!(
        machine.bind_recorded_inputs(&recorded, &[]).unwrap(),
        values
    );
}

#[test]
fn an_inputs_file_gives_inputs_in_yaml_or_json_and_an_input_replaces_its_entry() {
    let directory = directory("file");
    std::fs::write(
        directory.join("inputs.yaml"),
        "commits: [a, b]\ncounts: \"4,5\"\nwaits: [30s]\n",
    )
    .unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "inputs.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(r#"commits=["a","b"] counts=[4,5] ratios=[] flags=[] waits=[30000]"#),
        "{stderr}"
    );
    let (code, _, stderr) = run_lists(
        &directory,
        &[
            "--inputs",
            "inputs.yaml",
            "-i",
            "counts=9",
            "-i",
            "commits=c",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(r#"commits=["c"] counts=[9] ratios=[] flags=[] waits=[30000]"#),
        "{stderr}"
    );
    std::fs::write(
        directory.join("inputs.json"),
        r#"{"commits": ["x"], "flags": ["false"], "ratios": [1.25]}"#,
    )
    .unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "inputs.json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(r#"commits=["x"] counts=[] ratios=[1.25] flags=[false]"#),
        "{stderr}"
    );
}

#[test]
fn a_problem_in_an_inputs_file_is_located_at_its_entry() {
    let directory = directory("file-errors");
    std::fs::write(
        directory.join("inputs.yaml"),
        "commits: [a]\ncounts:\n  - 1\n  - two\ncomits: [b]\n",
    )
    .unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "inputs.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains(
            "error: input `counts`: item 1: expected integer, got \"two\"\n --> inputs.yaml:4:5\n  |\n4 |   - two\n  |     ^^^"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "error: unknown input `comits`; did you mean `commits`?\n --> inputs.yaml:5:1\n  |\n5 | comits: [b]\n  | ^^^^^^"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "= help: correct this entry, or give `counts` with --input, which replaces it"
        ) && stderr.contains("= help: remove this entry, or correct its name"),
        "{stderr}"
    );
    // An `--input` replacing the bad entry leaves nothing to point at in the file.
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "inputs.yaml", "-i", "counts=x"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("error: input `counts`: item 0: expected integer, got \"x\"\n")
            && !stderr.contains("got \"x\"\n -->"),
        "{stderr}"
    );

    std::fs::write(directory.join("list.json"), "[1, 2]").unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "list.json"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains(
            "error: --inputs list.json holds a list; an inputs file is a mapping of input name to value\n --> list.json:1:1"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("= help: write one entry a line"),
        "{stderr}"
    );

    std::fs::write(directory.join("broken.yaml"), "commits: [a\n").unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "broken.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("error: --inputs broken.yaml is not YAML or JSON: "),
        "{stderr}"
    );
    // The protocol has a secret input, which any line might hold: the place, not the line.
    assert!(
        stderr.contains("= at broken.yaml:") && !stderr.contains("commits: [a"),
        "{stderr}"
    );

    let (code, _, stderr) = run_lists(&directory, &["--inputs", "missing.yaml"]);
    assert_eq!(code, 66, "{stderr}");
    assert!(
        stderr.contains("error: --inputs: cannot read missing.yaml: no such file"),
        "{stderr}"
    );
}

#[test]
fn a_secret_from_an_inputs_file_stays_masked_and_its_line_is_never_shown() {
    let directory = directory("secret");
    let token = format!("tok-{}-file", std::process::id());
    std::fs::write(
        directory.join("inputs.yaml"),
        format!("commits: [a]\ntoken: {token}\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_lists(&directory, &["--inputs", "inputs.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("token=***token***"), "{stderr}");
    assert!(
        !stderr.contains(&token) && !stdout.contains(&token),
        "{stderr}{stdout}"
    );
    // A secret bound from the file is masked in another entry's diagnostic too.
    std::fs::write(
        directory.join("one-line.json"),
        format!(r#"{{"token": "{token}", "commits": [[1]]}}"#),
    )
    .unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "one-line.json"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("item 0: expected string"), "{stderr}");
    assert!(
        stderr.contains("***token***") && !stderr.contains(&token),
        "{stderr}"
    );
    // A secret refused is not bound, so not masked: its own line is not shown at all.
    std::fs::write(directory.join("short.yaml"), "commits: [a]\ntoken: ab1\n").unwrap();
    let (code, _, stderr) = run_lists(&directory, &["--inputs", "short.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("= at short.yaml:2:8 (the line is not shown: it may hold a secret input)"),
        "{stderr}"
    );
    assert!(!stderr.contains("ab1"), "{stderr}");
}

/// Waits for `go`, so that a run stops unfinished and is resumed; its output shows the secret.
const WAITS: &str = r#"
id: waits
inputs:
  token: { type: string, secret: true, required: true }
  name: { type: string, default: x }
permissions: { exec: [], write: [], read: [], env: [] }
states:
  waiting:
    on:
      go: done
  done: { type: final, output: { token: "${token}", name: "${name}" } }
"#;

#[test]
fn a_resume_takes_secret_inputs_from_a_file_and_serve_pins_inputs_refusing_unknown_ones_at_their_entry()
 {
    let directory = temporary_directory("inputs", "resume");
    std::fs::write(directory.join("waits.yaml"), WAITS).unwrap();
    let token = format!("tok-{}-resume", std::process::id());
    std::fs::write(
        directory.join("all.yaml"),
        format!("token: {token}\nname: y\n"),
    )
    .unwrap();
    std::fs::write(directory.join("secrets.yaml"), format!("token: {token}\n")).unwrap();
    std::fs::write(directory.join("unknown.yaml"), "name: y\ncolour: red\n").unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
    let run = |arguments: &[&str]| {
        let mut all = vec!["run", "waits.yaml", "--state-dir", "state"];
        all.extend_from_slice(arguments);
        run_binary(&directory, &all)
    };
    let (code, _, stderr) = run(&["--inputs", "all.yaml"]);
    assert_eq!(code, 75, "{stderr}");
    let (code, _, stderr) = run(&["--resume", "--inputs", "all.yaml"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains(
            "error: input `name`: a resumed run keeps the inputs it started with; only its secret inputs are supplied again\n --> all.yaml:2:1"
        ),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "serve",
            "waits.yaml",
            "--state-dir",
            "state",
            "--inputs",
            "unknown.yaml",
        ],
    );
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("error: input `colour`: `waits` takes no input `colour`")
            && stderr.contains(" --> unknown.yaml:2:1"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&[
        "--resume",
        "--inputs",
        "secrets.yaml",
        "--events",
        "go.jsonl",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(r#""output":{"name":"y","token":"***token***"}"#)
            || stdout.contains(r#""output":{"token":"***token***","name":"y"}"#),
        "{stdout}"
    );
    assert!(!stdout.contains(&token) && !stderr.contains(&token));
}

#[test]
fn an_expression_error_in_a_template_says_how_to_write_a_literal_dollar_brace() {
    let rendered = crate::support::errors(
        r#"
id: shell
context: { attempts: 0 }
states:
  a:
    entry:
      - exec: [sh, -c, 'echo ${#VAR}']
        id: length
      - log: "home is ${HOME}"
      - write: out.txt
        content: "${atempts}"
        id: out
    always: done
  done: { type: final }
"#,
    );
    assert!(
        rendered.contains("invalid expression: token recognition error at: '#'"),
        "{rendered}"
    );
    assert!(
        rendered.contains(
            "= help: if `${` is meant literally (as in the shell's `${#VAR}`), write `$${`: `$${#VAR}`"
        ),
        "{rendered}"
    );
    // A problem that has its own help keeps it, and says the same after it.
    assert!(
        rendered.contains(
            "= help: expressions can read inputs, context variables and `event`; if `${` is meant literally"
        ),
        "{rendered}"
    );
    assert!(
        rendered.contains("= help: did you mean `attempts`? If `${` is meant literally"),
        "{rendered}"
    );
    assert_eq!(
        rendered.matches("write `$${`").count(),
        3,
        "every template says it: {rendered}"
    );
}

#[test]
fn a_literal_dollar_brace_is_written_with_double_dollar_in_every_kind_of_template() {
    let directory = temporary_directory("inputs", "literal");
    let protocol = r#"
id: literal
inputs:
  out: { type: string, required: true }
context: { printed: "", argument: "" }
states:
  shell:
    entry:
      - exec: [sh, -c, 'V=abcd; printf "%s %s" "$${#V}" "$${V}"']
        id: length
    on:
      done.exec.length: { target: argument, actions: [{ assign: { printed: event.data.stdout } }] }
  argument:
    entry:
      - exec: [sh, -c, 'printf %s "$1"', sh, "$${kept}"]
        id: echo
    on:
      done.exec.echo: { target: writing, actions: [{ assign: { argument: event.data.stdout } }] }
  writing:
    entry:
      - log: "literal $${name} beside ${1 + 1}"
        fields: { field: "$${f}" }
      - write: "${out}/file.txt"
        content: "home=$${HOME} two=${1 + 1}"
        id: file
    on:
      done.exec.file: done
  done:
    type: final
    output: { printed: "${printed}", argument: "${argument}", kept: "$${a} ${1 + 1}", alone: "$${a}" }
"#;
    std::fs::write(directory.join("literal.yaml"), protocol).unwrap();
    let out = directory.display().to_string();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "run",
            "literal.yaml",
            "--state-dir",
            "state",
            "-i",
            &format!("out={out}"),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            r#""output":{"printed":"4 abcd","argument":"${kept}","kept":"${a} 2","alone":"${a}"}"#
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains("literal ${name} beside 2") && stderr.contains("${f}"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("file.txt")).unwrap(),
        "home=${HOME} two=2"
    );
}

#[test]
fn the_list_example_runs_with_its_inputs_file_and_with_comma_separated_commits() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/features");
    let directory = temporary_directory("inputs", "example");
    let state = directory.join("state").display().to_string();
    let run = |arguments: &[&str]| {
        let mut all = vec![
            "run",
            "input-lists.yaml",
            "--virtual-time",
            "--state-dir",
            &state,
        ];
        all.extend_from_slice(arguments);
        run_binary(&examples, &all)
    };
    let (code, stdout, stderr) = run(&["--inputs", "input-lists.inputs.json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            r#""output":{"commits":["3f2a1c0","9041770"],"delays":[2000,60000],"attempts":[1,2,3]}"#
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "2 commits from 3f2a1c0; delays [2000,60000] ms; attempts [1,2,3]; a literal ${commits}"
        ),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&["-i", "commits=3f2a1c0,9be41d7", "-i", "attempts=[2]"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            r#""output":{"commits":["3f2a1c0","9be41d7"],"delays":[1000,5000],"attempts":[2]}"#
        ),
        "{stdout}"
    );
    // `minimum: 1` counts the items.
    let (code, _, stderr) = run(&["-i", "commits="]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("error: input `commits`: 0 is below the minimum 1"),
        "{stderr}"
    );
}
