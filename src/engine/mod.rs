//! The engine: shard actors, the router from keys to shards, and the read handles
//! the request path uses without queueing behind writes.
//!
//! Writes go key → shard → that shard's actor; reads of stored rows and table
//! records go straight to the shared handles (RocksDB, the table registry).
//!
//! Its surface comes in parts, so a caller's type says what it uses: the catalog's
//! rows and tables ([`Engine::catalog`], a [`Catalog`] of its own handles), the item
//! reader of the ranking path ([`Engine::items`]), and the engine itself for live
//! state (ingest, reads, checkpoints), shard hand-offs and session claims.

mod backup;
pub mod catalog;
mod catalog_calls;
mod catalog_shard;
mod cluster;
pub mod conversation;
mod forget;
mod live_entry;
mod live_state_error;
mod purge;
mod shard_host;
mod signal_board;

use std::future::Future;
use std::sync::{Arc, OnceLock};

use actix::{Actor, Arbiter, MailboxError};
use futures::future::join_all;

use crate::clock::SharedClock;
use crate::config::EngineConfig;
use crate::domain::event::{decode_stored, DurableEventSink, Event};
use crate::domain::live_state::{DecayParams, LiveState};
use crate::domain::live_state_id::LiveStateId;
use crate::domain::outcome::{Outcome, OutcomeObserver};
use crate::domain::signals::Signals;
use crate::storage::{layout, Cf, CommitQueue, Op, Storage, StorageError};
use crate::topology::{shard_for, Ownership, ShardId};
pub use backup::{list_backups, BackupFailure};
use catalog::{CatalogError, ItemReader, TableRegistry};
pub use catalog_calls::{Catalog, Remap};
pub use catalog_shard::Conversion;
pub use catalog_shard::{CatalogShard, RowResult};
pub use cluster::handover::{HeldShards, ShardExport};
pub use forget::{DeleteUserError, UserRemoval};
pub use live_state_error::LiveStateError;
pub use purge::Purger;
pub use shard_host::Projection;
use shard_host::{
    CheckpointMark, CheckpointPersist, HostHandles, HostRouter, Ingest, LiveConfig, ReadState, Replay, ShardHost,
};
use signal_board::SignalBoard;

/// The running engine of one node.
pub struct Engine {
    storage: Storage,
    /// Catalog reads and cached ranking features for the ranking path.
    items: Arc<ItemReader>,
    /// The shard count, fixed for the life of a data set.
    shard_count: u16,
    /// Which shards this node serves now.
    ownership: Arc<Ownership>,
    /// The catalog shards' calls.
    catalog: Catalog,
    /// One live-state host per shard.
    hosts: Arc<HostRouter>,
    /// The signals of every live session and user, for the ranking path.
    board: Arc<SignalBoard>,
    /// Group commit of the event log and checkpoints.
    commits: CommitQueue,
    /// Per shard, credits for events in flight (see [`Engine::ingest`]).
    in_flight: Vec<Arc<tokio::sync::Semaphore>>,
    /// Credits of each shard.
    in_flight_limit: u32,
    /// How live state forgets, for snapshots.
    live: LiveConfig,
    /// The threads the shard actors run on, stopped at shutdown.
    arbiters: parking_lot::Mutex<Vec<Arbiter>>,
    clock: SharedClock,
    /// Cluster mode: sessions claimed from and granted to the other nodes.
    claiming: cluster::session_claims::Claiming,
    /// Hears of each new click and conversion that carries a `rec_id` (experiments).
    outcomes: OnceLock<Arc<dyn OutcomeObserver>>,
}

/// Runs `future` to its end on a new actix system over a multi-threaded tokio runtime,
/// and returns its output: the runtime a node serves in (the shard actors are actix
/// actors; everything else, the HTTP server included, is plain tokio). Blocks the
/// calling thread; call it once, from `main`.
pub fn run_actor_system<F: Future>(future: F) -> F::Output {
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime can be built")
    });
    system.block_on(future)
}

