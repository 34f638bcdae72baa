//! `POST /v1/search/rerank` (also `/search/rerank`): re-orders the caller's
//! `item_ids` for a query. Each id's score = `rerank_text_weight` × its text score
//! for the query (scaled by the best) + `rerank_model_weight` × the named model's
//! score with the session's and user's live state, the embedded events and
//! `search_context` (scaled to [0, 1] over the ids) + `rerank_retrieval_weight` ×
//! the caller's retrieval metadata (the mean of retrieval_score scaled to [0, 1] and
//! 1/(1 + rank), of those given). Ids the catalog does not know are kept and
//! ranked by their retrieval metadata alone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::embedded_events::{apply_to_context, embedded_events};
use super::recommend::{item_id, model_error, optional_string, rank_context, MAX_CANDIDATES};
use super::search::{limit, required_query, FoundItem, FoundItems, DEFAULT_LIMIT};
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::engine::StateKey;
use crate::ranking::Candidate;

/// The model used when the request names none.
const DEFAULT_MODEL: &str = "default";

/// What the caller's retrieval said about one id.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Retrieval {
    pub score: Option<f64>,
    pub rank: Option<f64>,
}

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let query = required_query(&body)?;
    let ids = item_ids(&body)?;
    let model_id = optional_string(&body, "model_id")?.unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let user_id = optional_string(&body, "user_id")?;
    let session_id = optional_string(&body, "session_id")?;
    let search_context = match body.get("search_context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(context)) => context.clone(),
        Some(_) => return Err(ApiError::validation("\"search_context\" must be an object")),
    };
    let retrieval = retrieval_metadata(&body)?;
    let events = embedded_events(&body)?;
    let limit = limit(&body, DEFAULT_LIMIT, MAX_CANDIDATES)?;
    let model = state
        .models
        .get(&model_id)
        .ok_or_else(|| ApiError::UnknownModel(format!("no model {model_id:?} is configured")))?;

    let text = text_scores(state, &query, &ids).await?;
    let mut context = rank_context(state, user_id, session_id, search_context).await;
    let half_life_ms = state.engine.decay(&StateKey::Session(String::new())).half_life_ms;
    apply_to_context(state.engine.items(), &mut context, &events, half_life_ms);
    let items = state.engine.items();
    let candidates: Vec<Candidate> = ids
        .iter()
        .map(|id| Candidate {
            id: id.clone(),
            attributes: Map::new(),
            features: items.features(id),
        })
        .collect();
    let model_scores = model.score(&context, &candidates).map_err(model_error)?;
    let known: Vec<bool> = candidates.iter().map(|c| c.features.is_some()).collect();
    let config = state.search.config();
    let text_part = scaled_by_best(
        &ids.iter()
            .map(|id| text.get(id).copied().unwrap_or(0.0))
            .collect::<Vec<_>>(),
    );
    let model_part = min_max(&model_scores, &known);
    let retrieval_part = retrieval_scores(&ids, &retrieval);
    let mut ranked: Vec<(usize, f32)> = (0..ids.len())
        .map(|index| {
            let personal = if known[index] {
                config.rerank_text_weight * text_part[index] + config.rerank_model_weight * model_part[index]
            } else {
                0.0
            };
            (index, personal + config.rerank_retrieval_weight * retrieval_part[index])
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    let items = ranked
        .into_iter()
        .map(|(index, score)| FoundItem {
            id: &ids[index],
            item_id: &ids[index],
            score,
            metadata: None,
        })
        .collect();
    ok(&FoundItems { items })
}

/// The required `item_ids`: non-empty strings, at most [`MAX_CANDIDATES`];
/// repeated ids count once (first position).
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
    let mut seen = HashSet::with_capacity(ids.len());
    let mut unique = Vec::with_capacity(ids.len());
    for id in ids {
        let id = item_id(id, "item_ids")?;
        if seen.insert(id.clone()) {
            unique.push(id);
        }
    }
    Ok(unique)
}

