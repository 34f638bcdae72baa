//! What ranking knows of an item from the catalog: its affinity keys, embedding and
//! availability, derived once from the stored row (and per request when the request
//! overrides some of its fields).

use compact_str::CompactString;
use serde_json::{Map, Value};
use smallvec::SmallVec;

use super::attributes::{field_key, intern, AttributeId};
use super::live_state::{affinity_attributes, availability};

/// Longest embedding taken from a catalog row (DESIGN: ≤ 1,024 floats).
const MAX_EMBEDDING: usize = 1024;

/// The fields an item's embedding is read from, in order.
const EMBEDDING_FIELDS: [&str; 2] = ["embeddings", "embedding"];

/// Laid out in this order (`repr(C)`) so that what ranking reads of every candidate
/// (availability, soft deletion, the interned attributes) sits right after the `Arc`'s
/// counts: 64 bytes with them, one or two cache lines a candidate. The compiler's own
/// order sorts fields by alignment, which leaves one-byte flags after everything else.
#[derive(Debug, Clone, Default, PartialEq)]
#[repr(C)]
pub struct ItemFeatures {
    /// `Some(false)` for an item that cannot be had (or is soft-deleted).
    pub available: Option<bool>,
    /// Soft-deleted (`is_deleted: true`): ranking leaves it out unless asked for it.
    pub deleted: bool,
    /// Its affinity attributes (as `attributes` below), interned: what the ranking loop
    /// compares, stored inline.
    pub attribute_ids: SmallVec<[AttributeId; 8]>,
    /// The item's `embeddings` (or `embedding`) field.
    pub embedding: Option<Vec<f32>>,
    /// The row's fields but its embedding (kept above as floats), by interned name
    /// ([`field_key`]) in id order: what the business rules test (`ranking::rules`).
    /// The ids are searched inline, without a string compare or a pointer to chase;
    /// `field_values[i]` is the value of `field_ids[i]`.
    pub field_ids: SmallVec<[AttributeId; 16]>,
    pub field_values: Vec<FieldValue>,
    /// Its affinity attributes: `group:…`, `tag:…`, `lang:…`, `age:…`, `price_band:…`, `available:…`.
    pub attributes: Vec<String>,
}

/// A field's value as the rules test it: short strings inline (no pointer to chase per
/// candidate), arrays as their elements.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Bool(bool),
    Number(f64),
    Text(CompactString),
    List(Vec<FieldValue>),
    /// `null`, an object, or a number past `f64`: present, equal to nothing.
    Other,
}

impl From<&Value> for FieldValue {
    fn from(value: &Value) -> FieldValue {
        match value {
            Value::Bool(flag) => FieldValue::Bool(*flag),
            Value::Number(number) => number.as_f64().map_or(FieldValue::Other, FieldValue::Number),
            Value::String(text) => FieldValue::Text(CompactString::from(text.as_str())),
            Value::Array(values) => FieldValue::List(values.iter().map(FieldValue::from).collect()),
            Value::Null | Value::Object(_) => FieldValue::Other,
        }
    }
}

impl ItemFeatures {
    pub fn from_row(row: &Map<String, Value>) -> ItemFeatures {
        let embedding = EMBEDDING_FIELDS
            .iter()
            .find_map(|field| row.get(*field)?.as_array())
            .filter(|values| !values.is_empty() && values.len() <= MAX_EMBEDDING)
            .and_then(|values| values.iter().map(|v| v.as_f64().map(|v| v as f32)).collect());
        let attributes = affinity_attributes(row);
        let mut fields: Vec<(AttributeId, FieldValue)> = row
            .iter()
            .filter(|(name, _)| !EMBEDDING_FIELDS.contains(&name.as_str()))
            .map(|(name, value)| (intern(&field_key(name)), FieldValue::from(value)))
            .collect();
        fields.sort_unstable_by_key(|(id, _)| *id);
        ItemFeatures {
            attribute_ids: attributes.iter().map(|attribute| intern(attribute)).collect(),
            attributes,
            embedding,
            available: availability(row),
            deleted: row.get("is_deleted") == Some(&Value::Bool(true)),
            field_ids: fields.iter().map(|(id, _)| *id).collect(),
            field_values: fields.into_iter().map(|(_, value)| value).collect(),
        }
    }

    /// The value of the field interned as `id` ([`field_key`]), if the row has it.
    pub fn field(&self, id: AttributeId) -> Option<&FieldValue> {
        let at = self.field_ids.binary_search(&id).ok()?;
        self.field_values.get(at)
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
