//! The live actors of a shard: started on a key's first message (from the
//! persisted state, or rebuilt from the event log when that is unreadable),
//! passivated when idle or when the shard holds too many, and wiped on a user's
//! deletion. A key's messages wait while its actor stops.

use std::collections::{BTreeMap, HashMap};

use actix::{Actor, ActorFutureExt, Addr, AsyncContext, Context, Handler, ResponseFuture, WrapFuture};
use futures::future::join_all;
use lru::LruCache;
use tokio::sync::{mpsc, oneshot};

use super::super::live_actor::{load_state, KeyMessage, LiveActor, LiveKind, Outlets, Persisted, Session, User};
use super::messages::{AdoptSession, PassivateKeys};
use super::{decode_logged, ShardHost};
use crate::domain::live_state::{DecayParams, LiveState};
use crate::storage::{layout, Cf, StorageError};
use crate::topology::ShardId;

/// A live actor and when it was last used.
pub(super) struct Live<K: LiveKind> {
    pub addr: Addr<LiveActor<K>>,
    pub last_used: i64,
}

/// The live actors of one kind on this shard.
pub(super) struct Registry<K: LiveKind> {
    /// Least recently used first out.
    pub live: LruCache<String, Live<K>>,
    /// Keys whose actor is stopping, with the messages that arrived meanwhile.
    pub stopping: HashMap<String, Vec<KeyMessage>>,
}

impl<K: LiveKind> Registry<K> {
    pub fn new() -> Self {
        Registry {
            live: LruCache::unbounded(),
            stopping: HashMap::new(),
        }
    }
}

