//! Recommend: rank a caller's candidates with a named model, from the session's
//! and user's live state, and record what was shown under a new `rec_id`. Also the
//! parts every ranking use case shares: the rank context (live signals read under
//! a deadline, the profile embedding), the candidates' catalog features, and the
//! record of a ranking.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::experiments::ExperimentService;
use super::{RankingStats, ServiceError};
use crate::domain::candidate::{Candidate, Explanation};
use crate::domain::rules::{Rules, VIRTUAL_FIELDS};
use crate::domain::{ItemFeatures, LiveStateId, Signals};
use crate::engine::Engine;
use crate::experiments::Assignment;
use crate::ranking::ModelRegistry;
use crate::ranking::{affinity_by_attribute, explain_affinity, rank, Model, RankContext, Ranked, ShownRecord};
use crate::training::Training;

/// Recent items whose embeddings make the profile vector.
const PROFILE_ITEMS: usize = 10;

/// Most candidates in one request (DESIGN.md §7).
pub const MAX_CANDIDATES: usize = 10_000;

/// A recommend request, valid by the SPEC's rules.
#[derive(Debug, Clone, PartialEq)]
pub struct RecommendRequest {
    pub model_id: String,
    pub candidates: Vec<Candidate>,
    pub user_id: Option<String>,
    pub session_id: Option<String>,
    /// Request features (region, device, ...).
    pub context: Map<String, Value>,
    pub limit: Option<usize>,
    /// Rank soft-deleted items too (by default they are left out of the answer).
    pub include_deleted: bool,
    /// Explain each item's score (the API's `explain`).
    pub explain: bool,
    /// The request's business rules (`exclude_ids`, `filters`, `boosts`, `diversity`).
    pub rules: Option<Rules>,
}

/// The ranked candidates and the id their ranking is recorded under.
#[derive(Debug)]
pub struct Recommendation {
    pub rec_id: String,
    pub items: Vec<Ranked>,
    /// When `model_id` named an experiment: its id and the arm that ranked.
    pub experiment: Option<ExperimentArm>,
    /// With `explain`: each item's explanation, affinity split by attribute.
    pub explanations: Option<Vec<Explanation>>,
}

/// A ranked item as a response shows it (its id, score and duplicate-group echo; no
/// features, no boost): for the API's tests, which build a [`Recommendation`] without
/// ranking anything.
#[cfg(test)]
pub fn ranked_item(id: &str, score: f32, echoed: Map<String, Value>) -> Ranked {
    Ranked {
        index: 0,
        id: id.into(),
        score,
        echoed,
        features: None,
        weights: None,
        boost: 0.0,
    }
}

/// The experiment a response was ranked in, and the arm (the response's `experiment`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ExperimentArm {
    pub id: String,
    pub arm: String,
}

impl From<Assignment> for ExperimentArm {
    fn from(assignment: Assignment) -> ExperimentArm {
        ExperimentArm {
            id: assignment.experiment,
            arm: assignment.arm,
        }
    }
}

/// Ranking: recommend and modules, with the models, the live state and the
/// experiments' arms.
pub struct RankingService {
    /// Live state, item features and the catalog's rows.
    pub(super) engine: Arc<Engine>,
    pub(super) models: Arc<ModelRegistry>,
    /// Where shown rankings are recorded for learning.
    pub(super) training: Arc<Training>,
    /// How live-state reads on the ranking path fare.
    pub(super) stats: Arc<RankingStats>,
    /// A request for an experiment's id ranks with its arm's model.
    experiments: Arc<ExperimentService>,
}

impl RankingService {
    pub fn new(
        engine: Arc<Engine>,
        models: Arc<ModelRegistry>,
        training: Arc<Training>,
        stats: Arc<RankingStats>,
        experiments: Arc<ExperimentService>,
    ) -> RankingService {
        RankingService {
            engine,
            models,
            training,
            stats,
            experiments,
        }
    }

    /// A configured model, or [`ServiceError::UnknownModel`] (also for an experiment's
    /// id: resolve it first with [`ExperimentService::experiment_arm`]).
    pub fn model(&self, model_id: &str) -> Result<Arc<dyn Model>, ServiceError> {
        self.models
            .get(model_id)
            .ok_or_else(|| ServiceError::UnknownModel(model_id.to_owned()))
    }

    /// The ids of the configured models.
    pub fn model_ids(&self) -> Vec<&str> {
        self.models.ids()
    }
}

