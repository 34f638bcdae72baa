//! Co-visitation (session-kNN family): which items sessions visit together, learned
//! click by click, scored against a session's recent items with recency weights.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::ItemIndex;

/// Tuning of the co-visitation learner and scorer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    /// Items of a session remembered for pairing with its next clicks.
    pub window: usize,
    /// Sessions remembered at once; the least recently active is forgotten.
    pub max_sessions: usize,
    /// Neighbours kept per item (the strongest).
    pub max_neighbours: usize,
    /// Weight of a pair seen in the opposite order (j before i) relative to i before j.
    pub backward: f32,
    /// Exponent of the neighbour's popularity in the normalisation.
    pub popularity_exponent: f32,
    /// Weight of an item already in the session (a re-visit).
    pub repeat: f32,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            window: 10,
            max_sessions: 200_000,
            max_neighbours: 200,
            backward: 0.5,
            popularity_exponent: 0.5,
            repeat: 0.5,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionModel {
    params: Params,
    /// Item → neighbour → weight.
    neighbours: HashMap<ItemIndex, HashMap<ItemIndex, f32>>,
    /// Clicks per item.
    counts: HashMap<ItemIndex, u32>,
    /// Session → its recent items, oldest first, and when it was last active.
    sessions: HashMap<u64, (VecDeque<ItemIndex>, u64)>,
    /// Session activity order, for forgetting the least recent.
    activity: VecDeque<(u64, u64)>,
    clock: u64,
}

impl SessionModel {
    pub fn new(params: Params) -> SessionModel {
        SessionModel {
            params,
            neighbours: HashMap::new(),
            counts: HashMap::new(),
            sessions: HashMap::new(),
            activity: VecDeque::new(),
            clock: 0,
        }
    }

    /// One click of a session, in stream order.
    pub fn observe(&mut self, session: u64, item: ItemIndex) {
        self.clock += 1;
        *self.counts.entry(item).or_default() += 1;
        let clock = self.clock;
        let (recent, active) = self.sessions.entry(session).or_insert_with(|| (VecDeque::new(), clock));
        *active = clock;
        let previous: Vec<ItemIndex> = recent.iter().copied().collect();
        recent.push_back(item);
        if recent.len() > self.params.window {
            recent.pop_front();
        }
        self.activity.push_back((session, clock));
        for (distance, &earlier) in previous.iter().rev().enumerate() {
            if earlier == item {
                continue;
            }
            let weight = 1.0 / (distance + 1) as f32;
            self.add_pair(earlier, item, weight);
            self.add_pair(item, earlier, weight * self.params.backward);
        }
        self.forget_old_sessions();
    }

    fn add_pair(&mut self, from: ItemIndex, to: ItemIndex, weight: f32) {
        let neighbours = self.neighbours.entry(from).or_default();
        *neighbours.entry(to).or_default() += weight;
        if neighbours.len() > 2 * self.params.max_neighbours {
            let mut strongest: Vec<(ItemIndex, f32)> = neighbours.drain().collect();
            strongest.sort_by(|a, b| b.1.total_cmp(&a.1));
            strongest.truncate(self.params.max_neighbours);
            neighbours.extend(strongest);
        }
    }

    fn forget_old_sessions(&mut self) {
        while self.sessions.len() > self.params.max_sessions {
            let Some((session, clock)) = self.activity.pop_front() else {
                break;
            };
            if self.sessions.get(&session).is_some_and(|(_, active)| *active == clock) {
                self.sessions.remove(&session);
            }
        }
        if self.activity.len() > 4 * self.params.max_sessions.max(1024) {
            let sessions = &self.sessions;
            self.activity
                .retain(|(session, clock)| sessions.get(session).is_some_and(|(_, a)| a == clock));
        }
    }

    /// Sparse scores for the items likely next after `prefix` (oldest first).
    pub fn scores(&self, prefix: &[ItemIndex]) -> HashMap<ItemIndex, f32> {
        let mut scores: HashMap<ItemIndex, f32> = HashMap::new();
        for (age, &item) in prefix.iter().rev().take(self.params.window).enumerate() {
            let recency = 1.0 / (age + 1) as f32;
            if let Some(neighbours) = self.neighbours.get(&item) {
                for (&neighbour, &weight) in neighbours {
                    let count = self.counts.get(&neighbour).copied().unwrap_or(1) as f32;
                    *scores.entry(neighbour).or_default() +=
                        recency * weight / count.powf(self.params.popularity_exponent);
                }
            }
        }
        let best = scores.values().copied().fold(0.0f32, f32::max).max(1e-6);
        for (age, &item) in prefix.iter().rev().enumerate() {
            *scores.entry(item).or_default() += self.params.repeat * best / (age + 1) as f32;
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_seen_together_score_for_each_other() {
        let mut model = SessionModel::new(Params::default());
        for session in 0..20 {
            model.observe(session, 1);
            model.observe(session, 2);
            model.observe(session, 3 + (session as ItemIndex % 2));
        }
        let scores = model.scores(&[1]);
        assert!(scores[&2] > scores.get(&3).copied().unwrap_or(0.0));
        assert!(!scores.contains_key(&99));
    }
}
