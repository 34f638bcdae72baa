//! A live session or user: its [`LiveState`] as the `ShardHost` of its shard holds
//! it, one entry per active key. The kind `K` decides where the state is stored,
//! how fast it forgets, and what a user does beyond a session (absorb an anonymous
//! session, list its sessions). The host loads, feeds, passivates and wipes the
//! entries; nothing else touches their state. (An actix actor per key cost ~1.35 KB
//! of task, context and mailbox on top of the state, more than the whole 1 KB a live
//! user may take, and a message hop per key on every applied batch; the host is an
//! actor already and owns the shard's keys, so it applies their events in place.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::signal_board::SignalBoard;
use crate::domain::event::{Event, SequencedEvent};
use crate::domain::live_state::{DecayParams, LiveState};
use crate::domain::live_state_id::StateKind;
use crate::domain::signals::Signals;
use crate::storage::{layout, Batch, Cf, Storage, StorageError};
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

/// Marker of sessions.
pub struct Session;
/// Marker of users.
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

/// A live key's state, held by its shard host.
pub struct LiveEntry {
    pub state: LiveState,
    /// Applied events not yet persisted.
    dirty: bool,
    /// When the key was last used, for the idle TTL.
    pub last_used: i64,
}

/// An anonymous session learned its user: the user should absorb `state`.
pub struct Stitched {
    pub uid: String,
    pub sid: String,
    pub state: Box<LiveState>,
    /// The completion of the batch that stitched, released once the user absorbed.
    pub done: Completion,
}

impl LiveEntry {
    pub fn new(state: LiveState, now: i64) -> Self {
        LiveEntry {
            state,
            dirty: false,
            last_used: now,
        }
    }

    /// Applies events (skipping those applied before, as after a crash replay).
    /// Answers whether any was applied, and the hand-overs to users they cause: an
    /// anonymous session's state once an event brings its user (taken before that
    /// event is applied).
    pub fn apply<K: LiveKind>(
        &mut self,
        key: &str,
        events: &[Arc<SequencedEvent>],
        params: DecayParams,
        done: &Completion,
    ) -> (bool, Vec<Stitched>) {
        let mut changed = false;
        let mut stitched = Vec::new();
        for sequenced in events {
            if self.state.has_applied(sequenced.source, sequenced.seq) {
                continue;
            }
            if let Some(uid) = K::stitches_to(&self.state, &sequenced.event) {
                stitched.push(Stitched {
                    uid: uid.to_owned(),
                    sid: key.to_owned(),
                    state: Box::new(self.state.clone()),
                    done: done.clone(),
                });
            }
            self.state.apply(
                sequenced.source,
                sequenced.seq,
                &sequenced.event,
                &sequenced.attributes,
                params,
            );
            K::after_apply(&mut self.state, &sequenced.event);
            self.dirty = true;
            changed = true;
        }
        (changed, stitched)
    }

    /// Takes in an anonymous session's signals, once per session; `true` when it did.
    pub fn absorb(&mut self, sid: String, state: &LiveState, params: DecayParams) -> bool {
        if self.state.absorbed.contains(&sid) {
            return false;
        }
        self.state.absorb(state, params);
        self.state.absorbed.push(sid);
        self.dirty = true;
        true
    }

    /// Replaces the signals the ranking path reads.
    pub fn publish<K: LiveKind>(&self, board: &SignalBoard, key: &str, params: DecayParams) {
        board.publish(K::KIND, key, Signals::of(&self.state, params.half_life_ms));
    }

    /// Writes the state if it changed (compact binary, without the WAL: the
    /// checkpoint flushes it before it moves the replay point past its events). On a
    /// failure the state stays dirty: the checkpoint that asked fails, so the replay
    /// point stays before its events, and the next one retries.
    pub fn persist<K: LiveKind>(&mut self, storage: &Storage, shard: ShardId, key: &str) -> Result<(), StorageError> {
        if !self.dirty {
            return Ok(());
        }
        let mut batch = storage.batch();
        self.persist_into::<K>(&mut batch, &mut Vec::new(), shard, key);
        batch
            .commit_unlogged()
            .inspect_err(|error| tracing::error!(kind = K::NAME, %key, %error, "failed to persist live state"))?;
        self.dirty = false;
        Ok(())
    }

    /// Whether the state changed since it was last persisted.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Adds the state to `batch`, encoded through `buffer`; [`LiveEntry::persisted`]
    /// once the batch is written.
    pub fn persist_into<K: LiveKind>(&self, batch: &mut Batch<'_>, buffer: &mut Vec<u8>, shard: ShardId, key: &str) {
        buffer.clear();
        let encoded = postcard::to_extend(&self.state, std::mem::take(buffer)).expect("live state serializes");
        batch.put(Cf::State, &K::state_key(shard, key), &encoded);
        *buffer = encoded;
    }

    /// The state as it is now is stored.
    pub fn persisted(&mut self) {
        self.dirty = false;
    }
}
