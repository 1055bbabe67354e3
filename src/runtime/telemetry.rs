//! Telemetry: each run's entries, kept in the store with its steps and in `events.jsonl` in its run directory (pruned to the last N runs), and the queries behind `protocol-run logs` and `protocol-run stats`.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
#[cfg(test)]
use serde_json::json;

/// Runs kept by default (ADR-018).
pub const DEFAULT_RUNS_KEPT: usize = 10;

/// The directory holding run directories: `<state dir>/runs`.
pub fn runs_directory(state_directory: &Path) -> PathBuf {
    state_directory.join("runs")
}

/// One run's telemetry file. Every entry is written through before the call returns (a plain
/// unbuffered file: a line is never held in memory where a crash could lose it).
pub struct RunLog {
    run_id: String,
    file: File,
    path: PathBuf,
}

impl RunLog {
    /// Creates `<runs>/<run_id>/events.jsonl`, then removes the oldest runs beyond `keep`.
    pub fn create(runs: &Path, run_id: &str, keep: usize) -> std::io::Result<RunLog> {
        let directory = runs.join(run_id);
        std::fs::create_dir_all(&directory)?;
        let path = directory.join("events.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        prune(runs, keep.max(1))?;
        Ok(RunLog {
            run_id: run_id.to_string(),
            file,
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry; `time`, `run` and `kind` are added to `fields`.
    pub fn record(&mut self, time: &str, kind: &str, fields: Value) -> std::io::Result<()> {
        self.append(&entry_line(&self.run_id, time, kind, fields))
    }

    /// Appends one line `entry_line` made.
    pub fn append(&mut self, line: &str) -> std::io::Result<()> {
        // One write call per line, so concurrent readers never see half a line appended.
        self.file.write_all(line.as_bytes())
    }
}

// Which kinds are kept is the run's own rule (`runtime::run`, which tells a parent its child's).
pub use crate::runtime::run::telemetry_kinds::{kept_of_a_child, read_by_logs_or_stats};

/// One telemetry entry as its line, in `events.jsonl` and in the store alike: `time`, `run` and
/// `kind`, then `fields`, its secrets masked, ending in a newline.
pub fn entry_line(run_id: &str, time: &str, kind: &str, fields: Value) -> String {
    let mut line = String::new();
    push_entry(&mut line, Some(run_id), time, kind, fields);
    line
}

/// Appends one entry as its line: `time`, `run` (if given) and `kind`, then `fields`, its
/// secrets masked, ending in a newline.
fn push_entry(lines: &mut String, run_id: Option<&str>, time: &str, kind: &str, fields: Value) {
    let mut entry = serde_json::Map::new();
    entry.insert("time".into(), Value::String(time.to_string()));
    if let Some(run_id) = run_id {
        entry.insert("run".into(), Value::String(run_id.to_string()));
    }
    entry.insert("kind".into(), Value::String(kind.to_string()));
    if let Value::Object(fields) = fields {
        entry.extend(fields);
    }
    let mut entry = Value::Object(entry);
    crate::base::secrets::mask_json_in_place(&mut entry);
    lines.push_str(&entry.to_string());
    lines.push('\n');
}

/// Keeps the `keep` most recently created run directories, and every run a process is still
/// driving, however old.
fn prune(runs: &Path, keep: usize) -> std::io::Result<()> {
    let mut names = run_ids(runs)?;
    if names.len() > keep {
        names.truncate(names.len() - keep);
        for name in names {
            let directory = runs.join(name);
            // Held while the directory goes, so a resume starting now waits for the next try.
            let Ok(_lock) = crate::runtime::runs::claims::unless_live(&directory) else {
                continue;
            };
            // Another run may be pruning at the same moment: a directory already gone is fine.
            match std::fs::remove_dir_all(&directory) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
    }
    Ok(())
}

/// Run ids, oldest first: by when their directory was created, then by name. Not by name alone,
/// since an id chosen with `--run-id` does not start with a timestamp.
pub fn run_ids(runs: &Path) -> std::io::Result<Vec<String>> {
    let mut runs: Vec<(Option<std::time::SystemTime>, String)> = match std::fs::read_dir(runs) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|entry| entry.path().is_dir())
            .filter_map(|entry| {
                let metadata = entry.metadata().ok();
                // A file system without creation times falls back to the last change.
                let created = metadata
                    .and_then(|metadata| metadata.created().or_else(|_| metadata.modified()).ok());
                Some((created, entry.file_name().into_string().ok()?))
            })
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error),
    };
    runs.sort();
    Ok(runs.into_iter().map(|(_, name)| name).collect())
}

/// A new run id: sortable by start time, unique per process.
pub fn new_run_id() -> String {
    let now = crate::base::clock::unix_milliseconds_now();
    format!(
        "{}-{}",
        crate::base::clock::format_rfc3339(now).replace([':', '.'], "-"),
        std::process::id()
    )
}

/// A run's entries in order, with the numbers of the lines that were not JSON (skipped).
#[derive(Debug, Default)]
pub struct Entries {
    pub entries: Vec<Value>,
    pub malformed: Vec<usize>,
}

impl Entries {
    fn add(&mut self, number: usize, line: &str) {
        match serde_json::from_str(line) {
            Ok(entry) => self.entries.push(entry),
            Err(_) => self.malformed.push(number),
        }
    }
}

/// The entries of one run's `events.jsonl` in this state directory, in order.
pub fn read_run(runs: &Path, run_id: &str) -> std::io::Result<Entries> {
    let file = File::open(runs.join(run_id).join("events.jsonl"))?;
    let mut read = Entries::default();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        read.add(index + 1, &line?);
    }
    Ok(read)
}

/// The entries of the telemetry parts a store keeps of run `run_id` (`Store::telemetry`), in
/// order, each with its `run` again after its `time` (`stored_line` left it out); `None` when
/// the store keeps none (a run recorded before the store kept telemetry).
pub fn read_stored(parts: &[String], run_id: &str) -> Option<Entries> {
    let mut read = Entries::default();
    let lines = parts.iter().flat_map(|part| part.lines());
    for (index, line) in lines.enumerate() {
        read.add(index + 1, line);
    }
    for entry in &mut read.entries {
        if let Value::Object(fields) = entry
            && !fields.contains_key("run")
        {
            let mut with_run = serde_json::Map::with_capacity(fields.len() + 1);
            for (name, value) in std::mem::take(fields) {
                let after = name == "time";
                with_run.insert(name, value);
                if after {
                    with_run.insert("run".into(), Value::String(run_id.to_string()));
                }
            }
            with_run
                .entry("run")
                .or_insert_with(|| Value::String(run_id.to_string()));
            *fields = with_run;
        }
    }
    (!parts.is_empty()).then_some(read)
}

/// Appends `line` (an `entry_line` of run `run_id`) to `stored` as the store keeps it: without
/// its `"run"`, which the store's row names (a fifth of a step's entry). A line whose run is
/// not where `entry_line` put it is kept whole.
pub fn push_stored_line(stored: &mut String, line: &str, run_id: &str) {
    let field = format!(",\"run\":{}", Value::String(run_id.to_string()));
    match line.find(&field) {
        Some(start) => {
            stored.push_str(&line[..start]);
            stored.push_str(&line[start + field.len()..]);
        }
        None => stored.push_str(line),
    }
}

/// Appends one entry to `stored` as the store keeps it (`push_stored_line`'s form, without its
/// `run`): `time` and `kind`, then `fields`, its secrets masked, ending in a newline. For a host
/// that keeps no `events.jsonl` (`serve`, `mcp`), whose entries go to the store alone.
pub fn push_stored_entry(stored: &mut String, time: &str, kind: &str, fields: Value) {
    push_entry(stored, None, time, kind, fields);
}

/// Filters for `protocol-run logs`.
#[derive(Debug, Default, Clone)]
pub struct LogFilter {
    pub tag: Option<String>,
    /// The least severe level shown.
    pub level: Option<String>,
}

fn level_rank(level: &str) -> u8 {
    match level.to_ascii_lowercase().as_str() {
        "trace" => 0,
        "debug" => 1,
        "info" => 2,
        "warn" => 3,
        _ => 4,
    }
}

/// The tag a failed effect's entry is shown under among the log lines.
pub const EFFECT_FAILED_TAG: &str = "effect_failed";

/// Whether an entry is a failed effect's outcome: `logs` shows it among the log lines, since why
/// the effect failed (its message, its error output's tail) is there and in no log line.
pub fn is_failed_effect(entry: &Value) -> bool {
    entry["kind"] == "effect" && entry["succeeded"] == false
}

/// An entry's level as `logs` filters it: a failed effect's is `warn` (the protocol may handle
/// the failure; what it does then logs at its own level).
pub fn entry_level(entry: &Value) -> &str {
    if is_failed_effect(entry) {
        return "warn";
    }
    entry["level"].as_str().unwrap_or("info")
}

/// An entry's tags as `logs` shows and filters them.
pub fn entry_tags(entry: &Value) -> Vec<&str> {
    if is_failed_effect(entry) {
        return vec![EFFECT_FAILED_TAG];
    }
    entry["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The log entries of a run that pass the filter, with the failed effects' outcomes among them.
pub fn filter_logs<'a>(entries: &'a [Value], filter: &LogFilter) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|entry| entry["kind"] == "log" || is_failed_effect(entry))
        .filter(|entry| match &filter.tag {
            Some(tag) => entry_tags(entry).contains(&tag.as_str()),
            None => true,
        })
        .filter(|entry| match &filter.level {
            Some(level) => level_rank(entry_level(entry)) >= level_rank(level),
            None => true,
        })
        .collect()
}

