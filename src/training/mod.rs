//! Training: the learner thread fed by the event stream, and the snapshots of the
//! trained artifacts it publishes.
//!
//! One learner thread owns a working copy of the [`Trained`] artifacts (popularity,
//! co-visitation, the learned ranker; their kinds and update rules live in
//! `ranking`). Every event a shard makes durable reaches it through a bounded queue
//! (after its 202, off the request and actor threads); the learner updates its copy
//! and publishes an immutable snapshot ([`TrainedSnapshots`]) that the models read
//! without a lock. The artifacts are persisted to the `models` column family with,
//! per shard, the last log sequence they reflect; a restart loads them and learns
//! the rest of the log. Periodically, and on request, they are rebuilt from the
//! whole log (which no longer holds deleted users' events) on a thread of its own,
//! while the learner keeps learning; the rebuild then catches up with the log and
//! replaces the working copy.
//!
//! - `log`: the shards' logs read in event-time order (catch-up and rebuilds).
//! - `holdout`: the most recent sessions a rebuild keeps aside to tune the models
//!   on (`ranking::tuning`) before it learns them too.
//! - `stored`: the artifacts as persisted, in chunks written as they are encoded.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flume::{Receiver, RecvTimeoutError, Sender, TrySendError};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::oneshot;

mod holdout;
mod log;
mod stored;

use self::holdout::Holdout;
use self::log::{MergedLog, ShardStart};
use crate::allocator::QuietRelease;
use crate::config::TrainingConfig;
use crate::domain::event::{DurableEventSink, Event, SequencedEvent};
use crate::ranking::{tuning, ItemCatalog, RecRecord, ShownRecord, Trained, TrainedSnapshots};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::{shard_for, ShardId};

/// Batches of durable events the learner's queue holds before a shard waits to
/// hand it more (backpressure on ingest instead of unbounded memory).
pub const LEARNER_QUEUE: usize = 256;

/// Commands to the learner thread, handled in the order sent.
enum Command {
    /// Rankings wait in the shared buffer: write them soon.
    WriteRecords,
    Learn(Vec<Arc<SequencedEvent>>),
    /// Sources to learn again from their start (answered once done).
    Forget(Vec<ShardId>, oneshot::Sender<()>),
    Retrain(oneshot::Sender<Result<RetrainReport, TrainingError>>),
    /// A rebuild from the log finished (on its own thread).
    Rebuilt(Result<Box<Trained>, TrainingError>, Instant),
    Stop,
}

/// What can go wrong in training.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TrainingError {
    #[error("training storage: {0}")]
    Storage(String),
    #[error("the learner is stopped")]
    Stopped,
    #[error("the models are frozen (offline evaluation): nothing is relearned")]
    Frozen,
}

impl From<StorageError> for TrainingError {
    fn from(error: StorageError) -> TrainingError {
        TrainingError::Storage(error.to_string())
    }
}

/// What a rebuild from the log did.
#[derive(Debug, Clone, Serialize)]
pub struct RetrainReport {
    pub events: u64,
    pub items: usize,
    pub took_ms: u64,
}

/// Where a `rec_id`'s record is stored.
pub fn record_key(rec_id: &str, shards: u16) -> Vec<u8> {
    layout::rec(shard_for(rec_id.as_bytes(), shards), rec_id)
}

/// The handle on the learner thread and the snapshots it publishes.
pub struct Training {
    snapshots: TrainedSnapshots,
    /// Rankings for the learner to write.
    records: RecordBuffer,
    commands: Sender<Command>,
    thread: Mutex<Option<JoinHandle<()>>>,
    shards: u16,
    /// While set, new events are not learned (offline evaluation freezes the models
    /// to rank test sessions as the published protocols do).
    frozen: Arc<AtomicBool>,
    /// Rebuilds from the log swapped in so far.
    rebuilds: Arc<AtomicU64>,
    /// The catalog the self-tuner reads item features from, once attached.
    catalog: Catalog,
}

/// The catalog, attached once the engine that reads it has started (after training).
type Catalog = Arc<OnceLock<Arc<dyn ItemCatalog>>>;

