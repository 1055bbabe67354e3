//! The expression functions that look at files: a link swapped while they look never shows a file outside `read`, and `command_exists` obeys `read` for a path.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::{run_binary_with_state, temporary_directory};

/// The size of the file outside `read`: seen once, the race was won.
const OUTSIDE_SIZE: usize = 7777;

/// Runs `protocol` with virtual time in `directory`; (exit code, stdout and stderr).
fn run(directory: &Path, protocol: &str) -> (i32, String) {
    std::fs::write(directory.join("protocol.yaml"), protocol).unwrap();
    run_binary_with_state(directory, &["run", "protocol.yaml", "--virtual-time"])
}

#[test]
fn a_link_swapped_while_file_size_and_json_valid_look_never_shows_a_file_outside_read() {
    let directory = temporary_directory("file-functions", "race");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::create_dir_all(directory.join("outside")).unwrap();
    std::fs::write(directory.join("data/inside"), "small").unwrap();
    // Valid JSON outside, not inside: `json_valid` true is the outside file read.
    let mut outside = vec![b'x'; OUTSIDE_SIZE];
    (outside[0], outside[OUTSIDE_SIZE - 1]) = (b'"', b'"');
    std::fs::write(directory.join("outside/big"), outside).unwrap();
    std::os::unix::fs::symlink("inside", directory.join("data/l")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let data = directory.join("data");
        // Swaps `data/l` atomically between the granted file and the outside one, flat out.
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let target = if swaps.is_multiple_of(2) {
                    "../outside/big"
                } else {
                    "inside"
                };
                let _ = std::fs::remove_file(data.join("next"));
                std::os::unix::fs::symlink(target, data.join("next")).unwrap();
                std::fs::rename(data.join("next"), data.join("l")).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let protocol = format!(
        r#"
id: race
permissions: {{ read: ["data/**"] }}
context: {{ n: 0, size: 0, valid: false }}
states:
  looking:
    entry:
      - assign: {{ n: "n + 1" }}
      - assign: {{ size: "file_size('data/l')" }}
      - assign: {{ valid: "json_valid('data/l')" }}
    # A denied look fails its assignment; the run notes it and goes on looking.
    on:
      error.execution: {{ actions: [{{ log: "denied: ${{event.data.message}}" }}] }}
    always:
      - {{ target: leaked, guard: "size == {OUTSIDE_SIZE} || valid" }}
      - {{ target: done, guard: "n >= 1000" }}
    after:
      - {{ delay: 1ms, target: looking }}
  leaked: {{ type: final, exit_code: 3 }}
  done: {{ type: final, output: {{ size: "${{size}}" }} }}
"#
    );
    let (code, text) = run(&directory, &protocol);
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 0, "the racer ran");
    assert_eq!(
        code,
        0,
        "file_size showed the outside file: {}",
        &text[text.len().saturating_sub(2000)..]
    );
    // Denied is what a look at the outside file gives (the run went on past each).
    assert!(text.contains("read"), "{}", &text[..text.len().min(2000)]);
}

#[test]
fn command_exists_obeys_read_for_a_path() {
    use std::os::unix::fs::PermissionsExt;
    let directory = temporary_directory("file-functions", "command");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::create_dir_all(directory.join("outside")).unwrap();
    for tool in ["data/tool", "outside/tool"] {
        std::fs::write(directory.join(tool), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(directory.join(tool), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let checking = |expression: &str| {
        format!(
            r#"
id: command
permissions: {{ read: ["data/**"] }}
context: {{ found: false, checked: false }}
states:
  checking:
    entry:
      - assign: {{ found: "{expression}" }}
      - assign: {{ checked: true }}
    always:
      - {{ target: "yes", guard: checked && found }}
      - {{ target: "no", guard: checked && !found }}
    on:
      error.execution: {{ target: refused, actions: [{{ log: "refused: ${{event.data.message}}" }}] }}
  "yes": {{ type: final }}
  "no": {{ type: final, exit_code: 1 }}
  refused: {{ type: final, exit_code: 2 }}
"#
        )
    };
    let (code, text) = run(&directory, &checking("command_exists('data/tool')"));
    assert_eq!(code, 0, "{text}");
    let outside = directory.join("outside/tool").display().to_string();
    for path in [outside.as_str(), "data/../outside/tool", "/bin/sh"] {
        let (code, text) = run(&directory, &checking(&format!("command_exists('{path}')")));
        assert_eq!(code, 2, "{path}: {text}");
        assert!(text.contains("refused:") && text.contains("read"), "{text}");
    }
    // A bare name is looked up on PATH as `exec` runs it.
    let (code, text) = run(&directory, &checking("command_exists('sh')"));
    assert_eq!(code, 0, "{text}");
}
