//! `protocol-run validate FILE...`: load and compile each file, print every problem (schema, structure, expressions) together.

use std::path::PathBuf;

use crate::pipeline::compile::set_aside::load_and_compile_file;
use crate::pipeline::load::LoadError;

pub fn validate(files: &[PathBuf]) -> u8 {
    let mut worst = 0;
    for (index, file) in files.iter().enumerate() {
        // `protocols/*.yaml` names scenario files too: they are checked as scenarios.
        if super::scenario_file::is_scenario_file(file) {
            worst = worst.max(super::scenario_file::validate(file));
            continue;
        }
        if crate::pipeline::load::is_library_file(file) {
            worst = worst.max(validate_library(file));
            continue;
        }
        let code = match load_and_compile_file(file) {
            Err(LoadError::Invalid(_)) if is_library_text(file) => validate_library(file),
            Ok((loaded, machine)) => {
                println!(
                    "ok: {} (protocol `{}`, {} states, {} transitions)",
                    file.display(),
                    machine.id,
                    machine.states.len() - 1,
                    machine.transitions.len()
                );
                if machine.capabilities.is_unrestricted() {
                    println!("  capabilities: unrestricted (no `permissions` declared)");
                } else {
                    for line in machine.capabilities.describe() {
                        println!("  {line}");
                    }
                    if !machine.capabilities.is_resolved() {
                        println!(
                            "  grants naming inputs (`${{name}}`) are resolved when a run \
                                 starts, from its inputs (a value matches only as a literal path)"
                        );
                    }
                    for line in crate::effects::sandbox::describe(&machine.capabilities) {
                        println!("  {line}");
                    }
                }
                print_secret_inputs(&machine);
                if index + 1 == files.len() {
                    // The process exits once this returns: freeing the last file's protocol,
                    // positions and machine (every node, map and table: a tenth of what
                    // `validate` does of its own) would be work undone by the exit. Only the
                    // last file is kept, so a long list of files leaks nothing per file.
                    std::mem::forget((loaded, machine));
                }
                0
            }
            Err(error) => {
                eprint!("{error}");
                if !matches!(error, LoadError::Invalid(_)) {
                    eprintln!();
                }
                super::exit_code::of_load_error(&error)
            }
        };
        worst = worst.max(code);
    }
    worst
}

/// Whether a file that is no valid protocol is written as a library (no `states`, but
/// `blocks` or `retry_policies`).
pub fn is_library_text(file: &std::path::Path) -> bool {
    crate::pipeline::load::read_text(file)
        .is_ok_and(|text| crate::pipeline::compile::library::looks_like_library(&text))
}

/// A library file: its schema, imports, blocks and policies (see `compile::library`).
pub fn validate_library(file: &std::path::Path) -> u8 {
    match checked_library(file) {
        Ok(library) => {
            let count = |count: usize, one: &str, many: &str| {
                format!("{count} {}", if count == 1 { one } else { many })
            };
            println!(
                "ok: {} (library, {}, {}, {})",
                file.display(),
                count(library.library.blocks.len(), "block", "blocks"),
                count(
                    library.library.retry_policies.len(),
                    "retry policy",
                    "retry policies"
                ),
                count(library.imported_files, "imported file", "imported files"),
            );
            0
        }
        Err(code) => code,
    }
}

/// The library at `file`, checked, or its problems printed and the exit code they give.
pub fn checked_library(
    file: &std::path::Path,
) -> Result<crate::pipeline::compile::library::CheckedLibrary, u8> {
    crate::pipeline::compile::library::check_library(file).map_err(|error| {
        eprint!("{error}");
        if !matches!(error, LoadError::Invalid(_)) {
            eprintln!();
        }
        super::exit_code::of_load_error(&error)
    })
}

/// Which inputs are secrets, and what that means for the operator.
fn print_secret_inputs(machine: &crate::pipeline::compile::machine::Machine) {
    let secrets: Vec<&str> = machine
        .inputs
        .iter()
        .filter(|input| input.secret)
        .map(|input| input.name.as_str())
        .collect();
    if let Some(first) = secrets.first() {
        println!(
            "  secret inputs: {} (masked as ***NAME*** in every log, status and output line; \
             never stored: a resume needs them again, e.g. --input {first}=VALUE)",
            secrets.join(", ")
        );
    }
}
