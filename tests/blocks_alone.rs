//! Every block checked on its own: a problem in a block nobody uses is a located error, reported once.

use crate::support::{assert_located, errors, machine, run_binary, temporary_directory};

/// Problems in a block no `use` names are errors at their line, as in a used one.
#[test]
fn a_problem_in_an_unused_block_is_a_located_error() {
    let rendered = errors(
        r#"
id: unused
context: { total: 0 }
blocks:
  never:
    parameters:
      tool: {}
      wait: { default: "missing_default + 1" }
    do:
      - assign: { total: "tool + nope", absent: 1 }
      - send: hello
        to: worker
      - log: "${1 +}"
      - use: nosuch
states:
  a: { type: final }
"#,
    );
    for (message, location) in [
        ("unknown name `missing_default`", "test.yaml:8:25"),
        ("unknown name `nope`", "test.yaml:10:34"),
        ("unknown context variable `absent`", "test.yaml:10:41"),
        ("no invoke has the id `worker`", "test.yaml:12:13"),
        (
            "invalid expression: the expression ends too early",
            "test.yaml:13:20",
        ),
        ("no block is named `nosuch`", "test.yaml:14:14"),
    ] {
        assert_located(&rendered, message, location);
    }
    assert!(rendered.contains("6 errors"), "{rendered}");
}

/// Checked on its own, a parameter is a name of unknown value: reading it, or naming an
/// effect's id after it, is no problem until a use gives it a value.
#[test]
fn an_unused_block_may_read_its_parameters_and_take_its_id_from_one() {
    machine(
        r#"
id: parameters
context: { seen: null }
blocks:
  call:
    parameters:
      tool: {}
      path: { default: "'.'" }
    do:
      - assign: { seen: "tool.size() + path" }
      - read_file: "${path}/${tool}"
        id: "${tool}"
      - use: other
        with: { value: tool }
  other:
    parameters: { value: {} }
    do: [{ log: "${value}" }]
states:
  a: { type: final }
"#,
    );
}

/// A problem in a block used twice is found three times (each use and on its own): shown
/// once, with a note for each use.
#[test]
fn a_problem_in_a_used_block_is_reported_once() {
    let rendered = errors(
        r#"
id: twice
context: { total: 0 }
blocks:
  add:
    do: [{ assign: { total: "typo + 1" } }]
states:
  a:
    entry: [{ use: add }, { use: add }]
"#,
    );
    assert_eq!(
        rendered.matches("unknown name `typo`").count(),
        1,
        "{rendered}"
    );
    assert!(
        rendered.contains("test.yaml:6:30")
            && rendered.contains("= note: in the block `add` used at test.yaml:9:20")
            && rendered.contains("= note: in the block `add` used at test.yaml:9:34")
            && rendered.contains("1 error"),
        "{rendered}"
    );
}

/// An imported block nobody uses is checked in its file; the names it reads are the
/// importing protocol's, so an unknown one is left to the protocols that use it.
#[test]
fn an_unused_imported_block_is_checked_in_its_file() {
    let directory = temporary_directory("blocks_alone", "imported");
    std::fs::write(
        directory.join("common.library.yaml"),
        r#"blocks:
  open:
    parameters: { x: {} }
    do:
      - assign: { anything: "x + whatever" }
      - log: "${In('somewhere')}"
  broken:
    do:
      - log: "${size(}"
      - use: nosuch
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("main.yaml"),
        "id: main\nimports: [common.library.yaml]\nstates:\n  a: { type: final }\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "main.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("invalid expression")
            && stderr.contains("common.library.yaml:9:22")
            && stderr.contains("no block is named `nosuch`")
            && stderr.contains("common.library.yaml:10:14")
            && stderr.contains("2 errors"),
        "{stderr}"
    );
}

/// What an unused block raises is nothing the protocol raises: with `events:` declared, a
/// handler only such a block could feed is still refused.
#[test]
fn an_event_raised_only_in_an_unused_block_is_not_one_the_protocol_takes() {
    let rendered = errors(
        r#"
id: unused-raise
events: { go: {} }
blocks:
  never:
    do: [{ raise: tick }]
states:
  a:
    on: { go: b, tick: b }
  b: { type: final }
"#,
    );
    assert!(rendered.contains("`tick`"), "{rendered}");
    assert!(rendered.contains("1 error"), "{rendered}");
}
