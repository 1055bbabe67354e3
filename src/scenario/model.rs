//! Scenario files as written: serde + schemars types, the source of `schemas/scenario.schema.json`.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Scenarios for one protocol. Start the file with the modeline
/// `# yaml-language-server: $schema=../schemas/scenario.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The protocol under test, relative to this file.
    pub protocol: String,
    /// Scenarios, each run on a fresh instance under virtual time.
    pub scenarios: Vec<Scenario>,
}

/// One scenario: inputs, mocked effects, and steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows; printed in the report.
    pub name: String,
    /// Input values; strings are read as on the command line (`30s` for a duration).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, serde_json::Value>,
    /// Effect outcomes by action id, as for `--mock`: `timeout`, `error:MESSAGE`, `exit:N`,
    /// `ok:STDOUT`, or a sequence `timeout,timeout,ok:done`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub mocks: IndexMap<String, String>,
    /// What the run's clock reads when it starts, in UTC (`2026-01-01T00:00:00Z` when
    /// omitted): `now()` and timestamps are the same on every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// The steps, in order. The run starts before the first.
    pub steps: Vec<Step>,
}

/// One step: send an event, let virtual time pass, or check what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Step {
    Send(SendStep),
    After(AfterStep),
    Expect(ExpectStep),
}

/// Sends an external event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendStep {
    /// The event's name.
    pub send: String,
    /// The event's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

/// Lets virtual time pass: timers and mocked effects due meanwhile happen, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AfterStep {
    /// A duration literal such as `100ms` or `2m`.
    pub after: String,
}

/// Checks the run. Each key present is one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectStep {
    // Boxed: an expectation is much larger than the other steps.
    pub expect: Box<Expectation>,
}

/// What must hold now.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The active atomic states, compared as a set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<Vec<String>>,
    /// Context values (each listed variable equals its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<IndexMap<String, serde_json::Value>>,
    /// Log tags emitted since the previous `expect`, in this order (other tags may come between);
    /// `[]` asserts that none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Directives emitted since the previous `expect`, in this order; each listed field must
    /// match (other fields may be present). `[]` asserts that none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directives: Option<Vec<serde_json::Value>>,
    /// Files (relative to the working directory) that must exist, with a regular expression
    /// their content must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<IndexMap<String, String>>,
    /// The run has ended in a top-level final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Finished>,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finished {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// The final state's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The run's output. Maps are compared key by key, recursively: the keys given must be
    /// there with these values, others may be too. Lists and other values compare exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}
