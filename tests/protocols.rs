//! Every protocol and example in the repository validates, compiles and carries the schema modeline.

use std::path::{Path, PathBuf};

/// The protocols under `directory`: YAML files other than scenarios and libraries.
fn yaml_files(directory: &str) -> Vec<PathBuf> {
    files_under(directory, |name| {
        name.ends_with(".yaml")
            && !name.ends_with(".scenario.yaml")
            && !name.ends_with(".library.yaml")
    })
}

/// The library files (`*.library.yaml`) under `directory`: blocks and policies that protocols
/// import, read when a protocol importing them compiles.
fn library_files(directory: &str) -> Vec<PathBuf> {
    files_under(directory, |name| name.ends_with(".library.yaml"))
}

/// The files under `directory` (at any depth) whose name `wanted` accepts, sorted.
fn files_under(directory: &str, wanted: fn(&str) -> bool) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(directory);
    let mut pending = vec![root];
    let mut files = Vec::new();
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if wanted(&path.to_string_lossy()) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Each library carries the library schema's modeline.
#[test]
fn libraries_carry_the_library_modeline() {
    for path in library_files("examples")
        .into_iter()
        .chain(library_files("protocols"))
    {
        let text = std::fs::read_to_string(&path).unwrap();
        let first_line = text.lines().next().unwrap_or_default();
        assert!(
            first_line.starts_with("# yaml-language-server: $schema=")
                && first_line.ends_with("schemas/library.schema.json"),
            "{} does not start with the library schema modeline",
            path.display()
        );
    }
}

fn check_directory(directory: &str) {
    let files = yaml_files(directory);
    assert!(!files.is_empty(), "no protocols in {directory}/");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let first_line = text.lines().next().unwrap_or_default();
        assert!(
            first_line.starts_with("# yaml-language-server: $schema=")
                && first_line.ends_with("schemas/protocol.schema.json"),
            "{} does not start with the schema modeline",
            path.display()
        );
        let schema_reference = first_line.trim_start_matches("# yaml-language-server: $schema=");
        let schema_path = path.parent().unwrap().join(schema_reference);
        assert!(
            schema_path.exists(),
            "{}: modeline points at {}",
            path.display(),
            schema_path.display()
        );
        let loaded = protocol_run::pipeline::load::load_file(&path)
            .unwrap_or_else(|error| panic!("{error}"));
        if let Err(diagnostics) = protocol_run::pipeline::compile::compile(&loaded) {
            panic!(
                "{}",
                protocol_run::base::diagnostic::render_all(&diagnostics)
            );
        }
    }
}

#[test]
fn protocols_validate() {
    check_directory("protocols");
}

#[test]
fn examples_validate() {
    check_directory("examples");
}

/// Each `<!-- example: PATH -->` block in the format guide shows that file exactly.
#[test]
fn format_guide_shows_the_examples_as_they_are() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/protocol-format.md")).unwrap();
    let mut shown_paths = Vec::new();
    for block in guide.split("<!-- example: ").skip(1) {
        let (path, rest) = block
            .split_once(" -->\n```yaml\n")
            .expect("example marker followed by a yaml block");
        let shown = rest.split("```\n").next().unwrap();
        let file = std::fs::read_to_string(root.join(path)).unwrap();
        assert_eq!(
            shown, file,
            "docs/protocol-format.md shows a stale copy of {path}"
        );
        shown_paths.push(root.join(path));
    }
    // Every protocol and library example appears (scenario files may too).
    for file in yaml_files("examples/features")
        .into_iter()
        .chain(library_files("examples/features"))
    {
        assert!(
            shown_paths.contains(&file),
            "{} does not appear in the guide",
            file.display()
        );
    }
}

/// `protocol-run check --deny-warnings` finds nothing in the shipped protocols.
#[test]
fn protocols_pass_the_lint() {
    for path in yaml_files("protocols") {
        let loaded = protocol_run::pipeline::load::load_file(&path)
            .unwrap_or_else(|error| panic!("{error}"));
        let machine =
            protocol_run::pipeline::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
                panic!(
                    "{}",
                    protocol_run::base::diagnostic::render_all(&diagnostics)
                )
            });
        let warnings = protocol_run::tooling::lint::check(&loaded, &machine);
        assert!(
            warnings.is_empty(),
            "{}",
            protocol_run::base::diagnostic::render_all(&warnings)
        );
    }
}

