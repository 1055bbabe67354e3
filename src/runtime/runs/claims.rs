//! Who holds a run: exactly one holder, recorded with the run in the store, live while it holds its lock file; a second driver is refused (exit 75), naming the holder.
//!
//! The rule, for `run`, `resume`, `serve` and `mcp` alike:
//! - A holder is a process and the lock file it holds while it lives: a host (`serve`, `mcp`)
//!   holds its state directory's `host.lock`, whatever number of runs it drives (no descriptor
//!   per run); `run` and `resume` hold the run's own `runs/<run id>/run.lock`. The lock file
//!   names the holder's pid.
//! - Claiming a run records its holder in the store, in one transaction with reading the holder
//!   recorded before: a run whose recorded holder is still live is refused, naming it.
//! - A recorded holder is live while its lock file is held (a non-blocking lock attempt fails)
//!   and names its pid. A holder that died released its lock, so its runs are taken over by
//!   the next claimant; a holder recorded with the lock this process holds is this process or
//!   one that died.
//! - Stopping or finishing a run releases its holder (the store clears it).
//! - A child runs inside its parent's session: it is held with its parent, by its parent's
//!   holder; its own row (`<run>/<invoke id>`) is never claimed.
//!
//! - Each claim moves the run's fencing token on; the store that claimed the run refuses its
//!   own later writes to it once another claim moved the token again (`StoreError::Fenced`).
//!
//! A database lease with an expiry is the same rule with one more field on the holder.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::store::{Holder, Store, StoreError, Unclaimed};

/// The lock file of the host serving a state directory (`serve`, `mcp`).
pub const HOST_LOCK: &str = "host.lock";

/// The lock file of a run driven on its own (`run`, `resume`), in its telemetry directory
/// (`<state dir>/runs/<run id>/`).
pub const RUN_LOCK: &str = "run.lock";

/// The exit code of a driver refused because another holds the run or the state directory:
/// try again once it ends. (A child protocol's run is refused with 64: it is the wrong run to
/// name.)
pub const HELD_EXIT_CODE: u8 = 75;

/// The exit code of a claim the file system or the store failed.
pub const FAILED_EXIT_CODE: u8 = 74;

/// This process as a holder: the lock it holds until it ends, and the record it leaves on the
/// runs it claims.
#[derive(Debug)]
pub struct HolderLock {
    _lock: Flock<File>,
    holder: Holder,
}

/// Why a run, or a state directory, was not claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(
        "run `{run}` is being run by another process (pid {}, holding {}{}); wait for it to \
         end, or stop it, then resume",
        holder.pid,
        holder.lock,
        described(&holder.process)
    )]
    Held { run: String, holder: Holder },
    #[error(
        "run `{run}` is a child protocol of run `{parent}`: it runs, stops and resumes with it \
         (and is held with it); resume `{parent}`"
    )]
    Child { run: String, parent: String },
    #[error(
        "run `{run}` has finished: nobody drives it any more (`protocol-run fork` starts a new \
         run from one of its steps)"
    )]
    Finished { run: String },
    #[error(
        "another host (pid {pid}) serves the state directory {}: stop it first, or give this one \
         another --state-dir",
        directory.display()
    )]
    HostHeld { pid: String, directory: PathBuf },
    #[error("cannot take the lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClaimError {
    /// 75 when another holds what was claimed (try again later), 74 when a file or the store
    /// failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClaimError::Held { .. } | ClaimError::HostHeld { .. } => HELD_EXIT_CODE,
            ClaimError::Child { .. } | ClaimError::Finished { .. } => crate::base::exit_code::USAGE,
            ClaimError::Lock { .. } | ClaimError::Store(_) => FAILED_EXIT_CODE,
        }
    }
}

/// `, a \`serve\` host` for the message of a refused claim; nothing for `run` and `resume`,
/// whose lock file already says which run they drive.
fn described(process: &str) -> String {
    match process {
        "serve" | "mcp" => format!(", a `{process}` host"),
        _ => String::new(),
    }
}

