//! Backups of the running node's database, taken through the engine, which holds it
//! (the storage layer does the work: `storage::backup`). The services see the
//! engine's [`BackupFailure`], never the storage layer's error.

use std::path::Path;

use super::Engine;
use crate::domain::backup::BackupInfo;
use crate::storage::backup::{self, BackupError};

/// Why a backup could not be taken or the backups not be listed.
#[derive(Debug, thiserror::Error)]
pub enum BackupFailure {
    /// The backup directory cannot be created or written: the caller's to fix.
    #[error(transparent)]
    Directory(BackupError),
    /// The database, or a backup already in the directory, failed.
    #[error(transparent)]
    Storage(BackupError),
}

impl From<BackupError> for BackupFailure {
    fn from(error: BackupError) -> BackupFailure {
        match error {
            BackupError::Io { .. } => BackupFailure::Directory(error),
            error => BackupFailure::Storage(error),
        }
    }
}

impl Engine {
    /// Takes a backup of the node's database into `directory` while it serves (see
    /// `storage::backup`); `progress` hears the bytes copied so far every second. Blocks.
    pub fn backup(&self, directory: &Path, progress: impl Fn(u64) + Sync) -> Result<BackupInfo, BackupFailure> {
        Ok(self.storage.backup(directory, progress)?)
    }
}

/// The backups in `directory`, oldest first (none when it does not exist).
pub fn list_backups(directory: &Path) -> Result<Vec<BackupInfo>, BackupFailure> {
    Ok(backup::list(directory)?)
}