impl Training {
    /// Loads the persisted artifacts and starts the learner thread, which first
    /// learns the part of the log they do not reflect yet.
    pub fn start(storage: Storage, shards: u16, config: TrainingConfig) -> Result<Arc<Training>, StorageError> {
        let fresh = || Trained::new(config.popularity_half_life_ms as f64);
        let trained = match stored::load(&storage) {
            Ok(Some(trained)) => trained,
            Ok(None) => fresh(),
            Err(stored::LoadError::Storage(error)) => return Err(error),
            Err(error @ stored::LoadError::Unreadable(_)) => {
                tracing::warn!(%error, "relearning the models from the event log");
                fresh()
            }
        };
        let snapshots = TrainedSnapshots::new(trained.clone(), &config.segment_field);
        let (commands, inbox) = flume::bounded(LEARNER_QUEUE);
        let records = RecordBuffer::default();
        let rebuilds = Arc::new(AtomicU64::new(0));
        let frozen = Arc::new(AtomicBool::new(false));
        let catalog = Catalog::default();
        let learner = Learner {
            catalog: catalog.clone(),
            rebuilds: rebuilds.clone(),
            frozen: frozen.clone(),
            storage,
            records: records.clone(),
            shards,
            config,
            trained,
            snapshots: snapshots.clone(),
            publisher: Publisher::default(),
            inbox,
            commands: commands.downgrade(),
            rebuild: None,
        };
        let thread = std::thread::Builder::new()
            .name("learner".into())
            .spawn(move || learner.run())
            .expect("spawning the learner thread");
        Ok(Arc::new(Training {
            snapshots,
            records,
            commands,
            thread: Mutex::new(Some(thread)),
            shards,
            frozen,
            rebuilds,
            catalog,
        }))
    }

    /// Lets rebuilds read item features (affinity attributes, embeddings) to tune
    /// their weights; without it they tune co-visitation and popularity only.
    pub fn attach_catalog(&self, catalog: Arc<dyn ItemCatalog>) {
        let _ = self.catalog.set(catalog);
    }

    /// The snapshots the models read.
    pub fn snapshots(&self) -> &TrainedSnapshots {
        &self.snapshots
    }

    /// The latest published artifacts.
    pub fn latest(&self) -> Arc<Trained> {
        self.snapshots.latest()
    }

    /// The estimated heap of `snapshot` (one [`Training::latest`] gave), once per snapshot.
    pub fn heap_bytes(&self, snapshot: &Arc<Trained>) -> usize {
        self.snapshots.heap_bytes(snapshot)
    }

    /// Durable events of one shard, in sequence order. Resolves once the learner's
    /// queue took them: a shard hands on its next batch only then.
    pub fn observe(&self, events: Vec<Arc<SequencedEvent>>) -> BoxFuture<'static, ()> {
        if events.is_empty() || self.frozen.load(Ordering::Relaxed) {
            return Box::pin(std::future::ready(()));
        }
        let commands = self.commands.clone();
        Box::pin(async move {
            if commands.send_async(Command::Learn(events)).await.is_err() {
                tracing::warn!("the learner is stopped; durable events are learned from the log at the next start");
            }
        })
    }

    /// Stops (or resumes) learning new events; events passed over while frozen are
    /// learned only by the next rebuild from the log. While frozen, nothing is
    /// rebuilt either (the schedule passes, a retrain answers `Frozen`, a rebuild
    /// under way is dropped): the models stay exactly as they were. For offline
    /// evaluation.
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.store(frozen, Ordering::Relaxed);
    }

    /// Stores what a ranking showed, for the outcomes that name its `rec_id`. The
    /// learner thread writes the rankings in batches, so a request neither waits for
    /// RocksDB (nor joins a write group behind an event log fsync) nor wakes a thread
    /// per ranking. A ranking is written before any outcome event naming it is
    /// learned: that event reaches the learner after this call returned, and the
    /// learner writes the buffer before it learns.
    pub fn record(&self, rec_id: &str, record: &ShownRecord) {
        let bytes = match postcard::to_stdvec(record) {
            Ok(bytes) => bytes,
            Err(error) => return tracing::error!(%error, rec_id, "serializing a ranking record failed"),
        };
        let key = record_key(rec_id, self.shards);
        let first = {
            let mut records = self.records.lock();
            records.push((key, bytes));
            records.len() == 1
        };
        // A full queue holds Learn commands, and each writes the buffer first.
        if first {
            if let Err(TrySendError::Disconnected(_)) = self.commands.try_send(Command::WriteRecords) {
                tracing::warn!("the learner is stopped; rankings are not recorded");
            }
        }
    }

    pub fn shards(&self) -> u16 {
        self.shards
    }

    /// Makes `sources` count as never learned, so that their events are learned again
    /// from the start; answers once the learner did it (after what was queued before).
    pub async fn forget_sources(&self, sources: Vec<ShardId>) {
        let (done, forgotten) = oneshot::channel();
        if self.commands.send_async(Command::Forget(sources, done)).await.is_ok() {
            let _ = forgotten.await;
        }
    }

    /// How many rebuilds from the log have been swapped in. A rebuild learns this node's
    /// own log only: a reader of other sources (a cluster's other partitions) reads them
    /// again from where the rebuilt models stop.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds.load(Ordering::SeqCst)
    }

    /// Commands waiting in the learner's queue now (at most [`LEARNER_QUEUE`]).
    pub fn queued(&self) -> usize {
        self.commands.len()
    }

    /// Rebuilds the artifacts from the whole event log and answers when done.
    pub async fn retrain(&self) -> Result<RetrainReport, TrainingError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send_async(Command::Retrain(reply))
            .await
            .map_err(|_| TrainingError::Stopped)?;
        answer.await.map_err(|_| TrainingError::Stopped)?
    }

    /// Persists the artifacts and stops the learner thread.
    pub fn stop(&self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl DurableEventSink for Training {
    fn accept(&self, events: Vec<Arc<SequencedEvent>>) -> BoxFuture<'static, ()> {
        self.observe(events)
    }
}

