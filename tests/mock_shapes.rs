//! A mocked effect's outcome has the keys the real effect's has: `bytes` after a mocked write,
//! `entries` after a mocked listing, `matches` after a mocked search.

use crate::support::{run_binary_with_state, temporary_directory};

/// One protocol with one effect of each kind, each logging the keys its real outcome carries.
const EVERY_KIND: &str = r#"
id: shapes
states:
  working:
    entry:
      - write: out/state.json
        content: "12345"
        id: write_state
      - write: out/ledger.jsonl
        append: "abc"
        id: ledger
      - write: out/workflow.json
        json_append: { array: /items, item: { level: 1 } }
        id: workflow
      - backup: out/state.json
        to: out/state.json.bak
        id: save
      - read_file: notes.txt
        id: read
      - list_dir: out
        id: list
      - grep_search: "x"
        path: notes.txt
        id: grep
      - exec: [echo, real]
        id: run
    on:
      done.exec.write_state: { actions: [{ log: "write bytes=${event.data.bytes} path=${event.data.path}" }] }
      done.exec.ledger: { actions: [{ log: "append bytes=${event.data.bytes}" }] }
      done.exec.workflow: { actions: [{ log: "json_append bytes=${event.data.bytes}" }] }
      done.exec.save: { actions: [{ log: "backup bytes=${event.data.bytes} backup=${event.data.backup}" }] }
      done.exec.read: { actions: [{ log: "read bytes=${event.data.bytes} stdout=${event.data.stdout}" }] }
      done.exec.list: { actions: [{ log: "list entries=${event.data.entries}" }] }
      done.exec.grep: { actions: [{ log: "grep matches=${event.data.matches} truncated=${event.data.truncated}" }] }
      done.exec.run: { actions: [{ log: "exec stdout=${event.data.stdout} exit=${event.data.exit_code}" }] }
      error.exec: { target: failed, actions: [{ log: "failed ${event.data.id}: ${event.data.message}", level: error }] }
    after: [{ delay: 1s, target: done }]
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#;

fn run_mocked(name: &str, mocks: &[&str]) -> (i32, String, crate::support::TemporaryDirectory) {
    let directory = temporary_directory("mock-shapes", name);
    let protocol = directory.join("shapes.yaml");
    std::fs::write(&protocol, EVERY_KIND).unwrap();
    let mut arguments = vec![
        protocol.to_str().unwrap().to_string(),
        "--virtual-time".into(),
    ];
    for mock in mocks {
        arguments.extend(["--mock".to_string(), mock.to_string()]);
    }
    let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let (code, output) = run_binary_with_state(&directory, &arguments);
    (code, output, directory)
}

#[test]
fn a_bare_ok_carries_the_keys_of_each_kind_with_plausible_values() {
    let (code, output, directory) = run_mocked(
        "bare",
        &[
            "write_state=ok",
            "ledger=ok",
            "workflow=ok",
            "save=ok",
            "read=ok",
            "list=ok",
            "grep=ok",
            "run=ok",
        ],
    );
    assert_eq!(code, 0, "{output}");
    // The path as the real effect reports it: as the protocol wrote it.
    for expected in [
        "write bytes=5 path=out/state.json".to_string(),
        // The line and the newline the append adds.
        "append bytes=4".to_string(),
        r#"json_append bytes=11"#.to_string(),
        // Nothing to copy where the mocked write wrote nothing.
        "backup bytes=0 backup=out/state.json.bak".to_string(),
        "read bytes=0 stdout=".to_string(),
        "list entries=[]".to_string(),
        "grep matches=1 truncated=false".to_string(),
        "exec stdout= exit=0".to_string(),
    ] {
        assert!(output.contains(&expected), "`{expected}` in:\n{output}");
    }
    assert!(!directory.join("out").exists(), "a mocked write wrote");
}

#[test]
fn ok_text_is_the_main_output_of_each_kind() {
    let (code, output, _) = run_mocked(
        "text",
        &[
            "write_state=ok",
            "ledger=ok",
            "workflow=ok",
            "save=ok",
            "read=ok:hello",
            "list=ok:a.txt\nsub/\n",
            "grep=ok:notes.txt:1:x\nnotes.txt:4:xx\n",
            "run=ok:fine",
        ],
    );
    assert_eq!(code, 0, "{output}");
    for expected in [
        "read bytes=5 stdout=hello",
        r#"list entries=["a.txt","sub/"]"#,
        "grep matches=2 truncated=false",
        "exec stdout=fine exit=0",
    ] {
        assert!(output.contains(expected), "`{expected}` in:\n{output}");
    }
}

#[test]
fn a_mocked_failure_still_carries_the_keys_of_its_kind() {
    let yaml = r#"
id: failing
states:
  working:
    entry:
      - write: out/state.json
        content: "12345"
        id: write_state
    on:
      error.exec.write_state: { target: failed, actions: [{ log: "bytes=${event.data.bytes} path=${event.data.path}" }] }
  failed: { type: final, exit_code: 1 }
"#;
    let directory = temporary_directory("mock-shapes", "failure");
    let protocol = directory.join("failing.yaml");
    std::fs::write(&protocol, yaml).unwrap();
    let (code, output) = run_binary_with_state(
        &directory,
        &[
            protocol.to_str().unwrap(),
            "--mock",
            "write_state=error:disk full",
        ],
    );
    assert_eq!(code, 1, "{output}");
    let expected = "bytes=0 path=out/state.json";
    assert!(output.contains(expected), "`{expected}` in:\n{output}");
}
