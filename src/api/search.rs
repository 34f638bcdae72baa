//! `POST /v1/search`: BM25 with typo tolerance over the catalog, blended with the
//! session's and user's live state and the request's embedded events.
//!
//! The pipeline ([`personalized_search`], shared with chat): the best text matches
//! (a pool of max(4 × limit, `search.candidate_pool`)) → the ranking features of
//! each (co-visitation with the session's items, affinity to their attributes,
//! popularity, embedding, availability; `ranking::feature_vectors`) → score =
//! `text_weight` × BM25 / best BM25 + the weighted features (+ the cosine to a
//! query vector when there is one) → the rows as stored now, soft-deleted ones
//! dropped.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::embedded_events::{apply_to_context, embedded_events, EmbeddedEvent};
use super::recommend::{optional_string, rank_context};
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::config::SearchConfig;
use crate::embed::Lane;
use crate::engine::StateKey;
use crate::ranking::{feature_vectors, Candidate, Feature, FeatureVector, FEATURES};
use crate::search::TextHit;

/// `limit` when the request has none (SPEC "Limits").
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Largest `limit` of a search (DESIGN.md §7).
pub(crate) const MAX_LIMIT: usize = 1_000;

/// A search as the pipeline takes it (from `POST /v1/search` or a chat turn).
#[derive(Debug, Clone)]
pub(crate) struct SearchRequest {
    pub query: String,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    /// Request-embedded events: this request's signals only.
    pub events: Vec<EmbeddedEvent>,
    pub limit: usize,
}

/// One result: the item as stored when the search ran, and its final score.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub id: String,
    /// The table the item was found in (read by chat).
    #[allow(dead_code)]
    pub table: String,
    pub score: f32,
    pub row: Map<String, Value>,
}

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
    };
    let found = personalized_search(state, &search).await?;
    let items: Vec<FoundItem> = found
        .iter()
        .map(|found| FoundItem {
            id: &found.id,
            item_id: &found.id,
            score: found.score,
            metadata: Some(metadata(&found.row)),
        })
        .collect();
    ok(&FoundItems { items })
}

/// A search or rerank response: typed, so that scores serialize as the shortest
/// decimal of their `f32` (a detour through a JSON `Value` widens them to f64 digits).
#[derive(Serialize)]
pub(crate) struct FoundItems<'a> {
    pub items: Vec<FoundItem<'a>>,
}

/// One item of a search or rerank response; both key names carry the id (DESIGN §7).
#[derive(Serialize)]
pub(crate) struct FoundItem<'a> {
    pub id: &'a str,
    pub item_id: &'a str,
    pub score: f32,
    /// Search only: title, description, price, imageUrl as the catalog has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The search pipeline (see the module documentation), best first, at most
/// `request.limit` items, none soft-deleted.
pub(crate) async fn personalized_search(state: &AppState, request: &SearchRequest) -> Result<Vec<Found>, ApiError> {
    if request.limit == 0 {
        return Ok(Vec::new());
    }
    let config = state.search.config();
    let pool = (request.limit * 4).max(config.candidate_pool);
    let hits = text_search(state, &request.query, pool).await?;
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let mut context = rank_context(state, request.user_id.clone(), request.session_id.clone(), Map::new()).await;
    let half_life_ms = state.engine.decay(&StateKey::Session(String::new())).half_life_ms;
    apply_to_context(state.engine.items(), &mut context, &request.events, half_life_ms);
    let items = state.engine.items();
    let candidates: Vec<Candidate> = hits
        .iter()
        .map(|hit| Candidate {
            id: hit.id.clone(),
            attributes: Map::new(),
            features: items.features(&hit.id),
        })
        .collect();
    let vectors = {
        let trained = state.training.read();
        feature_vectors(
            &trained,
            state.training.segment_field(),
            &context,
            &candidates,
            &[true; FEATURES],
        )
    };
    let query_vector = query_vector(state, &request.query, &candidates).await;
    let scores = blend(config, &hits, &candidates, &vectors, query_vector.as_deref());
    let mut order: Vec<usize> = (0..hits.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut found = Vec::with_capacity(request.limit);
    for index in order {
        let hit = &hits[index];
        // The index may lag a delete by one commit: the stored row decides.
        let Some(row) = items.find(&hit.id, Some(&hit.table)) else {
            continue;
        };
        if row.get("is_deleted") == Some(&Value::Bool(true)) {
            continue;
        }
        found.push(Found {
            id: hit.id.clone(),
            table: hit.table.clone(),
            score: scores[index],
            row,
        });
        if found.len() == request.limit {
            break;
        }
    }
    Ok(found)
}

/// The query embedded by the node's embedder, for hybrid search, when some candidate
/// carries an embedding of the embedder's dimensionality (items embedded at ingest by
/// the same model, `embed.embed_items_at_ingest`); otherwise the model is not run.
/// A failure only costs the vector term.
async fn query_vector(state: &AppState, query: &str, candidates: &[Candidate]) -> Option<Vec<f32>> {
    let dimensions = state.embedder.dimensions();
    let comparable = candidates.iter().any(|candidate| {
        candidate
            .features
            .as_ref()
            .and_then(|features| features.embedding.as_ref())
            .is_some_and(|embedding| embedding.len() == dimensions)
    });
    if !comparable {
        return None;
    }
    let query = query.to_owned();
    match state
        .embedder
        .run(Lane::Request, move |embedder| embedder.embed_texts(&[query.as_str()]))
        .await
    {
        Ok(mut vectors) => vectors.pop(),
        Err(error) => {
            tracing::warn!(%error, "embedding the query failed; searching without its vector");
            None
        }
    }
}

/// The text matches, searched off the async workers.
async fn text_search(state: &AppState, query: &str, limit: usize) -> Result<Vec<TextHit>, ApiError> {
    let index = Arc::clone(&state.search);
    let query = query.to_owned();
    tokio::task::spawn_blocking(move || index.text_search(&query, limit))
        .await
        .map_err(|error| ApiError::Internal(format!("search task failed: {error}")))?
        .map_err(ApiError::from)
}

/// Each hit's final score: text relevance scaled by the best hit, plus the weighted
/// personalization features, plus the query vector's cosine to the item's embedding
/// when both exist with the same dimensions.
pub(crate) fn blend(
    config: &SearchConfig,
    hits: &[TextHit],
    candidates: &[Candidate],
    vectors: &[FeatureVector],
    query_vector: Option<&[f32]>,
) -> Vec<f32> {
    let best = hits.iter().map(|hit| hit.score).fold(0.0f32, f32::max);
    hits.iter()
        .zip(candidates)
        .zip(vectors)
        .map(|((hit, candidate), vector)| {
            let text = if best > 0.0 { hit.score / best } else { 0.0 };
            let feature = |feature: Feature| vector[feature as usize];
            let cosine = match (
                query_vector,
                candidate.features.as_ref().and_then(|f| f.embedding.as_deref()),
            ) {
                (Some(query), Some(item)) => cosine(query, item).max(0.0),
                _ => 0.0,
            };
            config.text_weight * text
                + config.covisit_weight * feature(Feature::Covisit)
                + config.affinity_weight * feature(Feature::Affinity)
                + config.popularity_weight * feature(Feature::Popularity)
                + config.embedding_weight * feature(Feature::Embedding)
                + config.unavailable_weight * feature(Feature::Unavailable)
                + config.vector_weight * cosine
        })
        .collect()
}

/// Cosine of two vectors; 0 when their dimensions differ or one is zero.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        dot += f64::from(x) * f64::from(y);
        norm_a += f64::from(x) * f64::from(x);
        norm_b += f64::from(y) * f64::from(y);
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        0.0
    } else {
        (dot / (norm_a.sqrt() * norm_b.sqrt())) as f32
    }
}

