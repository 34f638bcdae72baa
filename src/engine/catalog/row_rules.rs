//! From an incoming JSON row to a stored one: the reserved-field rules of SPEC
//! "Item" and "User", and type inference of custom fields.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{CatalogError, TableRegistry, DEFAULT_ITEM_TABLE, USERS_TABLE};
use crate::domain::catalog::{FieldType, TableRecord};
use crate::storage::Cf;
use crate::timestamp::{format_rfc3339, parse_iso8601, parse_rfc3339, parse_time_value};

/// Longest id or uid, in bytes.
const MAX_ID_BYTES: usize = 1024;

/// Catalog items and users share the rules; they differ in their key field and table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    Item,
    User,
}

impl RowKind {
    /// The primary key field: `id` for items, `uid` for users.
    pub fn id_field(self) -> &'static str {
        match self {
            RowKind::Item => "id",
            RowKind::User => "uid",
        }
    }

    /// The column family rows of this kind live in.
    pub fn cf(self) -> Cf {
        match self {
            RowKind::Item => Cf::Items,
            RowKind::User => Cf::Users,
        }
    }

    /// What a row of this kind is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            RowKind::Item => "item",
            RowKind::User => "user",
        }
    }

    /// A reserved field: the key, `_table`, `created_at`, `updated_at`, `is_deleted`.
    pub fn is_reserved(self, field: &str) -> bool {
        field == self.id_field() || matches!(field, "created_at" | "updated_at" | "is_deleted" | "_table")
    }
}

/// A row that passed validation, ready to be stamped and stored.
#[derive(Debug)]
pub struct PreparedRow {
    pub id: String,
    /// The table snapshot the row was checked against.
    pub table: Arc<TableRecord>,
    /// Custom fields plus `is_deleted`; nulls removed.
    pub fields: Map<String, Value>,
    /// A `created_at` the client sent, normalized to RFC 3339.
    pub created_at: Option<String>,
}

/// The reserved times of a row already stored.
#[derive(Debug, Default, Deserialize)]
pub struct StoredTimes {
    pub created_at: Option<String>,
}

/// The row's primary key, checked: a non-empty string without control characters.
pub fn id_of(kind: RowKind, row: &Value) -> Result<&str, CatalogError> {
    let field = kind.id_field();
    let id = match row {
        Value::Object(object) => object.get(field),
        _ => {
            return Err(CatalogError::Invalid(format!(
                "a {} must be a JSON object",
                kind.noun()
            )))
        }
    };
    match id {
        None | Some(Value::Null) => Err(CatalogError::Invalid(format!("{field:?} is required"))),
        Some(Value::String(id)) if id.is_empty() => Err(CatalogError::Invalid(format!("{field:?} must not be empty"))),
        Some(Value::String(id)) if id.len() > MAX_ID_BYTES => Err(CatalogError::Invalid(format!(
            "{field:?} is longer than {MAX_ID_BYTES} bytes"
        ))),
        Some(Value::String(id)) if id.chars().any(char::is_control) => Err(CatalogError::Invalid(format!(
            "{field:?} must not contain control characters"
        ))),
        Some(Value::String(id)) => Ok(id),
        Some(_) => Err(CatalogError::Invalid(format!("{field:?} must be a string"))),
    }
}

