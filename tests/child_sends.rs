//! `protocol-run check` on `send ... to:`: judged by the child's protocol, left to the parent for `to: parent`, and found too early in the invoking state's entry.

use crate::support::{assert_diagnostic, run_binary};

const CHILD: &str = "\
id: child
permissions: { exec: [], write: [], read: [], env: [] }
states:
  waiting:
    entry: [{ send: ready, to: parent }]
    on:
      go: done
  done: { type: final }
";

const PARENT: &str = "\
id: parent
permissions: { exec: [], write: [], read: [\"**\"], env: [] }
states:
  running:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      ready:
        actions: [{ send: go, to: kid }]
      done.invoke.kid: finished
  finished: { type: final }
";

fn project(name: &str, child: &str, parent: &str) -> crate::support::TemporaryDirectory {
    let directory = crate::support::temporary_directory("child-sends", name);
    std::fs::write(directory.join("child.yaml"), child).unwrap();
    std::fs::write(directory.join("parent.yaml"), parent).unwrap();
    directory
}

/// The child handles what its parent sends it, and the parent what the child sends it: no
/// warning on either side.
#[test]
fn a_send_the_child_handles_is_no_warning() {
    let directory = project("handled", CHILD, PARENT);
    for file in ["parent.yaml", "child.yaml"] {
        let (code, stdout, stderr) = run_binary(&directory, &["check", file, "--deny-warnings"]);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert!(stdout.contains("no warnings"), "{file}: {stdout}");
    }
}

#[test]
fn a_send_the_child_does_not_take_is_a_warning_naming_the_child() {
    let misspelled = PARENT.replace("send: go, to: kid", "send: og, to: kid");
    let directory = project("unhandled", CHILD, &misspelled);
    let (code, _, stderr) = run_binary(&directory, &["check", "parent.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert_diagnostic(
        &stderr,
        &[
            "warning: event `og` is sent to `kid`, but no transition of its protocol `child`",
            "parent.yaml:8:27",
            "help: did you mean `go`?",
        ],
    );

    // A child that declares its events refuses one it does not declare, handled or not.
    let declaring = CHILD
        .replace("states:\n", "events: { go: {} }\nstates:\n")
        .replace("      go: done", "      \"*\": done");
    let directory = project("undeclared", &declaring, &misspelled);
    let (_, _, stderr) = run_binary(&directory, &["check", "parent.yaml"]);
    assert_diagnostic(
        &stderr,
        &[
            "warning: event `og` is sent to `kid`, whose protocol `child`",
            "does not declare it under `events:`: the child refuses it, and this protocol gets \
             `error.communication`",
            "parent.yaml:8:27",
            "help: did you mean `go`?",
        ],
    );
}

/// An engine event is never delivered between parent and child, whatever the child handles.
#[test]
fn an_engine_event_sent_to_a_child_is_a_warning() {
    let forged = PARENT.replace("send: go, to: kid", "send: done.invoke.other, to: kid");
    let directory = project("engine-event", CHILD, &forged);
    let (_, _, stderr) = run_binary(&directory, &["check", "parent.yaml"]);
    assert_diagnostic(
        &stderr,
        &[
            "warning: event `done.invoke.other` is sent to `kid`, but an engine event is never \
             delivered between parent and child: this protocol gets `error.communication` instead",
            "parent.yaml:8:27",
            "help: send an event of your own; the child takes `go`",
        ],
    );
}

/// A state's invokes start after its entry actions: a send there to its own child finds no
/// child, as the run shows.
#[test]
fn a_send_in_the_entry_of_the_invoking_state_comes_before_the_child_starts() {
    let early = PARENT.replace(
        "    invoke: [{ id: kid, protocol: child.yaml }]\n",
        "    invoke: [{ id: kid, protocol: child.yaml }]\n    entry: [{ send: go, to: kid }]\n",
    );
    let directory = project("entry", CHILD, &early);
    let (_, _, stderr) = run_binary(&directory, &["check", "parent.yaml"]);
    assert_diagnostic(
        &stderr,
        &[
            "warning: `go` is sent to `kid` in the entry of state `running`, before `kid` \
             starts: a state's invokes start after its entry actions, so the send raises \
             `error.communication`",
            "parent.yaml:6:29",
            "help: send it once `kid` runs",
        ],
    );
    let state = directory.join("state");
    let (_, _, stderr) = run_binary(
        &directory,
        &["run", "parent.yaml", "--state-dir", state.to_str().unwrap()],
    );
    assert!(
        stderr.contains("error.communication was not handled")
            && stderr.contains("the child `kid` is not running"),
        "{stderr}"
    );
}
