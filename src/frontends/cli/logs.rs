//! `protocol-run logs` and `protocol-run stats`: queries over runs' telemetry.

use clap::Args;

use super::exit_code;
use super::run_selection::{Latest, RunSelection, StateDirectory, choose_run};
use crate::runtime::statistics::{MAX_RUNS_SUMMED, Statistics};
use crate::runtime::telemetry::{
    LogFilter, entry_level, entry_tags, filter_logs, is_failed_effect, read_run, read_stored,
    runs_directory,
};
use crate::store::run_filter::RunFilter;
use crate::store::{RunOrigin, Store};
use serde_json::Value;

/// `protocol-run logs [RUN_ID]`.
#[derive(Debug, Args)]
pub struct LogsArguments {
    #[command(flatten)]
    run: RunSelection,
    /// Only lines with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Only lines at this level or more severe (trace, debug, info, warn, error).
    #[arg(long)]
    level: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// `protocol-run stats [RUN_ID | --protocol ID]`.
#[derive(Debug, Args)]
pub struct StatsArguments {
    #[command(flatten)]
    run: RunSelection,
    /// Sum the recorded runs of this protocol (its `id`, file name without `.yaml`, or path)
    /// that have telemetry, the newest 1,000 at most, instead of one run.
    #[arg(long, value_name = "ID", conflicts_with_all = ["run_id", "run"])]
    protocol: Option<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// The store `logs` and `stats` read telemetry from, if the state directory has one (an older
/// state directory may hold telemetry alone).
fn open_for_reading(state: &StateDirectory) -> Result<Option<Box<dyn Store>>, u8> {
    if !state.store.may_hold_runs(&state.path) {
        return Ok(None);
    }
    state.open_store().map(Some)
}

/// One run's telemetry entries: the store's, which hold the whole run whichever hosts drove
/// it (`run`, `resume`, `serve`, `mcp`), else this state directory's `events.jsonl` (a run
/// recorded before the store kept telemetry); with `logs_from_journal`, the log lines of a
/// `serve` or `mcp` run recorded before those hosts kept telemetry, from its journal. A
/// malformed line is reported and skipped.
fn read(
    state: &StateDirectory,
    store: Option<&dyn Store>,
    run: &str,
    logs_from_journal: bool,
) -> Result<Vec<Value>, u8> {
    if let Some(store) = store {
        let parts = store.telemetry(run).map_err(|error| {
            eprintln!("error: {error}");
            exit_code::IO
        })?;
        if let Some(read) = read_stored(&parts, run) {
            for line in read.malformed {
                eprintln!(
                    "warning: {run}: line {line} of its stored telemetry is not JSON; skipped"
                );
            }
            return Ok(read.entries);
        }
    }
    let runs = runs_directory(&state.path);
    match read_run(&runs, run) {
        Ok(read) => {
            for line in read.malformed {
                eprintln!("warning: {run} events.jsonl line {line} is not JSON; skipped");
            }
            Ok(read.entries)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let summary = store.and_then(|store| store.run_summary(run).ok().flatten());
            match summary.map(|summary| summary.origin) {
                Some(Some(origin @ (RunOrigin::Serve | RunOrigin::Mcp))) => {
                    if logs_from_journal
                        && let Some(store) = store
                        && let Ok(journal) = store.journal(run)
                    {
                        eprintln!(
                            "note: run {run} was recorded by `{}` before it kept telemetry in \
                             the store: its log lines are read from its journal, each at its \
                             step's time, whichever hosts drove it",
                            origin.as_str()
                        );
                        return Ok(logged_in(&journal));
                    }
                    eprintln!(
                        "error: run {run} was recorded by `{}` before it kept telemetry in the \
                         store (its logs went to the host's stderr); `protocol-run logs {run}` \
                         reads its log lines from its journal, `protocol-run status {run}` shows \
                         its steps",
                        origin.as_str()
                    )
                }
                Some(_) => eprintln!(
                    "error: run {run} has no telemetry: it stopped before its first step, or it \
                     was recorded before the store kept telemetry and its copy in {} was pruned \
                     (only the last runs keep theirs, `run --keep-runs N`)",
                    runs.display()
                ),
                None => eprintln!(
                    "error: no run `{run}` in {}; `protocol-run runs` lists them",
                    state.path.display()
                ),
            }
            Err(exit_code::NO_INPUT_FILE)
        }
        Err(error) => {
            eprintln!("error: cannot read run {run}'s telemetry: {error}");
            Err(exit_code::IO)
        }
    }
}

/// The log lines a journal recorded (each step's `log` actions), as telemetry's `log` entries
/// at their step's time: what `logs` shows of a `serve` or `mcp` run recorded before those
/// hosts kept telemetry in the store.
fn logged_in(journal: &[crate::store::JournalEntry]) -> Vec<Value> {
    let mut entries = Vec::new();
    for step in journal {
        let time = crate::base::clock::format_rfc3339(step.unix_milliseconds);
        for action in step.actions.as_array().into_iter().flatten() {
            let Some(message) = action.get("log") else {
                continue;
            };
            let mut entry = serde_json::json!({
                "kind": "log",
                "time": time,
                "level": action.get("level").cloned().unwrap_or_else(|| "info".into()),
                "message": message,
                "tags": action.get("tags").cloned().unwrap_or_else(|| serde_json::json!([])),
                "step": step.sequence,
            });
            if let Some(from) = action.get("from") {
                entry["from"] = from.clone();
            }
            entries.push(entry);
        }
    }
    entries
}

pub fn logs(arguments: &LogsArguments) -> u8 {
    let state = &arguments.state;
    let entries = match open_for_reading(state).and_then(|store| {
        let run = choose_run(state, &arguments.run, Latest::Any, !arguments.json)?;
        read(state, store.as_deref(), &run, true)
    }) {
        Ok(entries) => entries,
        Err(code) => return code,
    };
    let filter = LogFilter {
        tag: arguments.tag.clone(),
        level: arguments.level.clone(),
    };
    for entry in filter_logs(&entries, &filter) {
        if arguments.json {
            println!("{entry}");
            continue;
        }
        let tags: String = entry_tags(entry)
            .into_iter()
            .map(|tag| format!(" #{tag}"))
            .collect();
        let message = if is_failed_effect(entry) {
            let why = entry["message"].as_str().unwrap_or("failed");
            format!("{} failed: {why}", entry["id"].as_str().unwrap_or("?"))
        } else {
            format!(
                "{}{}",
                crate::runtime::output::from_prefix(entry["from"].as_str().unwrap_or_default()),
                entry["message"].as_str().unwrap_or_default()
            )
        };
        println!(
            "{} {:<5} {message}{tags}",
            entry["time"].as_str().unwrap_or_default(),
            entry_level(entry).to_uppercase(),
        );
        print_stderr_tail(entry["stderr"].as_str().unwrap_or_default(), "    ");
    }
    0
}

pub fn stats(arguments: &StatsArguments) -> u8 {
    let state = &arguments.state;
    let store = match open_for_reading(state) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let mut statistics = Statistics::default();
    let heading = match &arguments.protocol {
        Some(protocol) => {
            match add_protocol_runs(state, store.as_deref(), protocol, &mut statistics) {
                Ok(count) => format!("protocol {protocol}: {count} runs"),
                Err(code) => return code,
            }
        }
        None => {
            let run = match choose_run(state, &arguments.run, Latest::Any, !arguments.json) {
                Ok(run) => run,
                Err(code) => return code,
            };
            match read(state, store.as_deref(), &run, false) {
                Ok(entries) => statistics.add_run(&entries),
                Err(code) => return code,
            }
            format!("run {run}")
        }
    };
    let json = statistics.to_json();
    if arguments.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        );
    } else {
        super::stats_table::print(&heading, &json);
    }
    0
}

