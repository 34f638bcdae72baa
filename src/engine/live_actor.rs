//! `SessionActor` and `UserActor`: one actor per active session or user, holding
//! its [`LiveState`]. Both are `LiveActor<K>`; the kind `K` decides where the state
//! is stored, how fast it forgets, and what a user does beyond a session (absorb
//! an anonymous session, list its sessions). The `ShardHost` of the owning shard
//! starts, feeds, passivates and wipes them; nothing else touches their state.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix::{Actor, ActorContext, Context, Handler, Message, Recipient};
use tokio::sync::{mpsc, oneshot};

use super::signal_board::SignalBoard;
use crate::domain::event::{Event, SequencedEvent};
use crate::domain::live_state::{DecayParams, LiveState};
use crate::domain::live_state_id::StateKind;
use crate::domain::signals::Signals;
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::ShardId;

/// Held by every message an applied batch causes (its users, its sessions here or
/// on other shards, a stitched session's hand-off to its user). When the last
/// holder drops it, the batch's effects are all in place (or some failed) and its
/// waiter is woken.
pub type Completion = Arc<BatchToken>;

/// The token behind a [`Completion`].
pub struct BatchToken {
    /// Dropped with the last holder, which wakes the waiter.
    _dropped: oneshot::Sender<()>,
    /// Set when some effect of the batch could not be put in place.
    failed: Arc<AtomicBool>,
}

impl BatchToken {
    /// Marks the batch as not wholly applied: its waiter then reports an error.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
    }
}

/// A completion token and the future that resolves once every clone is dropped:
/// `true` when every effect was put in place.
pub fn completion() -> (Completion, impl std::future::Future<Output = bool>) {
    let (token, dropped) = oneshot::channel();
    let failed = Arc::new(AtomicBool::new(false));
    let token = Arc::new(BatchToken {
        _dropped: token,
        failed: failed.clone(),
    });
    (token, async move {
        let _ = dropped.await;
        !failed.load(Ordering::SeqCst)
    })
}

/// What distinguishes sessions from users.
pub trait LiveKind: Unpin + Send + 'static {
    /// `"session"` or `"user"`, for logs and errors.
    const NAME: &'static str;
    /// Which board its signals are published on.
    const KIND: StateKind;
    /// Where the state is persisted.
    fn state_key(shard: ShardId, key: &str) -> Vec<u8>;
    /// Kind-specific bookkeeping after an event is applied.
    fn after_apply(_state: &mut LiveState, _event: &Event) {}
    /// Sessions only: whether this event is the one that brings an anonymous
    /// session its user (checked before the event is applied).
    fn stitches_to<'a>(_state: &LiveState, _event: &'a Event) -> Option<&'a str> {
        None
    }
}

/// Marker of session actors.
pub struct Session;
/// Marker of user actors.
pub struct User;

impl LiveKind for Session {
    const NAME: &'static str = "session";
    const KIND: StateKind = StateKind::Session;
    fn state_key(shard: ShardId, sid: &str) -> Vec<u8> {
        layout::session_state(shard, sid)
    }
    fn after_apply(state: &mut LiveState, event: &Event) {
        if state.uid.is_none() {
            state.uid = event.uid.clone();
        }
    }
    fn stitches_to<'a>(state: &LiveState, event: &'a Event) -> Option<&'a str> {
        let anonymous = state.uid.is_none() && state.event_count > 0;
        event.uid.as_deref().filter(|_| anonymous)
    }
}

impl LiveKind for User {
    const NAME: &'static str = "user";
    const KIND: StateKind = StateKind::User;
    fn state_key(shard: ShardId, uid: &str) -> Vec<u8> {
        layout::user_state(shard, uid)
    }
    fn after_apply(state: &mut LiveState, event: &Event) {
        if let Some(sid) = &event.sid {
            state.add_session(sid);
        }
    }
}

pub type SessionActor = LiveActor<Session>;
pub type UserActor = LiveActor<User>;

/// Reads a persisted state.
pub fn load_state<K: LiveKind>(
    storage: &Storage,
    shard: ShardId,
    key: &str,
) -> Result<Option<LiveState>, StorageError> {
    let state_key = K::state_key(shard, key);
    let Some(bytes) = storage.get(Cf::State, &state_key)? else {
        return Ok(None);
    };
    postcard::from_bytes(&bytes)
        .map(Some)
        .map_err(|error| StorageError::Corrupt {
            key: format!("{} {key}", K::NAME),
            reason: error.to_string(),
        })
}

/// The actor of one session or user.
pub struct LiveActor<K: LiveKind> {
    key: String,
    shard: ShardId,
    state: LiveState,
    /// Applied events not yet persisted.
    dirty: bool,
    storage: Storage,
    params: DecayParams,
    mailbox: usize,
    /// Where an anonymous session sends its signals when it learns its user.
    host: Recipient<Stitched>,
    /// Where its ranking signals are published.
    board: Arc<SignalBoard>,
    kind: PhantomData<K>,
}

/// An anonymous session learned its user: the user should absorb `state`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stitched {
    pub uid: String,
    pub sid: String,
    pub state: Box<LiveState>,
    /// The completion of the batch that stitched, released once the user absorbed.
    pub done: Completion,
}

/// Where a live actor reports beyond its replies: its host, and the board it
/// publishes its ranking signals on.
pub struct Outlets {
    pub host: Recipient<Stitched>,
    pub board: Arc<SignalBoard>,
}

