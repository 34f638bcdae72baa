//! `POST /v1/recommend`: rank a caller's candidates with a named model, from the
//! session's and user's live state, and record what was shown under the `rec_id`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::engine::StateKey;
use crate::ranking::{rank, Candidate, ItemFeatures, ModelError, RankContext, Ranked, Signals};
use crate::training::ShownRecord;

/// Recent items whose embeddings make the profile vector.
const PROFILE_ITEMS: usize = 10;

/// Most candidates in one request (DESIGN.md §7).
pub(super) const MAX_CANDIDATES: usize = 10_000;

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body = match RecommendBody::well_formed(&request.body) {
        Some(body) => body,
        None => RecommendBody::checked(request.json_value()?)?,
    };
    let model = state
        .models
        .get(&body.model_id)
        .ok_or_else(|| ApiError::UnknownModel(format!("no model {:?} is configured", body.model_id)))?;
    let mut candidates = body.candidates;
    attach_features(state, &mut candidates);
    let context = rank_context(state, body.user_id, body.session_id, body.context).await;
    let ranked = rank(model.as_ref(), &context, &candidates, body.limit).map_err(model_error)?;
    let rec_id = uuid::Uuid::now_v7().to_string();
    record_shown(state, &rec_id, &body.model_id, &context, &ranked);
    let items = ranked
        .into_iter()
        .map(|item| RankedItem {
            id: item.id,
            score: item.score,
            attributes: item.echoed,
        })
        .collect();
    ok(&RecommendResponse { rec_id, items })
}

/// A request body that follows every rule.
#[derive(Debug, PartialEq)]
struct RecommendBody {
    model_id: String,
    candidates: Vec<Candidate>,
    user_id: Option<String>,
    session_id: Option<String>,
    context: Map<String, Value>,
    limit: Option<usize>,
}

/// The shape of a valid body, read in one typed pass (no `Value` tree): what
/// almost every request is. `null` reads as absent, as the rules say.
#[derive(Deserialize)]
struct TypedBody {
    model_id: Option<String>,
    model_name: Option<String>,
    item_ids: Option<Vec<String>>,
    items: Option<Vec<TypedItem>>,
    user_id: Option<String>,
    session_id: Option<String>,
    context: Option<Map<String, Value>>,
    limit: Option<u64>,
}

#[derive(Deserialize)]
struct TypedItem {
    id: String,
    attributes: Option<Map<String, Value>>,
}

impl RecommendBody {
    /// The body read in one typed pass, if it has the shape of a valid one and breaks
    /// no rule; `None` otherwise, and [`RecommendBody::checked`] words the error (it
    /// also sees duplicate fields as the rules do: the last one counts).
    fn well_formed(bytes: &[u8]) -> Option<RecommendBody> {
        // serde would read a struct from an array too.
        if bytes.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let typed: TypedBody = serde_json::from_slice(bytes).ok()?;
        let absent_or_non_empty = |field: &Option<String>| field.as_ref().is_none_or(|text| !text.is_empty());
        if ![&typed.model_id, &typed.model_name, &typed.user_id, &typed.session_id]
            .into_iter()
            .all(absent_or_non_empty)
        {
            return None;
        }
        let model_id = either_model_id(typed.model_id, typed.model_name).ok()?;
        let candidates: Vec<Candidate> = match (typed.item_ids, typed.items) {
            (Some(ids), None) => ids.into_iter().map(|id| Candidate::new(id, Map::new())).collect(),
            (None, Some(items)) => items
                .into_iter()
                .map(|item| Candidate::new(item.id, item.attributes.unwrap_or_default()))
                .collect(),
            _ => return None,
        };
        let valid_candidate =
            |candidate: &Candidate| !candidate.id.is_empty() && check_attributes(&candidate.attributes).is_ok();
        if candidates.len() > MAX_CANDIDATES
            || !candidates.iter().all(valid_candidate)
            || (typed.user_id.is_none() && typed.session_id.is_none())
        {
            return None;
        }
        Some(RecommendBody {
            model_id,
            candidates,
            user_id: typed.user_id,
            session_id: typed.session_id,
            context: typed.context.unwrap_or_default(),
            limit: typed.limit.map(|limit| limit as usize),
        })
    }

