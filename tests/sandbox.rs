//! The kernel's sandbox (Landlock) on real effects: a granted program cannot read, write or run past the grants by its own options, and a link swapped in between attempts or during one leads nowhere.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// Whether this kernel has Landlock; when it does not, the kernel's part of a test is skipped,
/// and the test says so (or fails, where every test must run).
fn kernel_confines(test: &str) -> bool {
    crate::support::requirement::landlock(test)
}

/// Runs `yaml` as `protocol.yaml` in `directory`; returns (exit code, stdout, stderr).
fn run_protocol(directory: &Path, yaml: &str) -> (i32, String, String) {
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    let state = directory.join("state");
    run_binary(
        directory,
        &["protocol.yaml", "--state-dir", state.to_str().unwrap()],
    )
}

/// One `exec` action under `permissions`: final `done` (exit 0) or `failed` (exit 4), its
/// output logged.
fn one_exec(permissions: &str, action: &str) -> String {
    format!(
        r#"
id: sandboxed
permissions: {permissions}
states:
  acting:
    entry:
      - {action}
    on:
      done.exec.act:
        target: done
        actions: [{{ log: "out=${{event.data.stdout}} err=${{event.data.stderr}}" }}]
      error.exec.act:
        target: failed
        actions: [{{ log: "err=${{event.data.stderr}}" }}]
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 4 }}
"#
    )
}

#[test]
fn a_granted_program_cannot_write_outside_write_through_its_own_options() {
    if !kernel_confines("sort -o") {
        return;
    }
    let directory = temporary_directory("sandbox", "sort");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::create_dir_all(directory.join("out")).unwrap();
    std::fs::write(directory.join("data/in.txt"), "b\na\n").unwrap();
    let permissions = r#"{ exec: [sort], read: ["data/**"], write: ["out/**"] }"#;
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            "{ exec: [sort, -o, elsewhere.txt, data/in.txt], id: act }",
        ),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!directory.join("elsewhere.txt").exists());
    // The same program writes where it is granted.
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            "{ exec: [sort, -o, out/sorted.txt, data/in.txt], id: act }",
        ),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(directory.join("out/sorted.txt")).unwrap(),
        "a\nb\n"
    );
}

#[test]
fn a_granted_program_cannot_read_outside_read() {
    if !kernel_confines("cat") {
        return;
    }
    let directory = temporary_directory("sandbox", "cat");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::write(directory.join("secret.txt"), "the-secret-token").unwrap();
    std::fs::write(directory.join("data/public.txt"), "public").unwrap();
    let permissions = r#"{ exec: [cat], read: ["data/**"] }"#;
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(permissions, "{ exec: [cat, secret.txt], id: act }"),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(!stderr.contains("the-secret-token"), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(permissions, "{ exec: [cat, data/public.txt], id: act }"),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("out=public"), "{stderr}");
}

#[test]
fn a_shell_cannot_write_outside_nor_run_what_it_wrote() {
    if !kernel_confines("shell") {
        return;
    }
    let directory = temporary_directory("sandbox", "shell");
    std::fs::create_dir_all(directory.join("out")).unwrap();
    let permissions = r#"{ exec: [], shell: true, read: ["out/**"], write: ["out/**"] }"#;
    // A payload written where writing is granted cannot be run: only the system's programs
    // and the granted ones are executable.
    let script = "echo escaped > elsewhere.txt; \
                  printf '#!/bin/sh\\necho ran\\n' > out/payload; chmod +x out/payload; \
                  ./out/payload; echo written > out/ok.txt";
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            &format!("{{ exec: {script:?}, shell: true, id: act }}"),
        ),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!directory.join("elsewhere.txt").exists(), "{stderr}");
    assert!(directory.join("out/payload").exists(), "{stderr}");
    assert!(!stderr.contains("out=ran"), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(directory.join("out/ok.txt")).unwrap(),
        "written\n"
    );
}

