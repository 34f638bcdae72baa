//! The self-tuner: what `default` (kind `tuned`) ranks with is chosen from the
//! deployment's own stream, not by hand for one data set.
//!
//! A rebuild from the log holds out the most recent sessions (`training::holdout`),
//! learns the rest, and asks [`tune`] to predict each held-out click from the clicks
//! before it. The search is coordinate ascent over a few values per knob: the
//! co-visitation model's scoring-time parameters (recency weights of the session's
//! items, the neighbourhood's size and decays, the repeat profile, the weights of its
//! three parts), the weights of popularity, affinity and embeddings beside it, and
//! whether items the session bought are demoted. Affinity and embeddings are read
//! from the catalog: a case's are its session's (the shares of its visits' attributes,
//! the mean embedding of its last visits), not its user's, which the rebuild does not
//! keep. Why coordinate ascent:
//! - each knob's effect is visible and reported (what it chose, how much it gained);
//! - the parts of the co-visitation scores are computed once per case and recombined
//!   for every trial of weights; a knob inside a part recomputes only that part;
//! - with a few thousand held-out clicks the choice between neighbouring values is
//!   noisy anyway; a finer search (Bayesian, a learned ranker) would fit that noise.
//!   For the same reason a value replaces the current one only when it ranks the
//!   held-out clicks better case by case by two standard errors: the defaults stay
//!   unless the stream says otherwise.
//!
//! The objective is HR@20 + MRR@20 over the held-out clicks, every item a candidate
//! (as far as a top 20 can tell: the items a part's top [`PART_TOP`] reaches, the
//! [`POPULAR`] most popular, the bought ones and the target). Learning-time
//! parameters (pair windows, decays of counts, memory bounds) and the popularity
//! half-life stay fixed: changing them would mean relearning the log per trial.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::components::cosine;
use super::covisit::{Params, PartName};
use super::learned::ConsumedPolicy;
use super::trained::{ItemIndex, Trained};
use super::{Feature, ItemCatalog, ItemFeatures, FEATURES};
use crate::domain::attributes::AttributeId;

/// One held-out click to predict.
#[derive(Debug, Clone)]
pub struct Case {
    /// The session's co-visitation key ([`super::covisit_key`]).
    pub session: u64,
    /// The session's earlier visits, oldest first.
    pub prefix: Vec<ItemIndex>,
    /// Items the session bought before this click.
    pub consumed: Vec<ItemIndex>,
    /// The item visited next.
    pub target: ItemIndex,
    /// When (unix ms): popularity is scored as of then.
    pub at: i64,
}

/// The cut-off of the objective's hit rate and reciprocal rank.
pub const CUT: usize = 20;
/// Each part's best items kept per case.
const PART_TOP: usize = 100;
/// The most popular items added to every case's candidates.
const POPULAR: usize = 100;
/// Fewer held-out clicks than this tune nothing (the choice would be noise).
pub const MIN_CASES: usize = 200;
/// Passes over the knobs at most (the search stops at a pass that gains nothing).
const ROUNDS: usize = 3;
/// A setting replaces the current one only when its gain (in HR@20 + MRR@20, case by
/// case) is this many standard errors above 0: with a few thousand held-out clicks,
/// smaller gains are as likely noise, and the defaults should stay unless the data
/// says otherwise (a paired one-sided test, at about 2.5%).
const MIN_GAIN_ERRORS: f64 = 2.0;
/// The weights beside co-visitation (1) before tuning, as `config/models.toml`'s fixed
/// blends have them.
pub const DEFAULT_POPULARITY_WEIGHT: f64 = 0.001;
pub const DEFAULT_AFFINITY_WEIGHT: f64 = 0.3;
pub const DEFAULT_EMBEDDING_WEIGHT: f64 = 0.3;
/// A case's profile embedding is the mean of its last visits' embeddings, this many
/// at most (as a ranking request's).
const PROFILE_ITEMS: usize = 10;

/// Hit rate and mean reciprocal rank at [`CUT`] over the held-out clicks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub hr20: f64,
    pub mrr20: f64,
}

/// Each case's objective (1 + 1/rank for a hit within [`CUT`], 0 for a miss).
type Outcomes = Vec<f32>;