    /// The body checked rule by rule, in the order the errors are reported.
    fn checked(body: Value) -> Result<RecommendBody, ApiError> {
        let Value::Object(mut body) = body else {
            return Err(ApiError::validation("the body must be a JSON object"));
        };
        let model_id = model_id(&body)?;
        let candidates = candidates(&mut body)?;
        let user_id = optional_string(&body, "user_id")?;
        let session_id = optional_string(&body, "session_id")?;
        let context = request_context(&body)?;
        if user_id.is_none() && session_id.is_none() {
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
        Ok(RecommendBody {
            model_id,
            candidates,
            user_id,
            session_id,
            context,
            limit,
        })
    }
}

/// The 200 body. Typed, so that scores serialize as the shortest decimal of their
/// `f32` (0.8, not 0.800000011920929 as a detour through a JSON `Value` would give).
#[derive(Serialize)]
struct RecommendResponse {
    rec_id: String,
    items: Vec<RankedItem>,
}

#[derive(Serialize)]
struct RankedItem {
    id: String,
    score: f32,
    /// The duplicate-group echo (SPEC recommend rule 1); absent for unique ids.
    #[serde(skip_serializing_if = "Map::is_empty")]
    attributes: Map<String, Value>,
}

/// How a model's refusal reaches the client.
pub(super) fn model_error(error: ModelError) -> ApiError {
    match error {
        ModelError::Refused(message) => ApiError::InvalidCombination(message),
        ModelError::RateLimited { retry_after_secs } => ApiError::RateLimited(retry_after_secs),
        ModelError::Unavailable(message) => ApiError::Unavailable(message),
    }
}

/// The optional `context` object: request features (region, device, ...).
pub(super) fn request_context(body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    match body.get("context") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(context)) => Ok(context.clone()),
        Some(_) => Err(ApiError::validation("\"context\" must be an object")),
    }
}

