//! Session claims across nodes (see [`crate::domain::session_claim`]): the user's
//! owner asks the sid's owner, with its own node key, through the cluster's
//! transport. Bounded by the connect timeout twice over, so that a node that is down
//! delays the events that claim from it by that at most.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use serde::Deserialize;
use serde_json::json;

use super::transport::{PeerCall, PeerTransport};
use super::{Cluster, KeyHome};
use crate::domain::live_state::LiveState;
use crate::domain::session_claim::{Claimed, SessionClaims};
use crate::topology::ShardId;

/// Where the sid's owner answers a claim (`POST`, `{sid, uid}` → `{state}`).
pub const SESSION_CLAIM_PATH: &str = "/v1/internal/sessions/claim";

/// Claims sessions from the other nodes of the cluster.
pub struct PeerClaims {
    cluster: Arc<Cluster>,
    transport: Arc<dyn PeerTransport>,
    /// `Bearer <this node's key>`.
    authorization: String,
}

impl PeerClaims {
    pub fn new(cluster: Arc<Cluster>, transport: Arc<dyn PeerTransport>, node_secret: &str) -> PeerClaims {
        PeerClaims {
            cluster,
            transport,
            authorization: format!("Bearer {node_secret}"),
        }
    }
}

impl SessionClaims for PeerClaims {
    fn claim(&self, shard: ShardId, sid: &str, uid: &str) -> BoxFuture<'static, Claimed> {
        let (cluster, transport) = (self.cluster.clone(), self.transport.clone());
        let call = PeerCall {
            method: "POST",
            path_and_query: SESSION_CLAIM_PATH.to_owned(),
            headers: vec![("authorization", self.authorization.clone())],
            body: Bytes::from(json!({ "sid": sid, "uid": uid }).to_string()),
            limit: Duration::from_millis(2 * cluster.connect_timeout_ms),
        };
        async move {
            let KeyHome::Remote { node, .. } = cluster.place_shard(shard) else {
                return Err(format!("shard {shard} is this node's"));
            };
            let limit = call.limit;
            let answer = transport
                .call(&node.http, call)
                .await
                .ok_or_else(|| format!("node {:?} did not answer within {limit:?}", node.id))?;
            if answer.status != 200 {
                return Err(format!(
                    "node {:?} answered {}: {}",
                    node.id,
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                ));
            }
            #[derive(Deserialize)]
            struct Answer {
                state: Option<LiveState>,
            }
            let answer: Answer = serde_json::from_slice(&answer.body).map_err(|error| error.to_string())?;
            Ok(answer.state)
        }
        .boxed()
    }
}
