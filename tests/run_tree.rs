//! The whole run tree is bounded: `--max-children` counts the live child protocols of a run and of its children together; one more fails with `error.invoke.ID` naming the limit, and the run goes on.

use crate::support::{run_binary, temporary_directory};

/// A child that waits a moment, then ends.
const NAPPER: &str = r#"
id: napper
states:
  napping:
    after: [{ delay: 300ms, target: done }]
  done: { type: final }
"#;

/// A kid that maps three nappers; its map's outcome is its own.
const KID: &str = r#"
id: kid
context: { name: null }
states:
  mapping:
    entry:
      - map: [a, b, c]
        id: naps
        item: name
        invoke: { protocol: napper.yaml }
    on:
      done.map.naps: all_done
      error.map.naps: some_failed
  all_done: { type: final }
  some_failed: { type: final, exit_code: 3, output: { error: "${event.data}" } }
"#;

/// The parent invokes the kid, and reports how it ended.
const PARENT: &str = r#"
id: parent
states:
  waiting:
    invoke: [{ id: kid, protocol: kid.yaml }]
    on:
      done.invoke.kid: done
      error.invoke.kid:
        target: refused
        actions: [{ log: "kid ended: ${event.data}" }]
  done: { type: final }
  refused: { type: final, exit_code: 4 }
"#;

fn tree(name: &str) -> std::path::PathBuf {
    let directory = temporary_directory("run-tree", name);
    for (file, text) in [
        ("napper.yaml", NAPPER),
        ("kid.yaml", KID),
        ("parent.yaml", PARENT),
    ] {
        std::fs::write(directory.join(file), text).unwrap();
    }
    directory
}

#[test]
fn the_children_of_the_whole_tree_count_against_max_children() {
    // Room for the kid and its three nappers: the tree ends well.
    let directory = tree("room");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["parent.yaml", "--state-dir", "state", "--max-children", "4"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");

    // One place short: the third napper is refused naming the limit, the kid's map fails,
    // and so the kid; the process ends as the protocol says.
    let directory = tree("short");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["parent.yaml", "--state-dir", "state", "--max-children", "3"],
    );
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stderr.contains("its run tree has 3 child protocols alive, the limit (--max-children)"),
        "{stderr}"
    );
    assert!(stderr.contains("max_children"), "{stderr}");
}

#[test]
fn a_refused_invoke_is_an_error_invoke_event_and_the_run_goes_on() {
    let directory = tree("invoke");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["parent.yaml", "--state-dir", "state", "--max-children", "0"],
    );
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "kid ended: {\"id\":\"kid\",\"message\":\"the child protocol `kid` was not started: \
             its run tree has 0 child protocols alive, the limit (--max-children)"
        ),
        "{stderr}"
    );
}
