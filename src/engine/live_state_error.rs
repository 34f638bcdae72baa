//! The errors of events and live state: ingest, state reads, wipes, replay and
//! checkpoints.

use crate::storage::StorageError;

/// Why an event or live-state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveStateError {
    /// The key has no state (the text names it).
    #[error("{0} not found")]
    NotFound(String),
    /// The shard cannot take work now (a stopped actor, a full queue).
    #[error("{0}")]
    Unavailable(String),
    /// Storage failed: nothing was claimed done.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
