//! Group commit: one writer thread takes every batch queued while the previous
//! fsync ran and writes them as one synced RocksDB batch, so a burst of N small
//! writes costs one fsync instead of N. Callers await their batch's durability.

use std::future::Future;

use crossbeam::channel::{self, Receiver, Sender};
use tokio::sync::oneshot;

use super::{Cf, Storage, StorageError};

/// Batches written together at most, so one huge burst still answers in parts.
const MAX_JOBS_PER_COMMIT: usize = 4096;

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Op {
    Put { cf: Cf, key: Vec<u8>, value: Vec<u8> },
    Delete { cf: Cf, key: Vec<u8> },
}

struct Job {
    ops: Vec<Op>,
    done: oneshot::Sender<Result<(), StorageError>>,
}

/// The handle callers submit batches through; the writer thread ends when every
/// handle is dropped.
#[derive(Clone)]
pub struct CommitQueue {
    jobs: Sender<Job>,
}

impl CommitQueue {
    /// Starts the writer thread.
    pub fn start(storage: Storage) -> CommitQueue {
        let (jobs, queue) = channel::unbounded();
        std::thread::Builder::new()
            .name("rankstream-commit".into())
            .spawn(move || write_loop(storage, queue))
            .expect("the commit thread can be spawned");
        CommitQueue { jobs }
    }

    /// Queues `ops`; the future resolves once they are durable (per the storage's
    /// durability setting), in submission order relative to other batches.
    pub fn submit(&self, ops: Vec<Op>) -> impl Future<Output = Result<(), StorageError>> + 'static {
        let (done, finished) = oneshot::channel();
        let queued = self.jobs.send(Job { ops, done });
        async move {
            queued.map_err(|_| StorageError::Closed)?;
            finished.await.map_err(|_| StorageError::Closed)?
        }
    }
}

fn write_loop(storage: Storage, queue: Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_JOBS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let mut batch = storage.batch();
        for job in &jobs {
            for op in &job.ops {
                match op {
                    Op::Put { cf, key, value } => batch.put(*cf, key, value),
                    Op::Delete { cf, key } => batch.delete(*cf, key),
                }
            }
        }
        let result = batch.commit().map_err(|error| error.to_string());
        if let Err(error) = &result {
            tracing::error!(%error, batches = jobs.len(), "group commit failed");
        }
        for job in jobs {
            let _ = job.done.send(result.clone().map_err(StorageError::Commit));
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
        let queue = CommitQueue::start(storage.clone());
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
    }
}
