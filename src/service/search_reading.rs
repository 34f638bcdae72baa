//! What search knows before it looks: how it reads the query (the reading chat does,
//! one module for both: `chat::constraints::extract`), and each item's prior.
//!
//! A query's words are read as chat reads a message: the catalog's group and tag
//! names ("comedies" → Comedy, "animated" → Animation) become labels the items in them
//! match, as strongly as a title would; price words ("under 5"), ruled-out labels and
//! words ("not horror", "without zombies"), an audience ("for kids") and "in stock"
//! filter; the rest is searched as text, a year too ("toy story 1995": titles carry
//! them). A query with nothing left to search once read (a title made of stop words,
//! "It") is searched as typed, in titles only. With MiniLM, a word the catalog has nowhere, not even
//! within a typo, is read by meaning as chat reads it ("warfare" → War). A query that
//! some title carries whole is that title, even with an audience word in it ("Child's
//! Play").

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::search::SearchService;
use crate::chat::constraints::{extract, Audience, Constraints, Extracted, LastAnswer, Scale};
use crate::chat::dictionary::{EntryKind, LabelDictionary};
use crate::chat::filter::{failed_checks, Applicable};
use crate::ranking::trained::Trained;
use crate::search::{item_hash, Priors, QueryToken, Wanted};

/// The priors are made again at most this often, and only when the models changed.
const PRIORS_REFRESH: Duration = Duration::from_secs(2);

/// Shortest word read by meaning: shorter unknown words are mostly typos and fragments
/// ("mne", "deb,t").
const MEANING_MIN_CHARS: usize = 4;
/// Most unknown words of one query read by meaning (each costs the model a word).
const MEANING_MAX_WORDS: usize = 2;

/// A search query as read.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub wanted: Wanted,
    /// What a found item must satisfy besides (price, exclusions, audience, years,
    /// availability); `None` when the query asks nothing of the kind.
    pub filters: Option<Constraints>,
    /// The catalog's groups that are for children (what "for kids" means there).
    pub children_groups: Vec<String>,
}

impl Reading {
    /// Which of `rows` pass the filters (all when there are none).
    pub fn passes(&self, rows: &[Option<Arc<Map<String, Value>>>]) -> Vec<bool> {
        let Some(filters) = &self.filters else {
            return vec![true; rows.len()];
        };
        let applicable = Applicable::of(rows.iter().flatten().map(Arc::as_ref), &self.children_groups);
        rows.iter()
            .map(|row| {
                row.as_ref()
                    .is_some_and(|row| failed_checks(row, filters, applicable, &self.children_groups).is_empty())
            })
            .collect()
    }
}

/// The priors made last, from which models, and when; made again off the request path.
#[derive(Default, Clone)]
pub struct PriorsCache {
    made: Arc<Mutex<Option<MadePriors>>>,
}

struct MadePriors {
    models: Arc<Trained>,
    at: Instant,
    priors: Arc<Priors>,
    /// A task is making them again from newer models.
    remaking: bool,
}

impl SearchService {
    /// Reads `query` as chat reads a message (see the module documentation).
    pub(super) async fn read_query(&self, query: &str) -> Reading {
        let dictionary = self.words.dictionary();
        let mut extracted = extract(query, &dictionary);
        self.read_unknown_by_meaning(&mut extracted, &dictionary).await;
        let mut read = Constraints::default();
        read.apply(&extracted, &LastAnswer::default(), &Scale::default());
        let lowered = |names: &[String]| names.iter().map(|name| name.to_lowercase()).collect::<Vec<_>>();
        // "For kids" filters, and also points to what the catalog calls children's items.
        let for_kids = match read.audience {
            Some(Audience::Kids) => lowered(dictionary.children_groups()),
            _ => Vec::new(),
        };
        let typed = self.index.tokens(query);
        let typed_stems: Vec<Vec<String>> = typed.iter().map(|token| self.index.stems(&token.text)).collect();
        // Audience words are title words too ("The Karate Kid", "Child's Play", "Family
        // Guy"): a query of two words or more that a title carries whole is that title,
        // looked for in titles (its "of" and "a" would match every description).
        if read.audience.is_some() && typed.len() >= 2 && self.index.a_title_has_all(&typed_stems.concat()) {
            return Reading {
                wanted: Wanted {
                    tokens: typed,
                    titles_only: true,
                    ..Wanted::default()
                },
                filters: None,
                children_groups: Vec::new(),
            };
        }
        let names_itself = |label: &str| {
            self.index
                .stems(label)
                .iter()
                .any(|stem| typed_stems.iter().flatten().any(|typed| typed == stem))
        };
        let (labels, pointed): (Vec<String>, Vec<String>) =
            lowered(&read.groups).into_iter().partition(|group| names_itself(group));
        let excluded_labels = [lowered(&read.excluded_groups), lowered(&read.excluded_tags)].concat();
        let mut tokens = self.index.tokens(&read.query.join(" "));
        let mut add = |token: &QueryToken| {
            if !tokens.contains(token) {
                tokens.push(token.clone());
            }
        };
        // A tag's words are what was typed: searched as text too ("star trek").
        for tag in read
            .tags
            .iter()
            .filter(|tag| !excluded_labels.contains(&tag.to_lowercase()))
        {
            self.index.tokens(tag).iter().for_each(&mut add);
        }
        // A word read as a synonym of a group is searched as text too ("alien" points to
        // Sci-Fi, and is a title).
        for (token, stems) in typed.iter().zip(&typed_stems) {
            let Some(entry) = dictionary.lookup(&[token.text.as_str()]) else {
                continue;
            };
            let name = entry.display.to_lowercase();
            let itself = self.index.stems(&name).iter().any(|stem| stems.contains(stem));
            if (entry.kind == EntryKind::Tag || !itself) && !excluded_labels.contains(&name) {
                add(token);
            }
        }
        // Years do not filter a search: a year typed is searched as text, as a title
        // may carry it ("toy story 1995").
        if read.years.take().is_some() {
            typed.iter().filter(|token| is_year(&token.text)).for_each(&mut add);
        }
        let mut related_labels = [pointed, lowered(&read.tags), for_kids].concat();
        related_labels.sort_unstable();
        related_labels.dedup();
        let mut wanted = Wanted {
            tokens,
            labels,
            related_labels,
            excluded_labels,
            excluded_words: extracted.negated_terms.clone(),
            titles_only: false,
        };
        let filtering =
            read.min_price.is_some() || read.max_price.is_some() || read.audience.is_some() || read.available;
        if wanted.tokens.is_empty()
            && wanted.labels.is_empty()
            && wanted.related_labels.is_empty()
            && wanted.excluded_labels.is_empty()
            && !filtering
        {
            wanted = Wanted {
                tokens: self.index.tokens(query),
                titles_only: true,
                ..Wanted::default()
            };
        }
        let filters = filtering.then(|| Constraints {
            groups: Vec::new(),
            tags: Vec::new(),
            query: Vec::new(),
            ..read
        });
        Reading {
            wanted,
            filters,
            children_groups: dictionary.children_groups().to_vec(),
        }
    }

