//! `POST /v1/search/rerank` (also `/search/rerank`): decodes a [`RerankRequest`]
//! (the ids, the caller's retrieval metadata, the embedded events), runs
//! [`SearchService::rerank`] and answers the ids in their new order.
//!
//! [`SearchService::rerank`]: crate::service::search::SearchService::rerank

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::decode::{item_id, limit, optional_bool, optional_string, required_query, rules};
use super::embedded_events::embedded_events;
use super::recommend::explanation;
use super::search::{FoundItem, FoundItems};
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::recommend::MAX_CANDIDATES;
use crate::service::search::{RerankRequest, Retrieval, DEFAULT_LIMIT, DEFAULT_RERANK_MODEL};

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let request = RerankRequest {
        query: required_query(&body)?,
        ids: item_ids(&body)?,
        model_id: optional_string(&body, "model_id")?.unwrap_or_else(|| DEFAULT_RERANK_MODEL.to_owned()),
        user_id: optional_string(&body, "user_id")?,
        session_id: optional_string(&body, "session_id")?,
        search_context: match body.get("search_context") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(context)) => context.clone(),
            Some(_) => return Err(ApiError::validation("\"search_context\" must be an object")),
        },
        retrieval: retrieval_metadata(&body)?,
        events: embedded_events(&body)?,
        limit: limit(&body, DEFAULT_LIMIT, MAX_CANDIDATES)?,
        include_deleted: optional_bool(&body, "include_deleted")?.unwrap_or(false),
        rules: rules(&body)?,
        explain: optional_bool(&body, "explain")?.unwrap_or(false),
    };
    let reranked = state.services.search.rerank(request).await?;
    let items = reranked
        .iter()
        .map(|item| FoundItem {
            id: &item.id,
            item_id: &item.id,
            score: item.score,
            metadata: None,
            explanation: item.explanation.as_ref().map(explanation),
        })
        .collect();
    ok(&FoundItems { items })
}

/// The required `item_ids`: non-empty strings, at most [`MAX_CANDIDATES`]. An id
/// given more than once is ranked once per occurrence, as recommend does.
fn item_ids(body: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let ids = match body.get("item_ids") {
        None | Some(Value::Null) => return Err(ApiError::validation("\"item_ids\" is required")),
        Some(Value::Array(ids)) => ids,
        Some(_) => return Err(ApiError::validation("\"item_ids\" must be an array of strings")),
    };
    if ids.len() > MAX_CANDIDATES {
        return Err(ApiError::validation(format!(
            "at most {MAX_CANDIDATES} \"item_ids\" per request"
        )));
    }
    ids.iter().map(|id| item_id(id, "item_ids")).collect()
}

/// `item_retrieval_metadata`: objects with a string `item_id` and optional numeric
/// `retrieval_score` and `rank` (>= 0); other fields are ignored. The first entry
/// of an id counts.
fn retrieval_metadata(body: &Map<String, Value>) -> Result<HashMap<String, Retrieval>, ApiError> {
    let entries = match body.get("item_retrieval_metadata") {
        None | Some(Value::Null) => return Ok(HashMap::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(ApiError::validation(
                "\"item_retrieval_metadata\" must be an array of objects",
            ))
        }
    };
    let mut metadata = HashMap::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let invalid = |what: &str| ApiError::validation(format!("item_retrieval_metadata[{index}]: {what}"));
        let Value::Object(entry) = entry else {
            return Err(invalid("must be an object"));
        };
        let id = match entry.get("item_id") {
            Some(Value::String(id)) if !id.is_empty() => id.clone(),
            None | Some(Value::Null) => return Err(invalid("\"item_id\" is required")),
            Some(_) => return Err(invalid("\"item_id\" must be a non-empty string")),
        };
        let number = |field: &str| match entry.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) => Ok(number.as_f64()),
            Some(_) => Err(invalid(&format!("\"{field}\" must be a number"))),
        };
        let score = number("retrieval_score")?;
        let rank = number("rank")?;
        if rank.is_some_and(|rank| rank < 0.0) {
            return Err(invalid("\"rank\" must be >= 0"));
        }
        metadata.entry(id).or_insert(Retrieval { score, rank });
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn retrieval_metadata_rules() {
        let parsed = retrieval_metadata(&body(json!({"item_retrieval_metadata": [
            {"item_id": "a", "retrieval_score": 0.5, "rank": 2, "source": "bm25"},
            {"item_id": "b"},
            {"item_id": "a", "retrieval_score": 9}
        ]})))
        .unwrap();
        assert_eq!(
            parsed["a"],
            Retrieval {
                score: Some(0.5),
                rank: Some(2.0)
            }
        );
        assert_eq!(parsed["b"], Retrieval::default());
        for bad in [
            json!({"item_retrieval_metadata": {}}),
            json!({"item_retrieval_metadata": [3]}),
            json!({"item_retrieval_metadata": [{"retrieval_score": 1}]}),
            json!({"item_retrieval_metadata": [{"item_id": 7}]}),
            json!({"item_retrieval_metadata": [{"item_id": "a", "retrieval_score": "high"}]}),
            json!({"item_retrieval_metadata": [{"item_id": "a", "rank": -1}]}),
        ] {
            assert!(retrieval_metadata(&body(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_are_required_non_empty_strings_each_occurrence_kept() {
        assert_eq!(
            item_ids(&body(json!({"item_ids": ["a", "b", "a"]}))).unwrap(),
            ["a", "b", "a"]
        );
        for bad in [
            json!({}),
            json!({"item_ids": "a"}),
            json!({"item_ids": ["a", ""]}),
            json!({"item_ids": [1]}),
        ] {
            assert!(item_ids(&body(bad.clone())).is_err(), "{bad}");
        }
    }
}
