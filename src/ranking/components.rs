//! The feature columns learned models score with, each scaled to [0, 1] over the
//! request's candidates (the best candidate of a column gets 1).

use compact_str::CompactString;
use rustc_hash::FxHashMap;

use super::trained::{covisit_key, ItemIndex, Trained};
use super::{Feature, FeatureVector, RankContext, FEATURES};
use crate::domain::attributes::AttributeId;
use crate::domain::candidate::Candidate;

/// A user's long-term affinity counts this much of a session's.
const USER_AFFINITY_WEIGHT: f64 = 0.5;
/// A user's recent items stand in for a missing session, at most this many.
const USER_RECENT_AS_SESSION: usize = 10;

/// Each candidate's feature vector; columns not `needed` stay 0.
pub fn feature_vectors(
    trained: &Trained,
    segment_field: &str,
    context: &RankContext,
    candidates: &[Candidate],
    needed: &[bool; FEATURES],
) -> Vec<FeatureVector> {
    let mut vectors = vec![[0.0f32; FEATURES]; candidates.len()];
    let indexes: Vec<Option<ItemIndex>> = candidates.iter().map(|c| trained.items.get(&c.id)).collect();
    let mut column = Vec::with_capacity(candidates.len());
    if needed[Feature::Popularity as usize] {
        let segment = context.context.get(segment_field).and_then(|value| value.as_str());
        let now = context.models_time(trained.clock);
        let values = indexes
            .iter()
            .map(|index| index.map_or(0.0, |item| trained.popularity.score(item, now, segment).ln_1p()));
        fill(&mut vectors, &mut column, Feature::Popularity, values);
    }
    if needed[Feature::Covisit as usize] {
        let prefix = session_prefix(trained, context);
        if !prefix.is_empty() {
            let ranked_session = context
                .session_id
                .as_deref()
                .or(context.user_id.as_deref())
                .map(covisit_key);
            let scores = trained.covisit.scores_of(&prefix, ranked_session, &indexes);
            fill(
                &mut vectors,
                &mut column,
                Feature::Covisit,
                scores.iter().map(|&score| score as f64),
            );
        }
    }
    if needed[Feature::Affinity as usize] {
        let affinity = affinity_by_attribute(context);
        if !affinity.is_empty() {
            let values = candidates.iter().map(|candidate| {
                candidate.features.as_ref().map_or(0.0, |features| {
                    features
                        .attribute_ids
                        .iter()
                        .map(|key| affinity.get(key).copied().unwrap_or(0.0))
                        .sum()
                })
            });
            fill(&mut vectors, &mut column, Feature::Affinity, values);
        }
    }
    if let (true, Some(profile)) = (needed[Feature::Embedding as usize], &context.profile_embedding) {
        let values = candidates.iter().map(|candidate| {
            candidate
                .features
                .as_ref()
                .and_then(|features| features.embedding.as_deref())
                .map_or(0.0, |embedding| cosine(profile, embedding).max(0.0))
        });
        fill(&mut vectors, &mut column, Feature::Embedding, values);
    }
    let consumed: Vec<&str> = [&context.session, &context.user]
        .into_iter()
        .flatten()
        .flat_map(|signals| signals.consumed.iter().map(CompactString::as_str))
        .collect();
    for (vector, candidate) in vectors.iter_mut().zip(candidates) {
        let unavailable = candidate.features.as_ref().is_some_and(|f| f.available == Some(false));
        vector[Feature::Unavailable as usize] = unavailable as u8 as f32;
        vector[Feature::Consumed as usize] = consumed.contains(&candidate.id.as_str()) as u8 as f32;
    }
    vectors
}

/// Sets column `feature` of `vectors` to `values` scaled to the best of them (left 0
/// when none is positive); `column` is the buffer every feature's values pass through.
fn fill(vectors: &mut [FeatureVector], column: &mut Vec<f64>, feature: Feature, values: impl Iterator<Item = f64>) {
    column.clear();
    column.extend(values);
    let best = column.iter().copied().fold(0.0, f64::max);
    if best > 0.0 {
        for (vector, value) in vectors.iter_mut().zip(column.iter()) {
            vector[feature as usize] = (value / best) as f32;
        }
    }
}

/// The session's items, oldest first, as the co-visitation model knows them; a
/// user's latest items when there is no session signal.
fn session_prefix(trained: &Trained, context: &RankContext) -> Vec<ItemIndex> {
    let (recent, at_most) = match (&context.session, &context.user) {
        (Some(session), _) if !session.recent.is_empty() => (&session.recent, usize::MAX),
        (_, Some(user)) => (&user.recent, USER_RECENT_AS_SESSION),
        _ => return Vec::new(),
    };
    // The list is newest first: the model's indexes are collected, then turned.
    let mut prefix: Vec<ItemIndex> = recent
        .iter()
        .take(at_most)
        .filter_map(|interaction| trained.items.get(interaction.item_id))
        .collect();
    prefix.reverse();
    prefix
}

/// The affinity to each attribute: the session's affinities (as of its newest event)
/// as shares of their total plus the user's (as of theirs), weighted by
/// [`USER_AFFINITY_WEIGHT`], by interned key:
/// one hash lookup of a number per candidate attribute (this runs for every key of
/// every candidate, so it is the hot loop of a ranking request).
pub fn affinity_by_attribute(context: &RankContext) -> FxHashMap<AttributeId, f64> {
    let (session, user) = (context.session.as_deref(), context.user.as_deref());
    let mut combined = FxHashMap::default();
    for (signals, weight) in [(session, 1.0), (user, USER_AFFINITY_WEIGHT)] {
        let Some(signals) = signals else { continue };
        let current: Vec<(AttributeId, f64)> = signals
            .affinities()
            .map(|(affinity, value)| (affinity.id, value))
            .collect();
        let total: f64 = current.iter().map(|(_, value)| value).sum();
        if total <= 0.0 {
            continue;
        }
        for (id, value) in current {
            *combined.entry(id).or_insert(0.0) += weight * value / total;
        }
    }
    combined
}

pub(super) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        dot += x as f64 * y as f64;
        norm_a += x as f64 * x as f64;
        norm_b += y as f64 * y as f64;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        0.0
    } else {
        dot / (norm_a.sqrt() * norm_b.sqrt())
    }
}
