//! Defaults a careful user can live with, through the real binary: grants naming inputs, the warning for a protocol that declares no permissions, `--sandbox strict`, `test` under run's grants, and the exit codes of a full disk and a lost resume race.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{run_binary, temporary_directory, wait_for_status};

/// Writes `report` into `${state_dir}`, and then, on the event `stray`, into `${elsewhere}`:
/// `done` (0) when every write is done, `denied` (3) on a refusal.
const WRITER: &str = r#"
id: writer
inputs:
  state_dir: { type: string, required: true }
  elsewhere: { type: string, default: outside }
permissions:
  write: ["${state_dir}/**"]
  exec: []
states:
  writing:
    entry:
      - write: "${state_dir}/report.md"
        content: "inside"
        id: report
    on:
      done.exec.report: waiting
      error.permission: { target: denied, actions: [{ log: "denied ${event.data.subject}" }] }
  waiting:
    on:
      stray: straying
      finish: done
  straying:
    entry:
      - write: "${elsewhere}/stray.md"
        content: "outside"
        id: stray
    on:
      done.exec.stray: done
      error.permission: { target: denied, actions: [{ log: "denied ${event.data.subject}" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;

/// `run_binary` with `--state-dir state` after the arguments.
fn run(directory: &Path, arguments: &[&str]) -> (i32, String, String) {
    let mut all = arguments.to_vec();
    all.extend(["--state-dir", "state"]);
    run_binary(directory, &all)
}

/// The events file `events.jsonl` holding these event names, one a line.
fn events(directory: &Path, names: &[&str]) -> String {
    let lines: Vec<String> = names
        .iter()
        .map(|name| format!("{{\"event\": \"{name}\"}}\n"))
        .collect();
    std::fs::write(directory.join("events.jsonl"), lines.concat()).unwrap();
    "events.jsonl".into()
}

/// The grants of the one log line of stderr tagged `#grants` (its time left out).
fn grants_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.ends_with("#grants"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let (_, grants) = lines[0].split_once("grants: ").unwrap();
    grants.to_string()
}

/// The id of the one run recorded in `directory/state`.
fn only_run_id(directory: &Path) -> String {
    let (code, stdout, stderr) = run_binary(directory, &["runs", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stderr}");
    let ids: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(ids.len(), 1, "{stdout}");
    ids[0].to_string()
}

#[test]
fn a_grant_naming_an_input_is_resolved_at_start_shown_and_kept_on_resume() {
    let directory = temporary_directory("defaults", "grant-inputs");
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    // validate shows the placeholder, and says when it is resolved.
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "writer.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("write: [${state_dir}/**]"), "{stdout}");
    assert!(stdout.contains("resolved when a run starts"), "{stdout}");
    // The run writes inside the resolved grant, then stops waiting for an event.
    let target = directory.join("target");
    let state_dir = format!("state_dir={}", target.display());
    let (code, _, stderr) = run(&directory, &["run", "writer.yaml", "-i", &state_dir]);
    assert_eq!(code, 75, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(target.join("report.md")).unwrap(),
        "inside"
    );
    let started = grants_line(&stderr);
    assert!(
        started.contains(&format!("write: [{}/**]", target.display())),
        "{started}"
    );
    // status shows the grants resolved.
    let (code, stdout, _) = run(&directory, &["status"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!(
            "grants    exec: []; shell: not allowed; write: [{}/**]",
            target.display()
        )),
        "{stdout}"
    );
    // The resume resolves the same grants from the stored inputs, and still refuses a write
    // outside them.
    let run_id = only_run_id(&directory);
    let file = events(&directory, &["stray"]);
    let (code, _, stderr) = run(&directory, &["resume", &run_id, "--events", &file]);
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(grants_line(&stderr), started);
    assert!(stderr.contains("denied outside/stray.md"), "{stderr}");
    assert!(!directory.join("outside").exists());
}

#[test]
fn a_grant_naming_an_unknown_input_is_a_located_load_error() {
    let directory = temporary_directory("defaults", "unknown-input");
    let yaml = WRITER.replace(
        "write: [\"${state_dir}/**\"]",
        "write: [\"${stat_dir}/**\"]",
    );
    std::fs::write(directory.join("writer.yaml"), yaml).unwrap();
    for arguments in [
        vec!["validate", "writer.yaml"],
        vec!["run", "writer.yaml", "-i", "state_dir=x"],
    ] {
        let (code, _, stderr) = run_binary(&directory, &arguments);
        assert_eq!(code, 65, "{stderr}");
        assert!(
            stderr.contains("the grant names `stat_dir`, which is not an input"),
            "{stderr}"
        );
        assert!(stderr.contains("writer.yaml:7:"), "{stderr}");
        assert!(stderr.contains("write: [\"${stat_dir}/**\"]"), "{stderr}");
        assert!(stderr.contains("did you mean `state_dir`"), "{stderr}");
    }
    assert!(!directory.join("x").exists());
}

#[test]
fn an_input_value_never_widens_a_grant_beyond_its_literal_path() {
    let directory = temporary_directory("defaults", "literal-input");
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    std::fs::create_dir_all(directory.join("out")).unwrap();
    // `o*` is a directory named `o*`, not every directory starting with `o`.
    let arguments = [
        "run",
        "writer.yaml",
        "-i",
        "state_dir=o*",
        "-i",
        "elsewhere=out",
    ];
    let (code, _, stderr) = run(&directory, &arguments);
    assert_eq!(code, 75, "{stderr}");
    let file = events(&directory, &["stray"]);
    let run_id = only_run_id(&directory);
    let (code, _, stderr) = run(&directory, &["resume", &run_id, "--events", &file]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied out/stray.md"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(directory.join("o*/report.md")).unwrap(),
        "inside"
    );
    assert!(!directory.join("out/stray.md").exists());
    // `..` is refused before anything runs.
    let (code, _, stderr) = run(
        &directory,
        &["run", "writer.yaml", "-i", "state_dir=out/.."],
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("climbs with `..`"), "{stderr}");
    assert!(stderr.contains("writer.yaml:7:"), "{stderr}");
    assert!(!directory.join("report.md").exists());
    // An empty value grants nothing (not `/**`): the write to `/report.md` is refused.
    let (code, _, stderr) = run(&directory, &["run", "writer.yaml", "-i", "state_dir="]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied /report.md"), "{stderr}");
    assert!(stderr.contains("write: []"), "{stderr}");
}

#[test]
fn run_and_check_warn_when_a_protocol_declares_no_permissions() {
    let directory = temporary_directory("defaults", "no-permissions");
    let open = "id: open\nstates:\n  done: { type: final }\n";
    std::fs::write(directory.join("open.yaml"), open).unwrap();
    let (code, _, stderr) = run(&directory, &["run", "open.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    // A kernel without Landlock warns that it does not confine, besides.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains(" WARN ") && !line.ends_with("#sandbox_unenforced"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("open.yaml declares no `permissions`"),
        "{stderr}"
    );
    assert!(warnings[0].contains("--sandbox strict"), "{stderr}");
    assert!(warnings[0].ends_with("#permissions_undeclared"), "{stderr}");
    // Under --sandbox strict nothing is allowed by default: no warning (but, on a kernel
    // without Landlock, that it does not confine).
    let (code, _, stderr) = run(&directory, &["run", "open.yaml", "--sandbox", "strict"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|line| line.contains("WARN") && !line.ends_with("#sandbox_unenforced")),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(&directory, &["check", "open.yaml", "--deny-warnings"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("the protocol declares no `permissions`")
            && stderr.contains("open.yaml:1:1"),
        "{stderr}"
    );
    // A protocol that declares them is not warned about.
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["check", "writer.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("permissions"), "{stderr}");
    assert!(stdout.contains("no warnings"), "{stdout}");
}

/// Runs `echo granted` once the event `go` comes; `done` (0), or `denied` (3) when refused.
const ECHO: &str = r#"
id: echo
permissions: PERMISSIONS
states:
  waiting:
    on: { go: acting }
  acting:
    entry:
      - exec: [echo, granted]
        id: act
    on:
      done.exec.act: { target: done, actions: [{ log: "said ${event.data.stdout}" }] }
      error.permission.act: { target: denied, actions: [{ log: "denied ${event.data.subject}" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;

#[test]
fn sandbox_strict_grants_only_what_the_command_line_grants_and_a_resume_keeps_it() {
    let directory = temporary_directory("defaults", "strict");
    let file = events(&directory, &["go"]);
    let protocol = |permissions: &str| {
        std::fs::write(
            directory.join("echo.yaml"),
            ECHO.replace("PERMISSIONS", permissions),
        )
        .unwrap();
    };
    // The protocol grants `echo`, the command line nothing: refused.
    protocol("{ exec: [echo] }");
    let (code, _, stderr) = run(
        &directory,
        &["run", "echo.yaml", "--sandbox", "strict", "--events", &file],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied echo"), "{stderr}");
    // The command line grants it: it runs.
    let strict_echo = ["--sandbox", "strict", "--allow-exec", "echo"];
    let mut arguments = vec!["run", "echo.yaml", "--events", &file];
    arguments.extend(strict_echo);
    let (code, _, stderr) = run(&directory, &arguments);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("said granted"), "{stderr}");
    // The protocol's own permissions still narrow what the command line grants.
    protocol("{ exec: [cat] }");
    let (code, _, stderr) = run(&directory, &arguments);
    assert_eq!(code, 3, "{stderr}");
    // A protocol that declares nothing gets nothing under strict, and a resume without the
    // flag stays strict.
    std::fs::write(
        directory.join("echo.yaml"),
        ECHO.replace("permissions: PERMISSIONS\n", ""),
    )
    .unwrap();
    std::fs::remove_dir_all(directory.join("state")).unwrap();
    let (code, _, stderr) = run(&directory, &["run", "echo.yaml", "--sandbox", "strict"]);
    assert_eq!(code, 75, "{stderr}");
    let run_id = only_run_id(&directory);
    let (code, _, stderr) = run(&directory, &["resume", &run_id, "--events", &file]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("denied echo"), "{stderr}");
    let (_, stdout, _) = run(&directory, &["status", &run_id]);
    assert!(stdout.contains("\"sandbox\":\"strict\""), "{stdout}");
    // `serve` takes it too.
    protocol("{ exec: [echo] }");
    for (flags, state) in [
        (vec!["--sandbox", "strict"], "denied"),
        (vec!["--sandbox", "strict", "--allow-exec", "echo"], "done"),
    ] {
        let mut arguments = vec!["serve", "echo.yaml", "--store", "memory"];
        arguments.extend(flags);
        let mut serve = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(&arguments)
            .current_dir(&directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let mut stdin = serve.stdin.take().unwrap();
        stdin
            .write_all(b"{\"instance\": \"a\", \"event\": \"go\"}\n")
            .unwrap();
        drop(stdin);
        let output = serve.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!("\"finished\":{{\"state\":\"{state}\"")),
            "{arguments:?}: {stdout}"
        );
    }
}

#[test]
fn test_runs_real_effects_under_the_grants_and_flags_of_run() {
    let directory = temporary_directory("defaults", "test-grants");
    std::fs::write(
        directory.join("echo.yaml"),
        ECHO.replace("PERMISSIONS", "{ exec: [echo] }"),
    )
    .unwrap();
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    let echo_scenario = r#"
protocol: echo.yaml
scenarios:
  - name: echo runs for real
    steps:
      - send: go
      - expect: { finished: { state: done } }
"#;
    std::fs::write(directory.join("echo.scenario.yaml"), echo_scenario).unwrap();
    // Grants naming inputs are resolved from each scenario's inputs.
    let writer_scenario = r#"
protocol: writer.yaml
scenarios:
  - name: writes inside its state_dir
    inputs: { state_dir: inside }
    steps:
      - send: finish
      - expect: { finished: { state: done }, files: { inside/report.md: '\Ainside\z' } }
  - name: a write outside is refused
    inputs: { state_dir: inside, elsewhere: away }
    steps:
      - send: stray
      - expect: { finished: { state: denied } }
"#;
    std::fs::write(directory.join("writer.scenario.yaml"), writer_scenario).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "."]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
    assert!(!directory.join("away").exists());
    // The same flags as run: strict without --allow-exec refuses the real echo.
    let (code, stdout, _) = run_binary(
        &directory,
        &["test", "echo.scenario.yaml", "--sandbox", "strict"],
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("FAILED echo.scenario.yaml: echo runs for real"),
        "{stdout}"
    );
    let (code, stdout, _) = run_binary(
        &directory,
        &[
            "test",
            "echo.scenario.yaml",
            "--sandbox",
            "strict",
            "--allow-exec",
            "echo",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout, _) = run_binary(
        &directory,
        &["test", "echo.scenario.yaml", "--allow-exec", "cat"],
    );
    assert_eq!(code, 1, "{stdout}");
}

/// A protocol that waits for events on stdin until `finish`.
const LISTENER: &str = r#"
id: listener
permissions: { exec: [] }
states:
  listening:
    on: { finish: done }
  done: { type: final }
"#;

/// The run directories under `runs`.
fn run_directories(runs: &Path) -> Vec<String> {
    std::fs::read_dir(runs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Starts `run listener.yaml --events -` (or the `resume` given) with stdin held open.
fn spawn_live(directory: &Path, arguments: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", "state", "--events", "-"])
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Ends a live run by sending `finish`; returns its exit code.
fn finish(mut child: std::process::Child) -> i32 {
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"event\": \"finish\"}\n").unwrap();
    drop(stdin);
    child
        .wait_with_output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
fn a_resume_that_loses_the_race_exits_75_naming_the_holder() {
    let directory = temporary_directory("defaults", "resume-race");
    std::fs::write(directory.join("listener.yaml"), LISTENER).unwrap();
    let (code, _, stderr) = run(&directory, &["run", "listener.yaml"]);
    assert_eq!(code, 75, "{stderr}");
    let run_id = only_run_id(&directory);
    let holder = spawn_live(&directory, &["resume", &run_id]);
    wait_for_status(
        &directory,
        &directory.join("state"),
        "the resume",
        |status| status["status"] == "running",
    );
    let (code, _, stderr) = run(&directory, &["resume", &run_id]);
    assert_eq!(code, 75, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "is being run by another process (pid {}",
            holder.id()
        )),
        "{stderr}"
    );
    // `run --resume` of the same protocol loses the same way.
    let (code, _, stderr) = run(&directory, &["run", "listener.yaml", "--resume"]);
    assert_eq!(code, 75, "{stderr}");
    assert_eq!(finish(holder), 0);
    // Once the holder is gone the run is finished, and says so.
    let (code, _, stderr) = run(&directory, &["resume", &run_id]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("has finished"), "{stderr}");
}

#[test]
fn keep_runs_never_prunes_a_live_run() {
    let directory = temporary_directory("defaults", "keep-live");
    std::fs::write(directory.join("listener.yaml"), LISTENER).unwrap();
    std::fs::write(
        directory.join("quick.yaml"),
        "id: quick\npermissions: { exec: [] }\nstates:\n  done: { type: final }\n",
    )
    .unwrap();
    let live = spawn_live(&directory, &["run", "listener.yaml"]);
    wait_for_status(
        &directory,
        &directory.join("state"),
        "the live run",
        |status| status["status"] == "running",
    );
    let live_id = only_run_id(&directory);
    for _ in 0..3 {
        let (code, _, stderr) = run(&directory, &["run", "quick.yaml", "--keep-runs", "1"]);
        assert_eq!(code, 0, "{stderr}");
    }
    let runs = directory.join("state/runs");
    let kept = run_directories(&runs);
    // The live run and the latest quick one: the older quick ones are pruned.
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.contains(&live_id), "{kept:?}");
    assert!(runs.join(&live_id).join("events.jsonl").exists());
    let (code, stdout, _) = run(&directory, &["status", &live_id]);
    assert_eq!(code, 0);
    assert!(stdout.contains("status    running"), "{stdout}");
    assert_eq!(finish(live), 0);
    // Finished, it is pruned like any other.
    let (code, _, _) = run(&directory, &["run", "quick.yaml", "--keep-runs", "1"]);
    assert_eq!(code, 0);
    assert_eq!(run_directories(&runs).len(), 1);
}

/// A directory holding `filler.yaml` (each step grows the context by 4 KiB, emitting `grew`;
/// `send_itself` makes it step on its own) and `disk`, a 192 KiB tmpfs the store fills within a
/// few steps; `None` where no tmpfs can be mounted (only root, or a user namespace, may).
fn directory_with_a_small_disk(
    name: &str,
    send_itself: bool,
) -> Option<crate::support::TemporaryDirectory> {
    let directory = temporary_directory("defaults", name);
    let disk = directory.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    // Room for the schema's empty tables (each a page or two) and a first step or two: at
    // 160 KiB the telemetry table's pages left no room for the first step.
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=192k", "tmpfs"])
        .arg(&disk)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    let remedy = "run the tests as root (as .ci/run does): a small tmpfs is mounted to fill it";
    if !crate::support::requirement::met(name, "mounting a tmpfs", remedy, mounted) {
        return None;
    }
    let filler = r#"
id: filler
permissions: { exec: [] }
context: { n: 0, text: "", chunk: "KILOBYTES" }
states:
  growing:
    entry:
      - assign: { n: "n + 1", text: "text + chunk" }
      - emit: grew
        data: { n: "${n}" }
      SEND
    on: { grow: { target: growing, guard: n < 10000 } }
"#
    .replace("KILOBYTES", &"x".repeat(4096))
    .replace("SEND", if send_itself { "- send: grow" } else { "" });
    std::fs::write(directory.join("filler.yaml"), filler).unwrap();
    Some(directory)
}

#[test]
fn a_full_disk_exits_74() {
    let Some(directory) = directory_with_a_small_disk("full-disk", true) else {
        return;
    };
    let (code, _, stderr) = run_binary(
        &directory,
        &["run", "filler.yaml", "--state-dir", "disk/state"],
    );
    let _ = Command::new("umount").arg(directory.join("disk")).status();
    assert_eq!(code, 74, "{stderr}");
    assert!(stderr.contains("database or disk is full"), "{stderr}");
}

#[test]
fn a_full_disk_under_serve_reports_no_step_it_did_not_record_and_exits_74() {
    let Some(directory) = directory_with_a_small_disk("serve-full-disk", false) else {
        return;
    };
    let lines = "{\"instance\":\"a\",\"event\":\"grow\"}\n".repeat(60);
    let output = crate::support::run_binary_with_input(
        &directory,
        &["serve", "filler.yaml", "--state-dir", "disk/state"],
        lines.as_bytes(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(74), "{stdout}{stderr}");
    // Every step reported is one the store holds: the last `grew` on stdout is at most the
    // step `status` says was committed.
    let reported: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let last_grew = reported
        .iter()
        .filter_map(|line| line["n"].as_i64())
        .max()
        .unwrap_or(0);
    let error = reported.last().unwrap();
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|error| error.contains("database or disk is full")),
        "{stdout}"
    );
    let (code, status, _) = run_binary(
        &directory,
        &["status", "filler:a", "--json", "--state-dir", "disk/state"],
    );
    let _ = Command::new("umount").arg(directory.join("disk")).status();
    assert_eq!(code, 0, "{status}");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let committed = status["state"]["context"]["n"].as_i64().unwrap();
    assert!(
        last_grew <= committed,
        "stdout reported step n={last_grew}, the store holds n={committed}:\n{stdout}"
    );
    assert!(
        stderr.contains("the store refused the steps of 1 instance(s)"),
        "{stderr}"
    );
}

#[test]
fn an_invoked_protocol_naming_an_input_in_a_grant_is_bounded_by_its_parent() {
    let directory = temporary_directory("defaults", "child-grants");
    let child = r#"
id: child
inputs:
  program: { type: string, required: true }
permissions: { exec: ["${program}"], write: [], read: [], env: [] }
states:
  running:
    entry:
      - exec: ["${program}", child-ran]
        id: act
    on:
      done.exec.act: { target: done, actions: [{ log: "child said ${event.data.stdout}" }] }
      error.permission.act: { target: denied, actions: [{ log: "child denied ${event.data.subject}" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;
    std::fs::write(directory.join("child.yaml"), child).unwrap();
    let parent = |program: &str| {
        format!(
            r#"
id: parent
permissions: {{ exec: [echo], read: ["child.yaml"] }}
states:
  calling:
    invoke:
      - protocol: child.yaml
        id: child
        inputs: {{ program: {program} }}
    on:
      done.invoke.child: done
      error.invoke.child: failed
  done: {{ type: final }}
  failed: {{ type: final, exit_code: 4 }}
"#
        )
    };
    // Within the parent's grant, the child's program runs.
    std::fs::write(directory.join("parent.yaml"), parent("echo")).unwrap();
    let (code, _, stderr) = run(&directory, &["run", "parent.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("child said child-ran"), "{stderr}");
    // Beyond it, whatever the child's input says, it is refused.
    std::fs::write(directory.join("parent.yaml"), parent("cat")).unwrap();
    let (code, _, stderr) = run(&directory, &["run", "parent.yaml"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("child denied cat"), "{stderr}");
    // Run on its own, the child's grant is its input, resolved.
    let (code, _, stderr) = run(&directory, &["run", "child.yaml", "-i", "program=echo"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        grants_line(&stderr).starts_with("exec: [echo];"),
        "{stderr}"
    );
}

#[test]
fn serve_refuses_a_protocol_whose_grants_name_an_input_a_client_would_choose() {
    let directory = temporary_directory("defaults", "serve-grants");
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    let (code, _, stderr) = run(&directory, &["serve", "writer.yaml", "--store", "memory"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains(
            "error: writer.yaml: not served: `permissions.write` names the input `state_dir`, \
             which each client would choose; pin it with --input state_dir=VALUE, or narrow \
             `write` with --allow-write (or --sandbox strict)"
        ),
        "{stderr}"
    );
}

#[test]
fn what_compiling_checks_against_grants_naming_inputs_is_checked_once_they_are_resolved() {
    let directory = temporary_directory("defaults", "compile-checks");
    std::fs::create_dir_all(directory.join("sub")).unwrap();
    std::fs::write(
        directory.join("sub/child.yaml"),
        "id: child\npermissions: { exec: [] }\nstates:\n  done: { type: final }\n",
    )
    .unwrap();
    let parent = r#"
id: parent
inputs:
  children: { type: string, required: true }
  variables: { type: list, items: string, required: true }
permissions: { exec: [], read: ["${children}/**"], env: ["${variables}"] }
context: { home: "" }
states:
  calling:
    entry: [{ assign: { home: "env('HOME')" } }]
    invoke:
      - protocol: sub/child.yaml
        id: child
    on:
      done.invoke.child: done
  done: { type: final }
"#;
    std::fs::write(directory.join("parent.yaml"), parent).unwrap();
    // validate cannot know the grants yet: it does not refuse what they may allow.
    let (code, _, stderr) = run_binary(&directory, &["validate", "parent.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    // Resolved to allow them, the child is read and `env('HOME')` compiles.
    let (code, _, stderr) = run(
        &directory,
        &[
            "run",
            "parent.yaml",
            "-i",
            "children=sub",
            "-i",
            "variables=[HOME]",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    // Resolved to refuse them, `env('HOME')` is a located error before anything runs; the
    // child's file is the operator's to load, whatever `read` grants (docs/security.md).
    let (code, _, stderr) = run(
        &directory,
        &[
            "run",
            "parent.yaml",
            "-i",
            "children=elsewhere",
            "-i",
            "variables=[PATH]",
        ],
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(!stderr.contains("the child protocol"), "{stderr}");
    assert!(stderr.contains("env('HOME')"), "{stderr}");
}

#[test]
fn the_kernel_grants_an_input_with_wildcards_as_the_literal_path() {
    if !crate::support::requirement::landlock(
        "the_kernel_grants_an_input_with_wildcards_as_the_literal_path",
    ) {
        return;
    }
    let directory = temporary_directory("defaults", "kernel-literal");
    std::fs::create_dir_all(directory.join("o*")).unwrap();
    std::fs::create_dir_all(directory.join("out")).unwrap();
    // `touch` is granted, and may write beneath `${dir}`: with `dir=o*`, `o*/` and not `out/`.
    let toucher = r#"
id: toucher
inputs:
  dir: { type: string, required: true }
  target: { type: string, required: true }
permissions: { exec: [touch], write: ["${dir}/**"], read: [], env: [] }
states:
  touching:
    entry:
      - exec: [touch, "${target}"]
        id: touch
    on:
      done.exec.touch: done
      error.exec.touch: { target: failed, actions: [{ log: "touch failed: ${event.data.stderr}" }] }
  done: { type: final }
  failed: { type: final, exit_code: 4 }
"#;
    std::fs::write(directory.join("toucher.yaml"), toucher).unwrap();
    let (code, _, stderr) = run(
        &directory,
        &[
            "run",
            "toucher.yaml",
            "-i",
            "dir=o*",
            "-i",
            "target=o*/inside",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(directory.join("o*/inside").exists());
    let (code, _, stderr) = run(
        &directory,
        &[
            "run",
            "toucher.yaml",
            "-i",
            "dir=o*",
            "-i",
            "target=out/outside",
        ],
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!directory.join("out/outside").exists());
}

#[test]
fn a_child_protocol_runs_under_its_parents_microstep_limit() {
    let directory = temporary_directory("defaults", "child-microsteps");
    // 200 eventless microsteps in its first macrostep: under 10,000 (the default), over 50.
    let spinner = r#"
id: spinner
permissions: { exec: [], write: [], read: [], env: [] }
context: { n: 0 }
states:
  spinning:
    always:
      - { target: done, guard: "n >= 200" }
      - { target: spinning, actions: [{ assign: { n: "n + 1" } }] }
  done: { type: final }
"#;
    let parent = r#"
id: parent
permissions: { exec: [], write: [], env: [], read: ["spinner.yaml"] }
states:
  calling:
    invoke:
      - { protocol: spinner.yaml, id: spinner }
    on:
      done.invoke.spinner: done
      error.invoke.spinner:
        target: stopped
        actions: [{ log: "spinner: ${event.data.message}" }]
  done: { type: final }
  stopped: { type: final, exit_code: 3 }
"#;
    std::fs::write(directory.join("spinner.yaml"), spinner).unwrap();
    std::fs::write(directory.join("parent.yaml"), parent).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["run", "parent.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["run", "parent.yaml", "--max-microsteps", "50"],
    );
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(stderr.contains("--max-microsteps"), "{stderr}");
}