/// The response metadata of a stored row (DESIGN.md §7): `title` (else `name`),
/// `description`, `price`, `imageUrl` (else `image_url`, else `image`); absent
/// values are left out.
pub(crate) fn metadata(row: &Map<String, Value>) -> Map<String, Value> {
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

/// The required, non-blank `query`.
pub(crate) fn required_query(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("query") {
        None | Some(Value::Null) => Err(ApiError::validation("\"query\" is required")),
        Some(Value::String(query)) if !query.trim().is_empty() => Ok(query.clone()),
        Some(Value::String(_)) => Err(ApiError::validation("\"query\" must not be empty")),
        Some(_) => Err(ApiError::validation("\"query\" must be a string")),
    }
}

/// `limit`: `default` when absent, else an integer in `0..=max`.
pub(crate) fn limit(body: &Map<String, Value>, default: usize, max: usize) -> Result<usize, ApiError> {
    match body.get("limit") {
        None | Some(Value::Null) => Ok(default),
        Some(value) => match value.as_u64() {
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
    use crate::config::Config;
    use crate::ranking::ItemFeatures;
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
        for bad in [json!(-1), json!(1001), json!(2.5), json!("3"), json!(true)] {
            assert!(limit(&object(json!({ "limit": bad })), 50, 1000).is_err(), "{bad}");
        }
    }

    fn hit(id: &str, score: f32) -> TextHit {
        TextHit {
            id: id.into(),
            table: "t".into(),
            score,
        }
    }

    fn candidate(embedding: Option<Vec<f32>>) -> Candidate {
        Candidate {
            id: String::new(),
            attributes: Map::new(),
            features: Some(Arc::new(ItemFeatures {
                embedding,
                ..ItemFeatures::default()
            })),
        }
    }

    #[test]
    fn text_dominates_a_clear_match_and_personalization_decides_close_ones() {
        let config = Config::load(None).unwrap().search;
        let hits = [hit("exact", 10.0), hit("close", 9.0), hit("weak", 3.0)];
        let candidates = [candidate(None), candidate(None), candidate(None)];
        let mut vectors = [[0.0; FEATURES]; 3];
        vectors[1][Feature::Affinity as usize] = 1.0;
        vectors[2][Feature::Affinity as usize] = 1.0;
        let scores = blend(&config, &hits, &candidates, &vectors, None);
        assert!(scores[1] > scores[0], "affinity lifts a comparable match: {scores:?}");
        assert!(scores[0] > scores[2], "but not a much weaker one: {scores:?}");
    }

    #[test]
    fn a_query_vector_adds_the_cosine_when_dimensions_match() {
        let config = Config::load(None).unwrap().search;
        let hits = [hit("a", 1.0), hit("b", 1.0), hit("c", 1.0)];
        let candidates = [
            candidate(Some(vec![1.0, 0.0])),
            candidate(Some(vec![0.0, 1.0])),
            candidate(Some(vec![1.0, 0.0, 0.0])),
        ];
        let vectors = [[0.0; FEATURES]; 3];
        let scores = blend(&config, &hits, &candidates, &vectors, Some(&[1.0, 0.0]));
        assert!(scores[0] > scores[1]);
        assert_eq!(scores[1], scores[2], "other dimensions add nothing");
        assert_eq!(blend(&config, &hits, &candidates, &vectors, None), [1.0, 1.0, 1.0]);
    }
}
