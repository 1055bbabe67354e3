//! `protocol-run ui`: the web inspector over the state directory's store, on loopback unless told otherwise (then behind an access token).

use std::path::PathBuf;

use clap::Args;

use super::exit_code;
use super::run_selection::StateDirectory;
use crate::frontends::ui::{DriverPlace, Guard, Inspector, random_token};

/// `protocol-run ui`.
#[derive(Debug, Args)]
pub struct UiArguments {
    /// The address to listen on; port 0 takes a free one (said on stderr).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    listen: std::net::SocketAddr,
    /// Let --listen be an address other than loopback: anyone who reaches it reads the runs
    /// and sends them events, so an access token is needed then (PROTOCOL_RUN_UI_TOKEN or
    /// --access-token-file).
    #[arg(long)]
    allow_remote: bool,
    /// A file holding the access token every request must bring (as `Authorization: Bearer`,
    /// or a cookie set by opening `/?token=TOKEN`); the environment's PROTOCOL_RUN_UI_TOKEN
    /// gives it too, so that it need not sit in argv.
    #[arg(long, value_name = "FILE")]
    access_token_file: Option<PathBuf>,
    /// How often a live page looks at the store for its run's new steps; from 10ms to a minute.
    /// On PostgreSQL the database's notifications wake pages at each commit, and they look
    /// this often (at least every 5s) only in case a notification was lost.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = super::serve::parse_inbox_poll)]
    poll: std::time::Duration,
    #[command(flatten)]
    state: StateDirectory,
}

/// Serves the inspector until SIGINT or SIGTERM (exit 0); 64 for a remote address without
/// --allow-remote or without an access token; 74 when the address cannot be bound.
pub fn ui(arguments: UiArguments) -> u8 {
    let access_token = match access_token(&arguments) {
        Ok(token) => token,
        Err(message) => {
            eprintln!("error: {message}");
            return exit_code::USAGE;
        }
    };
    let loopback = arguments.listen.ip().is_loopback();
    if !loopback && !arguments.allow_remote {
        eprintln!(
            "error: --listen {} is not a loopback address: anyone who reaches it could read the \
             runs and send them events. Listen on 127.0.0.1 (or [::1]), or pass --allow-remote \
             with an access token",
            arguments.listen
        );
        return exit_code::USAGE;
    }
    if !loopback && access_token.is_none() {
        eprintln!(
            "error: --listen {} is not a loopback address and no access token is set: give one \
             in PROTOCOL_RUN_UI_TOKEN or a file (--access-token-file)",
            arguments.listen
        );
        return exit_code::USAGE;
    }
    // A shared store's claims need a lease: the inspector claims a run no process holds to
    // record its cancel.
    let store = match arguments.state.open_store_to_drive("ui") {
        Ok(store) => store,
        Err(code) => return code,
    };
    let location = store.location();
    let store = crate::store::SharedStore::new(store);
    let csrf_token = match random_token() {
        Ok(token) => token,
        Err(error) => {
            eprintln!("error: cannot read random bytes for the CSRF token: {error}");
            return exit_code::IO;
        }
    };
    let runtime = match super::serve::current_thread_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(arguments.listen).await {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!("error: cannot listen on {}: {error}", arguments.listen);
                return exit_code::IO;
            }
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => {
                eprintln!("error: cannot read the address listened on: {error}");
                return exit_code::IO;
            }
        };
        let hosts = loopback.then(|| {
            let mut hosts = Guard::loopback_hosts(address.port());
            if !hosts.contains(&address.to_string()) {
                hosts.push(address.to_string());
            }
            hosts
        });
        let guard = Guard {
            hosts,
            access_token,
            csrf_token,
        };
        let place = DriverPlace {
            state_dir: std::path::absolute(&arguments.state.path)
                .unwrap_or_else(|_| arguments.state.path.clone()),
            store: arguments.state.store.clone(),
        };
        let inspector = Inspector::new(store, guard, arguments.poll, place);
        eprintln!("ui: http://{address}/ (the runs in {location})");
        match crate::frontends::ui::serve(listener, inspector, super::serve::stop_signal()).await {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("error: the inspector stopped: {error}");
                exit_code::IO
            }
        }
    })
}

/// The access token, from PROTOCOL_RUN_UI_TOKEN or --access-token-file (trimmed); an empty
/// one is refused.
fn access_token(arguments: &UiArguments) -> Result<Option<String>, String> {
    let token = match (
        &arguments.access_token_file,
        std::env::var("PROTOCOL_RUN_UI_TOKEN"),
    ) {
        (Some(file), _) => Some(std::fs::read_to_string(file).map_err(|error| {
            format!(
                "cannot read the access token in {}: {error}",
                file.display()
            )
        })?),
        (None, Ok(token)) => Some(token),
        (None, Err(_)) => None,
    };
    match token.map(|token| token.trim().to_string()) {
        Some(token) if token.is_empty() => {
            Err("the access token is empty: give at least one character".into())
        }
        token => Ok(token),
    }
}
