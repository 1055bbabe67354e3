//! The command line: parse arguments, call the library, map the result to an exit code.

mod cancel;
mod check;
mod generate;
mod graph;
mod import;
mod inputs_file;
mod limits;
mod logs;
mod mcp;
mod narrowing;
mod replay;
mod run;
mod run_id;
mod run_selection;
mod runs;
mod scaffold;
mod scenario_file;
mod schema;
mod serve;
mod socket;
mod stats_table;
mod status;
mod test;
mod ui;
mod validate;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub use crate::runtime::runs::exit_code;

#[derive(Debug, Parser)]
#[command(
    name = "protocol-run",
    version,
    about = "Run declarative YAML statechart protocols with SCXML semantics",
    after_help = "`protocol-run FILE.yaml ...` is short for `protocol-run run FILE.yaml ...`."
)]
struct Arguments {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a protocol until it reaches a final state, or until events run out and no timer is pending.
    Run(run::RunArguments),
    /// Continue a run from its last committed step (entry actions do not run again).
    Resume(run::ResumeArguments),
    /// Start a new run from the state after a step of another (its context changed with
    /// --context-set), recorded as forked from it, and drive it as a resumed run: effects from
    /// there on run again.
    Fork(run::ForkArguments),
    /// Drive again a run that stopped unfinished, or failed on an unhandled error, under its
    /// own id from its last committed step before the failure: only what failed runs again
    /// (its running effects, a map's failed items, a failed child protocol); the journal
    /// records the redrive.
    Redrive(run::RedriveArguments),
    /// Cancel a run: the process that drives it cancels it (the request waits in the run's
    /// inbox until it takes it), or, when none does, it is recorded cancelled now; its effects
    /// and child protocols are stopped and it finishes with exit code 130.
    Cancel(cancel::CancelArguments),
    /// Replay recorded runs against a new version of their protocol (FILE): each journaled
    /// event offered again in order, no effect run and no real time, and the first step where
    /// the new version would do otherwise reported; exit 1 when a run diverges.
    Replay(replay::ReplayArguments),
    /// Run many instances of one protocol, fed JSON lines `{"instance", "event", "data"}` on
    /// stdin (or a Unix socket); each is recorded and resumed when the host restarts.
    Serve(serve::ServeArguments),
    /// Serve protocols to MCP clients (agents) over stdio or Streamable HTTP: each protocol a
    /// tool that starts a durable run (an MCP task for a client that asks for one);
    /// `send_event`, `get_run` and `list_runs` drive and watch runs.
    Mcp(mcp::McpArguments),
    /// A web inspector over the store: the runs, each run's statechart with its active states,
    /// its steps, its state at any step, its inbox and logs, live; events sent to a waiting run.
    Ui(ui::UiArguments),
    /// Check protocol files and report every problem with its location.
    Validate {
        /// Protocol files; scenario files (`*.scenario.yaml`) and library files
        /// (`*.library.yaml`) are checked as what they are.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run scenario files (or every `*.scenario.yaml` under the directories given; `.` by default).
    Test {
        /// Scenario files, or directories searched for `*.scenario.yaml` (`.` when none).
        paths: Vec<PathBuf>,
        /// Report the states and transitions no scenario reached.
        #[arg(long)]
        coverage: bool,
        /// Real (unmocked) effects run under the same grants as `run`.
        #[command(flatten)]
        narrowing: narrowing::Narrowing,
        #[command(flatten)]
        limits: limits::LimitOptions,
        #[command(flatten)]
        search: generate::SearchOptions,
    },
    /// Scaffold NAME.yaml and NAME.scenario.yaml with schema modelines.
    New {
        /// The protocol's id and file name: letters, digits, `-` and `_`.
        name: String,
        /// Where to write them (created when missing); the modeline points at a schema that
        /// exists from there.
        #[arg(long, default_value = "protocols", value_name = "DIR")]
        directory: PathBuf,
    },
    /// Print shell completions.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Show a run's log lines (the latest run unless RUN_ID is given).
    Logs(logs::LogsArguments),
    /// List the recorded runs, newest first: id, status, start, last step, protocol.
    Runs(runs::RunsArguments),
    /// Show a run (the latest unless RUN_ID is given): protocol, states, context, pending timers,
    /// running effects, last steps with the transitions they took, and how it finished.
    Status(status::StatusArguments),
    /// Retry success rate, attempts to success, outcomes and timeouts per action, time in each
    /// state, tag counts: of one run (the latest unless RUN_ID is given) or of every run of a
    /// protocol (--protocol).
    Stats(logs::StatsArguments),
    /// Lint protocols: unreachable or dead-end states, shadowed transitions, eventless loops,
    /// unused data, unhandled events, suspicious delays, unused blocks and parameters (a library
    /// file: its blocks' unread parameters).
    Check {
        /// Protocol, scenario or library files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Exit with 65 when any warning is found.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Draw a protocol: Mermaid `stateDiagram-v2`, Graphviz DOT, or SVG (laid out here).
    Graph {
        /// The protocol file.
        file: PathBuf,
        /// The drawing's format.
        #[arg(long, value_enum, default_value = "mermaid")]
        format: graph::GraphFormat,
        /// Show entry and exit actions in each state and each transition's actions on its
        /// arrow, by kind and id, with the program an exec runs and the directive an emit
        /// sends (`entry / exec build (cargo)`, `entry / emit ask`).
        #[arg(long)]
        detail: bool,
    },
    /// Convert another format into a protocol, printed as YAML on stdout (or written to --out).
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
    /// A language server over stdio for editors: diagnostics as `validate` and `check` give
    /// them, completion, hover and go to definition (see docs/editor.md).
    Lsp,
    /// Print the protocol JSON Schema (or the scenario one), or write all three to DIR.
    Schema {
        /// Write `protocol.schema.json`, `scenario.schema.json` and `library.schema.json` into DIR.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print the scenario schema instead of the protocol one.
        #[arg(long)]
        scenario: bool,
    },
}

/// Formats `import` reads.
#[derive(Debug, Subcommand)]
enum ImportSource {
    /// An SCXML document.
    Scxml {
        /// The SCXML file.
        file: PathBuf,
        /// Write `<name>.yaml` into DIR, and a `<name>.<invoke id>.yaml` for each child
        /// document its `<invoke>`s run (needed when there are any).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// How log lines are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormatArgument {
    Human,
    Json,
}

/// A reader that goes away (`protocol-run runs | head -1`) ends the process quietly, as it
/// ends `cat` or `grep`, instead of a panic in `println!`. Rust ignores SIGPIPE by default so that
/// a write fails instead; every command but `serve` gets the usual disposition back. `serve`
/// keeps it ignored: a client that hangs up must cost it a failed write, not its life.
fn end_quietly_on_a_closed_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: the default disposition runs no code of ours.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// The command tree clap builds from the arguments, for tests that walk it (every flag has help).
pub fn command() -> clap::Command {
    <Arguments as clap::CommandFactory>::command()
}

/// Runs the CLI with these arguments (the first is the program name); returns the exit code.
pub fn main(arguments: Vec<String>) -> u8 {
    let parsed = match plain_validate(&arguments) {
        Some(files) => Arguments {
            command: Command::Validate { files },
        },
        None => match parse(&with_default_subcommand(arguments)) {
            Ok(parsed) => parsed,
            Err(error) => {
                let _ = error.print();
                return match error.kind() {
                    clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion => 0,
                    _ => exit_code::USAGE,
                };
            }
        },
    };
    if !matches!(
        parsed.command,
        Command::Serve(_) | Command::Mcp(_) | Command::Ui(_)
    ) {
        end_quietly_on_a_closed_pipe();
    }
    let code = match parsed.command {
        Command::Run(run_arguments) => run::run(run_arguments),
        Command::Resume(resume_arguments) => run::resume(resume_arguments),
        Command::Fork(fork_arguments) => run::fork(fork_arguments),
        Command::Redrive(redrive_arguments) => run::redrive(redrive_arguments),
        Command::Cancel(cancel_arguments) => cancel::cancel(&cancel_arguments),
        Command::Replay(replay_arguments) => replay::replay(&replay_arguments),
        Command::Serve(serve_arguments) => serve::serve(serve_arguments),
        Command::Mcp(mcp_arguments) => mcp::mcp(mcp_arguments),
        Command::Ui(ui_arguments) => ui::ui(ui_arguments),
        Command::Validate { files } => validate::validate(&files),
        Command::Lsp => {
            crate::tooling::lsp::serve(&mut std::io::stdin().lock(), &mut std::io::stdout().lock())
        }
        Command::Schema { out, scenario } => schema::schema(out.as_deref(), scenario),
        Command::Test {
            paths,
            coverage,
            narrowing,
            limits,
            search,
        } => test::test(&paths, coverage, &narrowing, limits.limits(), &search),
        Command::Check {
            files,
            deny_warnings,
        } => check::check(&files, deny_warnings),
        Command::Graph {
            file,
            format,
            detail,
        } => graph::graph(&file, format, detail),
        Command::Import {
            source: ImportSource::Scxml { file, out },
        } => import::import_scxml(&file, out.as_deref()),
        Command::New { name, directory } => scaffold::new_protocol(&name, &directory),
        Command::Completions { shell } => {
            let mut command = <Arguments as clap::CommandFactory>::command();
            scaffold::completions(shell, &mut command)
        }
        Command::Logs(arguments) => logs::logs(&arguments),
        Command::Stats(arguments) => logs::stats(&arguments),
        Command::Runs(arguments) => runs::runs(&arguments),
        Command::Status(arguments) => status::status(&arguments),
    };
    crate::pipeline::compile::expression::report_cel_use();
    code
}

/// `validate FILE...` with every file a plain name (not empty, not starting with `-`): the
/// files, read without building clap's command tree. That tree (every subcommand's arguments
/// and help, 0.45 M instructions) is a sixth of what `validate` of one protocol does of its
/// own, and this is the command an editor or a script runs on every save. clap reads such a
/// line the same way (`validate` takes no flag but `--help`, and its files are positional);
/// anything else (a flag, `--`, `-`, an empty name, no file) goes to clap, so its help and its
/// errors are unchanged.
fn plain_validate(arguments: &[String]) -> Option<Vec<PathBuf>> {
    let [_, command, files @ ..] = arguments else {
        return None;
    };
    let plain = |file: &String| !file.is_empty() && !file.starts_with('-');
    (command == "validate" && !files.is_empty() && files.iter().all(plain))
        .then(|| files.iter().map(PathBuf::from).collect())
}

/// `Arguments::try_parse_from`, without freeing clap's command tree: `main` is called once
/// per process (by `main.rs`), and freeing every subcommand's arguments, help texts and
/// settings (0.2 M instructions, a tenth of `--version`) only to exit would be work undone by
/// the exit. The tree is built and kept once per call, so nothing grows with what a command
/// then does. Errors are formatted as clap's `try_parse_from` formats them.
fn parse(arguments: &[String]) -> Result<Arguments, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Arguments::command();
    let matches = command.try_get_matches_from_mut(arguments);
    std::mem::forget(command);
    let mut matches = matches?;
    let parsed = Arguments::from_arg_matches_mut(&mut matches)
        .map_err(|error| error.format(&mut Arguments::command()));
    std::mem::forget(matches);
    parsed
}

/// `protocol-run FILE.yaml ...` means `protocol-run run FILE.yaml ...`. Whether the first
/// word names a subcommand is asked of the derived names, without building the command tree
/// (every subcommand's arguments): parsing builds it once, and that is enough.
fn with_default_subcommand(mut arguments: Vec<String>) -> Vec<String> {
    if let Some(first) = arguments.get(1)
        && !first.starts_with('-')
        && first != "help"
        && !<Command as Subcommand>::has_subcommand(first)
    {
        arguments.insert(1, "run".into());
    }
    arguments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &[&str]) -> Vec<String> {
        line.iter().map(|word| (*word).to_string()).collect()
    }

    /// What clap makes of a line, as `validate`'s files when it reads one.
    fn clap_files(line: &[&str]) -> Option<Vec<PathBuf>> {
        match parse(&with_default_subcommand(words(line))) {
            Ok(Arguments {
                command: Command::Validate { files },
            }) => Some(files),
            _ => None,
        }
    }

    #[test]
    fn plain_validate_reads_only_what_clap_reads_the_same_way() {
        let read_without_clap: &[&[&str]] = &[
            &["protocol-run", "validate", "protocols/ittw.yaml"],
            &[
                "protocol-run",
                "validate",
                "a.yaml",
                "b.scenario.yaml",
                "c d.yaml",
            ],
            &[
                "protocol-run",
                "validate",
                "validate",
                "help",
                "run",
                "é→.yaml",
            ],
            &["protocol-run", "validate", "a=b", "./-x", "dir/"],
        ];
        for line in read_without_clap {
            let files = plain_validate(&words(line));
            assert!(files.is_some(), "{line:?}");
            assert_eq!(files, clap_files(line), "{line:?}");
        }
        let left_to_clap: &[&[&str]] = &[
            &["protocol-run", "validate"],
            &["protocol-run", "validate", "--help"],
            &["protocol-run", "validate", "-h"],
            &["protocol-run", "validate", "a.yaml", "--unknown"],
            &["protocol-run", "validate", "--", "-a.yaml"],
            &["protocol-run", "validate", "-"],
            &["protocol-run", "validate", ""],
            &["protocol-run", "run", "a.yaml"],
            &["protocol-run", "a.yaml"],
            &["protocol-run", "--version"],
            &["protocol-run"],
        ];
        for line in left_to_clap {
            assert_eq!(plain_validate(&words(line)), None, "{line:?}");
        }
    }
}
