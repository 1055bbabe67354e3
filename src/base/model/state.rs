//! States as written: atomic, compound, parallel, final and history.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Action;
use super::transition::{Targets, Transitions};

/// A state. Its kind is `type`, or inferred: with child `states` it is compound, otherwise atomic.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::state_kinds::offer_keys_by_kind)]
pub struct State {
    /// The kind of state; inferred from `states` when omitted.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StateType>,
    /// What the state means; markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a compound state: the child entered first, a deeper descendant, or several
    /// descendants in parallel regions. Defaults to the first child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<Targets>,
    /// Child states, in document order. Each key is the child's id, unique in the file.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub states: IndexMap<String, State>,
    /// Actions run when the state is entered, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entry: Vec<Action>,
    /// Actions run when the state is exited, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exit: Vec<Action>,
    /// Transitions taken on events. Each key is one or more event descriptors separated by
    /// spaces: `error` matches `error` and `error.exec.timeout`; `*` matches any event.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub on: IndexMap<String, Transitions>,
    /// Eventless transitions, taken as soon as their guard holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<Transitions>,
    /// External events that wait while this state is active and no transition takes them
    /// (event descriptors, as `on:` keys): each is kept in the run's inbox and offered again,
    /// in arrival order, after the configuration changes. Engine events (`done.*`, `error.*`,
    /// `after.*`, `timeout.*`) cannot be deferred.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defer: Vec<String>,
    /// Delayed transitions: each is taken `delay` after the state is entered (or at the
    /// instant `until` gives), unless the state was left first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<super::delayed_transition::DelayedTransition>,
    /// Leave the state through the event `timeout.<id>` if it is still active this long after
    /// entry: a literal such as `15m`, or an expression giving a duration or milliseconds; or at
    /// a deadline, `{ until: <timestamp expression> }`. Handle it under `on` (`timeout` matches
    /// every state's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<super::timeout::StateTimeout>,
    /// Child protocols started when the state is entered and cancelled when it exits. A child's
    /// final `output` arrives on `done.invoke.<id>` (exit code 0) or `error.invoke.<id>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invoke: Vec<Invoke>,
    /// For a final state: the process exit code of a run that ends here (0–63).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// For a final state: the run's output (and the data of its `done.state` event).
    /// Strings are templates: `"${attempts}"` keeps the value's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// For a history state: `shallow` (default) remembers the active child, `deep` every
    /// active descendant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryDepth>,
    /// For a history state: where to go when the parent has no recorded history yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Targets>,
}

/// The kind of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StateType {
    /// No children.
    Atomic,
    /// Children, one active at a time.
    Compound,
    /// Children are orthogonal regions, all active together.
    Parallel,
    /// Reaching it completes the parent; at the top level, ends the run.
    Final,
    /// A pseudo-state that re-enters the parent's last active configuration.
    History,
}

/// How much a history state remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HistoryDepth {
    /// The parent's active child only.
    Shallow,
    /// Every active descendant of the parent.
    Deep,
}

/// A child protocol run by a state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Invoke {
    /// The child protocol's file, relative to this protocol's file.
    pub protocol: String,
    /// Names the outcome events `done.invoke.<id>` and `error.invoke.<id>`.
    pub id: String,
    /// The child's inputs; string values are templates (`"${path}"` keeps its type).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, serde_json::Value>,
    /// Forward every external event this protocol takes to the child too, while it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub autoforward: bool,
}