/// How long the learner lets rankings gather before it writes them: one wake-up and
/// one write per 10 ms at most, however many rankings are served (an outcome naming
/// one never waits for it: the learner writes the buffer before it learns).
const RECORD_BATCH_WAIT: Duration = Duration::from_millis(10);

/// A snapshot's cost: the snapshot itself (it shares the item states), then the copies
/// of shared states the learner makes as it changes them. The next is published once a
/// hundred times that cost has passed, so that publishing takes at most 1% of a core (a
/// small model is published after every batch)...
const PUBLISH_COST_FACTOR: u32 = 100;
/// ...unless models would then be older than this, when publishing may take up to 5%
/// of a core (twenty times the cost) to keep them this fresh. Under Kafka ingest at full
/// speed (10,000 items) a snapshot cost ~7 ms: at twenty times it, republishing and its
/// copies were ~7% of the server's CPU.
const MODELS_FRESH_WITHIN: Duration = Duration::from_secs(1);
const PUBLISH_COST_FACTOR_WHEN_STALE: u32 = 20;

/// Rankings waiting to be written: their keys and encoded records.
type RecordBuffer = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;

/// When the working copy is next published.
#[derive(Default)]
struct Publisher {
    /// Changes not yet in a published snapshot.
    pending: bool,
    /// When the last snapshot was published, and what it has cost so far.
    last: Option<(Instant, Duration)>,
}

impl Publisher {
    /// Adds copies on write the learner made of what the last snapshot shared.
    fn add_cost(&mut self, copying: Duration) {
        if let Some((_, cost)) = &mut self.last {
            *cost += copying;
        }
    }

    /// When a snapshot is due: `None` without changes to publish.
    fn due(&self) -> Option<Instant> {
        match (self.pending, self.last) {
            (false, _) => None,
            (true, None) => Some(Instant::now()),
            (true, Some((at, cost))) => Some(
                at + (cost * PUBLISH_COST_FACTOR)
                    .min(MODELS_FRESH_WITHIN)
                    .max(cost * PUBLISH_COST_FACTOR_WHEN_STALE),
            ),
        }
    }
}

/// A rebuild under way on its own thread, and who waits for its report.
struct Rebuild {
    waiting: Vec<oneshot::Sender<Result<RetrainReport, TrainingError>>>,
}

struct Learner {
    storage: Storage,
    records: RecordBuffer,
    shards: u16,
    config: TrainingConfig,
    /// The working copy: only this thread changes it.
    trained: Trained,
    snapshots: TrainedSnapshots,
    publisher: Publisher,
    inbox: Receiver<Command>,
    /// Where a rebuild thread reports (weak: the learner stops when every handle is gone).
    commands: flume::WeakSender<Command>,
    rebuild: Option<Rebuild>,
    /// Rebuilds swapped in so far (see [`Training::rebuilds`]).
    rebuilds: Arc<AtomicU64>,
    /// Set by [`Training::set_frozen`]: no rebuild may change the models.
    frozen: Arc<AtomicBool>,
    catalog: Catalog,
}