impl HolderLock {
    /// The claim of a host (`process`: `serve` or `mcp`) on `state_dir`: one host per state
    /// directory, since two would resume and drive the same runs. Refused naming the host
    /// that holds it.
    pub fn host(state_dir: &Path, process: &str) -> Result<HolderLock, ClaimError> {
        let path = state_dir.join(HOST_LOCK);
        match HolderLock::take(&path, process)? {
            Ok(lock) => Ok(lock),
            Err(pid) => Err(ClaimError::HostHeld {
                pid,
                directory: state_dir.to_path_buf(),
            }),
        }
    }

    /// Claims one run for this process (`process`: `run` or `resume`): its own lock, then the
    /// run in `store` (a run `store` does not hold yet is the caller's to create, recording
    /// `holder()`).
    pub fn run(
        store: &mut dyn Store,
        state_dir: &Path,
        run: &str,
        process: &str,
    ) -> Result<HolderLock, ClaimError> {
        let lock = HolderLock::run_lock(state_dir, run, process)?;
        lock.claim_one(store, run)?;
        Ok(lock)
    }

    /// Claims one run for a redrive: as `run` does, except that a finished run, which no claim
    /// takes, is left to the redrive's reopening (`Store::reopen_run`) to claim in the store,
    /// this process holding its lock meanwhile.
    pub fn run_to_reopen(
        store: &mut dyn Store,
        state_dir: &Path,
        run: &str,
    ) -> Result<HolderLock, ClaimError> {
        let lock = HolderLock::run_lock(state_dir, run, "redrive")?;
        match lock.claim_one(store, run) {
            Ok(()) | Err(ClaimError::Finished { .. }) => Ok(lock),
            Err(error) => Err(error),
        }
    }

    /// The run's own lock file, taken: the run is this process's to claim in the store.
    fn run_lock(state_dir: &Path, run: &str, process: &str) -> Result<HolderLock, ClaimError> {
        let path = crate::runtime::telemetry::runs_directory(state_dir)
            .join(run)
            .join(RUN_LOCK);
        let lock = match HolderLock::take(&path, process)? {
            Ok(lock) => lock,
            Err(pid) => {
                return Err(ClaimError::Held {
                    run: run.to_string(),
                    holder: Holder {
                        process: process.to_string(),
                        pid: pid.parse().unwrap_or_default(),
                        lock: path.display().to_string(),
                        host: None,
                    },
                });
            }
        };
        Ok(lock)
    }

    /// What this process records on the runs it claims.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// Claims one run in `store`, or says which live holder has it.
    pub fn claim_one(&self, store: &mut dyn Store, run: &str) -> Result<(), ClaimError> {
        let mut claimed = self.claim(store, &[run.to_string()])?;
        claimed.pop().unwrap_or(Ok(()))
    }

    /// Claims `runs` in `store` for this process (`claim`).
    pub fn claim(
        &self,
        store: &mut dyn Store,
        runs: &[String],
    ) -> Result<Vec<Result<(), ClaimError>>, StoreError> {
        claim(store, &self.holder, runs)
    }

    /// Takes the lock file at `path` without waiting and writes this process's pid into it; when
    /// another process holds it, the pid that file names.
    fn take(path: &Path, process: &str) -> Result<Result<HolderLock, String>, ClaimError> {
        let failed = |source: std::io::Error| ClaimError::Lock {
            path: path.to_path_buf(),
            source,
        };
        let (Some(directory), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(failed(std::io::Error::other("not a file's path")));
        };
        std::fs::create_dir_all(directory).map_err(failed)?;
        // Recorded absolute: another process, in another working directory, probes it.
        let path = &directory.canonicalize().map_err(failed)?.join(name);
        let file = open(path, true).map_err(failed)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // The pid is part of the holder: a lock file naming another pid is held by a
                // process other than the one a run records.
                lock.set_len(0)
                    .and_then(|()| lock.rewind())
                    .and_then(|()| write!(*lock, "{}", std::process::id()))
                    .and_then(|()| lock.sync_data())
                    .map_err(failed)?;
                Ok(Ok(HolderLock {
                    _lock: lock,
                    holder: Holder {
                        process: process.to_string(),
                        pid: std::process::id(),
                        lock: path.display().to_string(),
                        host: crate::runtime::runs::lease::current().map(str::to_string),
                    },
                }))
            }
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                Ok(Err(if pid.is_empty() {
                    "unknown".to_string()
                } else {
                    pid.to_string()
                }))
            }
            Err((_, errno)) => Err(failed(errno.into())),
        }
    }
}

