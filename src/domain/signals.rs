//! The signals of a session or user as ranking reads them: its recent items and
//! its affinities to item attributes, decayed to its own newest event: event time,
//! not the wall clock, so a backfilled history reads as the live one did, and a
//! person back after months is still the person they were. Each shard host publishes
//! them for its live keys (`engine::SignalBoard`); request-embedded events add to a copy.

use compact_str::CompactString;

use super::affinities::Affinities;
pub use super::affinities::Affinity;
use super::attributes::intern;
use super::live_state::{LiveState, AFFINITY_FLOOR};
use super::recent::RecentItems;

/// The live signals of a session or user, as ranking reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// Items interacted with, newest first (the state's own list, shared).
    pub recent: RecentItems,
    /// Affinities to item attributes as last updated (the state's own list,
    /// shared); read them decayed to the newest event with [`Signals::affinities`].
    pub affinities: Affinities,
    /// How fast the affinities halve.
    pub half_life_ms: f64,
    /// The time of the newest event (unix ms, event time; 0 before any).
    pub newest_at: i64,
    /// Items bought (`conversion` events), newest first.
    pub consumed: Vec<CompactString>,
}

impl Signals {
    /// The signals of a live state.
    pub fn of(live: &LiveState, half_life_ms: f64) -> Signals {
        Signals {
            recent: live.recent.clone(),
            affinities: live.affinities.clone(),
            half_life_ms,
            newest_at: live.last_event_at.unwrap_or(0),
            consumed: live.purchased.iter().cloned().collect(),
        }
    }

    /// The affinities and their values as of the newest event, without the
    /// negligible ones.
    pub fn affinities(&self) -> impl Iterator<Item = (&Affinity, f64)> {
        self.affinities
            .iter()
            .map(move |affinity| (affinity, affinity.decayed().at_time(self.newest_at, self.half_life_ms)))
            .filter(|(_, value)| *value > AFFINITY_FLOOR)
    }

    /// Adds `weight` to an affinity as of `at` (request-embedded events).
    pub fn add_affinity(&mut self, attribute: &str, weight: f64, at: i64) {
        self.newest_at = self.newest_at.max(at);
        self.affinities.add(intern(attribute), weight, at, self.half_life_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::live_state::Decayed;

    /// The affinities as of the newest event, by name.
    fn by_name(signals: &Signals) -> Vec<(&'static str, f64)> {
        let mut named: Vec<_> = signals.affinities().map(|(a, v)| (a.attribute(), v)).collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        named
    }

    #[test]
    fn affinities_decay_to_the_newest_event_and_fade_out() {
        let signals = Signals {
            recent: RecentItems::default(),
            affinities: [
                Affinity::new("group:x", Decayed { value: 4.0, at: 0 }),
                Affinity::new("tag:y", Decayed { value: 1e-4, at: 0 }),
                Affinity::new("tag:z", Decayed { value: 1.0, at: 1000 }),
            ]
            .into_iter()
            .collect(),
            half_life_ms: 1000.0,
            newest_at: 1000,
            consumed: Vec::new(),
        };
        assert_eq!(by_name(&signals), [("group:x", 2.0), ("tag:z", 1.0)]);
        assert!(signals
            .affinities()
            .any(|(affinity, _)| affinity.id == intern("group:x")));
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
        assert_eq!(signals.newest_at, 1000);
        assert_eq!(by_name(&signals), [("group:x", 2.0), ("tag:y", 1.0)]);
    }
}
