//! The event log as the learner reads it: every shard's log past a sequence,
//! merged in event-time order, so that models learned from it (a restart's catch-up,
//! a rebuild) see the sessions in the order they happened, as the live stream
//! showed them, not one shard's log after another's. Co-visitation counts the order
//! of sessions (its decays and its ring of recent sessions), so a rebuild learned
//! shard by shard would score differently from the models it replaces.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::domain::event::{decode_stored, Event};
use crate::storage::{layout, Cf, Entry, Storage, StorageError};
use crate::topology::ShardId;

/// Where one shard's log is read from: its first key and the prefix of its keys.
pub struct ShardStart {
    pub shard: ShardId,
    start: Vec<u8>,
    prefix: Vec<u8>,
}

impl ShardStart {
    /// `shard`'s log from sequence `from` on.
    pub fn new(shard: ShardId, from: u64) -> ShardStart {
        ShardStart {
            shard,
            start: layout::event_log(shard, from),
            prefix: layout::event_log_prefix(shard),
        }
    }
}

/// Which event comes first: the earlier event time, then the earlier arrival, then
/// shard and sequence (a total order, so every read gives the same one).
type Order = (i64, i64, ShardId, u64);

/// The shards' logs merged by event time: each shard's next event waits in `next`,
/// and the heap says whose is first.
pub struct MergedLog<'a> {
    scans: Vec<Box<dyn Iterator<Item = Result<Entry, StorageError>> + 'a>>,
    next: Vec<Option<(ShardId, u64, Event)>>,
    heap: BinaryHeap<Reverse<(Order, usize)>>,
}

impl<'a> MergedLog<'a> {
    pub fn open(storage: &'a Storage, starts: &'a [ShardStart]) -> Result<MergedLog<'a>, StorageError> {
        let mut log = MergedLog {
            scans: Vec::with_capacity(starts.len()),
            next: Vec::with_capacity(starts.len()),
            heap: BinaryHeap::with_capacity(starts.len()),
        };
        for (index, start) in starts.iter().enumerate() {
            log.scans
                .push(Box::new(storage.scan_from(Cf::Events, &start.start, &start.prefix)));
            log.next.push(None);
            log.advance(index, start.shard)?;
        }
        Ok(log)
    }

    /// Reads scan `index`'s next readable event into its slot and the heap.
    fn advance(&mut self, index: usize, shard: ShardId) -> Result<(), StorageError> {
        for entry in &mut self.scans[index] {
            let (key, value) = entry?;
            let Some(seq) = layout::event_log_seq(&key) else {
                continue;
            };
            // One unreadable record (stored by an older version that let a body nest
            // deeper than it can read back) must not stop every rebuild: it is skipped.
            let event = match decode_stored(&value) {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(shard, seq, %error, "an unreadable event in the log is not learned");
                    continue;
                }
            };
            let order = (event.event_time(), event.ingest_timestamp, shard, seq);
            self.heap.push(Reverse((order, index)));
            self.next[index] = Some((shard, seq, event));
            return Ok(());
        }
        Ok(())
    }

    /// The next event in event-time order, with its shard and sequence.
    pub fn next_event(&mut self) -> Result<Option<(ShardId, u64, Event)>, StorageError> {
        let Some(Reverse((_, index))) = self.heap.pop() else {
            return Ok(None);
        };
        let Some((shard, seq, event)) = self.next[index].take() else {
            return Ok(None);
        };
        self.advance(index, shard)?;
        Ok(Some((shard, seq, event)))
    }
}

/// About how many events the shards' logs hold from `starts` on (the sequences
/// between; a deleted user's events leave gaps, so it can be more than there are).
pub fn length(storage: &Storage, starts: &[ShardStart]) -> Result<u64, StorageError> {
    let mut events = 0;
    for start in starts {
        let last = storage
            .last_with_prefix(Cf::Events, &start.prefix)?
            .and_then(|(key, _)| layout::event_log_seq(&key));
        let first = match storage.scan_from(Cf::Events, &start.start, &start.prefix).next() {
            Some(entry) => layout::event_log_seq(&entry?.0),
            None => None,
        };
        if let (Some(first), Some(last)) = (first, last) {
            events += last.saturating_sub(first) + 1;
        }
    }
    Ok(events)
}
