//! The kernel's share of the permissions: Landlock rulesets, built anew at every attempt from the read, write and exec grants, confine each effect's process and each engine file effect's thread.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, BitFlags, LandlockStatus, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::effects::capabilities::{Capabilities, GrantAnchor};
use elf::with_interpreters;

mod elf;
mod granted_code;

/// The newest rights asked for. An older kernel applies those it has (best effort, the
/// crate's default), and `support` says which.
const TARGET_ABI: ABI = ABI::V6;

/// What every program needs to start that is not the protocol's data: the system's programs and
/// libraries. Readable and executable by every process when reading or running is restricted.
const SYSTEM_DIRECTORIES: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The files of `/etc` and `/dev` that the dynamic loader, the C library and name resolution
/// open: readable by every process when reading is restricted (not the rest of `/etc`).
const SYSTEM_FILES: [&str; 20] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/locale.alias",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Writable by every process when writing is restricted: where programs throw output away.
const DISCARD: &str = "/dev/null";

/// The capabilities an effect was admitted under, carried with it to where it runs: the engine
/// checks each path of a file effect against them again at every attempt, and the kernel
/// confines the attempt to them.
#[derive(Clone)]
pub struct Grant(pub Arc<Capabilities>);

impl std::fmt::Debug for Grant {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Grant")
    }
}

