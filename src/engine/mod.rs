//! The engine: shard actors, the router from keys to shards, and the read handles
//! the request path uses without queueing behind writes.
//!
//! Writes go key → shard → that shard's actor; reads of stored rows and table
//! records go straight to the shared handles (RocksDB, the table registry).

pub mod catalog;
mod catalog_shard;

use std::sync::Arc;

use actix::{Actor, Addr, Arbiter, MailboxError, Message};
use futures::future::join_all;
use serde_json::{Map, Value};

use crate::clock::SharedClock;
use crate::storage::{keys, Cf, Storage, StorageError};
use crate::topology::{ShardId, Topology};
use catalog::{id_of, CatalogError, FieldType, Relation, RowKind, TableRecord, TableRegistry, USERS_TABLE};
pub use catalog_shard::{CatalogShard, RowResult};
use catalog_shard::{DeleteItem, DeleteUser, DropTableRows, PutTable, UpsertRows};

/// The running engine of one node.
pub struct Engine {
    storage: Storage,
    tables: Arc<TableRegistry>,
    topology: Topology,
    /// One actor per shard, indexed by shard id.
    shards: Vec<Addr<CatalogShard>>,
    /// The threads the shard actors run on, stopped at shutdown.
    arbiters: parking_lot::Mutex<Vec<Arbiter>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("topology: {0}")]
    Topology(String),
}

impl Engine {
    /// Starts one `CatalogShard` actor per shard, each on its own arbiter thread.
    /// Must be called inside a running actix `System`.
    pub fn start(
        storage: Storage,
        topology: Topology,
        clock: SharedClock,
        shard_mailbox: usize,
    ) -> Result<Engine, EngineError> {
        if topology.nodes.len() != 1 {
            return Err(EngineError::Topology(format!(
                "{} nodes configured; this version serves single-node topologies (multi-node arrives with Kafka)",
                topology.nodes.len()
            )));
        }
        let tables = Arc::new(TableRegistry::load(storage.clone(), topology.shards, clock.clone())?);
        let mut arbiters = Vec::new();
        let mut shards = Vec::new();
        for shard in 0..topology.shards {
            let arbiter = Arbiter::new();
            let actor = CatalogShard::new(shard, storage.clone(), tables.clone(), clock.clone(), shard_mailbox);
            shards.push(CatalogShard::start_in_arbiter(&arbiter.handle(), move |_| actor));
            arbiters.push(arbiter);
        }
        Ok(Engine {
            storage,
            tables,
            topology,
            shards,
            arbiters: parking_lot::Mutex::new(arbiters),
        })
    }

    /// Stops the shard actors and waits for their threads.
    pub fn stop(&self) {
        for arbiter in self.arbiters.lock().drain(..) {
            arbiter.stop();
            let _ = arbiter.join();
        }
    }

    fn shard_of(&self, key: &str) -> ShardId {
        self.topology.shard_for(key.as_bytes())
    }

    async fn ask<M>(&self, shard: ShardId, message: M) -> Result<M::Result, CatalogError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        CatalogShard: actix::Handler<M>,
    {
        self.shards[shard as usize]
            .send(message)
            .await
            .map_err(|error| match error {
                MailboxError::Closed => CatalogError::Unavailable(format!("shard {shard} is stopped")),
                MailboxError::Timeout => CatalogError::Unavailable(format!("shard {shard} timed out")),
            })
    }

