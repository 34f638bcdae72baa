//! Table records and the node's registry of them.
//!
//! The registry is the lock-free read handle the DESIGN asks for: readers clone an
//! `Arc<TableRecord>` snapshot; the rare writers (a new table, a newly seen field, a
//! remap) serialize on one mutex, persist the new record, then swap the snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::CatalogError;
use crate::clock::SharedClock;
use crate::domain::catalog::{FieldType, Relation, TableRecord};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::timestamp::format_rfc3339;
use crate::topology::shard_for;

/// The special table holding users.
pub const USERS_TABLE: &str = "users";
/// Where items without `_table` go.
pub const DEFAULT_ITEM_TABLE: &str = "items";
/// Longest table name, in bytes.
const MAX_TABLE_NAME: usize = 128;

/// Checks a table name: 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn validate_table_name(name: &str) -> Result<(), CatalogError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_TABLE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(CatalogError::Invalid(format!(
            "table name {name:?} must be 1-{MAX_TABLE_NAME} characters of letters, digits, '_', '.', '-'"
        )))
    }
}

/// Every table of the node, readable without locks held across calls.
pub struct TableRegistry {
    tables: RwLock<HashMap<String, Arc<TableRecord>>>,
    /// Serializes writers so that two shards never infer two types for one field.
    write_lock: Mutex<()>,
    storage: Storage,
    shards: u16,
    clock: SharedClock,
}

impl TableRegistry {
    /// Loads every stored table.
    pub fn load(storage: Storage, shards: u16, clock: SharedClock) -> Result<TableRegistry, StorageError> {
        let mut tables = HashMap::new();
        for entry in storage.scan_prefix(Cf::Tables, b"") {
            let (key, value) = entry?;
            let record: TableRecord = serde_json::from_slice(&value).map_err(|error| StorageError::Corrupt {
                key: String::from_utf8_lossy(&key).into_owned(),
                reason: error.to_string(),
            })?;
            tables.insert(record.table_name.clone(), Arc::new(record));
        }
        Ok(TableRegistry {
            tables: RwLock::new(tables),
            write_lock: Mutex::new(()),
            storage,
            shards,
            clock,
        })
    }

