//! What search keeps in memory of each index segment, so that a search reads plain
//! arrays instead of the segment's columns, compressed document store and term
//! dictionaries:
//!
//! - per document: its key (table and id), its [`item_hash`](super::item_hash) and
//!   its title's word count, read while collecting and naming the best matches;
//! - the typo expansions of the tokens searched so far (the walk of a term
//!   dictionary for the terms within a token's edit distance), reused by the next
//!   search of the same token.
//!
//! Beside them, for the whole index: the typo automata of the latest tokens walked, so
//! that a new token's automaton is built once for every field and segment it is
//! walked in (the reading's unknown-word check and the query each walk it).
//!
//! A segment never changes once written (deletes only hide its documents), so what is
//! kept of it stays true for its whole life. It is made when the segment first becomes
//! searchable: [`Segments`] is a tantivy [`Warmer`], run on the indexer's thread at
//! each reload, before the new searcher is published; and dropped with the last
//! searcher that has the segment.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use tantivy::columnar::Column;
use tantivy::index::SegmentId;
use tantivy::query::DfaWrapper;
use tantivy::schema::{Field, Value};
use tantivy::{DocId, Searcher, SearcherGeneration, SegmentReader, TantivyDocument, Warmer};

use super::schema::Fields;

/// Most terms kept as typo expansions per segment (~50 bytes each); past it they are
/// all forgotten and walked anew.
const MOST_EXPANSIONS: usize = 50_000;
/// Typo automata kept: one costs up to a few hundred KB (1 KB a state), and is wanted
/// again only within the search that built it or one running beside it.
const AUTOMATA: NonZeroUsize = NonZeroUsize::new(16).expect("non-zero");
/// Decompressed blocks kept while a segment's keys are read: they are read in order.
const STORE_BLOCKS: usize = 1;

/// One term within a token's edit distance in one segment.
#[derive(Debug)]
pub struct Expansion {
    pub term: Box<str>,
    /// Its edit distance to the token.
    pub distance: u8,
    /// The segment's documents having it.
    pub documents: u64,
}

/// The terms of one field within a token's edit distance, as one segment's term
/// dictionary has them.
pub type Expanded = Arc<[Expansion]>;

/// What one expansion was looked for: the field, the token, the typos it tolerates,
/// and whether a typo may be in its first letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExpansionKey {
    pub field: Field,
    pub token: String,
    pub typos: u8,
    pub any_first_letter: bool,
}

/// What is kept of one segment.
pub struct Segment {
    /// Every document's key, one after the other: document `d`'s ends at `ends[d]`.
    keys: String,
    ends: Vec<u32>,
    items: Vec<u64>,
    title_words: Vec<u32>,
    expansions: Mutex<KeptExpansions>,
}

/// The expansions kept of one segment, and how many terms they hold.
#[derive(Default)]
struct KeptExpansions {
    by_key: FxHashMap<ExpansionKey, Expanded>,
    terms: usize,
}

impl Segment {
    fn read(segment: &SegmentReader, fields: &Fields) -> tantivy::Result<Segment> {
        let documents = segment.max_doc() as usize;
        let column = |field: Field| -> tantivy::Result<Column<u64>> {
            let name = segment.schema().get_field_name(field).to_owned();
            Ok(segment.fast_fields().u64(&name)?)
        };
        let (items, words) = (column(fields.item)?, column(fields.title_words)?);
        let mut read = Segment {
            keys: String::new(),
            ends: Vec::with_capacity(documents),
            items: Vec::with_capacity(documents),
            title_words: Vec::with_capacity(documents),
            expansions: Mutex::default(),
        };
        let store = segment.get_store_reader(STORE_BLOCKS)?;
        for (doc, document) in store.iter::<TantivyDocument>(None).enumerate() {
            let doc = doc as DocId;
            if let Some(key) = document?.get_first(fields.key).and_then(|value| value.as_str()) {
                read.keys.push_str(key);
            }
            read.ends.push(u32::try_from(read.keys.len()).unwrap_or(u32::MAX));
            read.items.push(items.first(doc).unwrap_or(0));
            read.title_words
                .push(u32::try_from(words.first(doc).unwrap_or(0)).unwrap_or(u32::MAX));
        }
        read.keys.shrink_to_fit();
        Ok(read)
    }

    /// The key of document `doc` (`table`, separator, `id`); `None` past the last.
    pub fn key(&self, doc: DocId) -> Option<&str> {
        let doc = doc as usize;
        let end = *self.ends.get(doc)? as usize;
        let start = match doc {
            0 => 0,
            _ => self.ends[doc - 1] as usize,
        };
        self.keys.get(start..end)
    }

    /// The [`item_hash`](super::item_hash) of document `doc`'s id (0 past the last).
    pub fn item(&self, doc: DocId) -> u64 {
        self.items.get(doc as usize).copied().unwrap_or(0)
    }

    /// How many words document `doc`'s title has (0 past the last).
    pub fn title_words(&self, doc: DocId) -> u64 {
        self.title_words.get(doc as usize).map_or(0, |words| u64::from(*words))
    }