/// Checks a row's reserved fields and custom field types, inferring (and recording
/// in the registry) the types of fields seen for the first time.
pub fn prepare_row(kind: RowKind, row: Value, tables: &TableRegistry) -> Result<PreparedRow, CatalogError> {
    let id = id_of(kind, &row)?.to_owned();
    let Value::Object(mut object) = row else {
        unreachable!("id_of accepted only objects")
    };
    let table_name = table_of(kind, &object)?;
    let mut table = tables.get_or_create(&table_name)?;
    refuse_nulls(kind, &object)?;
    let is_deleted = match object.remove("is_deleted") {
        None => false,
        Some(Value::Bool(flag)) => flag,
        Some(_) => return Err(CatalogError::Invalid("\"is_deleted\" must be a boolean".into())),
    };
    let created_at = match object.remove("created_at") {
        None => None,
        Some(value) => Some(format_rfc3339(parse_time_value(&value).ok_or_else(|| {
            CatalogError::Invalid("\"created_at\" must be an ISO 8601 time with a date, or a unix number".into())
        })?)),
    };
    object.retain(|field, _| !kind.is_reserved(field));

    let mut new_fields = Vec::new();
    let mut new_lengths = Vec::new();
    for (field, value) in &mut object {
        if field.is_empty() || field.len() > 256 || field.chars().any(char::is_control) {
            return Err(CatalogError::Invalid(format!(
                "field name {field:?} must be 1-256 printable characters"
            )));
        }
        // SPEC: custom fields of type object are for events; a catalog row's
        // structured attributes are arrays or strings.
        if value.is_object() {
            return Err(CatalogError::Invalid(format!(
                "field {field:?} is an object: objects are accepted only in events' properties; \
                 send an array or a string"
            )));
        }
        let typed = match table.fields.get(field) {
            Some(expected) => *expected,
            None => {
                let inferred = FieldType::infer(value, table.is_relation(field)).expect("nulls were removed");
                new_fields.push((field.clone(), inferred));
                inferred
            }
        };
        typed.check(field, value)?;
        if let (FieldType::Embedding, Value::Array(values)) = (typed, &*value) {
            match table.embedding_lengths.get(field) {
                Some(&expected) if expected != values.len() => {
                    return Err(embedding_length_error(&table_name, field, expected, values.len()))
                }
                Some(_) => {}
                None if values.is_empty() => {}
                None => new_lengths.push((field.clone(), values.len())),
            }
        }
        normalize_time(typed, value);
    }
    if !new_fields.is_empty() || !new_lengths.is_empty() {
        table = tables.add_fields(&table_name, &new_fields, &new_lengths)?;
    }
    object.insert("is_deleted".into(), Value::Bool(is_deleted));
    Ok(PreparedRow {
        id,
        table,
        fields: object,
        created_at,
    })
}

/// Types the fields `rows` bring for the first time as the first valid row that has
/// each, in request order, says. The catalog shards check their rows in parallel, so
/// without this the first shard to get to a row would decide (how ids hash, not the
/// order the client sent).
pub fn type_new_fields_in_order(kind: RowKind, rows: &[Value], tables: &TableRegistry) {
    for row in rows {
        let Value::Object(object) = row else { continue };
        let Ok(table_name) = table_of(kind, object) else {
            continue;
        };
        let known = tables.get(&table_name);
        let brings_new = object.iter().any(|(field, value)| {
            !value.is_null()
                && !kind.is_reserved(field)
                && known.as_ref().is_none_or(|table| {
                    // A new field, or the first length of an embedding field.
                    match table.fields.get(field) {
                        None => true,
                        Some(FieldType::Embedding) => {
                            value.as_array().is_some_and(|values| !values.is_empty())
                                && !table.embedding_lengths.contains_key(field)
                        }
                        Some(_) => false,
                    }
                })
        });
        if brings_new {
            // Only what it records counts here; the row itself is checked on its shard.
            let _ = prepare_row(kind, row.clone(), tables);
        }
    }
}

/// A null value is refused for every field an upsert may set: PUT and POST store the
/// whole row, so a field to drop is left out (only PATCH takes null, to remove a
/// field). System-set fields (`updated_at`, a user's `created_at`) are ignored
/// whatever they hold, and a null id is "required" (see [`id_of`]).
fn refuse_nulls(kind: RowKind, object: &Map<String, Value>) -> Result<(), CatalogError> {
    let ignored = |field: &str| field == "updated_at" || (kind == RowKind::User && field == "created_at");
    let nulls: Vec<&str> = object
        .iter()
        .filter(|(field, value)| value.is_null() && field.as_str() != kind.id_field() && !ignored(field))
        .map(|(field, _)| field.as_str())
        .collect();
    if nulls.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = nulls.iter().map(|field| format!("{field:?}")).collect();
    Err(CatalogError::Invalid(format!(
        "field {} is null: an upsert stores the whole {}, so leave a field out instead \
         (PATCH takes null to remove a field)",
        named.join(", "),
        kind.noun()
    )))
}

/// A value of an embedding field whose length is not the one the table recorded.
pub(super) fn embedding_length_error(table: &str, field: &str, expected: usize, given: usize) -> CatalogError {
    CatalogError::Invalid(format!(
        "field {field:?} holds embeddings of length {expected} in table {table:?}; this one has length {given}"
    ))
}

/// A time given as an ISO 8601 string in another form than RFC 3339 is stored as RFC
/// 3339 (unix numbers and RFC 3339 strings are kept as sent).
fn normalize_time(typed: FieldType, value: &mut Value) {
    if let (FieldType::Time, Value::String(text)) = (typed, &*value) {
        if parse_rfc3339(text).is_none() {
            if let Some(millis) = parse_iso8601(text) {
                *value = Value::String(format_rfc3339(millis));
            }
        }
    }
}

