//! `protocol-run graph FILE --format mermaid|dot|svg`: the protocol as a diagram.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use super::validate::load_error_code;
use crate::diagnostic::render_all;

/// Diagram formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    /// A standalone SVG, laid out by Graphviz's `dot` (which must be installed).
    Svg,
}

pub fn graph(file: &Path, format: GraphFormat) -> u8 {
    let loaded = match crate::load::load_file(file) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprint!("{error}");
            return load_error_code(&error);
        }
    };
    let machine = match crate::compile::compile(&loaded) {
        Ok(machine) => machine,
        Err(diagnostics) => {
            eprint!("{}", render_all(&diagnostics));
            return exit_code::INVALID;
        }
    };
    let text = match format {
        GraphFormat::Mermaid => crate::graph::mermaid(&machine),
        GraphFormat::Dot => crate::graph::dot(&machine),
        GraphFormat::Svg => match render_svg(&crate::graph::dot(&machine)) {
            Ok(svg) => svg,
            Err(message) => {
                eprintln!("error: {message}");
                return exit_code::IO;
            }
        },
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => 0,
        Err(_) => exit_code::IO,
    }
}

/// Lays out DOT with Graphviz: no browser involved.
fn render_svg(dot: &str) -> Result<String, String> {
    let mut child = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| format!("--format svg needs Graphviz's `dot` ({error}); install graphviz, or use --format dot"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(dot.as_bytes())
            .map_err(|error| format!("cannot feed `dot`: {error}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|error| format!("`dot` failed: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "`dot` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|_| "`dot` wrote something that is not UTF-8".to_string())
}
