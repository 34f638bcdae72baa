//! Training: the learners fed by the event stream, and the artifacts they keep.
//!
//! One learner thread owns the writes. Every event a shard makes durable reaches it
//! (after its 202, off the request and actor threads) and updates, in place, the
//! [`Trained`] artifacts: popularity, co-visitation, and the learned ranker from the
//! outcomes of earlier rankings. The ranking path reads them under a shared lock,
//! never queueing behind an actor. The artifacts are persisted to the `models`
//! column family with, per shard, the last log sequence they reflect; a restart loads
//! them and learns the rest of the log. Periodically, and on request, they are
//! rebuilt from the whole log, which no longer holds deleted users' events.

pub mod covisit;
pub mod ltr;
mod popularity;

use std::collections::{hash_map::DefaultHasher, BTreeMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use compact_str::CompactString;
use crossbeam::channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::config::TrainingConfig;
use crate::engine::event::Event;
use crate::engine::live_state::InteractionKind;
use crate::engine::SequencedEvent;
use crate::storage::{keys, Cf, Storage, StorageError};
use crate::topology::{shard_for, ShardId};
use covisit::SessionModel;
use ltr::{FeatureVector, Ltr};
pub use popularity::Popularity;

/// A compact index of an item id in the artifacts.
pub type ItemIndex = u32;

/// Item ids ↔ their indexes. Ranking looks up every candidate here: FxHash, and
/// ids stored inline, so that comparing one does not read another allocation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ItemIds {
    index: FxHashMap<CompactString, ItemIndex>,
    ids: Vec<String>,
}

impl ItemIds {
    pub fn get(&self, id: &str) -> Option<ItemIndex> {
        self.index.get(id).copied()
    }

    pub fn id(&self, index: ItemIndex) -> &str {
        &self.ids[index as usize]
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn intern(&mut self, id: &str) -> ItemIndex {
        if let Some(&index) = self.index.get(id) {
            return index;
        }
        let index = self.ids.len() as ItemIndex;
        self.ids.push(id.to_owned());
        self.index.insert(CompactString::from(id), index);
        index
    }
}

/// What one recommend response showed, in order, with the features each item was
/// ranked with; events carrying its `rec_id` turn it into training examples.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecRecord {
    pub at: i64,
    pub uid: Option<String>,
    pub sid: Option<String>,
    pub model: String,
    pub shown: Vec<(String, FeatureVector)>,
}

/// A ranking to record, borrowing what it shows: stored in the encoding of
/// [`RecRecord`], without copying every id first.
#[derive(Debug, Serialize)]
pub struct ShownRecord<'a> {
    pub at: i64,
    pub uid: Option<&'a str>,
    pub sid: Option<&'a str>,
    pub model: &'a str,
    pub shown: Vec<(&'a str, FeatureVector)>,
}

impl RecRecord {
    /// Where a `rec_id`'s record is stored.
    pub fn key(rec_id: &str, shards: u16) -> Vec<u8> {
        keys::rec(shard_for(rec_id.as_bytes(), shards), rec_id)
    }
}

/// Shown items ranked below a chosen one that still count as passed over.
const NEGATIVES_BELOW: usize = 2;

/// The learned artifacts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trained {
    pub items: ItemIds,
    pub popularity: Popularity,
    pub covisit: SessionModel,
    pub ltr: Ltr,
    /// Per source shard, the last log sequence learned.
    applied: BTreeMap<ShardId, u64>,
    /// Events learned.
    pub events: u64,
}

impl Trained {
    pub fn new(config: &TrainingConfig) -> Trained {
        Trained {
            items: ItemIds::default(),
            popularity: Popularity::new(config.popularity_half_life_ms as f64),
            covisit: SessionModel::new(covisit::Params::default()),
            ltr: Ltr::default(),
            applied: BTreeMap::new(),
            events: 0,
        }
    }

    /// Learns one event of `source`'s log (once: sequences already learned are skipped).
    /// `shown` is the record of the ranking the event's `rec_id` names, if any.
    pub fn learn(&mut self, source: ShardId, seq: u64, event: &Event, shown: Option<&RecRecord>, segment_field: &str) {
        let applied = self.applied.entry(source).or_default();
        if seq <= *applied {
            return;
        }
        *applied = seq;
        self.learn_event(event, shown, segment_field);
    }

