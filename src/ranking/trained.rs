//! The trained artifacts the models score with: item ids, popularity,
//! co-visitation and the learned ranker, and how one event updates them. The
//! learner thread (`training`) owns a working copy and publishes immutable
//! snapshots of it ([`TrainedSnapshots`]); ranking reads the latest without a lock.

use std::collections::{hash_map::DefaultHasher, BTreeMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use compact_str::CompactString;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::covisit::{self, SessionModel};
use super::footprint;
use super::ltr::Ltr;
use super::popularity::Popularity;
use super::record::RecRecord;
use super::tuning::Tuning;
use crate::domain::event::Event;
use crate::domain::live_state::InteractionKind;
use crate::topology::ShardId;

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

    /// Estimated heap bytes: the index and the ids (an id longer than 24 bytes is
    /// also stored out of line by the index).
    pub fn heap_bytes(&self) -> usize {
        let ids: usize = self
            .ids
            .iter()
            .map(|id| id.capacity() + if id.len() > 24 { id.len() } else { 0 })
            .sum();
        footprint::map(&self.index) + footprint::vec(&self.ids) + ids
    }

    pub fn intern(&mut self, id: &str) -> ItemIndex {
        if let Some(&index) = self.index.get(id) {
            return index;
        }
        let index = self.ids.len() as ItemIndex;
        self.ids.push(id.to_owned());
        self.index.insert(CompactString::from(id), index);
        index
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
    pub applied: BTreeMap<ShardId, u64>,
    /// Events learned.
    pub events: u64,
    /// The newest event time learned (unix ms, [`Event::event_time`]; 0 before any):
    /// the models' clock. Popularity decays to it (or to an earlier request time,
    /// [`super::RankContext::models_time`]), never to a wall clock past it, so that a
    /// backfill of history scores as the live stream that made it did.
    pub clock: i64,
    /// What the last rebuild's self-tuner chose (`None` before one had enough
    /// held-out clicks); the co-visitation model already scores with its choice.
    pub tuning: Option<Tuning>,
}

impl Trained {
    pub fn new(popularity_half_life_ms: f64) -> Trained {
        Trained {
            items: ItemIds::default(),
            popularity: Popularity::new(popularity_half_life_ms),
            covisit: SessionModel::new(covisit::Params::default()),
            ltr: Ltr::default(),
            applied: BTreeMap::new(),
            events: 0,
            clock: 0,
            tuning: None,
        }
    }

    /// Estimated heap bytes of the artifacts (item ids, popularity, co-visitation).
    pub fn heap_bytes(&self) -> usize {
        self.items.heap_bytes() + self.popularity.heap_bytes() + self.covisit.heap_bytes()
    }

    /// The time spent copying what the last published snapshot shared, since the
    /// last call (see [`SessionModel::take_copy_time`]).
    pub fn take_copy_time(&mut self) -> std::time::Duration {
        self.covisit.take_copy_time()
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
        let at = event.event_time();
        self.clock = self.clock.max(at);
        let kind = InteractionKind::of(&event.event_type);
        let weight = kind.weight(event.dwell_ms);
        let segment = segment_of(event, segment_field);
        let session = session_key(event);
        let visits = kind.is_visit();
        for item_id in event.items() {
            let item = self.items.intern(item_id);
            if weight > 0.0 {
                self.popularity.add(item, weight, at, segment);
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
pub fn session_key(event: &Event) -> Option<u64> {
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

/// The latest published snapshot of the trained artifacts, shared by the learner
/// (which publishes) and the models (which read): a swap of an `Arc`, no lock.
#[derive(Clone)]
pub struct TrainedSnapshots {
    latest: Arc<ArcSwap<Trained>>,
    /// The event property whose value segments popularity (`training.segment_field`).
    segment_field: Arc<str>,
    /// [`Trained::heap_bytes`] of the snapshot it was last estimated for. Stats and
    /// metrics ask for it on every read, and the estimate walks every item and session;
    /// a snapshot never changes, so once per snapshot is enough.
    heap_estimate: Arc<Mutex<Option<(Weak<Trained>, usize)>>>,
}

impl TrainedSnapshots {
    pub fn new(initial: Trained, segment_field: &str) -> TrainedSnapshots {
        TrainedSnapshots {
            latest: Arc::new(ArcSwap::from_pointee(initial)),
            segment_field: segment_field.into(),
            heap_estimate: Arc::default(),
        }
    }

    /// [`Trained::heap_bytes`] of `snapshot` (one [`TrainedSnapshots::latest`] gave),
    /// estimated once per snapshot.
    pub fn heap_bytes(&self, snapshot: &Arc<Trained>) -> usize {
        let mut estimate = self.heap_estimate.lock();
        if let Some((of, bytes)) = estimate.as_ref() {
            // A live `of` at the same address is the same snapshot (a dropped one's
            // address may have been reused).
            if of.strong_count() > 0 && std::ptr::eq(of.as_ptr(), Arc::as_ptr(snapshot)) {
                return *bytes;
            }
        }
        let bytes = snapshot.heap_bytes();
        *estimate = Some((Arc::downgrade(snapshot), bytes));
        bytes
    }

    /// The latest snapshot; it stays valid (and unchanged) for as long as it is held.
    pub fn latest(&self) -> Arc<Trained> {
        self.latest.load_full()
    }

    /// Replaces the snapshot readers get from now on.
    pub fn publish(&self, trained: Arc<Trained>) {
        self.latest.store(trained);
    }

    /// The popularity segment field.
    pub fn segment_field(&self) -> &str {
        &self.segment_field
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_estimate_is_of_the_snapshot_asked_about() {
        let snapshots = TrainedSnapshots::new(Trained::new(86_400_000.0), "segment");
        let first = snapshots.latest();
        let empty = snapshots.heap_bytes(&first);
        assert_eq!(snapshots.heap_bytes(&first), empty);

        let mut grown = Trained::new(86_400_000.0);
        for item in 0..1_000 {
            let index = grown.items.intern(&format!("item-{item}"));
            grown.covisit.observe(item / 5, index);
        }
        snapshots.publish(Arc::new(grown));
        let second = snapshots.latest();
        let bytes = snapshots.heap_bytes(&second);
        assert!(bytes > empty, "{bytes} after 1,000 items, {empty} before");
        assert_eq!(bytes, second.heap_bytes());
        // An older snapshot still held gets its own estimate again.
        assert_eq!(snapshots.heap_bytes(&first), empty);
    }
}
