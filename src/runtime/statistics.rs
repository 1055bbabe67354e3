//! ADR-018's secondary metrics, summed over one run's telemetry or over many runs of a protocol.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::runtime::telemetry::parse_rfc3339_milliseconds;

/// How the retried calls of one effect ended.
#[derive(Debug, Default)]
struct Retries {
    succeeded: u64,
    exhausted: u64,
    /// Attempts made in all of them.
    attempts: u64,
}

/// Counts summed over the runs added; rates are worked out from the sums, never averaged.
#[derive(Debug, Default)]
pub struct Statistics {
    runs: u64,
    tags: BTreeMap<String, u64>,
    timeouts: BTreeMap<String, u64>,
    /// Per effect id: (succeeded, failed).
    outcomes: BTreeMap<String, (u64, u64)>,
    time_in_state: BTreeMap<String, u64>,
    /// Times each state was entered as a transition's target, or in the start configuration: the
    /// attempts of a protocol that retries by entering a state again.
    entries: BTreeMap<String, u64>,
    /// Per telemetry name (an effect's `telemetry`, else its id): how its retried calls ended.
    retries: BTreeMap<String, Retries>,
    retry_successes: u64,
    retry_sequences: u64,
    attempts_to_success: u64,
}

impl Statistics {
    /// Adds one run's entries (`telemetry::read_run`). Time in a state is counted from one step to
    /// the next within the run, so the gap between two runs is never counted.
    pub fn add_run(&mut self, entries: &[Value]) {
        self.runs += 1;
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
                    }
                }
                // A cancelled effect neither succeeded nor failed: its state was left.
                Some("effect")
                    if matches!(
                        entry["outcome"].as_str(),
                        Some("cancelled" | "stopped_on_resume")
                    ) => {}
                Some("effect") => self.add_effect(entry),
                Some("transition") => {
                    for target in entry["targets"].as_array().into_iter().flatten() {
                        self.count_entry(target);
                    }
                }
                Some("step" | "start" | "finish") => {
                    if entry["kind"] == "start" {
                        for state in entry["configuration"].as_array().into_iter().flatten() {
                            self.count_entry(state);
                        }
                    }
                    let time = entry["time"].as_str().and_then(parse_rfc3339_milliseconds);
                    if let (Some((states, since)), Some(now)) = (&current, time) {
                        for state in states {
                            *self.time_in_state.entry(state.clone()).or_default() +=
                                now.saturating_sub(*since);
                        }
                    }
                    let states = entry["configuration"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|state| state.as_str().map(String::from))
                        .collect();
                    current = time.map(|now| (states, now));
                }
                _ => {}
            }
        }
    }

    fn count_entry(&mut self, state: &Value) {
        if let Some(state) = state.as_str() {
            *self.entries.entry(state.to_string()).or_default() += 1;
        }
    }

    /// An effect with a `retry` policy logs how its attempts ended under the tags
    /// `NAME_timeout_success` (with `fields.attempts`) and `NAME_timeout_exhausted`.
    fn add_retry_end(&mut self, tag: &str, entry: &Value) {
        let (name, succeeded) = if let Some(name) = tag.strip_suffix("_timeout_success") {
            (name, true)
        } else if let Some(name) = tag.strip_suffix("_timeout_exhausted") {
            (name, false)
        } else {
            return;
        };
        let attempts = entry["fields"]["attempts"].as_u64().unwrap_or(0);
        let retries = self.retries.entry(name.to_string()).or_default();
        self.retry_sequences += 1;
        retries.attempts += attempts;
        if succeeded {
            self.retry_successes += 1;
            self.attempts_to_success += attempts;
            retries.succeeded += 1;
        } else {
            retries.exhausted += 1;
        }
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
            "retry_success_rate": ratio(self.retry_successes, self.retry_sequences),
            "retry_sequences": self.retry_sequences,
            "average_attempts_to_success": ratio(self.attempts_to_success, self.retry_successes),
            "retries_per_action": self.retries.iter()
                .map(|(name, retries)| (name.clone(), json!({
                    "succeeded": retries.succeeded,
                    "exhausted": retries.exhausted,
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
