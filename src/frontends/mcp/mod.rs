//! `protocol-run mcp`: an MCP server where each protocol is a tool that starts a durable run, and runs are driven by management tools.

// What is served: the protocols, loaded once, as tools and resources, and the handler that
// answers each client session.
pub mod catalog;
pub mod input_schema;
pub mod limits;
pub mod resources;
pub mod server;
pub mod tools;

// How clients reach it: stdio or Streamable HTTP, bounded.
pub mod transport;

// The runs, on the host's thread: each a fleet of `serve`'s engine, read into a view.
pub mod runs;

// What the client reads of a run besides its report: directives as they come, logs, telemetry.
pub mod logs;
pub mod notices;
pub mod telemetry;

// A run waiting for the client: as a task, by elicitation, by a 2026-07-28 retry.
pub mod waiting;

use std::path::PathBuf;

use rmcp::ServiceExt;
use tokio::sync::mpsc;

use runs::host::{self, HostSettings};
use server::{ProtocolServer, ProtocolTool};

/// The most directive notices waiting for a slow client; older ones are dropped first (each
/// run's report still carries its directives).
pub const MAX_PENDING_NOTICES: usize = 1_024;

/// How a server ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpEnd {
    /// The client closed the connection.
    Closed,
    /// Nothing could be served (every protocol refused), or the runtime did not start.
    Failed(String),
    /// The transport failed: the address could not be bound, or stdio broke.
    TransportFailed(String),
}

/// Loads the protocols under `paths` (an invalid one is reported on stderr and not served),
/// then serves them over stdio until the client goes, or with `http` over Streamable HTTP
/// until `stop` resolves (the CLI's SIGINT or SIGTERM). Runs live on a thread of their own (the engine's fleets are
/// single-threaded); the MCP transport on this one.
pub fn serve(
    paths: Vec<PathBuf>,
    settings: HostSettings,
    http: Option<std::net::SocketAddr>,
    stop: impl std::future::Future<Output = ()>,
) -> McpEnd {
    let (tools_sender, tools_receiver) = std::sync::mpsc::channel();
    let (requests, request_receiver) = mpsc::channel(64);
    let limit = settings.narrowing.clone();
    let narrowing = settings.narrowing_permissions.clone();
    let pinned = settings.pinned.clone();
    let notices = settings.notices.clone();
    let state_dir = settings.state_dir.clone();
    let store = settings.store.clone();
    let elicitation = settings.elicitation;
    let host_thread = std::thread::spawn(move || {
        let operator = catalog::Operator {
            limit: &limit,
            narrowing: &narrowing,
            pinned: &pinned,
        };
        let (served, _refused) = catalog::load_all(&paths, &operator);
        let tools: Vec<ProtocolTool> = served
            .iter()
            .map(|served| ProtocolTool {
                id: served.machine.id.clone(),
                description: describe(served),
                input_schema: input_schema::tool_input_schema(&served.machine, &served.pinned),
                text: resources::ProtocolText {
                    id: served.machine.id.clone(),
                    title: served.machine.title.clone(),
                    yaml: served.text.clone(),
                    path: served.path.clone(),
                },
            })
            .collect();
        let _ = tools_sender.send(tools);
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("error: cannot start the runtime: {error}");
                return;
            }
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, host::host(served, settings, request_receiver));
    });
    let Ok(tools) = tools_receiver.recv() else {
        return McpEnd::Failed("the run host did not start".into());
    };
    if tools.is_empty() {
        drop(requests);
        let _ = host_thread.join();
        return McpEnd::Failed("no protocol to serve".into());
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return McpEnd::Failed(format!("cannot start the runtime: {error}")),
    };
    // Past here every failure is the transport's.
    let end = runtime.block_on(async {
        let server = ProtocolServer::new(tools, requests, notices, store, &state_dir, elicitation);
        if let Some(address) = http {
            return transport::http::serve(server, address, stop).await;
        }
        let protocols = server.protocol_names();
        let service = server
            .serve(server::dialect::Dialect::new(
                transport::stdio::BoundedStdio::open(),
                protocols,
            ))
            .await
            .map_err(|error| error.to_string())?;
        service.waiting().await.map_err(|error| error.to_string())?;
        Ok::<(), String>(())
    });
    // Dropping the runtime drops the HTTP sessions' handlers, and with them the last request
    // senders: the host sees its channel close.
    drop(runtime);
    // The server and its request sender are gone: the host stops its runs and ends.
    let _ = host_thread.join();
    match end {
        Ok(()) => McpEnd::Closed,
        Err(message) => McpEnd::TransportFailed(message),
    }
}

/// A protocol tool's description: its title and description, and that calling it starts a run.
fn describe(served: &catalog::Served) -> String {
    let protocol = &served.loaded.protocol;
    let mut text = String::new();
    if let Some(title) = &served.machine.title {
        text.push_str(title);
        text.push_str(". ");
    }
    if let Some(description) = &protocol.description {
        text.push_str(description.trim());
        text.push(' ');
    }
    text.push_str(
        "Starts a run; returns its run id, states, directives and the events it can take now.",
    );
    text
}
