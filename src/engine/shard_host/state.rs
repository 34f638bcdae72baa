//! The public state API of a shard host: a key's live state as a reader wants it
//! (its live entry, else read from storage without making it live), and wipes.

use actix::{Context, Handler};

use super::super::live_entry::{load_state, Session, User};
use super::super::LiveStateError;
use super::live::Hosted;
use super::messages::{Projection, ReadState, Wipe};
use super::ShardHost;
use crate::domain::live_state::LiveState;
use crate::domain::live_state_id::LiveStateId;
use crate::storage::StorageError;

impl ShardHost {
    /// A state read: a live key's entry, else the persisted state (rebuilt from the
    /// log when unreadable), without making it live. `project` turns the state into
    /// what the reader wants. `None` when the key has no state.
    fn read_state<K: Hosted, R>(
        &mut self,
        key: String,
        project: Projection<R>,
    ) -> Result<Option<(R, bool)>, LiveStateError> {
        let now = self.clock.now_millis();
        if let Some(entry) = K::registry(self).live.get_mut(&key) {
            entry.last_used = now;
            return Ok(Some((project(&entry.state), true)));
        }
        let stored = match load_state::<K>(&self.storage, self.shard, &key) {
            Err(error @ StorageError::Corrupt { .. }) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "live state unreadable; reading it rebuilt from the event log");
                self.rebuild_from_log::<K>(&key)
                    .map(|state| (state != LiveState::default()).then_some(state))
            }
            other => other,
        };
        stored
            .map(|state| state.map(|state| (project(&state), false)))
            .map_err(LiveStateError::from)
    }
}

impl<R: Send + 'static> Handler<ReadState<R>> for ShardHost {
    type Result = Result<Option<(R, bool)>, LiveStateError>;

    fn handle(&mut self, ReadState(key, project): ReadState<R>, _: &mut Context<Self>) -> Self::Result {
        match key {
            LiveStateId::Session(sid) => self.read_state::<Session, R>(sid, project),
            LiveStateId::User(uid) => self.read_state::<User, R>(uid, project),
        }
    }
}

impl Handler<Wipe> for ShardHost {
    type Result = Result<LiveState, LiveStateError>;

    fn handle(&mut self, Wipe(key): Wipe, _: &mut Context<Self>) -> Self::Result {
        let wiped = match key {
            LiveStateId::Session(sid) => {
                // Its index entries go with it: a later event of the sid writes them again.
                self.indexed_sessions.pop(sid.as_str());
                self.wipe::<Session>(&sid)
            }
            LiveStateId::User(uid) => self.wipe::<User>(&uid),
        };
        Ok(wiped?)
    }
}