/// The stored form: the prepared fields plus every reserved field. `created_at`
/// comes from the stored row if there is one, else from the client, else now.
pub fn stamp_row(kind: RowKind, row: PreparedRow, stored: Option<&StoredTimes>, now_millis: i64) -> Map<String, Value> {
    let PreparedRow {
        id,
        table,
        mut fields,
        created_at,
    } = row;
    let now = format_rfc3339(now_millis);
    let created_at = stored
        .and_then(|s| s.created_at.clone())
        .or(created_at)
        .unwrap_or_else(|| now.clone());
    fields.insert(kind.id_field().into(), Value::String(id));
    fields.insert("_table".into(), Value::String(table.table_name.clone()));
    fields.insert("created_at".into(), Value::String(created_at));
    fields.insert("updated_at".into(), Value::String(now));
    fields
}

fn table_of(kind: RowKind, object: &Map<String, Value>) -> Result<String, CatalogError> {
    let named = match object.get("_table") {
        None => None,
        Some(Value::Null) => {
            return Err(CatalogError::Invalid(
                "\"_table\" is null: name a table or leave it out".into(),
            ))
        }
        Some(Value::String(name)) => Some(name.as_str()),
        Some(_) => return Err(CatalogError::Invalid("\"_table\" must be a string".into())),
    };
    match (kind, named) {
        (RowKind::User, None | Some(USERS_TABLE)) => Ok(USERS_TABLE.to_owned()),
        (RowKind::User, Some(other)) => Err(CatalogError::Invalid(format!(
            "a user lives in table \"users\", not {other:?}"
        ))),
        (RowKind::Item, Some(USERS_TABLE)) => Err(CatalogError::Invalid(
            "table \"users\" holds users: use POST /v1/users".into(),
        )),
        (RowKind::Item, named) => {
            let name = named.unwrap_or(DEFAULT_ITEM_TABLE);
            super::validate_table_name(name)?;
            Ok(name.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use serde_json::json;

    fn prepared(created_at: Option<&str>) -> PreparedRow {
        let table = Arc::new(TableRecord {
            table_name: "products".into(),
            description: String::new(),
            relations: Vec::new(),
            fields: BTreeMap::new(),
            embedding_lengths: BTreeMap::new(),
            created_at: String::new(),
            updated_at: String::new(),
        });
        let mut fields = Map::new();
        fields.insert("is_deleted".into(), json!(false));
        PreparedRow {
            id: "p1".into(),
            table,
            fields,
            created_at: created_at.map(str::to_owned),
        }
    }

    #[test]
    fn created_at_is_kept_from_the_stored_row_then_the_client_then_now() {
        let now = 1_700_000_000_000;
        let stored = StoredTimes {
            created_at: Some("2020-01-01T00:00:00.000Z".into()),
        };
        let row = stamp_row(
            RowKind::Item,
            prepared(Some("2021-01-01T00:00:00.000Z")),
            Some(&stored),
            now,
        );
        assert_eq!(row["created_at"], "2020-01-01T00:00:00.000Z");
        assert_eq!(row["updated_at"], "2023-11-14T22:13:20.000Z");
        let row = stamp_row(RowKind::Item, prepared(Some("2021-01-01T00:00:00.000Z")), None, now);
        assert_eq!(row["created_at"], "2021-01-01T00:00:00.000Z");
        let row = stamp_row(RowKind::Item, prepared(None), None, now);
        assert_eq!(row["created_at"], row["updated_at"]);
        assert_eq!(
            (row["id"].as_str(), row["_table"].as_str()),
            (Some("p1"), Some("products"))
        );
    }

    #[test]
    fn ids_and_tables_are_checked() {
        assert!(id_of(RowKind::Item, &json!({"id": "a"})).is_ok());
        for bad in [
            json!({}),
            json!({"id": ""}),
            json!({"id": 5}),
            json!({"id": "a\u{0}b"}),
            json!([1]),
        ] {
            assert!(id_of(RowKind::Item, &bad).is_err(), "{bad}");
        }
        assert!(id_of(RowKind::User, &json!({"uid": "u"})).is_ok());
        let object = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(table_of(RowKind::Item, &object(json!({}))).unwrap(), DEFAULT_ITEM_TABLE);
        assert!(table_of(RowKind::Item, &object(json!({"_table": "users"}))).is_err());
        assert!(table_of(RowKind::Item, &object(json!({"_table": 3}))).is_err());
        assert!(table_of(RowKind::User, &object(json!({"_table": "items"}))).is_err());
    }
}
