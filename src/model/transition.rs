//! Transitions as written: targets, guards, actions, and the short forms.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Action;

/// One transition, or several tried in order (the first whose guard holds is taken).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Transitions {
    /// Several transitions, tried in order. (First: serde would otherwise read a list as the
    /// fields of one transition, in order.)
    Many(Vec<TransitionSpec>),
    /// A single transition.
    One(TransitionSpec),
}

impl Transitions {
    pub fn as_slice(&self) -> &[TransitionSpec] {
        match self {
            Transitions::One(one) => std::slice::from_ref(one),
            Transitions::Many(many) => many,
        }
    }
}

/// A transition: a target state id for short, or the full form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TransitionSpec {
    /// Short form: the id of the target state.
    Target(String),
    /// Full form.
    Full(Transition),
}

/// A transition with its target(s), guard and actions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    /// Under `after` only: how long after entry the transition fires. A literal such as `30s`,
    /// or an expression giving a duration, milliseconds or a duration literal string (one giving
    /// a timestamp waits until it: `until` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    /// Under `after` only, instead of `delay`: a deadline. An expression giving a timestamp
    /// (`timestamp('2026-01-01T09:00:00Z')`, `started + duration('1h')`); the transition fires
    /// at that instant, at once if it has passed. A resumed run keeps the instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// The state id to go to, or several in parallel regions. Omit for a targetless
    /// transition, which runs its actions without leaving the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Targets>,
    /// A condition (CEL expression); the transition is enabled only when it is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// Actions run between exiting the old states and entering the new ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// `external` (default) exits and re-enters the source state; `internal` does not exit a
    /// compound source when every target is its descendant.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TransitionType>,
    /// What the transition means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Internal or external, as in SCXML.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransitionType {
    /// The source state is exited and re-entered (the default).
    External,
    /// A compound source is not exited when every target is its descendant.
    Internal,
}

/// One state id, or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Targets {
    /// One state id.
    One(String),
    /// Several state ids, in different parallel regions.
    Many(Vec<String>),
}

impl Targets {
    pub fn as_slice(&self) -> &[String] {
        match self {
            Targets::One(one) => std::slice::from_ref(one),
            Targets::Many(many) => many,
        }
    }
}
