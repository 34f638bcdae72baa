//! `ShardHost`: the actor owning one shard's live state and event log.
//!
//! Ingest: events get the shard's next log sequence numbers and are queued; while
//! one group commit is in flight, newer events wait and go together in the next
//! one. Once durable, they are applied in sequence order: to the `UserActor` of
//! their uid here, and to the `SessionActor` of their sid on the sid's shard (here
//! or via that shard's host). The caller is answered only then, so a snapshot read
//! after the answer, which travels the same mailboxes, sees the event.
//!
//! The host starts a live actor on a key's first message, passivates it after an
//! idle TTL or when the shard holds more live actors than allowed (least recently
//! used first), and holds a key's messages back while it passivates, so that the
//! next actor for the key restores the state its predecessor persisted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::ready;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::{
    Actor, ActorFutureExt, Addr, AsyncContext, Context, Handler, Message, MessageResult, ResponseFuture, WrapFuture,
};
use futures::future::join_all;
use lru::LruCache;
use tokio::sync::oneshot;

use super::catalog::{CatalogError, ItemReader};
use super::event::Event;
use super::live_actor::{
    completion, load_state, Completion, KeyMessage, LiveActor, LiveKind, Outlets, SequencedEvent, Session, Stitched,
    User,
};
use super::live_state::{DecayParams, LiveState};
use super::signals::SignalBoard;
use crate::clock::SharedClock;
use crate::storage::{keys, Cf, CommitQueue, Op, Storage, StorageError};
use crate::topology::{shard_for, ShardId};
use crate::training::Training;

/// Settings of live state, from `[engine]`.
#[derive(Debug, Clone, Copy)]
pub struct LiveConfig {
    pub session: DecayParams,
    pub user: DecayParams,
    pub session_idle_ttl_ms: i64,
    pub user_idle_ttl_ms: i64,
    /// Live actors (sessions + users) a shard may hold.
    pub max_live_actors: usize,
    /// Mailbox capacity of hosts and live actors.
    pub mailbox: usize,
}

/// Every shard's host, so hosts can reach each other.
pub struct HostRouter {
    hosts: OnceLock<Vec<Addr<ShardHost>>>,
    shards: u16,
}

impl HostRouter {
    pub fn new(shards: u16) -> Arc<HostRouter> {
        Arc::new(HostRouter {
            hosts: OnceLock::new(),
            shards,
        })
    }

    /// Called once, after every host started.
    pub fn set(&self, hosts: Vec<Addr<ShardHost>>) {
        assert!(self.hosts.set(hosts).is_ok(), "host router set twice");
    }

    pub fn host(&self, shard: ShardId) -> &Addr<ShardHost> {
        &self.hosts.get().expect("hosts are set before any message")[shard as usize]
    }

    pub fn all(&self) -> &[Addr<ShardHost>] {
        self.hosts.get().expect("hosts are set before any message")
    }

    pub fn shard_of(&self, key: &str) -> ShardId {
        shard_for(key.as_bytes(), self.shards)
    }
}

/// A live actor and when it was last used.
struct Live<K: LiveKind> {
    addr: Addr<LiveActor<K>>,
    last_used: i64,
}

/// The live actors of one kind on this shard.
struct Registry<K: LiveKind> {
    /// Least recently used first out.
    live: LruCache<String, Live<K>>,
    /// Keys whose actor is stopping, with the messages that arrived meanwhile.
    stopping: HashMap<String, Vec<KeyMessage>>,
}

impl<K: LiveKind> Registry<K> {
    fn new() -> Self {
        Registry {
            live: LruCache::unbounded(),
            stopping: HashMap::new(),
        }
    }
}

/// Which registry and settings a kind uses.
trait Hosted: LiveKind + Sized {
    fn registry(host: &mut ShardHost) -> &mut Registry<Self>;
    fn params(config: &LiveConfig) -> DecayParams;
    fn idle_ttl_ms(config: &LiveConfig) -> i64;
}

impl Hosted for Session {
    fn registry(host: &mut ShardHost) -> &mut Registry<Self> {
        &mut host.sessions
    }
    fn params(config: &LiveConfig) -> DecayParams {
        config.session
    }
    fn idle_ttl_ms(config: &LiveConfig) -> i64 {
        config.session_idle_ttl_ms
    }
}

