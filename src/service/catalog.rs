//! The catalog's use cases: tables, items (given vectors at ingest when
//! `embed.embed_items_at_ingest` is on), users, deletes and field remaps. Writes go
//! to the shard actor of the key; reads go straight to storage.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::embed::EmbedService;
use super::ServiceError;
use crate::domain::catalog::{FieldType, Relation, TableRecord};
use crate::engine::catalog::{RowKind, USERS_TABLE};
use crate::engine::{Catalog, Remap};
use crate::search::SearchIndex;
use crate::stream::catalog_log::CatalogChange;
use crate::stream::catalog_log::CatalogLog;

/// A stored row (item or user) as the catalog keeps it.
pub type Row = Map<String, Value>;

/// Catalog and users: tables, items (embedded at ingest), users, deletes, field
/// remaps.
pub struct CatalogService {
    /// The catalog shards' calls.
    catalog: Catalog,
    /// In a cluster, catalog writes reach the other nodes through the catalog log.
    replication: Replication,
    /// Counts a table's searchable items.
    index: Arc<SearchIndex>,
    /// Embeds items' text and images at ingest.
    embed: Arc<EmbedService>,
}

impl CatalogService {
    pub fn new(
        catalog: Catalog,
        replication: Replication,
        index: Arc<SearchIndex>,
        embed: Arc<EmbedService>,
    ) -> CatalogService {
        CatalogService {
            catalog,
            replication,
            index,
            embed,
        }
    }
}

/// In a cluster, where this node's catalog, user, key and experiment writes go for
/// the others (the catalog log); on one node, nowhere.
#[derive(Clone)]
pub struct Replication {
    log: Option<Arc<CatalogLog>>,
}

impl Replication {
    pub fn new(log: Option<CatalogLog>) -> Replication {
        Replication { log: log.map(Arc::new) }
    }

    /// In a cluster: produces writes this node applied to the catalog log, for the
    /// other nodes, and waits for the broker's acknowledgement. Without it the write
    /// is not acknowledged to the client (503; retrying it is harmless).
    pub(super) async fn replicate(&self, changes: Vec<CatalogChange>) -> Result<(), ServiceError> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        if changes.is_empty() {
            return Ok(());
        }
        log.publish(&changes).await.map_err(|error| {
            ServiceError::Unavailable(format!(
                "the write is stored on this node but could not be handed to the others ({error}); retry it"
            ))
        })
    }

    /// Whether writes are replicated (in a cluster).
    pub fn is_on(&self) -> bool {
        self.log.is_some()
    }

    /// The catalog log's counters, in a cluster.
    pub fn stats_json(&self) -> Option<Value> {
        self.log.as_ref().map(|log| log.stats.to_json())
    }
}

impl CatalogService {
    /// Creates or updates a table.
    pub async fn put_table(
        &self,
        name: &str,
        description: Option<String>,
        relations: Option<Vec<Relation>>,
    ) -> Result<Arc<TableRecord>, ServiceError> {
        let change = CatalogChange::PutTable {
            name: name.to_owned(),
            description: description.clone(),
            relations: relations.clone(),
        };
        let table = self.catalog.put_table(name, description, relations).await?;
        self.replication.replicate(vec![change]).await?;
        Ok(table)
    }

    /// A table's record with its inferred field types.
    pub fn get_table(&self, name: &str) -> Result<Arc<TableRecord>, ServiceError> {
        self.catalog
            .get_table(name)
            .ok_or_else(|| ServiceError::NotFound(format!("table {name:?}")))
    }

    /// Every table's record with its rows: items searchable now (soft-deleted ones
    /// left out), for `users` the stored users.
    pub async fn list_tables(&self) -> Result<Vec<Value>, ServiceError> {
        let mut listed = Vec::new();
        for table in self.catalog.tables() {
            let rows = match table.table_name.as_str() {
                USERS_TABLE => {
                    let catalog = self.catalog.clone();
                    tokio::task::spawn_blocking(move || catalog.count_users())
                        .await
                        .map_err(|error| ServiceError::Internal(error.to_string()))??
                }
                name => self.index.count_in_table(name)?,
            };
            let mut view = serde_json::to_value(&*table).map_err(|error| ServiceError::Internal(error.to_string()))?;
            view["rows"] = json!(rows);
            listed.push(view);
        }
        Ok(listed)
    }

    /// Deletes a table's record and its rows on every shard.
    pub async fn delete_table(&self, name: &str) -> Result<(), ServiceError> {
        self.catalog.delete_table(name).await?;
        self.replication
            .replicate(vec![CatalogChange::DeleteTable { name: name.to_owned() }])
            .await
    }

