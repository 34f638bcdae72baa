//! The trained artifacts as persisted in the `models` column family: serialized
//! straight into chunks of [`CHUNK_BYTES`], each written as it fills, under a new
//! generation; a head written last names the generation to read and drops the
//! others in the same batch. A crash part way leaves the head on the previous
//! generation, whole.
//!
//! Written whole, the artifacts cost their size three times over for a moment
//! every persist (the encoded value, the write batch's copy of it, the memtable's):
//! ~160 MB at 100k users, which the allocators then kept as resident memory.

use serde::{Deserialize, Serialize};

use crate::ranking::Trained;
use crate::storage::{layout, Cf, Storage, StorageError};

/// The size of a chunk: small beside the artifacts, large beside a key.
const CHUNK_BYTES: usize = 1 << 20;

/// What the head names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Head {
    generation: u64,
    chunks: u32,
    bytes: u64,
}

/// What a persist wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Persisted {
    pub bytes: u64,
    pub chunks: u32,
}

/// Why the artifacts could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("stored models unreadable: {0}")]
    Unreadable(String),
}

/// Persists `trained` as the newest generation.
pub fn save(storage: &Storage, trained: &Trained) -> Result<Persisted, StorageError> {
    let generation = match head(storage)? {
        Some(head) => head.generation + 1,
        None => 0,
    };
    let chunks = Chunks {
        storage,
        generation,
        buffer: Vec::with_capacity(CHUNK_BYTES),
        written: 0,
        bytes: 0,
        failed: None,
    };
    let written = postcard::serialize_with_flavor(trained, chunks).map_err(|error| StorageError::Corrupt {
        key: "models".into(),
        reason: error.to_string(),
    })??;
    let head = Head {
        generation,
        chunks: written.chunks,
        bytes: written.bytes,
    };
    let mut batch = storage.batch();
    batch.put(
        Cf::Models,
        layout::TRAINED_HEAD,
        &postcard::to_allocvec(&head).expect("a head serializes"),
    );
    // Every other generation, whole or part written.
    batch.delete_range(
        Cf::Models,
        &layout::trained_chunk(0, 0),
        &layout::trained_chunk(generation, 0),
    );
    batch.delete_range(
        Cf::Models,
        &layout::trained_chunk(generation + 1, 0),
        &layout::trained_chunk(u64::MAX, u32::MAX),
    );
    for retired in layout::RETIRED_TRAINED.into_iter().chain([layout::TRAINED]) {
        batch.delete(Cf::Models, retired);
    }
    batch.commit()?;
    Ok(written)
}

/// The persisted artifacts (in chunks, or whole as before them); `None` when there
/// are none.
pub fn load(storage: &Storage) -> Result<Option<Trained>, LoadError> {
    let Some(bytes) = read_bytes(storage)? else {
        return Ok(None);
    };
    postcard::from_bytes(&bytes)
        .map(Some)
        .map_err(|error| LoadError::Unreadable(error.to_string()))
}

/// The encoded artifacts: the head's chunks in order, or the value stored whole.
fn read_bytes(storage: &Storage) -> Result<Option<Vec<u8>>, LoadError> {
    let Some(head) = head(storage)? else {
        return Ok(storage.get(Cf::Models, layout::TRAINED)?);
    };
    let mut bytes = Vec::with_capacity(head.bytes as usize);
    for index in 0..head.chunks {
        let key = layout::trained_chunk(head.generation, index);
        let chunk = storage
            .get(Cf::Models, &key)?
            .ok_or_else(|| LoadError::Unreadable(format!("chunk {index} of {} is missing", head.chunks)))?;
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

fn head(storage: &Storage) -> Result<Option<Head>, StorageError> {
    let Some(bytes) = storage.get(Cf::Models, layout::TRAINED_HEAD)? else {
        return Ok(None);
    };
    postcard::from_bytes(&bytes)
        .map(Some)
        .map_err(|error| StorageError::Corrupt {
            key: "models head".into(),
            reason: error.to_string(),
        })
}

/// A postcard output that writes each chunk as it fills. After a failed write it
/// drops the rest and reports the failure when finished.
struct Chunks<'a> {
    storage: &'a Storage,
    generation: u64,
    buffer: Vec<u8>,
    written: u32,
    bytes: u64,
    failed: Option<StorageError>,
}

impl Chunks<'_> {
    fn write_chunk(&mut self) {
        if self.failed.is_none() {
            let key = layout::trained_chunk(self.generation, self.written);
            // Through the WAL without its fsync: the head's synced commit comes after.
            match self.storage.put_unsynced(Cf::Models, &key, &self.buffer) {
                Ok(()) => {
                    self.written += 1;
                    self.bytes += self.buffer.len() as u64;
                }
                Err(error) => self.failed = Some(error),
            }
        }
        self.buffer.clear();
    }
}

