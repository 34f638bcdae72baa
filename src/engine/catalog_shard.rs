//! `CatalogShard`: the actor owning one shard's key range of every table (items and
//! users). It runs on its own arbiter thread, so its blocking RocksDB writes never
//! stall the HTTP event loop; the shards' concurrent writes are group-committed by
//! the storage layer. A reply is sent only after the write is durable.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use actix::{Actor, Context, Handler, Message, MessageResult};
use serde_json::{Map, Value};

use super::catalog::{
    prepare_row, stamp_row, CatalogError, ItemReader, PreparedRow, RowKind, StoredTimes, TableRegistry,
};
use crate::clock::SharedClock;
use crate::domain::catalog::{FieldType, Relation, TableRecord, MAX_FAILED_IDS};
use crate::domain::event::{decode_stored, Event};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::ShardId;

/// The actor of one shard.
pub struct CatalogShard {
    /// Which key range this actor owns.
    shard: ShardId,
    storage: Storage,
    tables: Arc<TableRegistry>,
    /// Told of every committed item write, so cached ranking features do not go
    /// stale and the search index follows.
    items: Arc<ItemReader>,
    clock: SharedClock,
    /// Capacity of the bounded mailbox.
    mailbox: usize,
}

impl CatalogShard {
    pub fn new(
        shard: ShardId,
        storage: Storage,
        tables: Arc<TableRegistry>,
        items: Arc<ItemReader>,
        clock: SharedClock,
        mailbox: usize,
    ) -> Self {
        CatalogShard {
            shard,
            storage,
            tables,
            items,
            clock,
            mailbox,
        }
    }

    /// Every value of a declared relation field names a stored row of the related
    /// table (one point lookup each); a row may name itself.
    fn check_relations(&self, row: &PreparedRow) -> Result<(), CatalogError> {
        for relation in &row.table.relations {
            let keys: Vec<&str> = match row.fields.get(&relation.field) {
                Some(Value::String(key)) => vec![key.as_str()],
                Some(Value::Array(keys)) => keys.iter().filter_map(Value::as_str).collect(),
                _ => continue,
            };
            for key in keys {
                let itself = relation.relation_table == row.table.table_name && key == row.id;
                if !itself && !self.items.row_exists(&relation.relation_table, key)? {
                    return Err(CatalogError::Invalid(format!(
                        "field {:?} names {key:?}, which is no row of table {:?}",
                        relation.field, relation.relation_table
                    )));
                }
            }
        }
        Ok(())
    }

    fn row_key(&self, kind: RowKind, table: &str, id: &str) -> Vec<u8> {
        match kind {
            RowKind::Item => layout::item(self.shard, table, id),
            RowKind::User => layout::user(self.shard, id),
        }
    }
}

impl Actor for CatalogShard {
    type Context = Context<Self>;

    fn started(&mut self, context: &mut Self::Context) {
        context.set_mailbox_capacity(self.mailbox);
        tracing::debug!(shard = self.shard, "catalog shard started");
    }
}

/// Upsert rows that hash to this shard. Each row's result comes back at its position.
pub struct UpsertRows {
    pub kind: RowKind,
    pub rows: Vec<Value>,
    /// Whether relation fields must name stored rows. Off for writes another node
    /// already checked (the catalog log), which must apply here as they did there.
    pub check_relations: bool,
}

/// The stored row, or why it was refused.
pub type RowResult = Result<Map<String, Value>, CatalogError>;

impl Message for UpsertRows {
    type Result = Vec<RowResult>;
}

impl Handler<UpsertRows> for CatalogShard {
    type Result = MessageResult<UpsertRows>;

