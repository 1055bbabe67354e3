//! A document's problems, found by the engine's own loader, compiler and lint (what `validate`
//! and `check` print), as LSP diagnostics.

use std::path::Path;

use lsp_types::{DiagnosticSeverity, Position, Range};

use super::positions::{offset_of_line_column, position_of, token_range};
use crate::diagnostic::{Diagnostic, Severity};
use crate::load::schema::DocumentKind;

/// The source named in every diagnostic, so an editor can tell them from its YAML server's.
const SOURCE: &str = "protocol-run";

/// Checks `text`, the unsaved buffer of the file at `path`, as `validate` and `check` would:
/// a scenario file as a scenario, a library as a library, anything else as a protocol.
pub fn analyse(path: &Path, text: &str) -> Vec<lsp_types::Diagnostic> {
    let problems = if crate::scenario::runner::is_scenario_file(path) {
        scenario_problems(path, text)
    } else if crate::compile::library::is_library_file(path)
        || crate::compile::library::looks_like_library(text)
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
    match crate::load::set_aside::load_and_compile_text(
        &path.display().to_string(),
        text.to_string(),
    ) {
        Ok((loaded, machine)) => crate::lint::check(&loaded, &machine),
        Err(problems) => problems,
    }
}

fn library_problems(path: &Path, text: &str) -> Vec<Diagnostic> {
    match crate::compile::library::check_library_text(path, text.to_string()) {
        Ok(checked) => crate::lint::check_library(&checked.source, &checked.library),
        Err(problems) => problems,
    }
}

/// The scenario file's schema, then its protocol (from disk), loaded and compiled; the
/// protocol's own problems are shown at the scenario's `protocol:` line.
fn scenario_problems(path: &Path, text: &str) -> Vec<Diagnostic> {
    let shown = path.display().to_string();
    let (source, value) =
        match crate::load::parse_document(DocumentKind::Scenario, &shown, text.to_string()) {
            Ok(parsed) => parsed,
            Err(problems) => return problems,
        };
    let protocol_location = source.location("/protocol", crate::load::source::Part::Value);
    let file: crate::scenario::model::ScenarioFile = match serde_json::from_value(value) {
        Ok(file) => file,
        Err(error) => {
            return vec![
                Diagnostic::error(format!("the scenario file does not fit the model: {error}"))
                    .at(protocol_location),
            ];
        }
    };
    let protocol_path = path.parent().unwrap_or(Path::new("")).join(&file.protocol);
    let problems = match crate::load::load_file(&protocol_path) {
        Ok(loaded) => crate::compile::compile(&loaded).err().unwrap_or_default(),
        Err(crate::load::LoadError::Invalid(problems)) => problems,
        Err(error) => {
            return vec![
                Diagnostic::error(error.to_string().trim_start_matches("error: ").to_string())
                    .at(protocol_location)
                    .with_help("`protocol:` names the protocol file, relative to this one"),
            ];
        }
    };
    problems
        .iter()
        .map(|problem| {
            Diagnostic::error(format!(
                "the protocol `{}` is invalid: {}",
                file.protocol,
                one_line(problem)
            ))
            .at(protocol_location.clone())
        })
        .collect()
}

/// A diagnostic as one line: its message and where it is.
fn one_line(problem: &Diagnostic) -> String {
    match &problem.location {
        Some(location) => format!(
            "{} ({}:{}:{})",
            problem.message, location.file, location.position.line, location.position.column
        ),
        None => problem.message.clone(),
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