impl<K: LiveKind> LiveActor<K> {
    pub fn new(
        key: String,
        shard: ShardId,
        state: LiveState,
        storage: Storage,
        params: DecayParams,
        mailbox: usize,
        Outlets { host, board }: Outlets,
    ) -> Self {
        LiveActor {
            key,
            shard,
            state,
            dirty: false,
            storage,
            params,
            mailbox,
            host,
            board,
            kind: PhantomData,
        }
    }

    /// Replaces the signals the ranking path reads.
    fn publish(&self) {
        let signals = Signals::of(&self.state, self.params.half_life_ms);
        self.board.publish(K::KIND, &self.key, signals);
    }

    /// Takes the signals off the board: from now on readers ask the host.
    fn withdraw(&self) {
        self.board.withdraw(K::KIND, &self.key);
    }

    /// Writes the state if it changed (compact binary, without the WAL: the
    /// checkpoint flushes it before it moves the replay point past its events). On a
    /// failure the state stays dirty: the checkpoint that asked fails, so the replay
    /// point stays before its events, and the next one retries.
    fn persist(&mut self) -> Result<(), StorageError> {
        if !self.dirty {
            return Ok(());
        }
        let value = postcard::to_allocvec(&self.state).expect("live state serializes");
        self.storage
            .put_unlogged(Cf::State, &K::state_key(self.shard, &self.key), &value)
            .inspect_err(
                |error| tracing::error!(kind = K::NAME, key = %self.key, %error, "failed to persist live state"),
            )?;
        self.dirty = false;
        Ok(())
    }
}

impl<K: LiveKind> Actor for LiveActor<K> {
    type Context = Context<Self>;

    fn started(&mut self, context: &mut Self::Context) {
        context.set_mailbox_capacity(self.mailbox);
        self.publish();
    }
}

/// Everything a `ShardHost` asks of a live actor. Replies travel on oneshot
/// channels so that the host can hold these messages back while a key passivates.
pub enum KeyMessage {
    /// Apply events (skipping those applied before, as after a crash replay).
    Apply(Vec<Arc<SequencedEvent>>, Completion),
    /// Take in an anonymous session's signals (users only), once per session.
    Absorb {
        sid: String,
        state: Box<LiveState>,
        done: Completion,
    },
    /// A reader's view of the state, computed by the actor (a copy, or the few
    /// signals ranking needs) and sent by the closure on the reader's channel.
    Read(Box<dyn FnOnce(&LiveState) + Send>),
    /// Persist if changed.
    Persist(Persisted),
    /// Persist and stop; on a failure, answer it and stay live (nothing is lost).
    Passivate(Persisted),
    /// Delete the persisted state and stop; answers with the final state. On a
    /// failure, answer it and stay live.
    Wipe(oneshot::Sender<Result<LiveState, StorageError>>),
}

impl Message for KeyMessage {
    type Result = ();
}

/// Where a live actor answers that it persisted. One channel gathers the answers of
/// every actor asked at once (a checkpoint, or a shard handed off, asks 100k of them:
/// a oneshot each, joined, cost more than the persisting), each tagged with the
/// actor's place in the request. An actor that stopped before it got the message
/// drops it, and with it its sender: the channel ends once every actor answered.
pub struct Persisted {
    pub index: usize,
    pub to: mpsc::UnboundedSender<(usize, Result<(), StorageError>)>,
}

impl Persisted {
    fn send(self, persisted: Result<(), StorageError>) {
        let _ = self.to.send((self.index, persisted));
    }
}

impl<K: LiveKind> Handler<KeyMessage> for LiveActor<K> {
    type Result = ();

    fn handle(&mut self, message: KeyMessage, context: &mut Context<Self>) -> Self::Result {
        match message {
            KeyMessage::Apply(events, done) => {
                let mut changed = false;
                for sequenced in events {
                    if self.state.has_applied(sequenced.source, sequenced.seq) {
                        continue;
                    }
                    if let Some(uid) = K::stitches_to(&self.state, &sequenced.event) {
                        let state = Box::new(self.state.clone());
                        let stitched = Stitched {
                            uid: uid.to_owned(),
                            sid: self.key.clone(),
                            state,
                            done: done.clone(),
                        };
                        self.host.do_send(stitched);
                    }
                    self.state.apply(
                        sequenced.source,
                        sequenced.seq,
                        &sequenced.event,
                        &sequenced.attributes,
                        self.params,
                    );
                    K::after_apply(&mut self.state, &sequenced.event);
                    self.dirty = true;
                    changed = true;
                }
                if changed {
                    self.publish();
                }
                // Released only now: the batch's 202 waits for these signals.
                drop(done);
            }
            KeyMessage::Absorb { sid, state, done } => {
                if !self.state.absorbed.contains(&sid) {
                    self.state.absorb(&state, self.params);
                    self.state.absorbed.push(sid);
                    self.dirty = true;
                    self.publish();
                }
                drop(done);
            }
            KeyMessage::Read(read) => read(&self.state),
            KeyMessage::Persist(reply) => reply.send(self.persist()),
            KeyMessage::Passivate(reply) => {
                let persisted = self.persist();
                if persisted.is_ok() {
                    self.withdraw();
                    context.stop();
                }
                reply.send(persisted);
            }
            KeyMessage::Wipe(reply) => {
                if let Err(error) = self.storage.delete(Cf::State, &K::state_key(self.shard, &self.key)) {
                    tracing::error!(kind = K::NAME, key = %self.key, %error, "failed to wipe live state");
                    let _ = reply.send(Err(error));
                    return;
                }
                self.dirty = false;
                self.withdraw();
                context.stop();
                let _ = reply.send(Ok(std::mem::take(&mut self.state)));
            }
        }
    }
}
