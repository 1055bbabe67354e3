//! `validate` and `check` on a scenario file: its schema, its protocol, and the names it uses.

use std::path::Path;

use super::exit_code;
use crate::base::diagnostic::render_all;
use crate::tooling::scenario::check::check_scenario_file;

/// Whether `validate` and `check` take `file` as a scenario file (by name or by content).
pub fn is_scenario_file(file: &Path) -> bool {
    crate::tooling::scenario::check::is_scenario(file)
}

/// `validate`: every error at once; the warnings are `check`'s.
pub fn validate(file: &Path) -> u8 {
    match check_scenario_file(file) {
        Ok(checked) => {
            let count = checked.file.scenarios.len();
            println!(
                "ok: {} (scenarios of protocol `{}`, {count} {})",
                file.display(),
                checked.machine.id,
                if count == 1 { "scenario" } else { "scenarios" }
            );
            0
        }
        Err(diagnostics) => report(&diagnostics),
    }
}

/// `check`: `validate`'s errors, then warnings (events no `on:` handles); warnings are fatal
/// with `deny_warnings`.
pub fn check(file: &Path, deny_warnings: bool) -> u8 {
    match check_scenario_file(file) {
        Ok(checked) if checked.warnings.is_empty() => {
            println!("ok: {} (scenarios, no warnings)", file.display());
            0
        }
        Ok(checked) => {
            eprint!("{}", render_all(&checked.warnings));
            if deny_warnings { exit_code::INVALID } else { 0 }
        }
        Err(diagnostics) => report(&diagnostics),
    }
}

fn report(diagnostics: &[crate::base::diagnostic::Diagnostic]) -> u8 {
    eprint!("{}", render_all(diagnostics));
    exit_code::INVALID
}
