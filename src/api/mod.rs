//! The HTTP frontend (hyper 1.x). A request goes:
//! route (404/405) → auth and scope (401/403) → rate quota (429) → body with a size
//! limit (413) → forwarding to the owner node → endpoint handler, all under one
//! server-side deadline (408). Every step reads the endpoint's record in the route
//! table (`routes`), where each endpoint is declared once. Handlers live one file per
//! endpoint group; errors become responses only in `error.rs`.

mod admin;
mod auth;
mod catalog;
mod chat;
mod dashboard;
mod decode;
mod embed;
mod embedded_events;
mod error;
mod events;
mod experiments;
mod forward;
mod image_fetch;
mod openapi;
mod protocol_errors;
mod recommend;
mod recommend_module;
mod request_times;
mod rerank;
mod routes;
mod search;
mod users;

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;

pub use auth::{FailedAuth, RateLimits};
pub use chat::LlmClient;
pub use error::ApiError;
pub use forward::Peers;
pub use request_times::RequestTimes;
use routes::{Matched, MethodRoute};

use crate::config::ServerConfig;
use crate::service::Services;

/// Every response body is a complete JSON document.
pub type HttpResponse = Response<Full<Bytes>>;

/// What every request handler can reach: the node's services and the frontend's own parts.
pub struct AppState {
    /// The use cases every endpoint calls.
    pub services: Arc<Services>,
    /// Each key's token bucket.
    pub limits: RateLimits,
    /// Client addresses that presented keys that are not valid.
    pub failed_auth: FailedAuth,
    pub config: ServerConfig,
    /// False once shutdown begins: `/readyz` turns 503 so balancers stop sending.
    pub ready: AtomicBool,
    /// Time spent on requests, per endpoint.
    pub request_times: RequestTimes,
    /// Connections to the other nodes of a cluster, for forwarding.
    pub peers: Peers,
}

/// A routed, authorized request with its whole body read.
pub struct ApiRequest {
    pub method: Method,
    /// The path as requested (forwarding sends it on unchanged).
    pub path: String,
    /// When the server-side deadline of the request runs out.
    pub deadline: Instant,
    /// Percent-decoded path parameters, in path order.
    pub params: Vec<String>,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl ApiRequest {
    /// The body as JSON: 400 when it is not JSON.
    pub fn json_value(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body).map_err(|error| ApiError::MalformedJson(error.to_string()))
    }

    /// The body as a typed request object: 400 when it is not JSON, 422 when it is not
    /// an object of the right shape (serde would otherwise read a struct from an array).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        let value = self.json_value()?;
        if !value.is_object() {
            return Err(ApiError::validation("the body must be a JSON object"));
        }
        serde_json::from_value(value).map_err(|error| ApiError::validation(error.to_string()))
    }

    /// Whether `?name=true` (or `?name=1`) is in the query string.
    pub fn query_flag(&self, name: &str) -> bool {
        self.query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .any(|pair| match pair.split_once('=') {
                Some((key, value)) => key == name && matches!(value, "true" | "1"),
                None => pair == name,
            })
    }
}

/// A JSON response with the given status.
pub fn json_response(status: StatusCode, body: &impl Serialize) -> HttpResponse {
    json_bytes_response(status, serde_json::to_vec(body).expect("response bodies serialize"))
}

/// A response of JSON already written.
pub fn json_bytes_response(status: StatusCode, bytes: Vec<u8>) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A 200 response of Prometheus' text exposition format.
fn text_response(text: String) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
    response
}

/// A request method as a metric label: the route table's methods by name, any other as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// A 200 JSON response.
pub fn ok(body: &impl Serialize) -> Result<HttpResponse, ApiError> {
    Ok(json_response(StatusCode::OK, body))
}

