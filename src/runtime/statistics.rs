//! ADR-018's secondary metrics, summed over one run's telemetry or over many runs of a protocol.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::runtime::telemetry::parse_rfc3339_milliseconds;

/// How the retried calls of one effect ended: a call is retried when it made a second attempt.
#[derive(Debug, Default)]
struct Retries {
    succeeded: u64,
    exhausted: u64,
    /// Its owner state exited (or the run moved on) while it was being retried.
    cancelled: u64,
    /// Attempts made in all of them.
    attempts: u64,
}

/// Counts summed over the runs added; rates are worked out from the sums, never averaged.
#[derive(Debug, Default)]
pub struct Statistics {
    runs: u64,
    tags: BTreeMap<String, u64>,
    /// Per effect id: attempts that timed out, a retried one's included.
    timeouts: BTreeMap<String, u64>,
    /// Per effect id: calls that (succeeded, failed).
    outcomes: BTreeMap<String, (u64, u64)>,
    time_in_state: BTreeMap<String, u64>,
    /// Times each state was entered: the attempts of a protocol that retries by entering a
    /// state again.
    entries: BTreeMap<String, u64>,
    /// Per telemetry name (an effect's `telemetry`, else its id): how its retried calls ended.
    retries: BTreeMap<String, Retries>,
    retry_successes: u64,
    retried_calls: u64,
    attempts_to_success: u64,
}

/// The prefix of the retry error of an attempt that timed out: `error.exec.timeout.<id>`.
const TIMEOUT_ERROR: &str = "error.exec.timeout.";

impl Statistics {
    /// Adds one run's entries (`telemetry::read_run`). Time in a state is counted from one step to
    /// the next within the run, so the gap between two runs is never counted.
    pub fn add_run(&mut self, entries: &[Value]) {
        self.runs += 1;
        // A run recorded before steps said the states they entered counts a transition's
        // targets and the leaves it started in instead.
        let says_entered = entries.iter().any(|entry| entry.get("entered").is_some());
        let mut current: Option<(Vec<String>, u64)> = None;
        for entry in entries {
            match entry["kind"].as_str() {
                Some("log") => {
                    for tag in entry["tags"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        *self.tags.entry(tag.to_string()).or_default() += 1;
                        self.add_retry_end(tag, entry);
                        self.add_retried_timeout(tag, entry);
                    }
                }
                // A cancelled effect neither succeeded nor failed: its state was left. One
                // cancelled while it was being retried still ends a retried call.
                Some("effect")
                    if matches!(
                        entry["outcome"].as_str(),
                        Some("cancelled" | "stopped_on_resume")
                    ) =>
                {
                    self.add_cancelled_retry(entry);
                }
                Some("effect") => self.add_effect(entry),
                Some("transition") if !says_entered => {
                    for target in entry["targets"].as_array().into_iter().flatten() {
                        self.count_entry(target);
                    }
                }
                Some("step" | "start" | "finish" | "resume") => {
                    let entered = if says_entered {
                        entry["entered"].as_array()
                    } else if entry["kind"] == "start" {
                        entry["configuration"].as_array()
                    } else {
                        None
                    };
                    for state in entered.into_iter().flatten() {
                        self.count_entry(state);
                    }
                    self.add_time(entry, &mut current);
                }
                _ => {}
            }
        }
    }