/// What the models rank with: the session's and user's live signals (as their
/// actors published them, or read from their hosts under the configured deadline
/// when no actor is live; past the deadline, ranking goes on without them and the
/// miss is counted), and the profile embedding of their recent items.
pub(super) async fn rank_context(
    state: &AppState,
    user_id: Option<String>,
    session_id: Option<String>,
    context: Map<String, Value>,
) -> RankContext {
    let now = state.engine.now_millis();
    let read = |key: Option<StateKey>| async move {
        let key = key?;
        let deadline = Duration::from_millis(state.ranking.state_deadline_ms);
        match tokio::time::timeout(deadline, state.engine.signals(key.clone())).await {
            Ok(Ok(signals)) => signals,
            Ok(Err(error)) => {
                tracing::warn!(%error, key = key.key(), "live state unreadable; ranking without it");
                state.ranking.state_errors.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(_) => {
                state.ranking.state_timeouts.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    };
    let (session, user) = futures::join!(
        read(session_id.clone().map(StateKey::Session)),
        read(user_id.clone().map(StateKey::User))
    );
    let profile_embedding = profile_embedding(state, session.as_deref().or(user.as_deref()));
    RankContext {
        user_id,
        session_id,
        context,
        now,
        session,
        user,
        profile_embedding,
    }
}

/// The mean embedding of the latest visited items that carry one.
fn profile_embedding(state: &AppState, signals: Option<&Signals>) -> Option<Vec<f32>> {
    let mut sum: Option<Vec<f32>> = None;
    let mut count = 0;
    for id in signals?.recent.iter().rev().take(PROFILE_ITEMS) {
        let Some(features) = state.engine.items().features(id) else {
            continue;
        };
        let Some(embedding) = &features.embedding else { continue };
        let total = sum.get_or_insert_with(|| vec![0.0; embedding.len()]);
        if total.len() == embedding.len() {
            total.iter_mut().zip(embedding).for_each(|(t, e)| *t += e);
            count += 1;
        }
    }
    sum.map(|total| total.into_iter().map(|t| t / count as f32).collect())
}

/// Each candidate's catalog features; request attributes that name a field of the
/// item's table override the stored value for this request, others are ignored.
pub(super) fn attach_features(state: &AppState, candidates: &mut [Candidate]) {
    let items = state.engine.items();
    for candidate in candidates {
        candidate.features = if candidate.attributes.is_empty() {
            items.features(&candidate.id)
        } else {
            items.find(&candidate.id, None).map(|mut row| {
                let table = row.get("_table").and_then(Value::as_str).unwrap_or_default().to_owned();
                for (name, value) in &candidate.attributes {
                    if items.has_field(&table, name) {
                        row.insert(name.clone(), value.clone());
                    }
                }
                Arc::new(ItemFeatures::from_row(&row))
            })
        };
    }
}

/// Stores what a learned model showed under `rec_id`, so later events carrying the
/// `rec_id` become training examples. Mock models have nothing to learn from.
pub(super) fn record_shown(state: &AppState, rec_id: &str, model_id: &str, context: &RankContext, ranked: &[Ranked]) {
    let shown: Vec<_> = ranked
        .iter()
        .filter_map(|item| Some((item.id.as_str(), item.features?)))
        .collect();
    if shown.is_empty() {
        return;
    }
    let record = ShownRecord {
        at: context.now,
        uid: context.user_id.as_deref(),
        sid: context.session_id.as_deref(),
        model: model_id,
        shown,
    };
    state.training.record(rec_id, &record);
}

/// `model_id`, or the legacy `model_name`; both present and different is a 400.
fn model_id(body: &Map<String, Value>) -> Result<String, ApiError> {
    either_model_id(optional_string(body, "model_id")?, optional_string(body, "model_name")?)
}

/// The model named by `model_id` and the legacy `model_name`, given as strings.
fn either_model_id(id: Option<String>, name: Option<String>) -> Result<String, ApiError> {
    match (id, name) {
        (Some(id), Some(name)) if id != name => Err(ApiError::InvalidCombination(format!(
            "\"model_id\" {id:?} and \"model_name\" {name:?} differ"
        ))),
        (Some(id), _) | (None, Some(id)) => Ok(id),
        (None, None) => Err(ApiError::validation("\"model_id\" is required")),
    }
}

/// `item_ids` xor `items` (400 for both or neither), each id a non-empty string. Takes
/// them out of `body`: the ids move into the candidates instead of being copied.
fn candidates(body: &mut Map<String, Value>) -> Result<Vec<Candidate>, ApiError> {
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
            let Some(Value::Array(ids)) = body.remove("item_ids") else {
                return Err(ApiError::validation("\"item_ids\" must be an array of strings"));
            };
            ids.into_iter()
                .map(|id| Ok(Candidate::new(take_item_id(id, "item_ids")?, Map::new())))
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
            check_attributes(attributes)?;
            attributes.clone()
        }
        Some(_) => return Err(ApiError::validation("\"attributes\" must be an object")),
    };
    Ok(Candidate::new(id, attributes))
}

/// Request attributes are strings, numbers, booleans or arrays of strings.
fn check_attributes(attributes: &Map<String, Value>) -> Result<(), ApiError> {
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
    Ok(())
}

pub(super) fn item_id(value: &Value, field: &str) -> Result<String, ApiError> {
    take_item_id(value.clone(), field)
}

/// Like [`item_id`], moving the id out of `value` instead of copying it.
fn take_item_id(value: Value, field: &str) -> Result<String, ApiError> {
    match value {
        Value::String(id) if !id.is_empty() => Ok(id),
        _ => Err(ApiError::validation(format!("{field} must hold non-empty string ids"))),
    }
}

pub(super) fn optional_string(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
        Some(_) => Err(ApiError::validation(format!("\"{field}\" must be a non-empty string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed pass accepts only bodies the rules accept, and reads them the same way;
    /// it leaves only a duplicate field to the rules.
    #[test]
    fn the_typed_pass_agrees_with_the_rules() {
        let bodies = [
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a", "b"]}"#,
            r#" {"model_name": "m", "session_id": "s", "item_ids": ["a"], "limit": 1, "context": {"d": 1}}"#,
            r#"{"model_id": "m", "model_name": "m", "user_id": "u", "session_id": null, "item_ids": []}"#,
            r#"{"model_id": "m", "user_id": "u", "items": [{"id": "a", "attributes": {"x": ["y"], "n": 2}}, {"id": "a"}]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "items": null, "limit": null, "other": [1]}"#,
            r#"{"model_id": "m", "user_id": "u", "user_id": "v", "item_ids": ["a"]}"#,
            r#"{"model_id": "m", "model_name": "n", "user_id": "u", "item_ids": ["a"]}"#,
            r#"{"model_id": "", "user_id": "u", "item_ids": ["a"]}"#,
            r#"{"user_id": "u", "item_ids": ["a"]}"#,
            r#"{"model_id": "m", "item_ids": ["a"]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "items": [{"id": "a"}]}"#,
            r#"{"model_id": "m", "user_id": "u"}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a", ""]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a", 1]}"#,
            r#"{"model_id": "m", "user_id": "u", "items": [{"id": "a", "attributes": {"x": {}}}]}"#,
            r#"{"model_id": "m", "user_id": "u", "items": [{"attributes": {}}]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "limit": -1}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "limit": 1.5}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "context": []}"#,
            r#"{"model_id": "m", "user_id": 7, "item_ids": ["a"]}"#,
            r#"[null, null, ["a"], null, "u"]"#,
        ];
        for body in bodies {
            let typed = RecommendBody::well_formed(body.as_bytes());
            let checked = RecommendBody::checked(serde_json::from_str(body).unwrap());
            match (typed, checked) {
                (Some(typed), Ok(checked)) => assert_eq!(typed, checked, "{body}"),
                (None, Err(_)) => {}
                // A duplicate field is left to the rules (the last one counts).
                (None, Ok(_)) => assert!(body.contains(r#""user_id": "v""#), "{body} was not typed"),
                (typed, checked) => panic!("{body}: typed {typed:?}, checked {checked:?}"),
            }
        }
        let oversized = format!(
            r#"{{"model_id": "m", "user_id": "u", "item_ids": {:?}}}"#,
            vec!["a"; MAX_CANDIDATES + 1]
        );
        assert!(RecommendBody::well_formed(oversized.as_bytes()).is_none());
    }
}