impl RankingService {
    /// Ranks the request's candidates, best first, and records the ranking.
    /// A `model_id` naming an experiment ranks with the arm's model (see [`RankingService::arm`]).
    pub async fn recommend(&self, request: RecommendRequest) -> Result<Recommendation, ServiceError> {
        let (model_id, assignment) = self.arm(request.model_id, &request.user_id, &request.session_id);
        let model = self.model(&model_id)?;
        let mut candidates = request.candidates;
        self.attach_features(&mut candidates)?;
        if leaves_out_deleted(model.as_ref(), request.include_deleted) {
            candidates.retain(|candidate| !candidate.is_deleted());
        }
        let model_rules = self.rules(&model_id, request.rules.as_ref(), &candidates)?;
        let profile = Profile::for_candidates(&candidates);
        let context = self
            .rank_context(request.user_id, request.session_id, request.context, profile)
            .await;
        let stack = rule_stack(&model_rules, request.rules.as_ref());
        let items = rank(model.as_ref(), &context, &candidates, request.limit, &stack)?;
        let rec_id = self.served(assignment.as_ref(), items.len());
        self.record_shown(&rec_id, &model_id, &context, &items);
        let explanations = request.explain.then(|| {
            let affinity = affinity_by_attribute(&context);
            items
                .iter()
                .map(|item| {
                    let mut explanation = item.explanation();
                    explain_affinity(&mut explanation, &candidates[item.index], &affinity);
                    explanation
                })
                .collect()
        });
        Ok(Recommendation {
            rec_id,
            items,
            experiment: assignment.map(ExperimentArm::from),
            explanations,
        })
    }

    /// The model a request ranks with: `model_id` itself, or, when it names an
    /// experiment, the model of the arm this request's user or session is assigned
    /// (with the assignment).
    pub fn arm(
        &self,
        model_id: String,
        user_id: &Option<String>,
        session_id: &Option<String>,
    ) -> (String, Option<Assignment>) {
        match self
            .experiments
            .experiment_arm(&model_id, user_id.as_deref(), session_id.as_deref())
        {
            Some(assignment) => (assignment.model_id.clone(), Some(assignment)),
            None => (model_id, None),
        }
    }

    /// The `rec_id` of a ranking that showed `shown` items; one served by an experiment's
    /// arm records the arm in it and counts in the arm's figures.
    pub fn served(&self, assignment: Option<&Assignment>, shown: usize) -> String {
        match assignment {
            Some(assignment) => {
                self.experiments.count_served(assignment, shown);
                assignment.rec_id()
            }
            None => new_rec_id(),
        }
    }

    /// The default rules of model `model_id`, after checking that every field the
    /// request's `rules` name exists: a field of some item table, a reserved one,
    /// `id` or `available`, or an attribute the request gives a candidate. An unknown
    /// one is an error naming it (a typo would otherwise filter out everything).
    pub fn rules(
        &self,
        model_id: &str,
        rules: Option<&Rules>,
        candidates: &[Candidate],
    ) -> Result<Option<Arc<Rules>>, ServiceError> {
        if let Some(rules) = rules {
            self.check_rules(rules, candidates)?;
        }
        Ok(self.models.rules(model_id))
    }

    /// Whether every field `rules` name exists (see [`RankingService::rules`]).
    pub fn check_rules(&self, rules: &Rules, candidates: &[Candidate]) -> Result<(), ServiceError> {
        {
            let items = self.engine.items();
            let known = |field: &str| {
                VIRTUAL_FIELDS.contains(&field)
                    || items.knows_field(field)
                    || candidates
                        .iter()
                        .any(|candidate| candidate.attributes.contains_key(field))
            };
            if let Some(unknown) = rules.fields().into_iter().find(|field| !known(field)) {
                return Err(ServiceError::Invalid(format!(
                    "unknown field {unknown:?} in the rules: no item table has it and no candidate's attributes \
                     give it (rules test catalog fields, request attributes, \"id\" and \"available\")"
                )));
            }
        }
        Ok(())
    }

