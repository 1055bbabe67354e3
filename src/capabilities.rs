//! What a run may do: the protocol's declared permissions narrowed by its parents and the operator, and the check of every effect against them.

use std::path::{Component, Path, PathBuf};

use crate::effects::files::FileRequest;
use crate::effects::tools::ToolRequest;
use crate::effects::{EffectKind, EffectRequest};
use crate::model::Permissions;

/// Effective capabilities. Each kind is a stack of layers (the protocol's declaration, each
/// parent's, the operator's); something is allowed when every layer allows it, and a kind
/// with no layer is not restricted. Equal capabilities allow the same things (a child protocol
/// compiled under them once serves every invoke with the same grant).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capabilities {
    exec: Vec<Vec<Program>>,
    shell: Vec<bool>,
    write: Vec<Vec<Glob>>,
    read: Vec<Vec<Glob>>,
    env: Vec<Vec<String>>,
}

/// An effect the capabilities do not allow.
#[derive(Debug, Clone, PartialEq)]
pub struct Denied {
    /// `exec`, `shell`, `write` or `read`.
    pub capability: &'static str,
    /// The program or path refused.
    pub subject: String,
}

impl std::fmt::Display for Denied {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.capability {
            "shell" => write!(formatter, "`shell: true` is not permitted"),
            "exec" => write!(formatter, "running `{}` is not permitted", self.subject),
            kind => write!(
                formatter,
                "{kind} access to `{}` is not permitted",
                self.subject
            ),
        }
    }
}

/// A program as declared: a name found on `PATH`, or a path.
#[derive(Debug, Clone, PartialEq)]
struct Program {
    written: String,
    resolved: Option<PathBuf>,
}

/// A path glob, anchored at the directory it is relative to.
#[derive(Debug, Clone)]
struct Glob {
    written: String,
    pattern: regex::Regex,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        // The pattern carries the anchoring directory, which `written` alone does not.
        self.written == other.written && self.pattern.as_str() == other.pattern.as_str()
    }
}

impl Capabilities {
    /// No restriction.
    pub fn unrestricted() -> Capabilities {
        Capabilities::default()
    }

    /// These capabilities, further limited by `permissions` (relative globs are anchored at
    /// `base`, the working directory). Invalid globs are reported.
    pub fn narrowed(&self, permissions: &Permissions, base: &Path) -> Result<Capabilities, String> {
        let mut narrowed = self.clone();
        if let Some(programs) = &permissions.exec {
            narrowed.exec.push(
                programs
                    .iter()
                    .map(|written| Program {
                        written: written.clone(),
                        resolved: resolve_program(written),
                    })
                    .collect(),
            );
            narrowed.shell.push(permissions.shell.unwrap_or(false));
        } else if let Some(shell) = permissions.shell {
            narrowed.shell.push(shell);
        }
        for (globs, layers) in [
            (&permissions.write, &mut narrowed.write),
            (&permissions.read, &mut narrowed.read),
        ] {
            if let Some(globs) = globs {
                layers.push(
                    globs
                        .iter()
                        .map(|written| Glob::compile(written, base))
                        .collect::<Result<_, _>>()?,
                );
            }
        }
        if let Some(names) = &permissions.env {
            narrowed.env.push(names.clone());
        }
        Ok(narrowed)
    }

    /// Whether anything is restricted.
    pub fn is_unrestricted(&self) -> bool {
        self.exec.is_empty()
            && self.shell.is_empty()
            && self.write.is_empty()
            && self.read.is_empty()
            && self.env.is_empty()
    }

    /// One line per kind, for `validate`.
    pub fn describe(&self) -> Vec<String> {
        let layers = |kind: &str, layers: Vec<Vec<String>>| -> String {
            if layers.is_empty() {
                format!("{kind}: anything")
            } else {
                let shown: Vec<String> = layers
                    .iter()
                    .map(|layer| format!("[{}]", layer.join(", ")))
                    .collect();
                format!("{kind}: {}", shown.join(" and "))
            }
        };
        vec![
            layers(
                "exec",
                self.exec
                    .iter()
                    .map(|layer| {
                        layer
                            .iter()
                            .map(|program| program.written.clone())
                            .collect()
                    })
                    .collect(),
            ),
            format!(
                "shell: {}",
                if self.shell.iter().all(|allowed| *allowed) {
                    "allowed"
                } else {
                    "not allowed"
                }
            ),
            layers(
                "write",
                self.write
                    .iter()
                    .map(|layer| layer.iter().map(|glob| glob.written.clone()).collect())
                    .collect(),
            ),
            layers(
                "read",
                self.read
                    .iter()
                    .map(|layer| layer.iter().map(|glob| glob.written.clone()).collect())
                    .collect(),
            ),
            layers("env", self.env.clone()),
            format!(
                "dangerous env grants: {}",
                match self.inherited_environment() {
                    Some(names) if names.iter().any(|name| is_dangerous_variable(name)) => names
                        .iter()
                        .filter(|name| is_dangerous_variable(name))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => "none".into(),
                }
            ),
        ]
    }

