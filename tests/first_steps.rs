//! What a new user does first: the README's first commands, and `new` with a modeline that resolves.

use std::path::Path;

use crate::support::{run_binary, temporary_directory};

/// The schema path of a file's modeline, resolved from the file's directory as an editor does.
fn modeline_target(file: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(file).unwrap();
    let first = text.lines().next().unwrap();
    let schema = first
        .strip_prefix("# yaml-language-server: $schema=")
        .unwrap_or_else(|| panic!("{}: {first}", file.display()));
    file.parent().unwrap().join(schema)
}

#[test]
fn new_writes_a_modeline_that_resolves_wherever_the_files_go() {
    let project = temporary_directory("conventions", "new");
    std::fs::create_dir_all(project.join("schemas")).unwrap();
    let (code, stdout, stderr) = run_binary(&project, &["schema", "--out", "schemas"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let outside = temporary_directory("conventions", "new-outside");
    let absolute_inside = project.join("deep/er");
    let cases = [
        // Relative, some levels under the project's `schemas/`.
        (
            "one",
            project.join("protocols/nested"),
            "protocols/nested".to_string(),
        ),
        // Absolute, inside the project.
        (
            "two",
            absolute_inside.clone(),
            absolute_inside.display().to_string(),
        ),
        // The project itself.
        ("three", project.clone(), ".".to_string()),
        // Absolute, with no `schemas/` above: the schemas are written beside the files.
        (
            "four",
            outside.join("flows"),
            outside.join("flows").display().to_string(),
        ),
    ];
    for (name, directory, argument) in &cases {
        let (code, stdout, stderr) = run_binary(&project, &["new", name, "--directory", argument]);
        assert_eq!(code, 0, "{name}: {stderr}");
        for file in [format!("{name}.yaml"), format!("{name}.scenario.yaml")] {
            let path = directory.join(&file);
            let schema = modeline_target(&path);
            assert!(
                schema.is_file(),
                "{name}: {} does not resolve: {stdout}",
                schema.display()
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(project.join("protocols/nested/one.yaml"))
            .unwrap()
            .lines()
            .next(),
        Some("# yaml-language-server: $schema=../../schemas/protocol.schema.json")
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("flows/four.scenario.yaml"))
            .unwrap()
            .lines()
            .next(),
        Some("# yaml-language-server: $schema=./scenario.schema.json")
    );
    // The schema written beside the files is the one `schema` prints.
    let (_, printed, _) = run_binary(&project, &["schema"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("flows/protocol.schema.json")).unwrap(),
        printed
    );
    // The scaffold still passes its own scenarios where the schemas were written beside it.
    let (code, stdout, stderr) = run_binary(&outside, &["test", "flows"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    std::fs::remove_dir_all(&project).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

/// The README's first commands run as a new user types them, from the repository, and end as the
/// README shows: exit 0, in the final state it prints.
#[test]
fn the_readme_first_run_commands_exit_0_as_shown() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first_run = readme
        .split("## First run")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a `## First run` section");
    let commands: Vec<&str> = first_run
        .lines()
        .filter_map(|line| line.strip_prefix("cargo run --release -- "))
        .filter(|arguments| arguments.starts_with("protocols/"))
        .collect();
    assert_eq!(commands.len(), 2, "{first_run}");
    assert!(
        readme.find("cargo run --release -- protocols/ittw.yaml")
            < readme.find("```sh\ncargo test"),
        "the first command runs ITTW"
    );
    let state = temporary_directory("conventions", "readme");
    for arguments in commands {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(arguments.split_whitespace())
            .env("PROTOCOL_RUN_STATE_DIR", &state)
            .current_dir(root)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{arguments}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let finished = stdout.lines().last().unwrap_or_default();
        let state_name = finished
            .split("\"state\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("{arguments}: {stdout}"));
        assert!(
            first_run.contains(&format!("{{\"finished\":{{\"state\":\"{state_name}\"")),
            "{arguments}: the README shows another final state than {state_name}"
        );
    }
    std::fs::remove_dir_all(&state).unwrap();
}

/// "Using it" calls `protocol-run`: before its first command it says how to get one.
#[test]
fn the_readme_says_how_to_install_protocol_run_before_using_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let using = readme
        .split("## Using it")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a `## Using it` section");
    let install = using
        .find("\ncargo install --path .\n")
        .unwrap_or_else(|| panic!("no install step in:\n{using}"));
    let first_use = using.find("\nprotocol-run ").expect("a command");
    assert!(install < first_use, "{using}");
    // What it installs is the binary these commands call.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"protocol-run\""), "{manifest}");
    let (code, version, _) = run_binary(root, &["--version"]);
    assert_eq!(code, 0);
    assert!(version.starts_with("protocol-run "), "{version}");
}
