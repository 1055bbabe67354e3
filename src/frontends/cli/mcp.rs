//! `protocol-run mcp PROTOCOL_OR_DIR...`: serve protocols to MCP clients over stdio, each a tool, each run durable in the state directory.

use std::path::PathBuf;

use clap::Args;

use super::exit_code;
use crate::frontends::mcp::McpEnd;
use crate::frontends::mcp::runs::host::{HostSettings, SharedHosting};

#[derive(Debug, Args)]
pub struct McpArguments {
    /// Protocol files, or directories whose `*.yaml` protocols are served (scenario and
    /// library files are skipped). An invalid protocol is reported and not served.
    #[arg(required = true, value_name = "PROTOCOL_OR_DIR")]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    state: super::run_selection::StateDirectory,
    /// Serve over Streamable HTTP on this address (e.g. `127.0.0.1:8080`; port 0 takes a free
    /// one, said on stderr) instead of stdio, until SIGINT or SIGTERM.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// Let --http listen on an address other than loopback. Anyone who reaches it starts runs
    /// (which may execute programs) without authentication: put a reverse proxy with
    /// authentication in front of it.
    #[arg(long, requires = "http")]
    http_allow_remote: bool,
    /// Leave the runs an earlier server left unfinished (killed, or stopped when its client
    /// went) for `resume_run`, instead of resuming them at start.
    #[arg(long)]
    no_resume: bool,
    /// Never ask the client for an event a run waits on (elicitation): for agents that declare
    /// elicitation but cannot answer it. Plain calls then return the report as it is.
    #[arg(long)]
    no_elicitation: bool,
    /// The most runs driven at once (runs that have ended do not count); a start past it, and a
    /// resume, is refused with a tool error naming the limit. By default it follows from the
    /// limit on open files, raised from soft to hard at start: (limit - 128) / 8, at most
    /// 10,000 (docs/limits.md has the arithmetic).
    #[arg(long, value_name = "N")]
    max_live_runs: Option<usize>,
    /// The client is a model: what it starts runs under these grants, as `run` would. A
    /// protocol whose grants name an input is served only when each such input is pinned
    /// (--input) or its kind of grant narrowed here; else it is not served, and says which.
    #[command(flatten)]
    narrowing: super::narrowing::Narrowing,
    /// Pins an input for every run of each protocol that declares it: `NAME=VALUE`; repeat for
    /// several. A pinned input leaves the tool's input schema (a client may not give it), and
    /// only pinned inputs resolve the grants that name them.
    #[arg(long = "input", short = 'i', value_name = "NAME=VALUE")]
    pinned_inputs: Vec<String>,
    #[command(flatten)]
    limits: super::limits::LimitOptions,
    /// Delete the store's runs (of any protocol) that finished longer ago than DURATION (`30d`,
    /// `12h`), with their journal, states and telemetry: at start, then every tenth of DURATION
    /// (a minute to an hour apart).
    #[arg(long, value_name = "DURATION", value_parser = crate::runtime::runs::retention::Retention::parse)]
    retain: Option<crate::runtime::runs::retention::Retention>,
    /// How often the server looks at the inboxes of the runs it holds, for events other
    /// processes queued (another host, `protocol-run ui`), and at the outcomes of those it queued
    /// (give or take a quarter); from 10ms to a minute. On PostgreSQL the database also wakes it.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = super::serve::parse_inbox_poll)]
    inbox_poll: std::time::Duration,
    /// Export each run as its own trace over OTLP/HTTP (protobuf) to this collector, e.g.
    /// http://127.0.0.1:4318 (`/v1/traces` is added); a tool call whose `_meta` carries a
    /// `traceparent` starts its run as a child of that trace. Without it,
    /// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, choose the
    /// endpoint.
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
}