    /// Upserts rows (items or users), each on the shard its id hashes to. Results
    /// come back in request order; one bad row does not stop the others.
    pub async fn upsert_rows(&self, kind: RowKind, rows: Vec<Value>) -> Vec<RowResult> {
        let count = rows.len();
        let mut results: Vec<Option<RowResult>> = (0..count).map(|_| None).collect();
        let mut per_shard: Vec<(Vec<usize>, Vec<Value>)> = vec![(Vec::new(), Vec::new()); self.shards.len()];
        for (index, row) in rows.into_iter().enumerate() {
            match id_of(kind, &row) {
                Ok(id) => {
                    let shard = &mut per_shard[self.shard_of(id) as usize];
                    shard.0.push(index);
                    shard.1.push(row);
                }
                Err(error) => results[index] = Some(Err(error)),
            }
        }
        let sends = per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, (indexes, _))| !indexes.is_empty())
            .map(|(shard, (indexes, rows))| async move {
                let replies = self.ask(shard as ShardId, UpsertRows { kind, rows }).await;
                (indexes, replies)
            });
        for (indexes, replies) in join_all(sends).await {
            match replies {
                Ok(replies) => {
                    for (index, reply) in indexes.into_iter().zip(replies) {
                        results[index] = Some(reply);
                    }
                }
                Err(error) => {
                    for index in indexes {
                        results[index] = Some(Err(CatalogError::Unavailable(error.to_string())));
                    }
                }
            }
        }
        results.into_iter().map(|r| r.expect("every row answered")).collect()
    }

    /// The stored item, read without going through the actor.
    pub fn get_item(&self, table: &str, id: &str) -> Result<Map<String, Value>, CatalogError> {
        let key = keys::item(self.shard_of(id), table, id);
        self.read_row(Cf::Items, &key)
            .transpose()
            .unwrap_or_else(|| Err(CatalogError::NotFound(format!("item {id:?} in table {table:?}"))))
    }

    /// The stored user.
    pub fn get_user(&self, uid: &str) -> Result<Map<String, Value>, CatalogError> {
        let key = keys::user(self.shard_of(uid), uid);
        self.read_row(Cf::Users, &key)
            .transpose()
            .unwrap_or_else(|| Err(CatalogError::NotFound(format!("user {uid:?}"))))
    }

    fn read_row(&self, cf: Cf, key: &[u8]) -> Result<Option<Map<String, Value>>, CatalogError> {
        let Some(bytes) = self.storage.get(cf, key)? else {
            return Ok(None);
        };
        let row = serde_json::from_slice(&bytes).map_err(|error| StorageError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: error.to_string(),
        })?;
        Ok(Some(row))
    }

    /// Soft-deletes (or purges) an item.
    pub async fn delete_item(&self, table: &str, id: &str, purge: bool) -> Result<(), CatalogError> {
        let message = DeleteItem {
            table: table.to_owned(),
            id: id.to_owned(),
            purge,
        };
        self.ask(self.shard_of(id), message).await?
    }

    /// Deletes a user and everything stored under them. Returns the events removed.
    pub async fn delete_user(&self, uid: &str) -> Result<usize, CatalogError> {
        self.ask(self.shard_of(uid), DeleteUser { uid: uid.to_owned() }).await?
    }

    pub fn get_table(&self, name: &str) -> Option<Arc<TableRecord>> {
        self.tables.get(name)
    }

    /// Creates or updates a table on the shard its name hashes to.
    pub async fn put_table(
        &self,
        name: &str,
        description: Option<String>,
        relations: Option<Vec<Relation>>,
    ) -> Result<Arc<TableRecord>, CatalogError> {
        let message = PutTable {
            name: name.to_owned(),
            description,
            relations,
        };
        self.ask(self.shard_of(name), message).await?
    }

    /// Deletes a table's record, then its rows on every shard.
    pub async fn delete_table(&self, name: &str) -> Result<(), CatalogError> {
        if name == USERS_TABLE {
            return Err(CatalogError::Invalid(
                "the users table cannot be deleted; delete users one by one".into(),
            ));
        }
        let tables = self.tables.clone();
        let owned = name.to_owned();
        let removed = tokio::task::spawn_blocking(move || tables.remove(&owned))
            .await
            .map_err(|error| CatalogError::Unavailable(error.to_string()))??;
        if removed.is_none() {
            return Err(CatalogError::NotFound(format!("table {name:?}")));
        }
        let drops = (0..self.topology.shards).map(|shard| self.ask(shard, DropTableRows { table: name.to_owned() }));
        for result in join_all(drops).await {
            result??;
        }
        Ok(())
    }

    /// Sets a field's type after checking every stored value fits it.
    pub async fn remap_field(&self, table: &str, field: &str, to: FieldType) -> Result<Arc<TableRecord>, CatalogError> {
        let (tables, storage, shards) = (self.tables.clone(), self.storage.clone(), self.topology.shards);
        let (table, field) = (table.to_owned(), field.to_owned());
        tokio::task::spawn_blocking(move || {
            let cf = if table == USERS_TABLE { Cf::Users } else { Cf::Items };
            tables.remap(&table, &field, to, || {
                for shard in 0..shards {
                    let prefix = if cf == Cf::Users {
                        keys::user(shard, "")
                    } else {
                        keys::table_prefix(shard, &table)
                    };
                    for entry in storage.scan_prefix(cf, &prefix) {
                        let (_, value) = entry?;
                        let row: Map<String, Value> = serde_json::from_slice(&value)
                            .map_err(|error| CatalogError::Unavailable(format!("stored row is unreadable: {error}")))?;
                        if let Some(value) = row.get(&field).filter(|v| !v.is_null()) {
                            to.check(&field, value)?;
                        }
                    }
                }
                Ok(())
            })
        })
        .await
        .map_err(|error| CatalogError::Unavailable(error.to_string()))?
    }

    /// Whether the table exists.
    pub fn has_table(&self, name: &str) -> bool {
        self.tables.get(name).is_some()
    }

    /// The number of shards.
    pub fn shard_count(&self) -> u16 {
        self.topology.shards
    }
}