fn run_binary(arguments: &[&str], directory: &Path) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(arguments)
        .args(["--state-dir", directory.join("state").to_str().unwrap()])
        .current_dir(directory)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn scratch_directory(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("protocols", name)
}

/// ADR-018's ladder through the wrapper: 120000, 240000 and 360000 ms, with the fields of each
/// telemetry event.
#[test]
fn the_timeout_wrapper_climbs_the_adr_018_ladder() {
    let directory = scratch_directory("wrapper-ladder");
    let protocol = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/timeout-wrapper.yaml");
    let (code, stdout, stderr) = run_binary(
        &[
            protocol.to_str().unwrap(),
            "--virtual-time",
            "--mock",
            "operation=timeout,timeout,ok",
            "--input",
            "command=[make, test]",
            "--input",
            "telemetry_prefix=make",
            "--log-format",
            "json",
        ],
        &directory,
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let fields = |tag: &str| -> Vec<serde_json::Value> {
        lines
            .iter()
            .filter(|line| line["tags"] == serde_json::json!([tag]))
            .map(|line| line["fields"].clone())
            .collect()
    };
    let attempts = fields("make_timeout_attempt");
    let timeouts: Vec<i64> = attempts
        .iter()
        .map(|fields| fields["timeout_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(timeouts, [120_000, 240_000, 360_000]);
    assert_eq!(attempts[2]["attempt"], 3);
    assert_eq!(attempts[2]["max_retries"], 5);
    assert_eq!(attempts[2]["multiplier"], 3.0);
    let retries = fields("make_timeout_retry");
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[1]["timeout_ms"], 240_000);
    let success = fields("make_timeout_success");
    assert_eq!(success[0]["attempts"], 3);
    assert_eq!(success[0]["final_timeout_ms"], 360_000);
    assert_eq!(success[0]["elapsed_ms"], 364_000);
    let finished: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(finished["finished"]["output"]["attempts"], 3);
}

/// Other protocols invoke the wrapper; a real command runs through it.
#[test]
fn a_parent_invokes_the_timeout_wrapper_on_a_real_command() {
    let directory = scratch_directory("wrapper-invoke");
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/timeout-wrapper.yaml");
    let parent = format!(
        r#"
id: parent
states:
  building:
    invoke:
      - protocol: {wrapper}
        id: wrapped
        inputs: {{ command: "[echo, built]", base_timeout: 5s, telemetry_prefix: build }}
    on:
      done.invoke.wrapped:
        target: done
        actions: [{{ log: "wrapped said ${{event.data.result}}" }}]
      error.invoke.wrapped: failed
  done: {{ type: final, output: {{ result: "${{event.data.result}}" }} }}
  failed: {{ type: final, exit_code: 1 }}
"#,
        wrapper = wrapper.display()
    );
    let path = directory.join("parent.yaml");
    std::fs::write(&path, parent).unwrap();
    let (code, stdout, stderr) = run_binary(&[path.to_str().unwrap()], &directory);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""result":"built\n""#), "{stdout}");
    assert!(stderr.contains("#build_timeout_success"), "{stderr}");
}

/// The escalation protocol appends to `failure_escalations` in an existing `workflow.json`
/// and keeps everything else in it, in order.
#[test]
fn escalation_keeps_the_rest_of_an_existing_workflow_json() {
    let directory = scratch_directory("escalation-workflow");
    let state = directory.join("state-dir");
    std::fs::create_dir_all(&state).unwrap();
    let original = serde_json::json!({
        "prp_file": "PRPs/parser.md",
        "validation_results": { "level_1": "passed" },
        "failure_escalations": [{ "escalation_id": "esc-earlier", "level": 1 }],
        "transformation_history": [],
    });
    std::fs::write(state.join("workflow.json"), original.to_string()).unwrap();
    let protocol = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/escalation.yaml");
    let state_input = format!("state_dir={}", state.display());
    let (code, _, stderr) = run_binary(
        &[
            protocol.to_str().unwrap(),
            "--virtual-time",
            "--input",
            "attempt_count=5",
            "--input",
            "error_message=ENOENT: no such file or directory",
            "--input",
            "failed_task=task-3",
            "--input",
            "validation_level=2",
            "--input",
            &state_input,
        ],
        &directory,
    );
    assert_eq!(code, 3, "level 2 exits 3: {stderr}");
    let text = std::fs::read_to_string(state.join("workflow.json")).unwrap();
    let workflow: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = workflow.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "prp_file",
            "validation_results",
            "failure_escalations",
            "transformation_history"
        ]
    );
    assert_eq!(
        workflow["validation_results"],
        original["validation_results"]
    );
    let escalations = workflow["failure_escalations"].as_array().unwrap();
    assert_eq!(escalations.len(), 2);
    assert_eq!(escalations[0], original["failure_escalations"][0]);
    let entry = &escalations[1];
    assert_eq!(entry["level"], 2);
    assert_eq!(entry["failed_task"], "task-3");
    assert_eq!(entry["attempt_count"], 5);
    assert_eq!(entry["resolution"], "modified");
    let timestamp = entry["timestamp"].as_str().unwrap();
    assert_eq!(entry["escalation_id"], format!("esc-{timestamp}"));
}

