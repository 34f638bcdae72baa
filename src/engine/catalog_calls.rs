//! The engine's catalog half: rows (items and users) and tables, each write sent to
//! the catalog shard its id or name hashes to, reads straight from storage. A
//! [`Catalog`] holds only the handles these need; the catalog's service and the
//! catalog log hold it, not the whole engine.

use std::sync::Arc;

use actix::{Addr, MailboxError, Message};
use futures::future::join_all;
use serde_json::{Map, Value};

use super::catalog::{self, id_of, CatalogError, RowKind, USERS_TABLE};
use super::catalog_shard::{
    Conversion, ConvertField, ConvertMode, DeleteItem, DropTableRows, PatchRow, PutTable, RowResult, UpsertRows,
};
use super::{scatter, CatalogShard, TableRegistry};
use crate::domain::catalog::{FieldType, Relation, TableRecord};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::{shard_for, ShardId};

/// The outcome of a field remap.
#[derive(Debug)]
pub struct Remap {
    /// The table record: remapped when `applied`, else as it was.
    pub table: Arc<TableRecord>,
    /// Whether the type changed (false: some values do not convert and no `force`).
    pub applied: bool,
    /// What converted and what did not (applied with `force`: the values cleared).
    pub conversion: Conversion,
}

/// The catalog's calls: rows and tables over the catalog shards of this node's
/// engine. Cheap to clone.
#[derive(Clone)]
pub struct Catalog {
    storage: Storage,
    tables: Arc<TableRegistry>,
    /// One catalog actor per shard, indexed by shard id.
    shards: Arc<[Addr<CatalogShard>]>,
}

impl Catalog {
    pub(super) fn new(storage: Storage, tables: Arc<TableRegistry>, shards: Vec<Addr<CatalogShard>>) -> Catalog {
        Catalog {
            storage,
            tables,
            shards: shards.into(),
        }
    }

    fn shard_count(&self) -> u16 {
        self.shards.len() as u16
    }

    fn shard_of(&self, key: &str) -> ShardId {
        shard_for(key.as_bytes(), self.shard_count())
    }

