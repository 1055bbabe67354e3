//! `test --generate` and `test --explore`: scenarios found by search, invariants checked at random.

use super::exit_code;
use crate::base::model::scenario::ScenarioFile;
use crate::runtime::run::algorithm::Limits;
use crate::tooling::scenario::explore::explore;
use crate::tooling::scenario::generate::{Bounds, generate};
use crate::tooling::scenario::probe::Target;
use crate::tooling::scenario::runner::run_file_in_scratch;
use std::path::{Path, PathBuf};

/// The flags of `test` that search instead of running written scenarios.
#[derive(Debug, Clone, clap::Args)]
pub struct SearchOptions {
    /// Write a scenario file for PROTOCOL whose scenarios together take every transition the
    /// search reaches, and name those it could not reach and why.
    #[arg(long, value_name = "PROTOCOL", conflicts_with = "explore")]
    pub generate: Option<PathBuf>,
    /// Where --generate writes; NAME.generated.scenario.yaml beside the protocol by default.
    #[arg(long, value_name = "PATH", requires = "generate")]
    pub out: Option<PathBuf>,
    /// Drive N random event sequences through each protocol given, or each protocol of a
    /// directory given (virtual time, mocks), and fail on a broken invariant: a loop, an error
    /// event nothing handles, a panic.
    #[arg(long, value_name = "N")]
    pub explore: Option<usize>,
    /// The seed of --explore's sequences, to replay a run (printed on every run).
    #[arg(long, requires = "explore")]
    pub seed: Option<u64>,
    /// --generate stops after exploring this many distinct configurations (with context).
    #[arg(long, value_name = "N", default_value_t = Bounds::default().max_configurations)]
    pub max_configurations: usize,
    /// --generate stops searching after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = Bounds::default().max_time.as_secs())]
    pub max_seconds: u64,
}

fn compiled(path: &Path) -> Result<Target, u8> {
    Target::load(path).map_err(|error| {
        eprintln!("{error}");
        if path.exists() {
            exit_code::INVALID
        } else {
            exit_code::NO_INPUT_FILE
        }
    })
}

/// `test --generate PROTOCOL`: searches, writes the scenario file, and runs it as `test` would.
pub fn generate_file(protocol: &Path, options: &SearchOptions, limits: Limits) -> u8 {
    let target = match compiled(protocol) {
        Ok(target) => target,
        Err(code) => return code,
    };
    let bounds = Bounds {
        max_configurations: options.max_configurations,
        max_time: std::time::Duration::from_secs(options.max_seconds),
        ..Bounds::default()
    };
    let generated = generate(&target, bounds, limits);
    let out = options.out.clone().unwrap_or_else(|| default_out(protocol));
    let file = ScenarioFile {
        protocol: protocol_reference(protocol, &out),
        scenarios: generated.scenarios.clone(),
    };
    let text = match scenario_yaml(&file, &out) {
        Ok(text) => text,
        Err(code) => return code,
    };
    if let Err(error) = crate::base::files::write_atomically(&out, text.as_bytes()) {
        eprintln!("error: cannot write {}: {error}", out.display());
        return exit_code::IO;
    }
    println!(
        "wrote {} scenarios to {}: {}/{} transitions taken; {} configurations explored in {:.1}s{}",
        generated.scenarios.len(),
        out.display(),
        generated.covered,
        generated.total,
        generated.configurations,
        generated.elapsed.as_secs_f64(),
        generated
            .stopped_by
            .as_ref()
            .map(|bound| format!(" (stopped by {bound})"))
            .unwrap_or_default()
    );
    for unreached in &generated.unreached {
        println!(
            "    not taken: {}: {}",
            unreached.transition, unreached.reason
        );
    }
    // The file must pass as written: run it as `test` would, with every effect mocked.
    let report = run_file_in_scratch(
        &out,
        &crate::effects::capabilities::Capabilities::unrestricted(),
        limits,
    );
    let failed: Vec<String> = report
        .error
        .iter()
        .cloned()
        .chain(
            report
                .results
                .iter()
                .filter(|result| !result.failures.is_empty())
                .map(|result| format!("{}: {}", result.name, result.failures.join("; "))),
        )
        .collect();
    if failed.is_empty() {
        println!("the generated scenarios pass");
        0
    } else {
        for failure in failed {
            println!("FAILED {failure}");
        }
        1
    }
}

