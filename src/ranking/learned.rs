//! The models over the learned artifacts: one feature alone, a weighted blend, and
//! the learned ranker (a blend whose weights come from outcomes once it has enough).

use super::trained::TrainedSnapshots;
use super::{feature_vectors, Candidate, Feature, FeatureVector, Model, ModelError, RankContext, FEATURES};

/// Unavailable items lose this much (every other feature is at most 1).
pub const UNAVAILABLE_PENALTY: f64 = -1.0;

#[derive(Debug, Clone)]
pub enum Weights {
    /// One feature (availability still demotes).
    Single(Feature),
    Blend([f64; FEATURES]),
    /// The learned weights once trained, these until then.
    Learned {
        fallback: [f64; FEATURES],
    },
}

pub struct Learned {
    pub weights: Weights,
    pub trained: TrainedSnapshots,
}

impl Learned {
    fn weights(&self, learned: Option<[f64; FEATURES]>) -> [f64; FEATURES] {
        match &self.weights {
            Weights::Single(feature) => {
                let mut weights = [0.0; FEATURES];
                weights[*feature as usize] = 1.0;
                weights[Feature::Unavailable as usize] = UNAVAILABLE_PENALTY;
                weights
            }
            Weights::Blend(weights) => *weights,
            Weights::Learned { fallback } => learned.unwrap_or(*fallback),
        }
    }
}

impl Model for Learned {
    fn score(&self, context: &RankContext, candidates: &[Candidate]) -> Result<Vec<f32>, ModelError> {
        Ok(self.score_explained(context, candidates)?.0)
    }

    fn score_explained(
        &self,
        context: &RankContext,
        candidates: &[Candidate],
    ) -> Result<(Vec<f32>, Option<Vec<FeatureVector>>), ModelError> {
        let trained = self.trained.latest();
        let weights = self.weights(trained.ltr.weights());
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
        Ok((scores, Some(vectors)))
    }
}
