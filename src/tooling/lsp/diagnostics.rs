//! A document's problems, found by the engine's own loader, compiler and lint (what `validate`
//! and `check` print), as LSP diagnostics.

use std::path::Path;

use lsp_types::{DiagnosticSeverity, Position, Range};

use super::positions::{offset_of_line_column, position_of, token_range};
use crate::base::diagnostic::{Diagnostic, Severity};

/// The source named in every diagnostic, so an editor can tell them from its YAML server's.
const SOURCE: &str = "protocol-run";

/// Checks `text`, the unsaved buffer of the file at `path`, as `validate` and `check` would:
/// a scenario file as a scenario, a library as a library, anything else as a protocol.
pub fn analyse(path: &Path, text: &str) -> Vec<lsp_types::Diagnostic> {
    let problems = if super::scenario::is_scenario_buffer(path, text) {
        scenario_problems(path, text)
    } else if crate::pipeline::load::is_library_file(path)
        || crate::pipeline::compile::library::looks_like_library(text)
    {
        library_problems(path, text)
    } else {
        protocol_problems(path, text)
    };
    let shown = path.display().to_string();
    problems
        .iter()
        .map(|problem| convert(problem, &shown, text))
        .collect()
}

/// `validate`'s errors, or when there are none, `check`'s warnings.
fn protocol_problems(path: &Path, text: &str) -> Vec<Diagnostic> {
    match crate::pipeline::compile::set_aside::load_and_compile_text(
        &path.display().to_string(),
        text.to_string(),
    ) {
        Ok((loaded, machine)) => crate::tooling::lint::check(&loaded, &machine),
        Err(problems) => problems,
    }
}

fn library_problems(path: &Path, text: &str) -> Vec<Diagnostic> {
    match crate::pipeline::compile::library::check_library_text(path, text.to_string()) {
        Ok(checked) => crate::tooling::lint::check_library(&checked.source, &checked.library),
        Err(problems) => problems,
    }
}

/// The checks `validate` and `check` make of a scenario file (its schema, its protocol, the
/// names it uses), on the unsaved buffer: its errors, or when there are none, `check`'s
/// warnings.
fn scenario_problems(path: &Path, text: &str) -> Vec<Diagnostic> {
    match crate::tooling::scenario::check::check_scenario_text(path, text.to_string()) {
        Ok(checked) => checked.warnings,
        Err(problems) => problems,
    }
}

/// The engine's diagnostic as the editor shows it: located in this document when it is
/// here, otherwise at the top with the other file's place in the message.
fn convert(problem: &Diagnostic, document: &str, text: &str) -> lsp_types::Diagnostic {
    let mut message = problem.message.clone();
    let range = match &problem.location {
        Some(location) if location.file == document => {
            let position = location.position;
            let offset = offset_of_line_column(text, position.line, position.column);
            token_range(text, offset, location.width)
        }
        Some(location) => {
            message = format!(
                "{}:{}:{}: {message}",
                location.file, location.position.line, location.position.column
            );
            Range::new(Position::new(0, 0), position_of(text, 0))
        }
        None => Range::new(Position::new(0, 0), Position::new(0, 0)),
    };
    if let Some(label) = &problem.label {
        message.push_str(&format!(" ({label})"));
    }
    for note in &problem.notes {
        message.push_str(&format!("\nnote: {note}"));
    }
    if let Some(help) = &problem.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    lsp_types::Diagnostic {
        range,
        severity: Some(match problem.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        source: Some(SOURCE.into()),
        message,
        ..Default::default()
    }
}
