//! Calls from this node to another, as cluster mode decides them: a request and its
//! answer, whatever carries them. The HTTP frontend gives the transport
//! (`api::Peers`, over its pooled keep-alive connections), so the decisions here stay
//! free of HTTP.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

/// One request to another node.
#[derive(Debug, Clone)]
pub struct PeerCall {
    /// `GET`, `POST`, ...
    pub method: &'static str,
    pub path_and_query: String,
    /// Headers besides the content type (JSON), by lower-case name, e.g. `authorization`.
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
    /// The whole exchange's time limit.
    pub limit: Duration,
}

/// Another node's answer.
#[derive(Debug, Clone)]
pub struct PeerAnswer {
    pub status: u16,
    pub body: Bytes,
}

/// Carries calls to the other nodes.
pub trait PeerTransport: Send + Sync {
    /// Sends `call` to the node listening on `http` (an `IP:PORT`); `None` when no
    /// whole answer came within its limit.
    fn call(&self, http: &str, call: PeerCall) -> BoxFuture<'static, Option<PeerAnswer>>;
}
