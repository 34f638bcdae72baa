//! Catalog endpoints: tables, items (one and bulk), soft and purge deletes, field remaps.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::error::row_failure;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::domain::catalog::{FieldType, Relation, TableRecord, MAX_FAILED_IDS};

/// Body of `PUT /v1/catalog/table`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PutTableBody {
    table_name: String,
    description: Option<String>,
    relations: Option<Vec<Relation>>,
}

/// Body of `PUT /v1/catalog/table/{name}/fields/{field}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RemapBody {
    #[serde(rename = "type")]
    field_type: String,
    /// Clear the stored values that do not convert (remove the field from those rows)
    /// and remap; without it such values refuse the remap (422, nothing changed).
    force: Option<bool>,
}

/// The answer to a remap: the table record, and what became of the stored values.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct RemapAnswer<'a> {
    #[serde(flatten)]
    table: &'a TableRecord,
    /// Stored values now of the new type (converted or already fitting).
    converted: usize,
    /// Ids of the rows whose value did not convert and was cleared (`force`), the
    /// first 100 by id.
    failed: &'a [String],
    /// How many values did not convert.
    failed_count: usize,
}

/// `GET /v1/catalog/table`: every table.
pub async fn list_tables(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&json!({ "tables": state.services.catalog.list_tables().await? }))
}

/// `PUT /v1/catalog/table`: create or update a table.
pub async fn put_table(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body: PutTableBody = request.json()?;
    let record = state
        .services
        .catalog
        .put_table(&body.table_name, body.description, body.relations)
        .await?;
    ok(&*record)
}

/// `GET /v1/catalog/table/{name}`: the table record.
pub async fn get_table(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&*state.services.catalog.get_table(&request.params[0])?)
}

/// `DELETE /v1/catalog/table/{name}`: the table and its items.
pub async fn delete_table(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let name = &request.params[0];
    state.services.catalog.delete_table(name).await?;
    ok(&json!({ "table_name": name, "deleted": true }))
}

/// `PUT /v1/catalog/table/{name}/fields/{field}`: remap a field's type.
pub async fn remap_field(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let services = &state.services;
    let (table, field) = (&request.params[0], &request.params[1]);
    let body: RemapBody = request.json()?;
    let to = FieldType::from_name(&body.field_type).ok_or_else(|| {
        let known: Vec<_> = FieldType::ALL.iter().map(|t| t.name()).collect();
        ApiError::validation(format!(
            "unknown field type {:?} (known: {})",
            body.field_type,
            known.join(", ")
        ))
    })?;
    let remap = services
        .catalog
        .remap_field(table, field, to, body.force.unwrap_or(false))
        .await?;
    let conversion = &remap.conversion;
    if !remap.applied {
        let details = conversion.failed.iter().map(|id| json!({ "id": id })).collect();
        return Err(ApiError::Validation {
            message: format!(
                "{} stored value(s) of field {field:?} in table {table:?} do not convert to {} \
                 ({} do); nothing changed. Send \"force\": true to remove the field from those rows \
                 and remap (details: the first {} ids)",
                conversion.failed_count,
                to.name(),
                conversion.converted,
                MAX_FAILED_IDS
            ),
            details,
        });
    }
    ok(&RemapAnswer {
        table: &remap.table,
        converted: conversion.converted,
        failed: &conversion.failed,
        failed_count: conversion.failed_count,
    })
}

/// `PUT /v1/catalog/item`: upsert one item.
pub async fn put_item(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let services = &state.services;
    let item = request.json_value()?;
    if !item.is_object() {
        return Err(ApiError::validation(
            "the body must be one item object; use PUT /v1/catalog/items for many",
        ));
    }
    let stored = services
        .catalog
        .upsert_items(vec![item])
        .await?
        .pop()
        .expect("one result per row")?;
    ok(&item_ack(&stored))
}

/// `GET /v1/catalog/item/{table}/{id}`: the stored item object itself.
pub async fn get_item(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state
        .services
        .catalog
        .get_item(&request.params[0], &request.params[1])?)
}

