//! Capabilities a protocol declares, enforced on real effects: programs, paths (with `..` and
//! symlinks), shell, environment, children, and the operator's narrowing.

use std::path::Path;
use std::process::{Command, Stdio};

fn scratch(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("capabilities", name)
}

fn run(directory: &Path, yaml: &str, arguments: &[&str]) -> (i32, String, String) {
    run_with_path(directory, yaml, arguments, None)
}

/// `run`, with the engine's `PATH` set to `path` when given.
fn run_with_path(
    directory: &Path,
    yaml: &str,
    arguments: &[&str],
    path: Option<&str>,
) -> (i32, String, String) {
    std::fs::write(directory.join("protocol.yaml"), yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
    command
        .arg("protocol.yaml")
        .args(["--state-dir", directory.join("state").to_str().unwrap()])
        .args(arguments)
        .current_dir(directory)
        .stdin(Stdio::null());
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// One action, then `done` on success, `denied` (exit 3) on `error.permission`, `failed`
/// (exit 4) on another failure; the denial's data is logged.
pub(crate) fn protocol(permissions: &str, action: &str) -> String {
    format!(
        r#"
id: capability
permissions: {permissions}
states:
  acting:
    entry:
      - {action}
    on:
      done.exec.act: {{ target: done, actions: [{{ log: "stdout=${{event.data.stdout}}" }}] }}
      error.permission.act:
        target: denied
        actions: [{{ log: "denied ${{event.data.capability}} ${{event.data.subject}}" }}]
      error.exec.act: failed
  done: {{ type: final }}
  denied: {{ type: final, exit_code: 3 }}
  failed: {{ type: final, exit_code: 4 }}
"#
    )
}

#[test]
fn only_declared_programs_run() {
    let directory = scratch("exec");
    let permissions = "{ exec: [echo] }";
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, "{ exec: [echo, hi], id: act }"),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, "{ exec: [cat, /etc/hostname], id: act }"),
        &[],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied exec cat"), "{stderr}");
    assert!(stderr.contains("#permission_denied"), "{stderr}");
    // A copy of an allowed program under another path is another program.
    let fake = directory.join("echo");
    std::fs::copy("/bin/sh", &fake).unwrap();
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, "{ exec: [./echo, -c, 'echo owned'], id: act }"),
        &[],
    );
    assert_eq!(code, 3, "{stderr}");
    // Nor can the protocol point PATH elsewhere to swap the program it names.
    let (code, _, stderr) = run(
        &directory,
        &protocol(
            permissions,
            &format!(
                "{{ exec: [echo, safe], env: {{ PATH: \"{}\" }}, id: act }}",
                directory.display()
            ),
        ),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("stdout=safe"), "{stderr}");
}

