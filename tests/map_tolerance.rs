//! A map's `tolerated_failures` given by an input or an expression: evaluated when the map starts, refused at load where the load can tell, and `error.execution` naming what it gave where it cannot.

use crate::support::{logged, run_binary, temporary_directory};

/// Four items run one at a time, the second and the fourth failing; the tolerance is
/// `tolerated` as written.
fn protocol(tolerated: &str) -> String {
    format!(
        r#"
id: tolerance
inputs:
  max_failures: {{ type: integer, default: 0 }}
  share: {{ type: string, default: "0%" }}
  strict: {{ type: boolean, default: false }}
context: {{ code: null }}
states:
  checking:
    entry:
      - map: [0, 3, 0, 4]
        id: check
        item: code
        max_concurrency: 1
        tolerated_failures: {tolerated}
        exec: [sh, -c, 'exit $0', "${{code}}"]
    on:
      done.map.check:
        target: done
        actions: [{{ log: "done, ${{event.data.failed}} failed" }}]
      error.map.check:
        target: failed
        actions: [{{ log: "failed: ${{event.data.message}}" }}]
      error.execution:
        target: failed
        actions: [{{ log: "refused: ${{event.data.message}}" }}]
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 1 }}
"#
    )
}

/// Runs `protocol.yaml` holding `yaml` with `arguments` (after the file and a state directory).
fn run(name: &str, yaml: &str, arguments: &[&str]) -> (i32, String, String) {
    let directory = temporary_directory("map-tolerance", name);
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    let mut all = vec!["protocol.yaml", "--state-dir", "state"];
    all.extend_from_slice(arguments);
    run_binary(&directory, &all)
}

#[test]
fn an_input_or_an_expression_sets_the_tolerance_when_the_map_starts() {
    let cases: [(&str, &str, &[&str], i32, &str); 5] = [
        (
            "template",
            "\"${max_failures}\"",
            &[],
            1,
            "failed: 1 of 4 items failed, more than the 0 tolerated",
        ),
        (
            "given",
            "\"${max_failures}\"",
            &["--input", "max_failures=2"],
            0,
            "done, 2 failed",
        ),
        ("expression", "max_failures + 2", &[], 0, "done, 2 failed"),
        (
            "percentage",
            "share",
            &["--input", "share=50%"],
            0,
            "done, 2 failed",
        ),
        (
            "percentage-template",
            "\"${max_failures * 25}%\"",
            &["--input", "max_failures=1"],
            1,
            "failed: 2 of 4 items failed, more than the 1 tolerated",
        ),
    ];
    for (name, tolerated, arguments, code, says) in cases {
        let (exit, _, stderr) = run(name, &protocol(tolerated), arguments);
        assert_eq!(exit, code, "{name}: {stderr}");
        assert_eq!(logged(&stderr, "INFO  "), [says], "{name}: {stderr}");
    }
}

#[test]
fn a_tolerance_that_evaluates_to_nonsense_is_error_execution_saying_what_it_gave() {
    let (code, _, stderr) = run("nonsense", &protocol("share"), &["--input", "share=most"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        logged(&stderr, "INFO  "),
        [
            "refused: tolerated_failures: this gives string `most`, which is not a count (0 or more) or a percentage of the items from 0% to 100%, such as `2` or `25%`"
        ],
        "{stderr}"
    );
}

#[test]
fn a_tolerance_the_load_can_tell_is_wrong_is_a_located_error() {
    for (tolerated, says) in [
        (
            "strict",
            "`strict` is an input of type boolean, which is not a count of items",
        ),
        (
            "\"${strict}\"",
            "`strict` is an input of type boolean, which is not a count of items",
        ),
        (
            "\"'most'\"",
            "`'most'` gives string `most`, which is not a count",
        ),
        ("\"-1\"", "`-1` gives int `-1`, which is not a count"),
        ("max_failurs", "unknown name `max_failurs`"),
    ] {
        let directory = temporary_directory("map-tolerance", "load");
        std::fs::write(directory.join("protocol.yaml"), protocol(tolerated)).unwrap();
        let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
        let rendered = format!("{stdout}{stderr}");
        assert_ne!(code, 0, "{tolerated}: {rendered}");
        assert!(
            rendered.contains(says) && rendered.contains("protocol.yaml:15:"),
            "{tolerated}: {rendered}"
        );
    }
}

/// `check` sees what a computed tolerance reads: a context variable read only there is read.
#[test]
fn check_counts_what_a_tolerance_reads() {
    let protocol = r#"
id: limited
permissions: { exec: [sh], write: [], read: [], env: [] }
context: { code: null, limit: 0 }
states:
  checking:
    entry:
      - assign: { limit: 1 }
      - map: [0, 3]
        id: check
        item: code
        tolerated_failures: limit
        exec: [sh, -c, 'exit $0', "${code}"]
    on:
      done.map.check: done
      error.map.check: done
  done: { type: final }
"#;
    let directory = temporary_directory("map-tolerance", "check");
    std::fs::write(directory.join("protocol.yaml"), protocol).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["check", "protocol.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("(no warnings)"),
        "{stdout}{stderr}"
    );
}
