//! Chat's reading by meaning: with an embedder that understands meaning (MiniLM),
//! the free-text words the rules left are compared with the catalog's group and tag
//! names ("gore" → Horror), so that any catalog's own labels are understood, not
//! only the built-in synonym table's. The labels' vectors are made once per
//! dictionary snapshot and each word's reading is kept, so a word costs one model
//! run the first time it is seen.

use std::collections::HashMap;
use std::sync::Arc;

use super::ChatService;
use crate::chat::constraints::Extracted;
use crate::chat::dictionary::{DictionaryEntry, EntryKind, LabelDictionary};
use crate::chat::meaning::LabelVectors;
use crate::embed::Lane;
use crate::service::Services;

/// Words whose reading is kept, at most (the memo is emptied past it).
const MAX_REMEMBERED_WORDS: usize = 20_000;

/// The labels' vectors of one dictionary snapshot and the words read against them.
#[derive(Default)]
pub(super) struct Meanings {
    dictionary: Option<Arc<LabelDictionary>>,
    labels: Arc<LabelVectors>,
    words: HashMap<String, Option<DictionaryEntry>>,
}

impl ChatService {
    /// The label vectors, when they were made for this `dictionary` snapshot.
    fn meanings_for(&self, dictionary: &Arc<LabelDictionary>) -> Option<Arc<LabelVectors>> {
        let meanings = self.meanings.lock();
        let current = meanings
            .dictionary
            .as_ref()
            .is_some_and(|known| Arc::ptr_eq(known, dictionary));
        current.then(|| meanings.labels.clone())
    }
}

impl Services {
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
        let labels = match self.chat.meanings_for(dictionary) {
            Some(labels) => labels,
            None => match self.embed_labels(dictionary).await {
                Some(labels) => labels,
                None => return,
            },
        };
        let unknown: Vec<String> = {
            let meanings = self.chat.meanings.lock();
            words
                .iter()
                .filter(|word| !meanings.words.contains_key(*word))
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            let texts = unknown.clone();
            let vectors = self
                .embedder
                .run(Lane::Request, move |embedder| {
                    embedder.embed_texts(&texts.iter().map(String::as_str).collect::<Vec<_>>())
                })
                .await;
            let Ok(vectors) = vectors else {
                tracing::warn!("the embedder failed; chat words are read without their meaning");
                return;
            };
            let mut meanings = self.chat.meanings.lock();
            if meanings.words.len() + unknown.len() > MAX_REMEMBERED_WORDS {
                meanings.words.clear();
            }
            for (word, vector) in unknown.into_iter().zip(vectors) {
                let label = labels.nearest(&vector).cloned();
                meanings.words.insert(word, label);
            }
        }
        let meanings = self.chat.meanings.lock();
        let named = |word: &String| meanings.words.get(word).cloned().flatten();
        let mut kept = Vec::new();
        for word in std::mem::take(&mut extracted.terms) {
            match named(&word) {
                Some(entry) => add(label_list(extracted, entry.kind, false), entry.display),
                None => kept.push(word),
            }
        }
        extracted.terms = kept;
        for word in extracted.negated_terms.clone() {
            if let Some(entry) = named(&word) {
                add(label_list(extracted, entry.kind, true), entry.display);
            }
        }
    }

    /// Embeds the dictionary's labels and makes them the memo's (`None`: the model failed).
    async fn embed_labels(&self, dictionary: &Arc<LabelDictionary>) -> Option<Arc<LabelVectors>> {
        let labels = dictionary.labels();
        let texts: Vec<String> = labels.iter().map(|label| label.display.clone()).collect();
        let vectors = self
            .embedder
            .run(Lane::Request, move |embedder| {
                embedder.embed_texts(&texts.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .await
            .map_err(|error| tracing::warn!(%error, "embedding the catalog's labels failed"))
            .ok()?;
        let vectors = Arc::new(LabelVectors::new(labels, vectors));
        let mut meanings = self.chat.meanings.lock();
        *meanings = Meanings {
            dictionary: Some(dictionary.clone()),
            labels: vectors.clone(),
            words: HashMap::new(),
        };
        Some(vectors)
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
