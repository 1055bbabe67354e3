//! Transitions as written: targets, guards, actions, and the short forms.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::Action;

/// One transition, or several tried in order (the first whose guard holds is taken).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Transitions {
    // The list comes first: an untagged `One` would read a list as one transition's fields.
    /// A list of transitions, tried in order: the first whose guard holds is taken.
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
    /// The id of the state to go to, short for `{ target: ID }`.
    Target(String),
    /// A transition written in full: `target`, `guard`, `actions`, `type`, `description`.
    Full(Transition),
}

/// A transition with its target(s), guard and actions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transition {
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
    /// A list of state ids, in different parallel regions.
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