/// ADR-018's secondary metrics for one run (`statistics::Statistics` sums several).
pub fn statistics(entries: &[Value]) -> Value {
    let mut statistics = crate::runtime::statistics::Statistics::default();
    statistics.add_run(entries);
    statistics.to_json()
}

/// Milliseconds since the epoch of a `YYYY-MM-DDTHH:MM:SS.mmmZ` timestamp.
pub(crate) fn parse_rfc3339_milliseconds(text: &str) -> Option<u64> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second, milli) = (
        number(11..13)?,
        number(14..16)?,
        number(17..19)?,
        number(20..23)?,
    );
    // Days from civil (Howard Hinnant), the inverse of `clock::format_rfc3339`.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let total = ((days * 24 + hour) * 60 + minute) * 60 + second;
    u64::try_from(total * 1000 + milli).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_line_reads_back_as_the_file_has_it() {
        let line = entry_line(
            "run-1",
            "2026-01-01T00:00:00.000Z",
            "log",
            json!({"message": "a \"run\":\"run-1\" inside", "tags": []}),
        );
        let mut stored = String::new();
        push_stored_line(&mut stored, &line, "run-1");
        assert!(
            stored.len() < line.len()
                && !stored.starts_with("{\"time\":\"2026-01-01T00:00:00.000Z\",\"run\"")
        );
        let read = read_stored(&[stored], "run-1").unwrap();
        assert_eq!(format!("{}\n", read.entries[0]), line);
    }

    #[test]
    fn timestamps_round_trip() {
        for milliseconds in [0, 951_782_400_000, 1_795_318_800_123] {
            let text = crate::base::clock::format_rfc3339(milliseconds);
            assert_eq!(
                parse_rfc3339_milliseconds(&text),
                Some(milliseconds),
                "{text}"
            );
        }
    }

    #[test]
    fn keeps_only_the_last_runs() {
        let runs =
            std::env::temp_dir().join(format!("protocol-run-telemetry-{}", std::process::id()));
        for index in 0..5 {
            let mut log = RunLog::create(&runs, &format!("run-{index}"), 3).unwrap();
            log.record("2026-01-01T00:00:00.000Z", "start", json!({}))
                .unwrap();
        }
        assert_eq!(run_ids(&runs).unwrap(), ["run-2", "run-3", "run-4"]);
        std::fs::remove_dir_all(&runs).unwrap();
    }

    #[test]
    fn statistics_sum_time_in_state_and_tags() {
        let entries = vec![
            json!({"kind": "start", "time": "2026-01-01T00:00:00.000Z", "configuration": ["a"]}),
            json!({"kind": "log", "time": "2026-01-01T00:00:01.000Z", "tags": ["x", "y"]}),
            json!({"kind": "effect", "time": "2026-01-01T00:00:01.000Z", "id": "op", "succeeded": false, "timed_out": true}),
            json!({"kind": "step", "time": "2026-01-01T00:00:02.500Z", "configuration": ["b"]}),
            json!({"kind": "finish", "time": "2026-01-01T00:00:03.000Z", "configuration": []}),
        ];
        let stats = statistics(&entries);
        assert_eq!(stats["time_in_state_ms"], json!({"a": 2500, "b": 500}));
        assert_eq!(stats["tags"], json!({"x": 1, "y": 1}));
        assert_eq!(stats["timeouts_per_action"], json!({"op": 1}));
    }
}
