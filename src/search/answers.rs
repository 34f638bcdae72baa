//! The best matches of recent queries, kept while the index and the priors they were
//! found with stay as they were: a query asked again (the head of real traffic: genre
//! words, popular titles) costs a lookup instead of a walk of its matches. Kept as
//! document addresses, which hold only for the searcher generation they came from;
//! a commit that publishes a new searcher, or priors made again, empties the cache.

use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;
use tantivy::{DocAddress, Searcher};

use super::{Priors, Wanted};

/// One query as [`SearchIndex::find`](super::SearchIndex::find) takes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    pub wanted: Wanted,
    pub tables: Vec<String>,
    pub limit: usize,
    /// The prior's weight, as its bits.
    pub prior_weight: u32,
}

impl Question {
    pub fn new(wanted: &Wanted, tables: &[String], limit: usize, prior_weight: f32) -> Question {
        Question {
            wanted: wanted.clone(),
            tables: tables.to_vec(),
            limit,
            prior_weight: prior_weight.to_bits(),
        }
    }
}

/// The best matches of a question, best first, with their final scores.
pub type Answer = Arc<[(f32, DocAddress)]>;

/// The answers of up to `capacity` recent questions (none kept when it is 0).
pub struct Answers {
    kept: Option<Mutex<Kept>>,
}

struct Kept {
    generation: u64,
    priors: Option<Arc<Priors>>,
    answers: LruCache<Question, Answer>,
}

impl Answers {
    pub fn new(capacity: usize) -> Answers {
        Answers {
            kept: NonZeroUsize::new(capacity).map(|capacity| {
                Mutex::new(Kept {
                    generation: 0,
                    priors: None,
                    answers: LruCache::new(capacity),
                })
            }),
        }
    }

    /// The answer kept for `question`, if it was found with `searcher`'s generation and
    /// these very `priors`.
    pub fn get(&self, searcher: &Searcher, priors: &Arc<Priors>, question: &Question) -> Option<Answer> {
        let mut kept = self.kept.as_ref()?.lock();
        if !kept.holds(searcher, priors) {
            return None;
        }
        kept.answers.get(question).cloned()
    }

    /// Keeps `answer`, found for `question` with `searcher` and `priors`. Answers of an
    /// older generation than those kept are not kept; a newer one, or other priors,
    /// replace every kept answer.
    pub fn put(&self, searcher: &Searcher, priors: &Arc<Priors>, question: Question, answer: Answer) {
        let Some(kept) = &self.kept else {
            return;
        };
        let mut kept = kept.lock();
        let generation = searcher.generation().generation_id();
        if generation < kept.generation {
            return;
        }
        if !kept.holds(searcher, priors) {
            kept.answers.clear();
            kept.generation = generation;
            kept.priors = Some(priors.clone());
        }
        kept.answers.put(question, answer);
    }
}

impl Kept {
    fn holds(&self, searcher: &Searcher, priors: &Arc<Priors>) -> bool {
        self.generation == searcher.generation().generation_id()
            && self.priors.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, priors))
    }
}
