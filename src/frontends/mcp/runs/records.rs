//! What the store says of runs no fleet of this server drives: summaries, listings, why a run is not live, fresh run names.

use serde_json::{Value, json};

use crate::store::RunCursor;
use crate::store::{RunSummary, Store};

/// The most runs one `list_runs` answers; `next` names where the following page starts.
pub const MAX_RUNS_PER_PAGE: usize = 1_000;

/// A recorded run's summary: its status, the directives its journal holds and, once finished,
/// how. A run of a protocol this server does not serve is refused (`not_served`).
pub fn summary(store: &dyn Store, served: &[&str], run: &str) -> Result<Value, String> {
    let record = served_summary(store, served, run)?
        .ok_or_else(|| format!("no run `{run}`; list_runs lists them"))?;
    let (directives, dropped_directives) = recorded_directives(store, run)?;
    let mut summary = json!({
        "run": run,
        "status": recorded_status(record.status.as_str(), record.finish.as_ref()),
        "live": false,
        "directives": directives,
    });
    if dropped_directives > 0 {
        summary["dropped_directives"] = dropped_directives.into();
    }
    if let Some(finish) = &record.finish {
        // A failed run's error where a live report has it, beside an output it never had.
        summary["finished"] = match finish.unhandled_error() {
            Some(error) => json!({
                "state": finish.final_state,
                "exit_code": finish.exit_code,
                "output": null,
                "error": error,
            }),
            None => json!({
                "state": finish.final_state,
                "exit_code": finish.exit_code,
                "output": finish.output,
            }),
        };
    }
    Ok(summary)
}

/// A recorded run's status as a report says it: the store's, but `failed` for a run an
/// unhandled error ended (as a live report says).
fn recorded_status(stored: &'static str, finish: Option<&crate::store::Finish>) -> &'static str {
    match finish {
        Some(finish) if finish.unhandled_error().is_some() => "failed",
        _ => stored,
    }
}

/// A recorded run's summary (without its protocol text and inputs), or `None` when there is
/// none; a run of a protocol not among `served` (canonical paths) is refused: this server
/// shows only the runs of what it serves.
pub fn served_summary(
    store: &dyn Store,
    served: &[&str],
    run: &str,
) -> Result<Option<RunSummary>, String> {
    let summary = store.run_summary(run).map_err(|error| error.to_string())?;
    match summary {
        Some(summary) if !served.contains(&summary.protocol_path.as_str()) => {
            Err(not_served(run, &summary.protocol_path))
        }
        summary => Ok(summary),
    }
}

/// Why a run of another protocol is not shown here, and what shows it.
pub fn not_served(run: &str, protocol_path: &str) -> String {
    format!(
        "run `{run}` runs {protocol_path}, which this server does not serve; \
         `protocol-run status {run}` reads it"
    )
}

/// Why `run` is not live in this server: unknown, or recorded with its status.
pub fn not_live(store: &dyn Store, run: &str) -> String {
    let recorded = store.run_summary(run).ok().flatten();
    match recorded {
        Some(record) => format!(
            "run `{run}` is {} and not live in this server",
            record.status.as_str()
        ),
        None => format!("no run `{run}`; list_runs lists them"),
    }
}

/// A page of the recorded runs of the protocols at `paths`, newest first, after the run
/// `after` (a previous page's `next`): `{runs, truncated, next?}`, at most `count` runs.
/// `live_status` gives the status of a run this server drives (`cancelled`, which the store
/// records as finished).
pub fn list(
    store: &dyn Store,
    paths: &[&str],
    after: Option<&str>,
    count: usize,
    live_status: impl Fn(&str) -> Option<&'static str>,
) -> Result<Value, String> {
    let cursor = match after {
        Some(after) => {
            let run = served_summary(store, paths, after)?.ok_or_else(|| {
                format!("no run `{after}` to list after; `next` of the previous page names one")
            })?;
            Some(RunCursor {
                started_unix_milliseconds: run.started_unix_milliseconds,
                id: run.id,
            })
        }
        None => None,
    };
    let mut runs = store
        .runs_of_protocols(paths, cursor.as_ref(), count.saturating_add(1))
        .map_err(|error| error.to_string())?;
    let truncated = runs.len() > count;
    runs.truncate(count);
    let rows: Vec<Value> = runs
        .iter()
        .map(|run| {
            json!({
                "run": run.id,
                "status": live_status(&run.id)
                    .unwrap_or_else(|| recorded_status(run.status.as_str(), run.finish.as_ref())),
                "started_unix_milliseconds": run.started_unix_milliseconds,
                "exit_code": run.finish.as_ref().map(|finish| finish.exit_code),
            })
        })
        .collect();
    let mut page = json!({"runs": rows, "truncated": truncated});
    if truncated && let Some(last) = runs.last() {
        page["next"] = last.id.clone().into();
    }
    Ok(page)
}

/// A new instance name for `protocol`, unused in the store and by the runs `live` names (a run
/// started a moment ago has no record yet): `mcp-<unix ms>` with a counter when two start in the
/// same millisecond.
pub fn new_instance_name(store: &dyn Store, protocol: &str, live: impl Fn(&str) -> bool) -> String {
    let base = format!("mcp-{}", crate::base::clock::unix_milliseconds_now());
    (0..)
        .map(|count| {
            if count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            }
        })
        .find(|name| {
            let run = format!("{protocol}:{name}");
            !live(&run) && store.run(&run).is_ok_and(|record| record.is_none())
        })
        .unwrap_or(base)
}