/// Whether `trial` beats `current`, case by case, by [`MIN_GAIN_ERRORS`] standard errors.
fn significantly_better(trial: &Outcomes, current: &Outcomes) -> bool {
    let n = trial.len().min(current.len());
    if n < 2 {
        return false;
    }
    let gains: Vec<f64> = trial.iter().zip(current).map(|(t, c)| (t - c) as f64).collect();
    let mean = gains.iter().sum::<f64>() / n as f64;
    let variance = gains.iter().map(|gain| (gain - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    mean > 0.0 && mean > MIN_GAIN_ERRORS * (variance / n as f64).sqrt()
}

/// What the tuner chose, and how the held-out clicks ranked before and after.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tuning {
    /// Held-out sessions and the clicks predicted in them.
    pub sessions: usize,
    pub cases: usize,
    /// With the defaults, and with the choice.
    pub before: Figures,
    pub after: Figures,
    /// Every knob's chosen value, by name.
    pub chosen: BTreeMap<String, f64>,
    /// Popularity's, affinity's and embeddings' weights relative to co-visitation's.
    pub popularity_weight: f64,
    pub affinity_weight: f64,
    pub embedding_weight: f64,
    pub consumed: ConsumedPolicy,
    /// Settings tried, and how long the search took.
    pub trials: usize,
    pub took_ms: u64,
}

impl Tuning {
    /// A tuned model's weights: the fallback's, with popularity, affinity and
    /// embeddings (relative to the fallback's co-visitation weight) and the bought
    /// items' weight as chosen.
    pub fn weights(&self, fallback: &[f64; FEATURES]) -> [f64; FEATURES] {
        let mut weights = *fallback;
        let covisit = match weights[Feature::Covisit as usize] {
            weight if weight > 0.0 => weight,
            _ => 1.0,
        };
        weights[Feature::Covisit as usize] = covisit;
        weights[Feature::Popularity as usize] = self.popularity_weight * covisit;
        weights[Feature::Affinity as usize] = self.affinity_weight * covisit;
        weights[Feature::Embedding as usize] = self.embedding_weight * covisit;
        weights[Feature::Consumed as usize] = self.consumed.weight();
        weights
    }
}

/// A point of the search: the co-visitation parameters and the outer weights.
#[derive(Clone)]
struct Choice {
    params: Params,
    popularity: f32,
    affinity: f32,
    embedding: f32,
    demote: bool,
}

impl Choice {
    fn part_weights(&self) -> [f32; 3] {
        [self.params.w_ii, self.params.w_knn, self.params.w_rep]
    }
}

/// One dimension of the search: the values tried, and the part it changes (`None`:
/// only how the parts are weighed, so nothing is scored again).
struct Knob {
    name: &'static str,
    part: Option<PartName>,
    values: &'static [f32],
    get: fn(&Choice) -> f32,
    set: fn(&mut Choice, f32),
}

const KNOBS: &[Knob] = &[
    Knob {
        name: "w_ii",
        part: None,
        values: &[0.0, 0.25, 0.5, 1.0, 2.0],
        get: |c| c.params.w_ii,
        set: |c, v| c.params.w_ii = v,
    },
    Knob {
        name: "w_knn",
        part: None,
        values: &[0.0, 0.5, 1.0, 2.0],
        get: |c| c.params.w_knn,
        set: |c, v| c.params.w_knn = v,
    },
    Knob {
        name: "w_rep",
        part: None,
        values: &[0.0, 0.4, 0.8, 1.6, 3.2],
        get: |c| c.params.w_rep,
        set: |c, v| c.params.w_rep = v,
    },
    Knob {
        name: "w_popularity",
        part: None,
        values: &[0.0, 0.0001, 0.001, 0.01, 0.1, 0.3],
        get: |c| c.popularity,
        set: |c, v| c.popularity = v,
    },
    Knob {
        name: "w_affinity",
        part: None,
        values: &[0.0, 0.1, 0.3, 1.0, 3.0],
        get: |c| c.affinity,
        set: |c, v| c.affinity = v,
    },
    Knob {
        name: "w_embedding",
        part: None,
        values: &[0.0, 0.1, 0.3, 1.0, 3.0],
        get: |c| c.embedding,
        set: |c, v| c.embedding = v,
    },
    Knob {
        name: "demote_consumed",
        part: None,
        values: &[1.0, 0.0],
        get: |c| c.demote as u8 as f32,
        set: |c, v| c.demote = v != 0.0,
    },
    Knob {
        name: "ii_recency_decay",
        part: Some(PartName::ItemToItem),
        values: &[0.35, 0.7, 1.4, 3.0],
        get: |c| c.params.ii_recency_decay,
        set: |c, v| c.params.ii_recency_decay = v,
    },
    Knob {
        name: "ii_src_alpha",
        part: Some(PartName::ItemToItem),
        values: &[0.0, 0.25, 0.5, 0.75],
        get: |c| c.params.ii_src_alpha,
        set: |c, v| c.params.ii_src_alpha = v,
    },
    Knob {
        name: "ii_recent",
        part: Some(PartName::ItemToItem),
        values: &[3.0, 5.0, 10.0, 20.0],
        get: |c| c.params.ii_recent as f32,
        set: |c, v| c.params.ii_recent = v as usize,
    },
    Knob {
        name: "knn_sample",
        part: Some(PartName::Knn),
        values: &[250.0, 500.0, 1000.0],
        get: |c| c.params.knn_sample as f32,
        set: |c, v| c.params.knn_sample = v as usize,
    },
    Knob {
        name: "knn_k",
        part: Some(PartName::Knn),
        values: &[25.0, 50.0, 100.0, 200.0],
        get: |c| c.params.knn_k as f32,
        set: |c, v| c.params.knn_k = v as usize,
    },
    Knob {
        name: "knn_lambda_pos",
        part: Some(PartName::Knn),
        values: &[1.0, 2.0, 4.0],
        get: |c| c.params.knn_lambda_pos,
        set: |c, v| c.params.knn_lambda_pos = v,
    },
    Knob {
        name: "knn_lambda_after",
        part: Some(PartName::Knn),
        values: &[1.5, 2.5, 5.0],
        get: |c| c.params.knn_lambda_after,
        set: |c, v| c.params.knn_lambda_after = v,
    },
    Knob {
        name: "knn_lambda_before",
        part: Some(PartName::Knn),
        values: &[1.5, 3.0, 6.0],
        get: |c| c.params.knn_lambda_before,
        set: |c, v| c.params.knn_lambda_before = v,
    },
    Knob {
        name: "rep_count_w",
        part: Some(PartName::Repeat),
        values: &[0.0, 0.3, 0.6],
        get: |c| c.params.rep_count_w,
        set: |c, v| c.params.rep_count_w = v,
    },
    Knob {
        name: "rep_gamma",
        part: Some(PartName::Repeat),
        values: &[0.0, 0.75, 1.5, 3.0],
        get: |c| c.params.rep_gamma,
        set: |c, v| c.params.rep_gamma = v,
    },
];

const PARTS: [PartName; 3] = [PartName::ItemToItem, PartName::Knn, PartName::Repeat];

/// Where `part` is in [`PARTS`] (and in a case's [`Columns`]).
fn part_slot(part: PartName) -> usize {
    match part {
        PartName::ItemToItem => 0,
        PartName::Knn => 1,
        PartName::Repeat => 2,
    }
}

/// One part of a case's co-visitation scores: its best items (scaled to the part's
/// maximum) and its multiplier.
type Part = (Vec<(ItemIndex, f32)>, f32);
/// A case's three parts under the current choice.
type Columns = [Part; 3];

/// What a case's session says beyond co-visitation: the shares of its visits'
/// affinity attributes, and the mean embedding of its last visits.
#[derive(Default)]
struct Profile {
    affinity: FxHashMap<AttributeId, f64>,
    embedding: Option<Vec<f32>>,
}

/// The held-out clicks and what is computed once for them.
struct Bench<'a> {
    trained: &'a Trained,
    cases: &'a [Case],
    catalog: Option<&'a dyn ItemCatalog>,
    popular: Vec<ItemIndex>,
    profiles: Vec<Profile>,
    /// Item features read from the catalog so far.
    features: FxHashMap<ItemIndex, Option<Arc<ItemFeatures>>>,
    /// Reused per case: item → blended co-visitation score.
    scores: FxHashMap<ItemIndex, f32>,
}

