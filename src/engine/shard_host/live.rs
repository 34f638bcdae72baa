//! The live keys of a shard: loaded on a key's first event or absorb (from the
//! persisted state, or rebuilt from the event log when that is unreadable),
//! passivated (persisted and dropped) when idle or when the shard holds too many,
//! and wiped on a user's deletion.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use actix::{Context, Handler};
use lru::LruCache;

use super::super::live_entry::{load_state, Completion, LiveEntry, LiveKind, Session, Stitched, User};
use super::messages::{AbsorbSession, AdoptSession, PassivateKeys};
use super::{decode_logged, ShardHost};
use crate::domain::event::SequencedEvent;
use crate::domain::live_state::{DecayParams, LiveState};
use crate::engine::signal_board::SignalBoard;
use crate::storage::{layout, Cf, StorageError};
use crate::topology::ShardId;

/// About how many bytes of states a checkpoint writes in one batch: large enough that
/// a write's fixed cost is spread over hundreds of states, small enough that the
/// batch's copy is no memory peak. (Unit tests take a few states a batch, to cross
/// batches with a few hundred keys.)
#[cfg(not(test))]
const PERSIST_BATCH_BYTES: usize = 1 << 20;
#[cfg(test)]
const PERSIST_BATCH_BYTES: usize = 1 << 10;

/// The live keys of one kind on this shard.
pub(super) struct Registry<K: LiveKind> {
    /// Least recently used first out.
    pub live: LruCache<String, LiveEntry>,
    kind: PhantomData<K>,
}

impl<K: LiveKind> Registry<K> {
    pub fn new() -> Self {
        Registry {
            live: LruCache::unbounded(),
            kind: PhantomData,
        }
    }
}

/// Which registry and settings a kind uses.
pub(super) trait Hosted: LiveKind + Sized {
    fn registry(host: &mut ShardHost) -> &mut Registry<Self>;
    /// The registry with the board its entries publish on (borrowed apart).
    fn registry_and_board(host: &mut ShardHost) -> (&mut Registry<Self>, &SignalBoard);
    fn params(config: &super::LiveConfig) -> DecayParams;
    fn idle_ttl_ms(config: &super::LiveConfig) -> i64;
    /// The index of the key's events in the log: its column family and key prefix.
    fn events_index(shard: ShardId, key: &str) -> (Cf, Vec<u8>);
    /// Whether the index names where the key's events start in each shard's log
    /// (sessions) rather than each event (users).
    const INDEXES_STARTS: bool;
}

impl Hosted for Session {
    const INDEXES_STARTS: bool = true;
    fn registry(host: &mut ShardHost) -> &mut Registry<Self> {
        &mut host.sessions
    }
    fn registry_and_board(host: &mut ShardHost) -> (&mut Registry<Self>, &SignalBoard) {
        (&mut host.sessions, &host.board)
    }
    fn params(config: &super::LiveConfig) -> DecayParams {
        config.session
    }
    fn idle_ttl_ms(config: &super::LiveConfig) -> i64 {
        config.session_idle_ttl_ms
    }
    fn events_index(shard: ShardId, sid: &str) -> (Cf, Vec<u8>) {
        (Cf::SessionEvents, layout::session_events_prefix(shard, sid))
    }
}

impl Hosted for User {
    const INDEXES_STARTS: bool = false;
    fn registry(host: &mut ShardHost) -> &mut Registry<Self> {
        &mut host.users
    }
    fn registry_and_board(host: &mut ShardHost) -> (&mut Registry<Self>, &SignalBoard) {
        (&mut host.users, &host.board)
    }
    fn params(config: &super::LiveConfig) -> DecayParams {
        config.user
    }
    fn idle_ttl_ms(config: &super::LiveConfig) -> i64 {
        config.user_idle_ttl_ms
    }
    fn events_index(shard: ShardId, uid: &str) -> (Cf, Vec<u8>) {
        (Cf::UserEvents, layout::user_events_prefix(shard, uid))
    }
}

