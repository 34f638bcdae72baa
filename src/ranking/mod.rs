//! Ranking: models are pure functions of a [`RankContext`] and candidates to
//! scores; the [`ModelRegistry`] maps `model_id`s to them (`config/models.toml`).
//! Nothing here knows HTTP.
//!
//! - The model kinds and their trained artifacts: [`popularity`], [`covisit`]
//!   (co-visitation and session kNN), [`ltr`] (the learned ranker over the feature
//!   columns), gathered in [`Trained`], which the learner (`training`) updates and
//!   publishes as snapshots ([`TrainedSnapshots`]); [`record`]: what a ranking showed.
//! - `components`: the feature columns every learned model scores with.
//! - `learned`: the models over them (one feature, a blend, the learned ranker).
//! - `registry`: `config/models.toml` → models; `mock`: the SPEC's mock models.

mod components;
pub mod covisit;
mod footprint;
mod learned;
pub mod ltr;
mod mock;
pub mod modules;
pub mod popularity;
pub mod record;
mod registry;
pub mod rules;
pub mod trained;
pub mod tuning;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use compact_str::CompactString;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};

use crate::domain::attributes::AttributeId;
use crate::domain::candidate::{Candidate, Explanation};
use crate::domain::item_features::ItemFeatures;
use crate::domain::rules::Rules;
use crate::domain::signals::Signals;
pub use components::feature_vectors;
pub use ltr::{Feature, FeatureVector, FEATURES};
pub use record::{RecRecord, ShownRecord};
pub use registry::{RegistryError, DEFAULT_MODELS_TOML};
pub use rules::Placed;
pub use trained::{covisit_key, ItemIds, ItemIndex, Trained, TrainedSnapshots};

/// The catalog's ranking features of items, by id: what the self-tuner reads to weigh
/// affinity and embeddings ([`tuning`]; the learner keeps no catalog of its own).
pub trait ItemCatalog: Send + Sync {
    /// `None` for an item the catalog does not hold (or cannot read now).
    fn features(&self, id: &str) -> Option<Arc<ItemFeatures>>;
}

/// What a model may use besides the candidates.
#[derive(Debug, Clone, Default)]
pub struct RankContext {
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    /// Free request context (region, device, referrer...).
    pub context: Map<String, Value>,
    /// Unix ms.
    pub now: i64,
    /// The live signals of the session and the user (shared with their actors' board).
    pub session: Option<Arc<Signals>>,
    pub user: Option<Arc<Signals>>,
    /// Mean embedding of the recently visited items, when they carry embeddings.
    pub profile_embedding: Option<Vec<f32>>,
}

impl RankContext {
    /// The time the models' decays run to for this ranking: the request's time, but
    /// never past the newest event the models learned (`models_clock`,
    /// [`Trained::clock`]). Live, that is the newest event; after a backfill of last
    /// year, too (the wall clock is far past it), so the backfill scores as the live
    /// stream did; an offline replay that ranks as of an earlier time sets `now` to it.
    pub fn models_time(&self, models_clock: i64) -> i64 {
        match (self.now > 0, models_clock > 0) {
            (true, true) => self.now.min(models_clock),
            (false, _) => models_clock,
            (true, false) => self.now,
        }
    }
}

/// Why a model did not score.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Refused(String),
    #[error("model rate limited; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("{0}")]
    Unavailable(String),
}

/// Scores, and for models over the ranking features how they were made.
#[derive(Debug, Clone, Default)]
pub struct Scored {
    pub scores: Vec<f32>,
    /// Each candidate's feature vector (recorded with the `rec_id` for learning from
    /// outcomes).
    pub features: Option<Vec<FeatureVector>>,
    /// The weights the scores are the weighted sums of the features by.
    pub weights: Option<[f64; FEATURES]>,
}

/// A ranking model: one score per candidate, higher is better.
pub trait Model: Send + Sync {
    fn score(&self, context: &RankContext, candidates: &[Candidate]) -> Result<Vec<f32>, ModelError>;

    /// The scores with, for models over the ranking features, the features and weights.
    fn score_explained(&self, context: &RankContext, candidates: &[Candidate]) -> Result<Scored, ModelError> {
        Ok(Scored {
            scores: self.score(context, candidates)?,
            ..Scored::default()
        })
    }

    /// The SPEC's mock models are pure functions of the request: they never read the
    /// catalog, so soft-deleted items are not left out for them (one score per
    /// request item, as documented).
    fn is_mock(&self) -> bool {
        false
    }
}

