//! The only module that imports RocksDB.
//!
//! One database per node with one column family per kind of record (DESIGN.md §2).
//! Sharded records start with the big-endian shard number, so a shard is a key
//! range (see [`keys`]). Writes go through [`Batch`]; with `Durability::Sync` a write
//! returns only after the WAL is fsynced. Concurrent writers are group-committed by
//! RocksDB's write path: the first writer of a group syncs the WAL once for all of
//! them, so N shard threads writing at once cost one fsync, not N.

pub mod backup;
mod commit;
#[cfg(test)]
pub mod faults;
pub mod layout;
mod purge;

pub use commit::{CommitQueue, Op};
pub use purge::PurgeReport;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB};

use serde::Serialize;

use crate::config::{Durability, StorageConfig};

/// A kind of record, stored in its own column family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cf {
    /// Table records: name, description, relations, field types.
    Tables,
    /// Catalog items, keyed by shard, table and id.
    Items,
    /// User rows, keyed by shard and uid.
    Users,
    /// Stored events.
    Events,
    /// Index uid → event keys, for deletion and training.
    UserEvents,
    /// Index sid → where its events start in each shard's log, to rebuild a session
    /// whose snapshot is unreadable (written without the WAL, flushed by
    /// checkpoints, rewritten by replay).
    SessionEvents,
    /// Actor snapshots.
    State,
    /// What each ranking response showed, by `rec_id`, for learning from its outcomes.
    Rankings,
    /// Trained model artifacts.
    Models,
    /// Node-level records: hashed API keys, offsets, schema version.
    Meta,
}

impl Cf {
    /// Every column family, in creation order.
    pub const ALL: [Cf; 10] = [
        Cf::Tables,
        Cf::Items,
        Cf::Users,
        Cf::Events,
        Cf::UserEvents,
        Cf::SessionEvents,
        Cf::State,
        Cf::Rankings,
        Cf::Models,
        Cf::Meta,
    ];

    fn name(self) -> &'static str {
        match self {
            Cf::Tables => "tables",
            Cf::Items => "items",
            Cf::Users => "users",
            Cf::Events => "events",
            Cf::UserEvents => "user_events",
            Cf::SessionEvents => "session_events",
            Cf::State => "state",
            Cf::Rankings => "rankings",
            Cf::Models => "models",
            Cf::Meta => "meta",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("write failed: {0}")]
    Commit(String),
    #[error("storage is shutting down")]
    Closed,
    #[error("stored record under {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },
}

/// The events' log keys of a shard (`[shard]0x00[seq]`) arrive in order, and the ids'
/// keys (`[shard]0x01[id]`) interleave with them: a memtable insert position kept per
/// 3-byte prefix (shard and tag) finds a log key's place next to the last one instead
/// of searching the whole skip list from its head, as one shared position does when
/// the two kinds alternate. RocksDB uses the hint for writes it does not run
/// concurrently: the group commit writes the events alone; a write grouped with
/// another thread's (a deletion, say) inserts as before.
fn events_options() -> Result<Options, StorageError> {
    Ok(Options::default()
        .get_options_from_string("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.3")?)
}

/// Flushes write level 0 uncompressed, compactions compress the levels below it
/// (LZ4). Level-0 files live until the next compaction reads them back, which then
/// need not decompress them: compressing at flush paid that CPU twice for files that
/// live seconds (RocksDB's flush code says as much of compressed flushes).
fn compressed_below_level_0(options: &mut Options) {
    use rocksdb::DBCompressionType::{Lz4, None as Uncompressed};
    options.set_compression_type(Lz4);
    options.set_compression_per_level(&[Uncompressed, Lz4, Lz4, Lz4, Lz4, Lz4, Lz4]);
}

/// Rankings are written at the rate of ranking requests, read back by rec_id, and expire
/// by age: FIFO compaction writes each byte once (flush only; leveled compaction
/// rewrote it level by level, most of the node's disk writes under ranking load) and
/// drops whole files past the retention (the TTL). Uncompressed: they are mostly
/// floats, which LZ4 barely shrinks at the cost of a burst of CPU per flush.
fn rankings_options(options: &mut Options, retention: Duration) {
    options.set_compression_type(rocksdb::DBCompressionType::None);
    options.set_compaction_style(rocksdb::DBCompactionStyle::Fifo);
    let mut fifo = rocksdb::FifoCompactOptions::default();
    fifo.set_max_table_files_size(MAX_RANKING_BYTES);
    options.set_fifo_compaction_options(&fifo);
    options.set_ttl(retention.as_secs().max(1));
}

