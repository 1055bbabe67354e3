//! `protocol-run schema [--out DIR]`: print or write the generated JSON Schema.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use crate::load::schema::protocol_schema_text;

pub fn schema(out: Option<&Path>) -> u8 {
    let text = protocol_schema_text();
    let Some(directory) = out else {
        let mut stdout = std::io::stdout().lock();
        return match stdout.write_all(text.as_bytes()) {
            Ok(()) => 0,
            Err(_) => exit_code::IO,
        };
    };
    let path = directory.join("protocol.schema.json");
    match crate::files::write_atomically(&path, text.as_bytes()) {
        Ok(()) => {
            println!("wrote {}", path.display());
            0
        }
        Err(error) => {
            eprintln!("error: cannot write {}: {error}", path.display());
            exit_code::IO
        }
    }
}
