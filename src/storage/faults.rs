//! Failures injected into a [`Storage`](super::Storage) on demand, so that unit
//! tests can show what the layers above do when a read or a write fails. Compiled
//! into test builds only.

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{Condvar, Mutex};

use super::{Cf, StorageError};

/// The column families whose reads fail (one bit each), and the keys whose writes fail.
#[derive(Debug, Default)]
pub struct Faults {
    reads: AtomicU32,
    /// Writes (and deletes) of keys under these prefixes fail, alone or in a batch.
    key_writes: Mutex<Vec<(Cf, Vec<u8>)>>,
    /// While set, batch writes wait before they are written (or fail).
    held: Mutex<bool>,
    released: Condvar,
}

impl Faults {
    /// From now on, reads of `cf` fail (or succeed again).
    pub fn fail_reads(&self, cf: Cf, fail: bool) {
        set(&self.reads, cf, fail);
    }

    /// From now on, writes and deletes of `cf` keys starting with `prefix` fail, and
    /// so does a batch that holds one.
    pub fn fail_key_writes(&self, cf: Cf, prefix: &[u8]) {
        self.key_writes.lock().push((cf, prefix.to_vec()));
    }

    /// Those writes succeed again.
    pub fn clear_key_writes(&self) {
        self.key_writes.lock().clear();
    }

    /// From now on, batch writes wait (a slow disk) until released with `false`.
    pub fn hold_writes(&self, hold: bool) {
        *self.held.lock() = hold;
        if !hold {
            self.released.notify_all();
        }
    }

    pub(super) fn wait_while_held(&self) {
        let mut held = self.held.lock();
        while *held {
            self.released.wait(&mut held);
        }
    }

    pub(super) fn check_key(&self, cf: Cf, key: &[u8]) -> Result<(), StorageError> {
        let failing = self
            .key_writes
            .lock()
            .iter()
            .any(|(failing, prefix)| *failing == cf && key.starts_with(prefix));
        if failing {
            return Err(StorageError::Commit("injected write failure".into()));
        }
        Ok(())
    }

    pub(super) fn check_read(&self, cf: Cf) -> Result<(), StorageError> {
        if self.reads.load(Ordering::SeqCst) & (1 << cf as u32) != 0 {
            return Err(StorageError::Commit("injected read failure".into()));
        }
        Ok(())
    }
}

fn set(bits: &AtomicU32, cf: Cf, on: bool) {
    let bit = 1 << cf as u32;
    if on {
        bits.fetch_or(bit, Ordering::SeqCst);
    } else {
        bits.fetch_and(!bit, Ordering::SeqCst);
    }
}
