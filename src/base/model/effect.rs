//! Effectful actions as written: processes, built-in tools and files, with shared options for
//! ids, timeouts, retries and telemetry.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Options every effectful action shares. The outcome comes back as `done.exec.<id>`,
/// `error.exec.<id>` or `error.exec.timeout.<id>` (`error.exec` catches every failure), with data
/// `id`, `exit_code`, `stdout`, `stderr`, `truncated`, `duration_ms`, `timed_out` and, on
/// failure, `message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EffectOptions {
    /// The action's id: names its outcome events and lets `--mock ID=OUTCOME` replace it.
    pub id: String,
    /// Give up on one attempt after this long (for processes: SIGTERM to the whole process group,
    /// a grace period, then SIGKILL). A literal such as `30s`, or an expression giving milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Attempt `n` gets `timeout` × the `n`-th multiplier; past the end the last one repeats.
    /// ADR-018 uses `[1, 2, 3, 5, 10]`. A list, or an expression giving one (e.g. an input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_multipliers: Option<Multipliers>,
    /// Retriers, tried in order: the first whose `error_equals` matches a failure decides whether
    /// and when to try again. What remains after retries arrives as the failure event. A name
    /// (alone, or as an entry of the list) stands for a retry policy's retriers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<super::reuse::RetryPlan>,
    /// Prefix of the retry telemetry log lines (`<prefix>_timeout_attempt`, `_timeout_retry`,
    /// `_timeout_success`, `_timeout_exhausted`, `_incomplete_output`); the id when omitted.
    /// A template, so an input can name it: `${telemetry_prefix}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<String>,
    /// When a run resumes after the engine stopped while this action ran: `retry` starts it
    /// again, `fail` delivers its failure event with `interrupted: true`. Default: `retry` for
    /// the tools, whole-file writes, backups and restores; `fail` for processes and appends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_interrupt: Option<InterruptPolicy>,
    /// What the effect belongs to. `state` (the default): the state whose entry started it, or
    /// for a transition's or an exit block's actions the innermost state that stays active
    /// across the transition; when that state exits, the effect is cancelled (its processes
    /// stopped, its outcome never delivered). `run`: it outlives its state, as a fire-and-forget
    /// notification does, and is cancelled only when the run stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<EffectScope>,
}

/// What an effect's lifetime is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EffectScope {
    /// The state that started it: cancelled when that state exits.
    #[default]
    State,
    /// The whole run: it outlives the state that started it.
    Run,
}

/// What a resumed run does with an effect that was running when the engine stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InterruptPolicy {
    /// Start it again: right for idempotent work (tools, whole-file writes, backups).
    Retry,
    /// Deliver its failure event (`error.exec.<id>`, data `interrupted: true`), so the protocol
    /// decides: right for processes and appends, which may not be safe to repeat.
    Fail,
}

/// Timeout multipliers: literal numbers, or an expression giving a list of numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Multipliers {
    /// The multipliers, one per attempt.
    Listed(Vec<f64>),
    /// An expression giving the list when the action runs, e.g. `multipliers`.
    Computed(String),
}

/// A count: a literal, or an expression giving a whole number when the action runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Count {
    /// A whole number, e.g. `3`.
    Literal(u32),
    /// An expression giving a whole number when the action runs, e.g. `max_retries`.
    Computed(String),
}

/// One retrier, in the vocabulary of AWS Step Functions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retrier {
    /// Event descriptors of the failures this retrier handles, e.g. `[error.exec.timeout]`;
    /// every failure when omitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_equals: Vec<String>,
    /// Attempts in all, the first included (Step Functions' `MaxAttempts` + 1). Default 3.
    /// A number or an expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<Count>,
    /// Pause before the first retry: a literal such as `2s`, or an expression giving
    /// milliseconds. Default `1s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Each pause is the previous one times this. Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_rate: Option<f64>,
    /// Longest pause: a literal or an expression giving milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<String>,
    /// `full` picks each pause at random between 0 and the computed pause; `none` (default) keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterKind>,
    /// Seed of the jitter, for reproducible runs. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Jitter of retry pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JitterKind {
    /// Exact pauses.
    None,
    /// Uniformly random pauses between 0 and the computed pause.
    Full,
}