impl Bench<'_> {
    fn item_features(&mut self, item: ItemIndex) -> Option<Arc<ItemFeatures>> {
        let (catalog, trained) = (self.catalog?, self.trained);
        self.features
            .entry(item)
            .or_insert_with(|| catalog.features(trained.items.id(item)))
            .clone()
    }

    fn profile(&mut self, case: &Case) -> Profile {
        let mut profile = Profile::default();
        let (mut sum, mut embedded) = (Vec::<f32>::new(), 0usize);
        let mut total = 0.0;
        for (back, &item) in case.prefix.iter().rev().enumerate() {
            let Some(features) = self.item_features(item) else {
                continue;
            };
            for &attribute in &features.attribute_ids {
                *profile.affinity.entry(attribute).or_insert(0.0) += 1.0;
                total += 1.0;
            }
            if let (true, Some(embedding)) = (back < PROFILE_ITEMS, &features.embedding) {
                if sum.is_empty() {
                    sum = vec![0.0; embedding.len()];
                }
                if sum.len() == embedding.len() {
                    sum.iter_mut().zip(embedding).for_each(|(s, e)| *s += e);
                    embedded += 1;
                }
            }
        }
        for share in profile.affinity.values_mut() {
            *share /= total;
        }
        if embedded > 0 {
            profile.embedding = Some(sum.into_iter().map(|s| s / embedded as f32).collect());
        }
        profile
    }

    fn part(&self, part: PartName, params: &Params) -> Vec<Part> {
        self.cases
            .iter()
            .map(|case| {
                self.trained
                    .covisit
                    .part(part, &case.prefix, Some(case.session), params, PART_TOP)
            })
            .collect()
    }

    fn columns(&self, params: &Params) -> Vec<Columns> {
        let mut parts = PARTS.map(|part| self.part(part, params).into_iter());
        (0..self.cases.len())
            .map(|_| {
                let [ii, knn, rep] = &mut parts;
                [
                    ii.next().unwrap_or_default(),
                    knn.next().unwrap_or_default(),
                    rep.next().unwrap_or_default(),
                ]
            })
            .collect()
    }

    /// Whether some case's session has affinities, and embeddings: else those
    /// weights change nothing and are not searched.
    fn has_profiles(&self) -> (bool, bool) {
        let affinity = self.profiles.iter().any(|profile| !profile.affinity.is_empty());
        let embedding = self.profiles.iter().any(|profile| profile.embedding.is_some());
        (affinity, embedding)
    }

    /// HR@20 and MRR@20 of `choice` over every case, and each case's outcome.
    fn figures(&mut self, choice: &Choice, columns: &[Columns]) -> (Figures, Outcomes) {
        let (mut hits, mut reciprocal) = (0usize, 0.0f64);
        let mut outcomes = Vec::with_capacity(self.cases.len());
        for index in 0..self.cases.len() {
            let rank = self.rank(choice, index, &columns[index]);
            if let Some(rank) = rank {
                hits += 1;
                reciprocal += 1.0 / rank as f64;
            }
            outcomes.push(rank.map_or(0.0, |rank| 1.0 + 1.0 / rank as f32));
        }
        let n = self.cases.len().max(1) as f64;
        let figures = Figures {
            hr20: hits as f64 / n,
            mrr20: reciprocal / n,
        };
        (figures, outcomes)
    }

    /// The target's rank (1-based) among every item when it is within [`CUT`].
    /// Scored as the `tuned` model scores a request: each column scaled to its best
    /// candidate, weighed, bought items demoted. Ties count for the target, which
    /// must score above 0.
    fn rank(&mut self, choice: &Choice, index: usize, columns: &Columns) -> Option<usize> {
        let cases = self.cases;
        let case = &cases[index];
        self.scores.clear();
        for ((values, multiplier), weight) in columns.iter().zip(choice.part_weights()) {
            let weight = weight * multiplier;
            if weight == 0.0 {
                continue;
            }
            for &(item, value) in values {
                *self.scores.entry(item).or_insert(0.0) += weight * value;
            }
        }
        for &item in self.popular.iter().chain(&case.consumed).chain([&case.target]) {
            self.scores.entry(item).or_insert(0.0);
        }
        let items: Vec<(ItemIndex, f32)> = self.scores.drain().collect();
        let target = items.iter().position(|&(item, _)| item == case.target)?;

        // Each feature's column with its weight; each is scaled to its best value.
        let mut weighed: Vec<(f32, Vec<f32>)> = Vec::with_capacity(4);
        let covisit: Vec<f32> = items.iter().map(|&(_, score)| score.max(0.0)).collect();
        weighed.push((1.0, covisit));
        if choice.popularity != 0.0 {
            let popularity = &self.trained.popularity;
            let column = items
                .iter()
                .map(|&(item, _)| popularity.score(item, case.at, None).ln_1p() as f32)
                .collect();
            weighed.push((choice.popularity, column));
        }
        if choice.affinity != 0.0 || choice.embedding != 0.0 {
            let features: Vec<Option<Arc<ItemFeatures>>> =
                items.iter().map(|&(item, _)| self.item_features(item)).collect();
            let profile = &self.profiles[index];
            if choice.affinity != 0.0 {
                let column = features
                    .iter()
                    .map(|features| {
                        features.as_ref().map_or(0.0, |features| {
                            let shares = features
                                .attribute_ids
                                .iter()
                                .map(|key| profile.affinity.get(key).copied().unwrap_or(0.0));
                            shares.sum::<f64>() as f32
                        })
                    })
                    .collect();
                weighed.push((choice.affinity, column));
            }
            if let (true, Some(profile)) = (choice.embedding != 0.0, &profile.embedding) {
                let column = features
                    .iter()
                    .map(|features| {
                        let embedding = features.as_ref().and_then(|features| features.embedding.as_deref());
                        embedding.map_or(0.0, |embedding| cosine(profile, embedding).max(0.0) as f32)
                    })
                    .collect();
                weighed.push((choice.embedding, column));
            }
        }
        let demote = if choice.demote {
            ConsumedPolicy::Demote
        } else {
            ConsumedPolicy::Keep
        }
        .weight() as f32;
        let mut scores = vec![0.0f32; items.len()];
        for (weight, column) in &weighed {
            let best = column.iter().fold(0.0f32, |best, &value| best.max(value));
            if best > 0.0 {
                for (score, value) in scores.iter_mut().zip(column) {
                    *score += weight * value / best;
                }
            }
        }
        for (score, (item, _)) in scores.iter_mut().zip(&items) {
            if case.consumed.contains(item) {
                *score += demote;
            }
        }
        let target_score = scores[target];
        if target_score <= 0.0 {
            return None;
        }
        let above = scores.iter().filter(|&&score| score > target_score).count();
        (above < CUT).then_some(above + 1)
    }
}

