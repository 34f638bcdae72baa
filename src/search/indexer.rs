//! The indexer thread: the only writer of the index. It takes catalog changes from
//! a channel, re-reads each changed item from storage (the source of truth), and
//! commits at most every `commit_interval_ms`, so that searches see an upsert or a
//! delete within one interval plus a commit. Commits run here, never on request or
//! actor threads.
//!
//! Every commit while running carries the payload [`RUNNING`]; the last one of a
//! clean stop carries [`CLEAN`]. An index whose last commit is not clean may have
//! missed changes (a crash between a catalog write and the next commit): it is
//! rebuilt from storage at the next start.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{select, Receiver};
use parking_lot::RwLock;
use serde_json::{Map, Value};
use tantivy::{IndexReader, IndexWriter, Term};

use super::labels::{labels, CatalogLabels, LabelCounts};
use super::schema::{document, is_deleted, item_key, Fields, KEY_SEPARATOR};
use super::{IndexChange, IndexStats, ItemSource, SearchError};

/// Commit payload while the indexer runs.
pub const RUNNING: &str = "running";
/// Commit payload of a clean stop: the index reflects every catalog write.
pub const CLEAN: &str = "clean";
/// How long an idle indexer sleeps between looks at its channels.
const IDLE_WAIT: Duration = Duration::from_secs(3600);
/// Most changes taken from the channel before a commit is considered.
const DRAIN_BATCH: usize = 50_000;

/// A request to the indexer besides catalog changes.
pub enum Control {
    /// Index what is pending, commit as clean, and exit.
    Stop,
    /// Exit without a clean commit, as a crash would (tests).
    #[cfg(test)]
    Abandon,
}

/// What woke the indexer.
enum Next {
    Change(IndexChange),
    Stop,
    #[cfg(test)]
    Abandon,
    /// The commit deadline (or the idle wait) passed.
    Wait,
}

pub struct Indexer {
    pub writer: IndexWriter,
    pub reader: IndexReader,
    pub fields: Fields,
    pub source: Arc<dyn ItemSource>,
    pub vocabulary: Arc<RwLock<Arc<CatalogLabels>>>,
    pub stats: Arc<IndexStats>,
    pub commit_interval: Duration,
    /// Label reference counts of the indexed items.
    pub labels: LabelCounts,
    /// Items changed since the last commit, `(table, id)`.
    pub pending: HashSet<(String, String)>,
    /// Tables dropped since the last commit.
    pub dropped: Vec<String>,
}

impl Indexer {
    /// Loads the catalog (indexing all of it when `rebuild`), then follows the
    /// changes until told to stop.
    pub fn run(mut self, rebuild: bool, changes: Receiver<IndexChange>, control: Receiver<Control>) {
        if let Err(error) = self.load(rebuild) {
            tracing::error!(%error, "search index: loading the catalog failed; the index may be incomplete");
        }
        let mut last_commit = Instant::now();
        loop {
            let wait = if self.is_dirty() {
                (last_commit + self.commit_interval).saturating_duration_since(Instant::now())
            } else {
                IDLE_WAIT
            };
            let next = select! {
                recv(changes) -> change => match change {
                    Ok(change) => Next::Change(change),
                    Err(_) => Next::Stop,
                },
                recv(control) -> message => match message {
                    #[cfg(test)]
                    Ok(Control::Abandon) => Next::Abandon,
                    _ => Next::Stop,
                },
                default(wait) => Next::Wait,
            };
            match next {
                Next::Change(change) => self.queue(change),
                Next::Stop => break,
                #[cfg(test)]
                Next::Abandon => return,
                Next::Wait => {}
            }
            for change in changes.try_iter().take(DRAIN_BATCH) {
                self.queue(change);
            }
            if self.is_dirty() && last_commit.elapsed() >= self.commit_interval {
                self.apply_pending();
                self.commit(RUNNING);
                last_commit = Instant::now();
            }
        }
        for change in changes.try_iter() {
            self.queue(change);
        }
        self.apply_pending();
        self.commit(CLEAN);
        if let Err(error) = self.writer.wait_merging_threads() {
            tracing::warn!(%error, "search index: waiting for merges failed");
        }
        tracing::info!("search indexer stopped");
    }

