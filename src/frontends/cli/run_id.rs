//! `run --run-id ID`: a run id the operator chooses, checked before anything is recorded.

use std::path::Path;

use super::exit_code;
use crate::store::Store;

/// The longest run id `--run-id` takes: it names a directory and appears in every log line.
pub const MAX_RUN_ID_LENGTH: usize = 64;

/// Why a chosen run id is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunIdError {
    #[error("--run-id is empty; give an id such as `T-42`")]
    Empty,
    #[error(
        "--run-id `{shown}` is {length} characters long; the limit is {MAX_RUN_ID_LENGTH} \
         (MAX_RUN_ID_LENGTH)"
    )]
    TooLong { shown: String, length: usize },
    #[error(
        "--run-id `{id}` has `{character}`; use letters, digits, `-`, `_` and `.`, beginning with \
         a letter or digit (it names the run's directory)"
    )]
    Character { id: String, character: char },
}

/// Checks an id's spelling: it becomes a directory name, so no separator and no leading dot.
pub fn check_spelling(id: &str) -> Result<(), RunIdError> {
    let length = id.chars().count();
    if length == 0 {
        return Err(RunIdError::Empty);
    }
    if length > MAX_RUN_ID_LENGTH {
        let shown: String = id.chars().take(16).collect();
        return Err(RunIdError::TooLong {
            shown: format!("{shown}…"),
            length,
        });
    }
    let allowed =
        |character: char| character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | '.');
    let wrong = id.chars().enumerate().find(|(index, character)| {
        !allowed(*character) || (*index == 0 && !character.is_ascii_alphanumeric())
    });
    match wrong {
        Some((_, character)) => Err(RunIdError::Character {
            id: id.to_string(),
            character,
        }),
        None => Ok(()),
    }
}

/// The id for a new run: the one chosen (checked, and unused in the store and in telemetry), or
/// a fresh one.
pub fn new_run_id(
    chosen: Option<&str>,
    store: &dyn Store,
    state_directory: &Path,
) -> Result<String, u8> {
    let Some(id) = chosen else {
        return Ok(crate::runtime::telemetry::new_run_id());
    };
    check_spelling(id).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::USAGE
    })?;
    let recorded = store.run(id).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
    if let Some(record) = recorded {
        eprintln!(
            "error: --run-id `{id}` is already used by a {} run of {}; choose another id \
             (`protocol-run status {id}` shows that run)",
            record.summary.status.as_str(),
            record.summary.protocol_path
        );
        return Err(exit_code::USAGE);
    }
    let telemetry = crate::runtime::telemetry::runs_directory(state_directory).join(id);
    if telemetry.exists() {
        eprintln!(
            "error: --run-id `{id}` is already used: {} exists; choose another id",
            telemetry.display()
        );
        return Err(exit_code::USAGE);
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_for_their_spelling() {
        assert_eq!(check_spelling("T-42"), Ok(()));
        assert_eq!(check_spelling("release_1.2"), Ok(()));
        assert_eq!(check_spelling(""), Err(RunIdError::Empty));
        for (id, character) in [("..", '.'), ("a/b", '/'), (".hidden", '.'), ("a b", ' ')] {
            assert_eq!(
                check_spelling(id),
                Err(RunIdError::Character {
                    id: id.to_string(),
                    character
                }),
                "{id}"
            );
        }
        let long = "x".repeat(MAX_RUN_ID_LENGTH + 1);
        assert!(matches!(
            check_spelling(&long),
            Err(RunIdError::TooLong { length: 65, .. })
        ));
    }
}
