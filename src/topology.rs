//! Shards and nodes: which shard a key hashes to and which node owns it.
//!
//! The hash is Kafka's Java default partitioner (murmur2 of the key bytes, made
//! positive, modulo the shard count), so an external producer keying events by user
//! id with the standard partitioner lands on the owning shard.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The embedded default: one node owning 8 shards.
pub const SINGLE_TOML: &str = include_str!("../topology/single.toml");

/// Index of a shard, `0..shards`.
pub type ShardId = u16;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    shards: u16,
    node: Vec<NodeFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    id: String,
    http: String,
    shards: String,
}

/// One node of the cluster and the shards it owns.
#[derive(Debug, Clone)]
pub struct Node {
    /// Stable name of the node.
    pub id: String,
    /// Address other nodes forward requests to.
    pub http: String,
    /// Shards this node owns.
    pub shards: Vec<ShardId>,
}

/// The fixed shard count and the assignment of shards to nodes.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Number of shards, fixed for the life of a data set.
    pub shards: u16,
    /// Nodes; every shard is owned by exactly one.
    pub nodes: Vec<Node>,
    /// The text it was parsed from (what `cluster apply` publishes).
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid topology: {0}")]
pub struct TopologyError(String);

impl Topology {
    /// Parses and checks a topology file's text.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let file: TopologyFile = toml::from_str(text).map_err(|error| TopologyError(error.to_string()))?;
        if file.shards == 0 {
            return Err(TopologyError("shards must be > 0".into()));
        }
        if file.node.is_empty() {
            return Err(TopologyError("no [[node]] is listed".into()));
        }
        let mut owner = vec![None::<usize>; file.shards as usize];
        let mut nodes: Vec<Node> = Vec::new();
        for (index, node) in file.node.into_iter().enumerate() {
            if node.id.trim().is_empty() {
                return Err(TopologyError(format!("node {index} has an empty id")));
            }
            if nodes.iter().any(|other| other.id == node.id) {
                return Err(TopologyError(format!("node id {:?} is listed twice", node.id)));
            }
            if node.http.parse::<std::net::SocketAddr>().is_err() {
                return Err(TopologyError(format!(
                    "node {:?}: http {:?} is not an IP:PORT address",
                    node.id, node.http
                )));
            }
            let shards = parse_ranges(&node.shards, file.shards)?;
            for &shard in &shards {
                if let Some(other) = owner[shard as usize].replace(index) {
                    let other = &nodes.get(other).map_or(node.id.as_str(), |n| n.id.as_str());
                    return Err(TopologyError(format!(
                        "shard {shard} is owned by node {other:?} and node {:?}; every shard needs exactly one owner",
                        node.id
                    )));
                }
            }
            nodes.push(Node {
                id: node.id,
                http: node.http,
                shards,
            });
        }
        let orphans: Vec<String> = owner
            .iter()
            .enumerate()
            .filter(|(_, owner)| owner.is_none())
            .map(|(shard, _)| shard.to_string())
            .collect();
        if !orphans.is_empty() {
            return Err(TopologyError(format!(
                "shard(s) {} have no node; every shard needs exactly one owner",
                orphans.join(", ")
            )));
        }
        Ok(Topology {
            shards: file.shards,
            nodes,
            text: text.to_owned(),
        })
    }

    /// The shard a routing key belongs to.
    pub fn shard_for(&self, key: &[u8]) -> ShardId {
        shard_for(key, self.shards)
    }

    /// The index of the node this process is: the one named `id`, or the only node when
    /// `id` is empty and there is just one.
    pub fn node_index(&self, id: &str) -> Result<usize, TopologyError> {
        if id.is_empty() {
            return match self.nodes.len() {
                1 => Ok(0),
                n => Err(TopologyError(format!(
                    "the topology has {n} nodes; say which one this is with --node-id (or node.id)"
                ))),
            };
        }
        self.nodes.iter().position(|node| node.id == id).ok_or_else(|| {
            let known: Vec<&str> = self.nodes.iter().map(|node| node.id.as_str()).collect();
            TopologyError(format!(
                "node id {id:?} is not in the topology (nodes: {})",
                known.join(", ")
            ))
        })
    }

    /// The node named `id`, if the topology lists it.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The index of the node owning `shard`.
    pub fn owner_of(&self, shard: ShardId) -> usize {
        self.nodes
            .iter()
            .position(|node| node.shards.contains(&shard))
            .expect("a parsed topology gives every shard an owner")
    }
}

/// What a shard of this node is doing in a live move (see `service::cluster::moves`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Owned and served here.
    Serving,
    /// Given to this node by the current epoch; its state is being restored here.
    Restoring,
    /// Taken from this node by the current epoch; its state is being handed off.
    Releasing,
}

/// The topology a node follows now (the latest epoch it has seen) and the phase of each
/// shard it owns or is handing off. Shared by the engine, the stream tasks and the HTTP
/// frontend; every change wakes those that wait on it.
pub struct Ownership {
    me: String,
    current: RwLock<Arc<Current>>,
    changed: watch::Sender<u64>,
}

/// One state of [`Ownership`].
#[derive(Debug, Clone)]
pub struct Current {
    /// 0 for the topology a node was started with; `cluster apply` publishes 1, 2, ...
    pub epoch: u64,
    pub topology: Arc<Topology>,
    /// Shards this node owns or hands off, and their phase.
    pub phases: BTreeMap<ShardId, Phase>,
}

