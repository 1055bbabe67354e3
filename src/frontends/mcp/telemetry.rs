//! A run's telemetry as a resource: the steps its journal in the store holds (every run has one) and its telemetry entries (the store's, whichever host drove it; a run recorded before the store kept them, its `events.jsonl`); the latest of each, bounded.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use crate::store::{JournalEntry, Store};

/// The most steps, and the most telemetry entries, one read returns: the latest ones.
pub const MAX_TELEMETRY_RECORDS: usize = 500;

/// The most bytes of steps, and of telemetry entries, one read returns (as JSON): the
/// latest ones that fit. Also the most of the telemetry file read from its end.
pub const MAX_TELEMETRY_BYTES: usize = 512 * 1024;

/// The telemetry of `run`, a run of one of the protocols at `served` (canonical paths):
/// `{run, protocol, status, steps, entries, truncated}`. `entries` is `null` for a run with no
/// telemetry kept (one recorded by `serve` or `mcp` before the store kept theirs). `truncated` says older
/// records were left out, past `MAX_TELEMETRY_RECORDS` or `MAX_TELEMETRY_BYTES`.
pub fn read(
    store: &dyn Store,
    state_dir: &Path,
    served: &[String],
    run: &str,
) -> Result<Value, String> {
    let summary = store
        .run_summary(run)
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("no run `{run}`; list_runs lists them"))?;
    if !served.contains(&summary.protocol_path) {
        return Err(format!(
            "run `{run}` runs {}, which this server does not serve; `protocol-run logs {run}` \
             and `protocol-run status {run}` read it",
            summary.protocol_path
        ));
    }
    let (steps, mut truncated) = latest_steps(store, run)?;
    let file = crate::runtime::telemetry::runs_directory(state_dir)
        .join(run)
        .join("events.jsonl");
    // The store's telemetry holds the whole run whichever hosts drove it; a run recorded
    // before the store kept telemetry has it only in its `events.jsonl`.
    let stored = store.telemetry(run).map_err(|error| error.to_string())?;
    let entries = match crate::runtime::telemetry::read_stored(&stored, run) {
        Some(read) => {
            let (entries, dropped) = latest_within_budget(read.entries);
            truncated |= dropped;
            Value::Array(entries)
        }
        None => match file_tail(&file) {
            Ok(Some((entries, cut))) => {
                let (entries, dropped) = latest_within_budget(entries);
                truncated |= cut || dropped;
                Value::Array(entries)
            }
            Ok(None) => Value::Null,
            Err(error) => return Err(format!("cannot read {}: {error}", file.display())),
        },
    };
    let mut telemetry = json!({
        "run": run,
        "protocol": summary.protocol_path,
        "status": summary.status.as_str(),
        "steps": steps,
        "entries": entries,
        "truncated": truncated,
    });
    crate::base::secrets::mask_json_in_place(&mut telemetry);
    Ok(telemetry)
}

/// How many journal entries one read of the steps takes at a time.
const STEP_PAGE: usize = 64;

/// The latest steps that fit `MAX_TELEMETRY_RECORDS` and `MAX_TELEMETRY_BYTES`, oldest first,
/// and whether older ones were left out: the journal is read back from its end a page at a
/// time, and reading stops at the budget.
fn latest_steps(store: &dyn Store, run: &str) -> Result<(Vec<Value>, bool), String> {
    let mut newest_first = Vec::new();
    let mut bytes = 0usize;
    let mut before = u64::MAX;
    loop {
        let page = store
            .journal_before(run, before, STEP_PAGE)
            .map_err(|error| error.to_string())?;
        for entry in page.iter().rev() {
            let step = step_json(entry);
            bytes = bytes.saturating_add(step.to_string().len());
            if newest_first.len() == MAX_TELEMETRY_RECORDS || bytes > MAX_TELEMETRY_BYTES {
                newest_first.reverse();
                return Ok((newest_first, true));
            }
            newest_first.push(step);
        }
        match page.first() {
            Some(oldest) if page.len() == STEP_PAGE => before = oldest.sequence,
            _ => break,
        }
    }
    newest_first.reverse();
    Ok((newest_first, false))
}

/// One journal step as `status` shows its last events, with what its actions did.
fn step_json(entry: &JournalEntry) -> Value {
    json!({
        "step": entry.sequence,
        "at": crate::base::clock::format_rfc3339(entry.unix_milliseconds),
        "event": entry.event.as_ref().map(|event| json!({"name": event.name, "data": event.data})),
        "transitions": entry.transitions,
        "actions": entry.actions,
    })
}

/// The latest `records` that fit `MAX_TELEMETRY_RECORDS` and `MAX_TELEMETRY_BYTES`, oldest
/// first, and whether any was left out.
fn latest_within_budget(records: Vec<Value>) -> (Vec<Value>, bool) {
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    let total = records.len();
    for record in records.into_iter().rev() {
        bytes = bytes.saturating_add(record.to_string().len());
        if kept.len() == MAX_TELEMETRY_RECORDS || bytes > MAX_TELEMETRY_BYTES {
            break;
        }
        kept.push(record);
    }
    kept.reverse();
    let truncated = kept.len() < total;
    (kept, truncated)
}

/// The entries in the last `MAX_TELEMETRY_BYTES` of a telemetry file, and whether it holds
/// more before them; `None` when there is no file. A line that is not JSON is skipped, as
/// `logs` skips it.
fn file_tail(file: &Path) -> std::io::Result<Option<(Vec<Value>, bool)>> {
    let mut opened = match std::fs::File::open(file) {
        Ok(opened) => opened,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let length = opened.metadata()?.len();
    let start = length.saturating_sub(MAX_TELEMETRY_BYTES as u64);
    opened.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    opened
        .take(MAX_TELEMETRY_BYTES as u64)
        .read_to_end(&mut bytes)?;
    let mut lines = bytes.split(|byte| *byte == b'\n');
    // Read from the middle of the file, the first line is the end of one cut short.
    if start > 0 {
        lines.next();
    }
    let entries = lines
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    Ok(Some((entries, start > 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_records_within_the_budget_are_kept_oldest_first() {
        let records: Vec<Value> = (0..MAX_TELEMETRY_RECORDS + 3)
            .map(|index| json!(index))
            .collect();
        let (kept, truncated) = latest_within_budget(records);
        assert!(truncated);
        assert_eq!(kept.len(), MAX_TELEMETRY_RECORDS);
        assert_eq!(kept[0], json!(3));
        let large = "x".repeat(MAX_TELEMETRY_BYTES / 2);
        let (kept, truncated) = latest_within_budget(vec![json!(1), json!(large), json!(large)]);
        assert!(truncated);
        assert_eq!(kept.len(), 1);
        let (kept, truncated) = latest_within_budget(vec![json!(1), json!(2)]);
        assert_eq!((kept, truncated), (vec![json!(1), json!(2)], false));
    }

    #[test]
    fn a_long_file_is_read_from_its_last_bytes_without_a_cut_line() {
        let directory =
            std::env::temp_dir().join(format!("protocol-run-mcp-telemetry-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let file = directory.join("events.jsonl");
        let line = json!({"kind": "log", "message": "m".repeat(1000)}).to_string();
        let text = format!("{line}\n").repeat(2 * MAX_TELEMETRY_BYTES / line.len());
        std::fs::write(&file, text).unwrap();
        let (entries, cut) = file_tail(&file).unwrap().unwrap();
        assert!(cut);
        assert!(!entries.is_empty());
        assert!(entries.iter().all(|entry| entry["kind"] == "log"));
        assert!(file_tail(&directory.join("none.jsonl")).unwrap().is_none());
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
