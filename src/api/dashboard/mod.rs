//! The operator's dashboard (`/dashboard`): static HTML, JavaScript and CSS compiled
//! into the binary, served without a key. The page signs in with an admin key, kept in
//! the browser's session storage, and calls the API with it like any client; nothing
//! is fetched from anywhere else.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;

use super::{ApiError, ApiRequest, AppState, HttpResponse};

/// Each asset: its name under `/dashboard/`, its content type and its bytes.
const ASSETS: [(&str, &str, &str); 3] = [
    ("index.html", "text/html; charset=utf-8", include_str!("index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("app.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("style.css")),
];

/// The names of the files served under `/dashboard/`.
pub fn names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|(name, _, _)| *name)
}

/// What the page may load and run: its own files and API only.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'";

/// `GET /dashboard`: the page.
pub async fn page(_state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    asset(None)
}

/// `GET /dashboard/{asset}`: one of its files.
pub async fn file(_state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    asset(Some(&request.params[0]))
}

/// `/dashboard` (the page) or `/dashboard/{asset}`.
fn asset(name: Option<&str>) -> Result<HttpResponse, ApiError> {
    let name = name.unwrap_or("index.html");
    let (_, content_type, body) = ASSETS
        .iter()
        .find(|(known, _, _)| *known == name)
        .ok_or_else(|| ApiError::NotFound(format!("no dashboard file {name:?}")))?;
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The binary is the version: a new one serves new files at once.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    Ok(response)
}