impl PartialEq for Grant {
    fn eq(&self, other: &Grant) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Who the confinement is for: what else it must let through.
#[derive(Debug, Clone, Copy)]
pub enum Confined<'a> {
    /// A process running `program` (the admitted file, readable and executable whatever the
    /// grants say).
    Process { program: &'a Path },
    /// The engine's own thread for a file effect: it also reads what it may write (the
    /// writers' lock file is opened read-write, a directory is opened to be synced).
    EngineFiles,
}

/// Why an attempt could not be confined: it is not run.
#[derive(Debug, thiserror::Error)]
#[error("cannot confine the effect to its permissions (Landlock): {0}")]
pub struct SandboxError(String);

/// Rulesets ready to apply, one per layer of the capabilities (the kernel allows an access only
/// when every layer does, as the engine does).
pub struct Confinement {
    rulesets: Vec<RulesetCreated>,
    /// For a process whose programs are restricted: the namespace where only their code maps.
    granted_code: Option<granted_code::GrantedCode>,
}

impl Confinement {
    /// Restricts the calling thread, for good. Only system calls, no allocation on success:
    /// this runs in a forked child before `exec`.
    pub fn enforce(&mut self) -> std::io::Result<()> {
        // First: once Landlock confines the process, it may not mount.
        if let Some(granted_code) = &self.granted_code {
            granted_code.enforce()?;
        }
        for ruleset in self.rulesets.drain(..) {
            if ruleset.restrict_self().is_err() {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Grant {
    /// Whether the kernel has anything to confine: something is restricted and this kernel has
    /// Landlock. Even a grant that restricts only the environment or the shell confines its
    /// processes: in a domain of their own they cannot signal the engine, and where the
    /// environment is restricted they cannot read `/proc` (the engine's `/proc/PID/environ`
    /// holds what `env` withholds).
    pub fn confines(&self) -> bool {
        kernel_confines() && !self.0.is_unrestricted()
    }

    /// The rulesets for one attempt, opened now: a grant's directory is taken as it is at this
    /// moment, never through a symbolic link (one planted since the last attempt leads nowhere).
    pub fn confinement(&self, confined: Confined<'_>) -> Result<Confinement, SandboxError> {
        let mut read = self.0.read_anchors();
        // A layer of its own, whatever `read` grants (`/**` included): layers intersect, so
        // `/proc` stays out.
        if self.0.restricts_environment() {
            read.push(everything_but_proc());
        }
        let write = self.0.write_anchors();
        let shell = self
            .0
            .allows_shell()
            .then(|| crate::effects::capabilities::resolve_program_on("sh", None))
            .flatten();
        let exec = self.0.exec_files();
        // At least one layer: the domain itself isolates the process (signals, tracing).
        let layers = read.len().max(write.len()).max(exec.len()).max(1);
        let rulesets = (0..layers)
            .map(|layer| {
                let rules = LayerRules {
                    read: read.get(layer).map(Vec::as_slice),
                    write: write.get(layer).map(Vec::as_slice),
                    exec: exec.get(layer).map(Vec::as_slice),
                    shell: shell.as_ref(),
                };
                rules.ruleset(confined, layer == 0)
            })
            .collect::<Result<_, _>>()?;
        // Landlock decides what may be executed, not what a granted loader may map: where
        // programs are restricted, only their own code can be mapped at all.
        let granted_code = match confined {
            Confined::Process { program } if !exec.is_empty() => {
                let programs = exec.iter().flatten().chain(shell.as_ref());
                granted_code::GrantedCode::prepare(programs.map(PathBuf::as_path).chain([program]))?
            }
            _ => None,
        };
        Ok(Confinement {
            rulesets,
            granted_code,
        })
    }
}

/// Runs blocking `work` of an effect: on a thread of its own that the kernel confines to `grant`
/// when there is something to confine, else on the runtime's blocking pool (a pool thread
/// cannot be confined: the restriction would outlive the effect). Dropping the future does not
/// stop the work, which cannot be killed; its result is dropped.
pub async fn run_blocking<T: Send + 'static>(
    grant: Option<Grant>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let Some(grant) = grant.filter(Grant::confines) else {
        return tokio::task::spawn_blocking(work)
            .await
            .map_err(|error| error.to_string());
    };
    let mut confinement = grant
        .confinement(Confined::EngineFiles)
        .map_err(|error| error.to_string())?;
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("confined-effect".into())
        .spawn(move || {
            let result = confinement
                .enforce()
                .map(|()| work())
                .map_err(|error| SandboxError(error.to_string()).to_string());
            // Nobody waits any more when the effect was dropped: the result goes with it.
            let _ = sender.send(result);
        })
        .map_err(|error| error.to_string())?;
    receiver
        .await
        .map_err(|_| "the confined thread stopped unexpectedly".to_string())?
}

/// A read layer of every entry of `/` except `/proc`: reading stays unrestricted but for the
/// processes' environments (an entry made later is not covered).
fn everything_but_proc() -> Vec<GrantAnchor> {
    std::fs::read_dir("/")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path != Path::new("/proc"))
        .map(|path| GrantAnchor {
            written: format!("{}/**", path.display()),
            path,
            exact: false,
        })
        .collect()
}

/// One layer's grants, each kind absent when the layer does not restrict it.
struct LayerRules<'a> {
    read: Option<&'a [GrantAnchor]>,
    write: Option<&'a [GrantAnchor]>,
    exec: Option<&'a [PathBuf]>,
    /// The shell, when `shell: true` is allowed (it runs the command line).
    shell: Option<&'a PathBuf>,
}

const READ: BitFlags<AccessFs> = landlock::make_bitflags!(AccessFs::{ReadFile | ReadDir});

impl LayerRules<'_> {
    fn ruleset(&self, confined: Confined<'_>, first: bool) -> Result<RulesetCreated, SandboxError> {
        let failed = |error: landlock::RulesetError| SandboxError(error.to_string());
        let mut handled = BitFlags::<AccessFs>::EMPTY;
        if self.read.is_some() {
            handled |= READ;
        }
        if self.write.is_some() {
            handled |= AccessFs::from_write(TARGET_ABI);
        }
        if self.exec.is_some() {
            handled |= AccessFs::Execute;
        }
        // A layer restricting no file access still makes a domain: it handles one right
        // (making block devices) and grants it everywhere.
        let domain_only = handled.is_empty();
        if domain_only {
            handled = AccessFs::MakeBlock.into();
        }
        let mut ruleset = Ruleset::default().handle_access(handled).map_err(failed)?;
        if first && matches!(confined, Confined::Process { .. }) {
            // A confined process may not signal what is outside its domain: the engine, the
            // effects of other states.
            ruleset = ruleset.scope(Scope::Signal).map_err(failed)?;
        }
        let mut created = ruleset.create().map_err(failed)?;
        let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, Following)> = Vec::new();
        if domain_only {
            rules.push(("/".into(), AccessFs::MakeBlock.into(), Following::Links));
        }
        let system = |rules: &mut Vec<(PathBuf, BitFlags<AccessFs>, Following)>, access| {
            for directory in SYSTEM_DIRECTORIES {
                rules.push((directory.into(), access, Following::Links));
            }
        };
        if let Some(anchors) = &self.read {
            system(&mut rules, READ);
            for file in SYSTEM_FILES {
                rules.push((file.into(), READ, Following::Links));
            }
            for anchor in *anchors {
                rules.push((anchor.path.clone(), READ, Following::NoLinks));
            }
        }
        if let Some(anchors) = &self.write {
            for anchor in *anchors {
                let (path, access) = write_rule(anchor, confined);
                rules.push((path, access, Following::NoLinks));
            }
            rules.push((DISCARD.into(), AccessFs::WriteFile.into(), Following::Links));
        }
        if let Some(programs) = self.exec {
            // Only the granted programs run, and what the kernel must open to start them: a
            // granted `env`, `find -exec` or `xargs` cannot start a program that was not granted.
            for program in programs.iter().chain(self.shell) {
                for file in with_interpreters(program) {
                    rules.push((file, AccessFs::Execute.into(), Following::Links));
                }
            }
        }
        if let Confined::Process { program } = confined {
            let access = AccessFs::Execute | AccessFs::ReadFile;
            rules.push((program.to_path_buf(), access, Following::NoLinks));
            for file in with_interpreters(program).into_iter().skip(1) {
                rules.push((file, AccessFs::Execute.into(), Following::Links));
            }
        }
        for (path, access, following) in rules {
            let access = access & handled;
            if access.is_empty() {
                continue;
            }
            // What does not exist (yet) gets no rule: nothing there is granted until it does.
            let opened = match following {
                Following::Links => system_path(&path)
                    .map(|(descriptor, is_directory)| (Anchor::System(descriptor), is_directory))
                    .or_else(|| {
                        open_path(&path, following).map(|(descriptor, is_directory)| {
                            (Anchor::Opened(descriptor), is_directory)
                        })
                    }),
                Following::NoLinks => open_path(&path, following)
                    .map(|(descriptor, is_directory)| (Anchor::Opened(descriptor), is_directory)),
            };
            let Some((descriptor, is_directory)) = opened else {
                continue;
            };
            let access = if is_directory {
                access
            } else {
                access & AccessFs::from_file(TARGET_ABI)
            };
            created = created
                .add_rule(PathBeneath::new(descriptor, access))
                .map_err(failed)?;
        }
        Ok(created)
    }
}

