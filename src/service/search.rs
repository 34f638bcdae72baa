//! Search: the query read as chat reads it (`search_reading`), the catalog items that
//! cover it best, blended with the session's and user's live state and the request's
//! embedded events.
//!
//! The pipeline ([`SearchService::search`], shared with chat): the best matches by coverage
//! and prior (a pool of max(4 × limit, `search.candidate_pool`), four times wider when
//! rules or the reading filter) → the ranking features of each (co-visitation with the
//! session's items, affinity to their attributes, popularity, embedding, availability;
//! `ranking::feature_vectors`) → score = `text_weight` × coverage / best coverage +
//! `prior_weight` × prior + the weighted features (+ the cosine to a query vector when
//! there is one) → the rows as stored now, read in that order as many as are wanted,
//! soft-deleted ones and those failing the reading's filters left out. With
//! `search.bm25_only`, plain BM25 with typo tolerance instead (the relevance suite's
//! baseline).
//!
//! Rerank ([`SearchService::rerank`]) re-orders the caller's
//! `item_ids` for a query. Each id's score = `rerank_text_weight` × its text score
//! for the query (scaled by the best) + `rerank_model_weight` × the named model's
//! score with the session's and user's live state, the embedded events and
//! `search_context` (scaled to [0, 1] over the ids) + `rerank_retrieval_weight` ×
//! the caller's retrieval metadata (the mean of retrieval_score scaled to [0, 1] and
//! 1/(1 + rank), of those given). Ids the catalog does not know are kept and
//! ranked by their retrieval metadata alone.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::embedded_events::EmbeddedEvent;
use super::recommend::RankingService;
use super::recommend::{leaves_out_deleted, rule_stack, Profile};
use super::search_reading::{PriorsCache, Reading};
use super::vocabulary::Vocabulary;
use super::ServiceError;
use crate::config::SearchConfig;
use crate::domain::candidate::{Candidate, Explanation};
use crate::domain::rules::Rules;
use crate::embed::Lane;
use crate::embed::SharedEmbedder;
use crate::engine::catalog::ItemReader;
use crate::ranking::rules;
use crate::ranking::{
    affinity_by_attribute, explain_affinity, feature_vectors, Feature, FeatureVector, Placed, RankContext, FEATURES,
};
use crate::search::{SearchIndex, TextHit, Wanted};
use crate::training::Training;

/// How many times wider the pool of text matches is when rules filter it.
const FILTERED_POOL: usize = 4;
/// The explanation's name for the text relevance part of a score.
const TEXT: &str = "text";
/// The explanation's name for the item's prior (popularity) in a search score.
const PRIOR: &str = "prior";

/// `limit` when the request has none (SPEC "Limits").
pub const DEFAULT_LIMIT: usize = 50;
/// Largest `limit` of a search (DESIGN.md §7).
pub const MAX_LIMIT: usize = 1_000;
/// The model a rerank uses when the request names none.
pub const DEFAULT_RERANK_MODEL: &str = "default";

/// A search as the pipeline takes it (from `POST /v1/search` or a chat turn).
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: String,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    /// Request-embedded events: this request's signals only.
    pub events: Vec<EmbeddedEvent>,
    pub limit: usize,
    /// Only items of these tables; every table when empty.
    pub tables: Vec<String>,
    /// Business rules (`exclude_ids`, `filters`, `boosts`, `diversity`).
    pub rules: Option<Rules>,
    /// Explain each item's score.
    pub explain: bool,
}

/// One result: the item as stored when the search ran, and its final score.
#[derive(Debug, Clone)]
pub struct Found {
    pub id: String,
    /// The table the item was found in (read by chat).
    #[allow(dead_code)]
    pub table: String,
    pub score: f32,
    pub row: Arc<Map<String, Value>>,
    /// With `explain`: each part's contribution to `score`.
    pub explanation: Option<Explanation>,
}