/// Accepts connections until `shutdown` resolves, then stops accepting, drains
/// in-flight requests (up to `shutdown_grace_ms`) and returns.
pub async fn serve(listener: TcpListener, state: Arc<AppState>, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let header_timeout = Duration::from_millis(state.config.request_timeout_ms);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let state = state.clone();
        let service = service_fn(move |request| {
            let state = state.clone();
            async move { Ok::<_, Infallible>(handle(state, request, peer).await) }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(protocol_errors::ErrorBodies::new(stream)), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    state.ready.store(false, Ordering::SeqCst);
    drop(listener);
    let grace = Duration::from_millis(state.config.shutdown_grace_ms);
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("in-flight requests drained"),
        _ = tokio::time::sleep(grace) => tracing::warn!(grace_ms = grace.as_millis() as u64, "shutdown grace ran out with requests in flight"),
    }
}

/// One request, start to finish: never fails, never panics outward.
async fn handle(state: Arc<AppState>, request: Request<Incoming>, peer: SocketAddr) -> HttpResponse {
    let started = Instant::now();
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let matched = routes::match_path(&path);
    let routed = matched.as_ref().map(|matched| (matched.index, matched.route));
    let configured_ms = state.config.request_timeout_ms;
    let timeout_ms = match routed.and_then(|(_, route)| route.timeout_ms) {
        Some(longer_ms) => longer_ms.max(configured_ms),
        None => configured_ms,
    };
    // A forwarded request brings what is left of its caller's deadline.
    let deadline_ms = request
        .headers()
        .get(forward::DEADLINE_MS)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
        .map_or(timeout_ms, |left| left.clamp(1, timeout_ms));
    let deadline = started + Duration::from_millis(deadline_ms);
    let work = AssertUnwindSafe(route(&state, matched, request, peer.ip(), deadline)).catch_unwind();
    let response = match tokio::time::timeout(Duration::from_millis(deadline_ms), work).await {
        Ok(Ok(Ok(response))) => response,
        Ok(Ok(Err(error))) => error.into_response(),
        Ok(Err(_panic)) => ApiError::Internal("the request handler panicked".into()).into_response(),
        Err(_elapsed) => ApiError::Timeout(deadline_ms).into_response(),
    };
    let took = started.elapsed();
    if let Some((index, _)) = routed {
        state.request_times.record(index, took);
    }
    let pattern = routed.map_or("unmatched", |(_, route)| route.pattern);
    crate::metrics::http_request(pattern, method_label(&method), response.status().as_u16(), took);
    tracing::debug!(%method, %path, %peer, status = response.status().as_u16(), micros = started.elapsed().as_micros() as u64, "request");
    response
}

async fn route(
    state: &AppState,
    matched: Option<Matched>,
    request: Request<Incoming>,
    client: IpAddr,
    deadline: Instant,
) -> Result<HttpResponse, ApiError> {
    let (parts, body) = request.into_parts();
    let (method_route, params) = match admit(state, matched, &parts, client) {
        Ok(admitted) => admitted,
        Err(error) => {
            let announced = content_length(&parts.headers);
            discard(body, announced);
            return Ok(refusal(error, announced));
        }
    };
    let body = match read_body(&parts.headers, body, state.config.body_limit_bytes).await {
        Ok(body) => body,
        Err(error @ ApiError::PayloadTooLarge(_)) => return Ok(refusal(error, content_length(&parts.headers))),
        Err(error) => return Err(error),
    };
    if nests_deeper_than(&body, MAX_JSON_DEPTH) {
        return Err(ApiError::validation(format!(
            "the body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"
        )));
    }
    let request = ApiRequest {
        method: parts.method,
        path: parts.uri.path().to_owned(),
        deadline,
        params,
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        body,
    };
    forward::count_received(state, &request);
    if let Some(answer) = forward::by_rule(state, method_route.forward, &request).await {
        return answer;
    }
    (method_route.handler)(state, request).await
}

/// `/healthz`: 200 while the process answers.
async fn healthz(_state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&json!({ "status": "ok" }))
}

/// `/metrics`: the node's Prometheus metrics.
async fn metrics(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    Ok(text_response(state.services.admin.metrics_text()))
}

/// `/readyz`: 200 once the node can answer every request as it should (the event log
/// was replayed before the listener opened; the search index has read the catalog,
/// which after a crash means rebuilt), 503 while it cannot or once shutdown began.
async fn readiness(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    if !state.ready.load(Ordering::SeqCst) {
        return Err(ApiError::Unavailable("shutting down".into()));
    }
    if !state.services.search.is_loaded() {
        return Err(ApiError::Unavailable(
            "the search index is still reading the catalog (rebuilt after a crash)".into(),
        ));
    }
    ok(&json!({ "status": "ready" }))
}

