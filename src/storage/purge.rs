//! Physical removal of deleted records. A delete in RocksDB writes a marker; the
//! record's bytes stay in older files (and in the WAL, and the marker's key in the
//! MANIFEST's file bounds) until compaction rewrites them. [`Storage::purge`] makes
//! that happen now for the shards that held a deleted user: the WAL is retired by a
//! flush of every family, the shards' key ranges are compacted down to the bottom
//! level (where deletion markers are dropped), and one more MANIFEST write starts a
//! new MANIFEST that names only the files left (the database is opened to start a
//! new one at every write).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rocksdb::{BottommostLevelCompaction, CompactOptions, FlushOptions};

use super::{Cf, Storage, StorageError};
use crate::topology::ShardId;

/// The families whose keys start with the shard number and can hold a user's or a
/// session's records. (Rankings are kept by age only and name no one; models, items,
/// tables and node records are not per user.)
const PURGED: [Cf; 5] = [Cf::Users, Cf::Events, Cf::UserEvents, Cf::SessionEvents, Cf::State];

/// A key written and deleted in `state` to make one more MANIFEST write after the
/// compactions (it names no shard: shard keys start with two bytes of shard number).
const MARKER: &[u8] = b"\xff\xffpurge";

/// What a purge did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PurgeReport {
    /// The shards whose key ranges were compacted.
    pub shards: Vec<ShardId>,
    /// Key ranges compacted (shards × families).
    pub ranges: usize,
    pub took_ms: u64,
}

impl Storage {
    /// Rewrites the key ranges of `shards` (every shard when `None`) so that deleted
    /// records are gone from every file of the database. Blocking; seconds to
    /// minutes on a large database: call it off the request path.
    pub fn purge(&self, shards: Option<&BTreeSet<ShardId>>) -> Result<PurgeReport, StorageError> {
        let started = Instant::now();
        let ranges = self.compact_shards(shards)?;
        Ok(PurgeReport {
            shards: shards
                .map(|shards| shards.iter().copied().collect())
                .unwrap_or_default(),
            ranges,
            took_ms: duration_ms(started.elapsed()),
        })
    }

    fn compact_shards(&self, shards: Option<&BTreeSet<ShardId>>) -> Result<usize, StorageError> {
        // Memtables to files first: the WAL files holding the deleted records retire.
        let mut wait = FlushOptions::default();
        wait.set_wait(true);
        let families: Vec<_> = Cf::ALL.iter().map(|cf| self.cf(*cf)).collect();
        self.db.flush_cfs_opt(&families, &wait)?;
        let mut options = CompactOptions::default();
        options.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        let mut ranges = 0;
        for cf in PURGED {
            match shards {
                None => {
                    self.db
                        .compact_range_cf_opt(self.cf(cf), None::<&[u8]>, None::<&[u8]>, &options);
                    ranges += 1;
                }
                Some(shards) => {
                    for shard in shards {
                        let from = shard.to_be_bytes();
                        let to = shard.checked_add(1).map(ShardId::to_be_bytes);
                        self.db.compact_range_cf_opt(
                            self.cf(cf),
                            Some(&from[..]),
                            to.as_ref().map(|to| &to[..]),
                            &options,
                        );
                        ranges += 1;
                    }
                }
            }
        }
        // The compactions' MANIFEST write began a new MANIFEST from the version before
        // them; one more write begins one from the version after.
        let mut batch = self.batch();
        batch.put(Cf::State, MARKER, b"");
        batch.delete(Cf::State, MARKER);
        batch.commit()?;
        self.db.flush_cf_opt(self.cf(Cf::State), &wait)?;
        Ok(ranges)
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