impl Hosted for User {
    fn registry(host: &mut ShardHost) -> &mut Registry<Self> {
        &mut host.users
    }
    fn params(config: &LiveConfig) -> DecayParams {
        config.user
    }
    fn idle_ttl_ms(config: &LiveConfig) -> i64 {
        config.user_idle_ttl_ms
    }
}

/// What every shard's host shares with the others and with the engine.
#[derive(Clone)]
pub struct HostHandles {
    pub storage: Storage,
    pub commits: CommitQueue,
    pub items: Arc<ItemReader>,
    pub router: Arc<HostRouter>,
    pub training: Arc<Training>,
    /// Where live actors publish their ranking signals.
    pub board: Arc<SignalBoard>,
    pub clock: SharedClock,
}

/// Events waiting for their group commit, and who waits for them.
struct PendingIngest {
    events: Vec<(u64, Event)>,
    ops: Vec<Op>,
    reply: oneshot::Sender<Result<(), CatalogError>>,
}

pub struct ShardHost {
    shard: ShardId,
    storage: Storage,
    commits: CommitQueue,
    items: Arc<ItemReader>,
    router: Arc<HostRouter>,
    /// Learns every event once it is durable.
    training: Arc<Training>,
    board: Arc<SignalBoard>,
    clock: SharedClock,
    config: LiveConfig,
    /// The sequence number the next accepted event gets.
    next_seq: u64,
    /// Every event at or below this sequence has been applied.
    last_applied: u64,
    /// Accepted events waiting for the commit in flight to finish.
    pending: Vec<PendingIngest>,
    commit_in_flight: bool,
    /// Ids accepted but not yet durable, so a quick retry is recognised too.
    ids_in_flight: HashSet<String>,
    sessions: Registry<Session>,
    users: Registry<User>,
}

impl ShardHost {
    pub fn new(shard: ShardId, handles: HostHandles, config: LiveConfig) -> Result<ShardHost, StorageError> {
        let HostHandles {
            storage,
            commits,
            items,
            router,
            training,
            board,
            clock,
        } = handles;
        let next_seq = match storage.last_with_prefix(Cf::Events, &keys::event_log_prefix(shard))? {
            Some((key, _)) => keys::event_log_seq(&key).map_or(1, |seq| seq + 1),
            None => 1,
        };
        Ok(ShardHost {
            shard,
            storage,
            commits,
            items,
            router,
            training,
            board,
            clock,
            config,
            next_seq,
            last_applied: 0,
            pending: Vec::new(),
            commit_in_flight: false,
            ids_in_flight: HashSet::new(),
            sessions: Registry::new(),
            users: Registry::new(),
        })
    }

    /// Sends the queued events to the commit thread; the next batch waits for this one.
    fn flush(&mut self, context: &mut Context<Self>) {
        let mut batch = std::mem::take(&mut self.pending);
        let ops: Vec<Op> = batch
            .iter_mut()
            .flat_map(|pending| std::mem::take(&mut pending.ops))
            .collect();
        self.commit_in_flight = true;
        let write = self.commits.submit(ops);
        context.spawn(
            write
                .into_actor(self)
                .map(move |result, host, context| host.on_durable(context, batch, result)),
        );
    }

    fn on_durable(&mut self, context: &mut Context<Self>, batch: Vec<PendingIngest>, result: Result<(), StorageError>) {
        let mut replies = Vec::with_capacity(batch.len());
        let mut sequenced = Vec::new();
        for pending in batch {
            for (seq, event) in pending.events {
                self.ids_in_flight.remove(&event.id);
                if result.is_ok() {
                    sequenced.push(self.sequence(seq, event));
                }
            }
            replies.push(pending.reply);
        }
        if let Some(last) = sequenced.last() {
            self.last_applied = last.seq;
        }
        self.training.observe(sequenced.clone());
        let (done, applied) = completion();
        self.route(context, sequenced, done);
        let error = result.err().map(|error| error.to_string());
        // Answer once every actor this batch reached has applied it.
        context.spawn(
            async move {
                applied.await;
                for reply in replies {
                    let _ = reply.send(match &error {
                        None => Ok(()),
                        Some(error) => Err(CatalogError::Unavailable(format!("event log write failed: {error}"))),
                    });
                }
            }
            .into_actor(self),
        );
        self.commit_in_flight = false;
        if !self.pending.is_empty() {
            self.flush(context);
        }
    }

