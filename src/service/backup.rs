//! Backups of the running node (`POST` and `GET /v1/admin/backup`): one at a time,
//! into the configured directory (never one a request names: an API call does not
//! choose where the node writes), with the bytes copied so far while one runs.
//! `rankstream backup` (a stopped node) and `rankstream restore` call the storage
//! layer directly.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use super::ServiceError;
use crate::domain::backup::BackupInfo;
use crate::engine::Engine;
use crate::engine::{list_backups, BackupFailure};

/// What a restore does without the search index.
pub const SEARCH_INDEX_NOTE: &str =
    "not in the backup: a node started from the restore rebuilds it from the catalog (/readyz is 503 until then)";

/// The node's backups: where they go and the one running.
pub struct Backups {
    /// Where backups go.
    pub directory: PathBuf,
    /// The node's data directory: never a backup's destination.
    data_dir: PathBuf,
    running: Mutex<Option<Running>>,
}

struct Running {
    directory: PathBuf,
    started: Instant,
    copied: Arc<AtomicU64>,
}

/// A finished backup.
#[derive(Debug, Serialize)]
pub struct BackupReport {
    #[serde(flatten)]
    pub info: BackupInfo,
    /// The backup directory (absolute): `rankstream restore --from` it.
    pub directory: String,
    pub took_ms: u64,
    pub search_index: &'static str,
}

impl Backups {
    /// `configured` empty: `<data_dir>-backups`, beside the data directory.
    pub fn new(configured: &Path, data_dir: &Path) -> Backups {
        let directory = match configured.as_os_str().is_empty() {
            true => {
                let mut name = data_dir.file_name().unwrap_or_default().to_owned();
                name.push("-backups");
                data_dir.with_file_name(name)
            }
            false => configured.to_owned(),
        };
        Backups {
            directory,
            data_dir: data_dir.to_owned(),
            running: Mutex::new(None),
        }
    }
}

/// `path` made absolute against the working directory, without touching the disk.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Frees the running slot however the backup ends.
struct Slot<'a>(&'a Mutex<Option<Running>>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.lock().take();
    }
}

/// Backups of the running node.
pub struct BackupService {
    backups: Backups,
    engine: Arc<Engine>,
}

impl BackupService {
    pub fn new(backups: Backups, engine: Arc<Engine>) -> BackupService {
        BackupService { backups, engine }
    }
}

impl BackupService {
    /// Takes a backup into the configured directory and answers when it is complete.
    /// 409 while another runs; 422 when the directory cannot hold one.
    pub async fn backup(&self) -> Result<BackupReport, ServiceError> {
        let backups = &self.backups;
        let directory = absolute(&backups.directory);
        let data_dir = absolute(&backups.data_dir);
        if directory.starts_with(&data_dir) || data_dir.starts_with(&directory) {
            return Err(ServiceError::Invalid(format!(
                "the backup directory {} and the data directory {} must not contain one another",
                directory.display(),
                data_dir.display()
            )));
        }
        let copied = Arc::new(AtomicU64::new(0));
        {
            let mut running = backups.running.lock();
            if let Some(running) = running.as_ref() {
                return Err(ServiceError::Conflict(format!(
                    "a backup into {} is running (started {} ms ago)",
                    running.directory.display(),
                    running.started.elapsed().as_millis()
                )));
            }
            *running = Some(Running {
                directory: directory.clone(),
                started: Instant::now(),
                copied: copied.clone(),
            });
        }
        let _slot = Slot(&backups.running);
        let started = Instant::now();
        let (engine, into) = (self.engine.clone(), directory.clone());
        tracing::info!(directory = %directory.display(), "backup started");
        let taken = tokio::task::spawn_blocking(move || {
            engine.backup(&into, |bytes| {
                copied.store(bytes, Ordering::Relaxed);
                tracing::info!(copied_mib = bytes >> 20, "backup in progress");
            })
        })
        .await
        .map_err(|error| ServiceError::Internal(format!("the backup task failed: {error}")))?;
        let info = taken.map_err(|error| match error {
            BackupFailure::Directory(_) => ServiceError::Invalid(format!("cannot back up there: {error}")),
            BackupFailure::Storage(_) => ServiceError::Storage(error.to_string()),
        })?;
        let report = BackupReport {
            info,
            directory: directory.display().to_string(),
            took_ms: started.elapsed().as_millis() as u64,
            search_index: SEARCH_INDEX_NOTE,
        };
        tracing::info!(?report, "backup taken");
        Ok(report)
    }

    /// The backup running, if any; else the configured directory's backups (not read
    /// while one runs: a second backup engine on a directory being written is unsafe).
    pub fn backup_status(&self) -> Result<Value, ServiceError> {
        let backups = &self.backups;
        let directory = absolute(&backups.directory);
        // Held while listing, so that no backup starts meanwhile.
        let slot = backups.running.lock();
        let running = slot.as_ref().map(|running| {
            json!({
                "directory": running.directory.display().to_string(),
                "elapsed_ms": running.started.elapsed().as_millis() as u64,
                "copied_bytes": running.copied.load(Ordering::Relaxed),
            })
        });
        let taken = match running {
            Some(_) => None,
            None => Some(list_backups(&directory).map_err(|error| ServiceError::Storage(error.to_string()))?),
        };
        drop(slot);
        Ok(json!({
            "directory": directory.display().to_string(),
            "backups": taken,
            "running": running,
        }))
    }
}
