//! Import: SCXML documents converted into equivalent protocols.

mod ecmascript;
mod finalize;
mod scxml;
#[cfg(test)]
mod tests;
pub(crate) mod yaml_writer;

use std::fmt;

use crate::base::diagnostic::{Diagnostic, Location};
use crate::pipeline::load::yaml::Position;

pub use scxml::{Imported, import_file, scxml_to_protocol};
pub use yaml_writer::{MODELINE, to_yaml};

/// Why (part of) a document cannot be imported: the message, where, and the element it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    pub message: String,
    /// 1-based line of the element (or of the attribute at fault).
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// The element's local name, e.g. `script`; empty when the document is not well-formed XML.
    pub element: String,
    /// The file the error is in when it is not the imported one: a child document read through
    /// `<invoke src>`.
    pub file: Option<String>,
}

impl ImportError {
    /// `FILE:LINE:COL: <element>: message`, the one-line form for the command line.
    pub fn render(&self, file: &str) -> String {
        format!("{}:{self}", self.file.as_deref().unwrap_or(file))
    }

    /// The error as a located diagnostic, showing the source line of `text` (the document the
    /// error is in: `file`, or the error's own `file` when it has one).
    pub fn diagnostic(&self, file: &str, text: &str) -> Diagnostic {
        let file = self.file.as_deref().unwrap_or(file);
        let line_index = usize::try_from(self.line.saturating_sub(1)).unwrap_or(0);
        let column = usize::try_from(self.column).unwrap_or(1).max(1);
        let line_start: usize = text
            .split_inclusive('\n')
            .take(line_index)
            .map(str::len)
            .sum();
        let source_line = text
            .get(line_start..)
            .and_then(|rest| rest.lines().next())
            .unwrap_or("")
            .to_string();
        let offset = line_start
            + source_line
                .char_indices()
                .nth(column - 1)
                .map_or(source_line.len(), |(index, _)| index);
        let message = if self.element.is_empty() {
            self.message.clone()
        } else {
            format!("<{}>: {}", self.element, self.message)
        };
        Diagnostic::error(message).at(Location {
            file: file.to_string(),
            position: Position {
                line: usize::try_from(self.line).unwrap_or(1),
                column,
                offset,
            },
            source_line,
            first_column: 1,
            width: 1,
        })
    }
}

impl fmt::Display for ImportError {
    /// `LINE:COL: <element>: message`; `render` puts the file name in front.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.element.is_empty() {
            write!(formatter, "{}:{}: {}", self.line, self.column, self.message)
        } else {
            write!(
                formatter,
                "{}:{}: <{}>: {}",
                self.line, self.column, self.element, self.message
            )
        }
    }
}

impl std::error::Error for ImportError {}
