//! The SPEC's reserved mock models, for client integration tests.

use std::sync::Arc;

use super::{Model, ModelError, RankContext};
use crate::domain::candidate::Candidate;

/// Scores items in input order with strictly decreasing deterministic scores.
struct InputOrder;

impl Model for InputOrder {
    fn score(&self, _: &RankContext, candidates: &[Candidate]) -> Result<Vec<f32>, ModelError> {
        let count = candidates.len() as f32;
        Ok((0..candidates.len())
            .map(|index| (count - index as f32) / count)
            .collect())
    }

    fn is_mock(&self) -> bool {
        true
    }
}

/// Always fails the same way.
struct Failing(ModelError);

impl Model for Failing {
    fn score(&self, _: &RankContext, _: &[Candidate]) -> Result<Vec<f32>, ModelError> {
        Err(self.0.clone())
    }

    fn is_mock(&self) -> bool {
        true
    }
}

/// Every mock model with its reserved id.
pub fn all() -> Vec<(&'static str, Arc<dyn Model>)> {
    vec![
        ("test_model_item_200", Arc::new(InputOrder)),
        (
            "test_model_item_400",
            Arc::new(Failing(ModelError::Refused(
                "test_model_item_400 refuses every request".into(),
            ))),
        ),
        (
            "test_model_item_429",
            Arc::new(Failing(ModelError::RateLimited { retry_after_secs: 1 })),
        ),
        (
            "test_model_item_503",
            Arc::new(Failing(ModelError::Unavailable(
                "test_model_item_503 is never available".into(),
            ))),
        ),
    ]
}