/// A rerank request, valid by the SPEC's rules.
#[derive(Debug, Clone)]
pub struct RerankRequest {
    pub query: String,
    /// Non-empty, each once, in the caller's order.
    pub ids: Vec<String>,
    pub model_id: String,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    pub search_context: Map<String, Value>,
    /// What the caller's retrieval said about the ids.
    pub retrieval: HashMap<String, Retrieval>,
    pub events: Vec<EmbeddedEvent>,
    pub limit: usize,
    /// Rank soft-deleted items too (by default they are left out of the answer).
    pub include_deleted: bool,
    /// Business rules, after the model's defaults.
    pub rules: Option<Rules>,
    /// Explain each id's score.
    pub explain: bool,
}

/// What the caller's retrieval said about one id.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Retrieval {
    pub score: Option<f64>,
    pub rank: Option<f64>,
}

/// One reranked id and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranked {
    pub id: String,
    pub score: f32,
    /// With `explain`: each part's contribution to `score`.
    pub explanation: Option<Explanation>,
}

/// Personalized full-text search and rerank.
pub struct SearchService {
    /// The catalog's rows and features.
    pub(super) items: Arc<ItemReader>,
    /// The catalog's full-text index.
    pub(super) index: Arc<SearchIndex>,
    /// Query vectors, and words read by meaning.
    pub(super) embedder: SharedEmbedder,
    /// The models the priors are made from.
    pub(super) training: Arc<Training>,
    /// Each item's prior, made from the models now and then.
    pub(super) priors: PriorsCache,
    /// Candidates are ranked as recommend ranks them.
    pub(super) ranking: Arc<RankingService>,
    /// The catalog's labels, which a query is read against.
    pub(super) words: Arc<Vocabulary>,
}

impl SearchService {
    pub fn new(
        items: Arc<ItemReader>,
        index: Arc<SearchIndex>,
        embedder: SharedEmbedder,
        training: Arc<Training>,
        ranking: Arc<RankingService>,
        words: Arc<Vocabulary>,
    ) -> SearchService {
        SearchService {
            items,
            index,
            embedder,
            training,
            priors: PriorsCache::default(),
            ranking,
            words,
        }
    }

    /// Whether the index has read the whole catalog (`/readyz`).
    pub fn is_loaded(&self) -> bool {
        self.index.is_loaded()
    }
}