/// The `f64` an `f32` knob value reads as (0.35, not 0.3499999940395355).
fn shortest(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(value as f64)
}

/// Chooses the scoring of `trained`'s models from held-out `cases` (from `sessions`
/// sessions), reading item features from `catalog`: the tuning to report and keep,
/// and the co-visitation parameters to score with
/// ([`super::covisit::SessionModel::set_scoring`]). `None` with fewer than
/// [`MIN_CASES`] cases.
pub fn tune(
    trained: &Trained,
    sessions: usize,
    cases: &[Case],
    catalog: Option<&dyn ItemCatalog>,
) -> Option<(Tuning, Params)> {
    if cases.len() < MIN_CASES {
        return None;
    }
    let started = Instant::now();
    let mut bench = Bench {
        trained,
        cases,
        catalog,
        popular: trained
            .popularity
            .top(trained.clock, POPULAR)
            .into_iter()
            .map(|(item, _)| item)
            .collect(),
        profiles: Vec::new(),
        features: FxHashMap::default(),
        scores: FxHashMap::default(),
    };
    let profiles = cases.iter().map(|case| bench.profile(case)).collect();
    bench.profiles = profiles;
    let (affinities, embeddings) = bench.has_profiles();
    let mut choice = Choice {
        params: trained.covisit.params().clone(),
        popularity: DEFAULT_POPULARITY_WEIGHT as f32,
        affinity: DEFAULT_AFFINITY_WEIGHT as f32,
        embedding: DEFAULT_EMBEDDING_WEIGHT as f32,
        demote: true,
    };
    let mut columns = bench.columns(&choice.params);
    let (before, mut current) = bench.figures(&choice, &columns);
    let mut best = before;
    let mut trials = 1;
    for _ in 0..ROUNDS {
        let mut moved = false;
        for knob in KNOBS {
            let searched = match knob.name {
                "w_affinity" => affinities,
                "w_embedding" => embeddings,
                _ => true,
            };
            for &value in knob.values.iter().filter(|_| searched) {
                if value == (knob.get)(&choice) {
                    continue;
                }
                let mut trial = choice.clone();
                (knob.set)(&mut trial, value);
                let weights = trial.part_weights();
                let weighed_part = knob.part.is_none_or(|part| weights[part_slot(part)] != 0.0);
                if weights.iter().all(|&weight| weight == 0.0) || !weighed_part {
                    continue;
                }
                // A knob inside a part swaps that part's new values in, and back
                // unless they win.
                let mut swapped = knob.part.map(|part| (part_slot(part), bench.part(part, &trial.params)));
                let swap = |columns: &mut [Columns], swapped: &mut Option<(usize, Vec<Part>)>| {
                    if let Some((slot, values)) = swapped {
                        for (case, values) in columns.iter_mut().zip(values.iter_mut()) {
                            std::mem::swap(&mut case[*slot], values);
                        }
                    }
                };
                swap(columns.as_mut_slice(), &mut swapped);
                let (figures, outcomes) = bench.figures(&trial, &columns);
                trials += 1;
                if significantly_better(&outcomes, &current) {
                    best = figures;
                    current = outcomes;
                    choice = trial;
                    moved = true;
                } else {
                    swap(columns.as_mut_slice(), &mut swapped);
                }
            }
        }
        if !moved {
            break;
        }
    }
    let chosen = KNOBS
        .iter()
        .map(|knob| (knob.name.to_owned(), shortest((knob.get)(&choice))))
        .collect();
    let tuning = Tuning {
        sessions,
        cases: cases.len(),
        before,
        after: best,
        chosen,
        popularity_weight: shortest(choice.popularity),
        affinity_weight: shortest(choice.affinity),
        embedding_weight: shortest(choice.embedding),
        consumed: if choice.demote {
            ConsumedPolicy::Demote
        } else {
            ConsumedPolicy::Keep
        },
        trials,
        took_ms: started.elapsed().as_millis() as u64,
    };
    Some((tuning, choice.params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranking::covisit_key;

    /// Sessions walk a ring of 40 items, each starting somewhere on it: the next
    /// item is always the one after the last. Learned, or only made cases of.
    fn ring(trained: &mut Trained, sessions: std::ops::Range<u64>, learn: bool) -> Vec<Case> {
        let mut cases = Vec::new();
        for session in sessions {
            let key = covisit_key(&format!("s{session}"));
            let start = (session * 7) % 40;
            let items: Vec<ItemIndex> = (0..6)
                .map(|step| trained.items.intern(&format!("i{}", (start + step) % 40)))
                .collect();
            for (position, &item) in items.iter().enumerate() {
                if position > 0 {
                    cases.push(Case {
                        session: key,
                        prefix: items[..position].to_vec(),
                        consumed: Vec::new(),
                        target: item,
                        at: 0,
                    });
                }
            }
            for &item in items.iter().filter(|_| learn) {
                trained.covisit.observe(key, item);
            }
        }
        cases
    }

    #[test]
    fn the_tuner_leaves_a_bad_starting_point() {
        let mut trained = Trained::new(86_400_000.0);
        ring(&mut trained, 0..300, true);
        let cases = ring(&mut trained, 300..400, false);
        // Scored by re-visits alone, nothing that comes next was seen in the session.
        let bad = Params {
            w_ii: 0.0,
            w_knn: 0.0,
            w_rep: 1.0,
            ..Params::default()
        };
        trained.covisit.set_scoring(&bad);
        let (tuning, chosen) = tune(&trained, 100, &cases, None).expect("enough cases");
        assert_eq!(tuning.cases, 500);
        assert!(tuning.before.hr20 < 0.05, "{tuning:?}");
        assert!(tuning.after.hr20 > 0.95, "{tuning:?}");
        assert!(chosen.w_ii > 0.0 || chosen.w_knn > 0.0, "{chosen:?}");
        assert!(tuning.trials > 10);

        let few = &cases[..MIN_CASES - 1];
        assert!(tune(&trained, 10, few, None).is_none(), "too few cases tune nothing");
    }
}
