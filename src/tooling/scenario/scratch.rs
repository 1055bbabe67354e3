//! A scenario's scratch directory: the working directory of its run, kept only when it fails.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use indexmap::IndexMap;

/// One scenario at a time may own the process's working directory.
static WORKING_DIRECTORY: Mutex<()> = Mutex::new(());

/// Numbers the scratch directories of one process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh directory, made the process's working directory until `leave`.
pub struct Scratch {
    pub directory: PathBuf,
    previous: PathBuf,
    _owner: std::sync::MutexGuard<'static, ()>,
}

impl Scratch {
    /// Creates the directory under the system's temporary directory, writes `files` into it and
    /// enters it. The working directory is the process's: nothing else in the process may use
    /// relative paths meanwhile (the `test` command runs nothing else).
    pub fn enter(files: &IndexMap<String, String>) -> Result<Scratch, String> {
        let owner = WORKING_DIRECTORY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let previous = std::env::current_dir()
            .map_err(|error| format!("cannot read the working directory: {error}"))?;
        let directory = std::env::temp_dir().join(format!(
            "protocol-run-scenario-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // A directory left by an earlier process with the same id would make a stale file pass.
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory)
            .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        if let Err(message) = write_files(&directory, files) {
            // Nothing ran: there is nothing to look at.
            let _ = std::fs::remove_dir_all(&directory);
            return Err(message);
        }
        std::env::set_current_dir(&directory)
            .map_err(|error| format!("cannot enter {}: {error}", directory.display()))?;
        Ok(Scratch {
            directory,
            previous,
            _owner: owner,
        })
    }

    /// Goes back to the previous working directory; removes the directory unless `keep`, and
    /// returns it when kept.
    pub fn leave(self, keep: bool) -> Option<PathBuf> {
        let _ = std::env::set_current_dir(&self.previous);
        if keep {
            Some(self.directory.clone())
        } else {
            let _ = std::fs::remove_dir_all(&self.directory);
            None
        }
    }
}

/// Writes each of `files` (path → content) under `directory`.
fn write_files(directory: &Path, files: &IndexMap<String, String>) -> Result<(), String> {
    for (path, content) in files {
        let target = directory.join(inside(path)?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("files: cannot create {}: {error}", parent.display()))?;
        }
        std::fs::write(&target, content)
            .map_err(|error| format!("files: cannot write {}: {error}", target.display()))?;
    }
    Ok(())
}

/// `path` if it stays inside the scratch directory (relative, no `..`).
pub fn inside(path: &str) -> Result<&Path, String> {
    let relative = Path::new(path);
    let escapes = relative
        .components()
        .any(|component| !matches!(component, Component::Normal(_) | Component::CurDir));
    if path.is_empty() || escapes {
        Err(format!(
            "files: `{path}` is not a relative path inside the scratch directory (no `/` at the \
             start, no `..`)"
        ))
    } else {
        Ok(relative)
    }
}