impl ShardHost {
    /// A key's live entry, loaded (from its persisted state) when it is not live,
    /// marked used now; with the board it publishes on, and whether it was just
    /// loaded (and so has no signals on the board yet).
    fn touch<K: Hosted>(&mut self, key: &str) -> Result<(&mut LiveEntry, &SignalBoard, bool), StorageError> {
        let now = self.clock.now_millis();
        let loaded = !K::registry(self).live.contains(key);
        if loaded {
            let entry = LiveEntry::new(self.load_or_rebuild::<K>(key)?, now);
            // Room first, so that the new key is never the one passivated.
            self.enforce_live_cap(1);
            K::registry(self).live.push(key.to_owned(), entry);
        }
        let (registry, board) = K::registry_and_board(self);
        let entry = registry
            .live
            .get_mut(key)
            .expect("a key made live stays live until passivated");
        entry.last_used = now;
        Ok((entry, board, loaded))
    }

    /// Applies events, in sequence order, to a key's state, and publishes its new
    /// signals; an anonymous session that learned its user is handed to the user.
    pub(super) fn apply<K: Hosted>(&mut self, key: &str, events: &[Arc<SequencedEvent>], done: &Completion) {
        self.worked = true;
        let params = K::params(&self.config);
        let (entry, board, loaded) = match self.touch::<K>(key) {
            Ok(live) => live,
            Err(error) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "live state unreadable; its events are not applied");
                self.not_applied(events, done);
                return;
            }
        };
        let (changed, stitched) = entry.apply::<K>(key, events, params, done);
        if changed || loaded {
            // Before `done` is released: the batch's 202 waits for these signals.
            entry.publish::<K>(board, key, params);
        }
        for stitched in stitched {
            let owner = self.router.shard_of(&stitched.uid);
            if owner == self.shard {
                self.absorb(stitched);
            } else {
                // Not awaited: two hosts stitching into each other would wait on each
                // other. Bounded like the batch it came with (it holds `done`).
                self.router.host(owner).do_send(AbsorbSession(stitched));
            }
        }
    }

    /// A user takes in an anonymous session's signals, once per session.
    pub(super) fn absorb(&mut self, Stitched { uid, sid, state, done }: Stitched) {
        let params = User::params(&self.config);
        match self.touch::<User>(&uid) {
            Ok((entry, board, loaded)) => {
                if entry.absorb(sid, &state, params) || loaded {
                    entry.publish::<User>(board, &uid, params);
                }
            }
            Err(error) => {
                tracing::error!(shard = self.shard, %uid, %sid, %error, "live state unreadable; the session is not absorbed");
                done.fail();
            }
        }
    }

    /// Events whose key's state could not be loaded: their batch reports the
    /// failure, and checkpoints stay below them so that a restart applies them.
    fn not_applied(&mut self, events: &[Arc<SequencedEvent>], done: &Completion) {
        for event in events {
            let lowest = self.unapplied.entry(event.source).or_insert(event.seq);
            *lowest = (*lowest).min(event.seq);
        }
        done.fail();
    }

    /// A key's persisted state (empty when it has none); when that is unreadable
    /// (corrupt), its state rebuilt from the key's events in the log instead.
    fn load_or_rebuild<K: Hosted>(&self, key: &str) -> Result<LiveState, StorageError> {
        match load_state::<K>(&self.storage, self.shard, key) {
            Ok(state) => Ok(state.unwrap_or_default()),
            Err(error @ StorageError::Corrupt { .. }) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "live state unreadable; rebuilding it from the event log");
                let state = self.rebuild_from_log::<K>(key)?;
                let value = postcard::to_allocvec(&state).expect("live state serializes");
                if let Err(error) = self
                    .storage
                    .put_unlogged(Cf::State, &K::state_key(self.shard, key), &value)
                {
                    tracing::warn!(shard = self.shard, kind = K::NAME, %key, %error, "storing the rebuilt live state failed; it is rebuilt again next time");
                }
                Ok(state)
            }
            Err(error) => Err(error),
        }
    }

    /// A key's live state from its events in the log, in the order they were
    /// received. A user's index names each of its events; a session's names where its
    /// events start in each shard's log, which is scanned from there for the sid. What
    /// a user absorbed from anonymous sessions before they were stitched is not in the
    /// user's index and is not rebuilt.
    pub(super) fn rebuild_from_log<K: Hosted>(&self, key: &str) -> Result<LiveState, StorageError> {
        let (cf, prefix) = K::events_index(self.shard, key);
        let mut events = Vec::new();
        let mut starts: BTreeMap<ShardId, u64> = BTreeMap::new();
        for entry in self.storage.scan_prefix(cf, &prefix) {
            let (index_key, _) = entry?;
            let log_key = &index_key[prefix.len()..];
            let (Some(source), Some(seq)) = (layout::event_log_shard(log_key), layout::event_log_seq(log_key)) else {
                continue;
            };
            if K::INDEXES_STARTS {
                let start = starts.entry(source).or_insert(seq);
                *start = (*start).min(seq);
                continue;
            }
            // A deleted user's events are gone from the log; their index entries may linger.
            let Some(bytes) = self.storage.get(Cf::Events, log_key)? else {
                continue;
            };
            events.push((source, seq, decode_logged(source, seq, &bytes)?));
        }
        for (source, start) in starts {
            let log = layout::event_log_prefix(source);
            let from = layout::event_log(source, start);
            for entry in self.storage.scan_from(Cf::Events, &from, &log) {
                let (log_key, bytes) = entry?;
                let Some(seq) = layout::event_log_seq(&log_key) else {
                    continue;
                };
                let event = decode_logged(source, seq, &bytes)?;
                if event.sid.as_deref() == Some(key) {
                    events.push((source, seq, event));
                }
            }
        }
        events.sort_by_key(|(source, seq, event)| (event.ingest_timestamp, *source, *seq));
        let params = K::params(&self.config);
        let mut state = LiveState::default();
        for (source, seq, event) in events {
            let attributes = self.items.affinity_attributes(&event);
            state.apply(source, seq, &event, &attributes, params);
            K::after_apply(&mut state, &event);
        }
        Ok(state)
    }

    /// Deletes a key's persisted state and drops it if live; answers the final state
    /// (empty if there was none). On a failure the key stays as it was.
    pub(super) fn wipe<K: Hosted>(&mut self, key: &str) -> Result<LiveState, StorageError> {
        if !K::registry(self).live.contains(key) {
            return self.wipe_stored::<K>(key);
        }
        self.storage
            .delete(Cf::State, &K::state_key(self.shard, key))
            .inspect_err(
                |error| tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "failed to wipe live state"),
            )?;
        self.board.withdraw(K::KIND, key);
        Ok(K::registry(self)
            .live
            .pop(key)
            .map(|entry| entry.state)
            .unwrap_or_default())
    }

    /// Persists every live key of a kind that changed, in unlogged batches of about
    /// [`PERSIST_BATCH_BYTES`]: one write per batch rather than one per key (a
    /// checkpoint of a busy shard writes thousands). The first failure, if any (the
    /// other batches are still tried; the keys of a failed one stay dirty).
    pub(super) fn persist_live<K: Hosted>(&mut self) -> Result<(), StorageError> {
        let (storage, shard) = (self.storage.clone(), self.shard);
        let mut failed = None;
        let mut buffer = Vec::new();
        let mut dirty = K::registry(self)
            .live
            .iter_mut()
            .filter(|(_, entry)| entry.is_dirty())
            .peekable();
        while dirty.peek().is_some() {
            let mut batch = storage.batch();
            let mut in_batch = Vec::new();
            while batch.size_in_bytes() < PERSIST_BATCH_BYTES {
                let Some((key, entry)) = dirty.next() else { break };
                entry.persist_into::<K>(&mut batch, &mut buffer, shard, key);
                in_batch.push(entry);
            }
            match batch.commit_unlogged() {
                Ok(()) => in_batch.into_iter().for_each(LiveEntry::persisted),
                Err(error) => {
                    tracing::error!(kind = K::NAME, %error, keys = in_batch.len(), "failed to persist live state");
                    failed.get_or_insert(error);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    fn wipe_stored<K: Hosted>(&self, key: &str) -> Result<LiveState, StorageError> {
        let state = match load_state::<K>(&self.storage, self.shard, key) {
            Ok(state) => state.unwrap_or_default(),
            // Unreadable state is deleted all the same.
            Err(StorageError::Corrupt { .. }) => LiveState::default(),
            Err(error) => return Err(error),
        };
        self.storage.delete(Cf::State, &K::state_key(self.shard, key))?;
        Ok(state)
    }

    /// Persists a key's state and drops it; `false` when it could not persist, and
    /// then it stays live (nothing is lost).
    fn passivate<K: Hosted>(&mut self, key: String, mut entry: LiveEntry) -> bool {
        self.worked = true;
        crate::metrics::passivated(K::NAME);
        if entry.persist::<K>(&self.storage, self.shard, &key).is_err() {
            entry.last_used = self.clock.now_millis();
            K::registry(self).live.push(key, entry);
            return false;
        }
        self.board.withdraw(K::KIND, &key);
        true
    }

    /// Passivates least recently used keys until `room` more fit under the cap, or
    /// one could not persist.
    fn enforce_live_cap(&mut self, room: usize) {
        while self.sessions.live.len() + self.users.live.len() + room > self.config.max_live_actors {
            let oldest_session = self.sessions.live.peek_lru().map(|(_, live)| live.last_used);
            let oldest_user = self.users.live.peek_lru().map(|(_, live)| live.last_used);
            let passivated = match (oldest_session, oldest_user) {
                (Some(session), Some(user)) if session <= user => self.passivate_lru::<Session>(),
                (Some(_), None) => self.passivate_lru::<Session>(),
                (_, Some(_)) => self.passivate_lru::<User>(),
                (None, None) => false,
            };
            if !passivated {
                break;
            }
        }
    }

    fn passivate_lru<K: Hosted>(&mut self) -> bool {
        match K::registry(self).live.pop_lru() {
            Some((key, entry)) => self.passivate::<K>(key, entry),
            None => false,
        }
    }

    /// Passivates the live keys of `keys` (every one when `None`).
    fn passivate_keys<K: Hosted>(&mut self, keys: Option<Vec<String>>) {
        let keys = keys.unwrap_or_else(|| K::registry(self).live.iter().map(|(key, _)| key.clone()).collect());
        for key in keys {
            if let Some(entry) = K::registry(self).live.pop(&key) {
                self.passivate::<K>(key, entry);
            }
        }
    }

    /// Passivates keys idle longer than their TTL (one that could not persist is
    /// used again now, and waits for the next TTL).
    pub(super) fn passivate_idle<K: Hosted>(&mut self) {
        let cutoff = self.clock.now_millis() - K::idle_ttl_ms(&self.config);
        while K::registry(self)
            .live
            .peek_lru()
            .is_some_and(|(_, live)| live.last_used <= cutoff)
        {
            self.passivate_lru::<K>();
        }
    }
}

impl Handler<PassivateKeys> for ShardHost {
    type Result = ();

    fn handle(&mut self, PassivateKeys { sessions }: PassivateKeys, _: &mut Context<Self>) {
        if sessions.is_none() {
            self.passivate_keys::<User>(None);
        }
        self.passivate_keys::<Session>(sessions);
    }
}

impl Handler<AdoptSession> for ShardHost {
    type Result = ();

    /// Stores the claimed state as the session's, for its entry to load; a
    /// session live or stored here already keeps its own.
    fn handle(&mut self, AdoptSession { sid, state }: AdoptSession, _: &mut Context<Self>) {
        if self.sessions.live.contains(&sid) {
            return;
        }
        let key = Session::state_key(self.shard, &sid);
        let stored = self.storage.get(Cf::State, &key);
        if !matches!(stored, Ok(None)) {
            return;
        }
        let value = postcard::to_allocvec(&*state).expect("live state serializes");
        if let Err(error) = self.storage.put_unsynced(Cf::State, &key, &value) {
            tracing::warn!(shard = self.shard, %sid, %error, "storing a claimed session failed; it starts empty here");
        }
    }
}