    /// What the models rank with: the session's and user's live signals (as their
    /// actors published them, or read from their hosts under the configured deadline
    /// when no actor is live; past the deadline, ranking goes on without them and the
    /// miss is counted), and, when `profile` asks for it, the profile embedding of
    /// their recent items.
    pub async fn rank_context(
        &self,
        user_id: Option<String>,
        session_id: Option<String>,
        context: Map<String, Value>,
        profile: Profile,
    ) -> RankContext {
        let now = self.engine.now_millis();
        let read = |key: Option<LiveStateId>| async move {
            let key = key?;
            let deadline = Duration::from_millis(self.stats.state_deadline_ms);
            match tokio::time::timeout(deadline, self.engine.signals(key.clone())).await {
                Ok(Ok(signals)) => signals,
                Ok(Err(error)) => {
                    tracing::warn!(%error, key = key.id(), "live state unreadable; ranking without it");
                    self.stats.state_errors.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Err(_) => {
                    self.stats.state_timeouts.fetch_add(1, Ordering::Relaxed);
                    None
                }
            }
        };
        let (session, user) = futures::join!(
            read(session_id.clone().map(LiveStateId::Session)),
            read(user_id.clone().map(LiveStateId::User))
        );
        let profile_embedding = match profile {
            Profile::Made => self.profile_embedding(session.as_deref().or(user.as_deref())),
            Profile::Skipped => None,
        };
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
    fn profile_embedding(&self, signals: Option<&Signals>) -> Option<Vec<f32>> {
        let mut sum: Option<Vec<f32>> = None;
        let mut count = 0;
        for id in signals?
            .recent
            .iter()
            .take(PROFILE_ITEMS)
            .map(|interaction| interaction.item_id)
        {
            let features = match self.engine.items().features(id) {
                Ok(Some(features)) => features,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, item = %id, "item unreadable; the profile embedding goes without it");
                    continue;
                }
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
    pub fn attach_features(&self, candidates: &mut [Candidate]) -> Result<(), ServiceError> {
        let items = self.engine.items();
        for candidate in candidates {
            candidate.features = if candidate.attributes.is_empty() {
                items.features(&candidate.id)?
            } else {
                items.find(&candidate.id, None)?.map(|mut row| {
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
        Ok(())
    }

    /// Stores what a learned model showed under `rec_id`, so later events carrying the
    /// `rec_id` become training examples. Mock models have nothing to learn from.
    pub fn record_shown(&self, rec_id: &str, model_id: &str, context: &RankContext, ranked: &[Ranked]) {
        let shown = ranked
            .iter()
            .filter_map(|item| Some((item.id.as_str(), item.features?)));
        let record = ShownRecord::new(context.now, model_id, shown);
        if record.is_empty() {
            return;
        }
        self.training.record(rec_id, &record);
    }
}

/// Whether [`RankingService::rank_context`] makes the profile embedding: a read of each of
/// the latest items visited, for a feature that only compares it with candidates'
/// embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Made,
    /// No candidate carries an embedding (their features attached), so the profile
    /// would score nothing.
    Skipped,
}

impl Profile {
    pub fn for_candidates(candidates: &[Candidate]) -> Profile {
        let carries = |candidate: &Candidate| {
            candidate
                .features
                .as_ref()
                .is_some_and(|features| features.embedding.is_some())
        };
        match candidates.iter().any(carries) {
            true => Profile::Made,
            false => Profile::Skipped,
        }
    }
}

/// The rule sets a ranking applies, in order: the model's defaults, the request's.
pub fn rule_stack<'r>(model: &'r Option<Arc<Rules>>, request: Option<&'r Rules>) -> Vec<&'r Rules> {
    model.as_deref().into_iter().chain(request).collect()
}

/// Whether a ranking drops soft-deleted candidates: always, unless the request asks
/// for them (`include_deleted`) or the model is one of the SPEC's mock models, which
/// are pure functions of the request and answer one score per request item.
pub fn leaves_out_deleted(model: &dyn Model, include_deleted: bool) -> bool {
    !include_deleted && !model.is_mock()
}

/// A new `rec_id`: a UUIDv7, so ids sort by time.
pub fn new_rec_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_made_only_for_candidates_that_carry_an_embedding() {
        let with = |embedding: Option<Vec<f32>>| Candidate {
            features: Some(Arc::new(ItemFeatures {
                embedding,
                ..ItemFeatures::default()
            })),
            ..Candidate::new("item", Map::new())
        };
        let unknown = Candidate::new("unknown", Map::new());
        assert_eq!(Profile::for_candidates(&[]), Profile::Skipped);
        assert_eq!(
            Profile::for_candidates(&[unknown.clone(), with(None)]),
            Profile::Skipped
        );
        assert_eq!(
            Profile::for_candidates(&[unknown, with(None), with(Some(vec![0.5, 0.5]))]),
            Profile::Made
        );
    }
}
