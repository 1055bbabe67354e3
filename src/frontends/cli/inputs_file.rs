//! `--inputs FILE`: input values from a YAML or JSON mapping, an `--input` overriding an entry.

use std::path::Path;

use super::exit_code;
use crate::base::diagnostic::Diagnostic;
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::source::{Part, Source};
use crate::pipeline::load::yaml::escape_pointer_token;

/// The inputs a command was given, and where the file's entries are written.
pub struct SuppliedInputs {
    /// Each input's value: the file's entries in file order, then the `--input`s; an `--input`
    /// replaces the file's entry of the same name.
    pub values: Vec<(String, serde_json::Value)>,
    /// The file as read, to point at one of its entries.
    file: Option<Source>,
    /// The names whose value is the file's (not replaced by an `--input`).
    from_file: Vec<String>,
    /// The protocol's secret inputs (its children's too): their lines are never shown.
    secret_names: Vec<String>,
}

impl SuppliedInputs {
    /// Reads `file` (if given) and puts `assignments` (split `--input`s) over it. A file that
    /// cannot be read or is not a mapping is reported on stderr, and its exit code returned.
    pub fn gather(
        machine: &Machine,
        file: Option<&Path>,
        assignments: Vec<(String, String)>,
    ) -> Result<SuppliedInputs, u8> {
        let secret_names: Vec<String> = machine
            .secret_input_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut supplied = SuppliedInputs {
            values: Vec::new(),
            file: None,
            from_file: Vec::new(),
            secret_names,
        };
        if let Some(path) = file {
            let (source, entries) = supplied.read(path)?;
            supplied.from_file = entries.iter().map(|(name, _)| name.clone()).collect();
            supplied.values = entries;
            supplied.file = Some(source);
        }
        for (name, text) in assignments {
            supplied.values.retain(|(given, _)| *given != name);
            supplied.from_file.retain(|given| *given != name);
            supplied
                .values
                .push((name, serde_json::Value::String(text)));
        }
        Ok(supplied)
    }

    /// The values as texts, for the commands that take only secret inputs (a secret is a
    /// string; a number written unquoted in the file is read as its text).
    pub fn texts(&self) -> Vec<(String, String)> {
        self.values
            .iter()
            .map(|(name, value)| {
                (
                    name.clone(),
                    crate::runtime::runs::grants::input_text(value),
                )
            })
            .collect()
    }

    /// Whether `name`'s value came from the file.
    pub fn is_from_file(&self, name: &str) -> bool {
        self.from_file.iter().any(|given| given == name)
    }

    /// Every problem as printed on stderr: one about a file's entry is located at it (at the
    /// list item at fault, for an item), the others as they are. Secrets already bound are
    /// masked, and a secret input's own line is never shown.
    pub fn report(&self, errors: &[InputError]) -> String {
        let text: String = errors
            .iter()
            .map(|error| {
                let (name, item, part, help) = match error {
                    InputError::Invalid { name, mismatch } => (
                        name,
                        mismatch.item,
                        Part::Value,
                        format!(
                            "correct this entry, or give `{name}` with --input, which replaces it"
                        ),
                    ),
                    InputError::Unknown { name, .. } => (
                        name,
                        None,
                        Part::Key,
                        "remove this entry, or correct its name".to_string(),
                    ),
                    _ => return format!("error: {error}\n"),
                };
                let diagnostic = Diagnostic::error(error.to_string()).with_help(help);
                self.located(name, item, part, diagnostic)
                    .map(|diagnostic| format!("{diagnostic}\n"))
                    .unwrap_or_else(|| format!("error: {error}\n"))
            })
            .collect();
        crate::base::secrets::mask(&text).into_owned()
    }

    /// `diagnostic` located at the file's entry for `name` (its `item`, if given), or `None`
    /// when that value did not come from the file.
    pub fn located(
        &self,
        name: &str,
        item: Option<usize>,
        part: Part,
        diagnostic: Diagnostic,
    ) -> Option<Diagnostic> {
        let source = self.file.as_ref().filter(|_| self.is_from_file(name))?;
        let mut pointer = format!("/{}", escape_pointer_token(name));
        if let Some(index) = item {
            pointer.push_str(&format!("/{index}"));
        }
        let location = source.location(&pointer, part);
        let secret = self.secret_names.iter().any(|secret| secret == name);
        Some(placed(diagnostic, location, secret))
    }

    /// The file's entries in order, or its problems printed (located) and an exit code.
    fn read(&self, path: &Path) -> Result<(Source, Vec<(String, serde_json::Value)>), u8> {
        let shown = path.display().to_string();
        let text = crate::pipeline::load::read_text(path).map_err(|error| {
            // `read_text`'s messages name the file but not the option that gave it.
            eprint!(
                "{}",
                error
                    .to_string()
                    .replacen("error: ", "error: --inputs: ", 1)
            );
            if !error.to_string().ends_with('\n') {
                eprintln!();
            }
            match error {
                crate::pipeline::load::LoadError::NotFound { .. } => exit_code::NO_INPUT_FILE,
                crate::pipeline::load::LoadError::Unreadable { .. } => exit_code::IO,
                crate::pipeline::load::LoadError::Invalid(_) => exit_code::INVALID,
            }
        })?;
        let mut source = Source {
            path: shown.clone(),
            text,
            positions: Default::default(),
        };
        let limits = crate::pipeline::load::yaml::YamlLimits::default();
        let document =
            crate::pipeline::load::yaml::parse(&source.text, &limits).map_err(|errors| {
                let any_secret = !self.secret_names.is_empty();
                for error in errors {
                    let location = source.location_at(error.position, Part::Value);
                    let diagnostic = Diagnostic::error(format!(
                        "--inputs {shown} is not YAML or JSON: {}",
                        error.message
                    ))
                    .with_optional_help(error.help);
                    // Any line of a file that gives a secret input may hold it.
                    eprintln!("{}", placed(diagnostic, location, any_secret));
                }
                exit_code::INVALID
            })?;
        source.positions = document.positions;
        match document.value {
            serde_json::Value::Object(entries) => Ok((source, entries.into_iter().collect())),
            serde_json::Value::Null => Ok((source, Vec::new())),
            other => {
                let kind = match other {
                    serde_json::Value::Array(_) => "a list",
                    _ => "a single value",
                };
                eprintln!(
                    "{}",
                    Diagnostic::error(format!(
                        "--inputs {shown} holds {kind}; an inputs file is a mapping of input \
                         name to value"
                    ))
                    .at(source.location("", Part::Value))
                    .with_help(
                        "write one entry a line, e.g. `commits: [a, b]` (YAML), or \
                         `{\"commits\": [\"a\", \"b\"]}` (JSON)"
                    )
                );
                Err(exit_code::INVALID)
            }
        }
    }
}

/// A diagnostic at `location`, unless the line may show a secret's value: then only its place
/// is given, not the line.
fn placed(
    diagnostic: Diagnostic,
    location: crate::base::diagnostic::Location,
    may_hold_a_secret: bool,
) -> Diagnostic {
    if !may_hold_a_secret {
        return diagnostic.at(location);
    }
    let crate::pipeline::load::yaml::Position { line, column, .. } = location.position;
    diagnostic.with_label(format!(
        "at {}:{line}:{column} (the line is not shown: it may hold a secret input)",
        location.file
    ))
}
