//! Forwarding between the nodes of a cluster: a request that needs another node's
//! live state is sent there as it came (method, path, body, key), over pooled
//! keep-alive connections, with what is left of the caller's deadline; the owner's
//! answer goes back unchanged, so a client cannot tell which node served it. A node
//! that cannot be reached in time answers 503 `shard_unavailable` with `Retry-After`.
//!
//! The owner of a key is the service layer's decision ([`Cluster::place`]); this
//! module is only the transport, so it lives with the other HTTP code.
//!
//! [`Cluster::place`]: crate::service::cluster::Cluster::place

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde_json::Value;

use super::routes::Forward;
use super::{ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::cluster::transport::{PeerAnswer, PeerCall, PeerTransport};
use crate::service::cluster::{Cluster, KeyHome};
use crate::topology::Node;

/// Names the node that forwarded a request; its receiver serves it locally or not at all.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("x-rankstream-forwarded-by");
/// Milliseconds left of the caller's deadline when the request was forwarded.
pub const DEADLINE_MS: HeaderName = HeaderName::from_static("x-rankstream-deadline-ms");
/// Names the session whose claim sent this request on: its sid's owner forwarded it to
/// the node of the user that claimed the session, which serves it.
pub const VIA_SESSION: HeaderName = HeaderName::from_static("x-rankstream-via-session");

/// Pooled keep-alive connections to the other nodes.
#[derive(Clone)]
pub struct Peers {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Peers {
    pub fn new(connect_timeout_ms: u64) -> Peers {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_millis(connect_timeout_ms)));
        let client = Client::builder(TokioExecutor::new())
            // Shorter than a node keeps an idle connection open (server.request_timeout_ms
            // by default), so a request is not written to a connection being closed.
            .pool_idle_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(64)
            .build(connector);
        Peers { client }
    }

    /// Sends `method path` with `body` to `node` with the caller's key (and `extra`, a
    /// header of the cluster's own), and answers the node's response, or `None` when the
    /// node could not be reached before `deadline`.
    #[allow(clippy::too_many_arguments)]
    pub async fn send(
        &self,
        cluster: &Cluster,
        node: &Node,
        method: Method,
        path_and_query: &str,
        key: Option<&HeaderValue>,
        body: Bytes,
        deadline: Instant,
        extra: Option<(HeaderName, HeaderValue)>,
    ) -> Option<(StatusCode, Bytes)> {
        let limit = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(cluster.forward_timeout_ms));
        let mut headers = vec![
            (FORWARDED_BY, HeaderValue::from_str(cluster.me()).ok()?),
            (DEADLINE_MS, HeaderValue::from(limit.as_millis() as u64)),
        ];
        headers.extend(key.map(|key| (AUTHORIZATION, key.clone())));
        headers.extend(extra);
        let answer = self
            .request(&node.http, method, path_and_query, headers, body, limit)
            .await;
        cluster.count_forward(answer.is_some());
        if answer.is_none() {
            tracing::warn!(node = %node.id, path = path_and_query, "forwarding failed: the node did not answer in time");
        }
        answer
    }

    /// `GET path` on `http` (an `IP:PORT`) with an optional key: the status and the JSON
    /// body, or `None` when the node did not answer within `limit`. For the CLI.
    pub async fn get_json(&self, http: &str, path: &str, key: Option<&str>, limit: Duration) -> Option<(u16, Value)> {
        let headers = key
            .and_then(|key| HeaderValue::from_str(&format!("Bearer {key}")).ok())
            .map(|value| (AUTHORIZATION, value))
            .into_iter()
            .collect();
        let (status, body) = self
            .request(http, Method::GET, path, headers, Bytes::new(), limit)
            .await?;
        Some((status.as_u16(), serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// `method path` with a JSON `body` on `http` (an `IP:PORT`) with a bearer key: the
    /// status, the `Retry-After` seconds if any, and the JSON body (`Null` if it is
    /// not JSON); `None` when the node did not answer within `limit`. For the CLI.
    pub async fn call_json(
        &self,
        http: &str,
        method: &str,
        path: &str,
        key: &str,
        body: Vec<u8>,
        limit: Duration,
    ) -> Option<(u16, Option<u64>, Value)> {
        let request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).ok()?)
            .uri(format!("http://{http}{path}"))
            .header(CONTENT_TYPE, "application/json")
            .header(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {key}")).ok()?)
            .body(Full::new(Bytes::from(body)))
            .ok()?;
        let exchange = async {
            let response = self.client.request(request).await.ok()?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|value| value.to_str().ok()?.parse().ok());
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((
                status,
                retry_after,
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        };
        tokio::time::timeout(limit, exchange).await.ok().flatten()
    }

    /// One request to `http` (an `IP:PORT`); `None` when no whole answer came within `limit`.
    pub async fn request(
        &self,
        http: &str,
        method: Method,
        path_and_query: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        body: Bytes,
        limit: Duration,
    ) -> Option<(StatusCode, Bytes)> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("http://{http}{path_and_query}"))
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(body)).ok()?;
        let exchange = async {
            let response = self.client.request(request).await.ok()?;
            let status = response.status();
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, body))
        };
        tokio::time::timeout(limit, exchange).await.ok().flatten()
    }
}

