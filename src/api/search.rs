//! `POST /v1/search`: decodes a [`SearchRequest`], runs [`SearchService::search`] and
//! answers the items with their metadata. The response types are shared with rerank.
//!
//! [`SearchService::search`]: crate::service::search::SearchService::search

use serde::Serialize;
use serde_json::{Map, Value};

use std::collections::BTreeMap;

use super::decode::{limit, optional_bool, optional_string, required_query, rules};
use super::embedded_events::embedded_events;
use super::recommend::explanation;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::search::{SearchRequest, DEFAULT_LIMIT, MAX_LIMIT};

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let search = SearchRequest {
        query: required_query(&body)?,
        user_id: optional_string(&body, "user_id")?,
        session_id: optional_string(&body, "session_id")?,
        events: embedded_events(&body)?,
        limit: limit(&body, DEFAULT_LIMIT, MAX_LIMIT)?,
        tables: tables(&body)?,
        rules: rules(&body)?,
        explain: optional_bool(&body, "explain")?.unwrap_or(false),
    };
    let found = state.services.search.search(&search).await?;
    let items: Vec<FoundItem> = found
        .iter()
        .map(|found| FoundItem {
            id: &found.id,
            item_id: &found.id,
            score: found.score,
            metadata: Some(metadata(&found.row)),
            explanation: found.explanation.as_ref().map(explanation),
        })
        .collect();
    ok(&FoundItems { items })
}

/// The optional `tables` filter: an array of table names (every table when absent).
fn tables(body: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let invalid = || ApiError::validation("\"tables\" must be an array of table names");
    match body.get("tables") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(names)) if !names.is_empty() => names
            .iter()
            .map(|name| match name {
                Value::String(name) if !name.is_empty() => Ok(name.clone()),
                _ => Err(invalid()),
            })
            .collect(),
        Some(_) => Err(invalid()),
    }
}

/// A search or rerank response: typed, so that scores serialize as the shortest
/// decimal of their `f32` (a detour through a JSON `Value` widens them to f64 digits).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct FoundItems<'a> {
    pub items: Vec<FoundItem<'a>>,
}

/// One item of a search or rerank response; both key names carry the id (DESIGN §7).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct FoundItem<'a> {
    pub id: &'a str,
    pub item_id: &'a str,
    pub score: f32,
    /// Search only: title, description, price, imageUrl as the catalog has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// With `explain`: each part's contribution (text, the features, boost); they sum to `score`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<BTreeMap<String, f32>>,
}

/// The response metadata of a stored row (DESIGN.md §7): `title` (else `name`),
/// `description`, `price`, `imageUrl` (else `image_url`, else `image`); absent
/// values are left out.
fn metadata(row: &Map<String, Value>) -> Map<String, Value> {
    let mut metadata = Map::new();
    let first_string = |fields: &[&str]| {
        fields
            .iter()
            .find_map(|field| row.get(*field).and_then(Value::as_str).filter(|text| !text.is_empty()))
            .map(|text| Value::String(text.to_owned()))
    };
    if let Some(title) = first_string(&["title", "name"]) {
        metadata.insert("title".into(), title);
    }
    if let Some(description) = first_string(&["description"]) {
        metadata.insert("description".into(), description);
    }
    if let Some(price) = row.get("price").filter(|price| price.is_number() || price.is_string()) {
        metadata.insert("price".into(), price.clone());
    }
    if let Some(image) = first_string(&["imageUrl", "image_url", "image"]) {
        metadata.insert("imageUrl".into(), image);
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn metadata_takes_the_first_present_name_of_each_key() {
        let row = object(
            json!({"id": "1", "name": "Heat", "description": "LA crime", "price": 9.5,
                                "image_url": "https://img/1.jpg", "image": "ignored"}),
        );
        assert_eq!(
            Value::Object(metadata(&row)),
            json!({"title": "Heat", "description": "LA crime", "price": 9.5, "imageUrl": "https://img/1.jpg"})
        );
        let row = object(json!({"title": "T", "name": "N", "imageUrl": "a", "price": [1]}));
        assert_eq!(Value::Object(metadata(&row)), json!({"title": "T", "imageUrl": "a"}));
        assert!(metadata(&object(json!({"id": "x"}))).is_empty());
    }
}