    fn is_dirty(&self) -> bool {
        !self.pending.is_empty() || !self.dropped.is_empty()
    }

    fn queue(&mut self, change: IndexChange) {
        // The oldest change waiting is the first taken since the last commit.
        let _ = self.stats.oldest_waiting_ms.compare_exchange(
            0,
            super::unix_millis().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        match change {
            IndexChange::Item { table, id } => {
                self.pending.insert((table, id));
            }
            IndexChange::Table(table) => self.dropped.push(table),
        }
    }

    /// Reads every stored item: its labels always, its document when rebuilding.
    fn load(&mut self, rebuild: bool) -> Result<(), SearchError> {
        let started = Instant::now();
        if rebuild {
            self.writer.delete_all_documents()?;
        }
        let (writer, fields, labels) = (&self.writer, self.fields, &mut self.labels);
        let mut indexed = 0u64;
        let mut failure = None;
        self.source.scan(&mut |row| {
            let (Some(table), Some(id)) = (string(&row, "_table"), string(&row, "id")) else {
                return;
            };
            if is_deleted(&row) {
                return;
            }
            labels.set(&item_key(table, id), super::labels::labels(&row));
            if rebuild {
                match writer.add_document(document(&fields, table, id, &row)) {
                    Ok(_) => indexed += 1,
                    Err(error) => failure = Some(error),
                }
            }
        })?;
        if let Some(error) = failure {
            return Err(error.into());
        }
        self.stats.documents_indexed.fetch_add(indexed, Ordering::Relaxed);
        self.commit(RUNNING);
        self.stats.loaded.store(true, Ordering::Release);
        tracing::info!(
            rebuild,
            indexed,
            millis = started.elapsed().as_millis() as u64,
            "search index loaded"
        );
        Ok(())
    }

    /// Applies the pending changes to the writer: dropped tables first, then each
    /// changed item as storage has it now.
    fn apply_pending(&mut self) {
        for table in std::mem::take(&mut self.dropped) {
            self.writer
                .delete_term(Term::from_field_text(self.fields.table, &table));
            self.labels.remove_prefix(&format!("{table}{KEY_SEPARATOR}"));
        }
        for (table, id) in std::mem::take(&mut self.pending) {
            let key = item_key(&table, &id);
            let row = match self.source.row(&table, &id) {
                Ok(row) => row,
                Err(error) => {
                    // The item stays indexed as it was rather than vanish from search.
                    tracing::error!(%error, table, id, "search index: the changed item is unreadable; its entry is left as it was");
                    self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            self.writer.delete_term(Term::from_field_text(self.fields.key, &key));
            match row {
                Some(row) if !is_deleted(&row) => {
                    self.labels.set(&key, labels(&row));
                    match self.writer.add_document(document(&self.fields, &table, &id, &row)) {
                        Ok(_) => {
                            self.stats.documents_indexed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => tracing::error!(%error, table, id, "search index: adding an item failed"),
                    }
                }
                _ => {
                    self.labels.remove(&key);
                    self.stats.documents_removed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Publishes the vocabulary when it changed, commits with `payload` and makes
    /// the commit visible to searches.
    fn commit(&mut self, payload: &str) {
        // The vocabulary first: once a search sees an item, its labels are known.
        if let Some(vocabulary) = self.labels.snapshot_if_changed() {
            *self.vocabulary.write() = Arc::new(vocabulary);
        }
        let committed = self.writer.prepare_commit().and_then(|mut prepared| {
            prepared.set_payload(payload);
            prepared.commit()
        });
        if let Err(error) = committed.and_then(|_| self.reader.reload()) {
            tracing::error!(%error, "search index: commit failed");
            self.stats.commit_errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.stats.oldest_waiting_ms.store(0, Ordering::Relaxed);
    }
}

fn string<'a>(row: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    row.get(field).and_then(Value::as_str)
}
