//! Exec grants mean what they say, through the real binary: a granted launcher (`env`, `find`, `xargs`) cannot start a program it was not granted by any route tried (the ELF loader by its path or through `/proc`, a copy of a program in a write grant, a `#!` script), with reads restricted or not; granted programs still run, `git` included.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// What the forbidden program prints if it runs.
const MARKER: &str = "python ran";

/// Whether this machine confines programs (Landlock) and maps only their code (a mount
/// namespace); the test says so when it does not (or fails, where every test must run).
fn confines(test: &str) -> bool {
    crate::support::requirement::landlock_and_namespaces(test)
}

/// The ELF loader `env` names (`PT_INTERP`), read from the file's bytes.
fn loader() -> String {
    let bytes = std::fs::read("/usr/bin/env").unwrap();
    let start = bytes
        .windows(5)
        .position(|window| window == b"/lib/" || window == b"/lib6")
        .expect("/usr/bin/env names a loader");
    let end = start + bytes[start..].iter().position(|byte| *byte == 0).unwrap();
    String::from_utf8(bytes[start..end].to_vec()).unwrap()
}

/// One `exec` action (id `act`) under `permissions`; its stdout is logged as `out=...`.
fn protocol(permissions: &str, action: &str) -> String {
    format!(
        r#"
id: routes
permissions: {permissions}
states:
  acting:
    entry:
      - {action}
    on:
      done.exec.act:
        target: done
        actions: [{{ log: "out=${{event.data.stdout}}" }}]
      error.exec.act:
        target: done
        actions: [{{ log: "out=${{event.data.stdout}} err=${{event.data.stderr}}" }}]
  done: {{ type: final }}
"#
    )
}

fn run(directory: &Path, permissions: &str, action: &str) -> String {
    std::fs::write(directory.join("routes.yaml"), protocol(permissions, action)).unwrap();
    let (code, stdout, stderr) = run_binary(directory, &["routes.yaml", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stderr}");
    format!("{stdout}{stderr}")
}

/// A directory with `data/`, and in the write grant `w/` a copy of `python3`, a `#!` script
/// running it, and an argument file for `xargs`.
fn prepared(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("exec-routes", name);
    std::fs::create_dir_all(directory.join("data")).unwrap();
    std::fs::create_dir_all(directory.join("w")).unwrap();
    let python = std::fs::canonicalize("/usr/bin/python3").expect("python3 is installed");
    std::fs::copy(&python, directory.join("w/python3")).unwrap();
    let script = directory.join("w/script");
    std::fs::write(&script, format!("#!/usr/bin/python3\nprint('{MARKER}')\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        directory.join("w/args"),
        format!("/usr/bin/python3 -c \"print('{MARKER}')\"\n"),
    )
    .unwrap();
    directory
}

#[test]
fn a_granted_launcher_cannot_start_a_program_that_was_not_granted_by_any_route() {
    if !confines("exec routes") {
        return;
    }
    let loader = loader();
    let print = format!("\"print('{MARKER}')\"");
    let user = String::from_utf8(
        std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let routes = [
        format!("{{ exec: [env, python3, -c, {print}], id: act }}"),
        format!("{{ exec: [env, /proc/self/exe, python3, -c, {print}], id: act }}"),
        format!("{{ exec: [env, {loader}, /usr/bin/id, -un], id: act }}"),
        "{ exec: [env, id, -un], id: act }".to_string(),
        format!("{{ exec: [env, {loader}, /usr/bin/python3, -c, {print}], id: act }}"),
        format!(
            "{{ exec: [env, /proc/self/root{loader}, /usr/bin/python3, -c, {print}], id: act }}"
        ),
        format!(
            "{{ exec: [find, /usr/bin/python3, -maxdepth, '0', -exec, {loader}, '{{}}', -c, {print}, ';'], id: act }}"
        ),
        format!("{{ exec: [xargs, -a, w/args, {loader}], id: act }}"),
        "{ exec: [xargs, -a, w/args], id: act }".to_string(),
        format!("{{ exec: [env, w/python3, -c, {print}], id: act }}"),
        format!("{{ exec: [env, {loader}, w/python3, -c, {print}], id: act }}"),
        "{ exec: [env, w/script], id: act }".to_string(),
        format!("{{ exec: [env, {loader}, w/script], id: act }}"),
        "{ exec: [find, w/script, -exec, '{}', ';'], id: act }".to_string(),
    ];
    for (variant, read) in [
        ("read-data", r#", read: ["data/**"]"#),
        // The copies in the write grant readable too: the loader could open them.
        ("read-data-and-copies", r#", read: ["data/**", "w/**"]"#),
        ("read-anything", ""),
    ] {
        let directory = prepared(variant);
        let permissions = format!(r#"{{ exec: [env, find, xargs, echo], write: ["w/**"]{read} }}"#);
        for route in &routes {
            let output = run(&directory, &permissions, route);
            // python3 prints the marker, `id -un` the user's name.
            assert!(
                !output.contains(&format!("out={MARKER}"))
                    && !output.contains(&format!("out={user}")),
                "{variant}: {route} ran a program that was not granted:\n{output}"
            );
        }
        // Granted programs still run, one started by another included.
        let output = run(
            &directory,
            &permissions,
            "{ exec: [env, echo, granted ran], id: act }",
        );
        assert!(output.contains("out=granted ran"), "{variant}:\n{output}");
    }
}

fn git(repository: &Path, arguments: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(arguments)
        .current_dir(repository)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {arguments:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn git_runs_under_its_grants() {
    if !confines("git under grants") {
        return;
    }
    let directory = temporary_directory("exec-routes", "git");
    let repository = directory.join("repo");
    std::fs::create_dir_all(&repository).unwrap();
    git(&repository, &["init", "--quiet"]);
    std::fs::write(repository.join("notes.txt"), "first\n").unwrap();
    git(&repository, &["add", "notes.txt"]);
    git(&repository, &["commit", "--quiet", "-m", "the first note"]);
    let head = git(&repository, &["rev-parse", "HEAD"]).trim().to_string();
    for read in [r#", read: ["repo", "repo/**"]"#, ""] {
        // As examples/bisect grants it: no environment, so no `~/.gitconfig` to read.
        let permissions = format!("{{ exec: [git], write: [], env: []{read} }}");
        for (arguments, expected) in [
            ("[git, -C, repo, log, --format=%s]", "the first note"),
            ("[git, -C, repo, show, 'HEAD:notes.txt']", "first"),
            ("[git, -C, repo, rev-parse, HEAD]", head.as_str()),
        ] {
            let output = run(
                &directory,
                &permissions,
                &format!("{{ exec: {arguments}, id: act }}"),
            );
            assert!(
                output.contains(&format!("out={expected}")),
                "{arguments} {read}:\n{output}"
            );
        }
    }
}

#[test]
fn validate_names_the_routes_the_granted_programs_leave_open() {
    let directory = temporary_directory("exec-routes", "validate");
    std::fs::write(
        directory.join("routes.yaml"),
        "id: routes\npermissions: { exec: [env, echo, python3] }\nstates:\n  only: { type: final }\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["validate", "routes.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "route: env starts other programs: the other granted programs (echo, python3)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: python3 runs any code it is given"),
        "{stdout}"
    );
    assert!(!stdout.contains("route: echo"), "{stdout}");
}
