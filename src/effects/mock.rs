//! `--mock ID=OUTCOME`: replaces an effectful action's outcome, one entry of a sequence per call.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::process::ProcessOutcome;
use super::{EffectOutcome, EffectRequest};

/// One scripted outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MockOutcome {
    /// Times out after the action's timeout.
    Timeout,
    /// Fails to run at all, with this message.
    Error(String),
    /// Exits with this code (0 is success).
    Exit(i32),
    /// Succeeds with this standard output.
    Ok(String),
    /// Succeeds with this standard output, cut at its limit (`truncated: true`).
    Truncated(String),
}

/// A problem in a `--mock` argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--mock {text}: {message}")]
pub struct MockError {
    pub text: String,
    pub message: String,
}

impl MockOutcome {
    fn parse(text: &str) -> Result<MockOutcome, String> {
        let (kind, rest) = text.split_once(':').unwrap_or((text, ""));
        match kind {
            "timeout" if rest.is_empty() => Ok(MockOutcome::Timeout),
            "error" => Ok(MockOutcome::Error(rest.to_string())),
            "ok" => Ok(MockOutcome::Ok(rest.to_string())),
            "truncated" => Ok(MockOutcome::Truncated(rest.to_string())),
            "exit" => rest
                .parse()
                .map(MockOutcome::Exit)
                .map_err(|_| format!("`{text}`: exit takes a number, e.g. exit:2")),
            _ => Err(format!(
                "`{text}` is not an outcome; use timeout, error:MESSAGE, exit:N, ok:STDOUT or \
                 truncated:STDOUT"
            )),
        }
    }

    /// The outcome as the effect would have reported it, and how long it takes to arrive.
    /// `ok:TEXT` stands for the main output: `stdout`, and the keys derived from it (a
    /// listing's `entries`, a read's `bytes`); see `mock_shape`.
    pub fn outcome(&self, request: &EffectRequest) -> (EffectOutcome, Duration) {
        let (mut outcome, after) = self.process_shaped(request);
        super::mock_shape::shape(request, &mut outcome);
        (outcome, after)
    }

    /// The outcome with the keys every effect reports, as a process reports them.
    fn process_shaped(&self, request: &EffectRequest) -> (EffectOutcome, Duration) {
        let timeout = request.kind.timeout().unwrap_or_default();
        let process = |exit_code: Option<i32>,
                       stdout: &str,
                       timed_out: bool,
                       duration: Duration| ProcessOutcome {
            exit_code,
            signal: None,
            stdout: stdout.to_string(),
            stderr: String::new(),
            truncated: matches!(self, MockOutcome::Truncated(_)),
            duration,
            timed_out,
        };
        match self {
            MockOutcome::Timeout => (
                EffectOutcome::from_process(&request.id, &process(None, "", true, timeout)),
                timeout,
            ),
            MockOutcome::Error(message) => (
                EffectOutcome::failure(&request.id, message.clone()),
                Duration::ZERO,
            ),
            MockOutcome::Exit(code) => (
                EffectOutcome::from_process(
                    &request.id,
                    &process(Some(*code), "", false, Duration::ZERO),
                ),
                Duration::ZERO,
            ),
            MockOutcome::Ok(stdout) | MockOutcome::Truncated(stdout) => (
                EffectOutcome::from_process(
                    &request.id,
                    &process(Some(0), stdout, false, Duration::ZERO),
                ),
                Duration::ZERO,
            ),
        }
    }
}

/// Scripted outcomes by action id. Each call takes the next outcome of its sequence; the last
/// one repeats once the sequence is used up.
#[derive(Debug, Clone, Default)]
pub struct Mocks {
    sequences: HashMap<String, VecDeque<MockOutcome>>,
    /// A scenario's mocks keyed on arguments (`when:`).
    pub by_arguments: super::mock_arguments::ArgumentMocks,
}

impl Mocks {
    /// Parses `ID=OUTCOME[,OUTCOME...]` arguments.
    pub fn parse(arguments: &[String]) -> Result<Mocks, MockError> {
        let mut mocks = Mocks::default();
        for text in arguments {
            let error = |message: String| MockError {
                text: text.clone(),
                message,
            };
            let (id, outcomes) = text
                .split_once('=')
                .filter(|(id, _)| !id.is_empty())
                .ok_or_else(|| {
                    error("write ID=OUTCOME, e.g. tool_call=timeout,timeout,ok".into())
                })?;
            let sequence = parse_sequence(outcomes).map_err(error)?;
            mocks.sequences.insert(id.to_string(), sequence);
        }
        Ok(mocks)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.sequences.keys().map(String::as_str)
    }

