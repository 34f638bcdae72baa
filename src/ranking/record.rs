//! What a ranking showed: the items in order with the features each was ranked
//! with. Stored under the response's `rec_id`; outcome events naming it become
//! training examples for the learned ranker. A record names no user or session:
//! learning needs only what was shown, and a user's deletion then has nothing to
//! look for in the rankings, which are kept by age.

use serde::{Deserialize, Serialize};

use super::ltr::FeatureVector;

/// What one recommend response showed, in order, with the features each item was
/// ranked with; events carrying its `rec_id` turn it into training examples.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecRecord {
    pub at: i64,
    pub model: String,
    pub shown: Vec<(String, FeatureVector)>,
}

/// A ranking to record, borrowing what it shows: stored in the encoding of
/// [`RecRecord`], without copying every id first.
#[derive(Debug, Serialize)]
pub struct ShownRecord<'a> {
    pub at: i64,
    pub model: &'a str,
    pub shown: Vec<(&'a str, FeatureVector)>,
}