impl postcard::ser_flavors::Flavor for Chunks<'_> {
    type Output = Result<Persisted, StorageError>;

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.try_extend(&[byte])
    }

    fn try_extend(&mut self, mut data: &[u8]) -> postcard::Result<()> {
        while !data.is_empty() {
            let take = (CHUNK_BYTES - self.buffer.len()).min(data.len());
            self.buffer.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buffer.len() == CHUNK_BYTES {
                self.write_chunk();
            }
        }
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<Self::Output> {
        if !self.buffer.is_empty() {
            self.write_chunk();
        }
        Ok(match self.failed {
            Some(error) => Err(error),
            None => Ok(Persisted {
                bytes: self.bytes,
                chunks: self.written,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Durability;
    use crate::domain::event::decode_v1;

    fn trained_with(sessions: usize) -> Trained {
        let mut trained = Trained::new(3_600_000.0);
        for session in 0..sessions {
            for step in 0..20 {
                let at = 1_700_000_000_000 + (session * 20 + step) as i64;
                let body = serde_json::json!({"id": format!("e{session}-{step}"), "type": "view", "sid": format!("s{session}"),
                    "item_id": format!("item-{}", (session * 7 + step * 13) % 5000), "original_timestamp": at});
                let event = decode_v1(body, at, || unreachable!("the id is given")).unwrap();
                trained.learn(0, (session * 20 + step) as u64 + 1, &event, None, "");
            }
        }
        trained
    }

    /// The artifacts' encoding as stored equals `trained`'s, and decodes.
    fn stored_as(storage: &Storage, trained: &Trained) -> bool {
        let whole = postcard::to_allocvec(trained).unwrap();
        let stored = read_bytes(storage).unwrap().unwrap();
        // Not `assert_eq!`: the encodings are megabytes.
        stored == whole && load(storage).unwrap().is_some()
    }

    #[test]
    fn artifacts_come_back_from_chunks_and_older_generations_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        assert!(load(&storage).unwrap().is_none());

        let small = trained_with(10);
        save(&storage, &small).unwrap();
        assert!(stored_as(&storage, &small));
        let large = trained_with(3000);
        let persisted = save(&storage, &large).unwrap();
        assert!(persisted.chunks > 1, "{persisted:?} spans chunks");
        assert_eq!(persisted.bytes, postcard::to_allocvec(&large).unwrap().len() as u64);
        assert!(stored_as(&storage, &large));

        // Only the newest generation's chunks remain.
        let newest = layout::trained_chunk(1, 0);
        let stored: Vec<_> = storage
            .scan_prefix(Cf::Models, layout::TRAINED_CHUNKS)
            .map(|entry| entry.unwrap().0)
            .collect();
        assert_eq!(stored.len(), persisted.chunks as usize);
        assert!(stored
            .iter()
            .all(|key| key[..newest.len() - 4] == newest[..newest.len() - 4]));
    }

    #[test]
    fn artifacts_persisted_whole_before_chunks_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        let trained = trained_with(50);
        let mut batch = storage.batch();
        batch.put(Cf::Models, layout::TRAINED, &postcard::to_allocvec(&trained).unwrap());
        batch.commit().unwrap();
        assert!(stored_as(&storage, &trained));
        // The next persist moves them to chunks and drops the whole value.
        let loaded = load(&storage).unwrap().unwrap();
        save(&storage, &loaded).unwrap();
        assert!(storage.get(Cf::Models, layout::TRAINED).unwrap().is_none());
        assert!(stored_as(&storage, &loaded));
    }
}
