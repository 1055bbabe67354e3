//! Streamable HTTP (`mcp --http ADDR`): the same server, each client session its own, over hyper's HTTP/1 on a TCP listener, bodies and sessions bounded.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::frontends::mcp::limits::{MAX_HTTP_SESSIONS, MAX_MESSAGE_BYTES};
use crate::frontends::mcp::server::ProtocolServer;
use crate::frontends::mcp::transport::http_sessions::{BoundedSessions, full_message};

type Service = StreamableHttpService<ProtocolServer, BoundedSessions>;

/// The most connections served at once; past it new ones wait to be accepted.
pub const MAX_HTTP_CONNECTIONS: usize = 256;

/// How long a connection may take to send a request's headers, and how long one may sit idle
/// between requests (hyper times both as the read of the next request's head): past it the
/// connection is closed, so idle connections cannot hold `MAX_HTTP_CONNECTIONS` for long.
pub const HTTP_HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `server` on `address` (at `/mcp`, and at every other path alike) until `stop`
/// resolves. The first line on stderr says the address bound (port 0 takes a free one).
pub async fn serve(
    server: ProtocolServer,
    address: SocketAddr,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    // Polled once before anything is announced, so its signal handlers are installed by the
    // time a caller that read the address sends SIGTERM (else the default action kills us).
    let mut stop = std::pin::pin!(stop);
    tokio::select! {
        biased;
        () = &mut stop => return Ok(()),
        () = std::future::ready(()) => {}
    }
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
    // rmcp checks a body's length as it streams in too, whatever its headers say (`answer` reads
    // a POST's body first, and cuts it off at the same length).
    config.max_request_body_bytes = MAX_MESSAGE_BYTES;
    let sessions = Arc::new(BoundedSessions::new(server.protocol_names()));
    let service: Service =
        StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_HTTP_CONNECTIONS));
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
        let service = service.clone();
        let sessions = sessions.clone();
        let service = hyper::service::service_fn(move |request| {
            let service = service.clone();
            let sessions = sessions.clone();
            async move { Ok::<_, Infallible>(answer(&service, &sessions, request).await) }
        });
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HTTP_HEADER_READ_TIMEOUT)
                .serve_connection(io, service)
                .await;
            drop(permit);
        });
    }
}

/// rmcp's answer to `request`, unless it is refused first: a body longer than
/// `MAX_MESSAGE_BYTES`, declared or read (413), or a new session while `MAX_HTTP_SESSIONS` are
/// open (503). The
/// session count here is a courtesy (a plain 503 before the body is read); `BoundedSessions`
/// enforces it where sessions are made, so a race past this check is refused there (500).
async fn answer(
    service: &Service,
    sessions: &BoundedSessions,
    request: Request<hyper::body::Incoming>,
) -> Response<BoxBody<Bytes, Infallible>> {
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_MESSAGE_BYTES as u64) {
        return refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            crate::frontends::mcp::limits::oversized_message(),
        );
    }
    let opens_session = request.method() == hyper::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if opens_session && sessions.open().await >= MAX_HTTP_SESSIONS {
        return refusal(StatusCode::SERVICE_UNAVAILABLE, full_message());
    }
    if request.method() != hyper::Method::POST {
        return service.handle(request).await;
    }
    // A POST's message is read here whole (rmcp reads it whole too) for a `tools/call` that
    // carries `task`, renamed before rmcp drops the `task` (see `dialect`).
    let (parts, body) = request.into_parts();
    let body = match http_body_util::Limited::new(body, MAX_MESSAGE_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                crate::frontends::mcp::limits::oversized_message(),
            );
        }
    };
    let body = match crate::frontends::mcp::server::dialect::rename_task_calls(&body) {
        Some(renamed) => Bytes::from(renamed),
        None => body,
    };
    service
        .handle(Request::from_parts(parts, http_body_util::Full::new(body)))
        .await
}

/// A plain-text refusal, as rmcp writes its own.
fn refusal(status: StatusCode, message: String) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(http_body_util::Full::new(Bytes::from(message)).boxed());
    *response.status_mut() = status;
    response
}
