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
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows; printed in the report.
    pub name: String,
    /// Input values; strings are read as on the command line (`30s` for a duration).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, serde_json::Value>,
    /// Effect outcomes by action id (`ID[N]` for one item of a `map`): as for `--mock`, or a
    /// list keyed on the call's arguments.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub mocks: IndexMap<String, MockScript>,
    /// What the run's clock reads when it starts, in UTC (`2026-01-01T00:00:00Z` when
    /// omitted): `now()` and timestamps are the same on every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// Files written into the scenario's scratch directory before the run starts: path
    /// (relative to that directory) → content. The run's relative paths resolve there.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub files: IndexMap<String, String>,
    /// Begin in this configuration and context instead of the initial state, to test one
    /// state: the states listed are entered (their entry actions run), their ancestors not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Start>,
    /// The steps, in order. The run starts before the first.
    pub steps: Vec<Step>,
}

/// How the calls of one mocked effect turn out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MockScript {
    /// Every call, as for `--mock`: `timeout`, `error:MESSAGE`, `exit:N`, `ok:STDOUT`,
    /// `truncated:STDOUT` (output cut at its limit), or a
    /// sequence `timeout,timeout,ok:done` (one per call, the last repeating).
    Outcomes(String),
    /// By the call's arguments: the first entry whose `when` matches scripts the call; a call
    /// no entry matches fails.
    ByArguments(Vec<ArgumentMock>),
}

impl From<String> for MockScript {
    fn from(outcomes: String) -> MockScript {
        MockScript::Outcomes(outcomes)
    }
}

/// One entry of a mock keyed on arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgumentMock {
    /// The arguments a call must have; omitted, any call matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<MockCondition>,
    /// The outcomes of the calls it matches, as for `--mock` (`timeout,ok:done`).
    pub result: String,
}

/// Arguments a mocked call is matched on; each given must be equal.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MockCondition {
    /// The program and its arguments (`exec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The file or directory (file actions and tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where a scenario begins when it does not begin at the protocol's initial state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// The active atomic states (one per parallel region); their ancestors are active too.
    pub configuration: Vec<String>,
    /// Context variables set over their initial values.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub context: IndexMap<String, serde_json::Value>,
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
    /// What must become of the event, in the words the engine tells a sender: a `refused` event
    /// (undeclared, data off its schema) is expected, not a mistake in the file. Without it,
    /// a refused event fails the step and any other outcome passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SendOutcome>,
}

/// What becomes of a sent event, as the engine tells its sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SendOutcome {
    /// A transition took it.
    Taken,
    /// An active state defers it: it waits in the inbox.
    Deferred,
    /// Admitted, but no transition took it and no active state deferred it.
    Discarded,
    /// Not admitted: undeclared, data off its schema, an engine name, or a limit.
    Refused,
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
    /// Context values: each listed variable matches its value (maps by the keys given, other
    /// values exactly).
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
    /// Effects started since the previous `expect`, in this order (others may come between);
    /// `[]` asserts that none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<EffectExpectation>>,
    /// Files (relative to the scenario's scratch directory) that must exist, with a regular expression
    /// their content must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<IndexMap<String, String>>,
    /// The run has ended in a top-level final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Finished>,
    /// An event of this name was discarded since the previous `expect`: admitted, but no
    /// transition took it and no active state deferred it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded: Option<String>,
    /// An event of this name was deferred since the previous `expect`: it waits in the inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<String>,
    /// The event the step before sent was refused (undeclared, data off its schema, an engine
    /// name). Without it, a refused `send` fails its step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Error events no transition handled since the previous `expect` (the engine's
    /// `unhandled_error` warning), by name, in this order (others may come between); `[]`
    /// asserts that none was: the invariant `test --explore` checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhandled_errors: Option<Vec<String>>,
}

/// One effect that must have started, with the arguments it got.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EffectExpectation {
    /// The effect's id (`ID[N]` for one item of a `map`).
    pub id: String,
    /// The program and its arguments (`exec`), exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The file or directory it acts on (file actions and tools), as the protocol resolved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A regular expression the content it writes (or the line it appends) must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
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
    /// The run's output, matched as `context` values are: maps by the keys given (others may
    /// be there too), lists and other values exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// Text the message of the unhandled error that failed the run contains (`errors:
    /// strict`; the run ends with exit code 76 and no final state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
