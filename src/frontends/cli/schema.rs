//! `protocol-run schema [--out DIR] [--scenario]`: print or write the generated JSON Schemas; the modeline path to them from where a file goes.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use crate::pipeline::load::schema::DocumentKind;

pub fn schema(out: Option<&Path>, scenario: bool) -> u8 {
    let Some(directory) = out else {
        let kind = if scenario {
            DocumentKind::Scenario
        } else {
            DocumentKind::Protocol
        };
        let mut stdout = std::io::stdout().lock();
        return match stdout.write_all(kind.schema_text().as_bytes()) {
            Ok(()) => 0,
            Err(_) => exit_code::IO,
        };
    };
    for kind in [
        DocumentKind::Protocol,
        DocumentKind::Scenario,
        DocumentKind::Library,
    ] {
        let path = directory.join(kind.schema_file_name());
        if let Err(error) =
            crate::base::files::write_atomically(&path, kind.schema_text().as_bytes())
        {
            eprintln!("error: cannot write {}: {error}", path.display());
            return exit_code::IO;
        }
        println!("wrote {}", path.display());
    }
    0
}

/// The modeline's path to the schemas, relative to `directory`: the `schemas/` of the nearest
/// enclosing directory that has one (the project the files go into), else schemas written into
/// `directory` itself, so that the modeline resolves wherever the files go (`new`, and the
/// scenario file `test --generate` writes). Those are written only when missing or stale.
pub fn schemas_seen_from(directory: &Path) -> Result<String, u8> {
    let directory = directory.canonicalize().map_err(|error| {
        eprintln!("error: cannot resolve {}: {error}", directory.display());
        exit_code::IO
    })?;
    let protocol_schema = DocumentKind::Protocol.schema_file_name();
    if let Some(project) = directory
        .ancestors()
        .find(|ancestor| ancestor.join("schemas").join(protocol_schema).is_file())
    {
        return Ok(relative_path(&directory, &project.join("schemas")));
    }
    for kind in [DocumentKind::Protocol, DocumentKind::Scenario] {
        let path = directory.join(kind.schema_file_name());
        let text = kind.schema_text();
        // Written when missing or stale only: a run that changes nothing leaves them alone.
        if std::fs::read_to_string(&path).is_ok_and(|written| written == text) {
            continue;
        }
        if let Err(error) = crate::base::files::write_atomically(&path, text.as_bytes()) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return Err(exit_code::IO);
        }
        println!("wrote {} (no schemas/ above it)", path.display());
    }
    Ok(".".to_string())
}

/// The path from directory `from` to `to` (both absolute): `..` up to their common ancestor,
/// then down; `.` for the same directory.
fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from
        .iter()
        .zip(&to)
        .take_while(|(left, right)| left == right)
        .count();
    let parts: Vec<String> = std::iter::repeat_n("..".to_string(), from.len() - common)
        .chain(
            to[common..]
                .iter()
                .map(|part| part.as_os_str().to_string_lossy().into_owned()),
        )
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}
