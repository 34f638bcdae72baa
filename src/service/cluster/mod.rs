//! Cluster mode: which node owns a key, and what forwarding and replication did.
//!
//! Every node knows the whole topology. A request that needs a shard's live state is
//! served by the node owning the shard its routing key hashes to (uid, else sid, else
//! conversation id); the HTTP frontend forwards it there when that is another node.
//! With one node, everything is local and nothing here costs a thing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::topology::{Current, Node, Ownership, Phase, ShardId};

/// Where a key's live state is served.
#[derive(Debug, Clone)]
pub enum KeyHome {
    /// On this node (which may still be restoring the shard: see [`Cluster::wait_serving`]).
    Local,
    /// On another node, the owner of `shard`.
    Remote { node: Node, shard: ShardId },
}

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
    pub fn new(ownership: Arc<Ownership>, clustered: bool, config: &crate::config::NodeConfig) -> Cluster {
        Cluster {
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

    /// Where the live state of a routing key is served.
    pub fn place(&self, key: &str) -> KeyHome {
        if !self.is_multi_node() {
            return KeyHome::Local;
        }
        let current = self.ownership.current();
        self.place_in(&current, current.topology.shard_for(key.as_bytes()))
    }

    /// Where a shard's live state is served.
    pub fn place_shard(&self, shard: ShardId) -> KeyHome {
        self.place_in(&self.ownership.current(), shard)
    }

    fn place_in(&self, current: &Current, shard: ShardId) -> KeyHome {
        match current.owner_of(shard) {
            owner if owner.id == self.me() => KeyHome::Local,
            owner => KeyHome::Remote {
                node: owner.clone(),
                shard,
            },
        }
    }

    /// For a key placed here: waits (until `until`) while its shard is still being
    /// restored by a move; whether it is served here now.
    pub async fn wait_serving(&self, key: &str, until: tokio::time::Instant) -> bool {
        if !self.is_multi_node() {
            return true;
        }
        let shard = self.ownership.current().topology.shard_for(key.as_bytes());
        self.ownership.wait_serving(shard, until).await
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
            "forwarded": get(&self.stats.forwarded),
            "forward_failures": get(&self.stats.forward_failures),
            "received_forwards": get(&self.stats.received),
        })
    }
}
