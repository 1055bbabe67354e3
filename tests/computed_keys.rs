//! Results keyed by a runtime value: an `assign` key computed when it runs (`verdicts[r.path]`) and `merge(a, b)`, typed against `types:` and bounded like any assignment.

use crate::support::{run_binary, temporary_directory};

/// A fresh directory holding `protocol.yaml` and `events.jsonl`.
fn setup(name: &str, protocol: &str, events: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("computed-keys", name);
    std::fs::write(directory.join("protocol.yaml"), protocol).unwrap();
    std::fs::write(directory.join("events.jsonl"), events).unwrap();
    directory
}

/// Runs `protocol.yaml` on `events.jsonl`, with `more` arguments.
fn run(directory: &std::path::Path, more: &[&str]) -> (i32, String, String) {
    let mut arguments = vec![
        "run",
        "protocol.yaml",
        "--state-dir",
        "state",
        "--events",
        "events.jsonl",
    ];
    arguments.extend_from_slice(more);
    run_binary(directory, &arguments)
}

/// The `log` lines a run printed.
fn logged(stderr: &str) -> Vec<String> {
    crate::support::logged(stderr, "INFO  ")
}

/// A review gate keyed by file path: each verdict stored under its path, a summary merged in,
/// typed so that a verdict is `approve` or `reject`.
const GATE: &str = r#"
id: gate
types:
  verdicts: { type: object, additionalProperties: { enum: [approve, reject] } }
context: { verdicts: {}, summary: null, r: null }
states:
  collecting:
    on:
      results:
        actions:
          - foreach: event.data.items
            item: r
            do:
              - assign: { "verdicts[r.path]": "r.verdict" }
          - assign: { summary: "merge(verdicts, {'total': string(size(verdicts))})" }
          - log: "verdicts ${verdicts}"
          - log: "summary ${summary}"
      extra:
        actions:
          - assign: { verdicts: "merge(verdicts, event.data)" }
          - log: "verdicts ${verdicts}"
      error.execution:
        actions: [{ log: "refused: ${event.data.message}" }]
      finish: done
  done: { type: final, output: { verdicts: "${verdicts}" } }
"#;

