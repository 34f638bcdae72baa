//! The catalog's rules, without actors or I/O of their own: field types, table
//! records, and how an incoming row becomes a stored one (reserved fields).
//! `engine::catalog_shard` applies them on the shard that owns a row.

mod field_type;
mod reader;
mod row_cache;
mod row_rules;
mod tables;

pub use field_type::{MAX_EMBEDDING_DIMS, MAX_OBJECT_BYTES, MAX_STRING_BYTES};
pub use reader::ItemReader;
pub use row_rules::{id_of, prepare_row, stamp_row, type_new_fields_in_order, PreparedRow, RowKind, StoredTimes};
pub use tables::{validate_table_name, TableRegistry, DEFAULT_ITEM_TABLE, USERS_TABLE};

use crate::domain::catalog::FieldType;
use crate::storage::StorageError;

/// Why a catalog or user operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A missing required field, a wrong type in a reserved position, a bad format or
    /// a size limit.
    #[error("{0}")]
    Invalid(String),
    /// A custom field got a value of another type than its table says.
    #[error("field {field:?} expects {} but got {got}", expected.name())]
    TypeMismatch {
        field: String,
        expected: FieldType,
        got: String,
    },
    #[error("{0} not found")]
    NotFound(String),
    /// The shard cannot take work (stopping, or its mailbox is gone).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}
