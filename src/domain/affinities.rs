//! The affinities of a session or user to item attributes: time-decayed scores by
//! interned attribute, sorted by it. One list serves the live state that updates
//! it and the signals ranking reads: a state shares it with the signals it
//! publishes and copies it when it changes while they hold it. The list is one
//! allocation sized to fit, so a new attribute makes a new list.

use std::fmt;
use std::iter;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::attributes::{intern, interned, name, AttributeId};
use super::live_state::Decayed;

/// An affinity to one item attribute: 16 bytes, the score in single precision (a
/// live key holds one for each attribute of the items it touched).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affinity {
    /// The attribute, interned.
    pub id: AttributeId,
    value: f32,
    /// When the score was last brought up to, unix ms.
    at: i64,
}

impl Affinity {
    pub fn new(attribute: &str, decayed: Decayed) -> Affinity {
        Affinity::of(intern(attribute), decayed)
    }

    fn of(id: AttributeId, decayed: Decayed) -> Affinity {
        Affinity {
            id,
            value: decayed.value as f32,
            at: decayed.at,
        }
    }

    /// The score as last updated.
    pub fn decayed(&self) -> Decayed {
        Decayed {
            value: self.value as f64,
            at: self.at,
        }
    }

    /// `group:…`, `tag:…`, `price_band:…`, …
    pub fn attribute(&self) -> &'static str {
        name(self.id)
    }
}

/// Affinities sorted by attribute id, in one allocation shared until changed.
/// Stored as a map from attribute to its score (the encoding of the map it replaced).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Affinities(Arc<[Affinity]>);

impl Affinities {
    /// Adds `weight` observed at `at` to the affinity to `id`.
    pub fn add(&mut self, id: AttributeId, weight: f64, at: i64, half_life_ms: f64) {
        match self.0.binary_search_by_key(&id, |affinity| affinity.id) {
            Ok(index) => {
                let affinity = &mut Arc::make_mut(&mut self.0)[index];
                let mut decayed = affinity.decayed();
                decayed.add(weight, at, half_life_ms);
                *affinity = Affinity::of(id, decayed);
            }
            Err(index) => {
                let mut decayed = Decayed { value: 0.0, at };
                decayed.add(weight, at, half_life_ms);
                let (before, after) = self.0.split_at(index);
                let new = iter::once(Affinity::of(id, decayed));
                self.0 = before.iter().copied().chain(new).chain(after.iter().copied()).collect();
            }
        }
    }

    /// The affinity to `attribute`, as last updated.
    pub fn get(&self, attribute: &str) -> Option<Decayed> {
        let id = interned(attribute)?;
        let index = self.0.binary_search_by_key(&id, |affinity| affinity.id).ok()?;
        Some(self.0[index].decayed())
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Affinity> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<Affinity> for Affinities {
    /// Later entries for the same attribute replace earlier ones.
    fn from_iter<I: IntoIterator<Item = Affinity>>(affinities: I) -> Self {
        let mut list: Vec<Affinity> = affinities.into_iter().collect();
        // Reversed, a stable sort puts the last given of an attribute first, which
        // `dedup` keeps.
        list.reverse();
        list.sort_by_key(|affinity| affinity.id);
        list.dedup_by_key(|affinity| affinity.id);
        Affinities(list.into())
    }
}

impl Serialize for Affinities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for affinity in self.iter() {
            map.serialize_entry(affinity.attribute(), &affinity.decayed())?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Affinities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ByAttribute;
        impl<'de> Visitor<'de> for ByAttribute {
            type Value = Affinities;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a map of attribute to decayed score")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Affinities, A::Error> {
                let mut list = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some((attribute, decayed)) = map.next_entry::<std::borrow::Cow<'de, str>, Decayed>()? {
                    list.push(Affinity::new(&attribute, decayed));
                }
                Ok(Affinities::from_iter(list))
            }
        }
        deserializer.deserialize_map(ByAttribute)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn adding_keeps_one_sorted_entry_an_attribute_and_copies_only_a_shared_list() {
        let mut affinities = Affinities::default();
        for attribute in ["tag:aff-b", "tag:aff-a", "tag:aff-b"] {
            affinities.add(intern(attribute), 1.0, 0, 1000.0);
        }
        assert_eq!(affinities.len(), 2);
        assert_eq!(std::mem::size_of::<Affinity>(), 16);
        assert_eq!(affinities.get("tag:aff-b").map(|d| d.value), Some(2.0));
        assert!(affinities
            .iter()
            .zip(affinities.iter().skip(1))
            .all(|(a, b)| a.id < b.id));

        let published = affinities.clone();
        affinities.add(intern("tag:aff-a"), 1.0, 1000, 1000.0);
        assert_eq!(published.get("tag:aff-a").map(|d| d.value), Some(1.0));
        // Halved once, plus 1.
        assert_eq!(affinities.get("tag:aff-a").map(|d| d.value), Some(1.5));
    }

    #[test]
    fn collected_the_last_given_of_an_attribute_stays() {
        let affinities: Affinities = [
            ("tag:aff-z", 1.0),
            ("tag:aff-y", 2.0),
            ("tag:aff-z", 3.0),
            ("tag:aff-z", 4.0),
        ]
        .into_iter()
        .map(|(attribute, value)| Affinity::new(attribute, Decayed { value, at: 0 }))
        .collect();
        assert_eq!(affinities.len(), 2);
        assert_eq!(affinities.get("tag:aff-z").map(|d| d.value), Some(4.0));
        assert!(affinities
            .iter()
            .zip(affinities.iter().skip(1))
            .all(|(a, b)| a.id < b.id));
    }

    #[test]
    fn they_read_and_write_the_encoding_of_the_map_they_replace() {
        let before: HashMap<String, Decayed> = [
            ("group:aff-x".to_owned(), Decayed { value: 2.5, at: 7 }),
            ("price_band:aff-3".to_owned(), Decayed { value: 0.5, at: 9 }),
        ]
        .into();
        let stored = postcard::to_allocvec(&before).unwrap();
        let affinities: Affinities = postcard::from_bytes(&stored).unwrap();
        assert_eq!(affinities.get("group:aff-x"), Some(Decayed { value: 2.5, at: 7 }));
        let again: HashMap<String, Decayed> =
            postcard::from_bytes(&postcard::to_allocvec(&affinities).unwrap()).unwrap();
        assert_eq!(again, before);
    }
}
