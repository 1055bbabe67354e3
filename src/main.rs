//! The `protocol-run` binary: one call into the CLI.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(protocol_run::frontends::cli::main(
        std::env::args().collect(),
    ))
}
