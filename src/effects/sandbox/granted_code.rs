//! A private mount namespace in which no file's code can be mapped but the granted programs' own (the program, its interpreters, its shared libraries): every mount is remounted `noexec`, and each of those files is bound over itself without it. The kernel refuses `PROT_EXEC` mappings of files on a `noexec` mount, which Landlock's execute right does not cover, so a granted loader or launcher cannot run a program it was not granted by mapping it.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::libc;

use super::SandboxError;

/// How this process can make a mount namespace for an effect, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespaces {
    /// It may make one itself (it has `CAP_SYS_ADMIN`, as root).
    Mount,
    /// Only inside a user namespace of its own (an unprivileged process where the kernel allows
    /// them).
    UserAndMount,
    /// Neither: the loader route stays open.
    Unavailable,
}

/// Whether, and how, effects get a namespace: probed by a forked child that tries.
pub fn namespaces() -> Namespaces {
    static PROBED: OnceLock<Namespaces> = OnceLock::new();
    *PROBED.get_or_init(probe)
}

/// The child answers through a pipe before it exits, and the parent reads that answer instead
/// of waiting for the exit: a child that made a mount namespace tears it down on exit, and that
/// took 0.3–0.4 ms (an RCU grace period), a tenth of `validate`'s whole process. A thread reaps
/// the child once it is gone, so no process of any lifetime keeps a zombie.
fn probe() -> Namespaces {
    let mut ends = [0; 2];
    // SAFETY: `ends` has room for the two descriptors `pipe2` writes.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Namespaces::Unavailable;
    }
    let [reading, writing] = ends;
    // SAFETY: the child makes system calls only (unshare, write, _exit), as the child of a fork
    // of a threaded process must.
    let forked = unsafe { nix::unistd::fork() };
    if let Ok(nix::unistd::ForkResult::Child) = forked {
        let code: u8 = if unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0 {
            0
        } else if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } == 0 {
            1
        } else {
            2
        };
        unsafe {
            libc::write(writing, std::ptr::from_ref(&code).cast(), 1);
            libc::_exit(i32::from(code))
        }
    }
    // SAFETY: the parent's copy of the writing end is its own to close; with it closed, the
    // read below ends (with nothing) if the child dies before it answers.
    unsafe { libc::close(writing) };
    let mut answer = [u8::MAX];
    let read = match forked {
        Ok(_) => loop {
            // SAFETY: `answer` has room for the one byte asked for.
            let read = unsafe { libc::read(reading, answer.as_mut_ptr().cast(), 1) };
            let interrupted =
                std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
            if read >= 0 || !interrupted {
                break read;
            }
        },
        Err(_) => 0,
    };
    // SAFETY: the reading end is this function's own.
    unsafe { libc::close(reading) };
    if let Ok(nix::unistd::ForkResult::Parent { child }) = forked {
        reap(child);
    }
    match (read, answer[0]) {
        (1, 0) => Namespaces::Mount,
        (1, 1) => Namespaces::UserAndMount,
        _ => Namespaces::Unavailable,
    }
}

/// Reaps the probe's child: at once if it has exited, otherwise from a thread that waits for it.
fn reap(child: nix::unistd::Pid) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    if !matches!(
        waitpid(child, Some(WaitPidFlag::WNOHANG)),
        Ok(WaitStatus::StillAlive)
    ) {
        return;
    }
    let waiting = std::thread::Builder::new()
        .name("namespace-probe".into())
        .spawn(move || waitpid(child, None));
    if waiting.is_err() {
        // No thread to spare: wait here, as before.
        let _ = waitpid(child, None);
    }
}

/// The mounts to make in an effect's process before it runs its program, prepared in the engine
/// (reading `/proc/self/mountinfo`, each mount's flags, the programs' libraries) so that the
/// forked child only makes system calls.
pub struct GrantedCode {
    /// Made inside a user namespace: the lines for `uid_map` and `gid_map` (this user only).
    user: Option<(CString, CString)>,
    /// Every mount point, with the flags it keeps when it is made `noexec`.
    mounts: Vec<(CString, libc::c_ulong)>,
    /// The files whose code may be mapped, with their mount's flags as they were (without the
    /// `noexec` every other file gets).
    files: Vec<(CString, libc::c_ulong)>,
}