/// The method's route and the path parameters of a request that may go on to its body:
/// 404 (`matched` is the path's route) and 405, then key and scope (401/403),
/// then the key's rate quota (429). A request without a valid key learns nothing
/// about the routes: an unknown path or a wrong method is 401 for it (the probes
/// and `/openapi.json`, which need no key, still answer 405).
fn admit(
    state: &AppState,
    matched: Option<Matched>,
    parts: &hyper::http::request::Parts,
    client: IpAddr,
) -> Result<(&'static MethodRoute, Vec<String>), ApiError> {
    let Some(Matched { route, params, .. }) = matched else {
        auth::identify(state, &parts.headers, client)?;
        return Err(ApiError::NotFound(format!("no route for {}", parts.uri.path())));
    };
    let Some(method_route) = route.method(&parts.method) else {
        if route.needs_a_key() {
            auth::identify(state, &parts.headers, client)?;
        }
        return Err(ApiError::MethodNotAllowed {
            method: parts.method.clone(),
            allowed: route.allowed_methods(),
        });
    };
    if let Some(scope) = method_route.scope {
        let key = auth::authorize(state, &parts.headers, client, scope)?;
        state.limits.check(&key)?;
    }
    Ok((method_route, params))
}

/// Reads the whole body, refusing more than `limit` bytes whether announced by
/// Content-Length or streamed in chunks.
async fn read_body(headers: &HeaderMap, mut body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    let announced = content_length(headers);
    if announced.is_some_and(|length| length > limit as u64) {
        discard(body, announced);
        return Err(ApiError::PayloadTooLarge(limit));
    }
    match Limited::new(&mut body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            discard(body, announced);
            Err(ApiError::PayloadTooLarge(limit))
        }
        Err(error) => Err(ApiError::InvalidCombination(format!(
            "could not read the request body: {error}"
        ))),
    }
}

/// The deepest a request body may nest arrays and objects. serde_json reads at most
/// 128 levels, and a stored record (an event, an item) wraps what was sent in a level
/// or two: a body near 128 levels was accepted, and then could not be read back (a
/// fuzzed event at 127 levels made every retrain fail with a 500).
pub const MAX_JSON_DEPTH: usize = 64;

/// Whether `body` nests arrays and objects more than `limit` levels deep, brackets
/// inside strings aside.
fn nests_deeper_than(body: &[u8], limit: usize) -> bool {
    // Fewer opening brackets than the limit cannot nest past it (a count the compiler
    // vectorises: the exact walk below runs for few bodies).
    if body.iter().filter(|byte| matches!(byte, b'[' | b'{')).count() <= limit {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// The answer to a request refused before its body was read. When [`discard`] will
/// not read that body (it announced more than `DISCARD_LIMIT_BYTES`), hyper closes the
/// connection after the answer: the answer says `Connection: close`, so that a
/// keep-alive client does not send its next request on a connection about to close
/// (and lose it).
fn refusal(error: ApiError, announced: Option<u64>) -> HttpResponse {
    let mut response = error.into_response();
    if announced.is_some_and(|length| length > DISCARD_LIMIT_BYTES) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Most bytes of a refused body that `discard` reads.
const DISCARD_LIMIT_BYTES: u64 = 1 << 20;
/// Longest time `discard` spends on one refused body.
const DISCARD_TIME: Duration = Duration::from_secs(5);

/// Reads what is left of a refused request body in the background, while the
/// error response goes out, and drops it. A socket closed with unread input sends
/// a reset, and the reset can destroy the error response before the client has
/// read it; once the body is read, the connection even stays open for the next
/// request. Bounded in bytes and time: past either, hyper closes the connection.
fn discard(mut body: Incoming, announced: Option<u64>) {
    if body.is_end_stream() || announced.is_some_and(|length| length > DISCARD_LIMIT_BYTES) {
        return;
    }
    tokio::spawn(async move {
        let mut left = DISCARD_LIMIT_BYTES;
        let read_to_end = async {
            while let Some(Ok(frame)) = body.frame().await {
                let read = frame.data_ref().map_or(0, |data| data.len() as u64);
                left = left.checked_sub(read)?;
            }
            Some(())
        };
        let _ = tokio::time::timeout(DISCARD_TIME, read_to_end).await;
    });
}

#[cfg(test)]
mod tests {
    use super::nests_deeper_than;

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert!(!nests_deeper_than(nested(64).as_bytes(), 64));
        assert!(nests_deeper_than(nested(65).as_bytes(), 64));
        let object = format!("{{\"a\": {}}}", nested(64));
        assert!(nests_deeper_than(object.as_bytes(), 64), "65 levels with the object");
        // Brackets in strings, escaped quotes among them, are text.
        let text = format!("{{\"a\": \"\\\"{}\"}}", "[{".repeat(100));
        assert!(!nests_deeper_than(text.as_bytes(), 64), "{text}");
        let siblings = "[[]]".repeat(100);
        assert!(!nests_deeper_than(siblings.as_bytes(), 64), "wide, not deep");
    }
}
