//! Cluster mode: which node owns a key, and what forwarding and replication did.
//!
//! Every node knows the whole topology. A request that needs a shard's live state is
//! served by the node owning the shard its routing key hashes to (uid, else sid, else
//! conversation id); the HTTP frontend forwards it there when that is another node.
//! With one node, everything is local and nothing here costs a thing.
//!
//! Cluster mode's home: this folder decides (`placement`: where a key is served;
//! `moves`: the live hand-off of shards between epochs; `membership`: which nodes
//! are up, by their heartbeats; `claims`: sessions claimed from their sid's owner,
//! over the `transport` the HTTP frontend gives); the engine's part is
//! `engine::cluster` (fencing, export and import, session claims), the Kafka part
//! `stream::cluster` (the changelog, the topology log and the membership log).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::topology::{Node, Ownership, Phase};

pub mod claims;
pub mod membership;
pub mod moves;
mod placement;
pub mod transport;

use membership::Membership;
pub use placement::KeyHome;

/// This node's view of the cluster.
pub struct Cluster {
    ownership: Arc<Ownership>,
    /// Whether this node runs in a cluster (its topology file names several nodes).
    clustered: bool,
    /// Seconds a 503 `shard_unavailable` asks the client to wait.
    pub retry_after_s: u64,
    /// How long a forwarded request may take at most, in ms.
    pub forward_timeout_ms: u64,
    /// How long connecting to a peer may take, in ms.
    pub connect_timeout_ms: u64,
    /// Counters of forwarding.
    pub stats: ClusterStats,
    /// Which nodes are up, by their heartbeats (fed in a cluster).
    pub membership: Arc<Membership>,
}

/// Requests this node forwarded, and how they ended.
#[derive(Debug, Default)]
pub struct ClusterStats {
    /// Requests (or parts of event batches) sent to their owner.
    pub forwarded: AtomicU64,
    /// Of those, the ones the owner could not be reached for (answered 503).
    pub forward_failures: AtomicU64,
    /// Requests other nodes forwarded here.
    pub received: AtomicU64,
}

impl Cluster {
    /// The cluster as `ownership` says, seen from its node; `clustered` when the node's
    /// topology file names several nodes.
    pub fn new(
        ownership: Arc<Ownership>,
        clustered: bool,
        config: &crate::config::NodeConfig,
        failures: &crate::config::ClusterConfig,
    ) -> Cluster {
        Cluster {
            membership: Arc::new(Membership::new(failures.membership_timeout())),
            ownership,
            clustered,
            retry_after_s: config.retry_after_s,
            forward_timeout_ms: config.forward_timeout_ms,
            connect_timeout_ms: config.connect_timeout_ms,
            stats: ClusterStats::default(),
        }
    }

    /// Whether other nodes exist (requests may need forwarding).
    pub fn is_multi_node(&self) -> bool {
        self.clustered
    }

    /// This node's id.
    pub fn me(&self) -> &str {
        self.ownership.me()
    }

    /// Who owns what now.
    pub fn ownership(&self) -> &Arc<Ownership> {
        &self.ownership
    }

    /// The other nodes of the current topology.
    pub fn peers(&self) -> Vec<Node> {
        let current = self.ownership.current();
        current
            .topology
            .nodes
            .iter()
            .filter(|node| node.id != self.me())
            .cloned()
            .collect()
    }

    /// Counts a forward and how it ended.
    pub fn count_forward(&self, reached: bool) {
        self.stats.forwarded.fetch_add(1, Ordering::Relaxed);
        if !reached {
            self.stats.forward_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The topology and counters for `/v1/admin/stats`.
    pub fn to_json(&self) -> Value {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let current = self.ownership.current();
        let nodes: Vec<Value> = current
            .topology
            .nodes
            .iter()
            .map(|node| json!({ "id": node.id, "http": node.http, "shards": node.shards }))
            .collect();
        let moving: Vec<Value> = current
            .phases
            .iter()
            .filter(|(_, phase)| **phase != Phase::Serving)
            .map(|(shard, phase)| json!({ "shard": shard, "phase": phase }))
            .collect();
        json!({
            "node_id": self.me(),
            "epoch": current.epoch,
            "shards": current.topology.shards,
            "local_shards": self.ownership.serving(),
            "moves": moving,
            "nodes": nodes,
            "members": match self.clustered {
                true => self.membership.to_json(
                    current.topology.nodes.iter().map(|node| node.id.as_str()),
                    tokio::time::Instant::now(),
                ),
                false => Value::Null,
            },
            "forwarded": get(&self.stats.forwarded),
            "forward_failures": get(&self.stats.forward_failures),
            "received_forwards": get(&self.stats.received),
        })
    }
}
