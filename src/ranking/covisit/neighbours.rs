//! An item's neighbours, `W[item][j]` for each `j` it leads to: pairs sorted by `j`
//! in one allocation. Scoring reads every pair of a recent item in a row, where a hash
//! map would skip over its empty buckets; a learner's update is a binary search. A
//! full list (2 × `ii_cap` pairs) takes ~8 KB, against ~18 KB as a hash map, and a
//! published snapshot's copy is one `memcpy`.
//!
//! Stored as a map from item to weight, as the hash map it replaced was, so models
//! stored before still read.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ItemIndex;
use crate::ranking::footprint;

#[derive(Debug, Default, PartialEq)]
pub(super) struct Neighbours(Vec<(ItemIndex, f32)>);

/// A copy keeps the capacity: the learner copies the neighbours a snapshot shares,
/// then adds to them, and a list copied to its length would double at that add.
impl Clone for Neighbours {
    fn clone(&self) -> Self {
        let mut pairs = Vec::with_capacity(self.0.capacity());
        pairs.extend_from_slice(&self.0);
        Neighbours(pairs)
    }
}

impl Neighbours {
    /// `W[self][to] += w`; past 2 × `cap` neighbours, only the `cap` heaviest are kept.
    pub fn add(&mut self, to: ItemIndex, w: f32, cap: usize) {
        match self.0.binary_search_by_key(&to, |&(item, _)| item) {
            Ok(at) => self.0[at].1 += w,
            Err(at) => self.0.insert(at, (to, w)),
        }
        let cap = cap.max(1);
        if self.0.len() > 2 * cap {
            self.0
                .select_nth_unstable_by(cap, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            self.0.truncate(cap);
            self.0.sort_unstable_by_key(|&(item, _)| item);
        }
    }

    /// The neighbours and their weights, by item index.
    pub fn iter(&self) -> impl Iterator<Item = (ItemIndex, f32)> + '_ {
        self.0.iter().copied()
    }

    /// Multiplies every weight by `factor`.
    pub fn scale(&mut self, factor: f32) {
        for (_, w) in &mut self.0 {
            *w *= factor;
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn heap_bytes(&self) -> usize {
        footprint::vec(&self.0)
    }
}

impl Serialize for Neighbours {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(item, w)| (item, w)))
    }
}

impl<'de> Deserialize<'de> for Neighbours {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PairsVisitor)
    }
}

struct PairsVisitor;

impl<'de> Visitor<'de> for PairsVisitor {
    type Value = Neighbours;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a map from item index to weight")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Neighbours, A::Error> {
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(pair) = map.next_entry::<ItemIndex, f32>()? {
            pairs.push(pair);
        }
        // A map stored from a hash map is in no order; a key twice keeps its last weight.
        pairs.sort_by_key(|&(item, _)| item);
        pairs.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = later.1;
            }
            same
        });
        Ok(Neighbours(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_keep_the_pairs_sorted_and_summed() {
        let mut neighbours = Neighbours::default();
        for (to, w) in [(7, 1.0), (2, 0.5), (7, 2.0), (4, 1.0), (2, 0.25)] {
            neighbours.add(to, w, 10);
        }
        assert_eq!(neighbours.iter().collect::<Vec<_>>(), [(2, 0.75), (4, 1.0), (7, 3.0)]);
    }

    #[test]
    fn past_twice_the_cap_only_the_heaviest_stay() {
        let mut neighbours = Neighbours::default();
        for to in 0..5u32 {
            neighbours.add(to, to as f32, 2);
        }
        // The fifth pair made five > 2 × 2: the two heaviest are kept, by item.
        assert_eq!(neighbours.iter().collect::<Vec<_>>(), [(3, 3.0), (4, 4.0)]);
        neighbours.add(0, 10.0, 2);
        assert_eq!(neighbours.len(), 3);
    }

    #[test]
    fn reads_a_map_in_any_order_as_stored_by_the_hash_map() {
        let stored = serde_json::json!({"9": 1.5, "3": 0.5, "5": 2.0});
        let neighbours: Neighbours = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(neighbours.iter().collect::<Vec<_>>(), [(3, 0.5), (5, 2.0), (9, 1.5)]);
        assert_eq!(serde_json::to_value(&neighbours).unwrap(), stored);
        let binary = postcard::to_allocvec(&neighbours).unwrap();
        assert_eq!(postcard::from_bytes::<Neighbours>(&binary).unwrap(), neighbours);
    }
}
