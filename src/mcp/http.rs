//! Streamable HTTP (`mcp --http ADDR`): the same server, each client session its own, over hyper's HTTP/1 on a TCP listener.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::server::ProtocolServer;

/// The most connections served at once; past it new ones wait to be accepted.
pub const MAX_HTTP_CONNECTIONS: usize = 256;

/// Serves `server` on `address` (at `/mcp`, and at every other path alike) until `stop`
/// resolves. The first line on stderr says the address bound (port 0 takes a free one).
pub async fn serve(
    server: ProtocolServer,
    address: SocketAddr,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot listen on {address}: {error}"))?;
    eprintln!("mcp: listening on http://{bound}/mcp");
    // Each session gets its own handler over the same host; the allowed hosts are the
    // loopback names (rmcp's default, against DNS rebinding) and the address bound.
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts.push(bound.to_string());
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_HTTP_CONNECTIONS));
    let mut stop = std::pin::pin!(stop);
    loop {
        let permit = tokio::select! {
            () = &mut stop => return Ok(()),
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return Ok(()),
            },
        };
        let (stream, _) = tokio::select! {
            () = &mut stop => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    eprintln!("warning: mcp: cannot accept a connection: {error}");
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
            drop(permit);
        });
    }
}
