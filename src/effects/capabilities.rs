//! What a run may do: the protocol's declared permissions narrowed by its parents and the operator, and the check of every effect against them.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::base::model::Permissions;
use crate::effects::files::FileRequest;
use crate::effects::grant_inputs::{GrantInputs, GrantKind, names_inputs};
use crate::effects::tools::ToolRequest;
use crate::effects::{EffectKind, EffectRequest};

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
    /// Values for the `${input}` placeholders of the next declaration `narrowed` applies.
    grant_inputs: Option<Arc<GrantInputs>>,
    /// Whether a grant names an input that no value was given for (a protocol compiled before
    /// its inputs are bound): such a grant allows nothing until the run resolves it.
    unresolved: bool,
    /// Whether the next declaration `narrowed` applies leaves a kind whose grant names an input
    /// without a value to the layers above it (`bounding_unbound_grants`).
    bounded_above: bool,
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
    /// `None` while the glob names an input with no value: it matches nothing.
    pattern: Option<regex::Regex>,
    /// The longest leading path without a wildcard: everything the glob matches lies beneath
    /// it, which is the shape the kernel's sandbox takes (`crate::effects::sandbox`). Empty (nothing
    /// the kernel grants) while the glob is unresolved.
    anchor: PathBuf,
    /// Whether the anchor is the whole glob (no wildcard).
    exact: bool,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        // The pattern carries the anchoring directory, which `written` alone does not.
        self.written == other.written
            && self.pattern.as_ref().map(regex::Regex::as_str)
                == other.pattern.as_ref().map(regex::Regex::as_str)
    }
}

impl Capabilities {
    /// No restriction.
    pub fn unrestricted() -> Capabilities {
        Capabilities::default()
    }

    /// These capabilities, further limited by `permissions` (relative globs are anchored at
    /// `base`, the working directory). Invalid globs are reported.
    /// `${name}` placeholders take the values `with_grant_inputs` gave, matched literally; without
    /// them the grant allows nothing yet (`is_resolved` is false).
    pub fn narrowed(&self, permissions: &Permissions, base: &Path) -> Result<Capabilities, String> {
        let mut narrowed = self.clone();
        let inputs = narrowed.grant_inputs.take();
        let inputs = inputs.as_deref();
        // An invoked protocol's inputs are bound after its grants are fixed, and a host's clients
        // must not choose its grants: a kind whose grant names an input without a value here is
        // bounded by the layers above alone (the parent's grants, the operator's narrowing).
        let bounded_above = std::mem::take(&mut narrowed.bounded_above);
        let declared = |grants| declared(grants, bounded_above, inputs);
        if let Some(programs) = declared(&permissions.exec) {
            let mut layer = Vec::with_capacity(programs.len());
            for written in programs {
                match entries(written, inputs, GrantKind::Path)? {
                    Some(expansions) => layer.extend(expansions.into_iter().map(|pieces| {
                        let program = joined(&pieces);
                        Program {
                            resolved: resolve_program(&program),
                            written: program,
                        }
                    })),
                    None => {
                        narrowed.unresolved = true;
                        layer.push(Program {
                            written: written.clone(),
                            resolved: None,
                        });
                    }
                }
            }
            narrowed.exec.push(layer);
        }
        // Declaring `exec` withholds the shell unless `shell: true` says otherwise, whether or
        // not the `exec` grant itself is left to the layers above.
        if permissions.exec.is_some() {
            narrowed.shell.push(permissions.shell.unwrap_or(false));
        } else if let Some(shell) = permissions.shell {
            narrowed.shell.push(shell);
        }
        for (globs, layers) in [
            (declared(&permissions.write), &mut narrowed.write),
            (declared(&permissions.read), &mut narrowed.read),
        ] {
            if let Some(globs) = globs {
                let mut layer = Vec::with_capacity(globs.len());
                for written in globs {
                    match entries(written, inputs, GrantKind::Path)? {
                        Some(expansions) => {
                            for pieces in expansions {
                                layer.push(Glob::compile(&pieces, base)?);
                            }
                        }
                        None => {
                            narrowed.unresolved = true;
                            layer.push(Glob {
                                written: written.clone(),
                                pattern: None,
                                anchor: PathBuf::new(),
                                exact: true,
                            });
                        }
                    }
                }
                layers.push(layer);
            }
        }
        if let Some(names) = declared(&permissions.env) {
            let mut layer = Vec::with_capacity(names.len());
            for written in names {
                match entries(written, inputs, GrantKind::Variable)? {
                    Some(expansions) => {
                        for pieces in &expansions {
                            let name = joined(pieces);
                            // A loader variable is granted only where the grant itself names it.
                            if is_dangerous_variable(&name) && !names.contains(&name) {
                                return Err(format!(
                                    "the grant `{written}` names `{name}` through an input; it \
                                     changes how programs load code, so only `permissions.env` \
                                     itself may grant it: list `{name}` there"
                                ));
                            }
                            layer.push(name);
                        }
                    }
                    // No variable is named `${...}`: the entry grants nothing until resolved.
                    None => {
                        narrowed.unresolved = true;
                        layer.push(written.clone());
                    }
                }
            }
            narrowed.env.push(layer);
        }
        Ok(narrowed)
    }