/// The rule a write grant becomes. A grant's directory that does not exist yet is made first
/// (never through a link), so the process may write where the grant says it may. A grant naming
/// one file that does not exist yet becomes the right to make and write files in its directory
/// (wider than the file); for the engine's own effects, which write atomically beside their
/// target and check the file themselves, a file's grant is its directory's.
fn write_rule(anchor: &GrantAnchor, confined: Confined<'_>) -> (PathBuf, BitFlags<AccessFs>) {
    let names_a_file = anchor.exact && !anchor.path.is_dir();
    let directory = if names_a_file {
        crate::base::files::parent_directory(&anchor.path)
    } else {
        &anchor.path
    };
    make_directories(directory);
    let all = AccessFs::from_write(TARGET_ABI);
    match confined {
        Confined::EngineFiles => (directory.to_path_buf(), all | READ),
        Confined::Process { .. } if !names_a_file || anchor.path.exists() => {
            (anchor.path.clone(), all)
        }
        Confined::Process { .. } => (
            directory.to_path_buf(),
            AccessFs::MakeReg | AccessFs::WriteFile | AccessFs::Truncate,
        ),
    }
}

/// Makes the directories of an absolute `path` that are missing, each opened without following
/// a link: a link planted where a directory should be stops it, so nothing is made elsewhere.
/// A failure leaves the grant without its rule, which grants nothing.
fn make_directories(path: &Path) {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::{Mode, mkdirat};
    if !path.is_absolute() || path.is_dir() {
        return;
    }
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(mut current) = openat(nix::fcntl::AT_FDCWD, "/", flags, Mode::empty()) else {
        return;
    };
    for component in path.components() {
        let std::path::Component::Normal(name) = component else {
            continue;
        };
        let next = match openat(&current, name, flags, Mode::empty()) {
            Err(nix::errno::Errno::ENOENT) => {
                // Another process making it meanwhile is as good.
                let _ = mkdirat(&current, name, Mode::from_bits_truncate(0o777));
                openat(&current, name, flags, Mode::empty())
            }
            opened => opened,
        };
        match next {
            Ok(directory) => current = directory,
            Err(_) => return,
        }
    }
}