impl SearchService {
    /// The search pipeline (see the module documentation), best first, at most
    /// `request.limit` items, none soft-deleted.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<Found>, ServiceError> {
        if let Some(rules) = &request.rules {
            self.ranking.check_rules(rules, &[])?;
        }
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        let config = self.index.config();
        // Plain BM25 (the relevance suite's baseline) reads nothing into the query.
        let reading = match config.bm25_only {
            true => None,
            false => Some(self.read_query(&request.query).await),
        };
        let mut pool = (request.limit * 4).max(config.candidate_pool);
        if request
            .rules
            .as_ref()
            .is_some_and(|rules| !rules.filters.is_empty() || !rules.exclude_ids.is_empty())
            || reading.as_ref().is_some_and(|reading| reading.filters.is_some())
        {
            // The filters may leave few of the best matches.
            pool *= FILTERED_POOL;
        }
        let hits = match &reading {
            Some(reading) => self.find(&reading.wanted, pool, &request.tables).await?,
            None => self.text_search(&request.query, pool, &request.tables).await?,
        };
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let mut context = match reading {
            Some(_) => {
                self.ranking
                    .rank_context(
                        request.user_id.clone(),
                        request.session_id.clone(),
                        Map::new(),
                        Profile::Made,
                    )
                    .await
            }
            None => RankContext::default(),
        };
        self.ranking.apply_embedded_events(&mut context, &request.events);
        let items = &self.items;
        let candidates = hits
            .iter()
            .map(|hit| {
                Ok(Candidate {
                    id: hit.id.as_str().into(),
                    attributes: Map::new(),
                    features: items.features(&hit.id)?,
                })
            })
            .collect::<Result<Vec<Candidate>, ServiceError>>()?;
        let stack: Vec<&Rules> = request.rules.iter().collect();
        let vectors = {
            let snapshots = self.training.snapshots();
            feature_vectors(
                &snapshots.latest(),
                snapshots.segment_field(),
                &context,
                &candidates,
                &[reading.is_some(); FEATURES],
            )
        };
        let query_vector = match reading {
            Some(_) => self.query_vector(&request.query, &candidates).await,
            None => None,
        };
        let parts = blend_parts(config, &hits, &candidates, &vectors, query_vector.as_deref());
        let affinity = match request.explain {
            true => affinity_by_attribute(&context),
            false => Default::default(),
        };
        let scores: Vec<f32> = parts
            .iter()
            .map(|parts| parts.iter().map(|(_, part)| part).sum())
            .collect();
        let placed = rules::apply(&stack, &candidates, &scores, None);
        let filters = reading.as_ref().filter(|reading| reading.filters.is_some());
        let rows = rows_of_best(items, &hits, &placed, filters, request.limit)?;
        let mut found = Vec::with_capacity(rows.len());
        for (Placed { index, score, boost }, row) in rows {
            let hit = &hits[index];
            found.push(Found {
                id: hit.id.clone(),
                table: hit.table.clone(),
                score,
                row,
                explanation: request.explain.then(|| {
                    let mut explanation = explanation(&parts[index], boost);
                    explain_affinity(&mut explanation, &candidates[index], &affinity);
                    explanation
                }),
            });
        }
        Ok(found)
    }

    /// The query embedded by the node's embedder, for hybrid search, when some candidate
    /// carries an embedding of the embedder's dimensionality (items embedded at ingest by
    /// the same model, `embed.embed_items_at_ingest`); otherwise the model is not run.
    /// A failure only costs the vector term.
    async fn query_vector(&self, query: &str, candidates: &[Candidate]) -> Option<Vec<f32>> {
        let dimensions = self.embedder.dimensions();
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
        match self
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

    /// The best items for what a query was read to want, by coverage and prior,
    /// searched off the async workers.
    async fn find(&self, wanted: &Wanted, limit: usize, tables: &[String]) -> Result<Vec<TextHit>, ServiceError> {
        let priors = self.search_priors();
        let index = Arc::clone(&self.index);
        let prior_weight = index.config().prior_weight;
        // A question asked lately is answered here, without the hop to a blocking thread.
        if let Some(kept) = index.find_kept(wanted, limit, tables, &priors, prior_weight) {
            return kept.map_err(ServiceError::from);
        }
        let (wanted, tables) = (wanted.clone(), tables.to_vec());
        tokio::task::spawn_blocking(move || index.find(&wanted, limit, &tables, priors, prior_weight))
            .await
            .map_err(|error| ServiceError::Internal(format!("search task failed: {error}")))?
            .map_err(ServiceError::from)
    }

    /// The text matches, searched off the async workers.
    pub(super) async fn text_search(
        &self,
        query: &str,
        limit: usize,
        tables: &[String],
    ) -> Result<Vec<TextHit>, ServiceError> {
        let index = Arc::clone(&self.index);
        let (query, tables) = (query.to_owned(), tables.to_vec());
        tokio::task::spawn_blocking(move || index.text_search_in(&query, limit, &tables))
            .await
            .map_err(|error| ServiceError::Internal(format!("search task failed: {error}")))?
            .map_err(ServiceError::from)
    }
}