#[test]
fn arguments_are_never_a_shell() {
    let directory = scratch("injection");
    let marker = directory.join("owned");
    for hostile in [
        format!("; touch {}", marker.display()),
        format!("$(touch {})", marker.display()),
        format!("x\ntouch {}", marker.display()),
        format!("`touch {}`", marker.display()),
    ] {
        let yaml = protocol(
            "{ exec: [echo] }",
            "{ exec: [echo, \"${value}\"], id: act }",
        )
        .replace(
            "permissions:",
            "inputs: { value: { type: string } }\npermissions:",
        );
        let (code, _, stderr) = run(&directory, &yaml, &["--input", &format!("value={hostile}")]);
        assert_eq!(code, 0, "{stderr}");
        assert!(!marker.exists(), "{hostile:?} ran as a command");
    }
    // A shell needs its own capability.
    let (code, _, stderr) = run(
        &directory,
        &protocol(
            "{ exec: [sh] }",
            "{ exec: \"echo hi\", shell: true, id: act }",
        ),
        &[],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied shell"), "{stderr}");
    let (code, _, stderr) = run(
        &directory,
        &protocol(
            "{ exec: [], shell: true }",
            "{ exec: \"echo hi\", shell: true, id: act }",
        ),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    // The operator can refuse the shell the protocol asked for.
    let (code, _, stderr) = run(
        &directory,
        &protocol(
            "{ exec: [], shell: true }",
            "{ exec: \"echo hi\", shell: true, id: act }",
        ),
        &["--no-shell"],
    );
    assert_eq!(code, 3, "{stderr}");
}

#[test]
fn writes_stay_inside_declared_paths_after_dot_dot_and_symlinks() {
    let directory = scratch("write");
    std::fs::create_dir_all(directory.join("state")).unwrap();
    let outside = scratch("write-outside");
    std::os::unix::fs::symlink(&outside, directory.join("state/escape")).unwrap();
    let write = |path: &str| format!("{{ write: \"{path}\", content: x, id: act }}");
    let permissions = "{ write: [\"state/**\"] }";
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, &write("state/a/b.txt")),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(directory.join("state/a/b.txt").exists());
    for escape in [
        "state/../escaped.txt",
        "state/new/../../escaped.txt",
        "state/escape/pwned.txt",
        "/tmp/pwned.txt",
    ] {
        let (code, _, stderr) = run(&directory, &protocol(permissions, &write(escape)), &[]);
        assert_eq!(code, 3, "{escape}: {stderr}");
        assert!(stderr.contains("denied write"), "{stderr}");
    }
    assert!(!directory.join("escaped.txt").exists());
    assert!(!outside.join("pwned.txt").exists());
    // The operator narrows further.
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, &write("state/a/c.txt")),
        &["--allow-write", "state/b/**"],
    );
    assert_eq!(code, 3, "{stderr}");
}

#[test]
fn reads_and_environment_are_limited() {
    let directory = scratch("read");
    std::fs::write(directory.join("allowed.txt"), "yes").unwrap();
    let permissions = "{ read: [\"allowed.txt\"] }";
    let read = |path: &str| format!("{{ read_file: \"{path}\", id: act }}");
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, &read("allowed.txt")),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(
        &directory,
        &protocol(permissions, &read("/etc/hostname")),
        &[],
    );
    assert_eq!(code, 3, "{stderr}");
    // Processes inherit only the declared variables.
    let (code, _, stderr) = run(
        &directory,
        &protocol("{ env: [HOME] }", "{ exec: [env], id: act }"),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("HOME="), "{stderr}");
    assert!(!stderr.contains("PATH="), "{stderr}");
}

/// Invokes `child.yaml`: `done`, or `refused` (exit 5, the child's end logged) when it failed.
pub(crate) const PARENT: &str = r#"
id: parent
permissions: { exec: [echo] }
states:
  calling:
    invoke: [{ protocol: child.yaml, id: child }]
    on:
      done.invoke.child: done
      error.invoke.child:
        target: refused
        actions: [{ log: "child ended ${event.data.state} ${event.data.exit_code}" }]
  done: { type: final }
  refused: { type: final, exit_code: 5 }
"#;

#[test]
fn a_child_gets_at_most_its_parents_capabilities() {
    let directory = scratch("child");
    std::fs::write(
        directory.join("child.yaml"),
        protocol(
            "{ exec: [echo, cat] }",
            "{ exec: [cat, /etc/hostname], id: act }",
        ),
    )
    .unwrap();
    let (code, _, stderr) = run(&directory, PARENT, &[]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("child ended denied 3"), "{stderr}");
}

