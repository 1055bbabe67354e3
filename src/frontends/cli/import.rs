//! `protocol-run import scxml FILE [--out DIR]`: an SCXML document as protocol YAML.

use std::io::Write;
use std::path::Path;

use super::exit_code;
use crate::base::diagnostic::render_all;
use crate::tooling::import::{ImportError, Imported};

pub fn import_scxml(file: &Path, out: Option<&Path>) -> u8 {
    let text = match crate::pipeline::load::read_text(file) {
        Ok(text) => text,
        Err(error) => {
            eprint!("{error}");
            return super::exit_code::of_load_error(&error);
        }
    };
    match crate::tooling::import::import_file(&text, file) {
        Ok(imported) => match out {
            Some(directory) => write_files(&imported, directory),
            None => print(file, &imported),
        },
        Err(errors) => {
            eprint!("{}", render_all(&diagnostics(file, &text, &errors)));
            exit_code::INVALID
        }
    }
}

/// The errors, each shown with its line: from `text`, or from the child file it is in.
fn diagnostics(
    file: &Path,
    text: &str,
    errors: &[ImportError],
) -> Vec<crate::base::diagnostic::Diagnostic> {
    let shown = file.display().to_string();
    errors
        .iter()
        .map(|error| match &error.file {
            Some(child) => {
                let child_text = std::fs::read_to_string(child).unwrap_or_default();
                error.diagnostic(&shown, &child_text)
            }
            None => error.diagnostic(&shown, text),
        })
        .collect()
}

/// Prints a protocol without children; children need files, so `--out` is asked for.
fn print(file: &Path, imported: &Imported) -> u8 {
    if !imported.children.is_empty() {
        eprintln!(
            "error: {} runs child documents (<invoke>), which become protocol files of their own: give `--out DIR` to write them next to the parent",
            file.display()
        );
        return exit_code::USAGE;
    }
    let yaml = crate::tooling::import::to_yaml(&imported.protocol);
    match std::io::stdout().lock().write_all(yaml.as_bytes()) {
        Ok(()) => 0,
        Err(_) => exit_code::IO,
    }
}

/// Writes `<stem>.yaml` and its children's files into `directory`, naming each on stdout.
fn write_files(imported: &Imported, directory: &Path) -> u8 {
    if let Err(error) = std::fs::create_dir_all(directory) {
        eprintln!("error: cannot create {}: {error}", directory.display());
        return exit_code::IO;
    }
    let parent = (imported.file_name.clone(), imported.protocol.clone());
    for (name, protocol) in std::iter::once(&parent).chain(&imported.children) {
        let path = directory.join(name);
        let yaml = crate::tooling::import::to_yaml(protocol);
        if let Err(error) = crate::base::files::write_atomically(&path, yaml.as_bytes()) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return exit_code::IO;
        }
        println!("wrote {}", path.display());
    }
    0
}