impl Learner {
    fn run(mut self) {
        let started = Instant::now();
        let caught_up = match catch_up(&self.storage, &mut self.trained, self.shards, &self.config) {
            Ok(learned) => learned,
            Err(error) => {
                tracing::error!(%error, "learning the event log failed; the next rebuild retries");
                0
            }
        };
        tracing::info!(
            events = caught_up,
            took_ms = started.elapsed().as_millis() as u64,
            "models caught up with the event log"
        );
        self.publish();
        let persist_every = Duration::from_millis(self.config.persist_interval_ms);
        let retrain_every = Duration::from_millis(self.config.retrain_interval_ms);
        let mut next_persist = Instant::now() + persist_every;
        let mut next_retrain = Instant::now() + retrain_every;
        let mut dirty = caught_up > 0;
        // When the buffered rankings are to be written; events are learned meanwhile.
        let mut records_due: Option<Instant> = None;
        // Freed memory is handed back once quiet after a change (learning, a rebuild
        // swapped in, a persist).
        let mut release = QuietRelease::default();
        loop {
            let mut deadline = next_persist.min(next_retrain);
            if let Some(due) = records_due {
                deadline = deadline.min(due);
            }
            match self.publisher.due() {
                Some(due) => deadline = deadline.min(due),
                // What the last snapshot replaced is freed only once it is published.
                None => deadline = release.due().map_or(deadline, |due| deadline.min(due)),
            }
            match self.inbox.recv_deadline(deadline) {
                Ok(Command::WriteRecords) => {
                    // Rankings that follow within the wait share the write.
                    records_due.get_or_insert_with(|| Instant::now() + RECORD_BATCH_WAIT);
                }
                Ok(Command::Learn(events)) => {
                    self.write_records();
                    let learning = Instant::now();
                    self.learn(&events);
                    crate::metrics::training("learn", learning.elapsed());
                    dirty = true;
                    self.publisher.pending = true;
                    release.worked(Instant::now());
                }
                Ok(Command::Forget(sources, done)) => {
                    for source in sources {
                        self.trained.applied.remove(&source);
                    }
                    let _ = done.send(());
                }
                Ok(Command::Retrain(reply)) if self.is_frozen() => {
                    let _ = reply.send(Err(TrainingError::Frozen));
                }
                Ok(Command::Retrain(reply)) => {
                    self.start_rebuild(Some(reply));
                    next_retrain = Instant::now() + retrain_every;
                }
                Ok(Command::Rebuilt(rebuilt, started)) => {
                    self.finish_rebuild(rebuilt, started);
                    dirty = true;
                    release.worked(Instant::now());
                }
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if records_due.is_some_and(|due| now >= due) {
                self.write_records();
                records_due = None;
            }
            if now >= next_retrain {
                if !self.is_frozen() {
                    self.start_rebuild(None);
                }
                next_retrain = now + retrain_every;
            }
            if now >= next_persist {
                if dirty {
                    self.persist();
                    dirty = false;
                    release.worked(Instant::now());
                }
                next_persist = now + persist_every;
            }
            self.publisher.add_cost(self.trained.take_copy_time());
            if self.publisher.due().is_some_and(|due| now >= due) {
                self.publish();
            }
            let releasing = Instant::now();
            if self.publisher.due().is_none() && release.release_if_quiet(releasing) {
                crate::metrics::training("release_memory", releasing.elapsed());
            }
        }
        self.write_records();
        self.publish();
        if dirty {
            self.persist();
        }
    }

    fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::Relaxed)
    }

    /// Publishes a snapshot of the working copy, and sets when the next may be.
    fn publish(&mut self) {
        let started = Instant::now();
        self.snapshots.publish(Arc::new(self.trained.clone()));
        self.trained.take_copy_time();
        self.publisher = Publisher {
            pending: false,
            last: Some((Instant::now(), started.elapsed())),
        };
        crate::metrics::training("publish", started.elapsed());
        crate::metrics::models_published();
    }

    fn learn(&mut self, events: &[Arc<SequencedEvent>]) {
        for sequenced in events {
            let shown = match shown(&self.storage, self.shards, &sequenced.event) {
                Ok(shown) => shown,
                Err(error) => {
                    // The event is still learned; only its outcome example is lost.
                    tracing::warn!(%error, event = %sequenced.event.id, "reading the ranking an outcome names failed");
                    None
                }
            };
            self.trained.learn(
                sequenced.source,
                sequenced.seq,
                &sequenced.event,
                shown.as_ref(),
                &self.config.segment_field,
            );
        }
    }

    /// Writes the buffered rankings, in one batch, without the WAL: they are what a
    /// response showed, not anything a client was told is stored. A crash loses those
    /// not yet flushed (their outcomes are then not learned from); a clean stop keeps them.
    fn write_records(&self) {
        let records = std::mem::take(&mut *self.records.lock());
        if records.is_empty() {
            return;
        }
        let mut batch = self.storage.batch();
        for (key, bytes) in &records {
            batch.put(Cf::Rankings, key, bytes);
        }
        if let Err(error) = batch.commit_unlogged() {
            tracing::warn!(%error, "recording rankings failed; their outcomes will not be learned");
        }
    }

    /// Starts a rebuild from the whole log on a thread of its own, unless one is
    /// under way (a request then waits for that one).
    fn start_rebuild(&mut self, reply: Option<oneshot::Sender<Result<RetrainReport, TrainingError>>>) {
        if let Some(rebuild) = &mut self.rebuild {
            rebuild.waiting.extend(reply);
            return;
        }
        // Outcomes in the log may name rankings still in the buffer.
        self.write_records();
        self.rebuild = Some(Rebuild {
            waiting: reply.into_iter().collect(),
        });
        let (storage, shards, config) = (self.storage.clone(), self.shards, self.config.clone());
        let catalog = self.catalog.get().cloned();
        let Some(report_to) = self.commands.upgrade() else {
            return;
        };
        let spawned = std::thread::Builder::new().name("rebuild".into()).spawn(move || {
            let started = Instant::now();
            let rebuilt = rebuild(&storage, shards, &config, catalog).map(Box::new);
            let _ = report_to.send(Command::Rebuilt(rebuilt, started));
        });
        if let Err(error) = spawned {
            self.finish_rebuild(
                Err(TrainingError::Storage(format!("no rebuild thread: {error}"))),
                Instant::now(),
            );
        }
    }

    /// Swaps a finished rebuild in, once it learned the log written since it read it.
    fn finish_rebuild(&mut self, rebuilt: Result<Box<Trained>, TrainingError>, started: Instant) {
        let waiting = self.rebuild.take().map(|rebuild| rebuild.waiting).unwrap_or_default();
        let frozen = self.is_frozen();
        let result = rebuilt.and_then(|fresh| if frozen { Err(TrainingError::Frozen) } else { Ok(fresh) });
        let result = result.and_then(|mut fresh| {
            self.write_records();
            catch_up(&self.storage, &mut fresh, self.shards, &self.config)?;
            let report = RetrainReport {
                events: fresh.events,
                items: fresh.items.len(),
                took_ms: started.elapsed().as_millis() as u64,
            };
            crate::metrics::training("rebuild", started.elapsed());
            self.trained = *fresh;
            self.publish();
            self.rebuilds.fetch_add(1, Ordering::SeqCst);
            tracing::info!(?report, "models rebuilt from the event log");
            Ok(report)
        });
        if let Err(error) = &result {
            tracing::error!(%error, "rebuilding the models failed");
        }
        for reply in waiting {
            let _ = reply.send(result.clone());
        }
    }

    fn persist(&self) {
        let started = Instant::now();
        match stored::save(&self.storage, &self.trained) {
            Ok(persisted) => {
                crate::metrics::training("persist", started.elapsed());
                tracing::debug!(bytes = persisted.bytes, chunks = persisted.chunks, "models persisted");
            }
            Err(error) => tracing::error!(%error, "persisting the models failed"),
        }
    }
}

