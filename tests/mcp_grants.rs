//! The operator's grants given to `protocol-run mcp` (`--allow-exec`, `--allow-write`,
//! `--allow-env`, `--no-shell`) narrow the runs a client starts exactly as they narrow `run`
//! (each MCP run ends as `run` of the same protocol under the same flags), a child protocol's
//! included: refused with the grant named in the run's logs, or, granted, run.

use serde_json::{Value, json};

use crate::mcp::{drive, step};

/// `capabilities`' protocol of one action (`done`, `denied` exit 3, `failed` exit 4; stdout
/// and the denial logged), unrestricted, under its own id.
fn protocol(id: &str, action: &str) -> String {
    crate::capabilities::protocol("{}", action)
        .replace("permissions: {}\n", "")
        .replace("id: capability", &format!("id: {id}"))
}

const FILES: [&str; 5] = [
    "exec_cat.yaml",
    "write_out.yaml",
    "env_show.yaml",
    "shell_run.yaml",
    "parent.yaml",
];

/// Serves the five protocols under `flags`; each run's final state, exit code and log messages.
fn outcomes(directory: &std::path::Path, flags: &[&str]) -> Vec<(String, Value, Vec<String>)> {
    let arguments: Vec<&str> = flags.iter().chain(FILES.iter()).copied().collect();
    let (lines, _) = drive(directory, "grants", &arguments);
    ["exec_cat", "write_out", "env_show", "shell_run", "parent"]
        .iter()
        .map(|tool| {
            let line = step(&lines, &format!("grant:{tool}"));
            let finished = &line["report"]["finished"];
            let messages = line["logs"]
                .as_array()
                .unwrap_or_else(|| panic!("{line}"))
                .iter()
                .map(|log| log["message"].as_str().unwrap().to_string())
                .collect();
            (
                finished["state"].as_str().unwrap_or("").to_string(),
                finished["exit_code"].clone(),
                messages,
            )
        })
        .collect()
}

/// `outcome` ended in `state` with `exit_code`, each of `messages` among its log messages.
fn assert_outcome(
    outcome: &(String, Value, Vec<String>),
    state: &str,
    exit_code: i64,
    messages: &[&str],
) {
    assert_eq!(
        (outcome.0.as_str(), &outcome.1),
        (state, &json!(exit_code)),
        "{outcome:?}"
    );
    for message in messages {
        assert!(
            outcome.2.iter().any(|logged| logged == message),
            "{outcome:?}"
        );
    }
}

#[test]
fn the_operators_grants_narrow_mcp_runs_and_their_children_as_they_narrow_run() {
    let directory = crate::support::temporary_directory("mcp", "grants");
    std::fs::write(directory.join("present.txt"), "hello\n").unwrap();
    let files = [
        (
            "exec_cat.yaml",
            protocol("exec_cat", "{ exec: [cat, present.txt], id: act }"),
        ),
        (
            "write_out.yaml",
            protocol(
                "write_out",
                "{ write: out/written.txt, content: x, id: act }",
            ),
        ),
        (
            "env_show.yaml",
            protocol("env_show", "{ exec: [env], id: act }"),
        ),
        (
            "shell_run.yaml",
            protocol("shell_run", "{ exec: [sh, -c, 'echo shell ran'], id: act }"),
        ),
        (
            "child.yaml",
            protocol("child", "{ exec: [cat, present.txt], id: act }"),
        ),
        (
            "parent.yaml",
            crate::capabilities::PARENT.replace("permissions: { exec: [echo] }\n", ""),
        ),
    ];
    for (name, text) in files {
        std::fs::write(directory.join(name), text).unwrap();
    }

    // Narrowed: each effect the flags withhold is refused, the grant named; env is filtered.
    let narrowed = outcomes(&directory, NARROWED);
    let [exec_cat, write_out, env_show, shell_run, parent] = &narrowed[..] else {
        panic!("{narrowed:?}")
    };
    assert_outcome(
        exec_cat,
        "denied",
        3,
        &["act: running `cat` is not permitted", "denied exec cat"],
    );
    assert_outcome(
        write_out,
        "denied",
        3,
        &["act: write access to `out/written.txt` is not permitted"],
    );
    assert!(!directory.join("out/written.txt").exists());
    assert_eq!(env_show.0, "done", "{env_show:?}");
    let environment = env_show
        .2
        .iter()
        .find(|line| line.starts_with("stdout="))
        .unwrap();
    assert!(environment.contains("HOME="), "{environment}");
    assert!(!environment.contains("PATH="), "{environment}");
    assert_outcome(
        shell_run,
        "denied",
        3,
        &["act: `shell: true` is not permitted", "denied shell sh"],
    );
    // The child is narrowed with its parent: its `cat` is refused, and the parent sees it end.
    assert_outcome(parent, "refused", 5, &["child ended denied 3"]);

    assert_same_as_run(&directory, NARROWED, &narrowed);

    // Granted by the flags, the same effects run; the shell stays refused while the programs
    // are narrowed, as `run` refuses it.
    let granted = outcomes(&directory, GRANTED);
    assert_same_as_run(&directory, GRANTED, &granted);
    let [exec_cat, write_out, env_show, shell_run, parent] = &granted[..] else {
        panic!("{granted:?}")
    };
    assert_outcome(exec_cat, "done", 0, &["stdout=hello\n"]);
    assert_eq!(write_out.0, "done", "{write_out:?}");
    assert_eq!(
        std::fs::read_to_string(directory.join("out/written.txt")).unwrap(),
        "x"
    );
    let environment = env_show
        .2
        .iter()
        .find(|line| line.starts_with("stdout="))
        .unwrap();
    assert!(environment.contains("PATH="), "{environment}");
    assert_eq!(shell_run.0, "denied", "{shell_run:?}");
    assert_outcome(parent, "done", 0, &[]);

    // Without `--no-shell` and with the programs not narrowed, the shell runs.
    let shell = outcomes(&directory, SHELL_GRANTED);
    assert_same_as_run(&directory, SHELL_GRANTED, &shell);
    assert_eq!(shell[3].0, "done", "{:?}", shell[3]);
    assert!(
        shell[3].2.contains(&"stdout=shell ran\n".to_string()),
        "{:?}",
        shell[3]
    );
}

const NARROWED: &[&str] = &[
    "--allow-exec",
    "env",
    "--allow-write",
    "elsewhere/**",
    "--allow-env",
    "HOME",
    "--no-shell",
];

const GRANTED: &[&str] = &[
    "--allow-exec",
    "cat,env",
    "--allow-write",
    "out/**",
    "--allow-env",
    "HOME,PATH",
];

const SHELL_GRANTED: &[&str] = &["--allow-env", "HOME,PATH"];

/// `protocol-run run` of each protocol under `flags` ends as the MCP run did.
fn assert_same_as_run(
    directory: &std::path::Path,
    flags: &[&str],
    outcomes: &[(String, Value, Vec<String>)],
) {
    for (file, outcome) in FILES.iter().zip(outcomes) {
        let mut arguments = vec![*file, "--state-dir", "run-state"];
        arguments.extend_from_slice(flags);
        let (code, stdout, stderr) = crate::support::run_binary(directory, &arguments);
        let last: Value = serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap();
        assert_eq!(
            (&last["finished"]["state"], &last["finished"]["exit_code"]),
            (&json!(outcome.0), &outcome.1),
            "{file} {flags:?}: {stderr}"
        );
        assert_eq!(json!(code), outcome.1, "{file} {flags:?}: {stderr}");
    }
}