/// `allowed/d` links to `allowed/real`; the first attempt fails, the protocol's own `ln -sfn`
/// turns `allowed/d` into a link to `outside` meanwhile, and the retry must not follow it.
fn swap_between_attempts(action: &str, outcome: &str) -> String {
    format!(
        r#"
id: swapped
permissions: {{ exec: [ln], read: ["allowed/**"], write: ["allowed/**"] }}
states:
  racing:
    type: parallel
    states:
      acting:
        states:
          trying:
            entry:
              - {action}
                id: act
                retry: [{{ max_attempts: 2, interval: 700ms }}]
            on:
              done.exec.act: {{ target: landed, actions: [{{ log: "landed ${{event.data.{outcome}}}" }}] }}
              error.exec.act: {{ target: refused, actions: [{{ log: "refused ${{event.data.message}}" }}] }}
          landed: {{ type: final }}
          refused: {{ type: final }}
      swapping:
        states:
          waiting:
            after: [{{ delay: 100ms, target: linking }}]
          linking:
            entry: [{{ exec: [ln, -sfn, ../outside, allowed/d], id: swap }}]
            on:
              done.exec.swap: swapped
              error.exec.swap: {{ target: swapped, actions: [{{ log: "swap failed ${{event.data.stderr}}" }}] }}
          swapped: {{ type: final }}
    on:
      done.state.racing: finished
  finished: {{ type: final }}
"#
    )
}

fn swap_setup(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("sandbox", name);
    std::fs::create_dir_all(directory.join("allowed/real")).unwrap();
    std::fs::create_dir_all(directory.join("outside")).unwrap();
    std::os::unix::fs::symlink("real", directory.join("allowed/d")).unwrap();
    directory
}

#[test]
fn a_write_retried_after_a_link_swap_does_not_follow_it_out() {
    let directory = swap_setup("swap-write");
    // The first attempt fails: the target is a directory that cannot be replaced.
    std::fs::create_dir_all(directory.join("allowed/real/f.txt/full")).unwrap();
    let (code, _, stderr) = run_protocol(
        &directory,
        &swap_between_attempts(
            r#"write: allowed/d/f.txt
                content: landed"#,
            "path",
        ),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("swap failed"), "{stderr}");
    assert!(
        std::fs::read_link(directory.join("allowed/d")).unwrap() == Path::new("../outside"),
        "the protocol's own swap happened"
    );
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(stderr.contains("not permitted"), "{stderr}");
    assert!(!directory.join("outside/f.txt").exists(), "{stderr}");
}

