//! Full-text search over the catalog (tantivy): one index per node under
//! `<data_dir>/search`, one document per catalog item (never users), fed
//! near-real-time from catalog writes and rebuilt from storage when missing.
//! Pure: no HTTP, no engine types; the catalog is reached through [`ItemSource`].
//!
//! - `schema`: fields, analyzer, row → document.
//! - `query`: query tokens, typo rules, the coverage query search ranks by and plain
//!   BM25 (the baseline and rerank's text score).
//! - `indexer`: the writer thread (changes → re-read → commit).
//! - `labels`: the group and tag names of the indexed items.
//! - `segments`: what search keeps in memory of each segment (keys, item hashes,
//!   typo expansions).
//! - `answers`: the best matches of recent queries, until the next commit or priors.

mod answers;
mod indexer;
mod labels;
mod query;
mod schema;
mod segments;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{Receiver, Sender};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, Term, Warmer};

use crate::config::SearchConfig;
use answers::{Answer, Answers, Question};
use indexer::{Control, Indexer, CLEAN};
pub use labels::CatalogLabels;
pub use query::{edit_distance, typos_allowed, QueryToken, Wanted};
pub use schema::item_hash;
use schema::{split_key, Fields};
use segments::Segments;

/// A catalog change the index must follow; sent after the write is durable.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexChange {
    /// An item was upserted, soft-deleted or purged.
    Item { table: String, id: String },
    /// A whole table was dropped.
    Table(String),
}

/// Where the indexer reads items: the catalog's storage.
pub trait ItemSource: Send + Sync {
    /// The stored row of item `id` in `table`, if any; an error when it cannot be read.
    fn row(&self, table: &str, id: &str) -> Result<Option<Map<String, Value>>, SourceError>;
    /// Calls `visit` with every stored item row (every table but users).
    fn scan(&self, visit: &mut dyn FnMut(Map<String, Value>)) -> Result<(), SourceError>;
}

/// The catalog could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("reading the catalog: {0}")]
pub struct SourceError(pub String);

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search index: {0}")]
    Index(#[from] tantivy::TantivyError),
    #[error("search index directory {path}: {source}")]
    Directory { path: String, source: std::io::Error },
    #[error("the search index could not read the catalog: {0}")]
    Source(#[from] SourceError),
}

impl From<String> for SearchError {
    fn from(message: String) -> SearchError {
        SearchError::Source(SourceError(message))
    }
}

/// One text match.
#[derive(Debug, Clone, PartialEq)]
pub struct TextHit {
    pub id: String,
    pub table: String,
    /// BM25 (with typo-tolerant terms weighted down), only comparable within a query;
    /// or, from [`SearchIndex::find`], how much of the query the item covers, in [0, 1].
    pub score: f32,
    /// The item's prior, in [0, 1] (0 from a plain text search).
    pub prior: f32,
}

/// What is known of each item before any query: its popularity and availability, as
/// one number in [0, 1] by [`item_hash`] of its id. Made by the caller (from the
/// models), read while matches are collected.
#[derive(Debug, Default)]
pub struct Priors {
    by_item: FxHashMap<u64, f32>,
}

impl Priors {
    pub fn new(by_item: FxHashMap<u64, f32>) -> Priors {
        Priors { by_item }
    }

    pub fn of(&self, item: u64) -> f32 {
        self.by_item.get(&item).copied().unwrap_or(0.0)
    }
}

/// What the indexer has done, for stats and tests.
#[derive(Debug, Default)]
pub struct IndexStats {
    pub commits: AtomicU64,
    pub commit_errors: AtomicU64,
    pub documents_indexed: AtomicU64,
    pub documents_removed: AtomicU64,
    /// Changed items that could not be read (their entries were left as they were).
    pub read_errors: AtomicU64,
    /// True once the catalog was read at start (and indexed, when rebuilding).
    pub loaded: AtomicBool,
    /// Unix ms at which the indexer took the oldest change not yet searchable; 0 when
    /// every change it took is.
    pub oldest_waiting_ms: AtomicU64,
}

/// The search index of a node: searches run on the caller's thread against the
/// last committed state; one indexer thread writes.
pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    /// What is kept of each segment; the reader holds it weakly, as its warmer.
    segments: Arc<Segments>,
    /// The best matches of recent queries, for this generation and these priors.
    answers: Answers,
    analyzer: TextAnalyzer,
    config: SearchConfig,
    vocabulary: Arc<RwLock<Arc<CatalogLabels>>>,
    stats: Arc<IndexStats>,
    control: Sender<Control>,
    indexer: Mutex<Option<JoinHandle<()>>>,
}