/// The models a node serves, by id.
pub struct ModelRegistry {
    models: HashMap<String, Arc<dyn Model>>,
    /// The business rules a model applies by default (its entry's rule keys).
    rules: HashMap<String, Arc<Rules>>,
}

impl ModelRegistry {
    /// The SPEC's reserved mock models only.
    pub fn with_mocks() -> ModelRegistry {
        let mut models: HashMap<String, Arc<dyn Model>> = HashMap::new();
        for (id, model) in mock::all() {
            models.insert(id.to_owned(), model);
        }
        ModelRegistry {
            models,
            rules: HashMap::new(),
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<dyn Model>> {
        self.models.get(id).cloned()
    }

    /// The business rules model `id` applies by default, if it has any.
    pub fn rules(&self, id: &str) -> Option<Arc<Rules>> {
        self.rules.get(id).cloned()
    }

    /// Configured ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.models.keys().map(String::as_str).collect();
        ids.sort();
        ids
    }
}

/// A ranked item: its position in the request, id and score.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub index: usize,
    /// The candidate's id (inline, as there: a copy, not an allocation per item).
    pub id: CompactString,
    pub score: f32,
    /// For an id given more than once: the request attributes whose values differ
    /// within its group (SPEC recommend rule 1), but never `id` or `score`, which
    /// the echo would overwrite in the response item. Empty for unique ids.
    pub echoed: Map<String, Value>,
    /// The features it was scored with, for models over them.
    pub features: Option<FeatureVector>,
    /// The weights of those features in its score.
    pub weights: Option<[f64; FEATURES]>,
    /// What the business rules' boosts added to the model's score (in `score`).
    pub boost: f32,
}

/// The affinity of the session and user to each attribute, as the affinity feature
/// sums it per candidate ([`explain_affinity`]).
pub use components::affinity_by_attribute;

/// Splits an explanation's `affinity` part among the candidate's attributes in
/// proportion to the session's and user's affinity to each (`affinity` as
/// [`affinity_by_attribute`] gives it): `affinity:group:Sale`, `affinity:tag:family`.
/// The parts still sum to the score; an attribute without affinity gets no part.
pub fn explain_affinity(explanation: &mut Explanation, candidate: &Candidate, affinity: &FxHashMap<AttributeId, f64>) {
    let Some(at) = explanation
        .iter()
        .position(|(name, _)| name == Feature::Affinity.name())
    else {
        return;
    };
    let Some(features) = candidate.features.as_deref() else {
        return;
    };
    let shares: Vec<(&String, f64)> = features
        .attributes
        .iter()
        .zip(&features.attribute_ids)
        .filter_map(|(name, id)| Some((name, *affinity.get(id)?)))
        .filter(|(_, share)| *share > 0.0)
        .collect();
    let total: f64 = shares.iter().map(|(_, share)| share).sum();
    if total <= 0.0 {
        return;
    }
    let (_, contribution) = explanation.remove(at);
    for (name, share) in shares {
        explanation.push((Cow::Owned(format!("affinity:{name}")), contribution * share / total));
    }
}

/// The model every contribution goes to when a model has no features.
const WHOLE_MODEL: &str = "model";

impl Ranked {
    /// Why it scored what it did: each feature's contribution (its weight times its
    /// value; features contributing nothing left out), summing to the score. A model
    /// without features contributes its whole score under `model`.
    pub fn explanation(&self) -> Explanation {
        let mut explanation = self.model_explanation();
        if self.boost != 0.0 {
            explanation.push((Cow::Borrowed(rules::BOOST), f64::from(self.boost)));
        }
        explanation
    }

    /// The model's part of the explanation: its score before the boosts.
    fn model_explanation(&self) -> Explanation {
        match (&self.features, &self.weights) {
            (Some(features), Some(weights)) => Feature::ALL
                .iter()
                .map(|&feature| {
                    let index = feature as usize;
                    (Cow::Borrowed(feature.name()), weights[index] * features[index] as f64)
                })
                .filter(|(_, contribution)| *contribution != 0.0)
                .collect(),
            _ => vec![(Cow::Borrowed(WHOLE_MODEL), f64::from(self.score - self.boost))],
        }
    }
}

