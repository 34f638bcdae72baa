//! The models over the learned artifacts: one feature alone, a weighted blend, and
//! the learned ranker (a blend whose weights come from outcomes once it has enough).

use super::trained::{Trained, TrainedSnapshots};
use super::{feature_vectors, Feature, Model, ModelError, RankContext, Scored, FEATURES};
use crate::domain::candidate::Candidate;

/// Unavailable items lose this much (every other feature is at most 1).
pub const UNAVAILABLE_PENALTY: f64 = -1.0;
/// Items the session or user already bought lose this much under the `demote`
/// policy: more than a one-feature model's best score (1) and the unavailable
/// penalty together, so they rank below every item not bought.
pub const CONSUMED_PENALTY: f64 = -2.0;

/// What a model does with items the session or the user already bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumedPolicy {
    /// Ranked below everything not bought (a bought film is seldom bought again).
    #[default]
    Demote,
    /// Ranked like any other item (groceries, repeat purchases).
    Keep,
}

impl ConsumedPolicy {
    pub fn weight(self) -> f64 {
        match self {
            ConsumedPolicy::Demote => CONSUMED_PENALTY,
            ConsumedPolicy::Keep => 0.0,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Weights {
    /// One feature (availability still demotes; bought items as the policy says).
    Single(Feature, ConsumedPolicy),
    Blend([f64; FEATURES]),
    /// The learned weights once trained, these until then.
    Learned {
        fallback: [f64; FEATURES],
    },
    /// These, with the weights of popularity, affinity, embeddings and bought items
    /// chosen by the self-tuner once a rebuild tuned them ([`super::tuning`]).
    Tuned {
        fallback: [f64; FEATURES],
    },
}

pub struct Learned {
    pub weights: Weights,
    pub trained: TrainedSnapshots,
}

impl Learned {
    fn weights(&self, trained: &Trained) -> [f64; FEATURES] {
        match &self.weights {
            Weights::Single(feature, consumed) => {
                let mut weights = [0.0; FEATURES];
                weights[*feature as usize] = 1.0;
                weights[Feature::Unavailable as usize] = UNAVAILABLE_PENALTY;
                weights[Feature::Consumed as usize] = consumed.weight();
                weights
            }
            Weights::Blend(weights) => *weights,
            Weights::Learned { fallback } => trained.ltr.weights().unwrap_or(*fallback),
            Weights::Tuned { fallback } => match &trained.tuning {
                Some(tuning) => tuning.weights(fallback),
                None => *fallback,
            },
        }
    }
}

impl Model for Learned {
    fn score(&self, context: &RankContext, candidates: &[Candidate]) -> Result<Vec<f32>, ModelError> {
        Ok(self.score_explained(context, candidates)?.scores)
    }

    fn score_explained(&self, context: &RankContext, candidates: &[Candidate]) -> Result<Scored, ModelError> {
        let trained = self.trained.latest();
        let weights = self.weights(&trained);
        let needed = weights.map(|weight| weight != 0.0);
        let vectors = feature_vectors(&trained, self.trained.segment_field(), context, candidates, &needed);
        let scores = vectors
            .iter()
            .map(|vector| {
                weights
                    .iter()
                    .zip(vector)
                    .map(|(weight, &value)| weight * value as f64)
                    .sum::<f64>() as f32
            })
            .collect();
        Ok(Scored {
            scores,
            features: Some(vectors),
            weights: Some(weights),
        })
    }
}