impl SearchIndex {
    /// Opens the index under `directory` (creating it, or rebuilding it from `source`
    /// when it is missing, unreadable or was not closed cleanly) and starts the
    /// indexer on `changes`. Subscribe `changes` to the catalog before calling this:
    /// what is written while the catalog is read is applied afterwards.
    pub fn open(
        directory: &Path,
        config: &SearchConfig,
        source: Arc<dyn ItemSource>,
        changes: Receiver<IndexChange>,
    ) -> Result<SearchIndex, SearchError> {
        let (index, rebuild) = open_or_create(directory)?;
        schema::register_analyzer(&index);
        let fields = Fields::of(&index.schema()).expect("open_or_create checked the schema");
        let writer = index.writer_with_num_threads(1, config.writer_memory_bytes)?;
        let segments = Arc::new(Segments::new(fields));
        let warmer: Weak<dyn Warmer> = Arc::downgrade(&segments) as Weak<dyn Warmer>;
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .doc_store_cache_num_blocks(config.doc_store_cache_blocks)
            .warmers(vec![warmer])
            .try_into()?;
        let vocabulary = Arc::new(RwLock::new(Arc::new(CatalogLabels::default())));
        let stats = Arc::new(IndexStats::default());
        let (control, control_receiver) = crossbeam::channel::bounded(1);
        let indexer = Indexer {
            writer,
            reader: reader.clone(),
            fields,
            source,
            vocabulary: vocabulary.clone(),
            stats: stats.clone(),
            commit_interval: Duration::from_millis(config.commit_interval_ms),
            labels: Default::default(),
            pending: Default::default(),
            dropped: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("search-indexer".into())
            .spawn(move || indexer.run(rebuild, changes, control_receiver))
            .map_err(|source| SearchError::Directory {
                path: directory.display().to_string(),
                source,
            })?;
        tracing::info!(directory = %directory.display(), rebuild, "search index opened");
        Ok(SearchIndex {
            reader,
            fields,
            segments,
            answers: Answers::new(config.cached_queries),
            analyzer: schema::analyzer(),
            config: config.clone(),
            vocabulary,
            stats,
            control,
            indexer: Mutex::new(Some(thread)),
        })
    }

    /// The best `limit` text matches of `query`, best first.
    pub fn text_search(&self, query: &str, limit: usize) -> Result<Vec<TextHit>, SearchError> {
        self.text_search_in(query, limit, &[])
    }

    /// [`Self::text_search`] over the items of `tables` only (every table when empty).
    pub fn text_search_in(&self, query: &str, limit: usize, tables: &[String]) -> Result<Vec<TextHit>, SearchError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let Some(text) = self.text_query(&searcher, query)? else {
            return Ok(Vec::new());
        };
        let query = self.in_tables(Box::new(text), tables);
        let top = searcher.search(&*query, &TopDocs::with_limit(limit).order_by_score())?;
        self.hits(&searcher, &top)
    }

