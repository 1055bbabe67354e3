//! Mocks keyed on an effect's arguments: the first entry whose `argv`/`path` match scripts a call.

use std::collections::{HashMap, VecDeque};

use super::EffectRequest;
use super::arguments::EffectArguments;
use super::mock::{MockError, MockOutcome, parse_sequence, take};

/// One entry: the arguments it matches (none given: any call) and its outcomes.
#[derive(Debug, Clone, Default)]
struct Entry {
    argv: Option<Vec<String>>,
    path: Option<String>,
    outcomes: VecDeque<MockOutcome>,
}

/// Scripted outcomes by action id and arguments.
#[derive(Debug, Clone, Default)]
pub struct ArgumentMocks {
    entries: HashMap<String, Vec<Entry>>,
}

impl ArgumentMocks {
    /// Adds an entry for `id`: calls with this `argv` and `path` (each when given) take
    /// `outcomes` (`timeout,ok:done` as for `--mock`), one per call, the last repeating.
    pub fn add(
        &mut self,
        id: &str,
        argv: Option<Vec<String>>,
        path: Option<String>,
        outcomes: &str,
    ) -> Result<(), MockError> {
        let outcomes = parse_sequence(outcomes).map_err(|message| MockError {
            text: format!("{id}={outcomes}"),
            message,
        })?;
        self.entries.entry(id.to_string()).or_default().push(Entry {
            argv,
            path,
            outcomes,
        });
        Ok(())
    }

    pub fn covers(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// The next outcome of the first entry matching the request's arguments; a call no entry
    /// matches fails, naming its arguments, rather than running for real unchecked.
    pub fn next(&mut self, request: &EffectRequest) -> Option<MockOutcome> {
        let entries = self.entries.get_mut(&*request.id)?;
        let arguments = EffectArguments::of(request);
        let matching = entries.iter_mut().find(|entry| {
            entry
                .argv
                .as_ref()
                .is_none_or(|argv| arguments.argv.as_ref() == Some(argv))
                && entry
                    .path
                    .as_ref()
                    .is_none_or(|path| arguments.path.as_ref() == Some(path))
        });
        Some(match matching {
            Some(entry) => take(&mut entry.outcomes)?,
            None => MockOutcome::Error(format!(
                "no mock of `{}` matches this call (argv {:?}, path {:?})",
                request.id,
                arguments.argv.unwrap_or_default(),
                arguments.path.unwrap_or_default()
            )),
        })
    }
}