/// Claims `runs` in `store` for `mine`, a holder whose lock this process holds (a host's
/// fleet records its host's), in one transaction: each is claimed, or refused naming the live
/// holder that has it. Each other holder's lock is probed once, however many runs it holds.
pub fn claim(
    store: &mut dyn Store,
    mine: &Holder,
    runs: &[String],
) -> Result<Vec<Result<(), ClaimError>>, StoreError> {
    let mut probed: std::collections::HashMap<Holder, bool> = Default::default();
    let others = store.claim_runs(runs, mine, &mut |other| {
        // A holder on another machine: its lock file is not this machine's to probe, and its
        // lease tells (the store checks it).
        if other
            .host
            .as_deref()
            .is_some_and(|lease| !crate::runtime::runs::lease::is_this_machine(lease))
        {
            return true;
        }
        // This process holds its lock exclusively: a holder recorded with the same lock is
        // this process, or one that died.
        if other.lock == mine.lock {
            return false;
        }
        *probed
            .entry(other.clone())
            .or_insert_with(|| is_live(other))
    })?;
    Ok(runs
        .iter()
        .zip(others)
        .map(|(run, other)| match other {
            None => Ok(()),
            Some(Unclaimed::Held(holder)) => Err(ClaimError::Held {
                run: run.clone(),
                holder,
            }),
            Some(Unclaimed::Child { parent }) => Err(ClaimError::Child {
                run: run.clone(),
                parent,
            }),
            Some(Unclaimed::Finished) => Err(ClaimError::Finished { run: run.clone() }),
        })
        .collect())
}

/// Whether `holder` still holds what it claimed: its lock file is held (a non-blocking lock
/// attempt fails) and names its pid. A lock this cannot probe counts as held: a claim fails
/// closed.
pub fn is_live(holder: &Holder) -> bool {
    let file = match open(Path::new(&holder.lock), false) {
        Ok(file) => file,
        // No lock file: its holder is gone (pruned with its run's directory).
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        // Nobody held it: the probe's own lock is released as it drops.
        Ok(_) => false,
        Err((mut file, Errno::EWOULDBLOCK)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            pid.trim() == holder.pid.to_string()
        }
        Err(_) => true,
    }
}

/// For pruning the run whose directory is `directory`: its run lock, held while the caller
/// deletes the directory (`None` when it has no lock file), or `Err(Live)` when a process
/// holds it.
pub fn unless_live(directory: &Path) -> Result<Option<PruneLock>, Live> {
    let Ok(file) = open(&directory.join(RUN_LOCK), false) else {
        return Ok(None);
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(PruneLock { _lock: lock })),
        Err((_, Errno::EWOULDBLOCK)) => Err(Live),
        Err(_) => Ok(None),
    }
}

/// A run's lock taken to delete its directory.
#[derive(Debug)]
pub struct PruneLock {
    _lock: Flock<File>,
}

/// A run a process is driving.
#[derive(Debug)]
pub struct Live;

/// Opens a lock file (creating it, for the operator alone, when asked) without following a
/// link planted under its name: a lock must not create or open a file elsewhere.
fn open(path: &Path, create: bool) -> std::io::Result<File> {
    // Read and write access: flock over NFS is emulated with fcntl locks, which need it.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}