    fn handle(&mut self, message: UpsertRows, _: &mut Context<Self>) -> Self::Result {
        let kind = message.kind;
        let check_relations = message.check_relations;
        let prepared: Vec<_> = message
            .rows
            .into_iter()
            .map(|row| {
                let row = prepare_row(kind, row, &self.tables)?;
                if check_relations {
                    self.check_relations(&row)?;
                }
                Ok(row)
            })
            .collect();
        let keys: Vec<Vec<u8>> = prepared
            .iter()
            .flatten()
            .map(|row| self.row_key(kind, &row.table.table_name, &row.id))
            .collect();
        let stored = match self.storage.multi_get(kind.cf(), &keys) {
            Ok(stored) => stored,
            Err(error) => return MessageResult(fail_all(prepared, &error.to_string())),
        };
        let now = self.clock.now_millis();
        let mut batch = self.storage.batch();
        // A row repeated within the batch keeps the created_at of its first occurrence.
        let mut seen: HashMap<&[u8], StoredTimes> = HashMap::new();
        let mut stored = stored.into_iter();
        let mut key_iter = keys.iter();
        let mut results = Vec::with_capacity(prepared.len());
        for row in prepared {
            let row = match row {
                Ok(row) => row,
                Err(error) => {
                    results.push(Err(error));
                    continue;
                }
            };
            let key = key_iter.next().expect("one key per prepared row");
            let previous = stored.next().flatten();
            let times = match seen.get(key.as_slice()) {
                Some(times) => Some(StoredTimes {
                    created_at: times.created_at.clone(),
                }),
                None => previous.and_then(|bytes| serde_json::from_slice::<StoredTimes>(&bytes).ok()),
            };
            let row = stamp_row(kind, row, times.as_ref(), now);
            let created_at = row.get("created_at").and_then(Value::as_str).map(str::to_owned);
            seen.insert(key.as_slice(), StoredTimes { created_at });
            batch.put(kind.cf(), key, &serde_json::to_vec(&row).expect("json map serializes"));
            results.push(Ok(row));
        }
        if let Err(error) = batch.commit() {
            tracing::error!(shard = self.shard, %error, "catalog write failed");
            let message = error.to_string();
            for result in results.iter_mut().filter(|r| r.is_ok()) {
                *result = Err(CatalogError::Unavailable(format!("write failed: {message}")));
            }
        }
        if kind == RowKind::Item {
            for row in results.iter().flatten() {
                if let (Some(Value::String(table)), Some(Value::String(id))) = (row.get("_table"), row.get("id")) {
                    self.items.changed(table, id);
                }
            }
        }
        MessageResult(results)
    }
}

fn fail_all(prepared: Vec<Result<super::catalog::PreparedRow, CatalogError>>, message: &str) -> Vec<RowResult> {
    prepared
        .into_iter()
        .map(|row| {
            Err(row
                .err()
                .unwrap_or_else(|| CatalogError::Unavailable(format!("read failed: {message}"))))
        })
        .collect()
}

/// Merges `patch` into a stored row (JSON merge patch, RFC 7396: a field set to null
/// is removed) and stores the result as an upsert of the whole row would, on this
/// actor, so that no other write to the row comes in between. The id and table are
/// the ones named; reserved times stay the stored ones.
pub struct PatchRow {
    pub kind: RowKind,
    pub table: String,
    pub id: String,
    pub patch: Map<String, Value>,
}

impl Message for PatchRow {
    type Result = RowResult;
}

impl Handler<PatchRow> for CatalogShard {
    type Result = RowResult;

    fn handle(&mut self, message: PatchRow, context: &mut Context<Self>) -> Self::Result {
        let PatchRow { kind, table, id, patch } = message;
        let key = self.row_key(kind, &table, &id);
        let stored = self
            .storage
            .get(kind.cf(), &key)?
            .ok_or_else(|| CatalogError::NotFound(format!("{} {id:?} in table {table:?}", kind.noun())))?;
        let mut row: Map<String, Value> = serde_json::from_slice(&stored)
            .map_err(|error| CatalogError::Invalid(format!("the stored {} cannot be read: {error}", kind.noun())))?;
        for (field, value) in patch {
            match value {
                Value::Null => {
                    row.remove(&field);
                }
                value => {
                    row.insert(field, value);
                }
            }
        }
        row.insert(kind.id_field().into(), Value::String(id));
        row.insert("_table".into(), Value::String(table));
        let rows = vec![Value::Object(row)];
        let upsert = UpsertRows {
            kind,
            rows,
            check_relations: true,
        };
        let MessageResult(mut results) = self.handle(upsert, context);
        results.pop().expect("one result per row")
    }
}

/// Soft-deletes an item (`is_deleted: true`), or removes it with `purge`.
pub struct DeleteItem {
    pub table: String,
    pub id: String,
    pub purge: bool,
}

impl Message for DeleteItem {
    type Result = Result<(), CatalogError>;
}