impl GrantedCode {
    /// The namespace for a process that may run `programs`, or `None` where namespaces are
    /// unavailable (the caller says so). A mount whose flags cannot be read fails it: remounted
    /// without them, a read-only mount would become writable.
    pub fn prepare<'p>(
        programs: impl Iterator<Item = &'p Path>,
    ) -> Result<Option<GrantedCode>, SandboxError> {
        let user = match namespaces() {
            Namespaces::Unavailable => return Ok(None),
            Namespaces::Mount => None,
            Namespaces::UserAndMount => {
                // SAFETY: reading this process's ids has no precondition.
                let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
                Some((
                    c_string(format!("{uid} {uid} 1").as_bytes())?,
                    c_string(format!("{gid} {gid} 1").as_bytes())?,
                ))
            }
        };
        let mut mounts = Vec::new();
        for point in mount_points()? {
            // A mount this process cannot reach holds nothing it could map either.
            let flags = match kept_flags(&point) {
                Err(Unreadable::Unreachable) => continue,
                Err(Unreadable::Failed(error)) => return Err(error),
                Ok(flags) => flags,
            };
            mounts.push((c_string(point.as_os_str().as_bytes())?, flags));
        }
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut files = Vec::new();
        for program in programs {
            for file in super::elf::code_files(program) {
                let file = file.canonicalize().unwrap_or(file);
                if seen.contains(&file) || !file.is_file() {
                    continue;
                }
                // Its mount's own flags as they were: a file on a mount the operator made
                // `noexec` stays so.
                let flags = match kept_flags(&file) {
                    Ok(flags) => flags,
                    Err(Unreadable::Unreachable) => continue,
                    Err(Unreadable::Failed(error)) => return Err(error),
                };
                files.push((c_string(file.as_os_str().as_bytes())?, flags));
                seen.push(file);
            }
        }
        Ok(Some(GrantedCode {
            user,
            mounts,
            files,
        }))
    }

    /// Enters the namespace and makes its mounts. System calls only, no allocation: this runs
    /// in a forked child before `exec`, before Landlock (which forbids mounting) confines it.
    pub fn enforce(&self) -> std::io::Result<()> {
        let failed = || Err(std::io::Error::last_os_error());
        match &self.user {
            None => {
                if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
                    return failed();
                }
            }
            Some((uid_map, gid_map)) => {
                if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
                    return failed();
                }
                write_file(c"/proc/self/setgroups", c"deny")?;
                write_file(c"/proc/self/uid_map", uid_map)?;
                write_file(c"/proc/self/gid_map", gid_map)?;
            }
        }
        // Nothing of this reaches the engine's namespace.
        mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        for (point, flags) in &self.mounts {
            let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOEXEC | flags;
            mount(None, point, flags)?;
        }
        for (file, flags) in &self.files {
            mount(Some(file), file, libc::MS_BIND)?;
            mount(None, file, libc::MS_REMOUNT | libc::MS_BIND | flags)?;
        }
        Ok(())
    }
}

fn mount(source: Option<&CStr>, target: &CStr, flags: libc::c_ulong) -> std::io::Result<()> {
    let source = source.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is a NUL-terminated string or null, as mount(2) takes.
    let made = unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if made == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes `text` to the file at `path` with one `write`, as `/proc/self/*_map` requires.
fn write_file(path: &CStr, text: &CStr) -> std::io::Result<()> {
    // SAFETY: plain system calls on NUL-terminated strings.
    unsafe {
        let descriptor = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if descriptor < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let bytes = text.to_bytes();
        let written = libc::write(descriptor, bytes.as_ptr().cast(), bytes.len());
        libc::close(descriptor);
        if written < 0 || written as usize != bytes.len() {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn c_string(bytes: &[u8]) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| SandboxError("a path holds a NUL byte".into()))
}

/// The mount points of this process's namespace, from `/proc/self/mountinfo` (its fifth field,
/// with the kernel's octal escapes undone).
fn mount_points() -> Result<Vec<PathBuf>, SandboxError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|error| SandboxError(format!("cannot read /proc/self/mountinfo: {error}")))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|escaped| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(escaped))))
        .collect())
}

/// `\040`-style escapes (space, tab, newline, backslash) back to their bytes.
fn unescape(escaped: &str) -> Vec<u8> {
    let bytes = escaped.as_bytes();
    let mut plain = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[index], octal) {
            (b'\\', Some(byte)) => {
                plain.push(byte);
                index += 4;
            }
            (byte, _) => {
                plain.push(byte);
                index += 1;
            }
        }
    }
    plain
}

/// Why a mount's flags were not read.
enum Unreadable {
    /// This process cannot reach it (denied, or gone).
    Unreachable,
    Failed(SandboxError),
}

/// The flags of the mount `path` is on that a remount must give again (read-only, `nosuid`,
/// `nodev`, `noexec`, access times): a remount replaces them all, and inside a user namespace
/// one that would clear a flag the mount was made with is refused.
fn kept_flags(path: &Path) -> Result<libc::c_ulong, Unreadable> {
    use nix::sys::statvfs::FsFlags;
    let flags = match nix::sys::statvfs::statvfs(path) {
        Ok(found) => found.flags(),
        Err(nix::errno::Errno::EACCES | nix::errno::Errno::ENOENT) => {
            return Err(Unreadable::Unreachable);
        }
        Err(error) => {
            return Err(Unreadable::Failed(SandboxError(format!(
                "cannot read the mount of {}: {error}",
                path.display()
            ))));
        }
    };
    let mut kept = 0;
    for (flag, mount_flag) in [
        (FsFlags::ST_RDONLY, libc::MS_RDONLY),
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if flags.contains(flag) {
            kept |= mount_flag;
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape(r"/mnt/with\040space"), b"/mnt/with space");
        assert_eq!(unescape(r"/a\134b"), b"/a\\b");
        assert_eq!(unescape(r"/plain\04"), b"/plain\\04");
    }
}