/// How many journal entries one read of a run's directives takes at a time.
const JOURNAL_PAGE: usize = 256;

/// The directives a run's journal holds, read back from its end: the latest
/// `MAX_KEPT_DIRECTIVES` in the order emitted, and how many older ones were left out (counted
/// by the store: the entries before the kept ones are not read). A resumed run's report starts
/// from them.
pub fn recorded_directives(store: &dyn Store, run: &str) -> Result<(Vec<Value>, usize), String> {
    let mut newest_first = Vec::new();
    let mut dropped = 0;
    let mut before = u64::MAX;
    loop {
        let page = store
            .journal_before(run, before, JOURNAL_PAGE)
            .map_err(|error| error.to_string())?;
        for entry in page.iter().rev() {
            let Some(actions) = entry.actions.as_array() else {
                continue;
            };
            for directive in actions
                .iter()
                .rev()
                .filter_map(|action| action.get("directive"))
            {
                if newest_first.len() < crate::frontends::mcp::runs::report::MAX_KEPT_DIRECTIVES {
                    newest_first.push(directive.clone());
                } else {
                    dropped += 1;
                }
            }
            if newest_first.len() == crate::frontends::mcp::runs::report::MAX_KEPT_DIRECTIVES {
                // Full: the older entries are only counted.
                let older = store
                    .directives_before(run, entry.sequence)
                    .map_err(|error| error.to_string())?;
                dropped += usize::try_from(older).unwrap_or(usize::MAX);
                newest_first.reverse();
                return Ok((newest_first, dropped));
            }
        }
        match page.first() {
            Some(oldest) if page.len() == JOURNAL_PAGE => before = oldest.sequence,
            _ => break,
        }
    }
    newest_first.reverse();
    Ok((newest_first, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{JournalEntry, NewRun, RunOrigin, Write};

    /// A journal longer than a page with more directives than a report keeps: the latest are
    /// read back in order, the older ones counted.
    #[test]
    fn recorded_directives_are_the_latest_in_order_with_the_older_counted() {
        let directory = std::env::temp_dir().join(format!(
            "protocol-run-recorded-directives-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        let mut store = crate::store::SqliteStore::open(&directory).unwrap();
        let mut writes = vec![Write::CreateRun(NewRun {
            id: "p:mcp-1".into(),
            protocol_path: "/p.yaml".into(),
            protocol_hash: "h".into(),
            protocol_text: None,
            read_texts: Vec::new(),
            inputs: json!({}),
            started_unix_milliseconds: 1,
            grants: None,
            origin: RunOrigin::Mcp,
            holder: None,
            forked_from: None,
        })];
        let snapshot: crate::base::snapshot::Snapshot = serde_json::from_value(json!({
            "format": 1, "protocol": "p", "configuration": ["a"], "context": {}, "running": true
        }))
        .unwrap();
        // Step n emits n % 3 directives (none, one, or two), among other actions.
        let mut emitted = Vec::new();
        for sequence in 0..1_200_u64 {
            let mut actions = vec![json!({"log": "tick", "tags": []})];
            for index in 0..sequence % 3 {
                let directive = json!({"directive": "d", "step": sequence, "index": index});
                actions.push(json!({ "directive": directive }));
                emitted.push(directive);
            }
            writes.push(Write::Step {
                run: "p:mcp-1".into(),
                entry: JournalEntry {
                    sequence,
                    event: None,
                    transitions: Vec::new(),
                    actions: Value::Array(actions),
                    unix_milliseconds: sequence,
                    children: Vec::new(),
                },
                snapshot: Box::new(snapshot.clone()),
                finish: None,
                child_states: Vec::new(),
            });
        }
        store.commit_batch(&writes).unwrap();
        let (kept, dropped) = recorded_directives(&store, "p:mcp-1").unwrap();
        let _ = std::fs::remove_dir_all(&directory);
        assert_eq!(emitted.len(), 1_200);
        assert_eq!(dropped, 200);
        assert_eq!(kept, emitted[200..]);
    }
}