    /// These capabilities, with the values the next `narrowed` resolves `${name}` placeholders
    /// with (a run's bound inputs).
    pub fn with_grant_inputs(mut self, inputs: GrantInputs) -> Capabilities {
        self.grant_inputs = Some(Arc::new(inputs));
        self
    }

    /// These capabilities as the limit of a protocol whose inputs must not choose its grants: a
    /// kind whose grant names an input without a value here (`with_grant_inputs`) is left to
    /// these. For an invoked protocol (its inputs are bound only when it is invoked; these are
    /// its parent's grants), and for a protocol a host serves (a client gives its inputs; these
    /// are the operator's narrowing, with the values it pinned: see `crate::runtime::runs::grants`).
    pub fn bounding_unbound_grants(mut self) -> Capabilities {
        self.bounded_above = true;
        self
    }

    /// Whether every grant is resolved (false when one names an input no value was given for).
    pub fn is_resolved(&self) -> bool {
        !self.unresolved
    }

    /// Every kind on one line, for the start of a run and `status`.
    pub fn summary(&self) -> String {
        self.describe()[..5].join("; ")
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
        // A grant naming an input is known once the run resolves it, and checked then.
        if granted.is_some() && !listed && self.is_resolved() {
            return Err(format!("`{name}` is not in `permissions.env`"));
        }
        Ok(())
    }

    /// Checks an effect, and pins what it may touch: a permitted program is run by the path
    /// checked (so an `env: {PATH: ...}` cannot swap it), and a restricted environment is
    /// applied.
    pub fn admit(&self, request: &mut EffectRequest) -> Result<(), Denied> {
        self.admit_kind(&mut request.kind)?;
        if !self.is_unrestricted() {
            request.grant = Some(crate::effects::sandbox::Grant(std::sync::Arc::new(
                self.clone(),
            )));
        }
        Ok(())
    }

