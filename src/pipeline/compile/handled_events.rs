//! Which `on:` keys can ever match: declared input, events the protocol raises or sends, and the engine's own events for ids that exist.

use std::collections::HashSet;

use crate::base::diagnostic::did_you_mean;
use crate::pipeline::compile::machine::EventDescriptor;

/// Past this many name comparisons (handlers times known names), a handler that matches
/// nothing is still reported, without a suggestion: suggestions compare names pairwise.
const MAX_SUGGESTION_COMPARISONS: usize = 1_000_000;

/// The engine's event families: a handler of one of them that matches nothing is a typo
/// (`done.exec.tset`) whether or not `events:` is declared.
const PLATFORM_FAMILIES: [&str; 4] = ["done", "error", "timeout", "after"];

/// Every event that can reach the protocol's transitions, gathered while compiling.
#[derive(Debug, Default, Clone)]
pub struct EventSources {
    /// Names declared under `events:`.
    pub declared: Vec<String>,
    /// Names a `raise` or `send` writes literally.
    pub produced: Vec<String>,
    /// The literal start of names a `raise` or `send` builds with a template (`step.` for
    /// `step.${n}`): any name so starting may be produced.
    pub produced_prefixes: Vec<String>,
    /// The engine's events for what exists: `done.state.<id>` for each state,
    /// `done.exec.<id>`/`error.exec.<id>`/... for each effect, `done.invoke.<id>` for each
    /// invoke, timers, `error.execution`, `error.communication`. Every name the compiler
    /// interns for an action or a state comes here (`Compiler::intern_event`), so a construct
    /// that adds its own (a `map` action's `done.map.<id>`/`error.map.<id>`) is covered with
    /// no change.
    pub platform: Vec<String>,
}

/// One `on:` descriptor as written, with the pointer of its key.
#[derive(Debug, Clone)]
pub struct Handler {
    pub token: String,
    pub pointer: String,
}

/// A handler no event can match, and what to write instead.
#[derive(Debug, Clone)]
pub struct UnmatchedHandler {
    pub token: String,
    pub pointer: String,
    pub help: String,
}

impl UnmatchedHandler {
    /// Whether it names an engine event (`done.*`, `error.*`, `timeout.*`, `after.*`), which
    /// only the engine sends: then it is a mistake even when `events:` is not declared.
    pub fn is_platform_family(&self) -> bool {
        let first = self.token.split('.').next().unwrap_or_default();
        PLATFORM_FAMILIES.contains(&first)
    }

    pub fn message(&self, declared: bool) -> String {
        if declared {
            format!(
                "no event `{}` can occur: it is not declared under `events:`, not raised or sent, \
                 and not an engine event of this protocol",
                self.token
            )
        } else {
            format!(
                "no event `{}` can occur: the engine reports no such event for this protocol",
                self.token
            )
        }
    }
}

impl EventSources {
    /// The handlers among `handlers` that match no event that can occur, each with a
    /// suggestion when a known name is close; with `only_platform`, only those naming engine
    /// events (the rest are not reported, so they are not judged). Matching is by lookup, so
    /// 15,000 handlers over 20,000 names cost no more than reading them.
    pub fn unmatched(&self, handlers: &[Handler], only_platform: bool) -> Vec<UnmatchedHandler> {
        let known: Vec<&str> = self
            .declared
            .iter()
            .chain(&self.produced)
            .chain(&self.platform)
            .map(String::as_str)
            .collect();
        // A descriptor matches a name when it is the name or one of its dot-separated starts.
        let matchable: HashSet<&str> = known
            .iter()
            .flat_map(|name| EventDescriptor::prefixes_matching(name))
            .collect();
        let mut template_starts: Vec<&str> =
            self.produced_prefixes.iter().map(String::as_str).collect();
        template_starts.sort_unstable();
        let mut comparisons_left = MAX_SUGGESTION_COMPARISONS;
        let mut unmatched = Vec::new();
        for handler in handlers {
            let prefix = match EventDescriptor::parse(&handler.token) {
                EventDescriptor::Any => continue,
                EventDescriptor::Prefix(prefix) => prefix,
            };
            let first = prefix.split('.').next().unwrap_or_default();
            if (only_platform && !PLATFORM_FAMILIES.contains(&first))
                || matchable.contains(&*prefix)
                || may_be_templated(&prefix, &template_starts)
            {
                continue;
            }
            let suggestion = (known.len() <= comparisons_left)
                .then(|| {
                    comparisons_left -= known.len();
                    did_you_mean(&prefix, known.iter().copied())
                })
                .flatten();
            let help = suggestion.unwrap_or_else(|| {
                "declare it under `events:` if it comes from outside, or handle an event the \
                 protocol raises, sends or the engine reports (`done.exec.<id>` for an effect \
                 id that exists, `done.state.<id>`, `done.invoke.<id>`, `error.execution`, ...)"
                    .into()
            });
            unmatched.push(UnmatchedHandler {
                token: handler.token.clone(),
                pointer: handler.pointer.clone(),
                help,
            });
        }
        unmatched
    }
}

