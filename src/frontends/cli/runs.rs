//! `runs`: the runs the store knows, live or finished, filtered, one line each.

use clap::Args;

use super::exit_code;
use super::run_selection::StateDirectory;
use crate::base::clock::format_rfc3339;
use crate::store::run_filter::{RunFilter, ShownStatus};
use crate::store::{RunStatus, RunSummary, Store};

/// `protocol-run runs`: the recorded runs, filtered.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RunsArguments {
    #[command(subcommand)]
    action: Option<RunsAction>,
    /// Only runs of this protocol: its `id`, its file name without `.yaml`, or its path.
    #[arg(long, value_name = "ID")]
    protocol: Option<String>,
    /// Only runs in this state (`failed`: finished with a non-zero exit code, or by an error).
    #[arg(long, value_enum, value_name = "STATUS")]
    status: Option<ShownStatus>,
    /// Only runs started in the last DURATION (`2h`, `1d`) or since a TIMESTAMP
    /// (`2026-01-01T09:00:00Z`).
    #[arg(long, value_name = "DURATION|TIMESTAMP")]
    since: Option<String>,
    /// One JSON object per run, one per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// What `runs` does besides listing.
#[derive(Debug, clap::Subcommand)]
pub enum RunsAction {
    /// Delete the runs that ended before a time (finished ones; stopped ones with `--status
    /// stopped`) with their journal, states, children and telemetry. A running run is never
    /// deleted.
    Prune(PruneArguments),
}

/// `protocol-run runs prune --older-than DURATION`.
#[derive(Debug, Args)]
pub struct PruneArguments {
    /// Delete runs that ended more than DURATION ago (`30d`, `12h`) or before a TIMESTAMP
    /// (`2026-01-01T00:00:00Z`).
    #[arg(long, value_name = "DURATION|TIMESTAMP")]
    older_than: String,
    /// Which ended runs: `finished` (the default; failed ones are finished too) or `stopped`
    /// (resumable: pruning one gives up its resume); repeat for both.
    #[arg(long = "status", value_enum, value_name = "STATUS")]
    statuses: Vec<PrunedStatus>,
    /// One JSON object: `{"pruned": N, "before": TIMESTAMP}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// The statuses `runs prune` deletes runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrunedStatus {
    Finished,
    Stopped,
}

/// `protocol-run runs prune`: deletes, then says how many.
fn prune(arguments: &PruneArguments) -> u8 {
    let before = match parse_since(&arguments.older_than) {
        Ok(before) => before,
        Err(message) => {
            eprintln!("error: --older-than: {message}");
            return exit_code::USAGE;
        }
    };
    let statuses: Vec<RunStatus> = match arguments.statuses.as_slice() {
        [] => vec![RunStatus::Finished],
        chosen => chosen
            .iter()
            .map(|status| match status {
                PrunedStatus::Finished => RunStatus::Finished,
                PrunedStatus::Stopped => RunStatus::Stopped,
            })
            .collect(),
    };
    let mut store = match open(&arguments.state) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let pruned = match crate::runtime::runs::retention::prune(
        &mut *store,
        &arguments.state.path,
        before,
        &statuses,
    ) {
        Ok(pruned) => pruned,
        Err(error) => {
            eprintln!("error: {error}");
            return exit_code::IO;
        }
    };
    for left in &pruned.telemetry_left {
        eprintln!("warning: the telemetry of a pruned run was left: {left}");
    }
    if arguments.json {
        println!(
            "{}",
            serde_json::json!({"pruned": pruned.runs, "before": format_rfc3339(before)})
        );
    } else {
        println!(
            "pruned {} run(s) that ended before {} from {}",
            pruned.runs,
            format_rfc3339(before),
            store.location()
        );
    }
    if pruned.telemetry_left.is_empty() {
        0
    } else {
        exit_code::IO
    }
}

/// `protocol-run runs`: one line per run, newest first.
pub fn runs(arguments: &RunsArguments) -> u8 {
    if let Some(RunsAction::Prune(prune_arguments)) = &arguments.action {
        return prune(prune_arguments);
    }
    let since = match arguments.since.as_deref().map(parse_since).transpose() {
        Ok(since) => since,
        Err(message) => {
            eprintln!("error: --since: {message}");
            return exit_code::USAGE;
        }
    };
    let store = match open(&arguments.state) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let filter = RunFilter {
        protocol: arguments.protocol.clone(),
        status: arguments.status,
        since_unix_milliseconds: since,
    };
    let runs = match filter.runs(&*store) {
        Ok(runs) => runs,
        Err(error) => {
            eprintln!("error: {error}");
            return exit_code::IO;
        }
    };
    if runs.is_empty() && !arguments.json {
        println!("no runs in {}", store.location());
    }
    for run in &runs {
        let status = ShownStatus::of(run).as_str();
        if arguments.json {
            println!("{}", run_json(run, status));
            continue;
        }
        println!(
            "{}  {:<8}  {}  step {}  {}{}{}",
            run.id,
            status,
            format_rfc3339(run.started_unix_milliseconds),
            run.last_sequence
                .map_or_else(|| "-".to_string(), |step| step.to_string()),
            run.protocol_path,
            run.forked_from
                .as_ref()
                .map(|origin| format!("  (fork of {} at step {})", origin.run, origin.step))
                .unwrap_or_default(),
            redriven(run.redrives)
        );
    }
    0
}

fn run_json(run: &RunSummary, status: &str) -> serde_json::Value {
    serde_json::json!({
        "run": run.id,
        "status": status,
        "started": format_rfc3339(run.started_unix_milliseconds),
        "step": run.last_sequence,
        "protocol": run.protocol_path,
        "exit_code": run.finish.as_ref().map(|finish| finish.exit_code),
        "parent": run.parent,
        "forked_from": run.forked_from,
        "redrives": run.redrives,
    })
}

/// `  (redriven 2 times)`, or nothing for a run never redriven.
fn redriven(redrives: u64) -> String {
    match redrives {
        0 => String::new(),
        1 => "  (redriven once)".to_string(),
        count => format!("  (redriven {count} times)"),
    }
}

/// `--since`: a duration back from now, or an RFC 3339 timestamp; Unix milliseconds.
fn parse_since(text: &str) -> Result<u64, String> {
    if text
        .trim_start()
        .starts_with(|first: char| first.is_ascii_digit())
        && let Ok(duration) = crate::base::time::parse_duration(text)
        && let Ok(milliseconds) = u64::try_from(duration.num_milliseconds())
    {
        return Ok(crate::base::clock::unix_milliseconds_now().saturating_sub(milliseconds));
    }
    crate::base::time::parse_timestamp(text)
        .ok()
        .and_then(|timestamp| crate::base::time::unix_milliseconds(&timestamp))
        .ok_or_else(|| {
            format!(
                "`{text}` is neither a duration such as `2h` or `1d` nor a timestamp such as \
                 `2026-01-01T09:00:00Z`"
            )
        })
}

/// The store of recorded runs, for a command that reads them: none yet is said so (reading
/// makes no new state.db).
pub(super) fn open(state: &StateDirectory) -> Result<Box<dyn Store>, u8> {
    if !state.store.may_hold_runs(&state.path) {
        eprintln!(
            "error: no runs recorded in {} (no state.db); runs are recorded as they run",
            state.path.display()
        );
        return Err(exit_code::NO_INPUT_FILE);
    }
    state.open_store()
}
