//! No effect process outlives its engine: `kill -9` of `run`, `serve` or `mcp` during a 30-second effect stops the effect's process, and a grandchild that left its group with `setsid`, well before their own 30 seconds (the engine's watchdog).

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::mcp_raw::RawMcp;
use crate::support::temporary_directory;

/// A 30-second effect whose process writes its pid to `pids/direct`, after starting a
/// grandchild in a session of its own that writes its pid to `pids/detached`; both then sleep.
const SLEEPER: &str = r#"
id: sleeper
states:
  working:
    entry:
      - exec:
          - sh
          - -c
          - 'setsid sh -c "echo \$\$ > pids/detached; exec sleep 30" & echo $$ > pids/direct; exec sleep 30'
        id: nap
        timeout: 60s
    on:
      done.exec.nap: done
      error.exec.nap: done
  done: { type: final }
"#;

fn sleeper(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("engine-death", name);
    std::fs::write(directory.join("sleeper.yaml"), SLEEPER).unwrap();
    std::fs::create_dir_all(directory.join("pids")).unwrap();
    directory
}

/// The pids the effect wrote, once both are there.
fn effect_pids(directory: &Path) -> [i32; 2] {
    crate::support::eventually("the effect writing its pids", || {
        let read = |name: &str| {
            std::fs::read_to_string(directory.join("pids").join(name))
                .ok()
                .and_then(|text| text.trim().parse::<i32>().ok())
        };
        Some([read("direct")?, read("detached")?])
    })
}

/// Whether `pid` still runs: it exists and is no zombie (a container's init may not reap).
pub(crate) fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // `PID (COMMAND) STATE ...`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
    }
}

/// Waits until none of `pids` runs; fails after 15 s, half of the effect's own 30 s.
fn assert_stopped(pids: [i32; 2], engine: &str) {
    let started = Instant::now();
    while pids.iter().any(|pid| running(*pid)) {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "after `{engine}` was killed, its effect's processes still run: {:?}",
            pids.iter().filter(|pid| running(**pid)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_9(mut engine: Child) {
    engine.kill().unwrap();
    engine.wait().unwrap();
}

#[test]
fn killing_run_stops_its_effect_and_the_effects_detached_grandchild() {
    let directory = sleeper("run");
    let engine = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["sleeper.yaml", "--state-dir", "state"])
        .current_dir(&directory)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = effect_pids(&directory);
    assert!(pids.iter().all(|pid| running(*pid)));
    kill_9(engine);
    assert_stopped(pids, "run");
}

#[test]
fn killing_serve_stops_its_instances_effects() {
    let directory = sleeper("serve");
    let mut engine = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["serve", "sleeper.yaml", "--state-dir", "state"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = engine.stdin.take().unwrap();
    writeln!(input, "{{\"instance\": \"a\"}}").unwrap();
    let pids = effect_pids(&directory);
    kill_9(engine);
    drop(input);
    assert_stopped(pids, "serve");
}

#[test]
fn killing_mcp_stops_its_runs_effects() {
    let directory = sleeper("mcp");
    let mut server = RawMcp::start(&directory, &["sleeper.yaml"], json!({}));
    server.send(1, "tools/call", json!({"name": "sleeper", "arguments": {}}));
    let pids = effect_pids(&directory);
    server.kill();
    assert_stopped(pids, "mcp");
}

/// Two effects in a row; the first waits for `go` to exist.
const TWO_EFFECTS: &str = r#"
id: two
states:
  first:
    entry:
      - exec: [sh, -c, 'echo $$ > pids/direct; while [ ! -e go ]; do sleep 0.01; done']
        id: wait
    on: { done.exec.wait: second }
  second:
    entry: [{ exec: ["true"], id: after }]
    on: { done.exec.after: done }
  done: { type: final }
"#;

#[test]
fn an_engine_whose_watchdog_died_says_so_and_goes_on() {
    let directory = temporary_directory("engine-death", "watchdog-gone");
    std::fs::write(directory.join("two.yaml"), TWO_EFFECTS).unwrap();
    std::fs::create_dir_all(directory.join("pids")).unwrap();
    let engine = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["two.yaml", "--state-dir", "state"])
        .current_dir(&directory)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::eventually("the effect starting", || {
        directory.join("pids/direct").exists().then_some(())
    });
    // The engine's watchdog: `protocol-run __effect-watchdog PID-...`.
    let wanted = format!("__effect-watchdog\0{}-", engine.id());
    let watchdog: i32 = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .find(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&wanted))
        })
        .and_then(|entry| entry.file_name().to_string_lossy().parse().ok())
        .expect("the engine's watchdog runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watchdog),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while running(watchdog) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::write(directory.join("go"), "").unwrap();
    let output = engine.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // No SIGPIPE ended it: the run finished, and said its watchdog was gone.
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: the effect watchdog ended"),
        "{stderr}"
    );
}
