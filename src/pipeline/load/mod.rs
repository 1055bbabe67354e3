//! Loading: file → YAML value with positions → schema validation → typed model.

pub mod pinned;
pub mod schema;
mod schema_branch;
mod schema_check;
#[cfg(test)]
mod schema_check_tests;
mod schema_forms;
// Its compiler runs in build.rs; here only the tests compile a schema.
pub mod positions;
#[cfg_attr(not(test), allow(dead_code))]
mod schema_tables;
pub mod set_aside;
pub mod source;
pub mod yaml;

use std::path::{Path, PathBuf};

use crate::base::diagnostic::{Diagnostic, Location};
use crate::base::model::Protocol;
use source::{Part, Source};
use yaml::YamlLimits;

/// How many diagnostics with the same message are shown before the rest are summarised.
pub(crate) const REPEATS_SHOWN: usize = 3;

/// A protocol read and validated, with its source kept for later diagnostics.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub source: Source,
    pub protocol: Protocol,
}

/// Why a protocol could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("error: cannot read {path}: no such file")]
    NotFound { path: String },
    #[error("error: cannot read {path}: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error("{}", crate::base::diagnostic::render_all(.0))]
    Invalid(Vec<Diagnostic>),
}

/// The protocol files directly in `directory` (`*.yaml`, `*.yml`; scenario and library files
/// left out), sorted: what `mcp` serves and `test --explore` explores of a directory.
pub fn protocol_files(directory: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(directory).map_err(|error| error.to_string())?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            (name.ends_with(".yaml") || name.ends_with(".yml"))
                && !name.contains(".scenario.")
                && !name.contains(".library.")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Whether `path` names a library file (`*.library.yaml`), which `validate` and `check` read
/// as a library rather than a protocol.
pub fn is_library_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(".library.yaml") || name.ends_with(".library.yml"))
}

/// Reads and loads a protocol file.
pub fn load_file(path: &Path) -> Result<Loaded, LoadError> {
    let text = read_text(path)?;
    load_text(&path.display().to_string(), text).map_err(LoadError::Invalid)
}

/// Reads a file a protocol names as its own (a child protocol, an imported library) and makes
/// sure it is at least of that kind: UTF-8 YAML whose top level has one of `keys`. Its path is the
/// protocol's choice and `read` does not govern it, so it may name any `.yaml` on the machine
/// (`secrets.yaml`): one of another kind is refused with a reason that quotes none of its lines.
pub fn read_own_file(path: &Path, keys: &[&str]) -> Result<String, OwnFileError> {
    // A resumed run reads the text it started with (`pinned`), not the file as it is now.
    let text = pinned::text_of(path).map_or_else(|| read_text(path), Ok);
    let text = text.map_err(|error| match error {
        // Its diagnostic shows the line before the bad byte.
        LoadError::Invalid(_) => OwnFileError::NotOfKind("it is not UTF-8 text".to_string()),
        other => OwnFileError::Unloadable(other),
    })?;
    let value = match yaml::parse(&text, &YamlLimits::default()) {
        Ok(document) => document.value,
        Err(errors) => {
            let reason = errors.first().map_or_else(
                || "it is not valid YAML".to_string(),
                |error| {
                    format!(
                        "it is not valid YAML (line {}, column {})",
                        error.position.line, error.position.column
                    )
                },
            );
            return Err(OwnFileError::NotOfKind(reason));
        }
    };
    let has_key = value
        .as_object()
        .is_some_and(|entries| keys.iter().any(|key| entries.contains_key(*key)));
    if !has_key {
        let keys: Vec<String> = keys.iter().map(|key| format!("`{key}:`")).collect();
        let reason = match keys.as_slice() {
            [key] => format!("its top level has no {key}"),
            _ => format!("its top level has none of {}", keys.join(", ")),
        };
        return Err(OwnFileError::NotOfKind(reason));
    }
    Ok(text)
}

/// Why a protocol's own file (a child, a library) was not loaded.
#[derive(Debug)]
pub enum OwnFileError {
    /// It is missing or unreadable.
    Unloadable(LoadError),
    /// It is not of its kind: the reason, which shows none of its lines.
    NotOfKind(String),
}