    /// The best `limit` items for `wanted`, by coverage + `prior_weight` × prior (see
    /// `query`), best first; items of `tables` only (every table when empty). Asked again
    /// with the same searcher generation and priors, answered from `answers`.
    pub fn find(
        &self,
        wanted: &Wanted,
        limit: usize,
        tables: &[String],
        priors: Arc<Priors>,
        prior_weight: f32,
    ) -> Result<Vec<TextHit>, SearchError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let question = Question::new(wanted, tables, limit, prior_weight);
        let top = match self.answers.get(&searcher, &priors, &question) {
            Some(top) => top,
            None => {
                let top: Answer = self
                    .best(&searcher, wanted, limit, tables, &priors, prior_weight)?
                    .into();
                self.answers.put(&searcher, &priors, question, top.clone());
                top
            }
        };
        self.answer_hits(&searcher, &top, &priors, prior_weight)
    }

    /// What [`Self::find`] answers, when it is an answer kept from the same searcher
    /// and priors (`None`: it would have to search). Microseconds: callers may ask it
    /// on the request's own thread before they hand the search to a blocking one.
    pub fn find_kept(
        &self,
        wanted: &Wanted,
        limit: usize,
        tables: &[String],
        priors: &Arc<Priors>,
        prior_weight: f32,
    ) -> Option<Result<Vec<TextHit>, SearchError>> {
        let searcher = self.reader.searcher();
        let question = Question::new(wanted, tables, limit, prior_weight);
        let top = self.answers.get(&searcher, priors, &question)?;
        Some(self.answer_hits(&searcher, &top, priors, prior_weight))
    }

    /// The hits of an answer, each with its prior's part taken out of its score.
    fn answer_hits(
        &self,
        searcher: &Searcher,
        top: &Answer,
        priors: &Priors,
        prior_weight: f32,
    ) -> Result<Vec<TextHit>, SearchError> {
        let mut hits = self.hits(searcher, top)?;
        for hit in &mut hits {
            hit.prior = priors.of(item_hash(&hit.id));
            hit.score -= prior_weight * hit.prior;
        }
        Ok(hits)
    }

    /// The best `limit` matches of `wanted` (see [`Self::find`]), with their scores.
    fn best(
        &self,
        searcher: &Searcher,
        wanted: &Wanted,
        limit: usize,
        tables: &[String],
        priors: &Arc<Priors>,
        prior_weight: f32,
    ) -> Result<Vec<(f32, DocAddress)>, SearchError> {
        let mut stemmer = schema::stem_analyzer();
        let (query, most) = query::coverage_query(
            searcher,
            &self.segments,
            &self.fields,
            &mut stemmer,
            wanted,
            &self.config,
        )?;
        let query = self.in_tables(query, tables);
        let scale = if most > 0.0 { 1.0 / most } else { 0.0 };
        let by_item = priors.clone();
        let segments = self.segments.clone();
        let collector = TopDocs::with_limit(limit).tweak_score(move |segment: &tantivy::SegmentReader| {
            // Every segment of a searcher was read when it was made: this only fails when
            // reading it again does (then its items score without priors or word counts).
            let kept = segments.of(segment).ok();
            let priors = by_item.clone();
            move |doc: tantivy::DocId, score: tantivy::Score| {
                let (prior, words) = kept
                    .as_ref()
                    .map_or((0.0, 0), |kept| (priors.of(kept.item(doc)), kept.title_words(doc)));
                (score * scale + prior_weight * prior, std::cmp::Reverse(words))
            }
        });
        let top = searcher.search(&*query, &collector)?;
        Ok(top.into_iter().map(|((score, _), address)| (score, address)).collect())
    }

    /// `query` limited to the items of `tables` (all when empty).
    fn in_tables(&self, query: Box<dyn Query>, tables: &[String]) -> Box<dyn Query> {
        if tables.is_empty() {
            return query;
        }
        let only = TermSetQuery::new(
            tables
                .iter()
                .map(|table| Term::from_field_text(self.fields.table, table)),
        );
        Box::new(BooleanQuery::new(vec![
            (Occur::Must, query),
            (Occur::Must, Box::new(ConstScoreQuery::new(Box::new(only), 0.0))),
        ]))
    }

    /// The text score of each of `ids` that matches `query` (best over the tables
    /// holding the id); ids without a match are absent.
    pub fn score_ids(&self, query: &str, ids: &[String]) -> Result<HashMap<String, f32>, SearchError> {
        let mut scores = HashMap::new();
        if ids.is_empty() {
            return Ok(scores);
        }
        let searcher = self.reader.searcher();
        let Some(text) = self.text_query(&searcher, query)? else {
            return Ok(scores);
        };
        let only = TermSetQuery::new(ids.iter().map(|id| Term::from_field_text(self.fields.id, id)));
        let clauses: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(text)),
            (Occur::Must, Box::new(ConstScoreQuery::new(Box::new(only), 0.0))),
        ];
        // An id may be in several tables: room for a few of those.
        let limit = ids.len() + ids.len() / 4 + 8;
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
        )?;
        for hit in self.hits(&searcher, &top)? {
            let best = scores.entry(hit.id).or_insert(hit.score);
            *best = best.max(hit.score);
        }
        Ok(scores)
    }

    /// Whether some item's title carries every one of `stems` (false when the index
    /// cannot be read: the caller then reads the query as it would without titles).
    pub fn a_title_has_all(&self, stems: &[String]) -> bool {
        if stems.is_empty() {
            return false;
        }
        let all: Vec<(Occur, Box<dyn Query>)> = stems
            .iter()
            .map(|stem| {
                let term = Term::from_field_text(self.fields.title_stem, stem);
                let query: Box<dyn Query> = Box::new(TermQuery::new(term, tantivy::schema::IndexRecordOption::Basic));
                (Occur::Must, query)
            })
            .collect();
        let searcher = self.reader.searcher();
        match searcher.search(&BooleanQuery::new(all), &TopDocs::with_limit(1).order_by_score()) {
            Ok(top) => !top.is_empty(),
            Err(error) => {
                tracing::warn!(%error, "searching titles failed");
                false
            }
        }
    }

    /// Those of `words` the index has nowhere, not even within a typo (each of the word's
    /// tokens unknown); none when the index cannot be read.
    pub fn unknown_words(&self, words: &[String]) -> Vec<String> {
        let searcher = self.reader.searcher();
        let mut stemmer = schema::stem_analyzer();
        let mut unknown = |word: &String| -> tantivy::Result<bool> {
            let tokens = self.tokens(word);
            for token in &tokens {
                if !query::is_unknown(&searcher, &self.segments, &self.fields, &mut stemmer, token)? {
                    return Ok(false);
                }
            }
            Ok(!tokens.is_empty())
        };
        let mut found = Vec::new();
        for word in words {
            match unknown(word) {
                Ok(true) => found.push(word.clone()),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "looking up query words failed");
                    return Vec::new();
                }
            }
        }
        found
    }

    /// The distinct analyzed tokens of `text`, with the typos each tolerates.
    pub fn tokens(&self, text: &str) -> Vec<QueryToken> {
        query::query_tokens(&mut self.analyzer.clone(), text, &self.config)
    }

    /// The stems of the words of `text`.
    pub fn stems(&self, text: &str) -> Vec<String> {
        let mut stemmer = schema::stem_analyzer();
        let mut stream = stemmer.token_stream(text);
        let mut stems = Vec::new();
        while stream.advance() {
            stems.push(stream.token().text.clone());
        }
        stems
    }

    fn text_query(&self, searcher: &Searcher, query: &str) -> Result<Option<BooleanQuery>, SearchError> {
        let tokens = query::query_tokens(&mut self.analyzer.clone(), query, &self.config);
        Ok(query::text_query(
            searcher,
            &self.segments,
            &self.fields,
            &tokens,
            &self.config,
        )?)
    }

    fn hits(&self, searcher: &Searcher, top: &[(f32, DocAddress)]) -> Result<Vec<TextHit>, SearchError> {
        let segments = searcher
            .segment_readers()
            .iter()
            .map(|segment| self.segments.of(segment))
            .collect::<tantivy::Result<Vec<_>>>()?;
        let mut hits = Vec::with_capacity(top.len());
        for &(score, address) in top {
            let key = segments
                .get(address.segment_ord as usize)
                .and_then(|segment| segment.key(address.doc_id));
            let Some((table, id)) = key.and_then(split_key) else {
                continue;
            };
            hits.push(TextHit {
                id: id.to_owned(),
                table: table.to_owned(),
                score,
                prior: 0.0,
            });
        }
        Ok(hits)
    }

    /// The settings the index was opened with (blend weights included).
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// The group and tag names of the indexed items.
    pub fn labels(&self) -> Arc<CatalogLabels> {
        self.vocabulary.read().clone()
    }

    /// How long the oldest change the indexer took has waited to become searchable.
    pub fn lag(&self) -> Duration {
        match self.stats.oldest_waiting_ms.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            since => Duration::from_millis(unix_millis().saturating_sub(since)),
        }
    }

    /// Items of `table` searchable now (soft-deleted ones are not in the index).
    pub fn count_in_table(&self, table: &str) -> Result<u64, SearchError> {
        let query = TermQuery::new(
            Term::from_field_text(self.fields.table, table),
            tantivy::schema::IndexRecordOption::Basic,
        );
        Ok(self.reader.searcher().search(&query, &Count)? as u64)
    }

    /// Documents searchable now.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// Whether the catalog was read at start (and indexed, when rebuilding).
    pub fn is_loaded(&self) -> bool {
        self.stats.loaded.load(Ordering::Acquire)
    }

    /// Indexes what is pending, commits, and stops the indexer thread. Blocks.
    pub fn stop(&self) {
        let Some(thread) = self.indexer.lock().take() else {
            return;
        };
        let _ = self.control.send(Control::Stop);
        if thread.join().is_err() {
            tracing::error!("the search indexer thread panicked");
        }
    }

    /// Stops the indexer without its clean commit, as a crash would.
    #[cfg(test)]
    fn abandon(&self) {
        if let Some(thread) = self.indexer.lock().take() {
            let _ = self.control.send(Control::Abandon);
            let _ = thread.join();
        }
    }
}