    fn admit_kind(&self, kind: &mut EffectKind) -> Result<(), Denied> {
        match kind {
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
                let path = match &call.tool {
                    ToolRequest::ReadFile { path }
                    | ToolRequest::ListDir { path }
                    | ToolRequest::GrepSearch { path, .. } => path,
                };
                self.check_path("read", &self.read, path)
            }
            EffectKind::File(file) => self.check_file(file),
        }
    }

    /// Whether a file effect's paths are within `read` and `write`, where they really lead now:
    /// checked when the effect is admitted and again at each attempt.
    pub fn check_file(&self, file: &FileRequest) -> Result<(), Denied> {
        match file {
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
        }
    }

    /// Whether the protocol may read `path` (links resolved): for the expression functions
    /// that look at files as much as for the tools.
    pub fn may_read(&self, path: &Path) -> Result<(), Denied> {
        self.check_path("read", &self.read, path)
    }

    /// Per layer, the paths beneath which reading is granted (see `Glob::anchor`); empty when
    /// reading is not restricted.
    pub fn read_anchors(&self) -> Vec<Vec<GrantAnchor>> {
        anchors(&self.read)
    }

    /// Per layer, the paths beneath which writing is granted; empty when not restricted.
    pub fn write_anchors(&self) -> Vec<Vec<GrantAnchor>> {
        anchors(&self.write)
    }

    /// Per layer, the files the granted programs resolve to; empty when `exec` is not
    /// restricted.
    pub fn exec_files(&self) -> Vec<Vec<PathBuf>> {
        self.exec
            .iter()
            .map(|layer| {
                layer
                    .iter()
                    .filter_map(|program| program.resolved.clone())
                    .collect()
            })
            .collect()
    }

    /// Whether `shell: true` is allowed by every layer.
    pub fn allows_shell(&self) -> bool {
        self.shell.iter().all(|allowed| *allowed)
    }

    /// Whether the environment processes inherit is restricted.
    pub fn restricts_environment(&self) -> bool {
        !self.env.is_empty()
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
        let resolved = resolve_path(path);
        // Where the environment is restricted, `/proc` is not read either: the engine's own
        // `/proc/self/environ` holds every variable `env` withholds.
        if capability == "read" && !self.env.is_empty() && resolved.starts_with("/proc") {
            return Err(Denied {
                capability,
                subject: path.display().to_string(),
            });
        }
        if layers.is_empty() {
            return Ok(());
        }
        let text = resolved.display().to_string();
        if layers
            .iter()
            .all(|layer| layer.iter().any(|glob| glob.matches(&text)))
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

/// Each layer's globs as written with their anchors.
fn anchors(layers: &[Vec<Glob>]) -> Vec<Vec<GrantAnchor>> {
    layers
        .iter()
        .map(|layer| {
            layer
                .iter()
                .map(|glob| GrantAnchor {
                    written: glob.written.clone(),
                    path: glob.anchor.clone(),
                    exact: glob.exact,
                })
                .collect()
        })
        .collect()
}

/// Where a path grant lies, in the shape the kernel's sandbox takes.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantAnchor {
    /// The grant as written (inputs resolved).
    pub written: String,
    /// Its longest leading path without a wildcard.
    pub path: PathBuf,
    /// Whether that path is the whole grant (no wildcard): one file or directory.
    pub exact: bool,
}

