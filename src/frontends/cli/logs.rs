//! `protocol-run logs` and `protocol-run stats`: queries over runs' telemetry.

use clap::Args;

use super::exit_code;
use super::run_selection::{Latest, RunSelection, StateDirectory, choose_run};
use crate::runtime::statistics::Statistics;
use crate::runtime::telemetry::{
    LogFilter, entry_level, entry_tags, filter_logs, is_failed_effect, read_run, runs_directory,
};
use crate::store::run_filter::RunFilter;

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
    /// Sum every recorded run of this protocol (its `id`, file name without `.yaml`, or path)
    /// whose telemetry is kept, instead of one run.
    #[arg(long, value_name = "ID", conflicts_with_all = ["run_id", "run"])]
    protocol: Option<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// One run's telemetry entries; a malformed line is reported and skipped.
fn read(state: &StateDirectory, run: &str) -> Result<Vec<serde_json::Value>, u8> {
    let runs = runs_directory(&state.path);
    match read_run(&runs, run) {
        Ok((entries, malformed)) => {
            for line in malformed {
                eprintln!("warning: {run} events.jsonl line {line} is not JSON; skipped");
            }
            Ok(entries)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if is_recorded(state, run) {
                eprintln!(
                    "error: run {run} has no telemetry in {}: it stopped before its first step, \
                     or was pruned (only the last runs keep theirs, `run --keep-runs N`)",
                    runs.display()
                );
            } else {
                eprintln!(
                    "error: no run `{run}` in {}; `protocol-run runs` lists them",
                    state.path.display()
                );
            }
            Err(exit_code::NO_INPUT_FILE)
        }
        Err(error) => {
            eprintln!("error: cannot read run {run}'s telemetry: {error}");
            Err(exit_code::IO)
        }
    }
}

/// Whether the store records the run (a run without telemetry may still be there).
fn is_recorded(state: &StateDirectory, run: &str) -> bool {
    state.store.may_hold_runs(&state.path)
        && state
            .store
            .open(&state.path)
            .ok()
            .flatten()
            .and_then(|store| store.run_summary(run).ok().flatten())
            .is_some()
}

pub fn logs(arguments: &LogsArguments) -> u8 {
    let state = &arguments.state;
    let entries = match choose_run(state, &arguments.run, Latest::Any, !arguments.json)
        .and_then(|run| read(state, &run))
    {
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
    let mut statistics = Statistics::default();
    let heading = match &arguments.protocol {
        Some(protocol) => match add_protocol_runs(state, protocol, &mut statistics) {
            Ok(count) => format!("protocol {protocol}: {count} runs"),
            Err(code) => return code,
        },
        None => {
            let run = match choose_run(state, &arguments.run, Latest::Any, !arguments.json) {
                Ok(run) => run,
                Err(code) => return code,
            };
            match read(state, &run) {
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

/// Adds every recorded run of `protocol` that still has telemetry; the count added.
fn add_protocol_runs(
    state: &StateDirectory,
    protocol: &str,
    statistics: &mut Statistics,
) -> Result<usize, u8> {
    let store = super::runs::open(state)?;
    let filter = RunFilter {
        protocol: Some(protocol.to_string()),
        ..RunFilter::default()
    };
    let runs = filter.runs(&*store).map_err(|error| {
        eprintln!("error: {error}");
        exit_code::IO
    })?;
    let telemetry = runs_directory(&state.path);
    let mut added = 0;
    // Oldest first, so that the sums grow as the runs happened.
    for run in runs.iter().rev() {
        // Telemetry is pruned to the last runs (`--keep-runs`); the store keeps every run.
        if !telemetry.join(&run.id).join("events.jsonl").is_file() {
            continue;
        }
        statistics.add_run(&read(state, &run.id)?);
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
