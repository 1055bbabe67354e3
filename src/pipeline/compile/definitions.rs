//! The blocks and retry policies a protocol can name: its own, and those of the files it imports.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use crate::base::diagnostic::Diagnostic;
use crate::base::model::{Block, Library, effect::Retrier};
use crate::pipeline::load::schema::DocumentKind;
use crate::pipeline::load::source::{Part, Source};
use crate::pipeline::load::yaml::escape_pointer_token;
use crate::pipeline::load::{Loaded, OwnFileError};

/// The most library files one protocol's imports may read, all levels together.
pub const MAX_IMPORTED_FILES: usize = 64;

/// Which file a definition is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The protocol being compiled.
    Protocol,
    /// The imported file at this index of `Definitions::sources`.
    Imported(usize),
}

/// One named definition and where it is written.
#[derive(Debug)]
pub struct Definition<T> {
    pub origin: Origin,
    /// The JSON pointer of the definition in its file, e.g. `/blocks/call_tool`.
    pub pointer: String,
    pub value: T,
}

/// Every block and retry policy a protocol can name, in one namespace: a name defined twice
/// (here and in an import, or in two imports) is an error.
#[derive(Debug, Default)]
pub struct Definitions {
    /// The imported files as read, for locating what is written in them.
    pub sources: Vec<Source>,
    pub blocks: IndexMap<String, Definition<Block>>,
    pub policies: IndexMap<String, Definition<Vec<Retrier>>>,
    /// Problems found while reading the imports and collecting the names.
    pub diagnostics: Vec<Diagnostic>,
    /// An import could not be read: a name it may define is not reported as unknown again.
    pub incomplete: bool,
}

impl Definitions {
    /// The protocol's own definitions, then those of its imports (read relative to its file,
    /// each once).
    pub fn gather(loaded: &Loaded) -> Definitions {
        let protocol = &loaded.protocol;
        let own = Library {
            description: None,
            imports: protocol.imports.clone(),
            blocks: protocol.blocks.clone(),
            retry_policies: protocol.retry_policies.clone(),
        };
        Definitions::gather_file(&loaded.source, own)
    }

    /// The definitions of the file `source` (a protocol's, or a library checked on its own),
    /// `own` being what it defines and imports, then those of its imports.
    pub fn gather_file(source: &Source, own: Library) -> Definitions {
        let mut definitions = Definitions::default();
        definitions.add(Origin::Protocol, source, own.blocks, own.retry_policies);
        let path = Path::new(&source.path);
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let mut reading = Reading {
            protocol: source,
            chain: vec![(canonical, source.path.clone())],
            read: HashSet::new(),
        };
        reading.imports(&mut definitions, Origin::Protocol, &own.imports);
        definitions
    }

    /// The source a definition of `origin` is written in.
    pub fn source<'a>(&'a self, origin: Origin, protocol: &'a Source) -> &'a Source {
        match origin {
            Origin::Protocol => protocol,
            Origin::Imported(index) => &self.sources[index],
        }
    }

    /// Adds the definitions of the file of `origin`, refusing a name already defined.
    fn add(
        &mut self,
        origin: Origin,
        protocol: &Source,
        blocks: IndexMap<String, Block>,
        policies: IndexMap<String, Vec<Retrier>>,
    ) {
        let mut clashes = Vec::new();
        insert_new(&mut self.blocks, origin, "blocks", blocks, &mut clashes);
        insert_new(
            &mut self.policies,
            origin,
            "retry_policies",
            policies,
            &mut clashes,
        );
        for clash in clashes {
            let first = self
                .source(clash.first_origin, protocol)
                .location(&clash.first_pointer, Part::Key);
            let what = if clash.pointer.starts_with("/blocks/") {
                "block"
            } else {
                "retry policy"
            };
            self.diagnostics.push(
                Diagnostic::error(format!("the {what} `{}` is defined twice", clash.name))
                    .at(self
                        .source(origin, protocol)
                        .location(&clash.pointer, Part::Key))
                    .with_help(format!(
                        "it is also defined at {}:{}:{}; a protocol and its imports share one \
                         set of names: rename one",
                        first.file, first.position.line, first.position.column
                    )),
            );
        }
    }
}

/// A name defined a second time: where, and where it was first.
struct Clash {
    name: String,
    pointer: String,
    first_origin: Origin,
    first_pointer: String,
}

/// Adds each definition under `section` (`blocks`, `retry_policies`) whose name is new; the
/// others become clashes.
fn insert_new<T>(
    known: &mut IndexMap<String, Definition<T>>,
    origin: Origin,
    section: &str,
    definitions: IndexMap<String, T>,
    clashes: &mut Vec<Clash>,
) {
    for (name, value) in definitions {
        let pointer = format!("/{section}/{}", escape_pointer_token(&name));
        match known.get(&name) {
            Some(first) => clashes.push(Clash {
                name,
                pointer,
                first_origin: first.origin,
                first_pointer: first.pointer.clone(),
            }),
            None => {
                known.insert(
                    name,
                    Definition {
                        origin,
                        pointer,
                        value,
                    },
                );
            }
        }
    }
}

