//! `matches` under budgets: the pattern's length and compiled size are bounded, and its work (compiled states times text bytes) is paid in evaluation steps before the regex is built or run.

use cel::ExecutionError;
use cel::common::types::CelBool;
use cel::common::value::CowVal;
use regex_automata::nfa::thompson::{Config, NFA};

use super::bounded::{argument_count, refuse, string_argument};
use super::budget::{self, Exceeded};

/// The longest pattern `matches` compiles: as long as an expression may be, so only a pattern
/// an expression builds can pass it.
pub const MATCH_MAX_PATTERN_BYTES: usize = 4096;

/// The most memory a pattern's compiled automaton may take (the regex crate's own default is
/// ten times this).
pub const MATCH_MAX_COMPILED_BYTES: usize = 1 << 20;

/// How much work, in compiled states times text bytes, one evaluation step pays for: a regex
/// match at worst visits every state at every byte (measured at 110 to 190 million a second in
/// release), and one call cannot be interrupted, so it is paid for before it starts.
pub const MATCH_WORK_PER_STEP: usize = 1024;

/// `text.matches(pattern)` and `matches(text, pattern)`.
pub fn matches<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern] = arguments.as_slice() else {
        return Err(argument_count(2, &arguments));
    };
    let text = string_argument("matches", text.as_ref())?;
    let pattern = string_argument("matches", pattern.as_ref())?;
    budget::spend(1).map_err(refuse)?;
    if pattern.len() > MATCH_MAX_PATTERN_BYTES {
        return Err(refuse(budget::refuse_match(Exceeded::MatchPattern {
            bytes: pattern.len(),
            limit: MATCH_MAX_PATTERN_BYTES,
        })));
    }
    let automaton = NFA::compiler()
        .configure(Config::new().nfa_size_limit(Some(MATCH_MAX_COMPILED_BYTES)))
        .build(pattern)
        .map_err(|error| invalid(pattern, &error))?;
    let states = automaton.states().len();
    let work = states.saturating_mul(text.len().max(1));
    let steps = u64::try_from(work.div_ceil(MATCH_WORK_PER_STEP)).unwrap_or(u64::MAX);
    budget::spend_whole(steps, |limit| Exceeded::MatchWork {
        states,
        text_bytes: text.len(),
        steps,
        limit,
    })
    .map_err(refuse)?;
    let compiled = regex::RegexBuilder::new(pattern)
        .size_limit(MATCH_MAX_COMPILED_BYTES)
        .dfa_size_limit(MATCH_MAX_COMPILED_BYTES)
        .build()
        .map_err(|error| invalid(pattern, &error))?;
    Ok(CowVal::owned(CelBool::from(compiled.is_match(text))))
}

/// A pattern that does not compile, or compiles past `MATCH_MAX_COMPILED_BYTES`, as CEL words it.
fn invalid(pattern: &str, error: &dyn std::fmt::Display) -> ExecutionError {
    let shown: String = pattern.chars().take(80).collect();
    let more = if shown.len() < pattern.len() {
        "..."
    } else {
        ""
    };
    ExecutionError::function_error(
        "matches",
        format!(
            "'{shown}{more}' not a valid regex (a compiled pattern may take at most {MATCH_MAX_COMPILED_BYTES} bytes):\n{error}"
        ),
    )
}