/// The ranking an outcome event refers to, if it names one that was recorded.
fn shown(storage: &Storage, shards: u16, event: &Event) -> Result<Option<RecRecord>, StorageError> {
    let Some(rec_id) = event.links.get("rec_id").and_then(|value| value.as_str()) else {
        return Ok(None);
    };
    let Some(bytes) = storage.get(Cf::Rankings, &record_key(rec_id, shards))? else {
        return Ok(None);
    };
    Ok(RecRecord::decode(&bytes))
}

/// Learns into `trained` each shard's log past what it reflects, in event-time order
/// ([`log::MergedLog`]); the events read. With a `holdout`, the events it holds are
/// counted as read but kept there, not learned.
fn learn_log(
    storage: &Storage,
    trained: &mut Trained,
    shards: u16,
    config: &TrainingConfig,
    mut holdout: Option<&mut Holdout>,
) -> Result<u64, TrainingError> {
    let starts: Vec<ShardStart> = (0..shards)
        .map(|shard| ShardStart::new(shard, trained.applied.get(&shard).copied().unwrap_or(0) + 1))
        .collect();
    let mut log = MergedLog::open(storage, &starts)?;
    let mut position = 0;
    while let Some((shard, seq, event)) = log.next_event()? {
        let shown = shown(storage, shards, &event)?;
        position += 1;
        if let Some(holdout) = holdout.as_deref_mut() {
            if holdout.holds(position - 1, trained, &event) {
                trained.applied.insert(shard, seq);
                holdout.keep(event, shown);
                continue;
            }
        }
        trained.learn(shard, seq, &event, shown.as_ref(), &config.segment_field);
    }
    Ok(position)
}

