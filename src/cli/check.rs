//! `protocol-run check FILE...`: lint beyond the schema; warnings located, optionally fatal.

use std::path::PathBuf;

use super::exit_code;
use super::validate::{is_library_text, load_error_code, validate_library};
use crate::diagnostic::render_all;

pub fn check(files: &[PathBuf], deny_warnings: bool) -> u8 {
    let mut worst = 0;
    for file in files {
        // A library's blocks and policies are linted where protocols use them; on its own it
        // is checked as `validate` checks it.
        if crate::compile::library::is_library_file(file) {
            worst = worst.max(validate_library(file));
            continue;
        }
        let loaded = match crate::load::load_file(file) {
            Ok(loaded) => loaded,
            Err(crate::load::LoadError::Invalid(_)) if is_library_text(file) => {
                worst = worst.max(validate_library(file));
                continue;
            }
            Err(error) => {
                eprint!("{error}");
                worst = worst.max(load_error_code(&error));
                continue;
            }
        };
        let machine = match crate::compile::compile(&loaded) {
            Ok(machine) => machine,
            Err(diagnostics) => {
                eprint!("{}", render_all(&diagnostics));
                worst = worst.max(exit_code::INVALID);
                continue;
            }
        };
        let warnings = crate::lint::check(&loaded, &machine);
        if warnings.is_empty() {
            println!("ok: {} (no warnings)", file.display());
        } else {
            eprint!("{}", render_all(&warnings));
            if deny_warnings {
                worst = worst.max(exit_code::INVALID);
            }
        }
    }
    worst
}
