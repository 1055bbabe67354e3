//! What `run` and `resume` read from their command line besides the protocol: inputs (secret ones supplied again on resume), the events source and `--mock`s.

use std::path::PathBuf;

use super::exit_code;
use crate::effects::mock::Mocks;
use crate::frontends::cli::inputs_file::SuppliedInputs;
use crate::pipeline::compile::inputs::{InputError, split_assignment};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::driver::EventSource;
use crate::runtime::runs::start::{Refusal, Resupplied};

/// `--input KEY=VALUE`s and `--inputs FILE`, as given.
pub(super) struct GivenInputs {
    pub(super) assignments: Vec<String>,
    pub(super) file: Option<PathBuf>,
}

/// The run's recorded inputs bound again, with its secret inputs from `--input` and `--inputs`
/// (and those secrets by name); a problem is reported here, located in the inputs file.
pub(super) fn resupply(
    machine: &Machine,
    record: &crate::store::RunRecord,
    secret_inputs: &GivenInputs,
) -> Result<Resupplied, Refusal> {
    let run_id = &record.summary.id;
    let assignments = secret_inputs
        .assignments
        .iter()
        .map(|text| split_assignment(text))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| Refusal::error(error, exit_code::USAGE))?;
    let supplied = SuppliedInputs::gather(machine, secret_inputs.file.as_deref(), assignments)
        .map_err(Refusal::reported)?;
    let secrets = supplied.texts();
    let inputs = machine
        .bind_recorded_inputs(&record.inputs, &secrets)
        .map_err(|errors| {
            for error in &errors {
                match error {
                    InputError::NotSecret { name } if supplied.is_from_file(name) => {
                        let diagnostic = crate::base::diagnostic::Diagnostic::error(format!(
                            "input `{name}`: a resumed run keeps the inputs it started with; \
                             only its secret inputs are supplied again"
                        ))
                        .with_help(format!(
                            "remove `{name}` from this file: give a resume a file of the \
                             secret inputs only"
                        ));
                        let part = crate::pipeline::load::source::Part::Key;
                        match supplied.located(name, None, part, diagnostic) {
                            Some(located) => eprintln!("{located}"),
                            None => eprintln!("error: run `{run_id}`: {error}"),
                        }
                    }
                    _ => eprintln!("error: run `{run_id}`: {error}"),
                }
            }
            // Secrets not supplied again is the command line's fault, not the protocol's.
            let resupply = errors.iter().all(|error| {
                matches!(
                    error,
                    InputError::SecretNotStored { .. } | InputError::NotSecret { .. }
                )
            });
            Refusal::reported(if resupply {
                exit_code::USAGE
            } else {
                exit_code::INVALID
            })
        })?;
    Ok(Resupplied { inputs, secrets })
}

/// Checks every `--input` and the `--inputs` file's entries, reporting all problems at once.
pub(super) fn bind_inputs(
    machine: &Machine,
    given: &GivenInputs,
) -> Result<Vec<crate::base::value::Value>, Refusal> {
    let mut assignments = Vec::new();
    let mut problems = Vec::new();
    for text in &given.assignments {
        match split_assignment(text) {
            Ok(pair) => assignments.push(pair),
            Err(error) => problems.push(error),
        }
    }
    let supplied = SuppliedInputs::gather(machine, given.file.as_deref(), assignments)
        .map_err(Refusal::reported)?;
    match machine.bind_input_values(&supplied.values) {
        Ok(inputs) if problems.is_empty() => return Ok(inputs),
        Ok(_) => {}
        Err(errors) => problems.extend(errors),
    }
    Err(Refusal::rendered(
        supplied.report(&problems),
        exit_code::INVALID,
    ))
}

pub(super) fn event_source(events: Option<&str>, virtual_time: bool) -> Result<EventSource, u8> {
    match events {
        Some("inbox") if virtual_time => {
            eprintln!(
                "error: --events inbox waits for the run's inbox, which is not looked at on \
                 virtual time: give the events as lines (--events FILE or -)"
            );
            Err(exit_code::USAGE)
        }
        None => Ok(EventSource::None),
        Some("-") => Ok(EventSource::Stdin),
        Some("inbox") => Ok(EventSource::Inbox),
        // Read line by line as the run goes, each line bounded as on stdin.
        Some(path) => std::fs::File::open(path)
            .and_then(|file| {
                if file.metadata()?.is_dir() {
                    return Err(std::io::Error::other("it is a directory"));
                }
                Ok(file)
            })
            .map(EventSource::File)
            .map_err(|error| {
                eprintln!("error: cannot read events file {path}: {error}");
                match error.kind() {
                    std::io::ErrorKind::NotFound => exit_code::NO_INPUT_FILE,
                    _ => exit_code::IO,
                }
            }),
    }
}

/// Parses `--mock` arguments; each must name an action id of the protocol.
pub(super) fn parse_mocks(
    machine: &crate::pipeline::compile::machine::Machine,
    texts: &[String],
) -> Result<Mocks, u8> {
    let mocks = Mocks::parse(texts).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::USAGE
    })?;
    let mut unknown = false;
    for id in mocks.ids() {
        // A map's item `check[3]` is mocked under the map's id.
        let named = crate::effects::mock::map_of_item(id).unwrap_or(id);
        if machine.is_child_map_item(id) {
            continue;
        }
        if !machine.action_ids.iter().any(|known| known == named) {
            let hint = crate::base::diagnostic::did_you_mean(
                named,
                machine.action_ids.iter().map(String::as_str),
            )
            .map(|hint| format!("; {hint}"))
            .unwrap_or_else(|| format!("; its action ids are: {}", machine.action_ids.join(", ")));
            eprintln!(
                "error: --mock names `{id}`, which is not an action id of this protocol{hint}"
            );
            unknown = true;
        }
    }
    if unknown {
        Err(exit_code::USAGE)
    } else {
        Ok(mocks)
    }
}
