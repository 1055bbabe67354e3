//! What a run holds in pending delayed sends, deferred and queued events is bounded: their number by --max-pending-sends, their data by 16 × --max-value-bytes, in `run` and `serve` alike.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::{run_binary, temporary_directory};

fn scratch(name: &str) -> crate::support::TemporaryDirectory {
    temporary_directory("pending-sends", name)
}

/// Doubles `s` to `bytes`, then sends `later` an hour away `count` times in an eventless loop,
/// each carrying `s`; the refusals are logged once the run waits.
fn spammer(bytes: usize, count: usize) -> String {
    format!(
        r#"id: spam
permissions: {{ exec: [], read: [], write: [], env: [] }}
context: {{ s: "x", i: 0 }}
states:
  grow:
    always:
      - guard: size(s) < {bytes}
        target: grow
        actions: [{{ assign: {{ s: "s + s" }} }}]
      - target: spam
  spam:
    always:
      - guard: i < {count}
        target: spam
        actions:
          - assign: {{ i: "i + 1" }}
          - send: later
            delay: 1h
            data: {{ blob: "${{s}}" }}
      - target: wait
    # A refused send fails its action: the error is handled here, before the next selection.
    on:
      error.execution: {{ target: done, actions: [{{ log: "REFUSED ${{event.data.message}}" }}] }}
  wait:
    on:
      error.execution: {{ target: done, actions: [{{ log: "REFUSED ${{event.data.message}}" }}] }}
    after: [{{ delay: 200ms, target: done }}]
  done: {{ type: final }}
"#
    )
}

/// 300 sends of 512 KiB an hour away held 648 MB and wrote a 151 MB state directory; now the
/// 33rd is refused (16 MiB held), and the run stays small.
#[test]
fn the_data_of_pending_sends_is_bounded() {
    let directory = scratch("bytes");
    std::fs::write(directory.join("spam.yaml"), spammer(1 << 19, 300)).unwrap();
    let output = Command::new("/usr/bin/time")
        .args(["-f", "peak %M KB"])
        .arg(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["run", "spam.yaml", "--state-dir", "state"])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("REFUSED")
            && stderr.contains("pending delayed sends, deferred and queued events")
            && stderr.contains("16777216")
            && stderr.contains("--max-value-bytes"),
        "{stderr}"
    );
    let peak: u64 = stderr
        .split("peak ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no peak: {stderr}"));
    eprintln!("300 sends of 512 KiB: peak {peak} KB");
    assert!(peak < 200_000, "peak {peak} KB");
}

/// The number of pending delayed sends is bounded by --max-pending-sends, in `run` and in a
/// `serve` instance.
#[test]
fn the_number_of_pending_sends_is_bounded_in_run_and_serve() {
    let directory = scratch("count");
    std::fs::write(directory.join("spam.yaml"), spammer(1, 20)).unwrap();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "run",
            "spam.yaml",
            "--state-dir",
            "state",
            "--max-pending-sends",
            "5",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("REFUSED this run already has 5 delayed sends pending, the limit; raise it with --max-pending-sends"),
        "{stderr}"
    );
    let (code, stdout, stderr) =
        run_binary(&directory, &["run", "spam.yaml", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("REFUSED"), "{stderr}");

    let mut host = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "serve",
            "spam.yaml",
            "--store",
            "memory",
            "--max-pending-sends",
            "5",
        ])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(b"{\"instance\": \"one\"}\n")
        .unwrap();
    let output = host.wait_with_output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        all.contains("5 delayed sends pending") && all.contains("--max-pending-sends"),
        "{all}"
    );
}
