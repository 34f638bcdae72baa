//! Reads catalog items for the live path (affinity attributes of clicked items)
//! straight from storage, without going through the shard actors.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{TableRegistry, USERS_TABLE};
use crate::engine::event::Event;
use crate::engine::live_state::affinity_keys;
use crate::storage::{keys, Cf, Storage};
use crate::topology::shard_for;

/// A read handle on the catalog's items.
pub struct ItemReader {
    storage: Storage,
    tables: Arc<TableRegistry>,
    shards: u16,
}

impl ItemReader {
    pub fn new(storage: Storage, tables: Arc<TableRegistry>, shards: u16) -> ItemReader {
        ItemReader {
            storage,
            tables,
            shards,
        }
    }

    /// The stored item `id` of `table`, or of the first table holding it.
    pub fn find(&self, id: &str, table: Option<&str>) -> Option<Map<String, Value>> {
        let shard = shard_for(id.as_bytes(), self.shards);
        let read = |table: &str| -> Option<Map<String, Value>> {
            let bytes = self.storage.get(Cf::Items, &keys::item(shard, table, id)).ok()??;
            serde_json::from_slice(&bytes).ok()
        };
        match table {
            Some(table) => read(table),
            None => self
                .tables
                .names()
                .iter()
                .filter(|name| name.as_str() != USERS_TABLE)
                .find_map(|name| read(name)),
        }
    }

    /// The affinity keys of every item an event is about.
    pub fn affinity_keys(&self, event: &Event) -> Vec<String> {
        event
            .items()
            .filter_map(|id| self.find(id, event.item_id_relation.as_deref()))
            .flat_map(|item| affinity_keys(&item))
            .collect()
    }
}
