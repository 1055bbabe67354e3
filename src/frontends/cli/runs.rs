//! `runs`: the runs the store knows, live or finished, filtered, one line each.

use clap::Args;

use super::exit_code;
use super::run_selection::StateDirectory;
use crate::base::clock::format_rfc3339;
use crate::store::run_filter::{RunFilter, ShownStatus};
use crate::store::{RunSummary, Store};

/// `protocol-run runs`: the recorded runs, filtered.
#[derive(Debug, Args)]
pub struct RunsArguments {
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

/// `protocol-run runs`: one line per run, newest first.
pub fn runs(arguments: &RunsArguments) -> u8 {
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
            "{}  {:<8}  {}  step {}  {}",
            run.id,
            status,
            format_rfc3339(run.started_unix_milliseconds),
            run.last_sequence
                .map_or_else(|| "-".to_string(), |step| step.to_string()),
            run.protocol_path
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
    })
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
