//! `POST /v1/recommend`: rank a caller's candidates with a named model, from the
//! session's and user's live state, and record what was shown under the `rec_id`.

use std::collections::BTreeMap;

use compact_str::CompactString;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::decode::{
    item_id, optional_bool, optional_string, optional_whole_number, request_context, rules, take_item_id,
};
use super::{json_bytes_response, ApiError, ApiRequest, AppState, HttpResponse};

use crate::domain::candidate::{Candidate, Explanation};
use crate::domain::rules::{Rules, RULE_FIELDS};
use crate::service::recommend::{ExperimentArm, RecommendRequest, Recommendation, MAX_CANDIDATES};

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body = match well_formed(&request.body) {
        Some(body) => body,
        None => checked(request.json_value()?)?,
    };
    let recommendation = state.services.ranking.recommend(body).await?;
    Ok(json_bytes_response(StatusCode::OK, response_body(recommendation)))
}

/// The 200 body ([`RecommendResponse`]), written straight into one buffer sized for
/// it: an item without an explanation or an echo is `{"id":…,"score":…}` (its key
/// names written as they are; the id and score as serde writes them), any other
/// the general way. The same bytes as serializing the typed body (a unit test holds
/// them equal), without a map serializer's steps and the buffer's regrowth per item.
fn response_body(recommendation: Recommendation) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + recommendation.items.len() * 48);
    out.extend_from_slice(b"{\"rec_id\":");
    write(&mut out, &recommendation.rec_id.as_str());
    out.extend_from_slice(b",\"items\":[");
    let mut explanations = recommendation.explanations.into_iter().flatten();
    for (at, item) in recommendation.items.into_iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        let explanation = explanations.next();
        if explanation.is_none() && item.echoed.is_empty() {
            out.extend_from_slice(b"{\"id\":");
            write(&mut out, &item.id.as_str());
            out.extend_from_slice(b",\"score\":");
            write(&mut out, &item.score);
            out.push(b'}');
        } else {
            let item = RankedItem {
                explanation: explanation.as_ref().map(self::explanation),
                id: item.id,
                score: item.score,
                attributes: item.echoed,
            };
            write(&mut out, &item);
        }
    }
    out.push(b']');
    if let Some(experiment) = &recommendation.experiment {
        out.extend_from_slice(b",\"experiment\":");
        write(&mut out, experiment);
    }
    out.push(b'}');
    out
}

/// Appends `value` as serde_json writes it.
fn write(out: &mut Vec<u8>, value: &impl Serialize) {
    serde_json::to_writer(out, value).expect("response bodies serialize");
}

/// The shape of a valid body, read in one typed pass (no `Value` tree): what
/// almost every request is. `null` reads as absent, as the rules say.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(
    as = RecommendBody,
    description = "`model_id` (or the legacy `model_name`); `user_id` or `session_id`; \
                   exactly one of `item_ids` and `items` (400 for both or neither)."
)]
pub(super) struct TypedBody {
    #[schema(min_length = 1)]
    model_id: Option<String>,
    #[schema(min_length = 1)]
    model_name: Option<String>,
    #[schema(value_type = Option<Vec<String>>, max_items = 10000)]
    item_ids: Option<Vec<CompactString>>,
    #[schema(max_items = 10000)]
    items: Option<Vec<TypedItem>>,
    #[schema(min_length = 1)]
    user_id: Option<String>,
    #[schema(min_length = 1)]
    session_id: Option<String>,
    /// Free request context (user_region, device_type, ...).
    #[schema(value_type = Option<Object>)]
    context: Option<Map<String, Value>>,
    /// Every candidate when absent (a whole-number float such as `3.0` counts as an integer).
    #[serde(default, deserialize_with = "optional_whole_number")]
    limit: Option<u64>,
    /// Rank soft-deleted items too; by default they are left out of the answer.
    include_deleted: Option<bool>,
    /// Give each item an `explanation`: each feature's contribution to its score.
    explain: Option<bool>,
    /// Ids never returned, whatever their score.
    #[schema(value_type = Option<Vec<String>>, max_items = 10000)]
    exclude_ids: Option<Value>,
    /// Predicates every returned item passes: `{"field", "op", "value"}` (op `eq ne in
    /// nin lt lte gt gte range exists`), `{"all": [...]}`, `{"any": [...]}`, `{"not": {...}}`.
    #[schema(value_type = Option<Vec<Object>>)]
    filters: Option<Value>,
    /// A predicate with `multiply` and/or `add`: the score change of the items it matches.
    #[schema(value_type = Option<Vec<Object>>)]
    boosts: Option<Value>,
    /// `{"field", "max_per_value", "top_k"}`: at most that many items per value of the field in the top K.
    #[schema(value_type = Option<Object>)]
    diversity: Option<Value>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(as = CandidateItem)]
struct TypedItem {
    #[schema(value_type = String, min_length = 1)]
    id: CompactString,
    /// String, number, boolean or array-of-strings values.
    #[schema(value_type = Option<Object>)]
    attributes: Option<Map<String, Value>>,
}

