//! The HTTP client the OTLP exporter posts through: one HTTP/1.1 request per export on hyper, which the binary already has for `mcp --http`, instead of reqwest's tree.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::time::Duration;

/// Posts each export on a fresh connection from the exporter's own thread. The SDK's batch
/// processor calls it off the run's thread, so a slow or absent endpoint never holds a step.
#[derive(Debug)]
pub struct HyperClient {
    pub timeout: Duration,
}

/// The longest response body read back: the collector's answer is a small protobuf message.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

#[async_trait::async_trait]
impl HttpClient for HyperClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        // The batch processor's thread has no tokio runtime of its own: one lives for each
        // export, on this thread alone.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        runtime.block_on(async {
            tokio::time::timeout(self.timeout, send(request))
                .await
                .map_err(|_| -> HttpError {
                    format!("no answer within {} ms", self.timeout.as_millis()).into()
                })?
        })
    }
}

async fn send(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    use http_body_util::BodyExt;
    let uri = request.uri().clone();
    if uri.scheme_str() != Some("http") {
        return Err(format!("`{uri}`: only http:// endpoints are supported (no TLS)").into());
    }
    let host = uri.host().ok_or_else(|| format!("`{uri}` names no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(hyper::header::HOST) {
        let authority = uri.authority().map(|authority| authority.as_str());
        parts.headers.insert(
            hyper::header::HOST,
            hyper::header::HeaderValue::from_str(authority.unwrap_or(host))?,
        );
    }
    // Origin form on the wire, as HTTP/1.1 asks of a request that is not to a proxy.
    parts.uri = uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .parse()?;
    let request = Request::from_parts(parts, http_body_util::Full::new(body));
    let response = sender.send_request(request).await?;
    let (parts, body) = response.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_RESPONSE_BYTES);
    let bytes = limited.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, bytes))
}
