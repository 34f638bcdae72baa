//! The catalog's use cases: tables, items (given vectors at ingest when
//! `embed.embed_items_at_ingest` is on), users, deletes and field remaps. Writes go
//! to the shard actor of the key; reads go straight to storage.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{ServiceError, Services};
use crate::engine::catalog::RowKind;
pub use crate::engine::catalog::{FieldType, Relation, TableRecord};

/// A stored row (item or user) as the catalog keeps it.
pub type Row = Map<String, Value>;

impl Services {
    /// Creates or updates a table.
    pub async fn put_table(
        &self,
        name: &str,
        description: Option<String>,
        relations: Option<Vec<Relation>>,
    ) -> Result<Arc<TableRecord>, ServiceError> {
        Ok(self.engine.put_table(name, description, relations).await?)
    }

    /// A table's record with its inferred field types.
    pub fn get_table(&self, name: &str) -> Result<Arc<TableRecord>, ServiceError> {
        self.engine
            .get_table(name)
            .ok_or_else(|| ServiceError::NotFound(format!("table {name:?}")))
    }

    /// Deletes a table's record and its rows on every shard.
    pub async fn delete_table(&self, name: &str) -> Result<(), ServiceError> {
        Ok(self.engine.delete_table(name).await?)
    }

    /// Sets a field's type after checking that every stored value fits it.
    pub async fn remap_field(&self, table: &str, field: &str, to: FieldType) -> Result<Arc<TableRecord>, ServiceError> {
        if !self.engine.has_table(table) {
            return Err(ServiceError::NotFound(format!("table {table:?}")));
        }
        Ok(self.engine.remap_field(table, field, to).await?)
    }

    /// Upserts items (each a JSON object; the catalog says what is wrong with the
    /// others), in request order, one result each; one bad row does not stop the
    /// others. Items without a vector get one first when ingest-time embedding is on
    /// (a failure of the model fails the whole request: nothing was stored).
    pub async fn upsert_items(&self, mut rows: Vec<Value>) -> Result<Vec<Result<Row, ServiceError>>, ServiceError> {
        self.embed_items(&mut rows).await?;
        Ok(self
            .engine
            .upsert_rows(RowKind::Item, rows)
            .await
            .into_iter()
            .map(|result| result.map_err(ServiceError::from))
            .collect())
    }

    /// An item as stored, soft-deleted ones included.
    pub fn get_item(&self, table: &str, id: &str) -> Result<Row, ServiceError> {
        Ok(self.engine.get_item(table, id)?)
    }

    /// Soft-deletes an item, or removes it (`purge`).
    pub async fn delete_item(&self, table: &str, id: &str, purge: bool) -> Result<(), ServiceError> {
        Ok(self.engine.delete_item(table, id, purge).await?)
    }

    /// Upserts users, in request order, one result each.
    pub async fn upsert_users(&self, rows: Vec<Value>) -> Vec<Result<Row, ServiceError>> {
        self.engine
            .upsert_rows(RowKind::User, rows)
            .await
            .into_iter()
            .map(|result| result.map_err(ServiceError::from))
            .collect()
    }

    /// A user's stored row.
    pub fn get_user(&self, uid: &str) -> Result<Row, ServiceError> {
        Ok(self.engine.get_user(uid)?)
    }

    /// Deletes a user and everything stored under them: the row, their events, the
    /// live state of the user and of their sessions. Answers the events removed; any
    /// part that could not be removed fails the call (the rest can be retried).
    pub async fn delete_user(&self, uid: &str) -> Result<usize, ServiceError> {
        Ok(self.engine.delete_user(uid).await?)
    }
}
