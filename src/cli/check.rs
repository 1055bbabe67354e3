//! `protocol-run check FILE...`: lint beyond the schema; warnings located, optionally fatal.

use std::path::PathBuf;

use super::exit_code;
use super::validate::load_error_code;
use crate::diagnostic::render_all;

pub fn check(files: &[PathBuf], deny_warnings: bool) -> u8 {
    let mut worst = 0;
    for file in files {
        let loaded = match crate::load::load_file(file) {
            Ok(loaded) => loaded,
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
