//! A library file checked on its own: its schema, its imports, and each of its blocks and policies.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use super::Compiler;
use super::definitions::Definitions;
use super::expression::Names;
use crate::base::diagnostic::Diagnostic;
use crate::base::model::Library;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::extensions::Extensions;
use crate::pipeline::load::schema::DocumentKind;
use crate::pipeline::load::source::{Part, Source};
use crate::pipeline::load::{LoadError, read_text};

/// A valid library, as read, for `validate`'s summary and `check`'s lint.
#[derive(Debug, Clone)]
pub struct CheckedLibrary {
    pub source: Source,
    pub library: Library,
    /// Library files its imports read, all levels together.
    pub imported_files: usize,
}

/// Whether a YAML document that is not a valid protocol reads as a library: a mapping with
/// `blocks` or `retry_policies` and no `states`.
pub fn looks_like_library(text: &str) -> bool {
    let limits = crate::pipeline::load::yaml::YamlLimits::default();
    let Ok(document) = crate::pipeline::load::yaml::parse(text, &limits) else {
        return false;
    };
    document.value.as_object().is_some_and(|top| {
        !top.contains_key("states")
            && (top.contains_key("blocks") || top.contains_key("retry_policies"))
    })
}

/// Reads the library at `path` and checks it as its importers would see it: its schema, the
/// files it imports, and each block and retry policy compiled on its own against any names
/// (those are the importing protocol's).
pub fn check_library(path: &Path) -> Result<CheckedLibrary, LoadError> {
    check_library_text(path, read_text(path)?).map_err(LoadError::Invalid)
}

/// Checks a library from its text (an editor's unsaved buffer); `path` places it, for messages
/// and for the files it imports.
pub fn check_library_text(path: &Path, text: String) -> Result<CheckedLibrary, Vec<Diagnostic>> {
    let (source, value) = crate::pipeline::load::parse_document(
        DocumentKind::Library,
        &path.display().to_string(),
        text,
    )?;
    let library: Library = serde_json::from_value(value).map_err(|error| {
        vec![
            Diagnostic::error(format!("the library does not fit the model: {error}"))
                .at(source.location("", Part::Value)),
        ]
    })?;
    let definitions = Definitions::gather_file(&source, library.clone());
    let extensions = Arc::new(Extensions::default());
    let children = RefCell::default();
    let file = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut compiler = Compiler::new(
        &source,
        &definitions,
        Capabilities::unrestricted(),
        extensions.clone(),
        vec![file],
        &children,
    );
    compiler.names = Names::open(&extensions);
    compiler.check_blocks_alone();
    if compiler.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(super::blocks::merge_repeated(compiler.diagnostics));
    }
    let imported_files = definitions.sources.len();
    Ok(CheckedLibrary {
        source,
        library,
        imported_files,
    })
}
