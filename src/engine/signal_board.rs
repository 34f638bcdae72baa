//! The board of the signals live keys publish for the ranking path: their recent items and
//! affinities, replaced by the key's shard host after every change, read by requests
//! without a message (DESIGN.md §1: reads do not queue behind writes).
//!
//! Only the key's shard host writes its entry: it publishes when the key is loaded
//! and before it releases an applied batch (so a 202 for an event is never ahead of
//! its signals), and removes the entry when the key passivates or is wiped, before it
//! answers. A key without an entry is not live; readers then ask its shard host, which
//! reads the persisted state.

use std::sync::Arc;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;

use crate::domain::live_state_id::{LiveStateId, StateKind};
use crate::domain::signals::Signals;

/// Every live key's published signals, by kind and key.
#[derive(Default)]
pub struct SignalBoard {
    sessions: DashMap<String, Arc<Signals>, FxBuildHasher>,
    users: DashMap<String, Arc<Signals>, FxBuildHasher>,
}

impl SignalBoard {
    /// The signals of a live key; `None` when the key is not live.
    pub fn get(&self, key: &LiveStateId) -> Option<Arc<Signals>> {
        self.map(key.kind()).get(key.id()).map(|entry| entry.value().clone())
    }

    /// Called by the key's shard host only.
    pub(super) fn publish(&self, kind: StateKind, key: &str, signals: Signals) {
        let signals = Arc::new(signals);
        let map = self.map(kind);
        match map.get_mut(key) {
            Some(mut published) => *published = signals,
            None => {
                map.insert(key.to_owned(), signals);
            }
        }
    }

    /// Called by the key's shard host only, as the key passivates or is wiped.
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
    fn the_board_keeps_sessions_and_users_apart() {
        let board = SignalBoard::default();
        let session = LiveStateId::Session("k".into());
        let user = LiveStateId::User("k".into());
        board.publish(StateKind::Session, "k", Signals::default());
        assert!(board.get(&session).is_some());
        assert!(board.get(&user).is_none());
        board.withdraw(StateKind::Session, "k");
        assert!(board.get(&session).is_none());
    }
}