    fn sequence(&self, seq: u64, event: Event) -> Arc<SequencedEvent> {
        let attributes = self.items.affinity_keys(&event);
        Arc::new(SequencedEvent {
            source: self.shard,
            seq,
            event,
            attributes,
        })
    }

    /// Hands events, in sequence order, to their user here and their session
    /// wherever the sid lives.
    fn route(&mut self, context: &mut Context<Self>, events: Vec<Arc<SequencedEvent>>, done: Completion) {
        let mut users = Grouped::default();
        let mut local_sessions = Grouped::default();
        let mut remote_sessions: BTreeMap<ShardId, Grouped> = BTreeMap::new();
        for sequenced in events {
            if let Some(uid) = &sequenced.event.uid {
                users.push(uid, sequenced.clone());
            }
            if let Some(sid) = &sequenced.event.sid {
                match self.router.shard_of(sid) {
                    shard if shard == self.shard => local_sessions.push(sid, sequenced.clone()),
                    shard => remote_sessions.entry(shard).or_default().push(sid, sequenced.clone()),
                }
            }
        }
        for (uid, events) in users.groups {
            self.deliver::<User>(context, uid, KeyMessage::Apply(events, done.clone()));
        }
        for (sid, events) in local_sessions.groups {
            self.deliver::<Session>(context, sid, KeyMessage::Apply(events, done.clone()));
        }
        for (shard, sessions) in remote_sessions {
            self.router
                .host(shard)
                .do_send(RouteSessions(sessions.groups, done.clone()));
        }
    }

    /// Gives a message to a key's actor, starting it (from its persisted state)
    /// when it is not live, or holding the message while the key's actor stops.
    fn deliver<K: Hosted>(&mut self, context: &mut Context<Self>, key: String, message: KeyMessage) {
        let now = self.clock.now_millis();
        let registry = K::registry(self);
        if let Some(held) = registry.stopping.get_mut(&key) {
            held.push(message);
            return;
        }
        if let KeyMessage::Wipe(reply) = message {
            match registry.live.pop(&key) {
                Some(live) => self.stop::<K>(context, key, live.addr, StopReason::Wipe(reply)),
                None => {
                    let state = self.wipe_stored::<K>(&key);
                    let _ = reply.send(state);
                }
            }
            return;
        }
        if let Some(live) = registry.live.get_mut(&key) {
            live.last_used = now;
            live.addr.do_send(message);
            return;
        }
        let state = match load_state::<K>(&self.storage, self.shard, &key) {
            Ok(state) => state.unwrap_or_default(),
            Err(error) => {
                tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "unreadable live state, starting empty");
                LiveState::default()
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

    fn wipe_stored<K: Hosted>(&self, key: &str) -> LiveState {
        let state = load_state::<K>(&self.storage, self.shard, key)
            .ok()
            .flatten()
            .unwrap_or_default();
        if let Err(error) = self.storage.delete(Cf::State, &K::state_key(self.shard, key)) {
            tracing::error!(shard = self.shard, kind = K::NAME, %key, %error, "failed to wipe live state");
        }
        state
    }

    /// Stops a key's actor (passivation or wipe); its key's messages wait meanwhile.
    fn stop<K: Hosted>(
        &mut self,
        context: &mut Context<Self>,
        key: String,
        addr: Addr<LiveActor<K>>,
        reason: StopReason,
    ) {
        K::registry(self).stopping.insert(key.clone(), Vec::new());
        let done: futures::future::BoxFuture<'static, ()> = match reason {
            StopReason::Passivate => {
                let (reply, stopped) = oneshot::channel();
                addr.do_send(KeyMessage::Passivate(reply));
                Box::pin(async move {
                    let _ = stopped.await;
                })
            }
            StopReason::Wipe(caller) => {
                let (reply, stopped) = oneshot::channel();
                addr.do_send(KeyMessage::Wipe(reply));
                Box::pin(async move {
                    let _ = caller.send(stopped.await.unwrap_or_default());
                })
            }
        };
        context.spawn(done.into_actor(self).map(move |(), host, context| {
            let held = K::registry(host).stopping.remove(&key).unwrap_or_default();
            for message in held {
                host.deliver::<K>(context, key.clone(), message);
            }
        }));
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
            self.stop::<K>(context, key, live.addr, StopReason::Passivate);
        }
    }

