//! What ranking knows of an item from the catalog: its affinity keys, embedding and
//! availability, derived once from the stored row (and per request when the request
//! overrides some of its fields).

use serde_json::{Map, Value};
use smallvec::SmallVec;

use super::attributes::{intern, AttributeId};
use super::live_state::{affinity_attributes, availability};

/// Longest embedding taken from a catalog row (DESIGN: ≤ 1,024 floats).
const MAX_EMBEDDING: usize = 1024;

/// The fields an item's embedding is read from, in order.
const EMBEDDING_FIELDS: [&str; 2] = ["embeddings", "embedding"];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemFeatures {
    /// Its affinity attributes: `group:…`, `tag:…`, `lang:…`, `age:…`, `price_band:…`, `available:…`.
    pub attributes: Vec<String>,
    /// The same attributes, interned (what the ranking loop compares), stored inline.
    pub attribute_ids: SmallVec<[AttributeId; 8]>,
    /// The item's `embeddings` (or `embedding`) field.
    pub embedding: Option<Vec<f32>>,
    /// `Some(false)` for an item that cannot be had (or is soft-deleted).
    pub available: Option<bool>,
    /// Soft-deleted (`is_deleted: true`): ranking leaves it out unless asked for it.
    pub deleted: bool,
    /// The row's fields but its embedding (kept above as floats): what the business
    /// rules test (`ranking::rules`).
    pub fields: Map<String, Value>,
}

impl ItemFeatures {
    pub fn from_row(row: &Map<String, Value>) -> ItemFeatures {
        let embedding = EMBEDDING_FIELDS
            .iter()
            .find_map(|field| row.get(*field)?.as_array())
            .filter(|values| !values.is_empty() && values.len() <= MAX_EMBEDDING)
            .and_then(|values| values.iter().map(|v| v.as_f64().map(|v| v as f32)).collect());
        let attributes = affinity_attributes(row);
        ItemFeatures {
            attribute_ids: attributes.iter().map(|attribute| intern(attribute)).collect(),
            attributes,
            embedding,
            available: availability(row),
            deleted: row.get("is_deleted") == Some(&Value::Bool(true)),
            fields: row
                .iter()
                .filter(|(name, _)| !EMBEDDING_FIELDS.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn features_of_a_row() {
        let row = json!({"id": "a", "groups": ["tours"], "price": 30, "availability": "sold out",
                         "embeddings": [0.5, 1.0], "attraction_live_guide_languages": ["en"]});
        let features = ItemFeatures::from_row(row.as_object().unwrap());
        assert_eq!(features.embedding, Some(vec![0.5, 1.0]));
        assert_eq!(features.available, Some(false));
        assert!(features.attributes.contains(&"group:tours".to_owned()));
        assert!(features.attributes.contains(&"lang:en".to_owned()));
        assert!(features.attributes.contains(&"price_band:4".to_owned()));
        let interned: Vec<_> = features.attributes.iter().map(|key| intern(key)).collect();
        assert_eq!(features.attribute_ids.as_slice(), interned);
    }
}