/// Reads a UTF-8 text file, telling a missing file from an unreadable or non-UTF-8 one.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => LoadError::NotFound {
            path: shown.clone(),
        },
        _ => LoadError::Unreadable {
            path: shown.clone(),
            error,
        },
    })?;
    let text = String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        LoadError::Invalid(vec![
            Diagnostic::error(format!(
                "{shown}: the file is not UTF-8 text (invalid byte 0x{:02x} at offset {offset})",
                bytes[offset]
            ))
            .at(invalid_byte_location(&shown, bytes, offset))
            .with_label("not UTF-8")
            .with_help("save the file as UTF-8"),
        ])
    })?;
    Ok(text)
}

/// Where the first invalid byte of a file that is not UTF-8 is: its line and column (counted
/// in the characters of the valid text before it), and that line up to it.
fn invalid_byte_location(file: &str, bytes: &[u8], offset: usize) -> Location {
    // Everything before `offset` is valid UTF-8.
    let before = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line_before = &before[line_start..];
    Location {
        file: file.to_string(),
        position: yaml::Position {
            line: before.matches('\n').count() + 1,
            column: line_before.chars().count() + 1,
            offset,
        },
        source_line: line_before.trim_end_matches('\r').to_string(),
        first_column: 1,
        width: 1,
    }
}

/// Loads a protocol from text; `path` is used in messages, and a library's name
/// (`*.library.yaml`) is refused with what to do with it.
pub fn load_text(path: &str, text: String) -> Result<Loaded, Vec<Diagnostic>> {
    if let Some(refusal) = refuse_library(path) {
        return Err(refusal);
    }
    let (source, value) = parse_document(schema::DocumentKind::Protocol, path, text)?;
    into_loaded(source, value)
}

/// A library's name (`*.library.yaml`) given as a protocol: what to do with it.
pub(crate) fn refuse_library(path: &str) -> Option<Vec<Diagnostic>> {
    // Its schema errors as a protocol (no `id`, no `states`) would hide what it is.
    is_library_file(Path::new(path)).then(|| {
        vec![
            Diagnostic::error(format!(
                "{path}: a library file (`*.library.yaml`), not a protocol"
            ))
            .with_help(
                "a protocol imports it (`imports: [FILE]`) and uses its blocks; `protocol-run \
                 validate FILE` checks it on its own",
            ),
        ]
    })
}

/// A schema-valid document as the typed model.
pub(crate) fn into_loaded(
    source: Source,
    value: serde_json::Value,
) -> Result<Loaded, Vec<Diagnostic>> {
    match serde_json::from_value::<Protocol>(value) {
        Ok(protocol) => Ok(Loaded { source, protocol }),
        Err(error) => Err(vec![
            Diagnostic::error(format!("the protocol does not fit the model: {error}"))
                .at(source.location("", Part::Value)),
        ]),
    }
}

/// YAML text → value with positions, validated against the schema of its kind.
pub fn parse_document(
    kind: schema::DocumentKind,
    path: &str,
    text: String,
) -> Result<(Source, serde_json::Value), Vec<Diagnostic>> {
    let (source, value, violations) = parse_checked(kind, path, text)?;
    if !violations.is_empty() {
        let diagnostics = violations.into_iter().map(|v| v.diagnostic).collect();
        return Err(crate::base::diagnostic::limit_repeats(
            diagnostics,
            REPEATS_SHOWN,
        ));
    }
    Ok((source, value))
}

/// YAML text → value with positions and its schema violations; YAML errors are the `Err`.
pub(crate) fn parse_checked(
    kind: schema::DocumentKind,
    path: &str,
    text: String,
) -> Result<(Source, serde_json::Value, Vec<set_aside::Violation>), Vec<Diagnostic>> {
    let mut source = Source {
        path: path.to_string(),
        text,
        positions: Default::default(),
    };
    let document = match yaml::parse(&source.text, &YamlLimits::default()) {
        Ok(document) => document,
        Err(errors) => {
            let diagnostics = errors
                .into_iter()
                .map(|error| {
                    Diagnostic::error(error.message)
                        .at(source.location_at(error.position, Part::Value))
                        .with_optional_help(error.help)
                })
                .collect();
            return Err(crate::base::diagnostic::limit_repeats(
                diagnostics,
                REPEATS_SHOWN,
            ));
        }
    };
    source.positions = document.positions;
    let violations = schema::violations(kind, &source, &document.value);
    Ok((source, document.value, violations))
}