    /// Passivates actors idle longer than their TTL.
    fn passivate_idle<K: Hosted>(&mut self, context: &mut Context<Self>) {
        let cutoff = self.clock.now_millis() - K::idle_ttl_ms(&self.config);
        while K::registry(self)
            .live
            .peek_lru()
            .is_some_and(|(_, live)| live.last_used <= cutoff)
        {
            self.passivate_lru::<K>(context);
        }
    }

    /// A state read: live actors answer themselves; otherwise the persisted state,
    /// without starting an actor. `project` turns the state into what the reader
    /// wants. `None` when the key has no state at all.
    fn read_state<K: Hosted, R: Send + 'static>(
        &mut self,
        context: &mut Context<Self>,
        key: String,
        project: Projection<R>,
    ) -> ResponseFuture<Result<Option<(R, bool)>, CatalogError>> {
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
                    .map_err(|_| CatalogError::Unavailable("live actor stopped".into()))
            });
        }
        let stored = load_state::<K>(&self.storage, self.shard, &key).map_err(CatalogError::from);
        Box::pin(ready(stored.map(|state| state.map(|state| (project(&state), false)))))
    }

    /// Replays the log after the last checkpoint (after a crash: events that were
    /// acknowledged but whose effect was not yet in a persisted snapshot).
    fn replay(&mut self, context: &mut Context<Self>) -> Result<u64, CatalogError> {
        let checkpoint = read_checkpoint(&self.storage, self.shard)?;
        let prefix = keys::event_log_prefix(self.shard);
        let start = keys::event_log(self.shard, checkpoint + 1);
        let mut replayed = 0;
        let mut chunk = Vec::new();
        let storage = self.storage.clone();
        for entry in storage.scan_from(Cf::Events, &start, &prefix) {
            let (key, value) = entry?;
            let Some(seq) = keys::event_log_seq(&key) else { continue };
            let event: Event = serde_json::from_slice(&value).map_err(|error| StorageError::Corrupt {
                key: format!("event {seq} of shard {}", self.shard),
                reason: error.to_string(),
            })?;
            chunk.push(self.sequence(seq, event));
            self.last_applied = seq;
            replayed += 1;
            if chunk.len() == 1024 {
                self.route(context, std::mem::take(&mut chunk), completion().0);
            }
        }
        self.route(context, chunk, completion().0);
        self.last_applied = self.last_applied.max(checkpoint).max(self.next_seq - 1);
        Ok(replayed)
    }
}

/// Why a live actor is stopped.
enum StopReason {
    Passivate,
    Wipe(oneshot::Sender<LiveState>),
}

/// Events grouped by key, keys in first-seen order, events in sequence order.
#[derive(Default)]
struct Grouped {
    groups: Vec<(String, Vec<Arc<SequencedEvent>>)>,
    index: HashMap<String, usize>,
}

impl Grouped {
    fn push(&mut self, key: &str, event: Arc<SequencedEvent>) {
        match self.index.get(key) {
            Some(&at) => self.groups[at].1.push(event),
            None => {
                self.index.insert(key.to_owned(), self.groups.len());
                self.groups.push((key.to_owned(), vec![event]));
            }
        }
    }
}

