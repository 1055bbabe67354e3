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

/// `read` no longer keeps a protocol from naming any `.yaml` on the machine as its child or
/// library, so loading one that is not a protocol (a `secrets.yaml`) must not show its lines:
/// the path is the protocol's choice, and a protocol is not trusted. It is refused at the
/// parent's line, saying what it is not, with none of its text.
#[test]
fn a_yaml_file_that_is_no_protocol_is_refused_without_a_line_of_it() {
    let directory = temporary_directory("protocol-files", "not-a-protocol");
    std::fs::create_dir_all(directory.join("elsewhere")).unwrap();
    std::fs::create_dir_all(directory.join("project")).unwrap();
    std::fs::write(
        directory.join("elsewhere/secrets.yaml"),
        "password: hunter2-very-secret\napi_token: tok-ABCDEF\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("elsewhere/broken.yaml"),
        "token: tok-GHIJ [\n",
    )
    .unwrap();
    let parent = |child: &str| {
        format!(
            "id: parent\npermissions: {{ exec: [], read: [], write: [], env: [] }}\nstates:\n  \
             calling:\n    invoke: [{{ id: kid, protocol: {child} }}]\n    on: {{ \
             done.invoke.kid: done }}\n  done: {{ type: final }}\n"
        )
    };
    std::fs::write(
        directory.join("project/child.yaml"),
        parent("../elsewhere/secrets.yaml"),
    )
    .unwrap();
    std::fs::write(
        directory.join("project/broken.yaml"),
        parent("../elsewhere/broken.yaml"),
    )
    .unwrap();
    std::fs::write(
        directory.join("project/library.yaml"),
        "id: importer\nimports: [../elsewhere/secrets.yaml]\npermissions: { exec: [], read: [], \
         write: [], env: [] }\nstates:\n  done: { type: final }\n",
    )
    .unwrap();
    let project = directory.join("project");
    for (arguments, expected) in [
        (
            &["validate", "child.yaml"][..],
            "`../elsewhere/secrets.yaml` is not a protocol",
        ),
        (
            &["child.yaml", "--state-dir", "state"][..],
            "`../elsewhere/secrets.yaml` is not a protocol",
        ),
        (
            &["validate", "broken.yaml"][..],
            "`../elsewhere/broken.yaml` is not a protocol",
        ),
        (
            &["validate", "library.yaml"][..],
            "the import `../elsewhere/secrets.yaml` is not a library",
        ),
    ] {
        let (code, stdout, stderr) = run_binary(&project, arguments);
        let output = format!("{stdout}{stderr}");
        assert_eq!(code, 65, "{arguments:?}:\n{output}");
        assert!(output.contains(expected), "{arguments:?}:\n{output}");
        for secret in ["hunter2", "tok-ABCDEF", "tok-GHIJ"] {
            assert!(
                !output.contains(secret),
                "{arguments:?} shows a line of a file that is no protocol:\n{output}"
            );
        }
    }
}