    /// Whether the calls of `id` are scripted (every one of them is, once any is).
    pub fn covers(&self, id: &str) -> bool {
        self.scripted(id).is_some() || self.by_arguments.covers(id)
    }

    /// The key scripting `id`: itself, or for a map's item `check[3]` the map's `check`.
    fn scripted<'a>(&self, id: &'a str) -> Option<&'a str> {
        if self.sequences.contains_key(id) {
            return Some(id);
        }
        let map = map_of_item(id)?;
        self.sequences.contains_key(map).then_some(map)
    }

    /// The scripted outcome of the next call `request` makes, if it is mocked: by its
    /// arguments first, then by its id.
    pub fn next_for(&mut self, request: &EffectRequest) -> Option<MockOutcome> {
        self.by_arguments
            .next(request)
            .or_else(|| self.next(&request.id))
    }

    /// The scripted outcome of the next call of `id`, if it is mocked.
    pub fn next(&mut self, id: &str) -> Option<MockOutcome> {
        let key = self.scripted(id)?;
        take(self.sequences.get_mut(key)?)
    }
}

/// The map an item id such as `check[3]` belongs to (`check`), if it is one.
pub fn map_of_item(id: &str) -> Option<&str> {
    let (map, rest) = id.split_once('[')?;
    let index = rest.strip_suffix(']')?;
    (!map.is_empty() && !index.is_empty() && index.chars().all(|c| c.is_ascii_digit()))
        .then_some(map)
}

/// The next outcome of a sequence; the last one repeats once the sequence is used up.
pub(super) fn take(sequence: &mut VecDeque<MockOutcome>) -> Option<MockOutcome> {
    if sequence.len() > 1 {
        sequence.pop_front()
    } else {
        sequence.front().cloned()
    }
}

/// `timeout,ok:done` as outcomes.
pub(super) fn parse_sequence(text: &str) -> Result<VecDeque<MockOutcome>, String> {
    split_outcomes(text)
        .into_iter()
        .map(|outcome| MockOutcome::parse(&outcome))
        .collect()
}

/// Splits `timeout,ok:a,b` into outcomes: a comma starts a new outcome only when what follows
/// names an outcome kind, so `ok:` text may contain commas.
fn split_outcomes(text: &str) -> Vec<String> {
    let mut outcomes: Vec<String> = Vec::new();
    for piece in text.split(',') {
        // Bare `timeout`, `ok` and `error` are outcomes too (`ok` with empty output).
        let starts_outcome = matches!(piece, "timeout" | "ok" | "error" | "truncated")
            || ["error:", "exit:", "ok:", "truncated:"]
                .iter()
                .any(|kind| piece.starts_with(kind));
        match outcomes.last_mut() {
            Some(last) if !starts_outcome => {
                last.push(',');
                last.push_str(piece);
            }
            _ => outcomes.push(piece.to_string()),
        }
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sequences_and_repeats_the_last() {
        let mut mocks = Mocks::parse(&[
            "tool_call=timeout,timeout,ok:a,b".to_string(),
            "grep=exit:2".to_string(),
        ])
        .unwrap();
        assert_eq!(mocks.next("tool_call"), Some(MockOutcome::Timeout));
        assert_eq!(mocks.next("tool_call"), Some(MockOutcome::Timeout));
        assert_eq!(mocks.next("tool_call"), Some(MockOutcome::Ok("a,b".into())));
        let mut bare = Mocks::parse(&["operation=timeout,ok".to_string()]).unwrap();
        assert_eq!(bare.next("operation"), Some(MockOutcome::Timeout));
        assert_eq!(bare.next("operation"), Some(MockOutcome::Ok(String::new())));
        assert_eq!(mocks.next("tool_call"), Some(MockOutcome::Ok("a,b".into())));
        let mut bare = Mocks::parse(&["operation=timeout,ok".to_string()]).unwrap();
        assert_eq!(bare.next("operation"), Some(MockOutcome::Timeout));
        assert_eq!(bare.next("operation"), Some(MockOutcome::Ok(String::new())));
        assert_eq!(mocks.next("grep"), Some(MockOutcome::Exit(2)));
        assert_eq!(mocks.next("other"), None);
        let mut cut = Mocks::parse(&["search=timeout,truncated:a,b".to_string()]).unwrap();
        assert_eq!(cut.next("search"), Some(MockOutcome::Timeout));
        assert_eq!(
            cut.next("search"),
            Some(MockOutcome::Truncated("a,b".into()))
        );
    }

    #[test]
    fn rejects_malformed_mocks() {
        for text in ["=ok", "noequals", "x=maybe", "x=exit:two", "x=timeout:5"] {
            assert!(Mocks::parse(&[text.to_string()]).is_err(), "{text}");
        }
    }
}