#[test]
fn a_read_retried_after_a_link_swap_does_not_follow_it_out() {
    let directory = swap_setup("swap-read");
    // The first attempt fails: nothing to read yet; outside, a secret.
    std::fs::write(directory.join("outside/secret.txt"), "the-secret-token").unwrap();
    let (code, _, stderr) = run_protocol(
        &directory,
        &swap_between_attempts("read_file: allowed/d/secret.txt", "stdout"),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(!stderr.contains("the-secret-token"), "{stderr}");
}

/// A racer outside the engine swaps `allowed/d` between a directory inside and one outside as
/// fast as it can while the protocol writes through it: the engine's check and the write are
/// two moments, but the kernel holds the write to the grant, so nothing lands outside.
#[test]
fn an_outside_racer_swapping_a_link_lands_no_write_outside() {
    if !kernel_confines("racer") {
        return;
    }
    let directory = swap_setup("racer");
    const WRITES: u32 = 150;
    let yaml = format!(
        r#"
id: raced
permissions: {{ read: ["allowed/**"], write: ["allowed/**"] }}
context: {{ writes: 0 }}
states:
  writing:
    entry:
      - {{ write: allowed/d/f.txt, content: "x", id: put }}
    on:
      done.exec.put: {{ target: counting, actions: [{{ assign: {{ writes: writes + 1 }} }}] }}
      error.exec.put: {{ target: counting, actions: [{{ assign: {{ writes: writes + 1 }} }}] }}
      error.permission.put: {{ target: counting, actions: [{{ assign: {{ writes: writes + 1 }} }}] }}
  counting:
    always:
      - {{ target: done, guard: writes >= {WRITES} }}
      - writing
  done: {{ type: final }}
"#
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let allowed = directory.join("allowed");
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if swaps.is_multiple_of(2) {
                    "../outside"
                } else {
                    "real"
                };
                let staged = allowed.join("d.staged");
                let _ = std::fs::remove_file(&staged);
                std::os::unix::fs::symlink(target, &staged).unwrap();
                std::fs::rename(&staged, allowed.join("d")).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (code, _, stderr) = run_protocol(&directory, &yaml);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(swaps > u64::from(WRITES), "the racer swapped {swaps} times");
    let landed: Vec<_> = std::fs::read_dir(directory.join("outside"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert!(landed.is_empty(), "landed outside: {landed:?}");
}

#[test]
fn validate_says_what_the_kernel_enforces() {
    let directory = temporary_directory("sandbox", "validate");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::write(
        directory.join("protocol.yaml"),
        r#"
id: described
permissions: { exec: [cat], read: ["data/**", "notes/*.md"], write: ["out/**"] }
states:
  only: { type: final }
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let data = directory.canonicalize().unwrap().join("data");
    assert!(
        stdout.contains(&format!("read beneath: {}", data.display())),
        "{stdout}"
    );
    assert!(stdout.contains("wider than `notes/*.md`"), "{stdout}");
    assert!(stdout.contains("does not exist yet"), "{stdout}");
    assert!(
        !stdout.contains("warning:"),
        "no program lies under a write grant: {stdout}"
    );
    assert!(
        stdout.contains("execute: only the granted programs"),
        "{stdout}"
    );
    match protocol_run::effects::sandbox::support() {
        protocol_run::effects::sandbox::Support::Unavailable(_) => {
            assert!(stdout.contains("NOT enforced"), "{stdout}")
        }
        _ => assert!(stdout.contains("sandbox: Landlock"), "{stdout}"),
    }
}

/// A grant list that is empty says `none`, as `validate`'s other empty lines do: never a line
/// ending in its colon.
#[test]
fn validate_says_none_for_an_empty_grant() {
    let directory = temporary_directory("sandbox", "validate-none");
    std::fs::write(
        directory.join("protocol.yaml"),
        "id: bare\npermissions: { exec: [cat], read: [], write: [], env: [] }\nstates:\n  only: { type: final }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("  read beneath: none\n"), "{stdout}");
    assert!(stdout.contains("  write beneath: none\n"), "{stdout}");
    let empty: Vec<&str> = stdout
        .lines()
        .filter(|line| line.trim_end().ends_with(':') && !line.contains("sandbox"))
        .collect();
    assert!(
        empty.is_empty(),
        "lines saying nothing: {empty:?}\n{stdout}"
    );
}

/// Runs `protocol.yaml` in `directory` with `WITHHELD_TOKEN` in the engine's environment; returns
/// the exit code and stderr.
fn run_withholding(directory: &Path) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["protocol.yaml", "--state-dir", "state"])
        .current_dir(directory)
        .env("WITHHELD_TOKEN", "the-withheld-value")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `env` withholds a variable; neither the engine's own `/proc/self/environ` (through a tool)
/// nor its `/proc/PID/environ` (through a program, whatever `read` says) gives it away.
#[test]
fn a_restricted_environment_is_not_read_back_through_proc() {
    let directory = temporary_directory("sandbox", "environ");
    let permissions = "{ env: [PATH] }";
    let tool = r#"
id: environ
permissions: { env: [PATH] }
states:
  reading:
    entry: [{ read_file: /proc/self/environ, id: act }]
    on:
      done.exec.act: { target: leaked, actions: [{ log: "read ${event.data.stdout}" }] }
      error.permission.act: refused
  leaked: { type: final, exit_code: 4 }
  refused: { type: final }
"#;
    std::fs::write(directory.join("protocol.yaml"), tool).unwrap();
    let (code, stderr) = run_withholding(&directory);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("the-withheld-value"), "{stderr}");
    if !kernel_confines("environ") {
        return;
    }
    std::fs::write(
        directory.join("protocol.yaml"),
        one_exec(
            permissions,
            r#"{ exec: "cat /proc/$PPID/environ | tr '\\0' '\\n'", shell: true, id: act }"#,
        ),
    )
    .unwrap();
    let (_, stderr) = run_withholding(&directory);
    assert!(!stderr.contains("the-withheld-value"), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
}

/// A write grant's directory that does not exist yet is made (never through a link) before a
/// process starts, and a grant naming one file lets the process make that file.
#[test]
fn a_granted_directory_not_made_yet_is_made_and_a_link_in_its_place_is_not_followed() {
    if !kernel_confines("missing directory") {
        return;
    }
    let directory = temporary_directory("sandbox", "missing");
    std::fs::create_dir_all(directory.join("outside")).unwrap();
    std::os::unix::fs::symlink("outside", directory.join("planted")).unwrap();
    let permissions =
        r#"{ exec: [], shell: true, write: ["work/deep/**", "report.txt", "planted/sub/**"] }"#;
    let script = "echo c > planted/sub/c.txt; echo a > work/deep/a.txt && echo b > report.txt";
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            &format!("{{ exec: {script:?}, shell: true, id: act }}"),
        ),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(directory.join("work/deep/a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("report.txt")).unwrap(),
        "b\n"
    );
    assert!(!directory.join("outside/sub").exists(), "{stderr}");
    // The planted link is neither followed nor made into a directory: the shell finds none.
    assert!(
        stderr.contains("planted/sub/c.txt: Directory nonexistent"),
        "{stderr}"
    );
}

/// Granting `/**` to read does not open `/proc` where `env` is restricted.
#[test]
fn read_of_everything_still_keeps_proc_closed_where_env_is_restricted() {
    if !kernel_confines("read everything") {
        return;
    }
    let directory = temporary_directory("sandbox", "read-everything");
    std::fs::write(
        directory.join("protocol.yaml"),
        one_exec(
            r#"{ exec: [sh, cat], shell: true, read: ["/**"], env: [] }"#,
            r#"{ exec: [sh, -c, 'cat /proc/$PPID/environ; cat /etc/hostname'], id: act }"#,
        ),
    )
    .unwrap();
    let (_, stderr) = run_withholding(&directory);
    assert!(!stderr.contains("the-withheld-value"), "{stderr}");
    assert!(stderr.contains("environ: Permission denied"), "{stderr}");
}

/// A granted program that starts programs (`env`, `find -exec`) starts only granted ones: the
/// kernel executes nothing else, so `--no-shell` holds through them.
#[test]
fn a_granted_program_cannot_start_a_program_that_was_not_granted() {
    if !kernel_confines("exec through env") {
        return;
    }
    let directory = temporary_directory("sandbox", "exec-through");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    let permissions = r#"{ exec: [env, find, echo], read: ["data/**"], write: ["data/**"] }"#;
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            "{ exec: [env, sh, -c, 'echo shell ran'], id: act }",
        ),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(!stderr.contains("shell ran"), "{stderr}");
    // A granted program started by another granted one still runs.
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(permissions, "{ exec: [env, echo, granted ran], id: act }"),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("out=granted ran"), "{stderr}");
    let (code, _, stderr) = run_protocol(
        &directory,
        &one_exec(
            permissions,
            r#"{ exec: [find, data, -maxdepth, "0", -exec, sh, -c, "echo find ran a shell", ";"], id: act }"#,
        ),
    );
    assert!(!stderr.contains("out=find ran a shell"), "{code} {stderr}");
}

/// A program granted to run from where the protocol may write is flagged by `validate`.
#[test]
fn validate_warns_of_a_program_the_protocol_may_rewrite() {
    let directory = temporary_directory("sandbox", "rewrite");
    std::fs::create_dir_all(directory.join("out")).unwrap();
    std::fs::copy("/bin/true", directory.join("out/tool")).unwrap();
    std::fs::write(
        directory.join("protocol.yaml"),
        "id: rewrite\npermissions: { exec: [out/tool], write: [\"out/**\"] }\nstates:\n  only: { type: final }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "protocol.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("out/tool may be run and lies under a write grant"),
        "{stdout}"
    );
}