/// `NAME.yaml` → `NAME.generated.scenario.yaml`, beside it.
fn default_out(protocol: &Path) -> PathBuf {
    let stem = protocol
        .file_stem()
        .map(|stem| stem.to_string_lossy().to_string())
        .unwrap_or_else(|| "protocol".into());
    protocol.with_file_name(format!("{stem}.generated.scenario.yaml"))
}

/// The scenario file names its protocol relative to itself; absolute when they are apart.
fn protocol_reference(protocol: &Path, out: &Path) -> String {
    let directory = |path: &Path| {
        path.parent()
            .map(|parent| std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf()))
    };
    match protocol.file_name() {
        Some(name) if directory(protocol) == directory(out) => name.to_string_lossy().to_string(),
        _ => std::path::absolute(protocol)
            .unwrap_or_else(|_| protocol.to_path_buf())
            .display()
            .to_string(),
    }
}

/// Written by the project's YAML writer, with a scenario schema modeline that resolves from
/// where `out` goes (as `new` writes it).
fn scenario_yaml(file: &ScenarioFile, out: &Path) -> Result<String, u8> {
    let value = serde_json::to_value(file).unwrap_or_default();
    let text = crate::tooling::import::yaml_writer::to_yaml(&value);
    let directory = match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let schemas = super::schema::schemas_seen_from(directory)?;
    let modeline = format!("# yaml-language-server: $schema={schemas}/scenario.schema.json");
    Ok(match text.split_once('\n') {
        Some((_, rest)) => format!("{modeline}\n{rest}"),
        None => text,
    })
}

/// `test --explore N PATH...`: each protocol (a directory's too) in turn; the first broken
/// invariant fails it.
pub fn explore_files(paths: &[PathBuf], runs: usize, seed: Option<u64>, limits: Limits) -> u8 {
    if paths.is_empty() {
        eprintln!(
            "error: --explore needs the protocol files to explore, e.g. `test --explore 100 protocols/ittw.yaml`"
        );
        return exit_code::USAGE;
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    println!("exploring with --seed {seed}");
    let mut code = 0;
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            match crate::pipeline::load::protocol_files(path) {
                Ok(found) => files.extend(found),
                Err(message) => {
                    eprintln!("error: {}: {message}", path.display());
                    code = exit_code::USAGE;
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    for path in &files {
        // `protocols/*.yaml` names scenario files and libraries too: nothing to explore there.
        if crate::tooling::scenario::check::is_scenario(path)
            || crate::pipeline::load::is_library_file(path)
        {
            println!("skipped {}: not a protocol", path.display());
            continue;
        }
        let target = match compiled(path) {
            Ok(target) => target,
            Err(failure) => {
                code = failure;
                continue;
            }
        };
        match explore(&target, runs, seed, limits) {
            None => println!("ok     {}: {runs} random runs", path.display()),
            Some(finding) => {
                code = 1;
                println!(
                    "FAILED {}: run {} of --seed {seed}: {}",
                    path.display(),
                    finding.run,
                    finding.problem
                );
                print!("{}", finding_file(path, &finding.scenario));
            }
        }
    }
    code
}

/// A whole scenario file that shows a finding, to save beside the protocol: `protocol-run test`
/// on it fails as the exploring run did (its steps stop the run, or its `expect` fails).
fn finding_file(protocol: &Path, scenario: &crate::base::model::scenario::Scenario) -> String {
    let name = protocol
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = protocol
        .file_stem()
        .map(|stem| stem.to_string_lossy().to_string())
        .unwrap_or_default();
    let file = ScenarioFile {
        protocol: name.clone(),
        scenarios: vec![scenario.clone()],
    };
    let value = serde_json::to_value(&file).unwrap_or_default();
    let text = crate::tooling::import::yaml_writer::to_yaml(&value);
    // The writer's first line is the protocol schema's modeline: not this file's.
    let text = text
        .split_once('\n')
        .map_or(text.as_str(), |(_, rest)| rest);
    format!(
        "# A scenario file that shows it: save it beside {name} (as {stem}.explore.scenario.yaml);\n\
         # `protocol-run test` on it fails the same way until the protocol is fixed.\n{text}"
    )
}