/// The state of reading imports: what is being read (for cycles) and what was read.
struct Reading<'a> {
    protocol: &'a Source,
    /// The files importing the one being read, by canonical path and as shown, outermost first.
    chain: Vec<(PathBuf, String)>,
    /// Files already read in this load: a file imported twice is read once.
    read: HashSet<PathBuf>,
}

impl Reading<'_> {
    /// Reads the files `imports` (written in the file of `origin`) and adds their definitions.
    fn imports(&mut self, definitions: &mut Definitions, origin: Origin, imports: &[String]) {
        for (index, import) in imports.iter().enumerate() {
            let pointer = format!("/imports/{index}");
            if let Err(diagnostic) = self.import(definitions, origin, import, &pointer) {
                definitions.diagnostics.push(*diagnostic);
                definitions.incomplete = true;
            }
        }
    }

    /// Reads one import; a problem with the import itself is located at its entry.
    fn import(
        &mut self,
        definitions: &mut Definitions,
        origin: Origin,
        import: &str,
        pointer: &str,
    ) -> Result<(), Box<Diagnostic>> {
        let importer_shown = self.chain.last().map(|(_, shown)| shown.clone());
        let protocol = self.protocol;
        let problem = |definitions: &Definitions, message: String, help: &str| {
            let location = definitions
                .source(origin, protocol)
                .location(pointer, Part::Value);
            Box::new(Diagnostic::error(message).at(location).with_help(help))
        };
        let parent = Path::new(importer_shown.as_deref().unwrap_or_default())
            .parent()
            .unwrap_or(Path::new(""));
        let path = parent.join(import);
        let is_yaml = path
            .extension()
            .is_some_and(|extension| extension == "yaml" || extension == "yml");
        if !is_yaml {
            return Err(problem(
                definitions,
                format!("`{import}` is not a library file"),
                "an imported file is a `.yaml` (or `.yml`) file of `blocks:` and `retry_policies:`",
            ));
        }
        // Like a child protocol, a library is the operator's to load: its path is fixed in the
        // file, so the protocol's `read` grant does not apply to it.
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        if let Some(start) = self.chain.iter().position(|(known, _)| *known == canonical) {
            let cycle: Vec<&str> = self.chain[start..]
                .iter()
                .map(|(_, shown)| shown.as_str())
                .chain([path.to_str().unwrap_or(import)])
                .collect();
            return Err(problem(
                definitions,
                format!("import cycle: {}", cycle.join(" → ")),
                "a file cannot import itself, directly or through others",
            ));
        }
        if self.read.contains(&canonical) {
            return Ok(());
        }
        if self.read.len() >= MAX_IMPORTED_FILES {
            return Err(problem(
                definitions,
                format!(
                    "the imports read more than the limit of {MAX_IMPORTED_FILES} library files"
                ),
                "merge small libraries into fewer files",
            ));
        }
        self.read.insert(canonical.clone());
        let shown = path.display().to_string();
        let keys = ["blocks", "retry_policies", "imports"];
        let text = crate::pipeline::load::read_own_file(&path, &keys).map_err(|error| match error {
            OwnFileError::NotOfKind(reason) => problem(
                definitions,
                format!("the import `{import}` is not a library: {reason}"),
                &format!(
                    "a library is a file of `blocks:` and `retry_policies:`; none of this file's \
                     lines are shown, as the path may name any file (`protocol-run validate {}` \
                     shows its problems)",
                    path.display()
                ),
            ),
            OwnFileError::Unloadable(other) => {
                let message = other.to_string();
                let message = message.trim_start_matches("error: ").trim_end().to_string();
                problem(
                    definitions,
                    message,
                    "the path is relative to the importing file",
                )
            }
        })?;
        let library = crate::pipeline::load::parse_document(DocumentKind::Library, &shown, text)
            .and_then(
                |(source, value)| match serde_json::from_value::<Library>(value) {
                    Ok(library) => Ok((source, library)),
                    Err(error) => Err(vec![
                        Diagnostic::error(format!("the library does not fit the model: {error}"))
                            .at(source.location("", Part::Value)),
                    ]),
                },
            );
        let (source, library) = match library {
            Ok(read) => read,
            Err(diagnostics) => {
                definitions.diagnostics.extend(diagnostics);
                return Err(problem(
                    definitions,
                    format!("the imported file `{import}` is invalid"),
                    "its problems are listed above",
                ));
            }
        };
        let index = definitions.sources.len();
        definitions.sources.push(source);
        definitions.add(
            Origin::Imported(index),
            self.protocol,
            library.blocks,
            library.retry_policies,
        );
        self.chain.push((canonical, shown));
        self.imports(definitions, Origin::Imported(index), &library.imports);
        self.chain.pop();
        Ok(())
    }
}
