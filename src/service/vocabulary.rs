//! The catalog's vocabulary, read by chat and by search: its group and tag names as a
//! label dictionary, and words read by meaning against them.
//!
//! Reading by meaning: with an embedder that understands meaning (MiniLM),
//! the free-text words the rules left are compared with the catalog's group and tag
//! names ("gore" → Horror), so that any catalog's own labels are understood, not
//! only the built-in synonym table's.
//!
//! The labels' vectors are made in the background ([`Vocabulary::make_label_meanings`]),
//! each label once: when the catalog's labels change, only the new ones are embedded.
//! A reading waits for the vectors of its dictionary a little ([`LABELS_WAIT`]), then
//! reads against the latest made (a catalog of thousands of tags takes seconds of
//! model runs: that is no request's to wait for). Each word's reading is kept, so a
//! word costs one model run the first time it is seen.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::chat::constraints::Extracted;
use crate::chat::dictionary::{DictionaryEntry, EntryKind, LabelDictionary};
use crate::chat::meaning::LabelVectors;
use crate::embed::{Lane, SharedEmbedder};
use crate::search::{CatalogLabels, SearchIndex};

/// Words whose reading is kept, at most (the memo is emptied past it).
const MAX_REMEMBERED_WORDS: usize = 20_000;
/// How long a reading waits for its dictionary's label vectors before it reads
/// against the latest made (or leaves the words as they are, when none are): long
/// enough for a catalog's first thousands of labels on an idle machine (MovieLens'
/// ~1,600 tags take ~3 s of two cores), well within a request's deadline.
const LABELS_WAIT: Duration = Duration::from_secs(6);
/// How often the labels are looked at when nothing asks for them.
const LABELS_CHECK: Duration = Duration::from_millis(500);
/// Labels embedded per model run: a catalog's first thousands go in runs that leave
/// the model to requests between them.
const LABELS_PER_RUN: usize = 64;

/// The labels' vectors of one dictionary snapshot.
struct MadeLabels {
    dictionary: Arc<LabelDictionary>,
    labels: Arc<LabelVectors>,
}

/// The label vectors made so far and the words read against them.
struct Meanings {
    /// The latest labels made; readings wait on it.
    made: watch::Sender<Option<Arc<MadeLabels>>>,
    /// Asks the maker to look at the labels now.
    wake: Notify,
    /// The words read so far.
    words: parking_lot::Mutex<WordsRead>,
}

/// Words read against one set of label vectors: word → the label it names.
#[derive(Default)]
struct WordsRead {
    labels: Option<Arc<LabelVectors>>,
    words: HashMap<String, Option<DictionaryEntry>>,
}

impl WordsRead {
    fn read_against(&self, labels: &Arc<LabelVectors>) -> bool {
        self.labels.as_ref().is_some_and(|against| Arc::ptr_eq(against, labels))
    }
}

impl Default for Meanings {
    fn default() -> Meanings {
        Meanings {
            made: watch::channel(None).0,
            wake: Notify::new(),
            words: Default::default(),
        }
    }
}

/// The catalog's labels as a dictionary, and the words read by meaning against them.
pub struct Vocabulary {
    /// Whose labels are read.
    index: Arc<SearchIndex>,
    /// Reads words and labels by meaning.
    embedder: SharedEmbedder,
    /// The search index's label snapshot and the dictionary built from it.
    dictionary: parking_lot::Mutex<Option<(Arc<CatalogLabels>, Arc<LabelDictionary>)>>,
    /// The labels' vectors and the words read against them.
    meanings: Meanings,
}

impl Vocabulary {
    pub fn new(index: Arc<SearchIndex>, embedder: SharedEmbedder) -> Vocabulary {
        Vocabulary {
            index,
            embedder,
            dictionary: parking_lot::Mutex::new(None),
            meanings: Meanings::default(),
        }
    }

    /// Whether words can be read by meaning (the embedder understands it).
    pub fn understands_meaning(&self) -> bool {
        self.embedder.understands_meaning()
    }

