//! `protocol-run replay [RUN_ID…] --against FILE`: replay recorded runs against a new version of their protocol and say, run by run, whether it would do the same and where it would not.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::exit_code;
use super::run_selection::StateDirectory;
use crate::runtime::runs::replay::{self, Verdict, Version};
use crate::store::{RunCursor, Store};

/// The exit code when a run diverges: the check failed, not the command.
const DIVERGED: u8 = 1;

/// Runs read from the store a page at a time.
const PAGE: usize = 200;

#[derive(Debug, Args)]
pub struct ReplayArguments {
    /// The runs to replay (see `protocol-run runs`); without any, every run recorded for the
    /// protocol file at --protocol, or at FILE's own path.
    #[arg(value_name = "RUN_ID")]
    runs: Vec<String>,
    /// The protocol file to replay against: the new version of the runs' protocol.
    #[arg(long, value_name = "FILE")]
    against: PathBuf,
    /// Without RUN_IDs: the runs recorded for the protocol file at PATH (the path they started
    /// with), when FILE is a copy elsewhere.
    #[arg(long = "protocol", value_name = "PATH", conflicts_with = "runs")]
    protocol: Option<PathBuf>,
    /// A secret input of the runs (secret inputs are never stored); repeat for several. A bare
    /// NAME reads the environment variable NAME.
    #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
    secrets: Vec<String>,
    /// `human`: a line per run; `json`: one object per run, one per line.
    #[arg(long, value_enum, default_value = "human")]
    format: ReplayFormat,
    #[command(flatten)]
    state: StateDirectory,
}

/// How `replay` prints what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReplayFormat {
    Human,
    Json,
}

/// Replays the chosen runs, prints each one's result, and exits with what they found.
pub fn replay(arguments: &ReplayArguments) -> u8 {
    match replay_runs(arguments) {
        Ok(code) | Err(code) => code,
    }
}

fn replay_runs(arguments: &ReplayArguments) -> Result<u8, u8> {
    let version = Version::load(&arguments.against).map_err(|error| {
        eprint!("{error}");
        if !matches!(error, crate::pipeline::load::LoadError::Invalid(_)) {
            eprintln!();
        }
        exit_code::of_load_error(&error)
    })?;
    let secrets = secret_inputs(&version, arguments)?;
    let store = arguments.state.open_store()?;
    let runs = chosen_runs(&*store, arguments)?;
    // No flag narrows a replay's grants: each run's recorded narrowing applies, as on resume.
    let operator = super::narrowing::Narrowing::default();
    let (mut clean, mut diverged, mut not_replayable) = (0, 0, 0);
    for run in &runs {
        let verdict =
            replay::replay(&*store, &version, run, &secrets, &operator).map_err(store_error)?;
        match &verdict {
            Verdict::Clean { .. } => clean += 1,
            Verdict::Diverged(_) => diverged += 1,
            Verdict::NotReplayable { .. } => not_replayable += 1,
        }
        match arguments.format {
            ReplayFormat::Json => println!("{}", replay::to_json(run, &verdict)),
            ReplayFormat::Human => print!("{}", human(run, &verdict)),
        }
    }
    if arguments.format == ReplayFormat::Human && runs.len() > 1 {
        println!(
            "{} runs: {clean} replay cleanly, {diverged} diverge, {not_replayable} not replayable",
            runs.len()
        );
    }
    Ok(if diverged > 0 {
        DIVERGED
    } else if not_replayable > 0 {
        exit_code::USAGE
    } else {
        0
    })
}

