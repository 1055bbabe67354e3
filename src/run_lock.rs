//! The lock a process holds on a run while it drives it: a second `resume` of the same run is refused (naming the holder), and pruning spares a live run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock file's name inside the run's directory (`<state dir>/runs/<run id>/`).
pub const RUN_LOCK: &str = "run.lock";

/// An exclusive `flock` on a run, released when dropped or when the process dies, so a run
/// whose process was killed can be resumed at once.
#[derive(Debug)]
pub struct RunLock {
    _lock: Flock<File>,
}

/// Why a run could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum RunLockError {
    #[error(
        "run `{run_id}` is being run by another process (pid {holder}, holding {}); wait for \
         it to end, or stop it, then resume",
        path.display()
    )]
    Held {
        run_id: String,
        holder: String,
        path: PathBuf,
    },
    #[error("cannot lock run `{run_id}` ({}): {source}", path.display())]
    Io {
        run_id: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RunLock {
    /// Takes the lock of `run_id` in `runs` (the telemetry directory), without waiting, and
    /// writes this process's id into it for whoever finds it held.
    pub fn acquire(runs: &Path, run_id: &str) -> Result<RunLock, RunLockError> {
        let path = runs.join(run_id).join(RUN_LOCK);
        let failed = |source: std::io::Error| RunLockError::Io {
            run_id: run_id.to_string(),
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(runs.join(run_id)).map_err(failed)?;
        let file = open(&path, true).map_err(failed)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // The holder's id is a courtesy for the message of a refused resume: a disk too
                // full to take it leaves the lock held all the same.
                let _ = lock
                    .set_len(0)
                    .and_then(|()| lock.rewind())
                    .and_then(|()| write!(*lock, "{}", std::process::id()));
                Ok(RunLock { _lock: lock })
            }
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                Err(RunLockError::Held {
                    run_id: run_id.to_string(),
                    holder: if holder.is_empty() {
                        "unknown".into()
                    } else {
                        holder.to_string()
                    },
                    path,
                })
            }
            Err((_, errno)) => Err(failed(errno.into())),
        }
    }

    /// For pruning the run whose directory is `directory`: its lock, held while the caller
    /// deletes the directory (`None` when it has no lock file), or `Err(Live)` when a process
    /// holds it.
    pub fn unless_live(directory: &Path) -> Result<Option<RunLock>, Live> {
        let Ok(file) = open(&directory.join(RUN_LOCK), false) else {
            return Ok(None);
        };
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(Some(RunLock { _lock: lock })),
            Err((_, Errno::EWOULDBLOCK)) => Err(Live),
            Err(_) => Ok(None),
        }
    }
}

/// A run a process is driving.
#[derive(Debug)]
pub struct Live;

/// Opens a lock file (creating it when asked) without following a link planted under its name.
fn open(path: &Path, create: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}