/// `PATCH /v1/catalog/item/{table}/{id}`: merge the fields sent (null removes one).
pub async fn patch_item(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let (table, id) = (&request.params[0], &request.params[1]);
    let stored = state
        .services
        .catalog
        .patch_item(table, id, patch_body(&request)?)
        .await?;
    ok(&item_ack(&stored))
}

/// `DELETE /v1/catalog/item/{table}/{id}`: soft-delete, or remove with `?purge=true`.
pub async fn delete_item(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let (table, id) = (&request.params[0], &request.params[1]);
    let purge = request.query_flag("purge");
    state.services.catalog.delete_item(table, id, purge).await?;
    ok(&json!({ "id": id, "_table": table, "is_deleted": true, "purged": purge }))
}

/// `PUT /v1/catalog/items`, bulk upsert: a JSON array, `{"items": [...]}`, or NDJSON
/// (one object per line). Rows that fail are reported by index; the others are stored.
pub async fn put_items(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let start = request.body.trim_ascii_start();
    let parsed: Vec<Result<Value, ApiError>> = if start.starts_with(b"[") {
        match request.json_value()? {
            Value::Array(rows) => rows.into_iter().map(Ok).collect(),
            _ => unreachable!("a JSON document starting with '[' is an array"),
        }
    } else if let Some(rows) = wrapped_items(&request)? {
        rows.into_iter().map(Ok).collect()
    } else {
        let lines = request
            .body
            .split(|&b| b == b'\n')
            .filter(|line| !line.trim_ascii().is_empty());
        lines
            .map(|line| serde_json::from_slice(line).map_err(|error| ApiError::MalformedJson(error.to_string())))
            .collect()
    };
    if parsed.is_empty() {
        return Err(ApiError::validation("no items in the request"));
    }
    let mut failed = Vec::new();
    let (indexes, rows): (Vec<usize>, Vec<Value>) = parsed
        .into_iter()
        .enumerate()
        .filter_map(|(index, row)| {
            row.map_err(|error| failed.push(row_failure(index, error)))
                .ok()
                .map(|row| (index, row))
        })
        .unzip();
    let results = state.services.catalog.upsert_items(rows).await?;
    let mut upserted = 0;
    for (index, result) in indexes.into_iter().zip(results) {
        match result {
            Ok(_) => upserted += 1,
            Err(error) => failed.push(row_failure(index, error)),
        }
    }
    failed.sort_by_key(|failure| failure["index"].as_u64());
    // As for events: a bulk request none of whose rows was stored is a 400.
    if upserted == 0 {
        return Err(ApiError::AllRejected {
            message: format!("all {} items were rejected", failed.len()),
            details: failed,
        });
    }
    ok(&json!({ "upserted": upserted, "failed": failed }))
}

/// The wrapped form of a bulk body, `{"items": [...]}` (as users and events are sent),
/// when the body is one JSON object of that shape; `None` leaves it to NDJSON.
fn wrapped_items(request: &ApiRequest) -> Result<Option<Vec<Value>>, ApiError> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(&request.body) else {
        return Ok(None);
    };
    if object.contains_key("id") || !object.contains_key("items") {
        return Ok(None);
    }
    match object.remove("items") {
        Some(Value::Array(rows)) => Ok(Some(rows)),
        _ => Err(ApiError::validation("\"items\" must be an array of item objects")),
    }
}

/// A `PATCH` body: a JSON object of the fields to set (null removes one). The id and
/// table come from the path.
pub fn patch_body(request: &ApiRequest) -> Result<Map<String, Value>, ApiError> {
    match request.json_value()? {
        Value::Object(patch) => Ok(patch),
        _ => Err(ApiError::validation(
            "the body must be a JSON object of the fields to change (null removes one)",
        )),
    }
}

/// The response to a single upsert: the reserved fields of the stored item.
fn item_ack(stored: &Map<String, Value>) -> Value {
    json!({
        "id": stored["id"],
        "_table": stored["_table"],
        "created_at": stored["created_at"],
        "updated_at": stored["updated_at"],
        "is_deleted": stored["is_deleted"],
    })
}
