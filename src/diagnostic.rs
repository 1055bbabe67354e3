//! Located diagnostics: the one type every user-facing problem becomes, and its one renderer.

use std::fmt;

use crate::load::yaml::Position;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// Where a diagnostic points: the file, the position, and the source line shown under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    pub file: String,
    pub position: Position,
    /// The whole source line containing the position, without its line ending.
    pub source_line: String,
    /// How many characters the marker under the line covers (at least one).
    pub width: usize,
}

/// One problem, with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub location: Option<Location>,
    /// A short text next to the marker.
    pub label: Option<String>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            location: None,
            label: None,
            help: None,
        }
    }

    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message)
        }
    }

    pub fn at(mut self, location: Location) -> Self {
        self.location = Some(location);
        self
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_optional_help(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// Renders in the style of rustc: header, `--> file:line:col`, the line, a caret marker, help.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let heading = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(formatter, "{heading}: {}", self.message)?;
        let gutter_width = self
            .location
            .as_ref()
            .map_or(1, |location| location.position.line.to_string().len());
        let gutter = " ".repeat(gutter_width);
        if let Some(location) = &self.location {
            let Position { line, column, .. } = location.position;
            writeln!(formatter, "{gutter}--> {}:{line}:{column}", location.file)?;
            writeln!(formatter, "{gutter} |")?;
            let shown_line = location.source_line.replace('\t', " ");
            writeln!(formatter, "{line} | {shown_line}")?;
            let indent = " ".repeat(column.saturating_sub(1));
            let marker = "^".repeat(location.width.max(1));
            match &self.label {
                Some(label) => writeln!(formatter, "{gutter} | {indent}{marker} {label}")?,
                None => writeln!(formatter, "{gutter} | {indent}{marker}")?,
            }
        } else if let Some(label) = &self.label {
            writeln!(formatter, "{gutter} = {label}")?;
        }
        if let Some(help) = &self.help {
            writeln!(formatter, "{gutter} = help: {help}")?;
        }
        Ok(())
    }
}

/// Renders every diagnostic, separated by blank lines, with a closing count of errors.
pub fn render_all(diagnostics: &[Diagnostic]) -> String {
    let mut text = String::new();
    for diagnostic in diagnostics {
        text.push_str(&diagnostic.to_string());
        text.push('\n');
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let plural = |count: usize| if count == 1 { "" } else { "s" };
    match (errors, warnings) {
        (0, 0) => {}
        (0, warnings) => text.push_str(&format!("{warnings} warning{}\n", plural(warnings))),
        (errors, 0) => text.push_str(&format!("{errors} error{}\n", plural(errors))),
        (errors, warnings) => text.push_str(&format!(
            "{errors} error{}, {warnings} warning{}\n",
            plural(errors),
            plural(warnings)
        )),
    }
    text
}

/// The candidate closest to `name` by edit distance, if it is close enough to be a likely typo.
pub fn closest_match<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// "did you mean `x`?" for the closest candidate, or None.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest_match(name, candidates).map(|candidate| format!("did you mean `{candidate}`?"))
}

/// Levenshtein distance over characters.
fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut previous: Vec<usize> = (0..=right.len()).collect();
    let mut current = vec![0; right.len() + 1];
    for (i, left_char) in left.chars().enumerate() {
        current[0] = i + 1;
        for (j, right_char) in right.iter().enumerate() {
            let substitution = previous[j] + usize::from(left_char != *right_char);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[right.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_name() {
        let states = ["idle", "retrying", "escalated"];
        assert_eq!(closest_match("retryin", states), Some("retrying"));
        assert_eq!(closest_match("zzzzzz", states), None);
    }

    #[test]
    fn renders_file_line_column_and_marker() {
        let diagnostic = Diagnostic::error("unknown target `retryin`")
            .at(Location {
                file: "p.yaml".into(),
                position: Position {
                    line: 12,
                    column: 17,
                    offset: 0,
                },
                source_line: "        target: retryin".into(),
                width: 7,
            })
            .with_label("no state has this id")
            .with_help("did you mean `retrying`?");
        let text = diagnostic.to_string();
        assert!(text.contains("--> p.yaml:12:17"), "{text}");
        assert!(text.contains("12 |         target: retryin"), "{text}");
        assert!(text.contains("   |                 ^^^^^^^ no state has this id"), "{text}");
        assert!(text.contains("= help: did you mean `retrying`?"), "{text}");
    }
}
