//! `ShardHost`: the actor owning one shard's live state and event log.
//!
//! Ingest (`ingest.rs`): events get the shard's next log sequence numbers and are
//! queued; while one group commit is in flight, newer events wait and go together
//! in the next one. Once durable, they are applied in sequence order: to the live
//! state of their uid here, and of their sid on the sid's shard (here or via that
//! shard's host); and handed to the learner. The caller is answered only then, so a
//! snapshot read after the answer, which travels the same mailboxes, sees the event.
//!
//! Live keys (`live.rs`): the host holds each active session's and user's state as
//! an entry of its own ([`super::live_entry`]), loaded on the key's first event
//! (from its persisted state, or rebuilt from the log when that is unreadable), and
//! passivated (persisted, then dropped) after an idle TTL or when the shard holds
//! more live keys than allowed (least recently used first).
//!
//! The public state API (`state.rs`: reads and wipes) and recovery (`recovery.rs`:
//! replay after a crash, two-phase checkpoints) answer the engine; the messages
//! are in `messages.rs`.

mod ingest;
mod live;
mod messages;
mod recovery;
mod router;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, AsyncContext, Context};
use futures::future::{BoxFuture, FutureExt, Shared};
use lru::LruCache;
use tokio::sync::oneshot;

use super::catalog::ItemReader;
use super::live_entry::{LiveKind, Session, User};
use super::signal_board::SignalBoard;
use super::LiveStateError;
use crate::allocator::QuietRelease;
use crate::clock::SharedClock;
use crate::domain::event::{decode_stored, DurableEventSink, Event};
use crate::domain::live_state::DecayParams;
use crate::storage::{layout, Cf, CommitQueue, Op, Storage, StorageError};
use crate::topology::ShardId;
use live::Registry;
pub use messages::{
    AdoptSession, CheckpointMark, CheckpointPersist, Ingest, NextSeq, PassivateKeys, Projection, ReadState, Replay,
    TakeOver, Wipe,
};

pub use router::HostRouter;

/// Settings of live state, from `[engine]`.
#[derive(Debug, Clone, Copy)]
pub struct LiveConfig {
    pub session: DecayParams,
    pub user: DecayParams,
    pub session_idle_ttl_ms: i64,
    pub user_idle_ttl_ms: i64,
    /// Live keys (sessions + users) a shard may hold.
    pub max_live_actors: usize,
    /// Mailbox capacity of hosts.
    pub mailbox: usize,
}

/// What every shard's host shares with the others and with the engine.
#[derive(Clone)]
pub struct HostHandles {
    pub storage: Storage,
    pub commits: CommitQueue,
    pub items: Arc<ItemReader>,
    pub router: Arc<HostRouter>,
    /// The learner, fed every event once it is durable.
    pub learner: Arc<dyn DurableEventSink>,
    /// Where live keys publish their ranking signals.
    pub board: Arc<SignalBoard>,
    pub clock: SharedClock,
}

/// Events waiting for their group commit, and who waits for them.
struct PendingIngest {
    events: Vec<(u64, Event)>,
    ops: Vec<Op>,
    /// Told once the batch's write returned (whether it is stored), before it is applied.
    stored: oneshot::Sender<Result<(), String>>,
    reply: oneshot::Sender<Result<(), LiveStateError>>,
}

/// Resolves once an accepted event's write returned: `Ok` when it is stored, else why not.
type StoredSignal = Shared<BoxFuture<'static, Result<(), String>>>;

pub struct ShardHost {
    shard: ShardId,
    storage: Storage,
    commits: CommitQueue,
    items: Arc<ItemReader>,
    router: Arc<HostRouter>,
    /// Learns every event once it is durable.
    learner: Arc<dyn DurableEventSink>,
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
    /// Ids accepted but not yet durable, so a quick retry is recognised too; a copy
    /// that arrives meanwhile is answered once the first is stored (never before).
    ids_in_flight: HashMap<String, StoredSignal>,
    sessions: Registry<Session>,
    users: Registry<User>,
    /// Per source shard, the lowest sequence of an event whose live state could not
    /// be loaded to apply it: checkpoints stay below it, so a restart replays it.
    unapplied: BTreeMap<ShardId, u64>,
    /// The last batch handed to the learner; the next one goes after it.
    learner_feed: Shared<BoxFuture<'static, ()>>,
    /// Sids whose start in this shard's log is indexed (most recent first out).
    indexed_sessions: LruCache<String, ()>,
    /// Whether events were applied or states passivated since the last tick; the
    /// tick then owes a release of freed memory once the host is quiet.
    worked: bool,
    release: QuietRelease,
}

/// Sids a host remembers as indexed; one forgotten is indexed again at its next
/// event (an extra entry, harmless).
const INDEXED_SESSIONS: usize = 16_384;

impl ShardHost {
    pub fn new(shard: ShardId, handles: HostHandles, config: LiveConfig) -> Result<ShardHost, StorageError> {
        let HostHandles {
            storage,
            commits,
            items,
            router,
            learner,
            board,
            clock,
        } = handles;
        let next_seq = match storage.last_with_prefix(Cf::Events, &layout::event_log_prefix(shard))? {
            Some((key, _)) => layout::event_log_seq(&key).map_or(1, |seq| seq + 1),
            None => 1,
        };
        Ok(ShardHost {
            shard,
            storage,
            commits,
            items,
            router,
            learner,
            board,
            clock,
            config,
            next_seq,
            last_applied: 0,
            pending: Vec::new(),
            commit_in_flight: false,
            ids_in_flight: HashMap::new(),
            sessions: Registry::new(),
            users: Registry::new(),
            unapplied: BTreeMap::new(),
            learner_feed: futures::future::ready(()).boxed().shared(),
            indexed_sessions: LruCache::new(NonZeroUsize::new(INDEXED_SESSIONS).expect("non-zero")),
            worked: false,
            release: QuietRelease::default(),
        })
    }
}

impl Actor for ShardHost {
    type Context = Context<Self>;

    fn started(&mut self, context: &mut Self::Context) {
        context.set_mailbox_capacity(self.config.mailbox);
        let shortest_ttl = self.config.session_idle_ttl_ms.min(self.config.user_idle_ttl_ms);
        let tick = Duration::from_millis((shortest_ttl / 4).clamp(20, 1000) as u64);
        context.run_interval(tick, |host, _| {
            host.passivate_idle::<Session>();
            host.passivate_idle::<User>();
            crate::metrics::live_actors(host.shard, Session::NAME, host.sessions.live.len());
            crate::metrics::live_actors(host.shard, User::NAME, host.users.live.len());
            // What a burst of events freed on this thread goes back once it is over.
            let now = Instant::now();
            if std::mem::take(&mut host.worked) {
                host.release.worked(now);
            } else {
                host.release.release_if_quiet(now);
            }
        });
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        crate::metrics::live_actors(self.shard, Session::NAME, 0);
        crate::metrics::live_actors(self.shard, User::NAME, 0);
    }
}

/// An event as the log stores it.
pub(super) fn decode_logged(source: ShardId, seq: u64, bytes: &[u8]) -> Result<Event, StorageError> {
    decode_stored(bytes).map_err(|reason| StorageError::Corrupt {
        key: format!("event {seq} of shard {source}"),
        reason,
    })
}