    /// The catalog's labels as a dictionary, built once per snapshot of the search
    /// index's labels.
    pub fn dictionary(&self) -> Arc<LabelDictionary> {
        let words = self.index.labels();
        let mut cached = self.dictionary.lock();
        if let Some((source, dictionary)) = cached.as_ref() {
            if Arc::ptr_eq(source, &words) {
                return dictionary.clone();
            }
        }
        let groups: Vec<&String> = words.groups.values().collect();
        let tags: Vec<&String> = words.tags.values().collect();
        let dictionary = Arc::new(LabelDictionary::new(&groups, &tags));
        *cached = Some((words, dictionary.clone()));
        dictionary
    }

    /// The label vectors to read against: `dictionary`'s once made (waiting for them
    /// at most [`LABELS_WAIT`]), else the latest made; `None` before any are.
    async fn label_vectors(&self, dictionary: &Arc<LabelDictionary>) -> Option<Arc<LabelVectors>> {
        let mut made = self.meanings.made.subscribe();
        let of = |made: &Option<Arc<MadeLabels>>, dictionary: &Arc<LabelDictionary>| {
            made.as_ref()
                .is_some_and(|made| Arc::ptr_eq(&made.dictionary, dictionary))
        };
        if !of(&made.borrow(), dictionary) {
            self.meanings.wake.notify_one();
            // A newer dictionary's labels do as well as this one's.
            let newest = || self.dictionary.lock().as_ref().map(|(_, newest)| newest.clone());
            let ready =
                made.wait_for(|labels| of(labels, dictionary) || newest().is_some_and(|newest| of(labels, &newest)));
            if tokio::time::timeout(LABELS_WAIT, ready).await.is_err() {
                tracing::debug!("the catalog's labels are still being embedded; reading against the latest made");
            }
        }
        let latest = made.borrow().as_ref().map(|made| made.labels.clone());
        latest
    }
}