/// The checkpoint of a shard: every event at or below it is in persisted snapshots.
pub fn read_checkpoint(storage: &Storage, shard: ShardId) -> Result<u64, StorageError> {
    Ok(storage
        .get(Cf::State, &keys::checkpoint(shard))?
        .and_then(|bytes| bytes.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

impl Actor for ShardHost {
    type Context = Context<Self>;

    fn started(&mut self, context: &mut Self::Context) {
        context.set_mailbox_capacity(self.config.mailbox);
        let shortest_ttl = self.config.session_idle_ttl_ms.min(self.config.user_idle_ttl_ms);
        let tick = Duration::from_millis((shortest_ttl / 4).clamp(20, 1000) as u64);
        context.run_interval(tick, |host, context| {
            host.passivate_idle::<Session>(context);
            host.passivate_idle::<User>(context);
        });
    }
}

/// Accept events whose routing key this shard owns. Answers, per event, whether it
/// was a duplicate of one already accepted (and so not applied again).
pub struct Ingest(pub Vec<Event>);

impl Message for Ingest {
    type Result = Result<Vec<bool>, CatalogError>;
}

impl Handler<Ingest> for ShardHost {
    type Result = ResponseFuture<Result<Vec<bool>, CatalogError>>;

    fn handle(&mut self, Ingest(events): Ingest, context: &mut Context<Self>) -> Self::Result {
        let id_keys: Vec<Vec<u8>> = events
            .iter()
            .map(|event| keys::event_id(self.shard, &event.id))
            .collect();
        let stored = match self.storage.multi_get(Cf::Events, &id_keys) {
            Ok(stored) => stored,
            Err(error) => return Box::pin(ready(Err(error.into()))),
        };
        let mut duplicates = Vec::with_capacity(events.len());
        let mut accepted = Vec::new();
        let mut ops = Vec::new();
        for ((event, stored), id_key) in events.into_iter().zip(stored).zip(id_keys) {
            let duplicate = stored.is_some() || !self.ids_in_flight.insert(event.id.clone());
            duplicates.push(duplicate);
            if duplicate {
                continue;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let log_key = keys::event_log(self.shard, seq);
            if let Some(uid) = &event.uid {
                let index_key = keys::user_event(self.shard, uid, &log_key);
                ops.push(Op::Put {
                    cf: Cf::UserEvents,
                    key: index_key,
                    value: event.id.clone().into_bytes(),
                });
            }
            let value = serde_json::to_vec(&event).expect("events serialize");
            ops.push(Op::Put {
                cf: Cf::Events,
                key: id_key,
                value: log_key.clone(),
            });
            ops.push(Op::Put {
                cf: Cf::Events,
                key: log_key,
                value,
            });
            accepted.push((seq, event));
        }
        if accepted.is_empty() {
            return Box::pin(ready(Ok(duplicates)));
        }
        let (reply, durable) = oneshot::channel();
        self.pending.push(PendingIngest {
            events: accepted,
            ops,
            reply,
        });
        if !self.commit_in_flight {
            self.flush(context);
        }
        Box::pin(async move {
            durable
                .await
                .map_err(|_| CatalogError::Unavailable("shard host stopped".into()))??;
            Ok(duplicates)
        })
    }
}

/// Events of sessions living on this shard, from another shard's log.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RouteSessions(pub Vec<(String, Vec<Arc<SequencedEvent>>)>, pub Completion);

impl Handler<RouteSessions> for ShardHost {
    type Result = ();

    fn handle(&mut self, RouteSessions(sessions, done): RouteSessions, context: &mut Context<Self>) {
        for (sid, events) in sessions {
            self.deliver::<Session>(context, sid, KeyMessage::Apply(events, done.clone()));
        }
    }
}

impl Handler<Stitched> for ShardHost {
    type Result = ();

    fn handle(&mut self, stitched: Stitched, _: &mut Context<Self>) {
        let owner = self.router.shard_of(&stitched.uid);
        self.router.host(owner).do_send(AbsorbSession(stitched));
    }
}

/// A user on this shard absorbs an anonymous session's signals.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AbsorbSession(pub Stitched);

impl Handler<AbsorbSession> for ShardHost {
    type Result = ();

    fn handle(&mut self, AbsorbSession(stitched): AbsorbSession, context: &mut Context<Self>) {
        let message = KeyMessage::Absorb {
            sid: stitched.sid,
            state: stitched.state,
            done: stitched.done,
        };
        self.deliver::<User>(context, stitched.uid, message);
    }
}

/// Which live state a request is about.
#[derive(Debug, Clone)]
pub enum StateKey {
    Session(String),
    User(String),
}

/// Whether a live state is a session's or a user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Session,
    User,
}

impl StateKey {
    /// The sid or uid: the session's or user's routing key.
    pub fn key(&self) -> &str {
        match self {
            StateKey::Session(sid) => sid,
            StateKey::User(uid) => uid,
        }
    }

    pub fn kind(&self) -> StateKind {
        match self {
            StateKey::Session(_) => StateKind::Session,
            StateKey::User(_) => StateKind::User,
        }
    }
}

/// What a reader makes of a state.
pub type Projection<R> = Box<dyn FnOnce(&LiveState) -> R + Send>;

/// A view of the state of a key and whether an actor is live for it; `None` if it has none.
pub struct ReadState<R>(pub StateKey, pub Projection<R>);

impl<R: Send + 'static> Message for ReadState<R> {
    type Result = Result<Option<(R, bool)>, CatalogError>;
}

impl<R: Send + 'static> Handler<ReadState<R>> for ShardHost {
    type Result = ResponseFuture<Result<Option<(R, bool)>, CatalogError>>;

    fn handle(&mut self, ReadState(key, project): ReadState<R>, context: &mut Context<Self>) -> Self::Result {
        match key {
            StateKey::Session(sid) => self.read_state::<Session, R>(context, sid, project),
            StateKey::User(uid) => self.read_state::<User, R>(context, uid, project),
        }
    }
}

/// Stops a key's actor without persisting and deletes its stored state; answers
/// with the final state (empty if there was none).
pub struct Wipe(pub StateKey);

impl Message for Wipe {
    type Result = Result<LiveState, CatalogError>;
}

impl Handler<Wipe> for ShardHost {
    type Result = ResponseFuture<Result<LiveState, CatalogError>>;

    fn handle(&mut self, Wipe(key): Wipe, context: &mut Context<Self>) -> Self::Result {
        let (reply, wiped) = oneshot::channel();
        match key {
            StateKey::Session(sid) => self.deliver::<Session>(context, sid, KeyMessage::Wipe(reply)),
            StateKey::User(uid) => self.deliver::<User>(context, uid, KeyMessage::Wipe(reply)),
        }
        Box::pin(async move {
            wiped
                .await
                .map_err(|_| CatalogError::Unavailable("live actor stopped".into()))
        })
    }
}

/// Replays the log after the checkpoint; answers how many events were replayed.
pub struct Replay;

impl Message for Replay {
    type Result = Result<u64, CatalogError>;
}

impl Handler<Replay> for ShardHost {
    type Result = Result<u64, CatalogError>;

    fn handle(&mut self, _: Replay, context: &mut Context<Self>) -> Self::Result {
        self.replay(context)
    }
}

/// Checkpoint, phase one: the highest sequence applied so far.
pub struct CheckpointMark;

impl Message for CheckpointMark {
    type Result = u64;
}

impl Handler<CheckpointMark> for ShardHost {
    type Result = MessageResult<CheckpointMark>;

    fn handle(&mut self, _: CheckpointMark, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.last_applied)
    }
}