/// A stored key and its value.
pub type Entry = (Box<[u8]>, Box<[u8]>);

/// A shared handle on the node's database.
#[derive(Clone)]
pub struct Storage {
    db: Arc<DB>,
    durability: Durability,
    /// The block cache; the memtables are charged to it (see [`Settings::memory_bytes`]).
    cache: rocksdb::Cache,
    /// The cache's capacity.
    memory_bytes: usize,
    /// Failures to inject, by column family (unit tests only).
    #[cfg(test)]
    faults: Arc<faults::Faults>,
}

/// Rankings kept by [`Storage::open`] (the node passes `training.ranking_retention_ms`).
pub const DEFAULT_RANKING_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The rankings column family never holds more than this: past it, its oldest files go
/// even within the retention (a disk guard for sustained peak load).
const MAX_RANKING_BYTES: u64 = 16 << 30;

/// How the node's database is opened.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub durability: Durability,
    /// Rankings older than this are dropped.
    pub ranking_retention: Duration,
    /// RocksDB's memory: the block cache's capacity, with the memtables charged to it
    /// (they hold at most half of it before flushing). Index and filter blocks live in
    /// the cache too, so this bounds all of RocksDB's memory but the table files' own
    /// small readers and the memtables' overshoot while a flush runs.
    pub memory_bytes: usize,
}

/// RocksDB's memory unless configured (`storage.memory_mb`, whose default is the same).
pub const DEFAULT_MEMORY_BYTES: usize = 256 << 20;

