//! `rankstream backup` (a stopped node's data directory) and `rankstream restore`.
//! A running node is backed up with `POST /v1/admin/backup`; both write the same
//! kind of backup directory (RocksDB's backup engine).

use std::path::Path;

use anyhow::Context as _;
use rankstream::config::Config;
use rankstream::domain::backup::BackupInfo;
use rankstream::storage::backup;
use rankstream::storage::{Settings, Storage};
use serde_json::json;

/// Backs the data directory of `config` up into `to`, printing progress to stderr
/// and the backup as JSON to stdout.
pub fn backup(config: &Config, to: &Path) -> anyhow::Result<()> {
    let data_dir = &config.storage.data_dir;
    anyhow::ensure!(
        data_dir.join("CURRENT").is_file(),
        "{} holds no database",
        data_dir.display()
    );
    let retention = config.training.ranking_retention();
    let storage = Storage::open_with(data_dir, Settings::of(&config.storage, retention)).with_context(|| {
        format!(
            "opening {} (is a node running on it? back it up with POST /v1/admin/backup)",
            data_dir.display()
        )
    })?;
    let started = std::time::Instant::now();
    let info = storage
        .backup(to, |copied| eprintln!("backup: {} MiB copied", copied >> 20))
        .with_context(|| format!("backing {} up into {}", data_dir.display(), to.display()))?;
    report(&info, to, started.elapsed().as_millis() as u64)
}

/// Restores a backup of `from` (the latest unless `backup_id`) into the data
/// directory of `config`, which must be new or empty.
pub fn restore(config: &Config, from: &Path, backup_id: Option<u32>) -> anyhow::Result<()> {
    let data_dir = &config.storage.data_dir;
    let started = std::time::Instant::now();
    let info = backup::restore(from, data_dir, backup_id)
        .with_context(|| format!("restoring {} into {}", from.display(), data_dir.display()))?;
    eprintln!(
        "restored backup {} into {}; the search index is rebuilt from the catalog when the node starts",
        info.backup_id,
        data_dir.display()
    );
    report(&info, from, started.elapsed().as_millis() as u64)
}

fn report(info: &BackupInfo, directory: &Path, took_ms: u64) -> anyhow::Result<()> {
    let mut view = serde_json::to_value(info)?;
    view["directory"] = json!(std::path::absolute(directory)?.display().to_string());
    view["took_ms"] = json!(took_ms);
    println!("{}", serde_json::to_string_pretty(&view)?);
    Ok(())
}
