//! The public state API of a shard host: a key's live state as a reader wants it
//! (answered by its live actor, else read from storage without starting one), and
//! wipes.

use std::future::ready;

use actix::{Context, Handler, ResponseFuture};
use tokio::sync::oneshot;

use super::super::live_actor::{load_state, KeyMessage, Session, User};
use super::super::LiveStateError;
use super::live::Hosted;
use super::messages::{Projection, ReadState, Wipe};
use super::ShardHost;
use crate::domain::live_state::LiveState;
use crate::domain::live_state_id::LiveStateId;
use crate::storage::StorageError;

impl ShardHost {
    /// A state read: live actors answer themselves; otherwise the persisted state
    /// (rebuilt from the log when unreadable), without starting an actor. `project`
    /// turns the state into what the reader wants. `None` when the key has no state.
    fn read_state<K: Hosted, R: Send + 'static>(
        &mut self,
        context: &mut Context<Self>,
        key: String,
        project: Projection<R>,
    ) -> ResponseFuture<Result<Option<(R, bool)>, LiveStateError>> {
        let registry = K::registry(self);
        if registry.live.contains(&key) || registry.stopping.contains_key(&key) {
            let (reply, answer) = oneshot::channel();
            let read = Box::new(move |state: &LiveState| {
                let _ = reply.send(project(state));
            });
            self.deliver::<K>(context, key, KeyMessage::Read(read));
            return Box::pin(async move {
                answer
                    .await
                    .map(|view| Some((view, true)))
                    .map_err(|_| LiveStateError::Unavailable("live actor stopped".into()))
            });
        }
        let stored = match load_state::<K>(&self.storage, self.shard, &key) {
            Err(error @ StorageError::Corrupt { .. }) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "live state unreadable; reading it rebuilt from the event log");
                self.rebuild_from_log::<K>(&key)
                    .map(|state| (state != LiveState::default()).then_some(state))
            }
            other => other,
        };
        let read = stored
            .map(|state| state.map(|state| (project(&state), false)))
            .map_err(LiveStateError::from);
        Box::pin(ready(read))
    }
}

impl<R: Send + 'static> Handler<ReadState<R>> for ShardHost {
    type Result = ResponseFuture<Result<Option<(R, bool)>, LiveStateError>>;

    fn handle(&mut self, ReadState(key, project): ReadState<R>, context: &mut Context<Self>) -> Self::Result {
        match key {
            LiveStateId::Session(sid) => self.read_state::<Session, R>(context, sid, project),
            LiveStateId::User(uid) => self.read_state::<User, R>(context, uid, project),
        }
    }
}

impl Handler<Wipe> for ShardHost {
    type Result = ResponseFuture<Result<LiveState, LiveStateError>>;

    fn handle(&mut self, Wipe(key): Wipe, context: &mut Context<Self>) -> Self::Result {
        let (reply, wiped) = oneshot::channel();
        match key {
            LiveStateId::Session(sid) => {
                // Its index entries go with it: a later event of the sid writes them again.
                self.indexed_sessions.pop(sid.as_str());
                self.deliver::<Session>(context, sid, KeyMessage::Wipe(reply))
            }
            LiveStateId::User(uid) => self.deliver::<User>(context, uid, KeyMessage::Wipe(reply)),
        }
        Box::pin(async move {
            wiped
                .await
                .map_err(|_| LiveStateError::Unavailable("live actor stopped".into()))?
                .map_err(LiveStateError::from)
        })
    }
}
