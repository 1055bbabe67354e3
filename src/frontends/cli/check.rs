//! `protocol-run check FILE...`: lint beyond the schema; warnings located, optionally fatal.

use std::path::PathBuf;

use super::exit_code;
use super::validate::{checked_library, is_library_text};
use crate::base::diagnostic::render_all;

pub fn check(files: &[PathBuf], deny_warnings: bool) -> u8 {
    let mut worst = 0;
    for file in files {
        if super::scenario_file::is_scenario_file(file) {
            worst = worst.max(super::scenario_file::check(file, deny_warnings));
            continue;
        }
        if crate::pipeline::load::is_library_file(file) {
            worst = worst.max(check_library(file, deny_warnings));
            continue;
        }
        let (loaded, machine) =
            match crate::pipeline::compile::set_aside::load_and_compile_file(file) {
                Ok(compiled) => compiled,
                Err(crate::pipeline::load::LoadError::Invalid(_)) if is_library_text(file) => {
                    worst = worst.max(check_library(file, deny_warnings));
                    continue;
                }
                Err(error) => {
                    eprint!("{error}");
                    worst = worst.max(super::exit_code::of_load_error(&error));
                    continue;
                }
            };
        let warnings = crate::tooling::lint::check(&loaded, &machine);
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

/// A library: checked as `validate` checks it, then linted for what applies to blocks on
/// their own (the rest is linted in the protocols that use them).
fn check_library(file: &std::path::Path, deny_warnings: bool) -> u8 {
    let checked = match checked_library(file) {
        Ok(checked) => checked,
        Err(code) => return code,
    };
    let warnings = crate::tooling::lint::check_library(&checked.source, &checked.library);
    if warnings.is_empty() {
        println!("ok: {} (library, no warnings)", file.display());
        return 0;
    }
    eprint!("{}", render_all(&warnings));
    if deny_warnings { exit_code::INVALID } else { 0 }
}