impl Handler<DeleteItem> for CatalogShard {
    type Result = Result<(), CatalogError>;

    fn handle(&mut self, message: DeleteItem, _: &mut Context<Self>) -> Self::Result {
        let key = layout::item(self.shard, &message.table, &message.id);
        let not_found = || CatalogError::NotFound(format!("item {:?} in table {:?}", message.id, message.table));
        let stored = self.storage.get(Cf::Items, &key)?.ok_or_else(not_found)?;
        let mut batch = self.storage.batch();
        if message.purge {
            batch.delete(Cf::Items, &key);
        } else {
            let mut row: Map<String, Value> = serde_json::from_slice(&stored)
                .map_err(|error| CatalogError::Unavailable(format!("stored item is unreadable: {error}")))?;
            row.insert("is_deleted".into(), Value::Bool(true));
            row.insert(
                "updated_at".into(),
                Value::String(crate::timestamp::format_rfc3339(self.clock.now_millis())),
            );
            batch.put(Cf::Items, &key, &serde_json::to_vec(&row).expect("json map serializes"));
        }
        batch.commit()?;
        self.items.changed(&message.table, &message.id);
        Ok(())
    }
}

/// Removes a user's row and every event indexed under the user.
pub struct DeleteUser {
    pub uid: String,
}

/// What the catalog side of a user deletion found.
#[derive(Debug, Clone, Default)]
pub struct DeletedUserRows {
    pub row_existed: bool,
    pub events_removed: usize,
    /// The sessions the removed events named.
    pub sessions: BTreeSet<String>,
}

impl Message for DeleteUser {
    type Result = Result<DeletedUserRows, CatalogError>;
}

impl Handler<DeleteUser> for CatalogShard {
    type Result = Result<DeletedUserRows, CatalogError>;

    fn handle(&mut self, message: DeleteUser, _: &mut Context<Self>) -> Self::Result {
        let key = layout::user(self.shard, &message.uid);
        let mut removed = DeletedUserRows {
            row_existed: self.storage.get(Cf::Users, &key)?.is_some(),
            ..DeletedUserRows::default()
        };
        let mut batch = self.storage.batch();
        batch.delete(Cf::Users, &key);
        // The index holds `prefix ++ log key`: the event, its id entry and the index entry go.
        // The id is the logged event's (older index entries also hold it as their value).
        let prefix = layout::user_events_prefix(self.shard, &message.uid);
        for entry in self.storage.scan_prefix(Cf::UserEvents, &prefix) {
            let (index_key, indexed_id) = entry?;
            let log_key = &index_key[prefix.len()..];
            let logged = match self.storage.get(Cf::Events, log_key)? {
                Some(stored) => decode_stored(&stored).ok(),
                None => None,
            };
            let event_id = match &logged {
                Some(event) => Some(event.id.clone()),
                None => (!indexed_id.is_empty()).then(|| String::from_utf8_lossy(&indexed_id).into_owned()),
            };
            if let Some(Event { sid: Some(sid), .. }) = logged {
                removed.sessions.insert(sid);
            }
            batch.delete(Cf::Events, log_key);
            if let Some(event_id) = event_id {
                batch.delete(Cf::Events, &layout::event_id(self.shard, &event_id));
            }
            batch.delete(Cf::UserEvents, &index_key);
            removed.events_removed += 1;
        }
        batch.commit()?;
        Ok(removed)
    }
}

/// Removes every row of a table in this shard's range.
pub struct DropTableRows {
    pub table: String,
}

impl Message for DropTableRows {
    type Result = Result<(), CatalogError>;
}

impl Handler<DropTableRows> for CatalogShard {
    type Result = Result<(), CatalogError>;

    fn handle(&mut self, message: DropTableRows, _: &mut Context<Self>) -> Self::Result {
        let (from, to) = layout::table_range(self.shard, &message.table);
        let mut batch = self.storage.batch();
        batch.delete_range(Cf::Items, &from, &to);
        batch.commit()?;
        self.items.table_dropped(&message.table);
        Ok(())
    }
}

/// What a remap does with a shard's stored values of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvertMode {
    /// Only count the lengths of the values that convert to an embedding.
    Lengths,
    /// Count what converts and what does not; change nothing.
    DryRun,
    /// Store the converted values and remove the field from rows whose value does not convert.
    Apply,
}