/// Whether a path may be reached through symbolic links.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Following {
    /// The system's own paths (`/lib` is a link to `/usr/lib` on merged systems).
    Links,
    /// A grant names where it leads; a link anywhere on the way is refused.
    NoLinks,
}

/// A rule's anchor: opened for this attempt, or one of the system's paths, opened once.
enum Anchor {
    Opened(OwnedFd),
    System(BorrowedFd<'static>),
}

impl AsFd for Anchor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Anchor::Opened(descriptor) => descriptor.as_fd(),
            Anchor::System(descriptor) => *descriptor,
        }
    }
}

/// One of the system's paths (`SYSTEM_DIRECTORIES`, `SYSTEM_FILES`, `DISCARD`, `/`), opened
/// the first time any is needed and kept: they are the same at every attempt, and opening them
/// anew was most of a confinement's system calls.
fn system_path(path: &Path) -> Option<(BorrowedFd<'static>, bool)> {
    static OPENED: OnceLock<Vec<(&'static str, OwnedFd, bool)>> = OnceLock::new();
    let opened = OPENED.get_or_init(|| {
        SYSTEM_DIRECTORIES
            .iter()
            .chain(SYSTEM_FILES.iter())
            .chain([DISCARD, "/"].iter())
            .filter_map(|system| {
                let (descriptor, is_directory) = open_path(Path::new(system), Following::Links)?;
                Some((*system, descriptor, is_directory))
            })
            .collect()
    });
    opened
        .iter()
        .find(|(system, ..)| Path::new(system) == path)
        .map(|(_, descriptor, is_directory)| (descriptor.as_fd(), *is_directory))
}

/// Opens `path` for use as a rule's anchor (`O_PATH`), and says whether it is a directory.
fn open_path(path: &Path, following: Following) -> Option<(OwnedFd, bool)> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let mut resolve = ResolveFlag::RESOLVE_NO_MAGICLINKS;
    if following == Following::NoLinks {
        resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
    }
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(resolve);
    let descriptor = openat2(nix::fcntl::AT_FDCWD, path, how).ok()?;
    let is_directory = nix::sys::stat::fstat(descriptor.as_fd())
        .ok()
        .is_some_and(|status| status.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR);
    Some((descriptor, is_directory))
}

/// What this kernel enforces, probed once by confining a throwaway thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Support {
    /// Every right asked for is enforced; the Landlock ABI version.
    Full(String),
    /// An older ABI: files are confined, some newer rights (signal scoping, truncation, device
    /// ioctls) are not.
    Partial(String),
    /// No Landlock: only the engine's own checks hold.
    Unavailable(String),
}

pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let probe = || -> Result<landlock::RestrictionStatus, landlock::RulesetError> {
            Ruleset::default()
                .handle_access(AccessFs::from_all(TARGET_ABI))?
                .scope(Scope::from_all(TARGET_ABI))?
                .create()?
                .restrict_self()
        };
        match std::thread::spawn(probe).join() {
            Ok(Ok(status)) => {
                let abi = match status.landlock {
                    LandlockStatus::Available { effective_abi, .. } => {
                        format!("{effective_abi:?}")
                    }
                    LandlockStatus::NotEnabled => {
                        return Support::Unavailable("Landlock is not enabled at boot".into());
                    }
                    LandlockStatus::NotImplemented => {
                        return Support::Unavailable(
                            "this kernel is built without Landlock".into(),
                        );
                    }
                };
                match status.ruleset {
                    RulesetStatus::FullyEnforced => Support::Full(abi),
                    RulesetStatus::PartiallyEnforced => Support::Partial(abi),
                    RulesetStatus::NotEnforced => {
                        Support::Unavailable(format!("Landlock {abi} enforced nothing"))
                    }
                }
            }
            Ok(Err(error)) => Support::Unavailable(error.to_string()),
            Err(_) => Support::Unavailable("the probe failed".into()),
        }
    })
}

