//! `import scxml` of a parent and its child document, written with `--out` and run as actors.

use std::path::Path;
use std::process::{Command, Output, Stdio};

const PARENT: &str = r##"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="parent">
  <datamodel>
    <data id="question" expr="41"/>
    <data id="answer" expr="0"/>
    <data id="from" expr="''"/>
  </datamodel>
  <state id="talking">
    <invoke id="kid" type="scxml" src="child.scxml">
      <param name="step" expr="1"/>
    </invoke>
    <transition event="ready">
      <send event="ping" target="#_kid"><param name="n" expr="question"/></send>
    </transition>
    <transition event="pong" target="done">
      <assign location="answer" expr="_event.data.n"/>
      <assign location="from" expr="_event.invokeid"/>
    </transition>
  </state>
  <final id="done">
    <donedata><param name="answer" expr="answer"/><param name="from" expr="from"/></donedata>
  </final>
</scxml>
"##;

const CHILD: &str = r##"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="child">
  <datamodel><data id="step" expr="0"/></datamodel>
  <state id="waiting">
    <onentry><send event="ready" target="#_parent"/></onentry>
    <transition event="ping" target="answered">
      <send event="pong" target="#_parent"><param name="n" expr="_event.data.n + step"/></send>
    </transition>
  </state>
  <final id="answered"/>
</scxml>
"##;

fn temporary_directory(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("scxml-import", name)
}

fn protocol_run(directory: &Path, arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .current_dir(directory)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_imported_child_answers_its_parent() {
    let directory = temporary_directory("pair");
    std::fs::write(directory.join("parent.scxml"), PARENT).unwrap();
    std::fs::write(directory.join("child.scxml"), CHILD).unwrap();

    // Children need files of their own: without --out the import says so.
    let printed = protocol_run(&directory, &["import", "scxml", "parent.scxml"]);
    assert_eq!(printed.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&printed.stderr).contains("--out DIR"));

    let imported = protocol_run(
        &directory,
        &["import", "scxml", "parent.scxml", "--out", "out"],
    );
    let stdout = String::from_utf8_lossy(&imported.stdout);
    assert_eq!(
        imported.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    assert!(
        stdout.contains("out/parent.yaml") && stdout.contains("out/parent.kid.yaml"),
        "{stdout}"
    );

    let state = directory.join("state");
    let run = protocol_run(
        &directory.join("out"),
        &["parent.yaml", "--state-dir", state.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The child took `ping` (41) from its parent, added the step its parent gave it, and
    // answered through `#_parent`: the answer names the child as its sender.
    assert!(
        stdout.contains(r#""output":{"answer":42,"from":"kid"}"#),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}
