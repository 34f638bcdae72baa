//! What a backup of a node's database is, as every layer names it: its id, when it was
//! taken, its size. Backups are taken and restored by `crate::storage::backup` (the
//! only module that speaks RocksDB), through the engine on a running node.

use serde::Serialize;

/// One backup in a backup directory.
#[derive(Debug, Clone, Serialize)]
pub struct BackupInfo {
    /// Its id within the backup directory (RocksDB's backup engine numbers them).
    pub backup_id: u32,
    /// When it was taken, unix seconds.
    pub created_at: i64,
    /// Bytes of its files (files shared with other backups counted in each).
    pub size_bytes: u64,
    /// The number of its files.
    pub files: u32,
}
