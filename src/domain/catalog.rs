//! What a catalog table is, as every layer names it: its record (name, relations,
//! custom field types) and the types a custom field can have. The tables and their
//! rows themselves live in `crate::engine::catalog`, which also infers, checks and
//! converts field values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The type of a custom field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum FieldType {
    #[serde(rename = "string")]
    String,
    #[serde(rename = "number")]
    Number,
    #[serde(rename = "boolean")]
    Boolean,
    #[serde(rename = "array<string>")]
    ArrayString,
    /// RFC 3339 string or unix number (s or ms).
    #[serde(rename = "time")]
    Time,
    /// Array of numbers.
    #[serde(rename = "embedding")]
    Embedding,
    /// Primary key (or keys) of rows in another table.
    #[serde(rename = "relation")]
    Relation,
    #[serde(rename = "object")]
    Object,
}

impl FieldType {
    /// Every field type.
    pub const ALL: [FieldType; 8] = [
        FieldType::String,
        FieldType::Number,
        FieldType::Boolean,
        FieldType::ArrayString,
        FieldType::Time,
        FieldType::Embedding,
        FieldType::Relation,
        FieldType::Object,
    ];

    /// The name used on the wire.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::ArrayString => "array<string>",
            FieldType::Time => "time",
            FieldType::Embedding => "embedding",
            FieldType::Relation => "relation",
            FieldType::Object => "object",
        }
    }

    /// Parses a wire name.
    pub fn from_name(name: &str) -> Option<FieldType> {
        FieldType::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Most ids of rows whose value does not convert that a field remap reports (it
/// reports how many there are besides).
pub const MAX_FAILED_IDS: usize = 100;

/// A relation column: `field` holds primary keys of rows in `relation_table`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Relation {
    pub field: String,
    pub relation_table: String,
}

/// A table as stored and as returned by the API.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TableRecord {
    pub table_name: String,
    pub description: String,
    pub relations: Vec<Relation>,
    /// Custom field types, inferred at first ingest or remapped.
    pub fields: BTreeMap<String, FieldType>,
    /// The length of every value of each embedding field: the first stored one's.
    /// (Absent from records stored before lengths were kept: the next value sets it.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub embedding_lengths: BTreeMap<String, usize>,
    pub created_at: String,
    pub updated_at: String,
}

impl TableRecord {
    /// Whether `field` is declared as a relation column.
    pub fn is_relation(&self, field: &str) -> bool {
        self.relations.iter().any(|relation| relation.field == field)
    }
}
