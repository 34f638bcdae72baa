//! Decoding rules that several endpoints share: ids, optional strings, the
//! `context` object, the search `query` and `limit`. Each failure is the
//! `ApiError` the SPEC gives for it.

use serde_json::{Map, Value};

use super::ApiError;
use crate::domain::rules::Rules;

/// A non-empty string id (`field` names it in the error).
pub fn item_id(value: &Value, field: &str) -> Result<String, ApiError> {
    take_item_id(value.clone(), field)
}

/// Like [`item_id`], moving the id out of `value` instead of copying it.
pub fn take_item_id(value: Value, field: &str) -> Result<String, ApiError> {
    match value {
        Value::String(id) if !id.is_empty() => Ok(id),
        _ => Err(ApiError::validation(format!("{field} must hold non-empty string ids"))),
    }
}

/// An optional non-empty string: absent or null → `None`; anything else → 422.
pub fn optional_string(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
        Some(_) => Err(ApiError::validation(format!("\"{field}\" must be a non-empty string"))),
    }
}

/// The optional `context` object: request features (region, device, ...).
pub fn request_context(body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    match body.get("context") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(context)) => Ok(context.clone()),
        Some(_) => Err(ApiError::validation("\"context\" must be an object")),
    }
}

/// The required, non-blank `query`.
pub fn required_query(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("query") {
        None | Some(Value::Null) => Err(ApiError::validation("\"query\" is required")),
        Some(Value::String(query)) if !query.trim().is_empty() => Ok(query.clone()),
        Some(Value::String(_)) => Err(ApiError::validation("\"query\" must not be empty")),
        Some(_) => Err(ApiError::validation("\"query\" must be a string")),
    }
}

/// An optional boolean: absent or null → `None`; anything else → 422.
pub fn optional_bool(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(ApiError::validation(format!("\"{field}\" must be a boolean"))),
    }
}

/// Serde's reading of an optional [`crate::domain::whole_number`] (null reads as absent).
pub fn optional_whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    use serde::Deserialize;
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(value) => crate::domain::whole_number(&value)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("expected an integer >= 0")),
    }
}

/// `limit`: `default` when absent, else an integer in `0..=max`.
pub fn limit(body: &Map<String, Value>, default: usize, max: usize) -> Result<usize, ApiError> {
    match body.get("limit") {
        None | Some(Value::Null) => Ok(default),
        Some(value) => match crate::domain::whole_number(value) {
            Some(limit) if limit <= max as u64 => Ok(limit as usize),
            _ => Err(ApiError::validation(format!(
                "\"limit\" must be an integer from 0 to {max}"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn query_and_limit_rules() {
        assert_eq!(required_query(&object(json!({"query": "heat"}))).unwrap(), "heat");
        for bad in [
            json!({}),
            json!({"query": null}),
            json!({"query": " "}),
            json!({"query": 3}),
        ] {
            assert!(required_query(&object(bad)).is_err());
        }
        assert_eq!(limit(&object(json!({})), 50, 1000).unwrap(), 50);
        assert_eq!(limit(&object(json!({"limit": 0})), 50, 1000).unwrap(), 0);
        assert_eq!(limit(&object(json!({"limit": 1000})), 50, 1000).unwrap(), 1000);
        assert_eq!(limit(&object(json!({"limit": 3.0})), 50, 1000).unwrap(), 3);
        for bad in [json!(-1), json!(1001), json!(2.5), json!(-2.0), json!("3"), json!(true)] {
            assert!(limit(&object(json!({ "limit": bad })), 50, 1000).is_err(), "{bad}");
        }
    }
}

/// The optional business rules (`exclude_ids`, `filters`, `boosts`, `diversity`).
pub fn rules(body: &Map<String, Value>) -> Result<Option<Rules>, ApiError> {
    Rules::from_fields(body).map_err(|error| ApiError::validation(error.0))
}
