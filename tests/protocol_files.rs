//! A protocol's own files (its children and libraries) are the operator's to load: found from the parent's file whatever `read` grants and whatever the working directory, in `run`, `validate` and `test` alike (a file that is no protocol is still refused unread: tests/capabilities.rs).

use crate::support::{run_binary, temporary_directory};

/// A parent that grants no reads at all, invoking `sub/child.yaml`, which imports a library.
fn write_family(directory: &std::path::Path) {
    std::fs::create_dir_all(directory.join("family/sub")).unwrap();
    std::fs::write(
        directory.join("family/parent.yaml"),
        r#"
id: parent
permissions: { exec: [], read: [], write: [], env: [] }
states:
  calling:
    invoke: [{ id: kid, protocol: sub/child.yaml }]
    on:
      done.invoke.kid: succeeded
  succeeded: { type: final, output: { from: "${event.data.said}" } }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("family/sub/child.yaml"),
        r#"
id: child
permissions: { exec: [], read: ["data/**"], write: [], env: [] }
imports: [greeting.library.yaml]
context: { said: "" }
states:
  speaking:
    entry: [{ use: greet }]
    always: done
  done: { type: final, output: { said: "${said}" } }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("family/sub/greeting.library.yaml"),
        "blocks:\n  greet:\n    do:\n      - assign: { said: \"'hello'\" }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("family/parent.scenario.yaml"),
        "protocol: parent.yaml\nscenarios:\n  - name: the child answers\n    steps:\n      - expect: { finished: { exit_code: 0, state: succeeded, output: { from: hello } } }\n",
    )
    .unwrap();
}

#[test]
fn children_and_libraries_load_whatever_read_grants_from_any_directory() {
    let directory = temporary_directory("protocol-files", "family");
    write_family(&directory);
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "family/parent.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) =
        run_binary(&directory, &["family/parent.yaml", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(r#""output":{"from":"hello"}"#), "{stdout}");
    // `test` runs the scenario in a scratch directory of its own.
    let (code, stdout, stderr) = run_binary(&directory, &["test", "family/parent.scenario.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = run_binary(
        &directory.join("family/sub"),
        &["test", "../parent.scenario.yaml"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
}