/// Serves until the client closes stdin, or with --http until SIGINT or SIGTERM (exit 0); 64
/// for a non-loopback --http address without --http-allow-remote; 65 when no protocol could be
/// served; 75 when the transport failed (a busy port, stdio gone).
pub fn mcp(arguments: McpArguments) -> u8 {
    if let Some(address) = arguments.http
        && let Err(message) = check_exposure(address, arguments.http_allow_remote)
    {
        eprintln!("error: {message}");
        return exit_code::USAGE;
    }
    let narrowing = match arguments.narrowing.limit(None) {
        Ok(limit) => limit,
        Err(refusal) => return refusal.report(),
    };
    let export = match super::run::otlp_export(arguments.otlp.as_deref()) {
        Ok(export) => export,
        Err(code) => return code,
    };
    let mut pins = Vec::new();
    for text in &arguments.pinned_inputs {
        match crate::pipeline::compile::inputs::split_assignment(text) {
            Ok((name, value)) => pins.push((name, serde_json::Value::String(value))),
            Err(error) => {
                eprintln!("error: {error}");
                return exit_code::USAGE;
            }
        }
    }
    // Every run's steps and every read go through this one connection. With a shared store it
    // is opened first: the host's lease is taken with it, and the holder its lock records
    // names the lease.
    let store = match arguments.state.open_store_to_drive("mcp") {
        Ok(store) => crate::store::SharedStore::new(store),
        Err(code) => return code,
    };
    // One host per state directory: two would drive the same runs. Its lock is the holder
    // every run it drives records (`runs::claims`).
    let host_lock =
        match crate::runtime::runs::claims::HolderLock::host(&arguments.state.path, "mcp") {
            Ok(lock) => lock,
            Err(error) => {
                eprintln!("error: {error}");
                return error.exit_code();
            }
        };
    let descriptors = match crate::runtime::runs::live_runs::raise_descriptor_limit() {
        Ok(descriptors) => descriptors,
        Err(message) => {
            eprintln!("error: {message}");
            return exit_code::IO;
        }
    };
    let max_live_runs = arguments
        .max_live_runs
        .unwrap_or_else(|| crate::runtime::runs::live_runs::default_max_live_runs(descriptors));
    if let Some(retention) = arguments.retain
        && let Err(code) = super::run_selection::keep_pruning(&arguments.state, retention)
    {
        return code;
    }
    let settings = HostSettings {
        store,
        holder: host_lock.holder().clone(),
        max_live_runs,
        state_dir: arguments.state.path,
        narrowing,
        narrowing_permissions: arguments.narrowing.permissions(),
        pinned: crate::runtime::runs::grants::PinnedInputs::new(pins),
        recorded_grants: arguments.narrowing.recorded(),
        limits: arguments.limits.limits(),
        notices: tokio::sync::broadcast::Sender::new(crate::frontends::mcp::MAX_PENDING_NOTICES),
        resume: !arguments.no_resume,
        elicitation: !arguments.no_elicitation,
        // Other hosts drive runs of the same protocols: events are queued for theirs, and the
        // runs of one that dies are taken over, looked for twice a lease.
        shared: match arguments.state.store {
            crate::store::StoreChoice::Postgres(_) => Some(SharedHosting {
                takeover_every: arguments.state.lease / 2,
            }),
            _ => None,
        },
        inbox_poll: arguments.inbox_poll,
        otlp: export.clone(),
    };
    let stop = super::serve::stop_signal();
    let end = crate::frontends::mcp::serve(arguments.paths, settings, arguments.http, stop);
    // The spans still queued go before the process ends.
    if let Some(export) = export {
        export.shutdown();
    }
    match end {
        McpEnd::Closed => 0,
        McpEnd::Failed(message) => {
            eprintln!("error: {message}");
            exit_code::INVALID
        }
        McpEnd::TransportFailed(message) => {
            eprintln!("error: {message}");
            exit_code::TEMPORARY_FAILURE
        }
    }
}

/// An --http address other than loopback is refused unless the operator opted in: the server
/// has no authentication, and the `Host` check (against DNS rebinding) stops browsers, not a
/// client that writes its own `Host` header.
fn check_exposure(address: std::net::SocketAddr, allowed: bool) -> Result<(), String> {
    if address.ip().is_loopback() || allowed {
        return Ok(());
    }
    Err(format!(
        "--http {address} is not a loopback address: anyone who reaches it could start runs, \
         which may execute programs, and the server has no authentication. Listen on \
         127.0.0.1 (or [::1]) behind a reverse proxy that authenticates, or pass \
         --http-allow-remote to listen there anyway"
    ))
}
