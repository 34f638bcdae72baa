//! Group commit: one writer thread takes every batch queued while the previous
//! fsync ran and writes them as one synced RocksDB batch, so a burst of N small
//! writes costs one fsync instead of N. Callers await their batch's durability.

use std::future::Future;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use flume::{Receiver, Sender};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::{Cf, Storage, StorageError};

/// Batches written together at most, so one huge burst still answers in parts.
const MAX_JOBS_PER_COMMIT: usize = 4096;

/// A write batch's bytes beyond its writes' keys and values: its header, and each
/// write's tag, column family and lengths (varints), at most.
const BATCH_HEADER_BYTES: usize = 12;
const OP_OVERHEAD_BYTES: usize = 16;

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Op {
    Put { cf: Cf, key: Vec<u8>, value: Vec<u8> },
    Delete { cf: Cf, key: Vec<u8> },
}

impl Op {
    /// About what the write takes in a write batch (never less).
    fn batch_bytes(&self) -> usize {
        OP_OVERHEAD_BYTES
            + match self {
                Op::Put { key, value, .. } => key.len() + value.len(),
                Op::Delete { key, .. } => key.len(),
            }
    }
}

enum Job {
    Write {
        ops: Vec<Op>,
        done: oneshot::Sender<Result<(), StorageError>>,
    },
    /// Ends the writer thread after the writes queued before it.
    Close,
}

/// The handle callers submit batches through.
#[derive(Clone)]
pub struct CommitQueue {
    jobs: Sender<Job>,
    /// The writer thread, joined by [`CommitQueue::close`] so that its storage
    /// handle is released before the process exits.
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl CommitQueue {
    /// Starts the writer thread, with room for `capacity` queued batches: past it,
    /// [`CommitQueue::submit`] waits for room.
    pub fn start(storage: Storage, capacity: usize) -> CommitQueue {
        let (jobs, queue) = flume::bounded(capacity.max(1));
        let writer = std::thread::Builder::new()
            .name("rankstream-commit".into())
            .spawn(move || write_loop(storage, queue))
            .expect("the commit thread can be spawned");
        CommitQueue {
            jobs,
            writer: Arc::new(Mutex::new(Some(writer))),
        }
    }

    /// Writes what is queued, then stops the writer thread and waits for it.
    /// Later submissions fail with `StorageError::Closed`.
    pub fn close(&self) {
        let _ = self.jobs.send(Job::Close);
        if let Some(writer) = self.writer.lock().take() {
            let _ = writer.join();
        }
    }

    /// Queues `ops`; the future resolves once they are durable (per the storage's
    /// durability setting). Batches are written in submission order while the queue
    /// has room; a batch that found it full is queued when its future makes room.
    pub fn submit(&self, ops: Vec<Op>) -> impl Future<Output = Result<(), StorageError>> + 'static {
        let (done, finished) = oneshot::channel();
        let waiting = match self.jobs.try_send(Job::Write { ops, done }) {
            Ok(()) => None,
            Err(flume::TrySendError::Full(job)) => Some((self.jobs.clone(), job)),
            Err(flume::TrySendError::Disconnected(_)) => {
                return futures::future::Either::Left(async { Err(StorageError::Closed) })
            }
        };
        futures::future::Either::Right(async move {
            if let Some((jobs, job)) = waiting {
                jobs.send_async(job).await.map_err(|_| StorageError::Closed)?;
            }
            finished.await.map_err(|_| StorageError::Closed)?
        })
    }
}

fn write_loop(storage: Storage, queue: Receiver<Job>) {
    let mut closing = false;
    while !closing {
        let Ok(first) = queue.recv() else { return };
        let mut jobs = vec![first];
        while jobs.len() < MAX_JOBS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let started = Instant::now();
        let mut writes = 0;
        // Sized at once: grown write by write, the batch's buffer was copied at every
        // doubling (~3% of the server's CPU under Kafka ingest).
        let bytes = jobs
            .iter()
            .flat_map(|job| match job {
                Job::Write { ops, .. } => ops.as_slice(),
                Job::Close => &[],
            })
            .map(Op::batch_bytes)
            .sum::<usize>();
        let mut batch = storage.batch_with_capacity(BATCH_HEADER_BYTES + bytes);
        let mut waiting = Vec::with_capacity(jobs.len());
        for job in jobs {
            match job {
                Job::Write { ops, done } => {
                    writes += ops.len();
                    for op in &ops {
                        match op {
                            Op::Put { cf, key, value } => batch.put(*cf, key, value),
                            Op::Delete { cf, key } => batch.delete(*cf, key),
                        }
                    }
                    waiting.push(done);
                }
                Job::Close => closing = true,
            }
        }
        let result = batch.commit().map_err(|error| error.to_string());
        crate::metrics::group_commit(writes, started.elapsed());
        if let Err(error) = &result {
            tracing::error!(%error, batches = waiting.len(), "group commit failed");
        }
        for done in waiting {
            let _ = done.send(result.clone().map_err(StorageError::Commit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Durability;

    #[tokio::test]
    async fn batches_become_durable_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        let queue = CommitQueue::start(storage.clone(), 4);
        let writes: Vec<_> = (0..50u8)
            .map(|i| {
                queue.submit(vec![Op::Put {
                    cf: Cf::Events,
                    key: vec![7],
                    value: vec![i],
                }])
            })
            .collect();
        for write in writes {
            write.await.unwrap();
        }
        assert_eq!(storage.get(Cf::Events, &[7]).unwrap(), Some(vec![49]));
        queue.close();
        let refused = queue
            .submit(vec![Op::Delete {
                cf: Cf::Events,
                key: vec![7],
            }])
            .await;
        assert!(matches!(refused, Err(StorageError::Closed)), "{refused:?}");
    }
}
