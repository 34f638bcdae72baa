//! The purge of deleted users' records: a while after a deletion (the ones that
//! follow share the run), the key ranges of the shards that held them are compacted
//! out of every file ([`Storage::purge`]), one run at a time, off the request path.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::storage::{layout, Cf, PurgeReport, Storage, StorageError};
use crate::topology::ShardId;

/// Compacts the key ranges of shards that held deleted records, a while after the
/// first deletion (the ones that follow share the run), one run at a time. The
/// shards to compact are stored, so a restart runs a purge a crash interrupted.
pub struct Purger {
    storage: Storage,
    delay: Duration,
    pending: parking_lot::Mutex<BTreeSet<ShardId>>,
    wake: Arc<tokio::sync::Notify>,
    running: tokio::sync::Mutex<()>,
    runs: AtomicU64,
}

impl Purger {
    /// Starts the purger's background task (on the current tokio runtime), with the
    /// shards a purge had still to compact when the node stopped. The task ends when
    /// `shutdown` is cancelled: a run under way finishes first, a run not yet begun
    /// stays pending (stored) for the next start.
    pub fn start(
        storage: Storage,
        delay_ms: u64,
        shutdown: CancellationToken,
    ) -> Result<(Arc<Purger>, tokio::task::JoinHandle<()>), StorageError> {
        let pending: BTreeSet<ShardId> = storage
            .get(Cf::Meta, layout::PURGE_PENDING)?
            .unwrap_or_default()
            .chunks_exact(2)
            .map(|shard| ShardId::from_be_bytes([shard[0], shard[1]]))
            .collect();
        let purger = Arc::new(Purger {
            storage,
            delay: Duration::from_millis(delay_ms),
            pending: parking_lot::Mutex::new(pending),
            wake: Arc::default(),
            running: tokio::sync::Mutex::new(()),
            runs: AtomicU64::new(0),
        });
        // The task holds no strong reference: the storage closes when the node drops it.
        let (weak, wake, delay) = (Arc::downgrade(&purger), purger.wake.clone(), purger.delay);
        let task = tokio::spawn(async move {
            loop {
                let woken = async {
                    wake.notified().await;
                    tokio::time::sleep(delay).await;
                };
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = woken => {}
                }
                let Some(purger) = weak.upgrade() else { return };
                if let Err(error) = purger.run(false).await {
                    tracing::error!(%error, "purging deleted records failed; the next deletion retries it");
                }
            }
        });
        if !purger.pending.lock().is_empty() {
            purger.wake.notify_one();
        }
        Ok((purger, task))
    }

    /// Marks shards to purge, durably.
    pub fn schedule(&self, shards: &BTreeSet<ShardId>) -> Result<(), StorageError> {
        let mut pending = self.pending.lock();
        pending.extend(shards);
        self.store(&pending)?;
        self.wake.notify_one();
        Ok(())
    }

    fn store(&self, pending: &BTreeSet<ShardId>) -> Result<(), StorageError> {
        let shards: Vec<u8> = pending.iter().flat_map(|shard| shard.to_be_bytes()).collect();
        let mut batch = self.storage.batch();
        match shards.is_empty() {
            true => batch.delete(Cf::Meta, layout::PURGE_PENDING),
            false => batch.put(Cf::Meta, layout::PURGE_PENDING, &shards),
        }
        batch.commit()
    }

    /// Purges the pending shards (every shard with `all`) now. Shards scheduled
    /// while it runs stay pending for the next run.
    pub async fn run(&self, all: bool) -> Result<PurgeReport, StorageError> {
        let _one_at_a_time = self.running.lock().await;
        let shards = self.pending.lock().clone();
        if shards.is_empty() && !all {
            return Ok(PurgeReport::default());
        }
        let storage = self.storage.clone();
        let chosen = shards.clone();
        let report = tokio::task::spawn_blocking(move || storage.purge((!all).then_some(&chosen)))
            .await
            .unwrap_or_else(|error| Err(StorageError::Commit(format!("purge task failed: {error}"))))?;
        {
            let mut pending = self.pending.lock();
            pending.retain(|shard| !shards.contains(shard));
            self.store(&pending)?;
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        tracing::info!(shards = ?report.shards, ranges = report.ranges, took_ms = report.took_ms, "purged deleted records");
        Ok(report)
    }

    pub fn delay_ms(&self) -> i64 {
        i64::try_from(self.delay.as_millis()).unwrap_or(i64::MAX)
    }

    /// Shards waiting for the next purge.
    pub fn pending(&self) -> usize {
        self.pending.lock().len()
    }

    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }
}
