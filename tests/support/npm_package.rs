//! A package pinned in a test's own npm directory (`tests/editor`, `tests/inspector`, `tests/mcp-tasks`), installed with `npm ci` when missing or not the pinned version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// Held while a package is checked and installed, so tests running at once never run two
/// `npm ci` in one directory.
static INSTALLING: Mutex<()> = Mutex::new(());

/// The directory of `package` in `tests/DIRECTORY/node_modules`, installed first with
/// `npm ci` (the line .ci/run runs) when it is missing or not the version package.json pins.
pub fn installed(directory: &str, package: &str) -> PathBuf {
    let _installing = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    // Canonical, because npm takes a symlinked prefix for a link to another package.
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(directory)
        .canonicalize()
        .unwrap_or_else(|error| panic!("tests/{directory} is committed: {error}"));
    let installed_at = prefix.join("node_modules").join(package);
    if installed_version(&installed_at) != Some(pinned_version(&prefix, directory, package)) {
        install(&prefix, directory, package);
    }
    installed_at
}

fn pinned_version(prefix: &Path, directory: &str, package: &str) -> String {
    let manifest = std::fs::read_to_string(prefix.join("package.json"))
        .unwrap_or_else(|error| panic!("tests/{directory}/package.json is committed: {error}"));
    let manifest: Value = serde_json::from_str(&manifest)
        .unwrap_or_else(|error| panic!("tests/{directory}/package.json is not JSON: {error}"));
    manifest["dependencies"][package]
        .as_str()
        .unwrap_or_else(|| panic!("tests/{directory}/package.json pins no `{package}`"))
        .to_owned()
}

fn installed_version(package: &Path) -> Option<String> {
    let manifest = std::fs::read_to_string(package.join("package.json")).ok()?;
    let manifest: Value = serde_json::from_str(&manifest).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

fn install(prefix: &Path, directory: &str, package: &str) {
    let command = format!("npm ci --prefix tests/{directory} --no-audit --no-fund");
    let output = Command::new("npm")
        .arg("ci")
        .arg("--prefix")
        .arg(prefix)
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "this test needs npm to install {package} ({error}): install Node.js 20 or later \
                 with npm, then run `{command}` (as .ci/run does)"
            )
        });
    assert!(
        output.status.success(),
        "`{command}` failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
