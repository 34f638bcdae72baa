//! Popularity: time-decayed, event-type weighted interaction counts per item,
//! overall and per context segment (the value of one configured event/request field).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{footprint, ItemIndex};

/// A count that halves every half-life, kept as (value, time it was brought up to).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Decaying {
    value: f64,
    at: i64,
}

impl Decaying {
    fn add(&mut self, weight: f64, at: i64, half_life_ms: f64) {
        if at >= self.at {
            self.value = self.value * halving(at - self.at, half_life_ms) + weight;
            self.at = at;
        } else {
            self.value += weight * halving(self.at - at, half_life_ms);
        }
    }

    fn at_time(self, now: i64, half_life_ms: f64) -> f64 {
        self.value * halving(now - self.at, half_life_ms)
    }
}

fn halving(elapsed_ms: i64, half_life_ms: f64) -> f64 {
    (-(elapsed_ms.max(0) as f64) / half_life_ms).exp2()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Popularity {
    half_life_ms: f64,
    overall: Vec<Decaying>,
    /// Every item's weighted count of all time, undecayed: how well known it is (the
    /// prior of search), where `overall` is how popular it is now.
    lasting: Vec<f32>,
    /// Segment value → item → count.
    segments: HashMap<String, HashMap<ItemIndex, Decaying>>,
}

impl Popularity {
    pub fn new(half_life_ms: f64) -> Popularity {
        Popularity {
            half_life_ms,
            overall: Vec::new(),
            lasting: Vec::new(),
            segments: HashMap::new(),
        }
    }

    /// Estimated heap bytes of the counts, overall and per segment.
    pub fn heap_bytes(&self) -> usize {
        let segments: usize = self
            .segments
            .iter()
            .map(|(name, counts)| name.capacity() + footprint::map(counts))
            .sum();
        footprint::vec(&self.overall) + footprint::vec(&self.lasting) + footprint::map(&self.segments) + segments
    }

    pub fn add(&mut self, item: ItemIndex, weight: f64, at: i64, segment: Option<&str>) {
        let index = item as usize;
        if self.overall.len() <= index {
            self.overall.resize(index + 1, Decaying::default());
        }
        self.overall[index].add(weight, at, self.half_life_ms);
        if self.lasting.len() <= index {
            self.lasting.resize(index + 1, 0.0);
        }
        self.lasting[index] += weight as f32;
        if let Some(segment) = segment {
            self.segments
                .entry(segment.to_owned())
                .or_default()
                .entry(item)
                .or_default()
                .add(weight, at, self.half_life_ms);
        }
    }

    /// The item's decayed count as of `now`, within `segment` when it has been seen there.
    pub fn score(&self, item: ItemIndex, now: i64, segment: Option<&str>) -> f64 {
        let overall = self
            .overall
            .get(item as usize)
            .map_or(0.0, |count| count.at_time(now, self.half_life_ms));
        let within = segment
            .and_then(|segment| self.segments.get(segment))
            .and_then(|counts| counts.get(&item))
            .map_or(0.0, |count| count.at_time(now, self.half_life_ms));
        // A segment's own signal counts double; items unseen there keep their overall rank.
        overall + 2.0 * within
    }

    /// The item's weighted count of all time.
    pub fn lasting(&self, item: ItemIndex) -> f64 {
        self.lasting.get(item as usize).map_or(0.0, |count| f64::from(*count))
    }

    /// The `limit` most popular items as of `now`, best first.
    pub fn top(&self, now: i64, limit: usize) -> Vec<(ItemIndex, f64)> {
        let mut all: Vec<(ItemIndex, f64)> = self
            .overall
            .iter()
            .enumerate()
            .map(|(item, count)| (item as ItemIndex, count.at_time(now, self.half_life_ms)))
            .filter(|(_, score)| *score > 0.0)
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(limit);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_decay_and_segments_add() {
        let day = 86_400_000;
        let mut popularity = Popularity::new(day as f64);
        popularity.add(0, 1.0, 0, None);
        popularity.add(1, 1.0, day, Some("mobile"));
        assert!((popularity.score(0, day, None) - 0.5).abs() < 1e-9);
        assert!(popularity.score(1, day, None) > popularity.score(0, day, None));
        assert!((popularity.score(1, day, Some("mobile")) - 3.0).abs() < 1e-9);
        assert_eq!(popularity.top(day, 1)[0].0, 1);
    }
}
