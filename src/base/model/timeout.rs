//! A state's `timeout` as written: a span from entry (`15m`, an expression) or a deadline (`{ until: <timestamp> }`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How long a state may stay active before `timeout.<id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StateTimeout {
    /// A literal such as `15m`, or an expression giving a duration or milliseconds (a
    /// timestamp is taken as a deadline).
    After(String),
    /// A deadline.
    Until(Deadline),
}

/// `{ until: <timestamp expression> }`: fires at that instant, at once if it has passed; a
/// resumed run keeps the instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Deadline {
    /// An expression giving a timestamp: `timestamp('2026-01-01T09:00:00Z')`,
    /// `started + duration('1h')`.
    pub until: String,
}