impl Glob {
    /// A glob from its pieces, each a pattern or (`true`) a literal taken from an input (a
    /// value's `*` or `?` is a character of the path, not a wildcard), anchored at `base` when
    /// relative.
    fn compile(pieces: &[(String, bool)], base: &Path) -> Result<Glob, String> {
        let written = joined(pieces);
        let mut characters: Vec<(char, bool)> = Vec::new();
        if !Path::new(&written).is_absolute() {
            let anchor = resolve_path(base).display().to_string();
            characters.extend(anchor.chars().map(|character| (character, true)));
            characters.push(('/', true));
        }
        for (text, literal) in pieces {
            characters.extend(text.chars().map(|character| (character, *literal)));
        }
        // Checked paths are absolute and clean: so is the pattern (`./src`, `${dir}/x` with
        // `dir=.`, `a//b` all name what they name without the `.` and the empty segments).
        let segments: Vec<&[(char, bool)]> = characters
            .split(|(character, _)| *character == '/')
            .filter(|segment| !segment.is_empty() && !matches!(segment, [('.', _)]))
            .collect();
        // A `*` or `?` from an input is a character of the path, so it does not end the anchor.
        let anchor: PathBuf = std::iter::once(String::from("/"))
            .chain(
                segments
                    .iter()
                    .take_while(|segment| {
                        !segment
                            .iter()
                            .any(|(character, literal)| !literal && matches!(character, '*' | '?'))
                    })
                    .map(|segment| segment.iter().map(|(character, _)| character).collect()),
            )
            .collect();
        let exact = anchor.components().count() == segments.len() + 1;
        let mut pattern = String::from("^");
        let mut run = String::new();
        let mut run_literal = true;
        let flush = |pattern: &mut String, run: &mut String, literal: bool| {
            if literal {
                pattern.push_str(&regex::escape(run));
            } else {
                push_glob(pattern, run);
            }
            run.clear();
        };
        for segment in segments {
            // A separator joins the pattern run it follows, so `**/` stays one wildcard.
            for &(character, literal) in std::iter::once(&('/', run_literal)).chain(segment) {
                if literal != run_literal {
                    flush(&mut pattern, &mut run, run_literal);
                    run_literal = literal;
                }
                run.push(character);
            }
        }
        flush(&mut pattern, &mut run, run_literal);
        if pattern == "^" {
            pattern.push('/');
        }
        pattern.push('$');
        let pattern = regex::Regex::new(&pattern)
            .map_err(|error| format!("the path pattern `{written}` is invalid: {error}"))?;
        Ok(Glob {
            written,
            pattern: Some(pattern),
            anchor,
            exact,
        })
    }

    fn matches(&self, path: &str) -> bool {
        self.pattern
            .as_ref()
            .is_some_and(|pattern| pattern.is_match(path))
    }
}

/// A kind's declared grant, unless it is left to the layers above (`bounded_above`) and names
/// an input `inputs` has no value for: then those layers alone bound that kind.
fn declared<'a>(
    grants: &'a Option<Vec<String>>,
    bounded_above: bool,
    inputs: Option<&GrantInputs>,
) -> Option<&'a Vec<String>> {
    let unbound = |grant: &String| {
        crate::effects::grant_inputs::named_inputs(grant)
            .iter()
            .any(|name| inputs.is_none_or(|inputs| !inputs.has_value(name)))
    };
    grants
        .as_ref()
        .filter(|written| !(bounded_above && written.iter().any(unbound)))
}

/// The entries a written grant stands for: itself when it names no input, its expansions
/// from `inputs`, or `None` when it names an input and no values were given.
fn entries(
    written: &str,
    inputs: Option<&GrantInputs>,
    kind: GrantKind,
) -> Result<Option<Vec<crate::effects::grant_inputs::Expansion>>, String> {
    if !names_inputs(written) {
        crate::effects::grant_inputs::grant_pieces(written)?;
        return Ok(Some(vec![vec![(written.to_string(), false)]]));
    }
    inputs
        .map(|inputs| inputs.expand(written, kind))
        .transpose()
}

/// An expansion's text.
fn joined(pieces: &[(String, bool)]) -> String {
    pieces.iter().map(|(text, _)| text.as_str()).collect()
}

/// Appends a glob's regular expression: `**/` any directories, `**` anything, `*` within a
/// name, `?` one character of a name.
fn push_glob(pattern: &mut String, glob: &str) {
    let mut characters = glob.chars().peekable();
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
/// environment: the dynamic loader's and the C library's (glibc's list of variables it ignores
/// in set-user-ID programs), git's (any `GIT_*`: `GIT_DIR` alone points it at a repository whose
/// config runs commands), shells' startup files and exported functions, interpreters' preload
/// and module paths.
pub(crate) fn is_dangerous_variable(name: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "LD_",
        "DYLD_",
        "GIT_",
        "PYTHON",
        "PERL5",
        "RUBY",
        "BASH_FUNC_",
        "LUA_",
        "MALLOC_",
    ];
    const NAMES: [&str; 16] = [
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PROMPT_COMMAND",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERLLIB",
        "GCONV_PATH",
        "GETCONF_DIR",
        "HOSTALIASES",
        "LOCPATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
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