/// The stored rows of the best `limit` of `placed`, in order, with each one's place:
/// rows the catalog no longer has or has soft-deleted are left out (the index may lag a
/// delete by one commit), and so are those failing the reading's filters. Rows are read
/// in order, as many at a time as are still wanted, so a search reads about `limit`
/// rows, not its whole pool. Whether an audience, a language or availability can be
/// checked at all is judged on the rows read so far; a check only ever turns on, and
/// every row read is checked again when one does.
fn rows_of_best(
    items: &ItemReader,
    hits: &[TextHit],
    placed: &[Placed],
    filters: Option<&Reading>,
    limit: usize,
) -> Result<Vec<(Placed, Arc<Map<String, Value>>)>, ServiceError> {
    let mut rows: Vec<Option<Arc<Map<String, Value>>>> = Vec::new();
    loop {
        let kept: Vec<usize> = match filters {
            Some(reading) => reading
                .passes(&rows)
                .iter()
                .enumerate()
                .filter(|(_, passes)| **passes)
                .map(|(at, _)| at)
                .take(limit)
                .collect(),
            None => (0..rows.len()).filter(|at| rows[*at].is_some()).take(limit).collect(),
        };
        if kept.len() == limit || rows.len() == placed.len() {
            return Ok(kept
                .into_iter()
                .filter_map(|at| Some((placed[at], rows[at].take()?)))
                .collect());
        }
        let wanted = (limit - kept.len()).min(placed.len() - rows.len());
        for place in &placed[rows.len()..rows.len() + wanted] {
            let hit = &hits[place.index];
            let row = items
                .row(&hit.id, Some(&hit.table))?
                .filter(|row| row.get("is_deleted") != Some(&Value::Bool(true)));
            rows.push(row);
        }
    }
}

/// Each hit's final score: text relevance scaled by the best hit, plus the weighted
/// personalization features, plus the query vector's cosine to the item's embedding
/// when both exist with the same dimensions.
pub fn blend(
    config: &SearchConfig,
    hits: &[TextHit],
    candidates: &[Candidate],
    vectors: &[FeatureVector],
    query_vector: Option<&[f32]>,
) -> Vec<f32> {
    blend_parts(config, hits, candidates, vectors, query_vector)
        .iter()
        .map(|parts| parts.iter().map(|(_, part)| part).sum())
        .collect()
}

/// The parts of each hit's [`blend`] score, named as its explanation names them.
fn blend_parts(
    config: &SearchConfig,
    hits: &[TextHit],
    candidates: &[Candidate],
    vectors: &[FeatureVector],
    query_vector: Option<&[f32]>,
) -> Vec<[(&'static str, f32); 8]> {
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
            [
                (TEXT, config.text_weight * text),
                (PRIOR, config.prior_weight * hit.prior),
                (
                    Feature::Covisit.name(),
                    config.covisit_weight * feature(Feature::Covisit),
                ),
                (
                    Feature::Affinity.name(),
                    config.affinity_weight * feature(Feature::Affinity),
                ),
                (
                    Feature::Popularity.name(),
                    config.popularity_weight * feature(Feature::Popularity),
                ),
                (
                    Feature::Embedding.name(),
                    config.embedding_weight * feature(Feature::Embedding),
                ),
                (
                    Feature::Unavailable.name(),
                    config.unavailable_weight * feature(Feature::Unavailable),
                ),
                ("vector", config.vector_weight * cosine),
            ]
        })
        .collect()
}