    /// Environment variables processes inherit, when restricted.
    pub fn inherited_environment(&self) -> Option<Vec<String>> {
        let mut layers = self.env.iter();
        let first = layers.next()?;
        Some(
            first
                .iter()
                .filter(|name| self.env.iter().all(|layer| layer.contains(name)))
                .cloned()
                .collect(),
        )
    }

    /// Whether an action may set the environment variable `name` for its process: a name the
    /// environment grant lists when it is restricted; a dangerous one only when listed.
    pub fn may_set_variable(&self, name: &str) -> Result<(), String> {
        let granted = self.inherited_environment();
        let listed = granted
            .as_ref()
            .is_some_and(|names| names.iter().any(|granted| granted == name));
        if is_dangerous_variable(name) && !listed {
            return Err(format!(
                "`{name}` changes how programs load or configure themselves (it can run code \
                 the protocol was not granted); setting it needs an explicit grant"
            ));
        }
        if granted.is_some() && !listed {
            return Err(format!("`{name}` is not in `permissions.env`"));
        }
        Ok(())
    }

    /// Checks an effect, and pins what it may touch: a permitted program is run by the path
    /// checked (so an `env: {PATH: ...}` cannot swap it), and a restricted environment is
    /// applied.
    pub fn admit(&self, request: &mut EffectRequest) -> Result<(), Denied> {
        match &mut request.kind {
            EffectKind::Process(process) => {
                if process.shell {
                    if !self.shell.iter().all(|allowed| *allowed) {
                        return Err(Denied {
                            capability: "shell",
                            subject: process.argv.last().cloned().unwrap_or_default(),
                        });
                    }
                } else if !self.shell.iter().all(|allowed| *allowed)
                    && process
                        .argv
                        .first()
                        .is_some_and(|program| is_shell(program))
                {
                    // Without the shell capability, a shell is not a program to run either:
                    // `exec: [sh, -c, ...]` is `shell: true` by another name.
                    return Err(Denied {
                        capability: "shell",
                        subject: process.argv.first().cloned().unwrap_or_default(),
                    });
                }
                if !process.shell && !self.exec.is_empty() {
                    let program = process.argv.first().cloned().unwrap_or_default();
                    let resolved = resolve_program(&program);
                    // Both the name as written and the file it runs must be granted: a link to
                    // a multi-call binary under another name is another program.
                    let allowed = self.exec.iter().all(|layer| {
                        layer.iter().any(|declared| {
                            declared.written == program
                                && match (&resolved, &declared.resolved) {
                                    (Some(resolved), Some(declared)) => resolved == declared,
                                    _ => false,
                                }
                        })
                    });
                    match (allowed, resolved) {
                        (true, Some(resolved)) => process.program = Some(resolved),
                        _ => {
                            return Err(Denied {
                                capability: "exec",
                                subject: program,
                            });
                        }
                    }
                }
                process.inherit_env = self.inherited_environment();
                Ok(())
            }
            EffectKind::Tool(call) => {
                if self.restricts_reads() {
                    call.readable = Some(crate::effects::tools::ReadGrant(std::sync::Arc::new(
                        self.clone(),
                    )));
                }
                let path = match &call.tool {
                    ToolRequest::ReadFile { path }
                    | ToolRequest::ListDir { path }
                    | ToolRequest::GrepSearch { path, .. } => path,
                };
                self.check_path("read", &self.read, path)
            }
            EffectKind::File(file) => match file {
                FileRequest::Write { path, .. } | FileRequest::Append { path, .. } => {
                    self.check_path("write", &self.write, path)
                }
                // A read-modify-write reads the file too.
                FileRequest::AppendToJsonArray { path, .. } => {
                    self.check_path("read", &self.read, path)?;
                    self.check_path("write", &self.write, path)
                }
                FileRequest::Backup { path, backup } => {
                    self.check_path("read", &self.read, path)?;
                    self.check_path("write", &self.write, backup)
                }
                FileRequest::Restore { path, backup } => {
                    self.check_path("read", &self.read, backup)?;
                    self.check_path("write", &self.write, path)
                }
            },
        }
    }

