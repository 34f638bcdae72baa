//! Cluster mode: which node owns a key, and what forwarding and replication did.
//!
//! Every node knows the whole topology. A request that needs a shard's live state is
//! served by the node owning the shard its routing key hashes to (uid, else sid, else
//! conversation id); the HTTP frontend forwards it there when that is another node.
//! With one node, everything is local and nothing here costs a thing.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::topology::{Node, ShardId, Topology};

/// Where a key's live state is served.
#[derive(Debug, Clone, Copy)]
pub enum Placement<'a> {
    /// On this node.
    Local,
    /// On another node, the owner of `shard`.
    Remote { node: &'a Node, shard: ShardId },
}

/// This node's view of the cluster.
pub struct Cluster {
    topology: Topology,
    /// This node's index in `topology.nodes`.
    me: usize,
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
    /// The cluster of `topology`, seen from node `me`.
    pub fn new(topology: Topology, me: usize, config: &crate::config::NodeConfig) -> Cluster {
        Cluster {
            topology,
            me,
            retry_after_s: config.retry_after_s,
            forward_timeout_ms: config.forward_timeout_ms,
            connect_timeout_ms: config.connect_timeout_ms,
            stats: ClusterStats::default(),
        }
    }

    /// Whether other nodes exist (requests may need forwarding).
    pub fn is_multi_node(&self) -> bool {
        self.topology.nodes.len() > 1
    }

    /// This node.
    pub fn me(&self) -> &Node {
        &self.topology.nodes[self.me]
    }

    /// The other nodes.
    pub fn peers(&self) -> impl Iterator<Item = &Node> {
        let me = self.me;
        self.topology
            .nodes
            .iter()
            .enumerate()
            .filter(move |(index, _)| *index != me)
            .map(|(_, node)| node)
    }

    /// Where the live state of a routing key is served.
    pub fn place(&self, key: &str) -> Placement<'_> {
        if !self.is_multi_node() {
            return Placement::Local;
        }
        self.place_shard(self.topology.shard_for(key.as_bytes()))
    }

    /// Where a shard's live state is served.
    pub fn place_shard(&self, shard: ShardId) -> Placement<'_> {
        match self.topology.owner_of(shard) {
            owner if owner == self.me => Placement::Local,
            owner => Placement::Remote {
                node: &self.topology.nodes[owner],
                shard,
            },
        }
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
        let nodes: Vec<Value> = self
            .topology
            .nodes
            .iter()
            .map(|node| json!({ "id": node.id, "http": node.http, "shards": node.shards }))
            .collect();
        json!({
            "node_id": self.me().id,
            "shards": self.topology.shards,
            "local_shards": self.me().shards,
            "nodes": nodes,
            "forwarded": get(&self.stats.forwarded),
            "forward_failures": get(&self.stats.forward_failures),
            "received_forwards": get(&self.stats.received),
        })
    }
}
