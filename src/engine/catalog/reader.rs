//! Reads catalog items for the live path (affinity attributes of clicked items)
//! straight from storage, without going through the shard actors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam::channel::Sender;

use compact_str::CompactString;
use dashmap::DashMap;
use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;
use serde_json::{Map, Value};

use super::row_cache::{self, RowCache, RowCacheUse};
use super::{CatalogError, TableRegistry, USERS_TABLE};
use crate::domain::event::Event;
use crate::domain::live_state::affinity_attributes;
use crate::domain::ItemFeatures;
use crate::search::{IndexChange, ItemSource, SourceError};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::shard_for;

/// A read handle on the catalog's items, with the ranking features of the items
/// read so far cached in memory (the catalog shards forget an item they write).
pub struct ItemReader {
    storage: Storage,
    tables: Arc<TableRegistry>,
    shards: u16,
    /// Ranking looks up every candidate here: FxHash, and ids stored inline so that
    /// comparing one does not read another allocation.
    features: DashMap<CompactString, Arc<ItemFeatures>, FxBuildHasher>,
    /// Bumped by every write, so a read that raced with one does not cache a stale row.
    writes: AtomicU64,
    /// Where committed item writes are announced (the search indexer), once subscribed.
    changes: OnceLock<Sender<IndexChange>>,
    /// The rows read most recently through [`ItemReader::row`], decoded (`None`: not
    /// kept). Search reads its best 50 rows per query, and ingest an event's items: a
    /// seek and a decode each, where real traffic repeats its items.
    rows: Option<Mutex<RowCache>>,
}

impl crate::ranking::ItemCatalog for ItemReader {
    fn features(&self, id: &str) -> Option<Arc<ItemFeatures>> {
        ItemReader::features(self, id).ok().flatten()
    }
}

impl ItemReader {
    /// Keeps the rows read last through [`ItemReader::row`], `cached_rows_bytes` of
    /// them (0: none).
    pub fn new(storage: Storage, tables: Arc<TableRegistry>, shards: u16, cached_rows_bytes: usize) -> ItemReader {
        ItemReader {
            storage,
            tables,
            shards,
            features: DashMap::default(),
            writes: AtomicU64::new(0),
            changes: OnceLock::new(),
            rows: (cached_rows_bytes > 0).then(|| Mutex::new(RowCache::new(cached_rows_bytes))),
        }
    }

    /// Sends every committed item change to `changes` from now on (one subscriber).
    pub fn subscribe(&self, changes: Sender<IndexChange>) {
        if self.changes.set(changes).is_err() {
            tracing::warn!("item changes already have a subscriber; ignoring the second");
        }
    }

    /// Called after item `id` of `table` was durably written or deleted.
    pub fn changed(&self, table: &str, id: &str) {
        self.forget(id);
        if let Some(changes) = self.changes.get() {
            // Blocks while the indexer's queue is full (backpressure); fails only once it stopped.
            let _ = changes.send(IndexChange::Item {
                table: table.to_owned(),
                id: id.to_owned(),
            });
        }
    }

    /// Called after a whole table was dropped.
    pub fn table_dropped(&self, table: &str) {
        self.forget_all();
        if let Some(changes) = self.changes.get() {
            let _ = changes.send(IndexChange::Table(table.to_owned()));
        }
    }

    /// The ranking features of item `id` (first table holding it); `None` if unknown.
    pub fn features(&self, id: &str) -> Result<Option<Arc<ItemFeatures>>, CatalogError> {
        if let Some(features) = self.features.get(id) {
            return Ok(Some(features.clone()));
        }
        let writes = self.writes.load(Ordering::Acquire);
        let Some(row) = self.find(id, None)? else {
            return Ok(None);
        };
        let features = Arc::new(ItemFeatures::from_row(&row));
        if self.writes.load(Ordering::Acquire) == writes {
            self.features.insert(CompactString::from(id), features.clone());
        }
        Ok(Some(features))
    }

    /// The rows kept decoded (all zero when none are).
    pub fn cached_rows(&self) -> RowCacheUse {
        self.rows.as_ref().map(|rows| rows.lock().usage()).unwrap_or_default()
    }

    /// A number that changes whenever an item is written or deleted.
    pub fn version(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Called after item `id` was written or deleted.
    pub fn forget(&self, id: &str) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.features.remove(id);
        if let Some(rows) = &self.rows {
            let shard = shard_for(id.as_bytes(), self.shards);
            let keys: Vec<Vec<u8>> = self
                .tables
                .names()
                .iter()
                .map(|table| layout::item(shard, table, id))
                .collect();
            let mut rows = rows.lock();
            for key in keys {
                rows.remove(&key);
            }
        }
    }

    /// Called after a whole table was dropped.
    pub fn forget_all(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.features.clear();
        if let Some(rows) = &self.rows {
            rows.lock().clear();
        }
    }