    /// Sends `message` to the catalog actor of `shard`.
    pub(super) async fn ask<M>(&self, shard: ShardId, message: M) -> Result<M::Result, CatalogError>
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
        self.upsert_checked_rows(kind, rows, true).await
    }

    /// Applies rows another node stored (the catalog log): as they were accepted
    /// there, so relations are not looked up again, and nulls that older versions
    /// dropped silently are dropped here too.
    pub async fn upsert_replicated_rows(&self, kind: RowKind, mut rows: Vec<Value>) -> Vec<RowResult> {
        for row in &mut rows {
            if let Value::Object(fields) = row {
                fields.retain(|_, value| !value.is_null());
            }
        }
        self.upsert_checked_rows(kind, rows, false).await
    }

    async fn upsert_checked_rows(&self, kind: RowKind, rows: Vec<Value>, check_relations: bool) -> Vec<RowResult> {
        catalog::type_new_fields_in_order(kind, &rows, &self.tables);
        let routed = rows
            .into_iter()
            .map(|row| {
                let shard = self.shard_of(id_of(kind, &row)?);
                Ok((shard, row))
            })
            .collect();
        scatter(self.shard_count(), routed, |shard, rows| async move {
            let upsert = UpsertRows {
                kind,
                rows,
                check_relations,
            };
            self.ask(shard, upsert).await
        })
        .await
    }

    /// The stored item, read without going through the actor.
    pub fn get_item(&self, table: &str, id: &str) -> Result<Map<String, Value>, CatalogError> {
        let key = layout::item(self.shard_of(id), table, id);
        self.read_row(Cf::Items, &key)
            .transpose()
            .unwrap_or_else(|| Err(CatalogError::NotFound(format!("item {id:?} in table {table:?}"))))
    }

    /// The stored user.
    pub fn get_user(&self, uid: &str) -> Result<Map<String, Value>, CatalogError> {
        let key = layout::user(self.shard_of(uid), uid);
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

    /// Merges `patch` into a stored item or user (a null removes a field); the row
    /// must exist.
    pub async fn patch_row(
        &self,
        kind: RowKind,
        table: &str,
        id: &str,
        patch: Map<String, Value>,
    ) -> Result<Map<String, Value>, CatalogError> {
        let message = PatchRow {
            kind,
            table: table.to_owned(),
            id: id.to_owned(),
            patch,
        };
        self.ask(self.shard_of(id), message).await?
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

    pub fn get_table(&self, name: &str) -> Option<Arc<TableRecord>> {
        self.tables.get(name)
    }

    /// Every table's record (the users' field types under `users`), by name.
    pub fn tables(&self) -> Vec<Arc<TableRecord>> {
        self.tables
            .names()
            .iter()
            .filter_map(|name| self.tables.get(name))
            .collect()
    }

    /// Stored users, counted by a scan of every shard's (a few ms per 100k). Blocks.
    pub fn count_users(&self) -> Result<u64, CatalogError> {
        let mut count = 0;
        for entry in self.storage.scan_prefix(Cf::Users, &[]) {
            entry.map_err(CatalogError::Storage)?;
            count += 1;
        }
        Ok(count)
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
        let drops = (0..self.shard_count()).map(|shard| self.ask(shard, DropTableRows { table: name.to_owned() }));
        for result in join_all(drops).await {
            result??;
        }
        Ok(())
    }

    /// Remaps a field to another type: the stored values that convert are converted
    /// (see [`FieldType::convert`]); when some do not, nothing changes unless `force`,
    /// which removes the field from those rows. An embedding's length is the recorded
    /// one, else the one most stored values have. The answer says what converted and
    /// what did not, and whether the remap was applied.
    pub async fn remap_field(
        &self,
        table: &str,
        field: &str,
        to: FieldType,
        force: bool,
    ) -> Result<Remap, CatalogError> {
        let record = self
            .tables
            .get(table)
            .ok_or_else(|| CatalogError::NotFound(format!("table {table:?}")))?;
        let kind = if table == USERS_TABLE {
            RowKind::User
        } else {
            RowKind::Item
        };
        if kind.is_reserved(field) {
            return Err(CatalogError::Invalid(format!(
                "{field:?} is a reserved field; its type cannot change"
            )));
        }
        if to == FieldType::Object {
            return Err(CatalogError::Invalid(
                "objects are a field type of events only; an item or user field cannot hold one".into(),
            ));
        }
        let mut length = None;
        if to == FieldType::Embedding {
            length = match record.fields.get(field) {
                Some(FieldType::Embedding) => record.embedding_lengths.get(field).copied(),
                _ => None,
            };
            if length.is_none() {
                let found = self
                    .convert_field(kind, table, field, to, None, ConvertMode::Lengths)
                    .await?;
                // The most common length; of equally common ones, the shortest.
                length = found
                    .lengths
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(length, _)| *length);
            }
        }
        let found = self
            .convert_field(kind, table, field, to, length, ConvertMode::DryRun)
            .await?;
        if found.failed_count > 0 && !force {
            return Ok(Remap {
                table: record,
                applied: false,
                conversion: found,
            });
        }
        let (tables, owned) = (self.tables.clone(), (table.to_owned(), field.to_owned()));
        let record = tokio::task::spawn_blocking(move || tables.remap(&owned.0, &owned.1, to, length))
            .await
            .map_err(|error| CatalogError::Unavailable(error.to_string()))??;
        let conversion = self
            .convert_field(kind, table, field, to, length, ConvertMode::Apply)
            .await?;
        Ok(Remap {
            table: record,
            applied: true,
            conversion,
        })
    }

    /// Runs a [`ConvertField`] on every shard and sums what they found.
    async fn convert_field(
        &self,
        kind: RowKind,
        table: &str,
        field: &str,
        to: FieldType,
        length: Option<usize>,
        mode: ConvertMode,
    ) -> Result<Conversion, CatalogError> {
        let converts = (0..self.shard_count()).map(|shard| {
            let message = ConvertField {
                kind,
                table: table.to_owned(),
                field: field.to_owned(),
                to,
                length,
                mode,
            };
            self.ask(shard, message)
        });
        let mut total = Conversion::default();
        for found in join_all(converts).await {
            total.merge(found??);
        }
        Ok(total)
    }

    /// Whether the table exists.
    pub fn has_table(&self, name: &str) -> bool {
        self.tables.get(name).is_some()
    }
}
