//! The command line: parse arguments, call the library, map the result to an exit code.

mod check;
mod generate;
mod graph;
mod import;
mod inputs_file;
mod limits;
mod logs;
mod narrowing;
mod run;
mod runs;
mod scaffold;
mod schema;
mod serve;
mod socket;
mod test;
mod validate;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit codes of the engine itself (sysexits); a protocol's own codes are 0–63.
pub mod exit_code {
    pub const USAGE: u8 = 64;
    pub const INVALID: u8 = 65;
    pub const NO_INPUT_FILE: u8 = 66;
    pub const INTERNAL: u8 = 70;
    pub const IO: u8 = 74;
    /// The run stopped before reaching a final state: no events left and no timer pending.
    pub const UNFINISHED: u8 = 75;
    /// Another process holds what this one needs (a run it is driving): try again later.
    pub const TEMPORARY_FAILURE: u8 = 75;
}

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
    /// Run many instances of one protocol, fed JSON lines `{"instance", "event", "data"}` on
    /// stdin (or a Unix socket); each is recorded and resumed when the host restarts.
    Serve(serve::ServeArguments),
    /// Check protocol files and report every problem with its location.
    Validate {
        /// Protocol files; scenario files (`*.scenario.yaml`) and library files
        /// (`*.library.yaml`) are checked as what they are.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run scenario files (or every `*.scenario.yaml` under the directories given; `.` by default).
    Test {
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
        name: String,
        /// Where to write them.
        #[arg(long, default_value = "protocols", value_name = "DIR")]
        directory: PathBuf,
    },
    /// Print shell completions.
    Completions { shell: clap_complete::Shell },
    /// Show a run's log lines (the latest run unless --run is given).
    Logs {
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        /// Only lines with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Only lines at this level or more severe (trace, debug, info, warn, error).
        #[arg(long)]
        level: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[arg(
            long,
            env = "PROTOCOL_RUN_STATE_DIR",
            default_value = ".protocol-run",
            value_name = "DIR"
        )]
        state_dir: PathBuf,
    },
    /// List the recorded runs, newest first: id, status, start, last step, protocol.
    Runs {
        #[arg(
            long,
            env = "PROTOCOL_RUN_STATE_DIR",
            default_value = ".protocol-run",
            value_name = "DIR"
        )]
        state_dir: PathBuf,
    },
    /// Show a run (the latest unless RUN_ID is given): protocol, states, context, pending timers,
    /// running effects, last events, and how it finished.
    Status {
        run_id: Option<String>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        #[arg(
            long,
            env = "PROTOCOL_RUN_STATE_DIR",
            default_value = ".protocol-run",
            value_name = "DIR"
        )]
        state_dir: PathBuf,
    },
    /// Retry success rate, attempts to success, timeouts per action, time in each state, tag counts.
    Stats {
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        #[arg(
            long,
            env = "PROTOCOL_RUN_STATE_DIR",
            default_value = ".protocol-run",
            value_name = "DIR"
        )]
        state_dir: PathBuf,
    },
    /// Lint protocols: unreachable or dead-end states, shadowed transitions, eventless loops,
    /// unused data, unhandled events, suspicious delays, unused blocks and parameters (a library
    /// file: its blocks' unread parameters).
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Exit with 65 when any warning is found.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Draw a protocol: Mermaid `stateDiagram-v2`, Graphviz DOT, or SVG (laid out here).
    Graph {
        file: PathBuf,
        #[arg(long, value_enum, default_value = "mermaid")]
        format: graph::GraphFormat,
        /// Show entry and exit actions in each state and each transition's actions on its
        /// arrow, by kind and id (`entry / exec build`).
        #[arg(long)]
        detail: bool,
    },
    /// Convert another format into a protocol, printed as YAML on stdout (or written to --out).
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
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

/// Runs the CLI with these arguments (the first is the program name); returns the exit code.
pub fn main(arguments: Vec<String>) -> u8 {
    let arguments = with_default_subcommand(arguments);
    let parsed = match Arguments::try_parse_from(&arguments) {
        Ok(parsed) => parsed,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => exit_code::USAGE,
            };
        }
    };
    if !matches!(parsed.command, Command::Serve(_)) {
        end_quietly_on_a_closed_pipe();
    }
    match parsed.command {
        Command::Run(run_arguments) => run::run(run_arguments),
        Command::Resume(resume_arguments) => run::resume(resume_arguments),
        Command::Serve(serve_arguments) => serve::serve(serve_arguments),
        Command::Validate { files } => validate::validate(&files),
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
        Command::Logs {
            run,
            tag,
            level,
            json,
            state_dir,
        } => logs::logs(
            &state_dir,
            run.as_deref(),
            &crate::telemetry::LogFilter { tag, level },
            json,
        ),
        Command::Stats { run, state_dir } => logs::stats(&state_dir, run.as_deref()),
        Command::Runs { state_dir } => runs::runs(&state_dir),
        Command::Status {
            run_id,
            json,
            state_dir,
        } => runs::status(&state_dir, run_id.as_deref(), json),
    }
}

/// `protocol-run FILE.yaml ...` means `protocol-run run FILE.yaml ...`.
fn with_default_subcommand(mut arguments: Vec<String>) -> Vec<String> {
    if let Some(first) = arguments.get(1)
        && !first.starts_with('-')
        && first != "help"
        && !<Arguments as clap::CommandFactory>::command()
            .get_subcommands()
            .any(|subcommand| subcommand.get_name() == first)
    {
        arguments.insert(1, "run".into());
    }
    arguments
}