/// Scores candidates, applies the business rules (`rules`: a model's defaults, then
/// the request's; see [`rules::apply`]), orders them best first (ties keep request
/// order), keeps at most `limit`, and attaches the duplicate-group echo.
pub fn rank(
    model: &dyn Model,
    context: &RankContext,
    candidates: &[Candidate],
    limit: Option<usize>,
    rules: &[&Rules],
) -> Result<Vec<Ranked>, ModelError> {
    let Scored {
        scores,
        features,
        weights,
    } = model.score_explained(context, candidates)?;
    debug_assert_eq!(scores.len(), candidates.len(), "a model scores every candidate");
    // Almost always empty (ids given once each): then no item hashes its index into it.
    let mut echoes = duplicate_echoes(candidates);
    // Orders (position, score) pairs rather than whole ranked items, which are large
    // to move, and builds only the items kept.
    let order = rules::apply(rules, candidates, &scores, limit);
    Ok(order
        .into_iter()
        .map(|Placed { index, score, boost }| Ranked {
            index,
            id: candidates[index].id.clone(),
            score,
            echoed: match echoes.is_empty() {
                true => Map::new(),
                false => echoes.remove(&index).unwrap_or_default(),
            },
            features: features.as_ref().map(|features| features[index]),
            weights,
            boost,
        })
        .collect())
}

/// Attributes a duplicate-group echo leaves out: the response item's own fields.
const ECHO_CLASHES: [&str; 2] = ["id", "score"];

/// For each candidate whose id occurs more than once: its own values of the
/// attributes that differ within the group.
fn duplicate_echoes(candidates: &[Candidate]) -> HashMap<usize, Map<String, Value>> {
    let mut seen = FxHashSet::with_capacity_and_hasher(candidates.len(), Default::default());
    if candidates.iter().all(|candidate| seen.insert(candidate.id.as_str())) {
        return HashMap::new();
    }
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        groups.entry(candidate.id.as_str()).or_default().push(index);
    }
    let mut echoes = HashMap::new();
    for members in groups.values().filter(|members| members.len() > 1) {
        let mut names: Vec<&String> = members
            .iter()
            .flat_map(|&i| candidates[i].attributes.keys())
            .filter(|name| !ECHO_CLASHES.contains(&name.as_str()))
            .collect();
        names.sort();
        names.dedup();
        let differing: Vec<&String> = names
            .into_iter()
            .filter(|name| {
                let first = candidates[members[0]].attributes.get(*name);
                members.iter().any(|&i| candidates[i].attributes.get(*name) != first)
            })
            .collect();
        for &index in members {
            let echo: Map<String, Value> = differing
                .iter()
                .filter_map(|name| {
                    candidates[index]
                        .attributes
                        .get(*name)
                        .map(|v| ((*name).clone(), v.clone()))
                })
                .collect();
            echoes.insert(index, echo);
        }
    }
    echoes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn candidate(id: &str, attributes: Value) -> Candidate {
        Candidate::new(id, attributes.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn duplicates_echo_only_the_attributes_that_differ() {
        let candidates = vec![
            candidate("a", json!({"slot": "top", "price": 10})),
            candidate("b", json!({"slot": "top"})),
            candidate("a", json!({"slot": "side", "price": 10})),
        ];
        let echoes = duplicate_echoes(&candidates);
        assert_eq!(echoes[&0], *json!({"slot": "top"}).as_object().unwrap());
        assert_eq!(echoes[&2], *json!({"slot": "side"}).as_object().unwrap());
        assert!(!echoes.contains_key(&1));
    }

    #[test]
    fn decays_run_to_the_request_time_but_never_past_the_newest_event() {
        let at = |now| RankContext {
            now,
            ..RankContext::default()
        };
        assert_eq!(at(5_000).models_time(3_000), 3_000, "a wall clock past the events");
        assert_eq!(at(2_000).models_time(3_000), 2_000, "a replay as of an earlier time");
        assert_eq!(at(0).models_time(3_000), 3_000);
        assert_eq!(at(5_000).models_time(0), 5_000, "nothing learned yet");
    }

    #[test]
    fn mock_200_keeps_input_order_and_limit() {
        let registry = ModelRegistry::with_mocks();
        let model = registry.get("test_model_item_200").unwrap();
        let candidates: Vec<_> = ["x", "y", "z"].iter().map(|id| candidate(id, json!({}))).collect();
        let ranked = rank(model.as_ref(), &RankContext::default(), &candidates, Some(2), &[]).unwrap();
        assert_eq!(ranked.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["x", "y"]);
        assert!(ranked[0].score > ranked[1].score);
        let refused = registry.get("test_model_item_429").unwrap();
        assert!(matches!(
            rank(refused.as_ref(), &RankContext::default(), &candidates, None, &[]),
            Err(ModelError::RateLimited { .. })
        ));
    }
}
