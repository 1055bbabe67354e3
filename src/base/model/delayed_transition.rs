//! A transition under `after`: a transition with the `delay` or `until` that fires it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::transition::Transition;

/// A transition taken `delay` after the state is entered (or at the instant `until` gives),
/// unless the state was left first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelayedTransition {
    /// How long after entry the transition fires: a literal such as `30s`, or an expression
    /// giving a duration, milliseconds or a duration literal string (one giving a timestamp
    /// waits until it: `until` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    /// Instead of `delay`: a deadline. An expression giving a timestamp
    /// (`timestamp('2026-01-01T09:00:00Z')`, `started + duration('1h')`); the transition fires
    /// at that instant, at once if it has passed. A resumed run keeps the instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(flatten)]
    pub transition: Transition,
}
