//! Learning to rank: an online logistic regression over the ranking features,
//! trained from what was shown (the `rec_id` record) and what was then done with it
//! (click, cart, conversion events carrying that `rec_id`).

use serde::{Deserialize, Serialize};

/// The features every learned model scores with, each scaled to [0, 1] within a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Popularity = 0,
    Covisit = 1,
    Affinity = 2,
    Embedding = 3,
    /// 1 when the catalog says the item is unavailable.
    Unavailable = 4,
    /// 1 when the session or the user already bought it (a `conversion` event).
    Consumed = 5,
}

pub const FEATURES: usize = 6;
pub type FeatureVector = [f32; FEATURES];

impl Feature {
    pub const ALL: [Feature; FEATURES] = [
        Feature::Popularity,
        Feature::Covisit,
        Feature::Affinity,
        Feature::Embedding,
        Feature::Unavailable,
        Feature::Consumed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Feature::Popularity => "popularity",
            Feature::Covisit => "covisit",
            Feature::Affinity => "affinity",
            Feature::Embedding => "embedding",
            Feature::Unavailable => "unavailable",
            Feature::Consumed => "consumed",
        }
    }

    pub fn named(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|feature| feature.name() == name)
    }
}

/// Examples needed before the learned weights are used.
pub const MIN_EXAMPLES: u64 = 200;
const LEARNING_RATE: f64 = 0.05;
const L2: f64 = 1e-4;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ltr {
    weights: [f64; FEATURES],
    bias: f64,
    examples: u64,
    positives: u64,
}

impl Ltr {
    /// One SGD step of the logistic loss; `importance` scales it (a conversion counts more).
    pub fn learn(&mut self, features: &FeatureVector, clicked: bool, importance: f64) {
        let label = if clicked { 1.0 } else { 0.0 };
        let error = label - self.probability(features);
        let step = LEARNING_RATE * importance;
        for (weight, &x) in self.weights.iter_mut().zip(features) {
            *weight += step * (error * x as f64 - L2 * *weight);
        }
        self.bias += step * error;
        self.examples += 1;
        self.positives += clicked as u64;
    }

    fn probability(&self, features: &FeatureVector) -> f64 {
        let z = self.bias + self.linear(features);
        1.0 / (1.0 + (-z).exp())
    }

    fn linear(&self, features: &FeatureVector) -> f64 {
        self.weights.iter().zip(features).map(|(w, &x)| w * x as f64).sum()
    }

    /// The learned weights, once enough examples of both outcomes were seen.
    pub fn weights(&self) -> Option<[f64; FEATURES]> {
        let trained = self.examples >= MIN_EXAMPLES && self.positives > 0 && self.positives < self.examples;
        trained.then_some(self.weights)
    }

    pub fn examples(&self) -> u64 {
        self.examples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_which_feature_predicts_clicks() {
        let mut ltr = Ltr::default();
        for round in 0..2_000 {
            let covisit = (round % 10) as f32 / 10.0;
            let popularity = ((round * 7) % 10) as f32 / 10.0;
            ltr.learn(&[popularity, covisit, 0.0, 0.0, 0.0, 0.0], covisit > 0.6, 1.0);
        }
        let weights = ltr.weights().expect("trained");
        assert!(weights[Feature::Covisit as usize] > weights[Feature::Popularity as usize] + 1.0);
    }
}