    /// The expansions of `key` in this segment: kept ones, or those `walk` finds (then
    /// kept).
    pub fn expansions(
        &self,
        key: &ExpansionKey,
        walk: impl FnOnce() -> tantivy::Result<Vec<Expansion>>,
    ) -> tantivy::Result<Expanded> {
        if let Some(found) = self.expansions.lock().by_key.get(key) {
            return Ok(found.clone());
        }
        let found: Expanded = walk()?.into();
        let mut kept = self.expansions.lock();
        // An entry counts as one term at least: a token with no expansion costs its key.
        let terms = |found: &Expanded| found.len().max(1);
        if kept.terms + terms(&found) > MOST_EXPANSIONS {
            kept.by_key.clear();
            kept.terms = 0;
        }
        kept.terms += terms(&found);
        // Another search may have walked the same token meanwhile.
        if let Some(replaced) = kept.by_key.insert(key.clone(), found.clone()) {
            kept.terms -= terms(&replaced);
        }
        Ok(found)
    }
}

/// What is kept of every segment some searcher still has.
pub struct Segments {
    fields: Fields,
    by_id: RwLock<FxHashMap<SegmentId, Arc<Segment>>>,
    /// By token and the typos it tolerates.
    automata: Mutex<LruCache<(String, u8), Arc<DfaWrapper>>>,
}

impl Segments {
    pub fn new(fields: Fields) -> Segments {
        Segments {
            fields,
            by_id: RwLock::default(),
            automata: Mutex::new(LruCache::new(AUTOMATA)),
        }
    }

    /// The typo automaton of `token` with `typos`: a kept one, or the one `build` makes
    /// (then kept).
    pub fn automaton(
        &self,
        token: &str,
        typos: u8,
        build: impl FnOnce() -> tantivy::Result<DfaWrapper>,
    ) -> tantivy::Result<Arc<DfaWrapper>> {
        let key = (token.to_owned(), typos);
        if let Some(kept) = self.automata.lock().get(&key) {
            return Ok(kept.clone());
        }
        let built = Arc::new(build()?);
        self.automata.lock().put(key, built.clone());
        Ok(built)
    }

    /// What is kept of `segment`, read now if it was not yet (a searcher's segments
    /// were all read when it was made).
    pub fn of(&self, segment: &SegmentReader) -> tantivy::Result<Arc<Segment>> {
        let id = segment.segment_id();
        if let Some(kept) = self.by_id.read().get(&id) {
            return Ok(kept.clone());
        }
        let read = Arc::new(Segment::read(segment, &self.fields)?);
        self.by_id.write().insert(id, read.clone());
        Ok(read)
    }

    /// How many segments are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_id.read().len()
    }
}

impl Warmer for Segments {
    fn warm(&self, searcher: &Searcher) -> tantivy::Result<()> {
        for segment in searcher.segment_readers() {
            self.of(segment)?;
        }
        Ok(())
    }

    fn garbage_collect(&self, live: &[&SearcherGeneration]) {
        let live: HashSet<SegmentId> = live
            .iter()
            .flat_map(|generation| generation.segments().keys().copied())
            .collect();
        self.by_id.write().retain(|id, _| live.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Segment {
        Segment {
            keys: "movies\u{0}1movies\u{0}22".into(),
            ends: vec![8, 17],
            items: vec![7, 9],
            title_words: vec![2, 3],
            expansions: Mutex::default(),
        }
    }

    fn key(token: &str) -> ExpansionKey {
        ExpansionKey {
            field: Field::from_field_id(0),
            token: token.into(),
            typos: 1,
            any_first_letter: false,
        }
    }

    fn terms(count: usize) -> Vec<Expansion> {
        (0..count)
            .map(|at| Expansion {
                term: format!("t{at}").into(),
                distance: 1,
                documents: 1,
            })
            .collect()
    }

    #[test]
    fn documents_are_read_by_their_ids() {
        let segment = empty();
        assert_eq!(segment.key(0), Some("movies\u{0}1"));
        assert_eq!(segment.key(1), Some("movies\u{0}22"));
        assert_eq!(segment.key(2), None);
        assert_eq!((segment.item(1), segment.title_words(1)), (9, 3));
        assert_eq!((segment.item(5), segment.title_words(5)), (0, 0));
    }

    #[test]
    fn a_walk_is_kept_until_the_terms_kept_would_pass_the_bound() {
        let segment = empty();
        let walked = segment.expansions(&key("a"), || Ok(terms(3))).unwrap();
        assert_eq!(walked.len(), 3);
        let kept = segment.expansions(&key("a"), || panic!("walked again")).unwrap();
        assert!(Arc::ptr_eq(&walked, &kept));
        // Filling to the bound forgets every kept walk.
        segment
            .expansions(&key("b"), || Ok(terms(MOST_EXPANSIONS - 3)))
            .unwrap();
        assert_eq!(segment.expansions.lock().terms, MOST_EXPANSIONS);
        segment.expansions(&key("c"), || Ok(terms(1))).unwrap();
        let kept = segment.expansions.lock();
        assert_eq!((kept.by_key.len(), kept.terms), (1, 1));
    }
}