impl Drop for SearchIndex {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Milliseconds since the Unix epoch.
fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Opens the index in `directory`, or creates it; the flag says whether it must be
/// (re)built from the catalog.
fn open_or_create(directory: &Path) -> Result<(Index, bool), SearchError> {
    let io_error = |source| SearchError::Directory {
        path: directory.display().to_string(),
        source,
    };
    if directory.exists() {
        match Index::open_in_dir(directory) {
            Ok(index) if Fields::of(&index.schema()).is_some() => {
                let clean = index.load_metas()?.payload.as_deref() == Some(CLEAN);
                if !clean {
                    tracing::warn!(directory = %directory.display(), "search index was not closed cleanly; rebuilding it");
                }
                return Ok((index, !clean));
            }
            Ok(_) => tracing::warn!(directory = %directory.display(), "search index has another schema; rebuilding it"),
            Err(error) => {
                tracing::warn!(directory = %directory.display(), %error, "search index unreadable; rebuilding it")
            }
        }
        std::fs::remove_dir_all(directory).map_err(io_error)?;
    } else {
        tracing::info!(directory = %directory.display(), "no search index; building it from the catalog");
    }
    std::fs::create_dir_all(directory).map_err(io_error)?;
    Ok((Index::create_in_dir(directory, Fields::schema())?, true))
}

#[cfg(test)]
mod tests;
