//! Located diagnostics: the one type every user-facing problem becomes, and its one renderer.

use std::fmt;

/// A place in the source: 1-based line, 1-based column counted in characters, and the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
}

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
    /// The source line containing the position, without its line ending; a very long line is
    /// cut around the position, with `…` where it was cut.
    pub source_line: String,
    /// The line's column `source_line` starts at: 1, unless the line was cut before.
    pub first_column: usize,
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
    /// Where else it concerns, e.g. each `use` of the block it is in.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            location: None,
            label: None,
            help: None,
            notes: Vec::new(),
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
            let column_in_line = column.saturating_sub(location.first_column) + 1;
            let (shown_line, marker_column) = visible_window(&location.source_line, column_in_line);
            writeln!(formatter, "{line} | {shown_line}")?;
            let indent = " ".repeat(marker_column.saturating_sub(1));
            let room = shown_line
                .chars()
                .count()
                .saturating_sub(marker_column.saturating_sub(1));
            let marker = "^".repeat(location.width.clamp(1, room.max(1)));
            match &self.label {
                Some(label) => writeln!(formatter, "{gutter} | {indent}{marker} {label}")?,
                None => writeln!(formatter, "{gutter} | {indent}{marker}")?,
            }
        } else if let Some(label) = &self.label {
            writeln!(formatter, "{gutter} = {label}")?;
        }
        for note in &self.notes {
            writeln!(formatter, "{gutter} = note: {note}")?;
        }
        if let Some(help) = &self.help {
            writeln!(formatter, "{gutter} = help: {help}")?;
        }
        Ok(())
    }
}

/// The widest source excerpt shown, in characters.
const MAX_SHOWN_WIDTH: usize = 100;

/// The part of a long line around `column`, with `…` where it was cut, and the column of the
/// marker inside that part. Tabs become spaces so the marker lines up.
fn visible_window(line: &str, column: usize) -> (String, usize) {
    let characters: Vec<char> = line
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    if characters.len() <= MAX_SHOWN_WIDTH {
        return (characters.into_iter().collect(), column);
    }
    let start = column
        .saturating_sub(1)
        .saturating_sub(MAX_SHOWN_WIDTH / 3)
        .min(characters.len());
    let end = (start + MAX_SHOWN_WIDTH).min(characters.len());
    let mut shown = String::new();
    let mut marker_column = column - start;
    if start > 0 {
        shown.push('…');
        marker_column += 1;
    }
    shown.extend(&characters[start..end]);
    if end < characters.len() {
        shown.push('…');
    }
    (shown, marker_column)
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
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest_match(name, candidates).map(|candidate| format!("did you mean `{candidate}`?"))
}

/// Edit distance over characters where swapping two neighbours counts as one edit
/// (optimal string alignment), so `entyr` is one edit from `entry`.
fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    let width = right.len() + 1;
    let mut table = vec![0usize; (left.len() + 1) * width];
    for i in 0..=left.len() {
        for j in 0..=right.len() {
            table[i * width + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let substitution =
                    table[(i - 1) * width + j - 1] + usize::from(left[i - 1] != right[j - 1]);
                let mut best = substitution
                    .min(table[(i - 1) * width + j] + 1)
                    .min(table[i * width + j - 1] + 1);
                if i > 1 && j > 1 && left[i - 1] == right[j - 2] && left[i - 2] == right[j - 1] {
                    best = best.min(table[(i - 2) * width + j - 2] + 1);
                }
                best
            };
        }
    }
    table[left.len() * width + right.len()]
}

/// Keeps at most `per_message` diagnostics with the same message, noting how many were left out,
/// so one repeated mistake (say, a hundred aliases) does not bury the others.
pub fn limit_repeats(diagnostics: Vec<Diagnostic>, per_message: usize) -> Vec<Diagnostic> {
    let mut kept: Vec<Diagnostic> = Vec::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for diagnostic in diagnostics {
        match counts
            .iter_mut()
            .find(|(message, _)| *message == diagnostic.message)
        {
            Some((_, count)) => {
                *count += 1;
                if *count <= per_message {
                    kept.push(diagnostic);
                }
            }
            None => {
                counts.push((diagnostic.message.clone(), 1));
                kept.push(diagnostic);
            }
        }
    }
    for (message, count) in counts.into_iter().filter(|(_, count)| *count > per_message) {
        kept.push(Diagnostic::error(format!(
            "{} more like this: {message}",
            count - per_message
        )));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_name() {
        let states = ["idle", "retrying", "escalated"];
        assert_eq!(closest_match("retryin", states), Some("retrying"));
        assert_eq!(closest_match("zzzzzz", states), None);
        assert_eq!(closest_match("entyr", ["exit", "entry"]), Some("entry"));
    }

    #[test]
    fn long_lines_are_cut_around_the_marker() {
        let line = format!("{}X{}", "[".repeat(500), "]".repeat(500));
        let (shown, column) = visible_window(&line, 501);
        assert!(shown.starts_with('…') && shown.ends_with('…'));
        assert_eq!(shown.chars().nth(column - 1), Some('X'));
    }

    #[test]
    fn repeated_messages_are_summarised() {
        let many = vec![Diagnostic::error("alias"); 10];
        let kept = limit_repeats(many, 3);
        assert_eq!(kept.len(), 4);
        assert_eq!(kept[3].message, "7 more like this: alias");
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
                first_column: 1,
                width: 7,
            })
            .with_label("no state has this id")
            .with_help("did you mean `retrying`?");
        let text = diagnostic.to_string();
        assert!(text.contains("--> p.yaml:12:17"), "{text}");
        assert!(text.contains("12 |         target: retryin"), "{text}");
        assert!(
            text.contains("   |                 ^^^^^^^ no state has this id"),
            "{text}"
        );
        assert!(text.contains("= help: did you mean `retrying`?"), "{text}");
    }
}