/// The `--input`s, each a secret input FILE declares (the others are the runs' recorded ones).
fn secret_inputs(
    version: &Version,
    arguments: &ReplayArguments,
) -> Result<Vec<(String, String)>, u8> {
    let declared = version.machine.secret_input_names();
    let mut secrets = Vec::new();
    for text in &arguments.secrets {
        let (name, value) =
            crate::pipeline::compile::inputs::split_assignment(text).map_err(|error| {
                eprintln!("error: --input: {error}");
                exit_code::USAGE
            })?;
        if !declared.contains(&name.as_str()) {
            let secret = if declared.is_empty() {
                "declares no secret input".to_string()
            } else {
                format!("declares the secret inputs {}", declared.join(", "))
            };
            eprintln!(
                "error: --input `{name}`: {} {secret}; a replay takes a run's recorded inputs, \
                 and only its secret ones (never stored) from --input",
                arguments.against.display()
            );
            return Err(exit_code::USAGE);
        }
        secrets.push((name, value));
    }
    Ok(secrets)
}

/// The runs named, each checked to exist; or, with none named, every run recorded for the
/// protocol's path (not children's rows: a child is replayed with its parent), oldest first.
fn chosen_runs(store: &dyn Store, arguments: &ReplayArguments) -> Result<Vec<String>, u8> {
    if !arguments.runs.is_empty() {
        let mut missing = Vec::new();
        for run in &arguments.runs {
            if store.run_summary(run).map_err(store_error)?.is_none() {
                missing.push(format!("`{run}`"));
            }
        }
        if !missing.is_empty() {
            eprintln!(
                "error: no run {} in {}; `protocol-run runs` lists them",
                missing.join(", "),
                store.location()
            );
            return Err(exit_code::NO_INPUT_FILE);
        }
        return Ok(arguments.runs.clone());
    }
    let file = arguments.protocol.as_ref().unwrap_or(&arguments.against);
    // Runs are recorded under the canonical path; a --protocol file gone since is made
    // absolute as it was given.
    let path = match file.canonicalize() {
        Ok(_) => crate::runtime::runs::start::canonical(file),
        Err(_) => std::path::absolute(file)
            .unwrap_or_else(|_| file.clone())
            .display()
            .to_string(),
    };
    let mut runs = Vec::new();
    let mut after: Option<RunCursor> = None;
    loop {
        let page = store
            .runs_of_protocols(&[&path], after.as_ref(), PAGE)
            .map_err(store_error)?;
        let full = page.len() == PAGE;
        after = page.last().map(|last| RunCursor {
            started_unix_milliseconds: last.started_unix_milliseconds,
            id: last.id.clone(),
        });
        runs.extend(
            page.into_iter()
                .filter(|run| run.parent.is_none())
                .map(|run| run.id),
        );
        if !full {
            break;
        }
    }
    if runs.is_empty() {
        eprintln!(
            "error: no run of {path} in {}; name the runs, or give --protocol the path they \
             were recorded with (`protocol-run runs` lists them)",
            store.location()
        );
        return Err(exit_code::NO_INPUT_FILE);
    }
    runs.reverse();
    Ok(runs)
}

/// A run's result as a person reads it: one line, and for a divergence the place in the new
/// version it concerns, shown as diagnostics show a place.
fn human(run: &str, verdict: &Verdict) -> String {
    match verdict {
        Verdict::Clean { steps } => format!(
            "run {run}: replays cleanly ({steps} step{})\n",
            if *steps == 1 { "" } else { "s" }
        ),
        Verdict::NotReplayable { reason } => format!("run {run}: not replayable: {reason}\n"),
        Verdict::Diverged(divergence) => {
            let event = match &divergence.event {
                Some(event) => format!("event `{event}`"),
                None if divergence.step == 0 => "the start".to_string(),
                None => "no event".to_string(),
            };
            let mut text = format!(
                "run {run}: diverges at step {} ({event}): {}\n",
                divergence.step, divergence.message
            );
            if let Some((location, label)) = &divergence.location {
                let shown = crate::base::diagnostic::Diagnostic::error(String::new())
                    .at(location.clone())
                    .with_label(label.clone())
                    .to_string();
                // Its heading line is the run's line above.
                text.extend(shown.lines().skip(1).map(|line| format!("{line}\n")));
            }
            text
        }
    }
}

fn store_error(error: crate::store::StoreError) -> u8 {
    eprintln!("error: {error}");
    exit_code::IO
}
