//! The router between shard hosts: every host's address, so that a host can hand
//! a session's events to the host of the sid's shard.

use std::sync::{Arc, OnceLock};

use actix::Addr;

use super::ShardHost;
use crate::topology::{shard_for, ShardId};

/// Every shard's host, so hosts can reach each other.
pub struct HostRouter {
    hosts: OnceLock<Vec<Addr<ShardHost>>>,
    shards: u16,
}

impl HostRouter {
    pub fn new(shards: u16) -> Arc<HostRouter> {
        Arc::new(HostRouter {
            hosts: OnceLock::new(),
            shards,
        })
    }

    /// Called once, after every host started.
    pub fn set(&self, hosts: Vec<Addr<ShardHost>>) {
        assert!(self.hosts.set(hosts).is_ok(), "host router set twice");
    }

    pub fn host(&self, shard: ShardId) -> &Addr<ShardHost> {
        &self.hosts.get().expect("hosts are set before any message")[shard as usize]
    }

    pub fn all(&self) -> &[Addr<ShardHost>] {
        self.hosts.get().expect("hosts are set before any message")
    }

    pub fn shard_of(&self, key: &str) -> ShardId {
        shard_for(key.as_bytes(), self.shards)
    }
}
