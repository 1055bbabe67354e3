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

fn tree(name: &str) -> crate::support::TemporaryDirectory {
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

/// A leaf that doubles a string to 512 KiB, then holds it a moment.
const BIG_LEAF: &str = r#"
id: leaf
context: { s: "x" }
states:
  growing:
    always:
      - target: growing
        guard: size(s) < 524288
        actions: [{ assign: { s: "s + s" } }]
      - target: holding
  holding:
    after: [{ delay: 1s, target: done }]
  done: { type: final }
"#;

/// A map over 32 items, each invoking `CHILD`; how it ended is logged.
const FAN: &str = r#"
id: ID
context: { n: 0 }
states:
  fanning:
    entry:
      - map: "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]"
        id: items
        item: n
        invoke: { protocol: CHILD }
    on:
      done.map.items: done
      error.map.items:
        target: failed
        actions: [{ log: "ID: ${event.data}" }]
  done: { type: final }
  failed: { type: final, exit_code: 3 }
"#;

/// Two levels of 32 children over leaves of 512 KiB: 1,024 leaves wanted.
fn big_tree(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("run-tree", name);
    std::fs::write(directory.join("leaf.yaml"), BIG_LEAF).unwrap();
    let fan = |id: &str, child: &str| FAN.replace("ID", id).replace("CHILD", child);
    std::fs::write(directory.join("mid.yaml"), fan("mid", "leaf.yaml")).unwrap();
    std::fs::write(directory.join("top.yaml"), fan("top", "mid.yaml")).unwrap();
    directory
}

/// Runs the binary in `directory` and waits for it with `wait4`: its exit code, its stderr, and
/// its own peak resident memory in KiB.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its resource use"
)]
fn run_measured(directory: &std::path::Path, arguments: &[&str]) -> (Option<i32>, String, i64) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .current_dir(directory)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for this test's own child, filling the two values it is given.
    let waited = unsafe { nix::libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32, "wait4 failed");
    let code = nix::libc::WIFEXITED(status).then(|| nix::libc::WEXITSTATUS(status));
    (code, reader.join().unwrap(), usage.ru_maxrss)
}

#[test]
fn a_tree_of_a_thousand_large_children_ends_in_the_named_limit_within_bounded_memory() {
    let directory = big_tree("large");
    let (code, stderr, peak) = run_measured(&directory, &["top.yaml", "--state-dir", "state"]);
    // The process ends as the protocol says, the limit named in the map's error.
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("the limit (--max-children)"), "{stderr}");
    // Its own peak: well under 512 MB (about 1.1 GB before the tree was bounded).
    assert!(peak < 512 * 1024, "the engine peaked at {peak} KiB");
}

#[test]
fn a_serve_host_keeps_serving_its_other_instances_beside_a_tree_past_its_limit() {
    let directory = big_tree("serve");
    let output = crate::support::run_binary_with_input(
        &directory,
        &["serve", "top.yaml", "--state-dir", "state"],
        b"{\"instance\": \"big\"}\n{\"instance\": \"other\"}\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    // Each instance is a tree of its own, each bounded; both end, and the host with them.
    for instance in ["big", "other"] {
        assert!(
            stdout.lines().any(
                |line| line.contains(&format!("\"instance\":\"{instance}\""))
                    && line.contains("\"finished\"")
            ),
            "{instance}: {stdout}"
        );
    }
}

#[test]
fn a_tree_past_its_data_bound_stops_the_child_that_grew_it_naming_the_limit() {
    let directory = big_tree("bytes");
    // Room for every child, but not for a second 512 KiB leaf.
    let (code, stderr, peak) = run_measured(
        &directory,
        &[
            "top.yaml",
            "--state-dir",
            "state",
            "--max-children",
            "2000",
            "--max-tree-bytes",
            "800000",
        ],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("more than its limit of 800000 bytes (--max-tree-bytes)"),
        "{stderr}"
    );
    assert!(peak < 512 * 1024, "the engine peaked at {peak} KiB");
}