impl Settings {
    /// The node's settings (`storage.*`); rankings are kept `ranking_retention`.
    pub fn of(config: &StorageConfig, ranking_retention: Duration) -> Settings {
        Settings {
            durability: config.durability,
            ranking_retention,
            memory_bytes: usize::try_from(config.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
        }
    }

    /// Defaults but for durability.
    pub fn new(durability: Durability) -> Settings {
        Settings {
            durability,
            ranking_retention: DEFAULT_RANKING_RETENTION,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

/// What RocksDB holds in memory now, in bytes (`/v1/admin/stats` `storage`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MemoryUse {
    /// The block cache's capacity: the bound of the next three but the readers.
    pub capacity: usize,
    /// Everything charged to the cache: blocks, index and filter blocks, memtables.
    pub cache: usize,
    /// Memtables, active and being flushed, of every column family.
    pub memtables: u64,
    /// Table readers outside the cache.
    pub table_readers: u64,
}

impl Storage {
    /// Opens (creating if needed) the database under `path`, with default settings
    /// but for durability.
    pub fn open(path: &Path, durability: Durability) -> Result<Storage, StorageError> {
        Storage::open_with(path, Settings::new(durability))
    }

    /// Opens (creating if needed) the database under `path`.
    pub fn open_with(path: &Path, settings: Settings) -> Result<Storage, StorageError> {
        let Settings {
            durability,
            ranking_retention,
            memory_bytes,
        } = settings;
        // Every MANIFEST write (a flush, a compaction) starts a new MANIFEST holding
        // only the live files, so that the key bounds of files a purge rewrote leave it
        // with the next write (`purge`). A few KB to a few hundred KB per write, at the
        // rate of flushes and compactions (seconds apart at the busiest).
        let mut options =
            Options::default().get_options_from_string("max_manifest_file_size=0;max_manifest_space_amp_pct=0")?;
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.increase_parallelism(2);
        options.set_compression_type(rocksdb::DBCompressionType::Lz4);
        // Shared block cache; bloom filters make the many point reads that miss
        // (an event id not seen before, an item absent from a table) skip files.
        let cache = rocksdb::Cache::new_lru_cache(memory_bytes);
        // Memtables count against the cache, so that memory stays flat under any mix of
        // writes across the families (each may otherwise fill 2 × 64 MB).
        let write_buffers =
            rocksdb::WriteBufferManager::new_write_buffer_manager_with_cache(memory_bytes / 2, false, cache.clone());
        options.set_write_buffer_manager(&write_buffers);
        let descriptors = Cf::ALL.iter().map(|cf| {
            let mut table = rocksdb::BlockBasedOptions::default();
            table.set_block_cache(&cache);
            table.set_bloom_filter(10.0, false);
            table.set_cache_index_and_filter_blocks(true);
            let mut cf_options = match *cf {
                Cf::Events => events_options()?,
                _ => Options::default(),
            };
            if *cf == Cf::Rankings {
                rankings_options(&mut cf_options, ranking_retention);
            } else {
                compressed_below_level_0(&mut cf_options);
            }
            cf_options.set_block_based_table_factory(&table);
            cf_options.set_write_buffer_size(64 << 20);
            Ok(ColumnFamilyDescriptor::new(cf.name(), cf_options))
        });
        let descriptors = descriptors.collect::<Result<Vec<_>, StorageError>>()?;
        let db = DB::open_cf_descriptors(&options, path, descriptors)?;
        Ok(Storage {
            db: Arc::new(db),
            durability,
            cache,
            memory_bytes,
            #[cfg(test)]
            faults: Arc::default(),
        })
    }

    /// What RocksDB holds in memory now.
    pub fn memory(&self) -> MemoryUse {
        let sum = |property: &str| -> u64 {
            Cf::ALL
                .iter()
                .filter_map(|cf| self.db.property_int_value_cf(self.cf(*cf), property).ok().flatten())
                .sum()
        };
        MemoryUse {
            capacity: self.memory_bytes,
            cache: self.cache.get_usage(),
            memtables: sum("rocksdb.cur-size-all-mem-tables"),
            table_readers: sum("rocksdb.estimate-table-readers-mem"),
        }
    }

    fn cf(&self, cf: Cf) -> &ColumnFamily {
        // Every family in `Cf::ALL` is created by `open`; a missing one is a bug here.
        self.db.cf_handle(cf.name()).expect("column family created at open")
    }

    /// Reads one record.
    pub fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.check_read(cf)?;
        Ok(self.db.get_cf(self.cf(cf), key)?)
    }

    /// Reads one record and decodes it in place (no copy of its bytes); `None` when absent.
    pub fn read<T>(&self, cf: Cf, key: &[u8], decode: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, StorageError> {
        self.check_read(cf)?;
        Ok(self.db.get_pinned_cf(self.cf(cf), key)?.map(|bytes| decode(&bytes)))
    }

    /// Reads many records of one family at once.
    pub fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.check_read(cf)?;
        let handle = self.cf(cf);
        self.db
            .multi_get_cf(keys.iter().map(|key| (handle, key)))
            .into_iter()
            .map(|result| result.map_err(StorageError::from))
            .collect()
    }

    /// Every record whose key starts with `prefix`, in key order.
    pub fn scan_prefix<'a>(
        &'a self,
        cf: Cf,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = Result<Entry, StorageError>> + 'a {
        self.scan_from(cf, prefix, prefix)
    }

    /// Records from `start` on, while their keys start with `prefix`.
    pub fn scan_from<'a>(
        &'a self,
        cf: Cf,
        start: &'a [u8],
        prefix: &'a [u8],
    ) -> impl Iterator<Item = Result<Entry, StorageError>> + 'a {
        self.db
            .iterator_cf(self.cf(cf), IteratorMode::From(start, Direction::Forward))
            .map(|item| item.map_err(StorageError::from))
            .take_while(move |item| match item {
                Ok((key, _)) => key.starts_with(prefix),
                Err(_) => true,
            })
    }

    /// This data directory's identity: random, made at its first use and kept. A node
    /// that comes back on an empty directory is a new store under the same node id.
    pub fn store_id(&self) -> Result<String, StorageError> {
        if let Some(id) = self.get(Cf::Meta, layout::STORE_ID)? {
            return Ok(String::from_utf8_lossy(&id).into_owned());
        }
        let id = format!("{:016x}", rand::random::<u64>());
        let mut batch = self.batch();
        batch.put(Cf::Meta, layout::STORE_ID, id.as_bytes());
        batch.commit()?;
        Ok(id)
    }

    /// The record with the greatest key starting with `prefix`.
    pub fn last_with_prefix(&self, cf: Cf, prefix: &[u8]) -> Result<Option<Entry>, StorageError> {
        let mut upper = prefix.to_vec();
        upper.extend_from_slice(&[0xff; 16]);
        let mut iterator = self
            .db
            .iterator_cf(self.cf(cf), IteratorMode::From(&upper, Direction::Reverse));
        match iterator.next().transpose()? {
            Some((key, value)) if key.starts_with(prefix) => Ok(Some((key, value))),
            _ => Ok(None),
        }
    }

    /// Writes without the WAL: for derived data (actor snapshots) whose source of
    /// truth is already durable. It survives a crash only once its column family
    /// is flushed ([`Storage::flush_cf`]); until then a crash falls back to replay.
    pub fn put_unlogged(&self, cf: Cf, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        #[cfg(test)]
        self.faults.check_key(cf, key)?;
        let mut options = WriteOptions::default();
        options.disable_wal(true);
        Ok(self.db.put_cf_opt(self.cf(cf), key, value, &options)?)
    }

    /// Writes through the WAL without waiting for its fsync: records that are worth
    /// keeping but acknowledge nothing to a client (a conversation's turns).
    pub fn put_unsynced(&self, cf: Cf, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        Ok(self.db.put_cf_opt(self.cf(cf), key, value, &WriteOptions::default())?)
    }

    /// Writes one column family's memtable to disk.
    pub fn flush_cf(&self, cf: Cf) -> Result<(), StorageError> {
        Ok(self.db.flush_cf(self.cf(cf))?)
    }

    /// Deletes one record durably.
    pub fn delete(&self, cf: Cf, key: &[u8]) -> Result<(), StorageError> {
        #[cfg(test)]
        self.faults.check_key(cf, key)?;
        let mut batch = self.batch();
        batch.delete(cf, key);
        batch.commit()
    }

    /// A new empty write batch.
    pub fn batch(&self) -> Batch<'_> {
        self.batch_of(WriteBatch::default())
    }

    /// A batch whose buffer is allocated for `bytes` at once.
    pub fn batch_with_capacity(&self, bytes: usize) -> Batch<'_> {
        self.batch_of(WriteBatch::with_capacity_bytes(bytes))
    }

    fn batch_of(&self, inner: WriteBatch) -> Batch<'_> {
        Batch {
            storage: self,
            inner,
            #[cfg(test)]
            injected: None,
        }
    }

    /// The failures this handle (and its clones) inject, for unit tests.
    #[cfg(test)]
    pub fn faults(&self) -> &faults::Faults {
        &self.faults
    }

    fn check_read(&self, _cf: Cf) -> Result<(), StorageError> {
        #[cfg(test)]
        self.faults.check_read(_cf)?;
        Ok(())
    }

    /// Flushes the WAL and memtables to disk (shutdown).
    pub fn flush(&self) -> Result<(), StorageError> {
        self.db.flush_wal(true)?;
        for cf in Cf::ALL {
            self.db.flush_cf(self.cf(cf))?;
        }
        Ok(())
    }
}