/// docs/protocols.md shows every protocol's diagram as `protocol-run graph` draws it today.
#[test]
fn the_protocols_guide_shows_current_diagrams() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/protocols.md")).unwrap();
    for path in yaml_files("protocols") {
        let loaded = protocol_run::pipeline::load::load_file(&path).unwrap();
        let machine = protocol_run::pipeline::compile::compile(&loaded).unwrap();
        let diagram = protocol_run::tooling::graph::mermaid(&machine);
        let block = format!("```mermaid\n{}\n```", diagram.trim_end());
        assert!(
            guide.contains(&block),
            "docs/protocols.md lacks the current diagram of {}; paste the output of \
             `protocol-run graph {} --format mermaid`",
            path.display(),
            path.display()
        );
    }
}

/// The happy paths run for real, with no mocks: a tool call, an environment check, a guarded
/// edit of a JSON file.
#[test]
fn the_resilience_protocols_run_for_real() {
    let directory = scratch_directory("resilience-real");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let protocol = |name: &str| root.join("protocols").join(name).display().to_string();
    let readme = root.join("README.md").display().to_string();
    let (code, stdout, stderr) = run_binary(
        &[
            &protocol("resilience-tool-failure.yaml"),
            "--input",
            &format!("command=[cat, {readme}]"),
            "--input",
            "tool=read_file",
            "--input",
            &format!("target={readme}"),
        ],
        &directory,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""tier":"attempt""#), "{stdout}");
    let (code, _, stderr) = run_binary(
        &[
            &protocol("resilience-environment-check.yaml"),
            "--virtual-time",
            "--input",
            "every_cycles=1",
            "--input",
            "max_cycles=1",
            "--input",
            "tools=[cat]",
            "--input",
            "directories=[.]",
            "--input",
            "env_vars=[PATH]",
        ],
        &directory,
    );
    assert_eq!(code, 0, "{stderr}");
    let state = directory.join("state.json");
    std::fs::write(&state, r#"{"version": 1}"#).unwrap();
    // The edit copies the next version over the file: it may read that, and nothing else.
    let next = directory.join("next.json");
    std::fs::write(&next, r#"{"version": 2}"#).unwrap();
    let (code, _, stderr) = run_binary(
        &[
            &protocol("resilience-state-validation.yaml"),
            "--input",
            &format!("file={}", state.display()),
            "--input",
            &format!("edit=[cp, {}, {}]", next.display(), state.display()),
            "--input",
            &format!("edit_reads=[{}]", next.display()),
        ],
        &directory,
    );
    assert_eq!(code, 0, "{stderr}");
    let edited: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(edited["version"], 2);
}