    /// Learns one event without a log position (offline replays).
    pub fn learn_event(&mut self, event: &Event, shown: Option<&RecRecord>, segment_field: &str) {
        self.events += 1;
        let kind = InteractionKind::of(&event.event_type);
        let weight = kind.weight(event.dwell_ms);
        let segment = segment_of(event, segment_field);
        let session = session_key(event);
        let visits = matches!(
            kind,
            InteractionKind::View | InteractionKind::Click | InteractionKind::Cart | InteractionKind::Conversion
        );
        for item_id in event.items() {
            let item = self.items.intern(item_id);
            if weight > 0.0 {
                self.popularity.add(item, weight, event.original_timestamp, segment);
            }
            if let (true, Some(session)) = (visits, session) {
                self.covisit.observe(session, item);
            }
        }
        if let Some(shown) = shown {
            self.learn_outcome(event, kind, shown);
        }
    }

    /// Chosen items are positives; shown items above them (and a few below) negatives.
    fn learn_outcome(&mut self, event: &Event, kind: InteractionKind, shown: &RecRecord) {
        let importance = match kind {
            InteractionKind::Click => 1.0,
            InteractionKind::Cart => 2.0,
            InteractionKind::Conversion => 3.0,
            _ => return,
        };
        let chosen: Vec<&str> = event.items().collect();
        let Some(last) = shown.shown.iter().rposition(|(id, _)| chosen.contains(&id.as_str())) else {
            return;
        };
        let end = (last + 1 + NEGATIVES_BELOW).min(shown.shown.len());
        for (id, features) in &shown.shown[..end] {
            self.ltr.learn(features, chosen.contains(&id.as_str()), importance);
        }
    }
}

/// The session an event belongs to for co-visitation: its sid, else its user.
fn session_key(event: &Event) -> Option<u64> {
    Some(covisit_key(event.sid.as_deref().or(event.uid.as_deref())?))
}

/// How the co-visitation model names a session (or a user without one).
pub fn covisit_key(key: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// The popularity segment of an event: the value of `field` among its properties.
fn segment_of<'a>(event: &'a Event, field: &str) -> Option<&'a str> {
    if field.is_empty() {
        return None;
    }
    event.properties.get(field).and_then(|value| value.as_str())
}

/// Commands to the learner thread, handled in the order sent.
enum Command {
    /// Rankings wait in the shared buffer: write them soon.
    WriteRecords,
    Learn(Vec<Arc<SequencedEvent>>),
    Retrain(oneshot::Sender<Result<RetrainReport, String>>),
    Stop,
}

/// What a rebuild from the log did.
#[derive(Debug, Clone, Serialize)]
pub struct RetrainReport {
    pub events: u64,
    pub items: usize,
    pub took_ms: u64,
}

/// The handle on the learner thread and its artifacts.
pub struct Training {
    trained: Arc<RwLock<Trained>>,
    /// Rankings for the learner to write.
    records: RecordBuffer,
    commands: Sender<Command>,
    thread: Mutex<Option<JoinHandle<()>>>,
    config: TrainingConfig,
    shards: u16,
    /// While set, new events are not learned (offline evaluation freezes the models
    /// to rank test sessions as the published protocols do).
    frozen: AtomicBool,
}

impl Training {
    /// Loads the persisted artifacts and starts the learner thread, which first
    /// learns the part of the log they do not reflect yet.
    pub fn start(storage: Storage, shards: u16, config: TrainingConfig) -> Result<Arc<Training>, StorageError> {
        let trained = match storage.get(Cf::Models, keys::TRAINED)? {
            Some(bytes) => postcard::from_bytes(&bytes).unwrap_or_else(|error| {
                tracing::warn!(%error, "stored models unreadable; relearning them from the event log");
                Trained::new(&config)
            }),
            None => Trained::new(&config),
        };
        let trained = Arc::new(RwLock::new(trained));
        let (commands, inbox) = unbounded();
        let records = RecordBuffer::default();
        let learner = Learner {
            storage,
            records: records.clone(),
            shards,
            config: config.clone(),
            trained: trained.clone(),
            inbox,
        };
        let thread = std::thread::Builder::new()
            .name("learner".into())
            .spawn(move || learner.run())
            .expect("spawning the learner thread");
        Ok(Arc::new(Training {
            trained,
            records,
            commands,
            thread: Mutex::new(Some(thread)),
            config,
            shards,
            frozen: AtomicBool::new(false),
        }))
    }

    /// Durable events of one shard, in sequence order.
    pub fn observe(&self, events: Vec<Arc<SequencedEvent>>) {
        if !events.is_empty() && !self.frozen.load(Ordering::Relaxed) {
            let _ = self.commands.send(Command::Learn(events));
        }
    }