/// The body read in one typed pass, if it has the shape of a valid one and breaks
/// no rule; `None` otherwise, and [`checked`] words the error (it
/// also sees duplicate fields as the rules do: the last one counts).
fn well_formed(bytes: &[u8]) -> Option<RecommendRequest> {
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
    let rules = [typed.exclude_ids, typed.filters, typed.boosts, typed.diversity];
    let rules = match rules.iter().any(Option::is_some) {
        false => None,
        true => {
            let fields: Map<String, Value> = RULE_FIELDS
                .iter()
                .zip(rules)
                .filter_map(|(name, value)| Some((name.to_string(), value?)))
                .collect();
            Rules::from_fields(&fields).ok()?
        }
    };
    Some(RecommendRequest {
        model_id,
        candidates,
        user_id: typed.user_id,
        session_id: typed.session_id,
        context: typed.context.unwrap_or_default(),
        limit: typed.limit.map(|limit| limit as usize),
        include_deleted: typed.include_deleted.unwrap_or(false),
        explain: typed.explain.unwrap_or(false),
        rules,
    })
}

/// The body checked rule by rule, in the order the errors are reported.
fn checked(body: Value) -> Result<RecommendRequest, ApiError> {
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
            crate::domain::whole_number(value)
                .ok_or_else(|| ApiError::validation("\"limit\" must be an integer >= 0"))? as usize,
        ),
    };
    let include_deleted = optional_bool(&body, "include_deleted")?.unwrap_or(false);
    let explain = optional_bool(&body, "explain")?.unwrap_or(false);
    let rules = rules(&body)?;
    Ok(RecommendRequest {
        model_id,
        candidates,
        user_id,
        session_id,
        context,
        limit,
        include_deleted,
        explain,
        rules,
    })
}

/// The 200 body: its schema, and its bytes for [`response_body`] to equal. Typed, so
/// that scores serialize as the shortest decimal of their `f32` (0.8, not
/// 0.800000011920929 as a detour through a JSON `Value` would give).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct RecommendResponse {
    rec_id: String,
    items: Vec<RankedItem>,
    /// When `model_id` names an experiment: its id and the arm that ranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    experiment: Option<ExperimentArm>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct RankedItem {
    #[schema(value_type = String)]
    id: CompactString,
    score: f32,
    /// With `explain`: feature → its contribution; they sum to `score`.
    #[serde(skip_serializing_if = "Option::is_none")]
    explanation: Option<BTreeMap<String, f32>>,
    /// The duplicate-group echo (SPEC recommend rule 1), as fields of the item itself
    /// beside `id` and `score`; none for unique ids.
    #[serde(flatten)]
    attributes: Map<String, Value>,
}

/// An item's explanation as a response gives it: feature → contribution.
pub(super) fn explanation(explanation: &Explanation) -> BTreeMap<String, f32> {
    explanation
        .iter()
        .map(|(name, contribution)| (name.to_string(), *contribution as f32))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The body written straight is byte for byte what serializing the typed body gives:
    /// plain items, awkward ids and scores, an explanation, an echo, an experiment.
    #[test]
    fn the_written_body_is_the_typed_body() {
        let ranked = |id: &str, score: f32, echoed: Value| {
            crate::service::recommend::ranked_item(id, score, echoed.as_object().cloned().unwrap_or_default())
        };
        let items = vec![
            ranked("a", 0.8, json!({})),
            ranked("quote \" back\\slash \u{1} é", 1e-7, json!({})),
            ranked("nan", f32::NAN, json!({})),
            ranked("echo", -2.5, json!({"slot": "top", "n": [1, 2]})),
            ranked("explained", 3.0, json!({})),
        ];
        let explained: Vec<Explanation> = (0..items.len())
            .map(|at| vec![(std::borrow::Cow::Borrowed("covisit"), at as f64 * 0.5)])
            .collect();
        for (explanations, experiment) in [(None, None), (Some(explained), Some(("exp", "b")))] {
            let recommendation = || Recommendation {
                rec_id: "0193-rec".into(),
                items: items.clone(),
                experiment: experiment.map(|(id, arm): (&str, &str)| ExperimentArm {
                    id: id.into(),
                    arm: arm.into(),
                }),
                explanations: explanations.clone(),
            };
            let typed = {
                let recommendation = recommendation();
                let mut explanations = recommendation.explanations.into_iter().flatten();
                RecommendResponse {
                    rec_id: recommendation.rec_id,
                    items: recommendation
                        .items
                        .into_iter()
                        .map(|item| RankedItem {
                            explanation: explanations.next().as_ref().map(explanation),
                            id: item.id,
                            score: item.score,
                            attributes: item.echoed,
                        })
                        .collect(),
                    experiment: recommendation.experiment,
                }
            };
            assert_eq!(
                String::from_utf8(response_body(recommendation())).unwrap(),
                serde_json::to_string(&typed).unwrap()
            );
        }
    }

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
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "limit": 2.0, "include_deleted": true}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "include_deleted": null}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "include_deleted": "yes"}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "context": []}"#,
            r#"{"model_id": "m", "user_id": 7, "item_ids": ["a"]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "exclude_ids": ["b"], "filters": [{"field": "p", "op": "lt", "value": 3}]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "boosts": [{"any": [], "add": 1}], "diversity": {"field": "g", "max_per_value": 1}}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "filters": null, "diversity": null}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "filters": [{"field": "p", "op": "lt"}]}"#,
            r#"{"model_id": "m", "user_id": "u", "item_ids": ["a"], "exclude_ids": "b"}"#,
            r#"[null, null, ["a"], null, "u"]"#,
        ];
        for body in bodies {
            let typed = well_formed(body.as_bytes());
            let checked = checked(serde_json::from_str(body).unwrap());
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
        assert!(well_formed(oversized.as_bytes()).is_none());
    }
}