/// Adds the newest recorded runs of `protocol` that have telemetry, at most `MAX_RUNS_SUMMED`
/// (said on stderr when there were more); the count added.
fn add_protocol_runs(
    state: &StateDirectory,
    store: Option<&dyn Store>,
    protocol: &str,
    statistics: &mut Statistics,
) -> Result<usize, u8> {
    let Some(store) = store else {
        eprintln!(
            "error: no runs recorded in {} (`protocol-run runs` lists the recorded ones)",
            state.path.display()
        );
        return Err(exit_code::NO_INPUT_FILE);
    };
    let filter = RunFilter {
        protocol: Some(protocol.to_string()),
        ..RunFilter::default()
    };
    let runs = filter.runs(store).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
    let telemetry = runs_directory(&state.path);
    let mut added = 0;
    // Newest first: the sums do not depend on the order the runs are added in.
    for run in &runs {
        if added == MAX_RUNS_SUMMED {
            eprintln!(
                "note: summed the newest {MAX_RUNS_SUMMED} runs of `{protocol}` with telemetry \
                 (at most {MAX_RUNS_SUMMED}); older ones are not summed"
            );
            break;
        }
        // A run recorded before the store kept telemetry has it only in its `events.jsonl`,
        // kept for the last runs (`--keep-runs`).
        let stored = store.telemetry(&run.id).map_err(|error| {
            eprintln!("error: {error}");
            exit_code::IO
        })?;
        let entries = match read_stored(&stored, &run.id) {
            Some(read) => read.entries,
            None if telemetry.join(&run.id).join("events.jsonl").is_file() => {
                read(state, None, &run.id, false)?
            }
            None => continue,
        };
        statistics.add_run(&entries);
        added += 1;
    }
    if added == 0 {
        eprintln!(
            "error: no run of `{protocol}` with telemetry in {} (`protocol-run runs --protocol \
             {protocol}` lists the recorded ones)",
            state.path.display()
        );
        return Err(exit_code::NO_INPUT_FILE);
    }
    Ok(added)
}

/// A failed effect's error output (its tail, as telemetry keeps it), one `stderr |` line per line
/// under the line that reports the failure, `indent` before each; nothing when there is none.
pub(super) fn print_stderr_tail(tail: &str, indent: &str) {
    for line in tail.lines() {
        println!(
            "{indent}stderr | {}",
            crate::base::text::escape_controls(line)
        );
    }
}