/// An event for a shard this node does not serve now (it moved, or is moving).
fn not_served(shard: ShardId) -> LiveStateError {
    LiveStateError::Unavailable(format!(
        "shard {shard} is not served by this node now (a topology change is moving it); retry"
    ))
}

/// Sends each of `shard_count` shards its part of `items` at once and puts the answers back in
/// request order. Items already failed stay failed.
async fn scatter<T, R, E, Fut>(
    shard_count: u16,
    items: Vec<Result<(ShardId, T), E>>,
    send: impl Fn(ShardId, Vec<T>) -> Fut,
) -> Vec<Result<R, E>>
where
    E: Unavailable,
    Fut: Future<Output = Result<Vec<Result<R, E>>, E>>,
{
    let mut results: Vec<Option<Result<R, E>>> = (0..items.len()).map(|_| None).collect();
    // Each shard's part allocated at its size (events are large to copy as a part grows).
    let mut sizes = vec![0; shard_count as usize];
    for (shard, _) in items.iter().flatten() {
        sizes[*shard as usize] += 1;
    }
    let mut per_shard: Vec<(Vec<usize>, Vec<T>)> = sizes
        .into_iter()
        .map(|size| (Vec::with_capacity(size), Vec::with_capacity(size)))
        .collect();
    for (index, item) in items.into_iter().enumerate() {
        match item {
            Ok((shard, item)) => {
                per_shard[shard as usize].0.push(index);
                per_shard[shard as usize].1.push(item);
            }
            Err(error) => results[index] = Some(Err(error)),
        }
    }
    let sends = per_shard
        .into_iter()
        .enumerate()
        .filter(|(_, (indexes, _))| !indexes.is_empty())
        .map(|(shard, (indexes, items))| {
            let reply = send(shard as ShardId, items);
            async move { (indexes, reply.await) }
        });
    for (indexes, replies) in join_all(sends).await {
        match replies {
            Ok(replies) => {
                for (index, reply) in indexes.into_iter().zip(replies) {
                    results[index] = Some(reply);
                }
            }
            Err(error) => {
                let message = error.to_string();
                for index in indexes {
                    results[index] = Some(Err(E::unavailable(message.clone())));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|result| result.expect("every item answered"))
        .collect()
}

fn mailbox_error(error: MailboxError) -> LiveStateError {
    LiveStateError::Unavailable(format!("shard actor unavailable: {error}"))
}

impl From<&EngineConfig> for LiveConfig {
    fn from(config: &EngineConfig) -> LiveConfig {
        LiveConfig {
            session: DecayParams {
                half_life_ms: config.session_half_life_ms as f64,
                recent_items: config.recent_items,
            },
            user: DecayParams {
                half_life_ms: config.user_half_life_ms as f64,
                recent_items: config.recent_items,
            },
            session_idle_ttl_ms: config.session_idle_ttl_ms as i64,
            user_idle_ttl_ms: config.user_idle_ttl_ms as i64,
            max_live_actors: config.max_live_actors_per_shard,
            mailbox: config.shard_mailbox,
        }
    }
}

/// An error that a failed shard answers for every item it was sent.
trait Unavailable: std::fmt::Display {
    fn unavailable(message: String) -> Self;
}

impl Unavailable for CatalogError {
    fn unavailable(message: String) -> Self {
        CatalogError::Unavailable(message)
    }
}

impl Unavailable for LiveStateError {
    fn unavailable(message: String) -> Self {
        LiveStateError::Unavailable(message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Engine {
    /// Starts one `CatalogShard` and one `ShardHost` per shard, each on its own
    /// arbiter thread. Must be called inside a running actix `System`; call
    /// [`Engine::recover`] before serving.
    pub fn start(
        storage: Storage,
        ownership: Arc<Ownership>,
        clock: SharedClock,
        config: &EngineConfig,
        learner: Arc<dyn DurableEventSink>,
    ) -> Result<Engine, EngineError> {
        let shard_count = ownership.current().topology.shards;
        let tables = Arc::new(TableRegistry::load(storage.clone(), shard_count, clock.clone())?);
        let items = Arc::new(ItemReader::new(
            storage.clone(),
            tables.clone(),
            shard_count,
            config.cached_item_rows_mb << 20,
        ));
        let commits = CommitQueue::start(storage.clone(), config.commit_queue);
        let live = LiveConfig::from(config);
        let hosts = HostRouter::new(shard_count);
        let handles = HostHandles {
            storage: storage.clone(),
            commits: commits.clone(),
            items: items.clone(),
            router: hosts.clone(),
            learner,
            board: Arc::new(SignalBoard::default()),
            clock: clock.clone(),
        };
        let mut arbiters = Vec::new();
        let mut shards = Vec::new();
        let mut host_addrs = Vec::new();
        for shard in 0..shard_count {
            let arbiter = Arbiter::new();
            let actor = CatalogShard::new(
                shard,
                storage.clone(),
                tables.clone(),
                items.clone(),
                clock.clone(),
                config.shard_mailbox,
            );
            shards.push(CatalogShard::start_in_arbiter(&arbiter.handle(), move |_| actor));
            arbiters.push(arbiter);
            let arbiter = Arbiter::new();
            let host = ShardHost::new(shard, handles.clone(), live)?;
            host_addrs.push(ShardHost::start_in_arbiter(&arbiter.handle(), move |_| host));
            arbiters.push(arbiter);
        }
        hosts.set(host_addrs);
        let catalog = Catalog::new(storage.clone(), tables, shards);
        let in_flight_limit = u32::try_from(config.max_events_in_flight.max(1)).unwrap_or(u32::MAX);
        Ok(Engine {
            in_flight: (0..shard_count)
                .map(|_| Arc::new(tokio::sync::Semaphore::new(in_flight_limit as usize)))
                .collect(),
            in_flight_limit,
            storage,
            items,
            shard_count,
            ownership,
            catalog,
            hosts,
            board: handles.board,
            commits,
            live,
            clock,
            arbiters: parking_lot::Mutex::new(arbiters),
            claiming: cluster::session_claims::Claiming::default(),
            outcomes: OnceLock::new(),
        })
    }

    /// From now on, `observer` hears of each new (not duplicate) click and conversion
    /// that carries a `rec_id`, once [`Engine::ingest`] applied it. Set once, before
    /// events flow; a second observer is ignored.
    pub fn observe_outcomes(&self, observer: Arc<dyn OutcomeObserver>) {
        if self.outcomes.set(observer).is_err() {
            tracing::warn!("an outcome observer is already set; the second one is ignored");
        }
    }

    /// Replays every shard's log after its checkpoint, then checkpoints. Returns
    /// the number of events replayed.
    pub async fn recover(&self) -> Result<u64, LiveStateError> {
        let mut replayed = 0;
        for result in join_all(self.hosts.all().iter().map(|host| host.send(Replay))).await {
            replayed += result.map_err(mailbox_error)??;
        }
        self.checkpoint().await?;
        Ok(replayed)
    }

    /// Persists every live key's state and records, per shard, the sequence up to
    /// which the log is reflected in persisted state (crash replay starts after it).
    /// When any state could not be persisted, no mark moves and the error is returned.
    pub async fn checkpoint(&self) -> Result<(), LiveStateError> {
        let started = std::time::Instant::now();
        let hosts = self.hosts.all();
        let mut marks = Vec::with_capacity(hosts.len());
        for mark in join_all(hosts.iter().map(|host| host.send(CheckpointMark))).await {
            marks.push(mark.map_err(mailbox_error)?);
        }
        // Phase two starts after every mark, so events a host forwarded before its
        // mark are in the other hosts' mailboxes ahead of the persist request.
        for held_back in join_all(hosts.iter().map(|host| host.send(CheckpointPersist))).await {
            for (source, lowest) in held_back.map_err(mailbox_error)?? {
                let mark = &mut marks[source as usize];
                *mark = (*mark).min(lowest.saturating_sub(1));
            }
        }
        // Snapshots and the session index are written without the WAL: make them
        // durable before the marks.
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || {
            storage.flush_cf(Cf::State)?;
            storage.flush_cf(Cf::SessionEvents)
        })
        .await
        .map_err(|error| LiveStateError::Unavailable(error.to_string()))??;
        let ops = marks
            .iter()
            .enumerate()
            .map(|(shard, mark)| Op::Put {
                cf: Cf::State,
                key: layout::checkpoint(shard as ShardId),
                value: mark.to_be_bytes().to_vec(),
            })
            .collect();
        self.commits.submit(ops).await?;
        crate::metrics::checkpoint(started.elapsed());
        Ok(())
    }

    /// Stops the shard actors and the commit thread, and waits for their threads.
    pub fn stop(&self) {
        for arbiter in self.arbiters.lock().drain(..) {
            arbiter.stop();
            let _ = arbiter.join();
        }
        self.commits.close();
    }

    fn shard_of(&self, key: &str) -> ShardId {
        shard_for(key.as_bytes(), self.shard_count)
    }

    /// Accepts events on the shards owning their routing keys. Per event: whether it
    /// was a duplicate (already accepted, not applied again), or why it failed. The
    /// outcome observer hears of each new click and conversion with a `rec_id`.
    pub async fn ingest(&self, events: Vec<Event>) -> Vec<Result<bool, LiveStateError>> {
        let Some(observer) = self.outcomes.get() else {
            return self.ingest_routed(events).await;
        };
        // Taken before the events move into their shards' messages.
        let outcomes: Vec<(usize, Outcome, String)> = events
            .iter()
            .enumerate()
            .filter_map(|(index, event)| {
                Outcome::of(event).map(|(outcome, rec_id)| (index, outcome, rec_id.to_owned()))
            })
            .collect();
        let results = self.ingest_routed(events).await;
        for (index, outcome, rec_id) in outcomes {
            if matches!(results[index], Ok(false)) {
                observer.observe(&rec_id, outcome);
            }
        }
        results
    }

    /// [`Engine::ingest`] without the outcome observer.
    async fn ingest_routed(&self, events: Vec<Event>) -> Vec<Result<bool, LiveStateError>> {
        self.claim_sessions(&events).await;
        let routed = events
            .into_iter()
            .map(|event| {
                let shard = self.shard_of(event.routing_key());
                match self.ownership.is_serving(shard) {
                    true => Ok((shard, event)),
                    false => Err(not_served(shard)),
                }
            })
            .collect();
        scatter(self.shard_count, routed, |shard, events| async move {
            // Credits for the events in flight on this shard: held until the batch is
            // applied everywhere it reaches and the learner took it, so that the
            // messages it causes (to other hosts, the learner) never
            // exceed `max_events_in_flight` however many callers push at once.
            let credits = u32::try_from(events.len())
                .unwrap_or(u32::MAX)
                .min(self.in_flight_limit);
            let _credits = self.in_flight[shard as usize]
                .acquire_many(credits)
                .await
                .map_err(|_| LiveStateError::Unavailable(format!("shard {shard} is stopping")))?;
            // A move may have fenced the shard while this waited for credits.
            if !self.ownership.is_serving(shard) {
                return Err(not_served(shard));
            }
            let duplicates = self
                .hosts
                .host(shard)
                .send(Ingest(events))
                .await
                .map_err(mailbox_error)??;
            Ok(duplicates.into_iter().map(Ok).collect())
        })
        .await
    }

    /// A live state and whether an actor is live for it; `None` if the key has none.
    pub async fn read_state(&self, key: LiveStateId) -> Result<Option<(LiveState, bool)>, LiveStateError> {
        self.read_state_with(key, Box::new(LiveState::clone)).await
    }

    /// What `project` makes of a key's live state, computed where the state lives
    /// (so a reader that needs a few signals does not copy the whole state).
    pub async fn read_state_with<R: Send + 'static>(
        &self,
        key: LiveStateId,
        project: Projection<R>,
    ) -> Result<Option<(R, bool)>, LiveStateError> {
        self.hosts
            .host(self.shard_of(key.id()))
            .send(ReadState(key, project))
            .await
            .map_err(mailbox_error)?
    }

    /// The ranking signals of a session or user as of now: published by its live
    /// actor, or, when none is live, computed from its persisted state by its host
    /// (`None` when it has no state). Only the second case waits for a message.
    pub async fn signals(&self, key: LiveStateId) -> Result<Option<Arc<Signals>>, LiveStateError> {
        if let Some(signals) = self.board.get(&key) {
            return Ok(Some(signals));
        }
        let half_life_ms = self.decay(&key).half_life_ms;
        let project = Box::new(move |live: &LiveState| Arc::new(Signals::of(live, half_life_ms)));
        Ok(self.read_state_with(key, project).await?.map(|(signals, _)| signals))
    }

    /// The catalog's calls: rows and tables.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The catalog's items as the ranking path and the search indexer read them.
    pub fn items(&self) -> &Arc<ItemReader> {
        &self.items
    }

    /// The decay settings snapshots are computed with.
    pub fn decay(&self, key: &LiveStateId) -> DecayParams {
        match key {
            LiveStateId::Session(_) => self.live.session,
            LiveStateId::User(_) => self.live.user,
        }
    }

    /// The next offset to consume from `topic`'s partition of `shard`, if one was
    /// stored. A read error is returned, never taken for "no offset" (which would
    /// consume the partition again from its beginning).
    pub fn stream_offset(&self, shard: ShardId, topic: &str) -> Result<Option<i64>, StorageError> {
        let key = layout::stream_offset(shard, topic);
        let Some(stored) = self.storage.get(Cf::State, &key)? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = stored.try_into().map_err(|_| StorageError::Corrupt {
            key: format!("offset of {topic} for shard {shard}"),
            reason: "not 8 bytes".into(),
        })?;
        Ok(Some(i64::from_be_bytes(bytes)))
    }

    /// Durably records next offsets `(shard, topic, offset)` with the shards' state.
    pub async fn store_stream_offsets<'a>(
        &self,
        offsets: impl Iterator<Item = (ShardId, &'a str, i64)>,
    ) -> Result<(), StorageError> {
        let ops = offsets
            .map(|(shard, topic, offset)| Op::Put {
                cf: Cf::State,
                key: layout::stream_offset(shard, topic),
                value: offset.to_be_bytes().to_vec(),
            })
            .collect();
        self.commits.submit(ops).await
    }

    /// Starts the conversation actors' arbiter, on this node's storage and clock.
    pub fn start_conversations(&self, settings: conversation::ConversationSettings) -> conversation::Conversations {
        conversation::Conversations::start(self.storage.clone(), self.shard_count, self.clock.clone(), settings)
    }

    /// Events in flight on each shard now (accepted, not yet applied everywhere and
    /// learned), never more than [`Engine::max_events_in_flight`].
    pub fn events_in_flight(&self) -> Vec<usize> {
        self.in_flight
            .iter()
            .map(|credits| self.in_flight_limit as usize - credits.available_permits())
            .collect()
    }

    /// Events a shard may have in flight (`engine.max_events_in_flight`).
    pub fn max_events_in_flight(&self) -> usize {
        self.in_flight_limit as usize
    }

    /// The shards this node serves now.
    pub fn local_shards(&self) -> Vec<ShardId> {
        self.ownership.serving()
    }

    /// The engine's clock, in unix ms.
    pub fn now_millis(&self) -> i64 {
        self.clock.now_millis()
    }

    /// A stored event by id.
    pub fn get_event(&self, id: &str) -> Result<Event, CatalogError> {
        for shard in 0..self.shard_count {
            let Some(log_key) = self.storage.get(Cf::Events, &layout::event_id(shard, id))? else {
                continue;
            };
            let Some(bytes) = self.storage.get(Cf::Events, &log_key)? else {
                continue;
            };
            return decode_stored(&bytes).map_err(|reason| {
                StorageError::Corrupt {
                    key: format!("event {id}"),
                    reason,
                }
                .into()
            });
        }
        Err(CatalogError::NotFound(format!("event {id:?}")))
    }

    /// What the database holds in memory now.
    pub fn storage_memory(&self) -> crate::storage::MemoryUse {
        self.storage.memory()
    }

    /// The number of shards.
    pub fn shard_count(&self) -> u16 {
        self.shard_count
    }
}

#[cfg(test)]
mod tests;