/// Converts a field's stored values on this shard to a type (a remap).
pub struct ConvertField {
    pub kind: RowKind,
    pub table: String,
    pub field: String,
    pub to: FieldType,
    /// For an embedding: the length every value must have.
    pub length: Option<usize>,
    pub mode: ConvertMode,
}

/// What [`ConvertField`] found on one shard (or, summed, on all).
#[derive(Debug, Default)]
pub struct Conversion {
    /// Values that are (now) of the type.
    pub converted: usize,
    /// Ids of the rows whose value does not convert, the first [`MAX_FAILED_IDS`] by id.
    pub failed: Vec<String>,
    pub failed_count: usize,
    /// Embedding lengths of the values that convert, with their counts.
    pub lengths: BTreeMap<usize, usize>,
}

impl Conversion {
    /// Adds another shard's findings.
    pub fn merge(&mut self, other: Conversion) {
        self.converted += other.converted;
        self.failed_count += other.failed_count;
        self.failed.extend(other.failed);
        self.failed.sort();
        self.failed.truncate(MAX_FAILED_IDS);
        for (length, count) in other.lengths {
            *self.lengths.entry(length).or_default() += count;
        }
    }
}

impl Message for ConvertField {
    type Result = Result<Conversion, CatalogError>;
}

impl Handler<ConvertField> for CatalogShard {
    type Result = Result<Conversion, CatalogError>;

    fn handle(&mut self, message: ConvertField, _: &mut Context<Self>) -> Self::Result {
        let ConvertField {
            kind,
            table,
            field,
            to,
            length,
            mode,
        } = message;
        let prefix = match kind {
            RowKind::User => layout::user(self.shard, ""),
            RowKind::Item => layout::table_prefix(self.shard, &table),
        };
        let mut found = Conversion::default();
        let mut batch = self.storage.batch();
        let mut changed = Vec::new();
        for entry in self.storage.scan_prefix(kind.cf(), &prefix) {
            let (key, bytes) = entry?;
            let mut row: Map<String, Value> =
                serde_json::from_slice(&bytes).map_err(|error| StorageError::Corrupt {
                    key: format!("a row of table {table:?}"),
                    reason: error.to_string(),
                })?;
            let Some(value) = row.get(&field).filter(|value| !value.is_null()) else {
                continue;
            };
            let converted = to.convert(value).filter(|converted| match (length, converted) {
                (Some(length), Value::Array(values)) if to == FieldType::Embedding => values.len() == length,
                _ => true,
            });
            let id = row
                .get(kind.id_field())
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match converted {
                Some(converted) => {
                    found.converted += 1;
                    if let Value::Array(values) = &converted {
                        if to == FieldType::Embedding {
                            *found.lengths.entry(values.len()).or_default() += 1;
                        }
                    }
                    if mode == ConvertMode::Apply && converted != *value {
                        row.insert(field.clone(), converted);
                        batch.put(kind.cf(), &key, &serde_json::to_vec(&row).expect("json map serializes"));
                        changed.push(id);
                    }
                }
                None => {
                    found.failed_count += 1;
                    if found.failed.len() < MAX_FAILED_IDS {
                        found.failed.push(id.clone());
                    }
                    if mode == ConvertMode::Apply {
                        row.remove(&field);
                        batch.put(kind.cf(), &key, &serde_json::to_vec(&row).expect("json map serializes"));
                        changed.push(id);
                    }
                }
            }
        }
        if !changed.is_empty() {
            batch.commit()?;
            if kind == RowKind::Item {
                for id in &changed {
                    self.items.changed(&table, id);
                }
            }
        }
        found.failed.sort();
        Ok(found)
    }
}

/// Creates or updates a table record; sent to the shard the table name hashes to.
pub struct PutTable {
    pub name: String,
    pub description: Option<String>,
    pub relations: Option<Vec<Relation>>,
}

impl Message for PutTable {
    type Result = Result<Arc<TableRecord>, CatalogError>;
}

impl Handler<PutTable> for CatalogShard {
    type Result = Result<Arc<TableRecord>, CatalogError>;

    fn handle(&mut self, message: PutTable, _: &mut Context<Self>) -> Self::Result {
        self.tables.put(&message.name, message.description, message.relations)
    }
}