/// Whether a name built by a template whose literal start is one of `starts` (sorted) may
/// match the descriptor `prefix`: the start begins the descriptor (`step.` and `step.3`), or
/// the descriptor begins the start (`step` and `step.`).
fn may_be_templated(prefix: &str, starts: &[&str]) -> bool {
    let begins_the_descriptor = prefix
        .char_indices()
        .map(|(end, _)| &prefix[..end])
        .chain(std::iter::once(prefix))
        .any(|start| starts.binary_search(&start).is_ok());
    let after = starts.partition_point(|start| *start < prefix);
    begins_the_descriptor
        || starts
            .get(after)
            .is_some_and(|start| start.starts_with(prefix))
}

/// What `check` says of an event raised or sent (by the protocol, or by a scenario's `send`)
/// that no transition handles: the message, and as help the nearest of the `handled` names
/// (`None` when there are too many to compare) or how to handle it.
pub fn unhandled_event<'a>(
    name: &str,
    verb: &str,
    handled: Option<impl Iterator<Item = &'a str>>,
) -> (String, String) {
    let help = handled
        .and_then(|candidates| did_you_mean(name, candidates))
        .unwrap_or_else(|| {
            format!(
                "handle `{name}` under `on:` in a state that is active when it arrives, or remove \
                 the `{verb}`"
            )
        });
    let message = format!(
        "event `{name}` is {} but no transition handles it",
        participle(verb)
    );
    (message, help)
}

/// "raised" for `raise`, "sent" for `send`.
fn participle(verb: &str) -> &'static str {
    if verb == "raise" { "raised" } else { "sent" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(token: &str) -> Handler {
        Handler {
            token: token.into(),
            pointer: String::new(),
        }
    }

    #[test]
    fn prefixes_wildcards_and_templates_match_families() {
        let sources = EventSources {
            declared: vec!["critic.verdict".into()],
            produced: vec!["retry".into()],
            produced_prefixes: vec!["step.".into()],
            platform: vec!["error.execution".into(), "done.exec.test".into()],
        };
        let handlers: Vec<Handler> = [
            "critic.verdict",
            "critic",
            "critic.*",
            "error",
            "error.*",
            "done.exec",
            "*",
            "retry",
            "step.3",
            "critic.verdcit",
            "done.exec.tset",
            "retr",
        ]
        .into_iter()
        .map(handler)
        .collect();
        let unmatched: Vec<(String, String)> = sources
            .unmatched(&handlers, false)
            .into_iter()
            .map(|unmatched| (unmatched.token, unmatched.help))
            .collect();
        assert_eq!(
            unmatched,
            vec![
                (
                    "critic.verdcit".into(),
                    "did you mean `critic.verdict`?".into()
                ),
                (
                    "done.exec.tset".into(),
                    "did you mean `done.exec.test`?".into()
                ),
                ("retr".into(), "did you mean `retry`?".into()),
            ]
        );
    }
}
