//! Atomic file operations: replace via temporary file, fsync and rename; whole-line appends; locks.

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Numbers the temporary files of this process, so concurrent writers never share one.
static TEMPORARY_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `content` to `path` so that readers see the old file or the new one, never a part.
/// An existing file keeps its permissions; parent directories are created.
pub fn write_atomically(path: &Path, content: &[u8]) -> std::io::Result<()> {
    // Replacing a file must not silently widen or narrow who may read it.
    let permissions = std::fs::metadata(path)
        .ok()
        .map(|metadata| metadata.permissions());
    replace_atomically(path, permissions, |file| file.write_all(content))
}

/// Copies `source` over `destination` so that the destination is never seen half-written.
/// The copy gets the source's permissions, as `cp` does. Returns the bytes copied.
pub fn copy_atomically(source: &Path, destination: &Path) -> std::io::Result<u64> {
    let mut source_file = File::open(source)?;
    let permissions = source_file.metadata()?.permissions();
    let mut copied = 0;
    replace_atomically(destination, Some(permissions), |file| {
        copied = std::io::copy(&mut source_file, file)?;
        Ok(())
    })?;
    Ok(copied)
}

/// Appends `line`, plus a newline if it lacks one, and fsyncs. The line goes out in one `write`
/// on a file opened with O_APPEND, so concurrent appenders on a local filesystem never
/// interleave partial lines. Returns the bytes written.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<u64> {
    let directory = parent_directory(path);
    std::fs::create_dir_all(directory)?;
    let mut buffer = Vec::with_capacity(line.len() + 1);
    buffer.extend_from_slice(line.as_bytes());
    if !line.ends_with('\n') {
        buffer.push(b'\n');
    }
    // Knowing whether this call created the file tells whether the directory needs an fsync.
    let (mut file, created) = match OpenOptions::new().append(true).create_new(true).open(path) {
        Ok(file) => (file, true),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            (OpenOptions::new().append(true).open(path)?, false)
        }
        Err(error) => return Err(error),
    };
    // `write_all` could split the line over several calls, which is exactly what lets another
    // appender's line land in the middle; one call or an error.
    let written = file.write(&buffer)?;
    if written != buffer.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!(
                "wrote only {written} of {} bytes; the line may be cut",
                buffer.len()
            ),
        ));
    }
    file.sync_data()?;
    if created {
        File::open(directory)?.sync_all()?;
    }
    Ok(buffer.len() as u64)
}

/// The lock file of a directory's writers.
pub const DIRECTORY_LOCK: &str = ".protocol-run.lock";

/// An exclusive advisory lock on a file's writers, released when dropped (or when the process
/// dies, since it is a `flock`).
#[derive(Debug)]
pub struct FileLock {
    _lock: Flock<File>,
}

/// Takes the exclusive lock for writers of `path`, waiting at most `wait` for other holders.
///
/// The lock is on the directory's `.protocol-run.lock` rather than on `path` itself, because
/// atomic replacement swaps the inode of `path` and a lock on the old inode would guard nothing.
/// One lock file per directory serializes that directory's writers (each holds it for one
/// short write) and leaves one file behind, not one per file written, which matters when file
/// names carry timestamps. It stays on purpose: deleting it would let two writers lock two
/// different inodes of the same name.
pub fn lock_exclusively(path: &Path, wait: Duration) -> std::io::Result<FileLock> {
    let directory = parent_directory(path);
    std::fs::create_dir_all(directory)?;
    // The file must have a name: a lock for a directory path would guard nothing.
    file_name(path)?;
    let lock_path = directory.join(DIRECTORY_LOCK);
    // Read and write access: flock over NFS is emulated with fcntl locks, which need write access.
    // A link planted under the lock's name is refused, not followed: the lock must not create
    // or open a file outside the directory being written.
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&lock_path)?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        // Non-blocking attempts in a loop, so a stuck holder costs a clear error, not a hang.
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(FileLock { _lock: lock }),
            Err((returned, Errno::EWOULDBLOCK | Errno::EINTR)) => file = returned,
            Err((_, errno)) => return Err(errno.into()),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "another writer held the lock {} for more than {} ms",
                    lock_path.display(),
                    wait.as_millis()
                ),
            ));
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Fills a fresh temporary file next to `path`, fsyncs it, renames it over `path` and fsyncs the
/// directory, so the rename itself survives a crash.
fn replace_atomically(
    path: &Path,
    permissions: Option<Permissions>,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let directory = parent_directory(path);
    std::fs::create_dir_all(directory)?;
    // Same directory as the target: rename is only atomic within one filesystem.
    let mut temporary = TemporaryFile {
        renamed: false,
        path: directory.join(format!(
            ".{}.{}.{}.tmp",
            file_name(path)?.to_string_lossy(),
            std::process::id(),
            TEMPORARY_COUNTER.fetch_add(1, Ordering::Relaxed)
        )),
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary.path)?;
    fill(&mut file)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary.path, path)?;
    // The content now lives under the target's name; nothing is left for the guard to remove.
    temporary.renamed = true;
    File::open(directory)?.sync_all()
}

/// Removes the temporary file on every early return and on panic.
struct TemporaryFile {
    path: PathBuf,
    renamed: bool,
}

impl Drop for TemporaryFile {
    fn drop(&mut self) {
        if !self.renamed {
            // It may never have been created; either way it must not remain.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub fn parent_directory(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> std::io::Result<&std::ffi::OsStr> {
    path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_directory(name: &str) -> PathBuf {
        let directory =
            std::env::temp_dir().join(format!("protocol-run-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        directory
    }

    #[test]
    fn replaces_the_whole_file_and_leaves_no_temporary() {
        let directory = scratch_directory("replace");
        let path = directory.join("out.json");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        let leftovers = std::fs::read_dir(&directory).unwrap().count();
        assert_eq!(leftovers, 1);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn concurrent_writers_in_one_process_never_share_a_temporary_file() {
        let directory = scratch_directory("concurrent");
        let path = directory.join("shared.txt");
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..20 {
                        write_atomically(path, format!("writer {writer}").as_bytes()).unwrap();
                    }
                });
            }
        });
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .starts_with("writer ")
        );
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 1);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn keeps_the_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let directory = scratch_directory("permissions");
        let path = directory.join("private.json");
        write_atomically(&path, b"{}").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        write_atomically(&path, b"{\"a\": 1}").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_held_lock_makes_the_next_writer_wait_then_give_up() {
        let directory = scratch_directory("lock");
        let path = directory.join("state.json");
        let held = lock_exclusively(&path, Duration::ZERO).unwrap();
        let error = lock_exclusively(&path, Duration::from_millis(30)).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(error.to_string().contains(".protocol-run.lock"), "{error}");
        drop(held);
        lock_exclusively(&path, Duration::ZERO).unwrap();
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