#[test]
fn validate_prints_the_capabilities() {
    let directory = scratch("validate");
    std::fs::write(
        directory.join("protocol.yaml"),
        protocol(
            "{ exec: [echo], write: [\"state/**\"] }",
            "{ exec: [echo], id: act }",
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["validate", "protocol.yaml"])
        .current_dir(&directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("exec: [echo]"), "{stdout}");
    assert!(stdout.contains("shell: not allowed"), "{stdout}");
    assert!(stdout.contains("write: [state/**]"), "{stdout}");
    assert!(stdout.contains("read: anything"), "{stdout}");
}

#[test]
fn a_program_is_never_found_through_a_relative_or_empty_path_entry() {
    let directory = scratch("dot-in-path");
    let fake = directory.join("echo");
    std::fs::write(&fake, "#!/bin/sh\necho owned\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let system = std::env::var("PATH").unwrap();
    for path in [format!(".:{system}"), format!(":{system}")] {
        for permissions in ["{}", "{ exec: [echo] }"] {
            let yaml = protocol(permissions, "{ exec: [echo, hi], id: act }")
                .replace("permissions: {}\n", "");
            let (code, _, stderr) = run_with_path(&directory, &yaml, &[], Some(&path));
            assert_eq!(code, 0, "PATH={path} {permissions}: {stderr}");
            assert!(
                stderr.contains("stdout=hi"),
                "PATH={path} {permissions}: {stderr}"
            );
        }
    }
}

#[test]
fn a_granted_program_runs_under_the_name_it_was_granted_and_only_that_name() {
    let directory = scratch("multi-call");
    std::fs::create_dir_all(directory.join("bin")).unwrap();
    // A program that says what it was called (argv[0]), like a multi-call binary decides by it.
    // The interpreter itself, not a launcher script (pyenv's shims re-execute it by path).
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8_lossy(&python.stdout).trim().to_string();
    std::os::unix::fs::symlink(&python, directory.join("bin/tool")).unwrap();
    std::os::unix::fs::symlink(&python, directory.join("bin/other")).unwrap();
    let permissions = "{ exec: [./bin/tool] }";
    let action = "{ exec: [./bin/tool, -c, 'import sys; print(sys.orig_argv[0])'], id: act }";
    let (code, _, stderr) = run(&directory, &protocol(permissions, action), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(r"stdout=./bin/tool\n"), "{stderr}");
    // The same file under a name that was not granted is refused.
    let action = action.replace("./bin/tool,", "./bin/other,");
    let (code, _, stderr) = run(&directory, &protocol(permissions, &action), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied exec ./bin/other"), "{stderr}");
}

#[test]
fn the_writers_lock_never_follows_a_planted_link() {
    let directory = scratch("lock-link");
    std::fs::create_dir_all(directory.join("out")).unwrap();
    let outside = scratch("lock-link-outside");
    let victim = outside.join("victim");
    std::os::unix::fs::symlink(&victim, directory.join("out/.protocol-run.lock")).unwrap();
    let action = "{ write: out/a.txt, content: x, id: act }";
    let (code, _, stderr) = run(
        &directory,
        &protocol("{ write: [\"out/**\"] }", action),
        &[],
    );
    // The write fails (its lock cannot be taken), and nothing appears outside.
    assert_eq!(code, 4, "{stderr}");
    assert!(!victim.exists(), "the lock followed the link");
    assert!(!directory.join("out/a.txt").exists());
}

#[test]
fn setting_a_process_environment_is_a_capability() {
    let directory = scratch("set-env");
    let exec = |env: &str| format!("{{ exec: [echo, hi], env: {{ {env} }}, id: act }}");
    // Loader and tool-configuration variables need an explicit grant, even unrestricted.
    for dangerous in [
        "LD_PRELOAD: evil.so",
        "GIT_CONFIG_COUNT: \"1\"",
        "GIT_DIR: /tmp/evil-repo",
        "BASH_ENV: x",
        "BASH_FUNC_echo%%: \"() { id; }\"",
        "GCONV_PATH: /tmp/evil",
        "NODE_PATH: /tmp/evil",
    ] {
        let yaml = protocol("{}", &exec(dangerous)).replace("permissions: {}\n", "");
        let (code, _, stderr) = run(&directory, &yaml, &[]);
        assert_eq!(code, 65, "{dangerous}: {stderr}");
        assert!(
            stderr.contains("changes how programs load or configure themselves"),
            "{stderr}"
        );
        assert!(stderr.contains("protocol.yaml:"), "located: {stderr}");
    }
    // Granted explicitly, it runs, and validate flags the grant.
    let granted = protocol("{ env: [LD_PRELOAD] }", &exec("LD_PRELOAD: \"\""));
    let (code, _, stderr) = run(&directory, &granted, &[]);
    assert_eq!(code, 0, "{stderr}");
    let validate = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["validate", "protocol.yaml"])
        .current_dir(&directory)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&validate.stdout);
    assert!(
        printed.contains("dangerous env grants: LD_PRELOAD"),
        "{printed}"
    );
    // A restricted environment admits only the variables it lists.
    let restricted = protocol("{ env: [HOME] }", &exec("GREETING: hello"));
    let (code, _, stderr) = run(&directory, &restricted, &[]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("`GREETING` is not in `permissions.env`"),
        "{stderr}"
    );
    // The operator's narrowing counts as much as the protocol's.
    let plain = protocol("{}", &exec("GREETING: hello")).replace("permissions: {}\n", "");
    let (code, _, stderr) = run(&directory, &plain, &["--allow-env", "HOME"]);
    assert_eq!(code, 65, "{stderr}");
}

#[test]
fn env_reads_only_what_the_environment_grant_lists() {
    let directory = scratch("env-function");
    let reading = |permissions: &str, name: &str| {
        protocol(
            permissions,
            &format!("{{ exec: [echo, \"${{env({name})}}\"], id: act }}"),
        )
    };
    let (code, _, stderr) = run(&directory, &reading("{ env: [HOME] }", "'MY_SECRET'"), &[]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("`env('MY_SECRET')` reads a variable `permissions.env` does not grant"),
        "{stderr}"
    );
    assert!(stderr.contains("protocol.yaml:"), "located: {stderr}");
    // A computed name cannot be checked, so it is refused where the environment is restricted.
    let (code, _, stderr) = run(
        &directory,
        &reading("{ env: [HOME] }", "'MY_' + 'SECRET'"),
        &[],
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("`env()` takes a literal name"), "{stderr}");
    // A granted name reads as before.
    let (code, _, stderr) = run(&directory, &reading("{ env: [HOME] }", "'HOME'"), &[]);
    assert_eq!(code, 0, "{stderr}");
    // The operator's --allow-env restricts it as well.
    let unrestricted = reading("{}", "'MY_SECRET'").replace("permissions: {}\n", "");
    let (code, _, stderr) = run(&directory, &unrestricted, &["--allow-env", "HOME"]);
    assert_eq!(code, 65, "{stderr}");
}

#[test]
fn without_the_shell_capability_a_shell_is_not_a_program_either() {
    let directory = scratch("shell-as-program");
    let action = "{ exec: [sh, -c, 'echo owned'], id: act }";
    let unrestricted = protocol("{}", action).replace("permissions: {}\n", "");
    // The operator's --no-shell, on a protocol that restricts nothing.
    let (code, _, stderr) = run(&directory, &unrestricted, &["--no-shell"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied shell sh"), "{stderr}");
    // The protocol's own `shell: false`, even with the shell listed as a program; and a shell
    // by its path.
    for (permissions, action) in [
        ("{ shell: false }", action.to_string()),
        ("{ exec: [sh], shell: false }", action.to_string()),
        ("{ shell: false }", action.replace("[sh,", "[/bin/bash,")),
    ] {
        let (code, _, stderr) = run(&directory, &protocol(permissions, &action), &[]);
        assert_eq!(code, 3, "{permissions} {action}: {stderr}");
        assert!(!stderr.contains("stdout=owned"), "{stderr}");
    }
    // Granted, it runs.
    let (code, _, stderr) = run(&directory, &protocol("{ shell: true }", action), &[]);
    assert_eq!(code, 0, "{stderr}");
}

/// Waits for `go`, then runs a shell: what an operator's `--no-shell` must stop however the
/// run is continued.
const SHELL_LATER: &str = r#"
id: later
states:
  waiting:
    on:
      go: acting
  acting:
    entry:
      - { exec: [sh, -c, 'touch owned'], id: act }
    on:
      done.exec.act: done
      error.permission.act: denied
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;

#[test]
fn a_resume_keeps_the_operators_narrowing() {
    let directory = scratch("resume-narrowing");
    std::fs::write(directory.join("protocol.yaml"), SHELL_LATER).unwrap();
    let state = directory.join("state");
    let state = state.to_str().unwrap();
    // Narrowed by the operator, the run stops unfinished (no events yet).
    let (code, _, stderr) = crate::support::run_binary(
        &directory,
        &[
            "protocol.yaml",
            "--state-dir",
            state,
            "--allow-exec",
            "echo",
            "--no-shell",
        ],
    );
    assert_eq!(code, 75, "{stderr}");
    // Resumed without the flags: the narrowing recorded with the run still holds.
    std::fs::write(directory.join("go.jsonl"), "{\"event\":\"go\"}\n").unwrap();
    let (code, _, stderr) = crate::support::run_binary(
        &directory,
        &[
            "protocol.yaml",
            "--resume",
            "--state-dir",
            state,
            "--events",
            "go.jsonl",
        ],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(!directory.join("owned").exists());
}

#[test]
fn serve_takes_the_operators_narrowing_and_keeps_it_for_its_instances() {
    let directory = scratch("serve-narrowing");
    std::fs::write(directory.join("protocol.yaml"), SHELL_LATER).unwrap();
    let state = directory.join("state");
    let serve = |arguments: &[&str], input: &str| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args([
                "serve",
                "protocol.yaml",
                "--state-dir",
                state.to_str().unwrap(),
            ])
            .args(arguments)
            .current_dir(&directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    // `a` is refused its shell at once; `b` waits.
    let (stdout, stderr) = serve(
        &["--no-shell"],
        "{\"instance\":\"a\",\"event\":\"go\"}\n{\"instance\":\"b\"}\n",
    );
    assert!(
        stdout.contains("\"instance\":\"a\"") && stdout.contains("\"state\":\"denied\""),
        "{stdout}{stderr}"
    );
    assert!(!directory.join("owned").exists());
    // A host without the flag does not resume `b` under weaker grants.
    let (stdout, stderr) = serve(&[], "{\"instance\":\"b\",\"event\":\"go\"}\n");
    assert!(stderr.contains("instance `b` cannot resume"), "{stderr}");
    assert!(stderr.contains("--no-shell"), "{stderr}");
    assert!(!directory.join("owned").exists(), "{stdout}");
}

#[test]
fn the_file_functions_obey_read_and_never_block_or_grow() {
    let directory = scratch("file-functions");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::write(directory.join("data/ok.json"), "{\"a\": 1}").unwrap();
    let fifo = directory.join("data/fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let checking = |permissions: &str, expression: &str| {
        format!(
            r#"
id: files
permissions: {permissions}
context: {{ ok: false, checked: false }}
states:
  checking:
    entry:
      - assign: {{ ok: "{expression}" }}
      - assign: {{ checked: true }}
    always:
      - {{ target: "yes", guard: checked && ok }}
      - {{ target: "no", guard: checked && !ok }}
    on:
      error.execution: {{ target: refused, actions: [{{ log: "refused: ${{event.data.message}}" }}] }}
  "yes": {{ type: final }}
  "no": {{ type: final, exit_code: 1 }}
  refused: {{ type: final, exit_code: 2 }}
"#
        )
    };
    let read_data = "{ read: [\"data/**\"] }";
    let (code, _, stderr) = run(
        &directory,
        &checking(read_data, "json_valid('data/ok.json')"),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    for outside in [
        "json_valid('/etc/hostname')",
        "file_size('/etc/hostname') > 0",
        "exists('/etc/shadow')",
        "is_dir('/etc')",
    ] {
        let (code, _, stderr) = run(&directory, &checking(read_data, outside), &[]);
        assert_eq!(code, 2, "{outside}: {stderr}");
        assert!(stderr.contains("refused:"), "{stderr}");
        assert!(stderr.contains("read"), "{stderr}");
    }
    // Neither a FIFO (which would block the host) nor a device (which never ends) is read.
    for special in ["json_valid('data/fifo')", "json_valid('/dev/zero')"] {
        let (code, _, stderr) = run(
            &directory,
            &checking("{}", special).replace("permissions: {}\n", ""),
            &[],
        );
        assert_eq!(code, 2, "{special}: {stderr}");
        assert!(stderr.contains("is not a regular file"), "{stderr}");
    }
}

#[test]
fn grep_search_checks_every_file_it_opens_and_reads_bounded_lines_of_regular_files() {
    let directory = scratch("grep-escape");
    std::fs::create_dir_all(directory.join("data")).unwrap();
    let outside = scratch("grep-escape-outside");
    std::fs::write(outside.join("secret.txt"), "token=hunter2\n").unwrap();
    std::fs::write(directory.join("data/notes.txt"), "token=public\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), directory.join("data/link.txt"))
        .unwrap();
    let action = "{ grep_search: token, path: data, id: act }";
    let (code, _, stderr) = run(
        &directory,
        // The directory itself and everything below it.
        &protocol("{ read: [data, \"data/**\"] }", action),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("token=public"), "{stderr}");
    assert!(
        !stderr.contains("hunter2"),
        "the search followed a link out: {stderr}"
    );
    // A device is not searched (it never ends); neither is a line past the limit kept whole.
    let unrestricted = |action: &str| protocol("{}", action).replace("permissions: {}\n", "");
    let (code, _, stderr) = run(
        &directory,
        &unrestricted("{ grep_search: x, path: /dev/zero, id: act }"),
        &[],
    );
    assert_eq!(code, 4, "{stderr}");
    let mut long = "x".repeat(3 << 20);
    long.push_str("\nshort x line\n");
    std::fs::write(directory.join("data/long.txt"), long).unwrap();
    let (code, _, stderr) = run(
        &directory,
        &unrestricted("{ grep_search: x, path: data/long.txt, id: act }"),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("long.txt:2:short x line"), "{stderr}");
    assert!(
        !stderr.contains("xxxxxxxxxxxxxxxx"),
        "the long line was kept"
    );
}

#[test]
fn invoke_reads_only_protocol_files_and_never_prints_another_file() {
    let directory = scratch("invoke-read");
    let secret = directory.join("secret.txt");
    std::fs::write(&secret, "root:the-first-line-of-a-secret\n").unwrap();
    let parent = |permissions: &str, child: &str| {
        format!(
            "id: parent\npermissions: {permissions}\nstates:\n  calling:\n    invoke: [{{ id: kid, protocol: \"{child}\" }}]\n"
        )
    };
    std::fs::write(
        directory.join("parent.yaml"),
        parent("{}", &secret.display().to_string()),
    )
    .unwrap();
    let (code, stdout, stderr) =
        crate::support::run_binary(&directory, &["validate", "parent.yaml"]);
    assert_eq!(code, 65, "{stdout}{stderr}");
    assert!(stderr.contains("is not a protocol file"), "{stderr}");
    assert!(!stderr.contains("the-first-line"), "{stderr}");
    // A protocol file outside `read` is the operator's to load, as its parent is
    // (tests/protocol_files.rs): `read` is the protocol's data access, not its own files'.
    std::fs::create_dir_all(directory.join("elsewhere")).unwrap();
    std::fs::write(
        directory.join("elsewhere/child.yaml"),
        "id: child\nstates:\n  s: { type: final }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("parent.yaml"),
        parent("{ read: [\"mine/**\"] }", "elsewhere/child.yaml"),
    )
    .unwrap();
    let (code, _, stderr) = crate::support::run_binary(&directory, &["validate", "parent.yaml"]);
    assert_eq!(code, 0, "{stderr}");
}
