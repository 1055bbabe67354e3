//! Pinned Python packages in a venv of their own, made with `python3 -m venv` and `pip install -r requirements.txt` when missing or not the pinned version: the official MCP Python SDK in `tests/mcp/.venv`, OpenTelemetry's protobuf definitions in `tests/otlp/.venv`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Each venv's python, checked (and installed) once per test process.
static PYTHON: OnceLock<PathBuf> = OnceLock::new();
static OTLP_PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// The python of `tests/mcp/.venv` holding the `mcp` version requirements.txt pins, made first
/// (the lines .ci/run runs) when it is missing or holds another version.
pub fn python() -> PathBuf {
    PYTHON.get_or_init(|| prepare("tests/mcp", "mcp")).clone()
}

/// The python of `tests/otlp/.venv` holding the `opentelemetry-proto` version its
/// requirements.txt pins, made first when it is missing or holds another version.
pub fn otlp_python() -> PathBuf {
    OTLP_PYTHON
        .get_or_init(|| prepare("tests/otlp", "opentelemetry-proto"))
        .clone()
}

/// The venv of `directory` (from the repository's root) with `package` at its pinned version.
fn prepare(directory: &str, package: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join(directory);
    let python = directory.join(".venv/bin/python");
    let pinned = pinned_version(&directory.join("requirements.txt"), package);
    if installed_version(&python, package).as_deref() != Some(pinned.as_str()) {
        if !python.exists() {
            run(Command::new("python3")
                .args(["-m", "venv"])
                .arg(directory.join(".venv")));
        }
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(directory.join("requirements.txt")));
    }
    python
}

/// The version `PACKAGE==VERSION` in requirements.txt pins.
fn pinned_version(requirements: &Path, package: &str) -> String {
    let shown = requirements.display();
    let text = std::fs::read_to_string(requirements)
        .unwrap_or_else(|error| panic!("{shown} is committed: {error}"));
    let prefix = format!("{package}==");
    text.lines()
        .find_map(|line| line.trim().strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("{shown} pins no `{package}==VERSION`"))
        .to_owned()
}

fn installed_version(python: &Path, package: &str) -> Option<String> {
    let output = Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version('{package}'))"),
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn run(command: &mut Command) {
    let shown = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "these tests need pinned Python packages, and {shown} could not start ({error}): \
             install python3 with venv, then run `python3 -m venv tests/DIRECTORY/.venv && \
             tests/DIRECTORY/.venv/bin/pip install -r tests/DIRECTORY/requirements.txt` (as \
             .ci/run does)"
            )
        });
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
