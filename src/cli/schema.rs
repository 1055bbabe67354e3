//! `protocol-run schema [--out DIR] [--scenario]`: print or write the generated JSON Schemas.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use crate::load::schema::DocumentKind;

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
        if let Err(error) = crate::files::write_atomically(&path, kind.schema_text().as_bytes()) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return exit_code::IO;
        }
        println!("wrote {}", path.display());
    }
    0
}