    /// The fields of `table` the catalog knows (a request may override only these).
    pub fn has_field(&self, table: &str, field: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|record| record.fields.contains_key(field))
    }

    /// Whether an item may have field `name`: a reserved field (`_table`, `is_deleted`,
    /// ...) or a field of some item table.
    pub fn knows_field(&self, name: &str) -> bool {
        super::row_rules::RowKind::Item.is_reserved(name)
            || self
                .tables
                .names()
                .iter()
                .filter(|table| table.as_str() != USERS_TABLE)
                .any(|table| self.has_field(table, name))
    }

    /// The stored item `id` of `table`, or of the first table holding it; `None`
    /// when there is none. A failed or corrupt read is an error, not "no such item".
    pub fn find(&self, id: &str, table: Option<&str>) -> Result<Option<Map<String, Value>>, CatalogError> {
        let shard = shard_for(id.as_bytes(), self.shards);
        self.in_tables(table, |table| {
            let key = layout::item(shard, table, id);
            Ok(self.decode(&key, table, id)?.map(|(row, _)| row))
        })
    }

    /// The stored item `id` of `table`, or of the first table holding it, as
    /// [`ItemReader::find`] reads it, kept decoded among the latest rows read so, until
    /// the item is written again: for the paths that read the same items over and over
    /// (search's best rows, the items of ingested events).
    pub fn row(&self, id: &str, table: Option<&str>) -> Result<Option<Arc<Map<String, Value>>>, CatalogError> {
        let Some(rows) = &self.rows else {
            return Ok(self.find(id, table)?.map(Arc::new));
        };
        let shard = shard_for(id.as_bytes(), self.shards);
        self.in_tables(table, |table| {
            let key = layout::item(shard, table, id);
            if let Some(row) = rows.lock().get(&key) {
                return Ok(Some(row));
            }
            let writes = self.writes.load(Ordering::Acquire);
            let Some((row, stored)) = self.decode(&key, table, id)? else {
                return Ok(None);
            };
            let row = Arc::new(row);
            // A read that raced with a write may hold the row before it: not kept. Checked
            // under the lock, which `forget` takes after counting its write.
            let mut rows = rows.lock();
            if self.writes.load(Ordering::Acquire) == writes {
                rows.put(key, row.clone(), row_cache::weight(stored));
            }
            Ok(Some(row))
        })
    }

    /// What `read` finds in `table`, or in the first item table where it finds something.
    fn in_tables<T>(
        &self,
        table: Option<&str>,
        read: impl Fn(&str) -> Result<Option<T>, CatalogError>,
    ) -> Result<Option<T>, CatalogError> {
        match table {
            Some(table) => read(table),
            None => {
                for name in self.tables.names().iter().filter(|name| name.as_str() != USERS_TABLE) {
                    if let Some(found) = read(name)? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
        }
    }

    /// The row stored at `key` (item `id` of `table`), decoded, with its stored size.
    fn decode(&self, key: &[u8], table: &str, id: &str) -> Result<Option<(Map<String, Value>, usize)>, StorageError> {
        let read = self.storage.read(Cf::Items, key, |bytes| {
            serde_json::from_slice::<Map<String, Value>>(bytes).map(|row| (row, bytes.len()))
        })?;
        read.transpose().map_err(|error| StorageError::Corrupt {
            key: format!("item {id:?} in table {table:?}"),
            reason: error.to_string(),
        })
    }

    /// Whether `table` (an item table, or the users table) holds a row keyed `key`: one
    /// point lookup.
    pub fn row_exists(&self, table: &str, key: &str) -> Result<bool, StorageError> {
        let shard = shard_for(key.as_bytes(), self.shards);
        let found = if table == USERS_TABLE {
            self.storage.get(Cf::Users, &layout::user(shard, key))?
        } else {
            self.storage.get(Cf::Items, &layout::item(shard, table, key))?
        };
        Ok(found.is_some())
    }

    /// Calls `visit` with every stored item of every table (users live elsewhere).
    pub fn scan_items(&self, visit: &mut dyn FnMut(Map<String, Value>)) -> Result<(), StorageError> {
        for entry in self.storage.scan_prefix(Cf::Items, &[]) {
            let (key, value) = entry?;
            match serde_json::from_slice(&value) {
                Ok(row) => visit(row),
                Err(error) => {
                    tracing::warn!(key = %String::from_utf8_lossy(&key), %error, "skipping an unreadable stored item")
                }
            }
        }
        Ok(())
    }

    /// The affinity keys of every item an event is about.
    /// An item that cannot be read adds no keys; the failure is logged (the event is
    /// already durable and applied all the same).
    pub fn affinity_attributes(&self, event: &Event) -> Vec<String> {
        let mut keys = Vec::new();
        for id in event.items() {
            match self.row(id, event.item_id_relation.as_deref()) {
                Ok(Some(item)) => keys.extend(affinity_attributes(&item)),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, event = %event.id, item = id, "item unreadable; the event adds no affinities for it")
                }
            }
        }
        keys
    }
}

/// The search indexer reads the catalog through this.
impl ItemSource for ItemReader {
    fn row(&self, table: &str, id: &str) -> Result<Option<Map<String, Value>>, SourceError> {
        self.find(id, Some(table))
            .map_err(|error| SourceError(error.to_string()))
    }

    fn scan(&self, visit: &mut dyn FnMut(Map<String, Value>)) -> Result<(), SourceError> {
        self.scan_items(visit).map_err(|error| SourceError(error.to_string()))
    }
}
