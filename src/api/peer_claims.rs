//! The transport of session claims (see [`crate::domain::session_claim`]): the
//! user's owner asks the sid's owner over HTTP, with its own node key, on the pooled
//! connections forwarding uses. Bounded by the connect timeout twice over, so that a
//! node that is down delays the events that claim from it by that at most.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::forward::Peers;
use super::routes::INTERNAL_SESSION_CLAIM_PATH;
use crate::domain::live_state::LiveState;
use crate::domain::session_claim::{Claimed, SessionClaims};
use crate::service::cluster::{Cluster, KeyHome};
use crate::topology::ShardId;

/// Claims sessions from the other nodes of the cluster.
pub struct PeerClaims {
    cluster: Arc<Cluster>,
    peers: Peers,
    /// `Bearer <this node's key>`.
    authorization: HeaderValue,
}

impl PeerClaims {
    pub fn new(cluster: Arc<Cluster>, node_secret: &str) -> anyhow::Result<PeerClaims> {
        Ok(PeerClaims {
            peers: Peers::new(cluster.connect_timeout_ms),
            authorization: HeaderValue::from_str(&format!("Bearer {node_secret}"))?,
            cluster,
        })
    }
}

impl SessionClaims for PeerClaims {
    fn claim(&self, shard: ShardId, sid: &str, uid: &str) -> BoxFuture<'static, Claimed> {
        let (cluster, peers) = (self.cluster.clone(), self.peers.clone());
        let authorization = self.authorization.clone();
        let body = Bytes::from(json!({ "sid": sid, "uid": uid }).to_string());
        async move {
            let KeyHome::Remote { node, .. } = cluster.place_shard(shard) else {
                return Err(format!("shard {shard} is this node's"));
            };
            let headers = vec![(AUTHORIZATION, authorization)];
            let limit = Duration::from_millis(2 * cluster.connect_timeout_ms);
            let path = INTERNAL_SESSION_CLAIM_PATH;
            let (status, body) = peers
                .request(&node.http, Method::POST, path, headers, body, limit)
                .await
                .ok_or_else(|| format!("node {:?} did not answer within {limit:?}", node.id))?;
            if status != StatusCode::OK {
                return Err(format!(
                    "node {:?} answered {status}: {}",
                    node.id,
                    String::from_utf8_lossy(&body)
                ));
            }
            #[derive(Deserialize)]
            struct Answer {
                state: Option<LiveState>,
            }
            let answer: Answer = serde_json::from_slice(&body).map_err(|error| error.to_string())?;
            Ok(answer.state)
        }
        .boxed()
    }
}
