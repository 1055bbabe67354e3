//! The official MCP Python SDK in `tests/mcp/.venv`, made with `python3 -m venv` and `pip install -r tests/mcp/requirements.txt` when missing or not the pinned version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The venv's python, checked (and installed) once per test process.
static PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// The python of `tests/mcp/.venv` holding the `mcp` version requirements.txt pins, made first
/// (the lines .ci/run runs) when it is missing or holds another version.
pub fn python() -> PathBuf {
    PYTHON.get_or_init(prepare).clone()
}

fn prepare() -> PathBuf {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    let python = directory.join(".venv/bin/python");
    let pinned = pinned_version(&directory.join("requirements.txt"));
    if installed_version(&python).as_deref() != Some(pinned.as_str()) {
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

/// The version `mcp==VERSION` in requirements.txt pins.
fn pinned_version(requirements: &Path) -> String {
    let text = std::fs::read_to_string(requirements)
        .unwrap_or_else(|error| panic!("tests/mcp/requirements.txt is committed: {error}"));
    text.lines()
        .find_map(|line| line.trim().strip_prefix("mcp=="))
        .unwrap_or_else(|| panic!("tests/mcp/requirements.txt pins no `mcp==VERSION`"))
        .to_owned()
}

fn installed_version(python: &Path) -> Option<String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
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
                "these tests drive the server with the official MCP Python SDK, and {shown} could \
             not start ({error}): install python3 with venv, then run `python3 -m venv \
             tests/mcp/.venv && tests/mcp/.venv/bin/pip install -r tests/mcp/requirements.txt` \
             (as .ci/run does), or set PROTOCOL_RUN_MCP_PYTHON"
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