    /// Whether the protocol may read `path` (links resolved): for the expression functions
    /// that look at files as much as for the tools.
    pub fn may_read(&self, path: &Path) -> Result<(), Denied> {
        self.check_path("read", &self.read, path)
    }

    /// Whether reading is restricted at all.
    pub fn restricts_reads(&self) -> bool {
        !self.read.is_empty()
    }

    fn check_path(
        &self,
        capability: &'static str,
        layers: &[Vec<Glob>],
        path: &Path,
    ) -> Result<(), Denied> {
        if layers.is_empty() {
            return Ok(());
        }
        let resolved = resolve_path(path);
        let text = resolved.display().to_string();
        if layers
            .iter()
            .all(|layer| layer.iter().any(|glob| glob.pattern.is_match(&text)))
        {
            Ok(())
        } else {
            Err(Denied {
                capability,
                subject: path.display().to_string(),
            })
        }
    }
}

impl Glob {
    fn compile(written: &str, base: &Path) -> Result<Glob, String> {
        let anchored = if Path::new(written).is_absolute() {
            PathBuf::from(written)
        } else {
            resolve_path(base).join(written)
        };
        let text = anchored.display().to_string();
        let mut pattern = String::from("^");
        let mut characters = text.chars().peekable();
        while let Some(character) = characters.next() {
            match character {
                '*' if characters.peek() == Some(&'*') => {
                    characters.next();
                    if characters.peek() == Some(&'/') {
                        characters.next();
                        pattern.push_str("(?:.*/)?");
                    } else {
                        pattern.push_str(".*");
                    }
                }
                '*' => pattern.push_str("[^/]*"),
                '?' => pattern.push_str("[^/]"),
                other => pattern.push_str(&regex::escape(&other.to_string())),
            }
        }
        pattern.push('$');
        let pattern = regex::Regex::new(&pattern)
            .map_err(|error| format!("the path pattern `{written}` is invalid: {error}"))?;
        Ok(Glob {
            written: written.to_string(),
            pattern,
        })
    }
}

/// Whether `program` (a name or a path, links followed) is one of the usual shells.
fn is_shell(program: &str) -> bool {
    const SHELLS: [&str; 10] = [
        "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
    ];
    let named = |path: &Path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| SHELLS.contains(&name))
    };
    named(Path::new(program)) || resolve_program(program).is_some_and(|resolved| named(&resolved))
}

/// Variables that make a program load other code or take its configuration from the
/// environment: the dynamic loader's, and tool hooks (git's config, shells' startup files,
/// interpreters' preload options).
fn is_dangerous_variable(name: &str) -> bool {
    const PREFIXES: [&str; 6] = ["LD_", "DYLD_", "GIT_CONFIG", "PYTHON", "PERL5", "RUBY"];
    const NAMES: [&str; 8] = [
        "BASH_ENV",
        "ENV",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "NODE_OPTIONS",
        "LUA_INIT",
    ];
    PREFIXES.iter().any(|prefix| name.starts_with(prefix)) || NAMES.contains(&name)
}

/// The path a program name runs: a name is looked up on the engine's `PATH`, a path is taken
/// as written; symlinks resolved. `None` when nothing runnable is found.
fn resolve_program(program: &str) -> Option<PathBuf> {
    resolve_program_on(program, None)
}

/// `resolve_program` over `search` (a `PATH` value; the engine's when `None`). Only absolute
/// entries are searched: an empty or relative entry would find a file of the working directory
/// (a repository's own `./echo`) under a trusted name.
pub fn resolve_program_on(program: &str, search: Option<std::ffi::OsString>) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).canonicalize().ok();
    }
    let search = search.or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&search)
        .filter(|directory| directory.is_absolute())
        .map(|directory| directory.join(program))
        .find(|candidate| candidate.is_file())
        .and_then(|candidate| candidate.canonicalize().ok())
}

/// The real location of a path that may not exist yet: the longest existing ancestor with its
/// symlinks resolved, then the rest with `.` and `..` applied. Nothing that does not exist can
/// be a symlink, so this is where a write would land.
pub fn resolve_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let components: Vec<Component> = absolute.components().collect();
    for split in (0..=components.len()).rev() {
        let existing: PathBuf = components[..split].iter().collect();
        if let Ok(mut resolved) = existing.canonicalize() {
            for component in &components[split..] {
                match component {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::Normal(name) => resolved.push(name),
                    _ => {}
                }
            }
            return resolved;
        }
    }
    absolute
}