    /// Remaps a field's type, converting the stored values that convert; when some do
    /// not, nothing changes unless `force` (which clears them). Only an applied remap
    /// is handed to the other nodes.
    pub async fn remap_field(
        &self,
        table: &str,
        field: &str,
        to: FieldType,
        force: bool,
    ) -> Result<Remap, ServiceError> {
        if !self.catalog.has_table(table) {
            return Err(ServiceError::NotFound(format!("table {table:?}")));
        }
        let remap = self.catalog.remap_field(table, field, to, force).await?;
        if remap.applied {
            let change = CatalogChange::RemapField {
                table: table.to_owned(),
                field: field.to_owned(),
                to,
            };
            self.replication.replicate(vec![change]).await?;
        }
        Ok(remap)
    }

    /// Upserts items (each a JSON object; the catalog says what is wrong with the
    /// others), in request order, one result each; one bad row does not stop the
    /// others. Items without a vector get one first when ingest-time embedding is on
    /// (a failure of the model fails the whole request: nothing was stored).
    pub async fn upsert_items(&self, mut rows: Vec<Value>) -> Result<Vec<Result<Row, ServiceError>>, ServiceError> {
        self.embed.embed_items(&mut rows).await?;
        self.upsert_rows(RowKind::Item, rows).await
    }

    /// Upserts rows and, in a cluster, hands the stored ones to the other nodes (with
    /// the `created_at` given here, so that every node keeps the same).
    async fn upsert_rows(
        &self,
        kind: RowKind,
        rows: Vec<Value>,
    ) -> Result<Vec<Result<Row, ServiceError>>, ServiceError> {
        let sent = self.replication.is_on().then(|| rows.clone());
        let results: Vec<Result<Row, ServiceError>> = self
            .catalog
            .upsert_rows(kind, rows)
            .await
            .into_iter()
            .map(|result| result.map_err(ServiceError::from))
            .collect();
        if let Some(sent) = sent {
            let changes = sent
                .into_iter()
                .zip(&results)
                .filter_map(|(row, result)| Some(replicated_row(kind, row, result.as_ref().ok()?)))
                .collect();
            self.replication.replicate(changes).await?;
        }
        Ok(results)
    }

    /// Merges `patch` into a stored item (a null removes a field) and, in a cluster,
    /// hands the whole stored row to the other nodes.
    pub async fn patch_item(&self, table: &str, id: &str, patch: Map<String, Value>) -> Result<Row, ServiceError> {
        self.patch_row(RowKind::Item, table, id, patch).await
    }

    /// Merges `patch` into a stored user; `created_at` is system-set and not patched.
    pub async fn patch_user(&self, uid: &str, mut patch: Map<String, Value>) -> Result<Row, ServiceError> {
        patch.remove("created_at");
        self.patch_row(RowKind::User, USERS_TABLE, uid, patch).await
    }

    async fn patch_row(
        &self,
        kind: RowKind,
        table: &str,
        id: &str,
        patch: Map<String, Value>,
    ) -> Result<Row, ServiceError> {
        let stored = self.catalog.patch_row(kind, table, id, patch).await?;
        if self.replication.is_on() {
            let change = replicated_row(kind, Value::Object(stored.clone()), &stored);
            self.replication.replicate(vec![change]).await?;
        }
        Ok(stored)
    }

    /// An item as stored, soft-deleted ones included.
    pub fn get_item(&self, table: &str, id: &str) -> Result<Row, ServiceError> {
        Ok(self.catalog.get_item(table, id)?)
    }

    /// Soft-deletes an item, or removes it (`purge`).
    pub async fn delete_item(&self, table: &str, id: &str, purge: bool) -> Result<(), ServiceError> {
        self.catalog.delete_item(table, id, purge).await?;
        let change = CatalogChange::DeleteItem {
            table: table.to_owned(),
            id: id.to_owned(),
            purge,
        };
        self.replication.replicate(vec![change]).await
    }

    /// Upserts users, in request order, one result each. A user's `created_at` is
    /// system-set (SPEC "User": the first time the record is seen), so one the client
    /// sends is ignored.
    pub async fn upsert_users(&self, mut rows: Vec<Value>) -> Result<Vec<Result<Row, ServiceError>>, ServiceError> {
        for row in &mut rows {
            if let Value::Object(fields) = row {
                fields.remove("created_at");
            }
        }
        self.upsert_rows(RowKind::User, rows).await
    }

    /// A user's stored row.
    pub fn get_user(&self, uid: &str) -> Result<Row, ServiceError> {
        Ok(self.catalog.get_user(uid)?)
    }
}

/// The change that makes another node store `row` as `stored` was stored here.
fn replicated_row(kind: RowKind, mut row: Value, stored: &Row) -> CatalogChange {
    if let (Value::Object(fields), Some(created_at)) = (&mut row, stored.get("created_at")) {
        fields.insert("created_at".into(), created_at.clone());
    }
    let text = |field: &str| stored.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
    match kind {
        RowKind::Item => CatalogChange::UpsertItem {
            table: text("_table"),
            id: text("id"),
            row,
        },
        RowKind::User => CatalogChange::UpsertUser { uid: text("uid"), row },
    }
}
