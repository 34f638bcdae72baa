//! Where a key's live state is served: the owner of the shard its routing key hashes
//! to, in the topology of the current epoch.

use super::Cluster;
use crate::topology::{Current, Node, ShardId};

/// Where a key's live state is served.
#[derive(Debug, Clone)]
pub enum KeyHome {
    /// On this node (which may still be restoring the shard: see [`Cluster::wait_serving`]).
    Local,
    /// On another node, the owner of `shard`.
    Remote { node: Node, shard: ShardId },
}

impl Cluster {
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
}