impl PeerTransport for Peers {
    fn call(&self, http: &str, call: PeerCall) -> futures::future::BoxFuture<'static, Option<PeerAnswer>> {
        let (peers, http) = (self.clone(), http.to_owned());
        Box::pin(async move {
            let method = Method::from_bytes(call.method.as_bytes()).ok()?;
            let headers = call
                .headers
                .into_iter()
                .map(|(name, value)| {
                    Some((
                        HeaderName::from_bytes(name.as_bytes()).ok()?,
                        HeaderValue::from_str(&value).ok()?,
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            let (status, body) = peers
                .request(&http, method, &call.path_and_query, headers, call.body, call.limit)
                .await?;
            Some(PeerAnswer {
                status: status.as_u16(),
                body,
            })
        })
    }
}

/// The caller's key as presented, to be presented again to the owner.
pub fn presented_key(request: &ApiRequest) -> Option<HeaderValue> {
    if let Some(value) = request.headers.get(AUTHORIZATION) {
        return Some(value.clone());
    }
    let secret = request.headers.get("x-api-key")?.to_str().ok()?;
    HeaderValue::from_str(&format!("Bearer {}", secret.trim())).ok()
}

/// Whether another node forwarded this request (it is then served here or refused).
pub fn was_forwarded(request: &ApiRequest) -> bool {
    request.headers.contains_key(FORWARDED_BY)
}

/// 503 `shard_unavailable` for a node that could not serve.
pub fn unavailable(cluster: &Cluster, node: &Node) -> ApiError {
    ApiError::ShardUnavailable {
        message: format!(
            "node {:?} ({}), which owns the shard of this key, is not answering; retry later",
            node.id, node.http
        ),
        retry_after_s: cluster.retry_after_s,
    }
}

/// What is kept of a request's deadline for its work once a moving shard is served:
/// a request that waited for the move that long is answered 503 `shard_unavailable`
/// (with `Retry-After`) before its deadline, not 408 at it.
const AFTER_MOVE_WAIT: Duration = Duration::from_secs(2);

/// Until when a request may wait for a shard this node is taking over.
pub fn move_wait_until(request: &ApiRequest) -> tokio::time::Instant {
    let until = request
        .deadline
        .checked_sub(AFTER_MOVE_WAIT)
        .unwrap_or(request.deadline);
    tokio::time::Instant::from_std(until)
}

/// 503 `shard_unavailable` for a key whose shard this node is still taking over.
pub fn moving(cluster: &Cluster) -> ApiError {
    ApiError::ShardUnavailable {
        message: "the shard of this key is moving to this node and is not served yet; retry later".into(),
        retry_after_s: cluster.retry_after_s,
    }
}

/// Sends the request to `node` as it came and answers with the node's response.
pub async fn to_node(state: &AppState, node: &Node, request: &ApiRequest) -> Result<HttpResponse, ApiError> {
    to_node_with(state, node, request, None).await
}

/// [`to_node`], with a header of the cluster's own.
async fn to_node_with(
    state: &AppState,
    node: &Node,
    request: &ApiRequest,
    extra: Option<(HeaderName, HeaderValue)>,
) -> Result<HttpResponse, ApiError> {
    let cluster = &state.services.cluster;
    let path = match &request.query {
        Some(query) => format!("{}?{query}", request.path),
        None => request.path.clone(),
    };
    let answer = state
        .peers
        .send(
            cluster,
            node,
            request.method.clone(),
            &path,
            presented_key(request).as_ref(),
            request.body.clone(),
            request.deadline,
            extra,
        )
        .await;
    let (status, body) = answer.ok_or_else(|| unavailable(cluster, node))?;
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(RETRY_AFTER, HeaderValue::from(cluster.retry_after_s));
    }
    Ok(response)
}

/// `None` when the live state of `key` is served here (or there is no key); else the
/// owner's answer to the forwarded request. A request another node forwarded is never
/// forwarded again: if this node does not own the key either, the topologies of the
/// two nodes disagree and the request is refused with 503. One the owner of a claimed
/// session sent on ([`to_claimant`]) is served here.
pub async fn to_owner(
    state: &AppState,
    request: &ApiRequest,
    key: Option<&str>,
) -> Option<Result<HttpResponse, ApiError>> {
    let cluster = &state.services.cluster;
    let key = key?;
    if request.headers.contains_key(VIA_SESSION) {
        return None;
    }
    match cluster.place(key) {
        // A shard this node is taking over in a move: wait for it within the deadline.
        KeyHome::Local => match cluster.wait_serving(key, move_wait_until(request)).await {
            true => None,
            false => Some(Err(moving(cluster))),
        },
        KeyHome::Remote { node, shard } if was_forwarded(request) => Some(Err(ApiError::ShardUnavailable {
            message: format!(
                "shard {shard} is owned by node {:?} in this node's topology; the forwarding node's topology differs",
                node.id
            ),
            retry_after_s: cluster.retry_after_s,
        })),
        KeyHome::Remote { node, .. } => Some(to_node(state, &node, request).await),
    }
}

/// The owner's answer when the route's forwarding rule (`rule`) says another node
/// serves the request: ranking, search and chat by the key their body names
/// ([`body_routing_key`]), a user's state and deletion by the uid in the path. `None`:
/// serve here. One node reads nothing.
pub async fn by_rule(state: &AppState, rule: Forward, request: &ApiRequest) -> Option<Result<HttpResponse, ApiError>> {
    if !state.services.cluster.is_multi_node() {
        return None;
    }
    match rule {
        Forward::Here => None,
        Forward::ByBodyKey => {
            let key = body_routing_key(request)?;
            if let Some(answer) = to_owner(state, request, Some(key.id())).await {
                return Some(answer);
            }
            match key {
                RoutingKey::Session(sid) => to_claimant(state, request, &sid).await,
                RoutingKey::User(_) | RoutingKey::Conversation(_) => None,
            }
        }
        Forward::ByPathUid => to_owner(state, request, request.params.first().map(String::as_str)).await,
    }
}

/// For a request naming only session `sid`, on the node owning the sid's shard: when
/// another node claimed the session for a user it owns (the session's state lives with
/// the user's since), that node's answer. `None`: serve here.
pub async fn to_claimant(state: &AppState, request: &ApiRequest, sid: &str) -> Option<Result<HttpResponse, ApiError>> {
    if request.headers.contains_key(VIA_SESSION) {
        return None;
    }
    let uid = match state.services.events.session_claimed_by(sid) {
        Ok(uid) => uid?,
        Err(error) => return Some(Err(error.into())),
    };
    let KeyHome::Remote { node, .. } = state.services.cluster.place(&uid) else {
        return None;
    };
    let via = HeaderValue::from_str(sid).ok()?;
    Some(to_node_with(state, &node, request, Some((VIA_SESSION, via))).await)
}

/// Which live state a ranking, search or chat request is about.
#[derive(Debug, PartialEq)]
pub enum RoutingKey {
    User(String),
    Session(String),
    Conversation(String),
}

impl RoutingKey {
    pub fn id(&self) -> &str {
        match self {
            RoutingKey::User(id) | RoutingKey::Session(id) | RoutingKey::Conversation(id) => id,
        }
    }
}

/// The routing key a ranking, search or chat body names: `user_id`, else
/// `session_id`, else (chat) `conversation_id`. Reads nothing else; a body that is
/// not an object of strings there has no key, and is refused where it is decoded.
pub fn body_routing_key(request: &ApiRequest) -> Option<RoutingKey> {
    #[derive(Deserialize)]
    struct Ids {
        user_id: Option<Value>,
        session_id: Option<Value>,
        conversation_id: Option<Value>,
    }
    let ids: Ids = serde_json::from_slice(&request.body).ok()?;
    let text = |value: Option<Value>| match value {
        Some(Value::String(id)) if !id.is_empty() => Some(id),
        _ => None,
    };
    text(ids.user_id)
        .map(RoutingKey::User)
        .or_else(|| text(ids.session_id).map(RoutingKey::Session))
        .or_else(|| text(ids.conversation_id).map(RoutingKey::Conversation))
}

/// For reads by an id that does not name its shard (an event, a session): this
/// node's answer when it is not 404, else the first other node's that is not 404.
/// Another node down while none had it: 503.
pub async fn first_found(
    state: &AppState,
    request: &ApiRequest,
    local: Result<HttpResponse, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let cluster = &state.services.cluster;
    if !matches!(local, Err(ApiError::NotFound(_))) || was_forwarded(request) || !cluster.is_multi_node() {
        return local;
    }
    let mut down = None;
    for node in cluster.peers() {
        match to_node(state, &node, request).await {
            Ok(response) if response.status() == StatusCode::NOT_FOUND => {}
            Ok(response) => return Ok(response),
            Err(error) => down = Some(error),
        }
    }
    match down {
        Some(error) => Err(error),
        None => local,
    }
}

/// Counts a request another node forwarded here.
pub fn count_received(state: &AppState, request: &ApiRequest) {
    if was_forwarded(request) {
        state.services.cluster.stats.received.fetch_add(1, Ordering::Relaxed);
    }
}