/// Learns into `trained` each shard's log past what it reflects; the events learned.
fn catch_up(
    storage: &Storage,
    trained: &mut Trained,
    shards: u16,
    config: &TrainingConfig,
) -> Result<u64, TrainingError> {
    learn_log(storage, trained, shards, config, None)
}

/// New models from the whole log, tuned ([`tuning`]) on its most recent sessions,
/// which are learned after the tuning ([`Holdout`]).
fn rebuild(
    storage: &Storage,
    shards: u16,
    config: &TrainingConfig,
    catalog: Option<Arc<dyn ItemCatalog>>,
) -> Result<Trained, TrainingError> {
    let mut fresh = Trained::new(config.popularity_half_life_ms as f64);
    let whole: Vec<ShardStart> = (0..shards).map(|shard| ShardStart::new(shard, 1)).collect();
    let mut holdout = Holdout::new(log::length(storage, &whole)?);
    learn_log(storage, &mut fresh, shards, config, Some(&mut holdout))?;
    let cases = holdout.cases(&fresh);
    match tuning::tune(&fresh, holdout.sessions(), &cases, catalog.as_deref()) {
        Some((tuning, params)) => {
            tracing::info!(
                sessions = tuning.sessions,
                cases = tuning.cases,
                hr20_before = tuning.before.hr20,
                mrr20_before = tuning.before.mrr20,
                hr20 = tuning.after.hr20,
                mrr20 = tuning.after.mrr20,
                trials = tuning.trials,
                took_ms = tuning.took_ms,
                chosen = ?tuning.chosen,
                "models tuned on the most recent sessions"
            );
            fresh.covisit.set_scoring(&params);
            fresh.tuning = Some(tuning);
        }
        None => tracing::info!(
            cases = cases.len(),
            needed = tuning::MIN_CASES,
            "too few held-out clicks to tune: the models keep their fixed weights"
        ),
    }
    for (event, shown) in holdout.into_events() {
        fresh.learn_event(&event, shown.as_ref(), &config.segment_field);
    }
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_once_a_hundred_times_its_cost_has_passed_or_a_second_at_most_twenty() {
        let mut publisher = Publisher::default();
        assert_eq!(publisher.due(), None, "nothing to publish");
        publisher.pending = true;
        assert!(
            publisher.due().is_some_and(|due| due <= Instant::now()),
            "the first is due at once"
        );
        let at = Instant::now();
        publisher.last = Some((at, Duration::from_millis(2)));
        assert_eq!(publisher.due(), Some(at + Duration::from_millis(200)));
        // The learner copies shared states as it changes them: the next is later.
        publisher.add_cost(Duration::from_millis(3));
        assert_eq!(publisher.due(), Some(at + Duration::from_millis(500)));
        // A hundred times the cost would leave the models older than a second.
        publisher.add_cost(Duration::from_millis(15));
        assert_eq!(publisher.due(), Some(at + Duration::from_secs(1)));
        // Twenty times the cost is the most publishing may take.
        publisher.add_cost(Duration::from_millis(80));
        assert_eq!(publisher.due(), Some(at + Duration::from_millis(2000)));
        publisher.pending = false;
        assert_eq!(publisher.due(), None);
    }
}
