//! `protocol-run logs` and `protocol-run stats`: queries over a run's telemetry.

use std::path::Path;

use super::exit_code;
use crate::telemetry::{LogFilter, filter_logs, read_run, run_ids, runs_directory, statistics};

/// The run to read: the one named, or the latest.
fn choose_run(runs: &Path, run: Option<&str>) -> Result<String, u8> {
    if let Some(run) = run {
        return Ok(run.to_string());
    }
    match run_ids(runs) {
        Ok(ids) => ids.last().cloned().ok_or_else(|| {
            eprintln!("error: no runs in {}", runs.display());
            exit_code::NO_INPUT_FILE
        }),
        Err(error) => {
            eprintln!("error: cannot read {}: {error}", runs.display());
            Err(exit_code::IO)
        }
    }
}

fn read(state_directory: &Path, run: Option<&str>) -> Result<Vec<serde_json::Value>, u8> {
    let runs = runs_directory(state_directory);
    let run = choose_run(&runs, run)?;
    match read_run(&runs, &run) {
        Ok((entries, malformed)) => {
            for line in malformed {
                eprintln!("warning: {run} events.jsonl line {line} is not JSON; skipped");
            }
            Ok(entries)
        }
        Err(error) => {
            eprintln!("error: cannot read run {run}: {error}");
            Err(match error.kind() {
                std::io::ErrorKind::NotFound => exit_code::NO_INPUT_FILE,
                _ => exit_code::IO,
            })
        }
    }
}

pub fn logs(state_directory: &Path, run: Option<&str>, filter: &LogFilter, json: bool) -> u8 {
    let entries = match read(state_directory, run) {
        Ok(entries) => entries,
        Err(code) => return code,
    };
    for entry in filter_logs(&entries, filter) {
        if json {
            println!("{entry}");
            continue;
        }
        let tags: String = entry["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tag| tag.as_str())
            .map(|tag| format!(" #{tag}"))
            .collect();
        println!(
            "{} {:<5} {}{tags}",
            entry["time"].as_str().unwrap_or_default(),
            entry["level"].as_str().unwrap_or_default().to_uppercase(),
            entry["message"].as_str().unwrap_or_default()
        );
    }
    0
}

pub fn stats(state_directory: &Path, run: Option<&str>) -> u8 {
    match read(state_directory, run) {
        Ok(entries) => {
            let text = serde_json::to_string_pretty(&statistics(&entries)).unwrap_or_default();
            println!("{text}");
            0
        }
        Err(code) => code,
    }
}
