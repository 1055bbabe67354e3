//! The log lines a live run wrote, kept for `get_logs` and filtered by tag and level.

use serde_json::{Value, json};

/// The most log lines one run's view keeps; older ones are dropped first.
pub const MAX_KEPT_LOGS: usize = 1_000;

/// The levels from the least severe; a filter keeps its level and the ones after it.
const LEVELS: [&str; 4] = ["debug", "info", "warn", "error"];

/// A run's latest log lines, as `serve` writes them on stderr (masked).
#[derive(Debug, Default)]
pub struct KeptLogs {
    lines: std::collections::VecDeque<Value>,
    dropped: usize,
}

impl KeptLogs {
    pub fn keep(&mut self, line: &Value) {
        if self.lines.len() == MAX_KEPT_LOGS {
            self.lines.pop_front();
            self.dropped += 1;
        }
        let mut line = line.clone();
        if let Some(fields) = line.as_object_mut() {
            fields.remove("instance");
        }
        self.lines.push_back(line);
    }

    /// The lines carrying `tag` (when given) at `level` or above (when given), oldest first;
    /// an unknown level is refused with the ones there are.
    pub fn filtered(&self, tag: Option<&str>, level: Option<&str>) -> Result<Value, String> {
        let least = match level {
            None => 0,
            Some(level) => LEVELS
                .iter()
                .position(|known| *known == level)
                .ok_or_else(|| {
                    format!(
                        "argument `level`: `{level}` is not one of {}",
                        LEVELS.join(", ")
                    )
                })?,
        };
        let lines: Vec<&Value> = self
            .lines
            .iter()
            .filter(|line| {
                let severity = line["level"]
                    .as_str()
                    .and_then(|level| LEVELS.iter().position(|known| *known == level))
                    .unwrap_or(0);
                let tagged = tag.is_none_or(|tag| {
                    line["tags"]
                        .as_array()
                        .is_some_and(|tags| tags.iter().any(|each| each == tag))
                });
                severity >= least && tagged
            })
            .collect();
        Ok(json!({"logs": lines, "dropped": self.dropped}))
    }
}