/// The explanation of a score made of `parts` and then boosted by `boost`: the parts
/// that contribute, and the boost.
fn explanation(parts: &[(&'static str, f32)], boost: f32) -> Explanation {
    parts
        .iter()
        .chain([(rules::BOOST, boost)].iter())
        .filter(|(_, part)| *part != 0.0)
        .map(|&(name, part)| (Cow::Borrowed(name), f64::from(part)))
        .collect()
}

/// Cosine of two vectors; 0 when their dimensions differ or one is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
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

impl SearchService {
    /// Re-orders the caller's ids for a query (see the module documentation).
    pub async fn rerank(&self, request: RerankRequest) -> Result<Vec<Reranked>, ServiceError> {
        let RerankRequest {
            query,
            ids,
            model_id,
            user_id,
            session_id,
            search_context,
            retrieval,
            events,
            limit,
            include_deleted,
            rules: request_rules,
            explain,
        } = request;
        let model = self.ranking.model(&model_id)?;
        let mut ids = ids;
        if leaves_out_deleted(model.as_ref(), include_deleted) {
            let items = &self.items;
            let mut kept = Vec::with_capacity(ids.len());
            for id in ids {
                if !items.features(&id)?.is_some_and(|features| features.deleted) {
                    kept.push(id);
                }
            }
            ids = kept;
        }
        let text = self.text_scores(&query, &ids).await?;
        let mut context = self
            .ranking
            .rank_context(user_id, session_id, search_context, Profile::Made)
            .await;
        self.ranking.apply_embedded_events(&mut context, &events);
        let items = &self.items;
        let candidates = ids
            .iter()
            .map(|id| {
                Ok(Candidate {
                    id: id.as_str().into(),
                    attributes: Map::new(),
                    features: items.features(id)?,
                })
            })
            .collect::<Result<Vec<Candidate>, ServiceError>>()?;
        let model_rules = self.ranking.rules(&model_id, request_rules.as_ref(), &[])?;
        let stack = rule_stack(&model_rules, request_rules.as_ref());
        let model_scores = model.score(&context, &candidates)?;
        let known: Vec<bool> = candidates.iter().map(|c| c.features.is_some()).collect();
        let config = self.index.config();
        let text_part = scaled_by_best(
            &ids.iter()
                .map(|id| text.get(id).copied().unwrap_or(0.0))
                .collect::<Vec<_>>(),
        );
        let model_part = min_max(&model_scores, &known);
        let retrieval_part = retrieval_scores(&ids, &retrieval);
        let parts: Vec<[(&'static str, f32); 3]> = (0..ids.len())
            .map(|index| {
                let personal = |weight: f32, part: &[f32]| if known[index] { weight * part[index] } else { 0.0 };
                [
                    (TEXT, personal(config.rerank_text_weight, &text_part)),
                    ("model", personal(config.rerank_model_weight, &model_part)),
                    ("retrieval", config.rerank_retrieval_weight * retrieval_part[index]),
                ]
            })
            .collect();
        let scores: Vec<f32> = parts
            .iter()
            .map(|parts| parts.iter().map(|(_, part)| part).sum())
            .collect();
        Ok(rules::apply(&stack, &candidates, &scores, Some(limit))
            .into_iter()
            .map(|Placed { index, score, boost }| Reranked {
                id: ids[index].clone(),
                score,
                explanation: explain.then(|| explanation(&parts[index], boost)),
            })
            .collect())
    }

    /// The text score of each id, searched off the async workers.
    async fn text_scores(&self, query: &str, ids: &[String]) -> Result<HashMap<String, f32>, ServiceError> {
        let index = Arc::clone(&self.index);
        let (query, ids) = (query.to_owned(), ids.to_vec());
        tokio::task::spawn_blocking(move || index.score_ids(&query, &ids))
            .await
            .map_err(|error| ServiceError::Internal(format!("rerank task failed: {error}")))?
            .map_err(ServiceError::from)
    }
}

/// Each id's retrieval part: the mean of its retrieval_score scaled to [0, 1] over
/// the ids that have one, and 1/(1 + rank), of those it has; 0 with neither.
fn retrieval_scores(ids: &[String], metadata: &HashMap<String, Retrieval>) -> Vec<f32> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::domain::item_features::ItemFeatures;

    fn hit(id: &str, score: f32) -> TextHit {
        TextHit {
            id: id.into(),
            table: "t".into(),
            score,
            prior: 0.0,
        }
    }

    fn candidate(embedding: Option<Vec<f32>>) -> Candidate {
        Candidate {
            id: Default::default(),
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
    fn scaling() {
        assert_eq!(scaled_by_best(&[2.0, 1.0, 0.0]), [1.0, 0.5, 0.0]);
        assert_eq!(min_max(&[1.0, 3.0, 100.0], &[true, true, false]), [0.0, 1.0, 49.5]);
        assert_eq!(min_max(&[1.0, 1.0], &[true, true]), [0.0, 0.0]);
    }
}