    /// Every table name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    pub fn get(&self, name: &str) -> Option<Arc<TableRecord>> {
        self.tables.read().get(name).cloned()
    }

    /// Creates or updates a table's description and relations. Relation fields that
    /// already hold another type, and relations to tables that do not exist, are refused.
    pub fn put(
        &self,
        name: &str,
        description: Option<String>,
        relations: Option<Vec<Relation>>,
    ) -> Result<Arc<TableRecord>, CatalogError> {
        validate_table_name(name)?;
        let _writer = self.write_lock.lock();
        let mut record = self
            .get(name)
            .map(|r| (*r).clone())
            .unwrap_or_else(|| self.new_record(name));
        if let Some(description) = description {
            record.description = description;
        }
        if let Some(relations) = relations {
            for relation in &relations {
                validate_table_name(&relation.relation_table)?;
                if relation.field.is_empty() {
                    return Err(CatalogError::Invalid("relation field must not be empty".into()));
                }
                // The table related to must exist (this one and the users table always do).
                let target = relation.relation_table.as_str();
                if target != name && target != USERS_TABLE && self.get(target).is_none() {
                    return Err(CatalogError::Invalid(format!(
                        "relation {:?}: table {target:?} does not exist; create it first",
                        relation.field
                    )));
                }
                match record.fields.get(&relation.field) {
                    None | Some(FieldType::Relation) => {}
                    Some(FieldType::String) | Some(FieldType::ArrayString) => {}
                    Some(other) => {
                        return Err(CatalogError::TypeMismatch {
                            field: relation.field.clone(),
                            expected: FieldType::Relation,
                            got: other.name().to_owned(),
                        })
                    }
                }
                record.fields.insert(relation.field.clone(), FieldType::Relation);
            }
            record.relations = relations;
        }
        record.updated_at = format_rfc3339(self.clock.now_millis());
        self.store(record)
    }

    /// The table, created with no fields on first use.
    pub fn get_or_create(&self, name: &str) -> Result<Arc<TableRecord>, CatalogError> {
        if let Some(record) = self.get(name) {
            return Ok(record);
        }
        validate_table_name(name)?;
        let _writer = self.write_lock.lock();
        if let Some(record) = self.get(name) {
            return Ok(record);
        }
        self.store(self.new_record(name))
    }

    /// Adds newly seen fields with their inferred types, and the first lengths of
    /// embedding fields. A field another writer typed first keeps that type, and the
    /// value that disagrees is a mismatch; so does a length.
    pub fn add_fields(
        &self,
        name: &str,
        new_fields: &[(String, FieldType)],
        new_lengths: &[(String, usize)],
    ) -> Result<Arc<TableRecord>, CatalogError> {
        let _writer = self.write_lock.lock();
        let current = self
            .get(name)
            .ok_or_else(|| CatalogError::NotFound(format!("table {name:?}")))?;
        let mut record = (*current).clone();
        for (field, inferred) in new_fields {
            match record.fields.get(field) {
                Some(existing) if existing != inferred => {
                    return Err(CatalogError::TypeMismatch {
                        field: field.clone(),
                        expected: *existing,
                        got: inferred.name().to_owned(),
                    })
                }
                Some(_) => {}
                None => {
                    record.fields.insert(field.clone(), *inferred);
                }
            }
        }
        for (field, length) in new_lengths {
            if record.fields.get(field) != Some(&FieldType::Embedding) {
                continue;
            }
            match record.embedding_lengths.get(field) {
                Some(&expected) if expected != *length => {
                    return Err(super::row_rules::embedding_length_error(name, field, expected, *length))
                }
                Some(_) => {}
                None => {
                    record.embedding_lengths.insert(field.clone(), *length);
                }
            }
        }
        if record.fields.len() == current.fields.len()
            && record.embedding_lengths.len() == current.embedding_lengths.len()
        {
            return Ok(current);
        }
        record.updated_at = format_rfc3339(self.clock.now_millis());
        self.store(record)
    }

    /// Sets a field's type and, for an embedding, the length of its values (`None`:
    /// the next value stored sets it).
    pub fn remap(
        &self,
        name: &str,
        field: &str,
        to: FieldType,
        embedding_length: Option<usize>,
    ) -> Result<Arc<TableRecord>, CatalogError> {
        let _writer = self.write_lock.lock();
        let current = self
            .get(name)
            .ok_or_else(|| CatalogError::NotFound(format!("table {name:?}")))?;
        let mut record = (*current).clone();
        record.fields.insert(field.to_owned(), to);
        match embedding_length.filter(|_| to == FieldType::Embedding) {
            Some(length) => record.embedding_lengths.insert(field.to_owned(), length),
            None => record.embedding_lengths.remove(field),
        };
        record.updated_at = format_rfc3339(self.clock.now_millis());
        self.store(record)
    }

    /// Forgets a table's record; its rows are removed by the shards.
    pub fn remove(&self, name: &str) -> Result<Option<Arc<TableRecord>>, CatalogError> {
        let _writer = self.write_lock.lock();
        let Some(record) = self.get(name) else { return Ok(None) };
        let mut batch = self.storage.batch();
        batch.delete(
            Cf::Tables,
            &layout::table(shard_for(name.as_bytes(), self.shards), name),
        );
        batch.commit()?;
        self.tables.write().remove(name);
        Ok(Some(record))
    }

    fn new_record(&self, name: &str) -> TableRecord {
        let now = format_rfc3339(self.clock.now_millis());
        TableRecord {
            table_name: name.to_owned(),
            description: String::new(),
            relations: Vec::new(),
            fields: BTreeMap::new(),
            embedding_lengths: BTreeMap::new(),
            created_at: now.clone(),
            updated_at: now,
        }
    }

    /// Persists and publishes a record; callers hold the write lock.
    fn store(&self, record: TableRecord) -> Result<Arc<TableRecord>, CatalogError> {
        let key = layout::table(shard_for(record.table_name.as_bytes(), self.shards), &record.table_name);
        let value = serde_json::to_vec(&record).expect("table record serializes");
        let mut batch = self.storage.batch();
        batch.put(Cf::Tables, &key, &value);
        batch.commit()?;
        let record = Arc::new(record);
        self.tables.write().insert(record.table_name.clone(), record.clone());
        Ok(record)
    }
}