/// Runs a process in its own process group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecAction {
    /// What to run: the program and its arguments, each a template and each exactly one
    /// argument (no shell); or, with `shell: true`, a command line run by `sh -c`.
    pub exec: ExecCommand,
    /// Run the string through `sh -c`. Only when written explicitly.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shell: bool,
    /// Working directory (a template); the engine's working directory when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment variables to set (values are templates).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub env: IndexMap<String, String>,
    /// Text written to the process's standard input (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Output that means the result is incomplete (ADR-018): `true` for the standard markers
    /// (`Terminated`, `Killed`, `... (truncated)`, `Connection timed out`, `Resource temporarily
    /// unavailable`, `Signal received`, `Process interrupted`), or a list of your own. A match turns
    /// the outcome into `error.incomplete.<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_markers: Option<IncompleteMarkers>,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Which output markers mean "incomplete".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum IncompleteMarkers {
    /// `true`: the standard markers; `false`: no check.
    Standard(bool),
    /// These markers.
    Listed(Vec<String>),
    /// An expression giving `true`, `false` or a list of markers when the action runs, e.g.
    /// `completeness_check`.
    Computed(String),
}

/// The command of an `exec` action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ExecCommand {
    /// A list: the program and its arguments, each a template and exactly one argument.
    Arguments(Vec<String>),
    /// A string: without `shell`, one expression giving that list (`"${command}"`, still one
    /// argument per element and no shell); with `shell: true`, a command line run by `sh -c`.
    Line(String),
}

/// Reads a file: its content arrives as `stdout`, its size as `bytes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileAction {
    /// The file (a template).
    pub read_file: String,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Lists a directory: names one per line in `stdout` (directories end in `/`), and `entries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirAction {
    /// The directory (a template).
    pub list_dir: String,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Searches a file, or every file under a directory, for lines matching a regular expression:
/// `path:line:text` lines in `stdout`, their count in `matches`. No match is a failure with
/// an empty `stderr`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepSearchAction {
    /// The pattern (a template), in Rust regex syntax.
    pub grep_search: String,
    /// The file or directory to search (a template).
    pub path: String,
    /// At most this many matches. Default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Writes a file atomically (temporary file, fsync, rename, fsync of the directory), appends a
/// line, or appends an item to a JSON array inside a file (read-modify-write under a lock, other
/// content kept). Exactly one of `content`, `append` and `json_append`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteAction {
    /// The file (a template); parent directories are created.
    pub write: String,
    /// The whole new content (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The whole new content as JSON, written pretty-printed: any YAML value whose strings are
    /// templates (a string that is exactly one `${...}` keeps the expression's type, so lists and
    /// numbers stay lists and numbers). Text is escaped as JSON needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// One line to append: a template, or a mapping written as one JSON line (JSON-lines ledgers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<serde_json::Value>,
    /// An item to append to a JSON array in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_append: Option<JsonAppend>,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Where and what to append in a JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonAppend {
    /// JSON pointer of the array, e.g. `/failure_escalations` (created when missing).
    pub array: String,
    /// The item; string values are templates.
    pub item: serde_json::Value,
}

/// Copies a file to a backup, atomically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupAction {
    /// The file to back up (a template).
    pub backup: String,
    /// Where the copy goes (a template).
    pub to: String,
    #[serde(flatten)]
    pub options: EffectOptions,
}

/// Copies a backup back over a file, atomically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreAction {
    /// The file to restore (a template).
    pub restore: String,
    /// The backup to copy from (a template).
    pub from: String,
    #[serde(flatten)]
    pub options: EffectOptions,
}