/// Which registry and settings a kind uses.
pub(super) trait Hosted: LiveKind + Sized {
    fn registry(host: &mut ShardHost) -> &mut Registry<Self>;
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
    /// Gives a message to a key's actor, starting it (from its persisted state)
    /// when it is not live, or holding the message while the key's actor stops.
    pub(super) fn deliver<K: Hosted>(&mut self, context: &mut Context<Self>, key: String, message: KeyMessage) {
        let now = self.clock.now_millis();
        let registry = K::registry(self);
        if let Some(held) = registry.stopping.get_mut(&key) {
            held.push(message);
            return;
        }
        if let KeyMessage::Wipe(reply) = message {
            match registry.live.pop(&key) {
                Some(live) => {
                    // The stop goes on without its caller waiting for it.
                    self.wipe_live::<K>(context, key, live.addr, reply);
                }
                None => {
                    let _ = reply.send(self.wipe_stored::<K>(&key));
                }
            }
            return;
        }
        if let Some(live) = registry.live.get_mut(&key) {
            live.last_used = now;
            live.addr.do_send(message);
            return;
        }
        let state = match self.load_or_rebuild::<K>(&key) {
            Ok(state) => state,
            Err(error) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "live state unreadable; its message is not applied");
                self.not_applied(message);
                return;
            }
        };
        let actor = LiveActor::<K>::new(
            key.clone(),
            self.shard,
            state,
            self.storage.clone(),
            K::params(&self.config),
            self.config.mailbox,
            Outlets {
                host: context.address().recipient(),
                board: self.board.clone(),
            },
        );
        let addr = actor.start();
        addr.do_send(message);
        K::registry(self).live.push(key, Live { addr, last_used: now });
        self.enforce_live_cap(context);
    }

    /// A message whose key's state could not be loaded: its batch reports the
    /// failure, and checkpoints stay below its events so that a restart applies them.
    fn not_applied(&mut self, message: KeyMessage) {
        match message {
            KeyMessage::Apply(events, done) => {
                for event in &events {
                    let lowest = self.unapplied.entry(event.source).or_insert(event.seq);
                    *lowest = (*lowest).min(event.seq);
                }
                done.fail();
            }
            KeyMessage::Absorb { done, .. } => done.fail(),
            // A dropped read or reply tells its caller the actor is unavailable.
            _ => {}
        }
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

    /// Passivates these live actors at once: each persists its state and stops, and
    /// their keys' messages wait meanwhile. An actor that could not persist stays live.
    /// The receiver is told once every one stopped (or stayed).
    fn passivate<K: Hosted>(
        &mut self,
        context: &mut Context<Self>,
        actors: Vec<(String, Addr<LiveActor<K>>)>,
    ) -> oneshot::Receiver<()> {
        let (to, mut answers) = mpsc::unbounded_channel();
        for (index, (key, addr)) in actors.iter().enumerate() {
            crate::metrics::passivated(K::NAME);
            K::registry(self).stopping.insert(key.clone(), Vec::new());
            addr.do_send(KeyMessage::Passivate(Persisted { index, to: to.clone() }));
        }
        drop(to);
        let count = actors.len();
        let answered = async move {
            let mut persisted = vec![false; count];
            while let Some((index, answer)) = answers.recv().await {
                persisted[index] = answer.is_ok();
            }
            persisted
        };
        let (told, done) = oneshot::channel();
        context.spawn(answered.into_actor(self).map(move |persisted, host, context| {
            for ((key, addr), stopped) in actors.into_iter().zip(persisted) {
                host.stopped::<K>(context, key, addr, stopped);
            }
            let _ = told.send(());
        }));
        done
    }

    /// Wipes a live key: its actor deletes the persisted state and stops, and the
    /// key's messages wait meanwhile; `caller` gets the final state. An actor that
    /// could not delete stays live.
    fn wipe_live<K: Hosted>(
        &mut self,
        context: &mut Context<Self>,
        key: String,
        addr: Addr<LiveActor<K>>,
        caller: oneshot::Sender<Result<LiveState, StorageError>>,
    ) {
        K::registry(self).stopping.insert(key.clone(), Vec::new());
        let (reply, wiped) = oneshot::channel();
        addr.do_send(KeyMessage::Wipe(reply));
        let wiped = async move {
            let result = wiped.await.unwrap_or(Err(StorageError::Closed));
            let stopped = result.is_ok();
            let _ = caller.send(result);
            stopped
        };
        context.spawn(
            wiped
                .into_actor(self)
                .map(move |stopped, host, context| host.stopped::<K>(context, key, addr, stopped)),
        );
    }

    /// A key's actor stopped (or, when `stopped` is false, stayed live): the messages
    /// that waited for it go to its actor, or to a new one.
    fn stopped<K: Hosted>(
        &mut self,
        context: &mut Context<Self>,
        key: String,
        addr: Addr<LiveActor<K>>,
        stopped: bool,
    ) {
        let held = K::registry(self).stopping.remove(&key).unwrap_or_default();
        if !stopped {
            let last_used = self.clock.now_millis();
            K::registry(self).live.push(key.clone(), Live { addr, last_used });
        }
        for message in held {
            self.deliver::<K>(context, key.clone(), message);
        }
    }

    /// Passivates least recently used actors while the shard holds too many.
    fn enforce_live_cap(&mut self, context: &mut Context<Self>) {
        while self.sessions.live.len() + self.users.live.len() > self.config.max_live_actors {
            let oldest_session = self.sessions.live.peek_lru().map(|(_, live)| live.last_used);
            let oldest_user = self.users.live.peek_lru().map(|(_, live)| live.last_used);
            match (oldest_session, oldest_user) {
                (Some(session), Some(user)) if session <= user => self.passivate_lru::<Session>(context),
                (Some(_), None) => self.passivate_lru::<Session>(context),
                (_, Some(_)) => self.passivate_lru::<User>(context),
                (None, None) => break,
            }
        }
    }

    fn passivate_lru<K: Hosted>(&mut self, context: &mut Context<Self>) {
        if let Some((key, live)) = K::registry(self).live.pop_lru() {
            drop(self.passivate::<K>(context, vec![(key, live.addr)]));
        }
    }

    /// Passivates the live actors of `keys` (every one when `None`); the receiver is
    /// told once all stopped.
    fn passivate_keys<K: Hosted>(
        &mut self,
        context: &mut Context<Self>,
        keys: Option<Vec<String>>,
    ) -> oneshot::Receiver<()> {
        let keys = keys.unwrap_or_else(|| K::registry(self).live.iter().map(|(key, _)| key.clone()).collect());
        let registry = K::registry(self);
        let actors = keys
            .into_iter()
            .filter_map(|key| registry.live.pop(&key).map(|live| (key, live.addr)))
            .collect();
        self.passivate::<K>(context, actors)
    }

    /// Passivates actors idle longer than their TTL.
    pub(super) fn passivate_idle<K: Hosted>(&mut self, context: &mut Context<Self>) {
        let cutoff = self.clock.now_millis() - K::idle_ttl_ms(&self.config);
        while K::registry(self)
            .live
            .peek_lru()
            .is_some_and(|(_, live)| live.last_used <= cutoff)
        {
            self.passivate_lru::<K>(context);
        }
    }
}

impl Handler<PassivateKeys> for ShardHost {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, PassivateKeys { sessions }: PassivateKeys, context: &mut Context<Self>) -> Self::Result {
        let mut stopped = Vec::new();
        if sessions.is_none() {
            stopped.push(self.passivate_keys::<User>(context, None));
        }
        stopped.push(self.passivate_keys::<Session>(context, sessions));
        Box::pin(async move {
            join_all(stopped).await;
        })
    }
}

impl Handler<AdoptSession> for ShardHost {
    type Result = ();

    /// Stores the claimed state as the session's, for its actor to start from; a
    /// session live or stored here already keeps its own.
    fn handle(&mut self, AdoptSession { sid, state }: AdoptSession, _: &mut Context<Self>) {
        if self.sessions.live.contains(&sid) || self.sessions.stopping.contains_key(&sid) {
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