impl Vocabulary {
    /// Makes the label vectors of the catalog's dictionary whenever it changes, until
    /// `shutdown` is cancelled (spawned at start with an embedder that understands
    /// meaning). A label's vector is embedded once and carried to the next
    /// dictionary's, so that a changed catalog costs its new labels only.
    pub async fn make_label_meanings(self: Arc<Self>, shutdown: CancellationToken) {
        let mut check = tokio::time::interval(LABELS_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = check.tick() => {}
                _ = self.meanings.wake.notified() => {}
            }
            let dictionary = self.dictionary();
            let previous = self.meanings.made.borrow().clone();
            if previous
                .as_ref()
                .is_some_and(|made| Arc::ptr_eq(&made.dictionary, &dictionary))
            {
                continue;
            }
            let started = std::time::Instant::now();
            match self.embed_labels(&dictionary, previous.as_deref()).await {
                Some(labels) => {
                    tracing::debug!(
                        labels = labels.len(),
                        took_ms = started.elapsed().as_millis() as u64,
                        "the catalog's labels' meanings are made"
                    );
                    self.meanings.made.send_replace(Some(Arc::new(MadeLabels {
                        dictionary,
                        labels: Arc::new(labels),
                    })));
                }
                // Looked at again at the next check.
                None => check.reset(),
            }
        }
    }

    /// The vectors of `dictionary`'s labels: those `previous` has, and the others
    /// embedded (`None`: the model failed).
    async fn embed_labels(&self, dictionary: &LabelDictionary, previous: Option<&MadeLabels>) -> Option<LabelVectors> {
        let labels = dictionary.labels();
        let known: HashMap<&str, &[f32]> = previous
            .map(|made| {
                made.labels
                    .iter()
                    .map(|(label, vector)| (label.display.as_str(), vector))
                    .collect()
            })
            .unwrap_or_default();
        let missing: Vec<String> = {
            let mut missing: Vec<String> = labels
                .iter()
                .filter(|label| !known.contains_key(label.display.as_str()))
                .map(|label| label.display.clone())
                .collect();
            missing.dedup();
            missing
        };
        let mut embedded: HashMap<String, Vec<f32>> = HashMap::with_capacity(missing.len());
        for run in missing.chunks(LABELS_PER_RUN) {
            let vectors = self
                .embedder
                .embed_owned(Lane::Ingest, run.to_vec())
                .await
                .map_err(|error| tracing::warn!(%error, "embedding the catalog's labels failed"))
                .ok()?;
            embedded.extend(run.iter().cloned().zip(vectors));
        }
        let vectors = labels
            .iter()
            .map(|label| match known.get(label.display.as_str()) {
                Some(vector) => vector.to_vec(),
                None => embedded.get(&label.display).cloned().unwrap_or_default(),
            })
            .collect();
        Some(LabelVectors::new(labels, vectors))
    }

    /// Moves the free-text words (and the negated ones) that name a catalog label by
    /// meaning into the wanted (ruled-out) groups and tags. Without an embedder that
    /// understands meaning, or when the model fails, the words stay as they are.
    pub(in crate::service) async fn read_by_meaning(
        &self,
        extracted: &mut Extracted,
        dictionary: &Arc<LabelDictionary>,
    ) {
        let readable = |word: &String| word.chars().count() >= 3 && word.chars().all(char::is_alphabetic);
        let words: Vec<String> = extracted
            .terms
            .iter()
            .chain(&extracted.negated_terms)
            .filter(|word| readable(word))
            .cloned()
            .collect();
        if words.is_empty() || dictionary.is_empty() || !self.embedder.understands_meaning() {
            return;
        }
        let Some(labels) = self.label_vectors(dictionary).await else {
            return;
        };
        // Each word's reading: kept from an earlier reading against these labels, or
        // made now (`unknown`).
        let mut named: HashMap<String, Option<DictionaryEntry>> = HashMap::new();
        let mut unknown: Vec<String> = Vec::new();
        {
            let mut memo = self.meanings.words.lock();
            if !memo.read_against(&labels) {
                *memo = WordsRead {
                    labels: Some(labels.clone()),
                    words: HashMap::new(),
                };
            }
            for word in words {
                match memo.words.get(&word) {
                    Some(label) => _ = named.insert(word, label.clone()),
                    None => unknown.push(word),
                }
            }
        }
        if !unknown.is_empty() {
            let vectors = self.embedder.embed_owned(Lane::Request, unknown.clone()).await;
            let Ok(vectors) = vectors else {
                tracing::warn!("the embedder failed; chat words are read without their meaning");
                return;
            };
            let read: Vec<(String, Option<DictionaryEntry>)> = unknown
                .into_iter()
                .zip(vectors)
                .map(|(word, vector)| (word, labels.nearest(&vector).cloned()))
                .collect();
            let mut memo = self.meanings.words.lock();
            if memo.read_against(&labels) {
                if memo.words.len() + read.len() > MAX_REMEMBERED_WORDS {
                    memo.words.clear();
                }
                memo.words.extend(read.iter().cloned());
            }
            named.extend(read);
        }
        let name_of = |word: &String| named.get(word).cloned().flatten();
        let mut kept = Vec::new();
        for word in std::mem::take(&mut extracted.terms) {
            match name_of(&word) {
                Some(entry) => add(label_list(extracted, entry.kind, false), entry.display),
                None => kept.push(word),
            }
        }
        extracted.terms = kept;
        for word in extracted.negated_terms.clone() {
            if let Some(entry) = name_of(&word) {
                add(label_list(extracted, entry.kind, true), entry.display);
            }
        }
    }
}
fn label_list(extracted: &mut Extracted, kind: EntryKind, ruled_out: bool) -> &mut Vec<String> {
    match (kind, ruled_out) {
        (EntryKind::Group, false) => &mut extracted.groups,
        (EntryKind::Tag, false) => &mut extracted.tags,
        (EntryKind::Group, true) => &mut extracted.excluded_groups,
        (EntryKind::Tag, true) => &mut extracted.excluded_tags,
    }
}

fn add(list: &mut Vec<String>, name: String) {
    if !list.contains(&name) {
        list.push(name);
    }
}
