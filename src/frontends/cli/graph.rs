//! `protocol-run graph FILE --format mermaid|dot|svg`: the protocol as a diagram.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use crate::base::diagnostic::render_all;

/// Diagram formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    /// A standalone SVG, laid out by protocol-run itself (no Graphviz needed).
    Svg,
}

/// `detail`: entry and exit actions in the states, and transition actions on the arrows.
pub fn graph(file: &Path, format: GraphFormat, detail: bool) -> u8 {
    let loaded = match crate::pipeline::load::load_file(file) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprint!("{error}");
            return super::exit_code::of_load_error(&error);
        }
    };
    let machine = match crate::pipeline::compile::compile(&loaded) {
        Ok(machine) => machine,
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            return exit_code::INVALID;
        }
    };
    let text = match format {
        GraphFormat::Mermaid if detail => crate::tooling::graph::mermaid_with_detail(&machine),
        GraphFormat::Mermaid => crate::tooling::graph::mermaid(&machine),
        GraphFormat::Dot if detail => crate::tooling::graph::dot_with_detail(&machine),
        GraphFormat::Dot => crate::tooling::graph::dot(&machine),
        GraphFormat::Svg => {
            crate::tooling::graph::svg(&machine, &crate::tooling::graph::SvgOptions { detail })
        }
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => 0,
        Err(_) => exit_code::IO,
    }
}