/// `item_retrieval_metadata`: objects with a string `item_id` and optional numeric
/// `retrieval_score` and `rank` (>= 0); other fields are ignored. The first entry
/// of an id counts.
pub(crate) fn retrieval_metadata(body: &Map<String, Value>) -> Result<HashMap<String, Retrieval>, ApiError> {
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

/// Each id's retrieval part: the mean of its retrieval_score scaled to [0, 1] over
/// the ids that have one, and 1/(1 + rank), of those it has; 0 with neither.
pub(crate) fn retrieval_scores(ids: &[String], metadata: &HashMap<String, Retrieval>) -> Vec<f32> {
    let given: Vec<Retrieval> = ids
        .iter()
        .map(|id| metadata.get(id).copied().unwrap_or_default())
        .collect();
    let scores: Vec<f64> = given.iter().filter_map(|r| r.score).collect();
    let low = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let high = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    given
        .iter()
        .map(|retrieval| {
            let mut parts = Vec::with_capacity(2);
            if let Some(score) = retrieval.score {
                parts.push(if high > low { (score - low) / (high - low) } else { 1.0 });
            }
            if let Some(rank) = retrieval.rank {
                parts.push(1.0 / (1.0 + rank));
            }
            if parts.is_empty() {
                0.0
            } else {
                (parts.iter().sum::<f64>() / parts.len() as f64) as f32
            }
        })
        .collect()
}

/// Values divided by the largest (all 0 when none is positive).
fn scaled_by_best(values: &[f32]) -> Vec<f32> {
    let best = values.iter().copied().fold(0.0f32, f32::max);
    values
        .iter()
        .map(|value| if best > 0.0 { value / best } else { 0.0 })
        .collect()
}

/// Values scaled to [0, 1] over the `included` ones (all 0 when they are equal).
fn min_max(values: &[f32], included: &[bool]) -> Vec<f32> {
    let kept = values.iter().zip(included).filter(|(_, keep)| **keep).map(|(v, _)| *v);
    let (low, high) = kept.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    values
        .iter()
        .map(|value| if high > low { (value - low) / (high - low) } else { 0.0 })
        .collect()
}

/// The text score of each id, searched off the async workers.
async fn text_scores(state: &AppState, query: &str, ids: &[String]) -> Result<HashMap<String, f32>, ApiError> {
    let index = Arc::clone(&state.search);
    let (query, ids) = (query.to_owned(), ids.to_vec());
    tokio::task::spawn_blocking(move || index.score_ids(&query, &ids))
        .await
        .map_err(|error| ApiError::Internal(format!("rerank task failed: {error}")))?
        .map_err(ApiError::from)
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
    fn retrieval_scores_follow_score_and_rank() {
        let ids: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let metadata = HashMap::from([
            (
                "a".to_owned(),
                Retrieval {
                    score: Some(1.0),
                    rank: None,
                },
            ),
            (
                "b".to_owned(),
                Retrieval {
                    score: Some(3.0),
                    rank: None,
                },
            ),
            (
                "c".to_owned(),
                Retrieval {
                    score: None,
                    rank: Some(0.0),
                },
            ),
        ]);
        let scores = retrieval_scores(&ids, &metadata);
        assert_eq!(scores, [0.0, 1.0, 1.0, 0.0]);
        let ranks = HashMap::from([
            (
                "a".to_owned(),
                Retrieval {
                    score: None,
                    rank: Some(3.0),
                },
            ),
            (
                "b".to_owned(),
                Retrieval {
                    score: None,
                    rank: Some(1.0),
                },
            ),
        ]);
        let scores = retrieval_scores(&ids, &ranks);
        assert!(scores[1] > scores[0] && scores[0] > scores[2]);
    }

    #[test]
    fn ids_are_required_non_empty_strings_counted_once() {
        assert_eq!(
            item_ids(&body(json!({"item_ids": ["a", "b", "a"]}))).unwrap(),
            ["a", "b"]
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

    #[test]
    fn scaling() {
        assert_eq!(scaled_by_best(&[2.0, 1.0, 0.0]), [1.0, 0.5, 0.0]);
        assert_eq!(min_max(&[1.0, 3.0, 100.0], &[true, true, false]), [0.0, 1.0, 49.5]);
        assert_eq!(min_max(&[1.0, 1.0], &[true, true]), [0.0, 0.0]);
    }
}
