//! The `protocol-run` binary: one call into the CLI, or the effect watchdog it starts.

fn main() -> std::process::ExitCode {
    let arguments: Vec<String> = std::env::args().collect();
    let watchdog = protocol_run::effects::watchdog::ARGUMENT;
    if arguments.get(1).map(String::as_str) == Some(watchdog) {
        return std::process::ExitCode::from(protocol_run::effects::watchdog::serve(
            &arguments[2..],
        ));
    }
    // Effect processes stop with this process, even when it is killed with SIGKILL.
    protocol_run::effects::watchdog::enable();
    std::process::ExitCode::from(protocol_run::frontends::cli::main(arguments))
}
