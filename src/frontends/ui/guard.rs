//! Who may use the web inspector: every request's `Host` and `Origin` checked (no DNS rebinding, no cross-site page driving a run), an access token on an address other than loopback, and a CSRF token on every request that acts.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Inspector;

/// The cookie an access token is kept in once a browser gave it (`/?token=…`).
pub const TOKEN_COOKIE: &str = "protocol_run_ui_token";

/// The header a page sends its CSRF token in with every request that acts.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// What a request must show to be served.
pub struct Guard {
    /// The `Host` values the server answers to (`127.0.0.1:PORT`, `localhost:PORT`, …);
    /// `None` when it listens on another address, where the access token guards it instead.
    pub hosts: Option<Vec<String>>,
    /// Needed with every request when set: as `Authorization: Bearer`, or the cookie.
    pub access_token: Option<String>,
    /// Sent with every request that acts (`CSRF_HEADER`); a page gets it in its `<meta>`.
    pub csrf_token: String,
}

impl Guard {
    /// The `Host` values of a server on loopback port `port`.
    pub fn loopback_hosts(port: u16) -> Vec<String> {
        ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .map(|host| format!("{host}:{port}"))
            .collect()
    }
}

/// A refusal: its status and a line saying why.
fn refused(status: StatusCode, why: &str) -> Response {
    (status, format!("{why}\n")).into_response()
}

/// Checks a request before any handler sees it: its `Host`, its `Origin` (a browser sends one
/// with every cross-origin request and every POST), the access token where one is needed, and
/// the CSRF token of a request that acts. A browser that brings `?token=…` to a page gets it as
/// a cookie (HttpOnly, SameSite=Strict) and is sent on without it.
pub async fn check(State(inspector): State<Inspector>, request: Request, next: Next) -> Response {
    let guard = &inspector.guard;
    let headers = request.headers();
    let Some(host) = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
    else {
        return refused(StatusCode::BAD_REQUEST, "a request without a Host header");
    };
    if let Some(hosts) = &guard.hosts
        && !hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        return refused(
            StatusCode::FORBIDDEN,
            &format!(
                "Host `{host}` is not this server's ({}): a page of another site may not reach it",
                hosts.join(", ")
            ),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|origin| origin.strip_prefix("http://"))
            .is_some_and(|origin| origin.eq_ignore_ascii_case(host));
        if !same {
            return refused(
                StatusCode::FORBIDDEN,
                "a request from another origin: only this server's own pages may call it",
            );
        }
    }
    if let Some(token) = &guard.access_token {
        if let Some(given) = query_token(request.uri().query())
            && request.method() == Method::GET
        {
            if !same_secret(&given, token) {
                return refused(
                    StatusCode::UNAUTHORIZED,
                    "the access token is not this server's",
                );
            }
            // Kept as a cookie; the address bar loses it.
            let cookie = format!("{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            return (
                StatusCode::SEE_OTHER,
                [
                    (header::SET_COOKIE, cookie),
                    (header::LOCATION, request.uri().path().to_string()),
                ],
            )
                .into_response();
        }
        let presented = bearer(headers).or_else(|| cookie(headers, TOKEN_COOKIE));
        if !presented.is_some_and(|presented| same_secret(&presented, token)) {
            return refused(
                StatusCode::UNAUTHORIZED,
                "this server needs its access token: open it once as /?token=TOKEN, or send \
                 `Authorization: Bearer TOKEN`",
            );
        }
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let presented = headers
            .get(CSRF_HEADER)
            .and_then(|value| value.to_str().ok());
        if !presented.is_some_and(|presented| same_secret(presented, &guard.csrf_token)) {
            return refused(
                StatusCode::FORBIDDEN,
                "a request that acts needs this server's CSRF token (the X-CSRF-Token header its \
                 pages send)",
            );
        }
    }
    next.run(request).await
}

/// `token=…` of a query.
fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(String::from)
}

/// The token of `Authorization: Bearer TOKEN`.
fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(|token| token.trim().to_string())
}

/// The value of cookie `name`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then(|| value.to_string())
        })
}

/// Compares two secrets in time that depends on their length only, not on where they differ.
fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |difference, (one, other)| difference | (one ^ other))
            == 0
}

/// A new random token: 32 bytes from the kernel, as hex.
pub fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
    }

    #[test]
    fn tokens_are_read_from_a_query_a_header_and_a_cookie() {
        assert_eq!(query_token(Some("a=1&token=xyz")), Some("xyz".into()));
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer t1".parse().unwrap());
        headers.insert(
            header::COOKIE,
            "x=1; protocol_run_ui_token=t2".parse().unwrap(),
        );
        assert_eq!(bearer(&headers), Some("t1".into()));
        assert_eq!(cookie(&headers, TOKEN_COOKIE), Some("t2".into()));
        assert_eq!(random_token().unwrap().len(), 64);
    }
}