    /// Stops (or resumes) learning new events; events passed over while frozen are
    /// learned only by the next rebuild from the log. For offline evaluation.
    pub fn set_frozen(&self, frozen: bool) {
        self.frozen.store(frozen, Ordering::Relaxed);
    }

    /// The artifacts, for reading (hold the guard briefly: the learner waits on it).
    pub fn read(&self) -> RwLockReadGuard<'_, Trained> {
        self.trained.read()
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
        let key = RecRecord::key(rec_id, self.shards);
        let first = {
            let mut records = self.records.lock();
            records.push((key, bytes));
            records.len() == 1
        };
        if first && self.commands.send(Command::WriteRecords).is_err() {
            tracing::warn!("the learner is stopped; rankings are not recorded");
        }
    }

    /// The popularity segment field.
    pub fn segment_field(&self) -> &str {
        &self.config.segment_field
    }

    pub fn shards(&self) -> u16 {
        self.shards
    }

    /// Rebuilds the artifacts from the whole event log and answers when done.
    pub async fn retrain(&self) -> Result<RetrainReport, String> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Retrain(reply))
            .map_err(|_| "the learner is stopped".to_owned())?;
        answer.await.map_err(|_| "the learner stopped".to_owned())?
    }

    /// Persists the artifacts and stops the learner thread.
    pub fn stop(&self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// Learned events are written under the lock in chunks this big.
const CHUNK: usize = 1024;

/// How long the learner lets rankings gather before it writes them: one wake-up and
/// one write per 10 ms at most, however many rankings are served (an outcome naming
/// one never waits for it: the learner writes the buffer before it learns).
const RECORD_BATCH_WAIT: Duration = Duration::from_millis(10);

/// Rankings waiting to be written: their keys and encoded records.
type RecordBuffer = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>)>>>;

struct Learner {
    storage: Storage,
    records: RecordBuffer,
    shards: u16,
    config: TrainingConfig,
    trained: Arc<RwLock<Trained>>,
    inbox: Receiver<Command>,
}

