//! `map` across `kill -9` and `--resume`: finished items are not run again, the item that was running follows its `on_interrupt`, the items not started yet start.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{run_binary, temporary_directory};

/// Items 0 and 1 end at once; item 2 waits for the file `go`; item 3 waits for a free slot.
/// Each appends its number to `ran` when it starts.
fn protocol(on_interrupt: &str) -> String {
    format!(
        r#"
id: resumed-map
context: {{ number: null }}
states:
  checking:
    entry:
      - map: [0, 1, 2, 3]
        id: check
        item: number
        max_concurrency: 3
        exec: [sh, -c, 'echo $0 >> ran; if [ $0 = 2 ]; then while [ ! -e go ]; do sleep 0.05; done; fi; printf "r$0"', "${{number}}"]
        {on_interrupt}
    on:
      done.map.check:
        target: done
        actions: [{{ log: "results ${{event.data.results.map(r, r.stdout)}}" }}]
      error.map.check:
        target: failed
        actions: [{{ log: "statuses ${{event.data.outcomes.map(o, o.status)}} interrupted ${{event.data.outcomes[2].data.interrupted}}" }}]
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 1 }}
"#
    )
}

/// The ids of the effects the run in `directory` has running at its last committed step.
fn running_effects(directory: &Path) -> Vec<String> {
    let state = directory.join("state");
    let (code, stdout, _) = run_binary(
        directory,
        &["status", "--json", "--state-dir", state.to_str().unwrap()],
    );
    if code != 0 {
        return Vec::new();
    }
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    status["state"]["running_effects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|effect| effect.as_str().map(String::from))
        .collect()
}

/// Starts the map, kills the engine once items 0, 1 and 3 ended and item 2 runs (committed),
/// then lets item 2 finish and resumes; returns (exit code, stderr, the numbers in `ran`).
fn kill_and_resume(name: &str, on_interrupt: &str) -> (i32, String, Vec<String>) {
    let directory = temporary_directory("map-durability", name);
    std::fs::write(directory.join("protocol.yaml"), protocol(on_interrupt)).unwrap();
    let state = directory.join("state");
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["protocol.yaml", "--state-dir", state.to_str().unwrap()])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    while running_effects(&directory) != ["check[2]"] {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "the map never got to its waiting item: {:?}",
            running_effects(&directory)
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL: no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(directory.join("go"), "").unwrap();
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "protocol.yaml",
            "--resume",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    let mut ran: Vec<String> = std::fs::read_to_string(directory.join("ran"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    ran.sort();
    (code, stderr, ran)
}

#[test]
fn a_resumed_map_reruns_only_the_interrupted_item_when_it_may_be_retried() {
    let (code, stderr, ran) = kill_and_resume("retry", "on_interrupt: retry");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(r#"results ["r0","r1","r2","r3"]"#),
        "{stderr}"
    );
    // Items 0, 1 and 3 ran once; item 2 twice (interrupted, then retried).
    assert_eq!(ran, ["0", "1", "2", "2", "3"]);
}

#[test]
fn a_resumed_map_fails_the_interrupted_process_by_default_and_keeps_the_rest() {
    let (code, stderr, ran) = kill_and_resume("fail", "");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(r#"statuses ["ok","ok","error","ok"] interrupted true"#),
        "{stderr}"
    );
    assert_eq!(ran, ["0", "1", "2", "3"]);
}