    /// The words the catalog has nowhere, not even within a typo, are read by meaning as
    /// chat reads them (with MiniLM: "warfare" names War): a word the catalog lacks finds
    /// nothing as text, and may name one of its labels. A word it has, or has within a
    /// typo, stays text and costs no model run (one is milliseconds, and would fall on
    /// every misspelt title).
    async fn read_unknown_by_meaning(&self, extracted: &mut Extracted, dictionary: &Arc<LabelDictionary>) {
        if !self.embedder.understands_meaning() {
            return;
        }
        let unknown_words = |words: &[String]| {
            let long: Vec<String> = words
                .iter()
                .filter(|word| word.chars().count() >= MEANING_MIN_CHARS)
                .cloned()
                .collect();
            let mut unknown = self.index.unknown_words(&long);
            unknown.truncate(MEANING_MAX_WORDS);
            unknown
        };
        let mut unknown = Extracted {
            terms: unknown_words(&extracted.terms),
            negated_terms: unknown_words(&extracted.negated_terms),
            ..Extracted::default()
        };
        if unknown.terms.is_empty() && unknown.negated_terms.is_empty() {
            return;
        }
        let words = unknown.terms.clone();
        self.words.read_by_meaning(&mut unknown, dictionary).await;
        extracted
            .terms
            .retain(|word| !words.contains(word) || unknown.terms.contains(word));
        for (read, into) in [
            (unknown.groups, &mut extracted.groups),
            (unknown.tags, &mut extracted.tags),
            (unknown.excluded_groups, &mut extracted.excluded_groups),
            (unknown.excluded_tags, &mut extracted.excluded_tags),
        ] {
            for name in read {
                if !into.contains(&name) {
                    into.push(name);
                }
            }
        }
    }

    /// Each item's prior, from the latest models: the first search makes them; after
    /// that, a search that finds the models changed (and the priors older than
    /// [`PRIORS_REFRESH`]) has them made again on the blocking pool and uses the ones it
    /// has meanwhile (~10 ms at 100k items, too long for a request's path).
    pub(super) fn search_priors(&self) -> Arc<Priors> {
        let latest = self.training.snapshots().latest();
        let mut made = self.priors.made.lock();
        let Some(current) = made.as_mut() else {
            let priors = Arc::new(priors_of(&latest));
            *made = Some(MadePriors {
                models: latest,
                at: Instant::now(),
                priors: priors.clone(),
                remaking: false,
            });
            return priors;
        };
        let fresh = Arc::ptr_eq(&current.models, &latest) || current.at.elapsed() < PRIORS_REFRESH;
        if !fresh && !current.remaking {
            current.remaking = true;
            let cache = self.priors.made.clone();
            tokio::task::spawn_blocking(move || {
                let priors = Arc::new(priors_of(&latest));
                *cache.lock() = Some(MadePriors {
                    models: latest,
                    at: Instant::now(),
                    priors,
                    remaking: false,
                });
            });
        }
        current.priors.clone()
    }
}

/// Each known item's weighted count of events of all time, on a log scale, as a share
/// of the best known item's. (Now-popularity, which halves every week, measured worse on
/// the relevance suite's validation queries: a franchise's newest film outranked the
/// one people mean.)
fn priors_of(trained: &Trained) -> Priors {
    let mut by_item = FxHashMap::default();
    let mut most = 0.0f64;
    for index in 0..trained.items.len() as u32 {
        let popularity = trained.popularity.lasting(index).ln_1p();
        if popularity > 0.0 {
            most = most.max(popularity);
            by_item.insert(item_hash(trained.items.id(index)), popularity as f32);
        }
    }
    if most > 0.0 {
        for prior in by_item.values_mut() {
            *prior /= most as f32;
        }
    }
    Priors::new(by_item)
}

/// Whether an analyzed token is a year as a title would carry it.
fn is_year(token: &str) -> bool {
    token.len() == 4 && token.parse::<u16>().is_ok_and(|year| (1000..=2999).contains(&year))
}