impl Learner {
    fn run(self) {
        let started = Instant::now();
        let caught_up = self.catch_up();
        tracing::info!(
            events = caught_up,
            took_ms = started.elapsed().as_millis() as u64,
            "models caught up with the event log"
        );
        let persist_every = Duration::from_millis(self.config.persist_interval_ms);
        let retrain_every = Duration::from_millis(self.config.retrain_interval_ms);
        let mut next_persist = Instant::now() + persist_every;
        let mut next_retrain = Instant::now() + retrain_every;
        let mut dirty = caught_up > 0;
        // When the buffered rankings are to be written; events are learned meanwhile.
        let mut records_due: Option<Instant> = None;
        loop {
            let deadline = next_persist.min(next_retrain);
            let deadline = records_due.map_or(deadline, |due| due.min(deadline));
            match self.inbox.recv_deadline(deadline) {
                Ok(Command::WriteRecords) => {
                    // Rankings that follow within the wait share the write.
                    records_due.get_or_insert_with(|| Instant::now() + RECORD_BATCH_WAIT);
                }
                Ok(Command::Learn(events)) => {
                    self.write_records();
                    self.learn(&events);
                    dirty = true;
                }
                Ok(Command::Retrain(reply)) => {
                    let _ = reply.send(self.retrain());
                    next_retrain = Instant::now() + retrain_every;
                    dirty = true;
                }
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    if records_due.is_some_and(|due| Instant::now() >= due) {
                        self.write_records();
                        records_due = None;
                    }
                    if Instant::now() >= next_retrain {
                        if let Err(error) = self.retrain() {
                            tracing::error!(%error, "periodic retraining failed");
                        }
                        next_retrain = Instant::now() + retrain_every;
                        dirty = true;
                    }
                    if Instant::now() >= next_persist {
                        if dirty {
                            self.persist();
                            dirty = false;
                        }
                        next_persist = Instant::now() + persist_every;
                    }
                }
            }
        }
        self.write_records();
        if dirty {
            self.persist();
        }
    }

    fn learn(&self, events: &[Arc<SequencedEvent>]) {
        let shown: Vec<Option<RecRecord>> = events.iter().map(|event| self.shown(&event.event)).collect();
        let mut trained = self.trained.write();
        for (event, shown) in events.iter().zip(&shown) {
            trained.learn(
                event.source,
                event.seq,
                &event.event,
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

    /// The ranking an outcome event refers to.
    fn shown(&self, event: &Event) -> Option<RecRecord> {
        let rec_id = event.links.get("rec_id")?.as_str()?;
        let bytes = self
            .storage
            .get(Cf::Rankings, &RecRecord::key(rec_id, self.shards))
            .ok()??;
        postcard::from_bytes(&bytes).ok()
    }

    /// Learns, into the shared artifacts, each shard's log past what they reflect.
    fn catch_up(&self) -> u64 {
        let mut learned = 0;
        for shard in 0..self.shards {
            let from = self.trained.read().applied.get(&shard).copied().unwrap_or(0) + 1;
            let result = self.scan_log(shard, from, |chunk| {
                let mut trained = self.trained.write();
                for (seq, event, shown) in chunk {
                    trained.learn(shard, *seq, event, shown.as_ref(), &self.config.segment_field);
                }
                learned += chunk.len() as u64;
            });
            if let Err(error) = result {
                tracing::error!(shard, %error, "learning the event log failed");
            }
        }
        learned
    }

    /// Rebuilds the artifacts from the whole log, then swaps them in. Events that
    /// arrive meanwhile wait in the inbox; those the rebuild already saw are skipped.
    fn retrain(&self) -> Result<RetrainReport, String> {
        let started = Instant::now();
        // Outcomes in the log may name rankings still in the buffer.
        self.write_records();
        let mut fresh = Trained::new(&self.config);
        for shard in 0..self.shards {
            self.scan_log(shard, 1, |chunk| {
                for (seq, event, shown) in chunk {
                    fresh.learn(shard, *seq, event, shown.as_ref(), &self.config.segment_field);
                }
            })
            .map_err(|error| error.to_string())?;
        }
        let report = RetrainReport {
            events: fresh.events,
            items: fresh.items.len(),
            took_ms: started.elapsed().as_millis() as u64,
        };
        *self.trained.write() = fresh;
        tracing::info!(?report, "models rebuilt from the event log");
        Ok(report)
    }

    /// Feeds `shard`'s log from `from` on to `learn`, in chunks.
    fn scan_log(
        &self,
        shard: ShardId,
        from: u64,
        mut learn: impl FnMut(&[(u64, Event, Option<RecRecord>)]),
    ) -> Result<(), StorageError> {
        let prefix = keys::event_log_prefix(shard);
        let mut chunk = Vec::with_capacity(CHUNK);
        for entry in self
            .storage
            .scan_from(Cf::Events, &keys::event_log(shard, from), &prefix)
        {
            let (key, value) = entry?;
            let Some(seq) = keys::event_log_seq(&key) else { continue };
            let event: Event = serde_json::from_slice(&value).map_err(|error| StorageError::Corrupt {
                key: format!("event {seq} of shard {shard}"),
                reason: error.to_string(),
            })?;
            let shown = self.shown(&event);
            chunk.push((seq, event, shown));
            if chunk.len() == CHUNK {
                learn(&chunk);
                chunk.clear();
            }
        }
        learn(&chunk);
        Ok(())
    }

    fn persist(&self) {
        let bytes = match postcard::to_stdvec(&*self.trained.read()) {
            Ok(bytes) => bytes,
            Err(error) => return tracing::error!(%error, "serializing the models failed"),
        };
        let mut batch = self.storage.batch();
        batch.put(Cf::Models, keys::TRAINED, &bytes);
        for retired in keys::RETIRED_TRAINED {
            batch.delete(Cf::Models, retired);
        }
        match batch.commit() {
            Ok(()) => tracing::debug!(bytes = bytes.len(), "models persisted"),
            Err(error) => tracing::error!(%error, "persisting the models failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_record_reads_back_as_a_rec_record() {
        let shown = ShownRecord {
            at: 42,
            uid: Some("u1"),
            sid: None,
            model: "default",
            shown: vec![("a", [0.5, 1.0, 0.0, 0.0, 0.0]), ("b", [0.0; ltr::FEATURES])],
        };
        let bytes = postcard::to_stdvec(&shown).unwrap();
        let record: RecRecord = postcard::from_bytes(&bytes).unwrap();
        assert_eq!((record.at, record.uid.as_deref(), record.sid), (42, Some("u1"), None));
        assert_eq!(record.model, "default");
        let ids: Vec<_> = record.shown.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(record.shown[0].1, [0.5, 1.0, 0.0, 0.0, 0.0]);
    }
}
