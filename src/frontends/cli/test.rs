//! `protocol-run test [PATH...]`: runs scenario files, reports each failure with the trace.

use std::path::PathBuf;

use super::generate::SearchOptions;
use super::narrowing::Narrowing;
use crate::runtime::run::algorithm::Limits;
use crate::tooling::scenario::coverage::label_of;
use crate::tooling::scenario::runner::{
    FileReport, find_scenario_files, load_scenario_file, run_file_in_scratch,
};

/// Runs the scenarios; their real effects get what `run` would grant under `narrowing`, their
/// steps the limits `run` would set.
pub fn test(
    paths: &[PathBuf],
    coverage: bool,
    narrowing: &Narrowing,
    limits: Limits,
    search: &SearchOptions,
) -> u8 {
    if let Some(protocol) = &search.generate {
        return super::generate::generate_file(protocol, search, limits);
    }
    if let Some(runs) = search.explore {
        return super::generate::explore_files(paths, runs, search.seed, limits);
    }
    let limit = match narrowing.limit(None) {
        Ok(limit) => limit,
        Err(refusal) => return refusal.report(),
    };
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    };
    let files = match find_scenario_files(&paths) {
        Ok(files) => files,
        Err(message) => {
            eprintln!("{message}");
            return super::exit_code::NO_INPUT_FILE;
        }
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut reports = Vec::with_capacity(files.len());
    for file in &files {
        // What `validate` refuses in a scenario file (a state or mock id the protocol does not
        // have, a child item mocked) is refused here too, located, before anything runs.
        if let Err(diagnostics) = crate::tooling::scenario::check::check_scenario_file(file) {
            eprint!("{}", crate::base::diagnostic::render_all(&diagnostics));
            println!(
                "FAILED {}: the scenario file has errors (above)",
                file.display()
            );
            failed += 1;
            continue;
        }
        let report = run_file_in_scratch(file, &limit, limits);
        let (file_passed, file_failed) = print_report(&report);
        passed += file_passed;
        failed += file_failed;
        reports.push(report);
    }
    if coverage {
        print_coverage(&reports);
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 || files.is_empty() { 1 } else { 0 }
}

/// Prints one file's results; returns (passed, failed).
fn print_report(report: &FileReport) -> (usize, usize) {
    let path = report.path.display();
    if let Some(error) = &report.error {
        println!("FAILED {path}: the scenario file cannot run");
        for line in error.lines() {
            println!("    {line}");
        }
        return (0, 1);
    }
    let mut counts = (0, 0);
    for result in &report.results {
        if result.failures.is_empty() {
            println!("ok     {path}: {}", result.name);
            counts.0 += 1;
            continue;
        }
        counts.1 += 1;
        println!("FAILED {path}: {}", result.name);
        for failure in &result.failures {
            for line in failure.lines() {
                println!("    {line}");
            }
        }
        if let Some(directory) = &result.directory {
            println!("    kept its scratch directory: {}", directory.display());
        }
        if !result.trace.is_empty() {
            println!("    trace:");
            for line in &result.trace {
                println!("      {line}");
            }
        }
    }
    counts
}

fn print_coverage(reports: &[FileReport]) {
    // (reached, states, taken, transitions) over every file.
    let mut totals = (0, 0, 0, 0);
    for report in reports {
        let Some(coverage) = &report.coverage else {
            continue;
        };
        let missed_states = coverage.missed_states();
        let missed_transitions = coverage.missed_transitions();
        totals.0 += coverage.states.len() - missed_states.len();
        totals.1 += coverage.states.len();
        totals.2 += coverage.transitions.len() - missed_transitions.len();
        totals.3 += coverage.transitions.len();
        println!(
            "coverage of {} (from {}): {}/{} states, {}/{} transitions",
            coverage.protocol,
            report.path.display(),
            coverage.states.len() - missed_states.len(),
            coverage.states.len(),
            coverage.transitions.len() - missed_transitions.len(),
            coverage.transitions.len()
        );
        for state in missed_states {
            println!("    never reached: state {state}");
        }
        // Named as the author wrote them; the pointer when the protocol no longer compiles.
        let machine = load_scenario_file(&report.path)
            .ok()
            .map(|(_, machine)| machine);
        let name = |pointer: &str| match &machine {
            Some(machine) => format!("transition at {pointer}: {}", label_of(machine, pointer)),
            None => format!("transition at {pointer}"),
        };
        for transition in &coverage.transitions {
            if coverage.taken_transitions.contains(transition) {
                println!("    taken:       {}", name(transition));
            }
        }
        for transition in missed_transitions {
            println!("    never taken: {}", name(transition));
        }
    }
    if reports.len() > 1 {
        println!(
            "coverage in total: {}/{} states, {}/{} transitions",
            totals.0, totals.1, totals.2, totals.3
        );
    }
}