/// Writes applied atomically by [`Batch::commit`].
pub struct Batch<'a> {
    storage: &'a Storage,
    inner: WriteBatch,
    /// The failure injected into a write of one of the batch's keys, for unit tests.
    #[cfg(test)]
    injected: Option<StorageError>,
}

impl Batch<'_> {
    pub fn put(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        #[cfg(test)]
        self.inject(cf, key);
        self.inner.put_cf(self.storage.cf(cf), key, value);
    }

    pub fn delete(&mut self, cf: Cf, key: &[u8]) {
        #[cfg(test)]
        self.inject(cf, key);
        self.inner.delete_cf(self.storage.cf(cf), key);
    }

    #[cfg(test)]
    fn inject(&mut self, cf: Cf, key: &[u8]) {
        if self.injected.is_none() {
            self.injected = self.storage.faults.check_key(cf, key).err();
        }
    }

    /// The size of the batch's encoding so far.
    pub fn size_in_bytes(&self) -> usize {
        self.inner.size_in_bytes()
    }

    /// Deletes every key in `[from, to)`.
    pub fn delete_range(&mut self, cf: Cf, from: &[u8], to: &[u8]) {
        self.inner.delete_range_cf(self.storage.cf(cf), from, to);
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Writes the batch atomically; with sync durability it is fsynced on return.
    pub fn commit(self) -> Result<(), StorageError> {
        let mut options = WriteOptions::default();
        options.set_sync(self.storage.durability == Durability::Sync);
        self.write(&options)
    }

    /// Writes the batch without the WAL, like [`Storage::put_unlogged`]: it survives a
    /// crash only once its column families are flushed (a clean stop flushes them).
    pub fn commit_unlogged(self) -> Result<(), StorageError> {
        let mut options = WriteOptions::default();
        options.disable_wal(true);
        self.write(&options)
    }

    fn write(self, options: &WriteOptions) -> Result<(), StorageError> {
        #[cfg(test)]
        self.storage.faults.wait_while_held();
        #[cfg(test)]
        if let Some(injected) = self.injected {
            return Err(injected);
        }
        if self.inner.is_empty() {
            return Ok(());
        }
        self.storage.db.write_opt(self.inner, options)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_commit_scan_and_range_delete() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        let mut batch = storage.batch();
        batch.put(Cf::Items, b"a1", b"x");
        batch.put(Cf::Items, b"a2", b"y");
        batch.put(Cf::Items, b"b1", b"z");
        batch.commit().unwrap();
        let keys: Vec<_> = storage
            .scan_prefix(Cf::Items, b"a")
            .map(|item| item.unwrap().0.to_vec())
            .collect();
        assert_eq!(keys, vec![b"a1".to_vec(), b"a2".to_vec()]);
        let mut batch = storage.batch();
        batch.delete_range(Cf::Items, b"a", b"b");
        batch.commit().unwrap();
        assert_eq!(storage.get(Cf::Items, b"a1").unwrap(), None);
        assert_eq!(storage.get(Cf::Items, b"b1").unwrap(), Some(b"z".to_vec()));
        let got = storage.multi_get(Cf::Items, &[b"b1".to_vec(), b"zz".to_vec()]).unwrap();
        assert_eq!(got, vec![Some(b"z".to_vec()), None]);
    }

    /// Without the write buffer manager, 48 MB of events would sit in a 64 MB memtable.
    #[test]
    fn memtables_are_bounded_by_the_memory_setting() {
        let dir = tempfile::tempdir().unwrap();
        let memory_bytes = 32 << 20;
        let storage = Storage::open_with(
            dir.path(),
            Settings {
                memory_bytes,
                ..Settings::new(Durability::Async)
            },
        )
        .unwrap();
        let value = vec![7u8; 1024];
        for chunk in 0..48u32 {
            let mut batch = storage.batch();
            for index in 0..1024u32 {
                batch.put(Cf::Events, &[chunk.to_be_bytes(), index.to_be_bytes()].concat(), &value);
            }
            batch.commit().unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let memory = storage.memory();
            assert_eq!(memory.capacity, memory_bytes);
            if memory.memtables < (memory_bytes as u64) * 3 / 4 {
                assert!(memory.cache > 0, "{memory:?}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "memtables not flushed: {memory:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[test]
    fn rankings_past_the_retention_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_with(
            dir.path(),
            Settings {
                ranking_retention: Duration::from_secs(1),
                ..Settings::new(Durability::Sync)
            },
        )
        .unwrap();
        let put = |key: &[u8]| {
            let mut batch = storage.batch();
            batch.put(Cf::Rankings, key, b"shown");
            batch.commit_unlogged().unwrap();
            storage.flush_cf(Cf::Rankings).unwrap();
        };
        put(b"old");
        std::thread::sleep(Duration::from_millis(2100));
        // A flush lets RocksDB pick a compaction, which drops the files past the TTL.
        put(b"new");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while storage.get(Cf::Rankings, b"old").unwrap().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "a ranking past the retention is still stored"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(storage.get(Cf::Rankings, b"new").unwrap(), Some(b"shown".to_vec()));
    }
}
