//! What a ranking is asked about and what it answers besides scores, as every layer
//! names it: a [`Candidate`] (an item to rank, with the request's attributes and the
//! catalog's features of it) and an [`Explanation`] of a score. The models that
//! score candidates live in `crate::ranking`.

use std::borrow::Cow;
use std::sync::Arc;

use compact_str::CompactString;
use serde_json::{Map, Value};

use super::item_features::ItemFeatures;

/// One item to rank, with the request's attributes for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Inline up to 24 bytes: no allocation per candidate for the ids of most catalogs.
    pub id: CompactString,
    /// Request attributes; they override the catalog's values for this request.
    pub attributes: Map<String, Value>,
    /// The catalog's view of the item (with the request's overrides); `None` if unknown.
    pub features: Option<Arc<ItemFeatures>>,
}

impl Candidate {
    /// A candidate whose features are not attached yet.
    pub fn new(id: impl Into<CompactString>, attributes: Map<String, Value>) -> Candidate {
        Candidate {
            id: id.into(),
            attributes,
            features: None,
        }
    }

    /// Whether the catalog holds it soft-deleted (features must be attached).
    pub fn is_deleted(&self) -> bool {
        self.features.as_ref().is_some_and(|features| features.deleted)
    }
}

/// Why an item scored what it did: named contributions that sum to its score.
pub type Explanation = Vec<(Cow<'static, str>, f64)>;