fn kernel_confines() -> bool {
    !matches!(support(), Support::Unavailable(_))
}

/// One line, said once per engine process, when capabilities restrict what the kernel cannot
/// enforce (`None` when it can, or nothing is restricted).
pub fn unenforced_warning(capabilities: &Capabilities) -> Option<String> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let restricted = !(capabilities.read_anchors().is_empty()
        && capabilities.write_anchors().is_empty()
        && capabilities.exec_files().is_empty());
    let warning = match support() {
        Support::Full(_) => return None,
        Support::Partial(abi) => format!(
            "the kernel's Landlock is {abi}: effects are confined to their read and write \
             grants, but not every newer restriction (signals, truncation, device ioctls) applies"
        ),
        Support::Unavailable(reason) => format!(
            "the kernel cannot confine effects ({reason}): the engine checks its own file \
             effects and each program it starts, but a program's own file access is not confined"
        ),
    };
    (restricted && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)).then_some(warning)
}

/// What the kernel will enforce for these capabilities, for `validate`.
pub fn describe(capabilities: &Capabilities) -> Vec<String> {
    let read = capabilities.read_anchors();
    let write = capabilities.write_anchors();
    let exec = capabilities.exec_files();
    if capabilities.is_unrestricted() {
        return vec!["sandbox: nothing to confine (no capability is restricted)".into()];
    }
    let mut lines = vec![match support() {
        Support::Full(abi) => format!(
            "sandbox: Landlock {abi} confines every process an effect starts and every file effect:"
        ),
        Support::Partial(abi) => format!(
            "sandbox: Landlock {abi} (older than {TARGET_ABI:?}: signals, truncation or device \
             ioctls may not be confined) confines every process and file effect:"
        ),
        Support::Unavailable(reason) => format!(
            "sandbox: NOT enforced by this kernel ({reason}); the engine's checks only. Were \
             it enforced:"
        ),
    }];
    for (kind, layers) in [("read", &read), ("write", &write)] {
        for layer in layers.iter() {
            let shown: Vec<String> = layer
                .iter()
                .map(|anchor| describe_anchor(anchor, kind))
                .collect();
            // A layer granting nothing says so, as `validate`'s other empty lines do.
            let shown = if shown.is_empty() {
                "none".to_string()
            } else {
                shown.join(", ")
            };
            lines.push(format!("  {kind} beneath: {shown}"));
        }
    }
    if capabilities.restricts_environment() {
        lines.push("  read: nothing under /proc (the environment is restricted)".into());
    }
    lines.push("  signal: only processes of its own sandbox".into());
    if !read.is_empty() {
        lines.push(format!(
            "  read also: the system's programs and libraries ({}) and {} files of /etc and /dev",
            SYSTEM_DIRECTORIES.join(" "),
            SYSTEM_FILES.len()
        ));
    }
    // A program the protocol may also rewrite is whatever the protocol wants it to be.
    for program in exec.iter().flatten() {
        let writable = write
            .iter()
            .flatten()
            .any(|anchor| !anchor.path.as_os_str().is_empty() && program.starts_with(&anchor.path));
        if writable {
            lines.push(format!(
                "  warning: {} may be run and lies under a write grant: the protocol can replace \
                 what it runs; grant it from a directory it cannot write",
                program.display()
            ));
        }
    }
    if !exec.is_empty() {
        lines.push(
            "  execute: only the granted programs (with their loader or `#!` interpreter; the \
             shell when `shell: true` is allowed)"
                .into(),
        );
        lines.push(match granted_code::namespaces() {
            granted_code::Namespaces::Unavailable => "  warning: code mapped: anything readable. \
                 This machine cannot make a mount namespace for an effect (no CAP_SYS_ADMIN, and \
                 no user namespaces), so a granted program that can start the ELF loader (`env`, \
                 `find -exec`, `xargs`, a shell, `git` through its hooks and aliases) can run any \
                 program it can read by having the loader map it; grant no launcher, or run where \
                 namespaces are allowed"
                .into(),
            _ => "  code mapped: only the granted programs' own (program, interpreters, shared \
                 libraries), in a mount namespace where every other file is noexec: a granted \
                 loader or launcher cannot run a program that was not granted, nor a library it \
                 loads at run time (`dlopen`) that is not one of theirs"
                .into(),
        });
        lines.extend(open_routes(exec.iter().flatten()));
    }
    lines
}

