//! On SQLite, processes racing for one run on one state directory: whichever wins drives it alone, the others exit 75 naming it, and the run's steps never interleave, through a stop and a `kill -9`.

use std::process::{Child, Command, Stdio};

use crate::support;

/// Counts to 40 on a 20 ms timer: each step adds one to `count`, so the run's last state says
/// how many steps were taken, and two drivers at once would show in the journal.
const TICKER: &str = r#"
id: ticker
context: { count: 0 }
states:
  ticking:
    after:
      - delay: 20ms
        target: ticking
        actions: [{ assign: { count: "count + 1" } }]
    always:
      - { guard: "count >= 40", target: done }
  done: { type: final }
"#;

fn resume(directory: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["resume", "r1", "--state-dir", "state"])
        .current_dir(directory)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts three `resume`s of `r1` at once: one drives it; the others exit 75 naming the
/// winner. The winner, still running.
fn race(directory: &std::path::Path) -> Child {
    let mut racers: Vec<Child> = (0..3).map(|_| resume(directory)).collect();
    let mut refused = 0;
    // The losers end at once; the winner keeps ticking.
    support::eventually("two of three resumes refused", || {
        racers.retain_mut(|racer| match racer.try_wait().unwrap() {
            None => true,
            Some(status) => {
                let stderr = std::io::read_to_string(racer.stderr.take().unwrap()).unwrap();
                assert_eq!(status.code(), Some(75), "{stderr}");
                assert!(
                    stderr.contains("is being run by another process"),
                    "{stderr}"
                );
                refused += 1;
                false
            }
        });
        (refused == 2).then_some(())
    });
    assert_eq!(racers.len(), 1);
    racers.remove(0)
}

/// The last step of `r1` committed so far (0 before it exists).
fn last_step(directory: &std::path::Path) -> u64 {
    let store = protocol_run::store::SqliteStore::open(directory.join("state")).unwrap();
    protocol_run::store::Store::run_summary(&store, "r1")
        .unwrap()
        .and_then(|run| run.last_sequence)
        .unwrap_or(0)
}

#[test]
fn racing_processes_never_interleave_the_steps_of_one_run() {
    let directory = support::temporary_directory("sqlite-claims", "racing");
    std::fs::write(directory.join("ticker.yaml"), TICKER).unwrap();
    // Started, then stopped by SIGTERM a few steps in: a run to resume.
    let mut first = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "run",
            "ticker.yaml",
            "--run-id",
            "r1",
            "--state-dir",
            "state",
        ])
        .current_dir(&directory)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::eventually("a few steps", || (last_step(&directory) >= 3).then_some(()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(75));
    // Three resumes race; the winner is killed with SIGKILL a few steps on; three race again.
    let mut winner = race(&directory);
    let reached = last_step(&directory);
    support::eventually("a few more steps", || {
        (last_step(&directory) >= reached + 3).then_some(())
    });
    winner.kill().unwrap();
    winner.wait().unwrap();
    let mut winner = race(&directory);
    assert_eq!(winner.wait().unwrap().code(), Some(0));
    // One step after another, each counted once: the count the run ended with is its number
    // of timer steps, whatever process took each.
    let store = protocol_run::store::SqliteStore::open(directory.join("state")).unwrap();
    let journal = protocol_run::store::Store::journal(&store, "r1").unwrap();
    let numbers: Vec<u64> = journal.iter().map(|entry| entry.sequence).collect();
    let expected: Vec<u64> = (0..numbers.len() as u64).collect();
    assert_eq!(numbers, expected);
    let ticks = journal
        .iter()
        .filter(|entry| {
            entry
                .event
                .as_ref()
                .is_some_and(|event| event.name.starts_with("after."))
        })
        .count();
    let finished = protocol_run::store::Store::run(&store, "r1")
        .unwrap()
        .unwrap();
    assert_eq!(
        finished.summary.finish.unwrap().final_state.as_deref(),
        Some("done")
    );
    assert_eq!(ticks, 40);
    let _ = std::fs::remove_dir_all(&directory);
}