#[test]
fn a_verdict_is_stored_under_its_file_path_and_maps_merge() {
    let directory = setup(
        "gate",
        GATE,
        concat!(
            r#"{"event": "results", "data": {"items": [{"path": "src/a.rs", "verdict": "approve"}, {"path": "docs/b.v2.md", "verdict": "reject"}]}}"#,
            "\n",
            r#"{"event": "extra", "data": {"src/a.rs": "reject", "src/c.rs": "approve"}}"#,
            "\n",
            r#"{"event": "finish"}"#,
            "\n",
        ),
    );
    let (code, stdout, stderr) = run(&directory, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        logged(&stderr),
        [
            r#"verdicts {"src/a.rs":"approve","docs/b.v2.md":"reject"}"#,
            r#"summary {"docs/b.v2.md":"reject","src/a.rs":"approve","total":"2"}"#,
            r#"verdicts {"docs/b.v2.md":"reject","src/a.rs":"reject","src/c.rs":"approve"}"#,
        ],
        "{stderr}"
    );
    assert!(stdout.contains(r#""src/c.rs":"approve""#), "{stdout}");
}

/// A verdict of the wrong type, under a computed key or merged in, fails like any typed
/// assignment: `error.execution` naming the place, and the variable unchanged.
#[test]
fn a_wrong_typed_value_under_a_computed_key_or_merged_is_refused() {
    let directory = setup(
        "typed",
        GATE,
        concat!(
            r#"{"event": "results", "data": {"items": [{"path": "src/a.rs", "verdict": "approve"}, {"path": "src/b.rs", "verdict": "maybe"}]}}"#,
            "\n",
            r#"{"event": "extra", "data": {"src/c.rs": "perhaps"}}"#,
            "\n",
            r#"{"event": "finish"}"#,
            "\n",
        ),
    );
    let (code, stdout, stderr) = run(&directory, &[]);
    assert_eq!(code, 0, "{stderr}");
    let logs = logged(&stderr);
    let refusals: Vec<&String> = logs
        .iter()
        .filter(|line| line.starts_with("refused: "))
        .collect();
    assert_eq!(refusals.len(), 2, "{stderr}");
    assert!(
        refusals[0].contains(
            r#"`verdicts` would not conform to its type (at `/src~1b.rs`: "maybe" is not one of "approve" or "reject"); the assignment is not made"#
        ),
        "{stderr}"
    );
    assert!(
        refusals[1].contains(r#"at `/src~1c.rs`: "perhaps" is not one of"#),
        "{stderr}"
    );
    // The failed action block stopped at the failing assignment; the variable kept the
    // verdict stored before it.
    assert!(
        stdout.contains(r#""verdicts":{"src/a.rs":"approve"}"#),
        "{stdout}"
    );
}

/// A computed key grows the variable under the context's bound, and a merge under
/// `--max-value-bytes`, each failing with the bound named.
#[test]
fn computed_keys_and_merges_stay_within_the_bounds() {
    let protocol = r#"
id: growing
context: { files: null, copy: null, r: null }
states:
  filling:
    on:
      results:
        actions:
          - foreach: event.data.items
            item: r
            do:
              - assign: { "files[r]": "r + r + r + r" }
      copy:
        actions:
          - assign: { copy: "merge(files, files)" }
      error.execution:
        target: full
        actions: [{ log: "refused: ${event.data.message}" }]
  full: { type: final, exit_code: 3 }
"#;
    let items: Vec<String> = (0..40)
        .map(|index| format!("\"{index:03}{}\"", "k".repeat(200)))
        .collect();
    let events = format!(
        "{{\"event\": \"results\", \"data\": {{\"items\": [{}]}}}}\n",
        items.join(", ")
    );
    let directory = setup("bounds", protocol, &events);
    let (code, _, stderr) = run(&directory, &["--max-value-bytes", "2000"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("more than its limit of 32000 bytes (16 times --max-value-bytes)"),
        "{stderr}"
    );
    // Fewer items fit the context, and their merge is past the bound of one value.
    let events = format!(
        "{{\"event\": \"results\", \"data\": {{\"items\": [{}]}}}}\n{{\"event\": \"copy\"}}\n",
        items[..5].join(", ")
    );
    let directory = setup("merge-bound", protocol, &events);
    let (code, _, stderr) = run(&directory, &["--max-value-bytes", "2000"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("refused: ") && stderr.contains("--max-value-bytes"),
        "{stderr}"
    );
}

/// What the load can tell is a located error: a wrong-typed literal under a computed key, a
/// number in brackets, a bracket left open, an unknown name inside the key (at its column),
/// `merge` with one argument.
#[test]
fn misuse_of_computed_keys_and_merge_is_located_at_load() {
    let protocol = r#"
id: misuse
types:
  verdicts: { type: object, additionalProperties: { enum: [approve, reject] } }
context: { verdicts: {}, r: null, all: null }
states:
  a:
    entry:
      - assign: { "verdicts[r.path]": "'maybe'" }
      - assign: { "verdicts[2]": "'approve'" }
      - assign: { "verdicts[r.path": "'approve'" }
      - assign: { "verdicts[rr.path]": "'approve'" }
      - assign: { all: "merge(verdicts)" }
"#;
    let directory = setup("misuse", protocol, "");
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
    let rendered = format!("{stdout}{stderr}");
    assert_ne!(code, 0, "{rendered}");
    for (location, says) in [
        (
            "protocol.yaml:9:39",
            r#"`verdicts[r.path]` cannot hold this value: at `/`: "maybe" is not one of"#,
        ),
        (
            "protocol.yaml:10:19",
            "`verdicts[2]` indexes a list, and a path names only map keys",
        ),
        (
            "protocol.yaml:11:19",
            "`verdicts[r.path` is not a path: a `[` is not closed",
        ),
        ("protocol.yaml:12:29", "unknown name `rr`"),
        (
            "protocol.yaml:13:25",
            "`merge` takes two maps; this call gives it 1 argument(s)",
        ),
    ] {
        let found = rendered
            .split("error: ")
            .any(|error| error.contains(location) && error.contains(says));
        assert!(found, "{location} {says}:\n{rendered}");
    }
}
