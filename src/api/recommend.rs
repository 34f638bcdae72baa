//! `POST /v1/recommend`: rank a caller's candidates with a named model.

use serde_json::{json, Map, Value};

use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::ranking::{rank, Candidate, ModelError, RankContext};

/// Most candidates in one request (DESIGN.md §7).
const MAX_CANDIDATES: usize = 10_000;

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let model_id = model_id(&body)?;
    let candidates = candidates(&body)?;
    let context = RankContext {
        user_id: optional_string(&body, "user_id")?,
        session_id: optional_string(&body, "session_id")?,
        context: match body.get("context") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(context)) => context.clone(),
            Some(_) => return Err(ApiError::validation("\"context\" must be an object")),
        },
        now: state.engine.now_millis(),
    };
    if context.user_id.is_none() && context.session_id.is_none() {
        return Err(ApiError::validation(
            "one of \"user_id\" and \"session_id\" is required",
        ));
    }
    let limit = match body.get("limit") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .ok_or_else(|| ApiError::validation("\"limit\" must be an integer >= 0"))? as usize,
        ),
    };
    let model = state
        .models
        .get(&model_id)
        .ok_or_else(|| ApiError::UnknownModel(format!("no model {model_id:?} is configured")))?;
    let ranked = rank(model.as_ref(), &context, &candidates, limit).map_err(|error| match error {
        ModelError::Refused(message) => ApiError::InvalidCombination(message),
        ModelError::RateLimited { retry_after_secs } => ApiError::RateLimited(retry_after_secs),
        ModelError::Unavailable(message) => ApiError::Unavailable(message),
    })?;
    let items: Vec<Value> = ranked
        .into_iter()
        .map(|item| {
            let mut out = json!({ "id": item.id, "score": item.score });
            if !item.echoed.is_empty() {
                out["attributes"] = Value::Object(item.echoed);
            }
            out
        })
        .collect();
    ok(&json!({ "rec_id": uuid::Uuid::now_v7().to_string(), "items": items }))
}

/// `model_id`, or the legacy `model_name`; both present and different is a 400.
fn model_id(body: &Map<String, Value>) -> Result<String, ApiError> {
    match (optional_string(body, "model_id")?, optional_string(body, "model_name")?) {
        (Some(id), Some(name)) if id != name => Err(ApiError::InvalidCombination(format!(
            "\"model_id\" {id:?} and \"model_name\" {name:?} differ"
        ))),
        (Some(id), _) | (None, Some(id)) => Ok(id),
        (None, None) => Err(ApiError::validation("\"model_id\" is required")),
    }
}

/// `item_ids` xor `items` (400 for both or neither), each id a non-empty string.
fn candidates(body: &Map<String, Value>) -> Result<Vec<Candidate>, ApiError> {
    let present = |field: &str| body.get(field).is_some_and(|v| !v.is_null());
    let candidates = match (present("item_ids"), present("items")) {
        (true, true) => {
            return Err(ApiError::InvalidCombination(
                "send \"item_ids\" or \"items\", not both".into(),
            ))
        }
        (false, false) => {
            return Err(ApiError::InvalidCombination(
                "one of \"item_ids\" and \"items\" is required".into(),
            ))
        }
        (true, false) => {
            let Some(Value::Array(ids)) = body.get("item_ids") else {
                return Err(ApiError::validation("\"item_ids\" must be an array of strings"));
            };
            ids.iter()
                .map(|id| {
                    Ok(Candidate {
                        id: item_id(id, "item_ids")?,
                        attributes: Map::new(),
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?
        }
        (false, true) => {
            let Some(Value::Array(items)) = body.get("items") else {
                return Err(ApiError::validation("\"items\" must be an array of objects"));
            };
            items.iter().map(item_candidate).collect::<Result<Vec<_>, ApiError>>()?
        }
    };
    if candidates.len() > MAX_CANDIDATES {
        return Err(ApiError::validation(format!(
            "at most {MAX_CANDIDATES} candidates per request"
        )));
    }
    Ok(candidates)
}

fn item_candidate(item: &Value) -> Result<Candidate, ApiError> {
    let Value::Object(item) = item else {
        return Err(ApiError::validation("each of \"items\" must be an object"));
    };
    let id = item_id(item.get("id").unwrap_or(&Value::Null), "items[].id")?;
    let attributes = match item.get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(attributes)) => {
            for (name, value) in attributes {
                let allowed = match value {
                    Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
                    Value::Array(values) => values.iter().all(Value::is_string),
                    _ => false,
                };
                if !allowed {
                    return Err(ApiError::validation(format!(
                        "attribute {name:?} must be a string, number, boolean or array of strings"
                    )));
                }
            }
            attributes.clone()
        }
        Some(_) => return Err(ApiError::validation("\"attributes\" must be an object")),
    };
    Ok(Candidate { id, attributes })
}

fn item_id(value: &Value, field: &str) -> Result<String, ApiError> {
    match value {
        Value::String(id) if !id.is_empty() => Ok(id.clone()),
        _ => Err(ApiError::validation(format!("{field} must hold non-empty string ids"))),
    }
}

fn optional_string(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
        Some(_) => Err(ApiError::validation(format!("\"{field}\" must be a non-empty string"))),
    }
}