impl Ownership {
    /// Node `me` following `topology` at `epoch`, serving `serving`.
    pub fn new(me: &str, epoch: u64, topology: Topology, serving: &[ShardId]) -> Arc<Ownership> {
        let phases = serving.iter().map(|&shard| (shard, Phase::Serving)).collect();
        let current = Current {
            epoch,
            topology: Arc::new(topology),
            phases,
        };
        Arc::new(Ownership {
            me: me.to_owned(),
            current: RwLock::new(Arc::new(current)),
            changed: watch::channel(0).0,
        })
    }

    /// This node's id.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The current state (a snapshot: later changes do not alter it).
    pub fn current(&self) -> Arc<Current> {
        self.current.read().clone()
    }

    /// The shards served here now.
    pub fn serving(&self) -> Vec<ShardId> {
        let current = self.current();
        current
            .phases
            .iter()
            .filter(|(_, phase)| **phase == Phase::Serving)
            .map(|(&shard, _)| shard)
            .collect()
    }

    /// Whether `shard` is served here now.
    pub fn is_serving(&self, shard: ShardId) -> bool {
        self.current.read().phases.get(&shard) == Some(&Phase::Serving)
    }

    /// Changes the state with `change` and wakes the waiters.
    pub fn update(&self, change: impl FnOnce(&mut Current)) {
        let mut current = self.current.write();
        let mut next = (**current).clone();
        change(&mut next);
        *current = Arc::new(next);
        drop(current);
        self.changed.send_modify(|version| *version += 1);
    }

    /// Waits until `shard` is served here or `until` passes; whether it is.
    pub async fn wait_serving(&self, shard: ShardId, until: tokio::time::Instant) -> bool {
        let mut changes = self.changed.subscribe();
        loop {
            if self.is_serving(shard) {
                return true;
            }
            match tokio::time::timeout_at(until, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.is_serving(shard),
            }
        }
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

impl Current {
    /// The shards node `id` owns in this epoch's topology (none if it is not named).
    pub fn owner_shards(&self, id: &str) -> Vec<ShardId> {
        self.topology
            .node(id)
            .map(|node| node.shards.clone())
            .unwrap_or_default()
    }

    /// The node owning `shard` in this epoch's topology.
    pub fn owner_of(&self, shard: ShardId) -> &Node {
        &self.topology.nodes[self.topology.owner_of(shard)]
    }
}

/// Kafka's default partitioner: `(murmur2(key) & 0x7fffffff) % shards`.
pub fn shard_for(key: &[u8], shards: u16) -> ShardId {
    let hash = murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff;
    (hash % u32::from(shards)) as ShardId
}

/// Parses `"0-7,9,12-13"`.
fn parse_ranges(text: &str, shards: u16) -> Result<Vec<ShardId>, TopologyError> {
    let bad = || TopologyError(format!("bad shard list {text:?}"));
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u16>(), b.trim().parse::<u16>()),
            None => (part.parse::<u16>(), part.parse::<u16>()),
        };
        let (first, last) = (first.map_err(|_| bad())?, last.map_err(|_| bad())?);
        if first > last || last >= shards {
            return Err(bad());
        }
        out.extend(first..=last);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_topology_owns_every_shard() {
        let topology = Topology::parse(SINGLE_TOML).unwrap();
        assert_eq!(topology.shards, 8);
        assert_eq!(topology.nodes[0].shards, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn overlapping_and_missing_shards_are_refused() {
        let overlap = "shards = 2\n[[node]]\nid='a'\nhttp='x'\nshards='0-1'\n[[node]]\nid='b'\nhttp='y'\nshards='1'\n";
        assert!(Topology::parse(overlap).is_err());
        let missing = "shards = 3\n[[node]]\nid='a'\nhttp='127.0.0.1:1'\nshards='0-1'\n";
        let error = Topology::parse(missing).unwrap_err().to_string();
        assert!(error.contains("shard(s) 2 have no node"), "{error}");
    }

    #[test]
    fn overlaps_name_both_nodes_and_node_ids_resolve() {
        let overlap = "shards = 2\n[[node]]\nid='a'\nhttp='127.0.0.1:1'\nshards='0-1'\n[[node]]\nid='b'\nhttp='127.0.0.1:2'\nshards='1'\n";
        let error = Topology::parse(overlap).unwrap_err().to_string();
        assert!(
            error.contains("shard 1 is owned by node \"a\" and node \"b\""),
            "{error}"
        );
        let three = Topology::parse(include_str!("../topology/three-nodes.toml")).unwrap();
        assert_eq!(three.node_index("b").unwrap(), 1);
        assert_eq!(three.owner_of(23), 2);
        assert!(three.node_index("").unwrap_err().to_string().contains("--node-id"));
        assert!(three.node_index("z").unwrap_err().to_string().contains("a, b, c"));
        assert_eq!(Topology::parse(SINGLE_TOML).unwrap().node_index("").unwrap(), 0);
    }

    #[test]
    fn kafka_partitioner_vectors() {
        // Values of Kafka's `Utils.toPositive(Utils.murmur2(key)) % 8` are spread and stable.
        let hashes: Vec<u32> = ["21", "foobar", "a-little-bit-long-string"]
            .iter()
            .map(|k| murmur2::murmur2(k.as_bytes(), murmur2::KAFKA_SEED))
            .collect();
        // Reference values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(hashes[0] as i32, -973932308);
        assert_eq!(hashes[1] as i32, -790332482);
        assert_eq!(hashes[2] as i32, -985981536);
    }
}