    /// Adds the time since the last step to every state active since then, and makes this
    /// entry's states the active ones: all of them (`states`, compound ones included), or the
    /// leaves of a run recorded before entries said them. A resume counts no time: what the
    /// engine did not run meanwhile is not time in a state.
    fn add_time(&mut self, entry: &Value, current: &mut Option<(Vec<String>, u64)>) {
        let time = entry["time"].as_str().and_then(parse_rfc3339_milliseconds);
        if let (Some((states, since)), Some(now)) = (&*current, time)
            && entry["kind"] != "resume"
        {
            for state in states {
                *self.time_in_state.entry(state.clone()).or_default() += now.saturating_sub(*since);
            }
        }
        let states = entry
            .get("states")
            .unwrap_or(&entry["configuration"])
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|state| state.as_str().map(String::from))
            .collect();
        *current = time.map(|now| (states, now));
    }

    fn count_entry(&mut self, state: &Value) {
        if let Some(state) = state.as_str() {
            *self.entries.entry(state.to_string()).or_default() += 1;
        }
    }

    /// An effect with a `retry` policy logs how its attempts ended under the tags
    /// `NAME_timeout_success` and `NAME_timeout_exhausted` (with `fields.attempts`); only a call
    /// that made more than one attempt was retried.
    fn add_retry_end(&mut self, tag: &str, entry: &Value) {
        let (name, succeeded) = if let Some(name) = tag.strip_suffix("_timeout_success") {
            (name, true)
        } else if let Some(name) = tag.strip_suffix("_timeout_exhausted") {
            (name, false)
        } else {
            return;
        };
        let attempts = entry["fields"]["attempts"].as_u64().unwrap_or(0);
        if attempts < 2 {
            return;
        }
        self.retried_calls += 1;
        let retries = self.retries.entry(name.to_string()).or_default();
        retries.attempts += attempts;
        if succeeded {
            self.retry_successes += 1;
            self.attempts_to_success += attempts;
            retries.succeeded += 1;
        } else {
            retries.exhausted += 1;
        }
    }

    /// An attempt that timed out and was retried: its call's outcome says only how the last
    /// attempt ended, so the retry line (`NAME_timeout_retry`, its `error` naming the effect)
    /// counts it.
    fn add_retried_timeout(&mut self, tag: &str, entry: &Value) {
        if !tag.ends_with("_timeout_retry") {
            return;
        }
        if let Some(id) = entry["fields"]["error"]
            .as_str()
            .and_then(|error| error.strip_prefix(TIMEOUT_ERROR))
        {
            *self.timeouts.entry(id.to_string()).or_default() += 1;
        }
    }

    /// A call cancelled after its second attempt began: a retried call that did not succeed.
    fn add_cancelled_retry(&mut self, entry: &Value) {
        let attempts = entry["attempts"].as_u64().unwrap_or(0);
        let Some(name) = entry["telemetry"].as_str().filter(|_| attempts >= 2) else {
            return;
        };
        self.retried_calls += 1;
        let retries = self.retries.entry(name.to_string()).or_default();
        retries.cancelled += 1;
        retries.attempts += attempts;
    }

    fn add_effect(&mut self, entry: &Value) {
        let id = entry["id"].as_str().unwrap_or("?").to_string();
        let counts = self.outcomes.entry(id.clone()).or_default();
        if entry["succeeded"] == true {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
        if entry["timed_out"] == true {
            *self.timeouts.entry(id).or_default() += 1;
        }
    }

    /// The metrics as one JSON object; a rate with nothing to divide is `null`.
    pub fn to_json(&self) -> Value {
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                Value::Null
            } else {
                json!(part as f64 / whole as f64)
            }
        };
        json!({
            "runs": self.runs,
            "retry_success_rate": ratio(self.retry_successes, self.retried_calls),
            "retry_sequences": self.retried_calls,
            "average_attempts_to_success": ratio(self.attempts_to_success, self.retry_successes),
            "retries_per_action": self.retries.iter()
                .map(|(name, retries)| (name.clone(), json!({
                    "succeeded": retries.succeeded,
                    "exhausted": retries.exhausted,
                    "cancelled": retries.cancelled,
                    "attempts": retries.attempts,
                })))
                .collect::<serde_json::Map<_, _>>(),
            "timeouts_per_action": self.timeouts,
            "outcomes_per_action": self.outcomes.iter()
                .map(|(id, (succeeded, failed))| (id.clone(), json!({"succeeded": succeeded, "failed": failed})))
                .collect::<serde_json::Map<_, _>>(),
            "entries_per_state": self.entries,
            "time_in_state_ms": self.time_in_state,
            "average_time_in_state_ms": self.time_in_state.iter()
                .map(|(state, total)| (state.clone(), json!(total / self.runs.max(1))))
                .collect::<serde_json::Map<_, _>>(),
            "tags": self.tags,
        })
    }
}

/// The most runs `stats --protocol` (and the inspector's statistics page) sums: the newest ones
/// with telemetry, so that a protocol run a million times is summed in bounded time and memory.
pub const MAX_RUNS_SUMMED: usize = 1_000;

/// The statistics of the newest `most` runs of `protocol` (named as `runs --protocol` names
/// it) whose telemetry the store keeps: the sums, how many runs were summed, and whether older
/// ones were left out.
pub fn of_protocol(
    store: &dyn crate::store::Store,
    protocol: &str,
    most: usize,
) -> Result<(Statistics, usize, bool), crate::store::StoreError> {
    let filter = crate::store::run_filter::RunFilter {
        protocol: Some(protocol.to_string()),
        ..Default::default()
    };
    let mut statistics = Statistics::default();
    let mut summed = 0;
    for run in filter.runs(store)? {
        if summed == most {
            return Ok((statistics, summed, true));
        }
        let parts = store.telemetry(&run.id)?;
        if let Some(read) = crate::runtime::telemetry::read_stored(&parts, &run.id) {
            statistics.add_run(&read.entries);
            summed += 1;
        }
    }
    Ok((statistics, summed, false))
}