/// Programs that start other programs named in their arguments or input.
const LAUNCHERS: [&str; 14] = [
    "env", "find", "xargs", "nice", "nohup", "timeout", "stdbuf", "setsid", "flock", "git", "make",
    "watch", "parallel", "chrt",
];

/// Programs that run any code they are given: granting one grants what that code can do.
const INTERPRETERS: [&str; 16] = [
    "sh", "bash", "dash", "zsh", "ksh", "fish", "python", "python3", "perl", "ruby", "node", "lua",
    "php", "awk", "gawk", "tclsh",
];

/// The routes to other programs, and to arbitrary code, that the granted programs leave open:
/// a launcher starts the other granted programs, an interpreter runs whatever it is given.
fn open_routes<'a>(programs: impl Iterator<Item = &'a PathBuf>) -> Vec<String> {
    let programs: Vec<&PathBuf> = programs.collect();
    let name = |program: &PathBuf| {
        program
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let names: Vec<String> = programs.iter().map(|program| name(program)).collect();
    let mut lines = Vec::new();
    for program in &names {
        if LAUNCHERS.contains(&program.as_str()) {
            let others: Vec<&str> = names
                .iter()
                .filter(|other| *other != program)
                .map(String::as_str)
                .collect();
            let reach = if others.is_empty() {
                "no other program (none else is granted)".to_string()
            } else {
                format!("the other granted programs ({})", others.join(", "))
            };
            lines.push(format!("  route: {program} starts other programs: {reach}"));
        }
        if INTERPRETERS.contains(&program.as_str()) {
            lines.push(format!(
                "  warning: {program} runs any code it is given: granting it grants whatever that \
                 code can do within the read and write grants"
            ));
        }
    }
    lines
}

/// Whether processes whose programs are restricted can map only the granted programs' code
/// here (a mount namespace can be made): where not, the ELF loader route stays open.
pub fn maps_only_granted_code() -> bool {
    granted_code::namespaces() != granted_code::Namespaces::Unavailable
}

fn describe_anchor(anchor: &GrantAnchor, kind: &str) -> String {
    let GrantAnchor {
        written,
        path,
        exact,
    } = anchor;
    // A grant naming an input has no anchor until the run resolves it.
    if path.as_os_str().is_empty() {
        return format!("{written} (resolved when a run starts)");
    }
    let mut shown = path.display().to_string();
    // `dir/**` is exactly the hierarchy; `dir/*.json` is narrower than the directory.
    let whole_hierarchy = written
        .strip_suffix("/**")
        .is_some_and(|directory| !directory.contains(['*', '?']));
    if !exact && !whole_hierarchy {
        shown.push_str(&format!(
            " (wider than `{written}`: the engine checks the pattern for its own effects)"
        ));
    }
    match open_path(path, Following::NoLinks) {
        Some(_) => {}
        None if path.exists() => {
            shown.push_str(" (reached through a link: not granted; name the real path)")
        }
        None if kind == "write" && *exact => {
            shown.push_str(" (not made yet: a process may make and write files in its directory)")
        }
        None if kind == "write" => {
            shown.push_str(" (does not exist yet: made when a process or file effect starts)")
        }
        None => shown.push_str(" (does not exist yet: nothing to read there until it does)"),
    }
    shown
}
