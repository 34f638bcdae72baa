//! The signals a live actor publishes for the ranking path: its recent items and
//! affinities, replaced by the actor after every change, read by requests without
//! a message (DESIGN.md §1: reads do not queue behind writes).
//!
//! Only the owning actor writes its entry: it publishes when it starts and before it
//! releases an applied batch (so a 202 for an event is never ahead of its signals),
//! and removes the entry when it passivates or is wiped, before it answers. A key
//! without an entry has no live actor; readers then ask its shard host, which reads
//! the persisted state.

use std::sync::Arc;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;

use super::attribute_keys::{intern, AttributeId};
use super::live_state::{Decayed, LiveState, AFFINITY_FLOOR};
use super::shard_host::{StateKey, StateKind};

/// The live signals of a session or user, as ranking reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Items interacted with, oldest first.
    pub recent: Vec<String>,
    /// Affinities to item attributes as last updated; read them decayed to the
    /// ranking time with [`Signals::affinities_at`].
    pub affinities: Vec<Affinity>,
    /// How fast the affinities halve.
    pub half_life_ms: f64,
}

/// An affinity to one item attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Affinity {
    /// `group:…`, `tag:…`, `price_band:…`, …
    pub key: String,
    /// The key, interned.
    pub id: AttributeId,
    pub decayed: Decayed,
}

impl Affinity {
    fn new(key: &str, decayed: Decayed) -> Affinity {
        Affinity {
            key: key.to_owned(),
            id: intern(key),
            decayed,
        }
    }
}

impl Signals {
    /// The signals of a live state.
    pub fn of(live: &LiveState, half_life_ms: f64) -> Signals {
        Signals {
            recent: live.recent.iter().rev().map(|i| i.item_id.clone()).collect(),
            affinities: live
                .affinities
                .iter()
                .map(|(key, decayed)| Affinity::new(key, *decayed))
                .collect(),
            half_life_ms,
        }
    }

    /// The affinities and their values as of `now`, without the negligible ones.
    pub fn affinities_at(&self, now: i64) -> impl Iterator<Item = (&Affinity, f64)> {
        self.affinities
            .iter()
            .map(move |affinity| (affinity, affinity.decayed.at_time(now, self.half_life_ms)))
            .filter(|(_, value)| *value > AFFINITY_FLOOR)
    }

    /// Adds `weight` to an affinity as of `at` (request-embedded events).
    pub fn add_affinity(&mut self, key: &str, weight: f64, at: i64) {
        let half_life_ms = self.half_life_ms;
        match self.affinities.iter_mut().find(|affinity| affinity.key == key) {
            Some(affinity) => affinity.decayed.add(weight, at, half_life_ms),
            None => self.affinities.push(Affinity::new(key, Decayed { value: weight, at })),
        }
    }
}

/// Every live actor's published signals, by kind and key.
#[derive(Default)]
pub struct SignalBoard {
    sessions: DashMap<String, Arc<Signals>, FxBuildHasher>,
    users: DashMap<String, Arc<Signals>, FxBuildHasher>,
}

impl SignalBoard {
    /// The signals of a live actor; `None` when the key has no live actor.
    pub fn get(&self, key: &StateKey) -> Option<Arc<Signals>> {
        self.map(key.kind()).get(key.key()).map(|entry| entry.value().clone())
    }

    /// Called by the key's actor only.
    pub(super) fn publish(&self, kind: StateKind, key: &str, signals: Signals) {
        self.map(kind).insert(key.to_owned(), Arc::new(signals));
    }

    /// Called by the key's actor only, as it stops.
    pub(super) fn withdraw(&self, kind: StateKind, key: &str) {
        self.map(kind).remove(key);
    }

    fn map(&self, kind: StateKind) -> &DashMap<String, Arc<Signals>, FxBuildHasher> {
        match kind {
            StateKind::Session => &self.sessions,
            StateKind::User => &self.users,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinities_decay_to_the_reading_time_and_fade_out() {
        let signals = Signals {
            recent: vec!["a".into()],
            affinities: vec![
                Affinity::new("group:x", Decayed { value: 4.0, at: 0 }),
                Affinity::new("tag:y", Decayed { value: 1e-4, at: 0 }),
            ],
            half_life_ms: 1000.0,
        };
        let at_one_half_life: Vec<_> = signals.affinities_at(1000).map(|(a, v)| (a.key.as_str(), v)).collect();
        assert_eq!(at_one_half_life, [("group:x", 2.0)]);
        assert_eq!(signals.affinities[0].id, intern("group:x"));
    }

    #[test]
    fn added_affinities_decay_what_was_there() {
        let mut signals = Signals {
            half_life_ms: 1000.0,
            ..Signals::default()
        };
        signals.add_affinity("group:x", 2.0, 0);
        signals.add_affinity("group:x", 1.0, 1000);
        signals.add_affinity("tag:y", 1.0, 1000);
        let now: Vec<_> = signals.affinities_at(1000).map(|(a, v)| (a.key.as_str(), v)).collect();
        assert_eq!(now, [("group:x", 2.0), ("tag:y", 1.0)]);
    }

    #[test]
    fn the_board_keeps_sessions_and_users_apart() {
        let board = SignalBoard::default();
        let session = StateKey::Session("k".into());
        let user = StateKey::User("k".into());
        board.publish(StateKind::Session, "k", Signals::default());
        assert!(board.get(&session).is_some());
        assert!(board.get(&user).is_none());
        board.withdraw(StateKind::Session, "k");
        assert!(board.get(&session).is_none());
    }
}
