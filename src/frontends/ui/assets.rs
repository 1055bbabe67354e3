//! The inspector's page and its script and style, built into the binary: no network at run time, no CDN.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::Inspector;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// The one page every route of the inspector shows (its script reads the path), with this
/// server's CSRF token for the requests that act.
pub async fn page(State(inspector): State<Inspector>) -> Html<String> {
    Html(PAGE.replace("{{csrf}}", &inspector.guard.csrf_token))
}

/// `/assets/app.js` and `/assets/app.css`.
pub async fn asset(Path(name): Path<String>) -> Response {
    let (kind, body) = match name.as_str() {
        "app.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "app.css" => ("text/css; charset=utf-8", STYLE),
        _ => return (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
