//! Backups with RocksDB's backup engine, taken while the node serves (or of a stopped
//! node's directory), and restores from them.
//!
//! A backup directory holds any number of backups of one node. Table files shared by
//! backups are copied once (`shared_checksum/`), so a second backup copies only what
//! was written since the first. A backup flushes the memtables first: it holds, as
//! table files, every write acknowledged before it began (with `sync` durability,
//! acknowledged means in the WAL, which the flush turns into tables) and no WAL.
//! The search index is not in it: a node started from a restore rebuilds the index
//! from the restored catalog (`/readyz` is 503 until it has).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Storage;
use crate::domain::backup::BackupInfo;
use rocksdb::backup::{BackupEngine, BackupEngineInfo, BackupEngineOptions, RestoreOptions};
use rocksdb::Env;

/// How often progress is reported while a backup copies.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0} holds no backup")]
    NoBackup(PathBuf),
    #[error("{0} has no backup {1}")]
    UnknownBackup(PathBuf, u32),
    #[error("{0} is not empty: restore into a new or empty data directory")]
    NotEmpty(PathBuf),
}

impl From<&BackupEngineInfo> for BackupInfo {
    fn from(info: &BackupEngineInfo) -> BackupInfo {
        BackupInfo {
            backup_id: info.backup_id,
            created_at: info.timestamp,
            size_bytes: info.size,
            files: info.num_files,
        }
    }
}

impl Storage {
    /// Takes a new backup into `directory` (created if missing), reporting the bytes
    /// copied so far to `progress` every second while it runs.
    pub fn backup(&self, directory: &Path, progress: impl Fn(u64) + Sync) -> Result<BackupInfo, BackupError> {
        std::fs::create_dir_all(directory).map_err(|source| BackupError::Io {
            path: directory.to_owned(),
            source,
        })?;
        let mut engine = open_engine(directory)?;
        let before = directory_bytes(directory);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut next = std::time::Instant::now() + PROGRESS_EVERY;
                while !done.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                    if std::time::Instant::now() >= next {
                        progress(directory_bytes(directory).saturating_sub(before));
                        next += PROGRESS_EVERY;
                    }
                }
            });
            let taken = engine.create_new_backup_flush(self.db.as_ref(), true);
            done.store(true, Ordering::Release);
            taken
        })?;
        latest(&engine).ok_or_else(|| BackupError::NoBackup(directory.to_owned()))
    }
}

/// The backups in `directory`, oldest first (none when it does not exist).
pub fn list(directory: &Path) -> Result<Vec<BackupInfo>, BackupError> {
    if !directory.exists() {
        return Ok(Vec::new());
    }
    let engine = open_engine(directory)?;
    Ok(engine.get_backup_info().iter().map(BackupInfo::from).collect())
}

/// Restores backup `id` of `from` (the latest when `None`), after verifying its files,
/// into `data_dir`, which must not exist or be empty.
pub fn restore(from: &Path, data_dir: &Path, id: Option<u32>) -> Result<BackupInfo, BackupError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| BackupError::Io { path, source }
    };
    if !from.is_dir() {
        return Err(BackupError::NoBackup(from.to_owned()));
    }
    if data_dir.exists() && std::fs::read_dir(data_dir).map_err(io(data_dir))?.next().is_some() {
        return Err(BackupError::NotEmpty(data_dir.to_owned()));
    }
    let mut engine = open_engine(from)?;
    let info = match id {
        None => latest(&engine).ok_or_else(|| BackupError::NoBackup(from.to_owned()))?,
        Some(id) => engine
            .get_backup_info()
            .iter()
            .find(|info| info.backup_id == id)
            .map(BackupInfo::from)
            .ok_or_else(|| BackupError::UnknownBackup(from.to_owned(), id))?,
    };
    engine.verify_backup(info.backup_id)?;
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    engine.restore_from_backup(data_dir, data_dir, &RestoreOptions::default(), info.backup_id)?;
    Ok(info)
}

fn open_engine(directory: &Path) -> Result<BackupEngine, BackupError> {
    let options = BackupEngineOptions::new(directory)?;
    Ok(BackupEngine::open(&options, &Env::new()?)?)
}

fn latest(engine: &BackupEngine) -> Option<BackupInfo> {
    engine
        .get_backup_info()
        .iter()
        .max_by_key(|info| info.backup_id)
        .map(BackupInfo::from)
}

/// Bytes of the files under `directory`, recursively (what could not be read counts 0).
fn directory_bytes(directory: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => directory_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |metadata| metadata.len()),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Durability;
    use crate::storage::Cf;

    #[test]
    fn a_backup_restores_what_was_written_before_it_and_not_after() {
        let data = tempfile::tempdir().unwrap();
        let backups = tempfile::tempdir().unwrap();
        let storage = Storage::open(data.path(), Durability::Sync).unwrap();
        let mut batch = storage.batch();
        batch.put(Cf::Items, b"before", b"1");
        batch.commit().unwrap();
        let first = storage.backup(backups.path(), |_| {}).unwrap();
        let mut batch = storage.batch();
        batch.put(Cf::Items, b"after", b"2");
        batch.commit().unwrap();
        let second = storage.backup(backups.path(), |_| {}).unwrap();
        assert!(second.backup_id > first.backup_id);
        assert_eq!(list(backups.path()).unwrap().len(), 2);

        let restored = tempfile::tempdir().unwrap();
        let into = restored.path().join("node");
        assert_eq!(
            restore(backups.path(), &into, Some(first.backup_id)).unwrap().backup_id,
            first.backup_id
        );
        let reopened = Storage::open(&into, Durability::Sync).unwrap();
        assert_eq!(reopened.get(Cf::Items, b"before").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(reopened.get(Cf::Items, b"after").unwrap(), None);

        // A directory that holds anything is never written over.
        assert!(matches!(
            restore(backups.path(), &into, None),
            Err(BackupError::NotEmpty(_))
        ));
        assert!(matches!(
            restore(backups.path(), &restored.path().join("other"), Some(99)),
            Err(BackupError::UnknownBackup(_, 99))
        ));
    }
}
