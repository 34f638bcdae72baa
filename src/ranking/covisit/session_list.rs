//! An item's most recent sessions (the kNN part's inverted index), in the order they
//! were added (oldest first, but a stored session that comes back again), as
//! the low 32 bits of their ordinals: 4 bytes an entry where a full ordinal takes 8.
//! A full list (`knn_sessions_per_item` = 1,000) takes ~4 KB.
//!
//! An ordinal is told from its low bits and the model's next ordinal: it is the
//! latest ordinal below that one with those low bits. That holds while every entry
//! is less than 2^32 sessions old, which [`SessionList::drop_before`] keeps: the
//! model drops entries older than its stored sessions once every 2^31 sessions
//! ([`SWEEP_EVERY`]), and stores far fewer than 2^31.
//!
//! Stored as the sequence of ordinals the full-width list was (the low bits of each,
//! widened), so models stored before still read.

use std::collections::VecDeque;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ranking::footprint;

/// The model drops entries of sessions it no longer stores from every list each time
/// this many sessions have left the store.
pub(super) const SWEEP_EVERY: u64 = 1 << 31;

#[derive(Debug, Default, PartialEq)]
pub(super) struct SessionList(VecDeque<u32>);

/// A copy keeps the capacity: the learner copies a list a snapshot shares, then pushes
/// to it, and a full list copied to its length would double at that push.
impl Clone for SessionList {
    fn clone(&self) -> Self {
        let mut low = VecDeque::with_capacity(self.0.capacity());
        low.extend(self.0.iter().copied());
        SessionList(low)
    }
}

impl SessionList {
    /// Appends `sid` (a stored session: at most 2^32 − 1 back); keeps the last `keep` added.
    pub fn push(&mut self, sid: u64, keep: usize) {
        self.0.push_back(sid as u32);
        while self.0.len() > keep {
            self.0.pop_front();
        }
    }

    /// The ordinals listed, in list order, given the model's next ordinal `next`.
    #[cfg(test)]
    pub fn iter(&self, next: u64) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(move |&low| ordinal(low, next))
    }

    /// How far back each listed session is from the model's next ordinal `next`
    /// (1: the latest session), in list order: what an ordinal is `next` less.
    pub fn backs(&self, next: u64) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(move |&low| back(low, next))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Drops the ordinals below `first` (the oldest stored session), `next` being the
    /// model's next ordinal. Not only from the front: a stored session that comes back
    /// lists its (older) ordinal after newer ones.
    pub fn drop_before(&mut self, first: u64, next: u64) {
        self.0.retain(|&low| ordinal(low, next) >= first);
    }

    pub fn heap_bytes(&self) -> usize {
        footprint::deque(&self.0)
    }
}

/// How far back from `next` the latest ordinal below it with low bits `low` is,
/// modulo 2^32 (0 stands for 2^32).
fn back(low: u32, next: u64) -> u32 {
    (next as u32).wrapping_sub(low)
}

/// The latest ordinal below `next` whose low 32 bits are `low`.
fn ordinal(low: u32, next: u64) -> u64 {
    match back(low, next) {
        0 => next.saturating_sub(1 << 32),
        back => next.saturating_sub(back as u64),
    }
}

impl Serialize for SessionList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|&low| low as u64))
    }
}

impl<'de> Deserialize<'de> for SessionList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ordinals = Vec::<u64>::deserialize(deserializer)?;
        Ok(SessionList(ordinals.into_iter().map(|sid| sid as u32).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_are_told_from_their_low_bits_across_a_wrap() {
        let mut list = SessionList::default();
        let start = (1u64 << 32) - 2;
        for sid in start..start + 4 {
            list.push(sid, 3);
        }
        let next = start + 4;
        assert_eq!(list.iter(next).collect::<Vec<_>>(), [start + 1, start + 2, start + 3]);
        // Much later, the same low bits still name the same sessions.
        let later = next + (1 << 31);
        assert_eq!(list.iter(later).collect::<Vec<_>>(), [start + 1, start + 2, start + 3]);
        list.drop_before(start + 3, later);
        assert_eq!(list.iter(later).collect::<Vec<_>>(), [start + 3]);
    }

    #[test]
    fn reads_the_full_ordinals_stored_before() {
        let stored = serde_json::json!([5_000_000_000u64, 5_000_000_007u64]);
        let list: SessionList = serde_json::from_value(stored).unwrap();
        assert_eq!(
            list.iter(5_000_000_010).collect::<Vec<_>>(),
            [5_000_000_000, 5_000_000_007]
        );
        let binary = postcard::to_allocvec(&list).unwrap();
        assert_eq!(postcard::from_bytes::<SessionList>(&binary).unwrap(), list);
    }
}