/// Checkpoint, phase two: every live actor persists. Answers, per source shard, the
/// lowest sequence of events still held back for a stopping key (not yet applied).
pub struct CheckpointPersist;

impl Message for CheckpointPersist {
    type Result = BTreeMap<ShardId, u64>;
}

impl Handler<CheckpointPersist> for ShardHost {
    type Result = ResponseFuture<BTreeMap<ShardId, u64>>;

    fn handle(&mut self, _: CheckpointPersist, _: &mut Context<Self>) -> Self::Result {
        let mut persisted = Vec::new();
        for (_, live) in self.sessions.live.iter() {
            let (reply, done) = oneshot::channel();
            live.addr.do_send(KeyMessage::Persist(reply));
            persisted.push(done);
        }
        for (_, live) in self.users.live.iter() {
            let (reply, done) = oneshot::channel();
            live.addr.do_send(KeyMessage::Persist(reply));
            persisted.push(done);
        }
        let mut held_back: BTreeMap<ShardId, u64> = BTreeMap::new();
        let held = self
            .sessions
            .stopping
            .values()
            .chain(self.users.stopping.values())
            .flatten();
        for message in held {
            if let KeyMessage::Apply(events, _) = message {
                for event in events {
                    let lowest = held_back.entry(event.source).or_insert(event.seq);
                    *lowest = (*lowest).min(event.seq);
                }
            }
        }
        Box::pin(async move {
            join_all(persisted).await;
            held_back
        })
    }
}
