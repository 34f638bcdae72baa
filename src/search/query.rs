//! From query text to a tantivy query: the query's tokens (analyzed like the
//! documents) and how many typos each tolerates, then one of two queries:
//!
//! - [`text_query`], plain BM25: per token an exact term on every text field OR the
//!   index terms within its edit distance (weighted down), on the title and labels.
//! - [`coverage_query`], what search ranks by: how much of the query an item covers.
//!   Each token weighs its rarity (BM25's idf) and counts once, by its best match: the
//!   title, the labels or the body (each with its weight), exact, stemmed or within
//!   its edit distance (each weighted down). A catalog label the query names counts
//!   like a title match for the items in it, and its words only half for the others.
//!   A query of stop words only, or one a title carries whole, is looked for in titles.
//!   Term frequency and field length do not count, so items that cover a query
//!   equally tie, and the prior (popularity, availability) and the visitor's live
//!   state decide between them.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, DfaWrapper, DisjunctionMaxQuery, FuzzyTermQuery, Occur, Query,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{Searcher, SegmentReader, Term};

use super::schema::Fields;
use super::segments::{Expansion, ExpansionKey, Segments};
use crate::config::SearchConfig;

/// Most query tokens used; the rest of a long query is ignored.
pub const MAX_QUERY_TOKENS: usize = 16;

/// One analyzed query token and the edit distance it tolerates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueryToken {
    pub text: String,
    pub typos: u8,
}

/// Typos a token of `chars` characters tolerates: none below `typo_one_min_chars`,
/// one from there, two from `typo_two_min_chars`.
pub fn typos_allowed(chars: usize, config: &SearchConfig) -> u8 {
    if !config.fuzzy || chars < config.typo_one_min_chars {
        0
    } else if chars < config.typo_two_min_chars {
        1
    } else {
        2
    }
}

/// The distinct tokens of `query`, in order, at most [`MAX_QUERY_TOKENS`]. The typo
/// rule counts the characters of the normalized (lowercased, folded) token.
pub fn query_tokens(analyzer: &mut TextAnalyzer, query: &str, config: &SearchConfig) -> Vec<QueryToken> {
    let mut tokens: Vec<QueryToken> = Vec::new();
    let mut stream = analyzer.token_stream(query);
    while stream.advance() {
        let text = &stream.token().text;
        if tokens.iter().any(|token| &token.text == text) {
            continue;
        }
        tokens.push(QueryToken {
            typos: typos_allowed(text.chars().count(), config),
            text: text.clone(),
        });
        if tokens.len() == MAX_QUERY_TOKENS {
            break;
        }
    }
    tokens
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and a
/// swap of two neighbouring characters each cost one.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// The index terms of `field` within `token`'s edit distance, other than the token
/// itself: closest first, then the most frequent, at most `limit`; each with its distance.
/// With [`FirstLetter::Kept`] a typo is not looked for in the first letter (people rarely
/// make one there), which keeps the walk of the term dictionary to the terms sharing it.
/// Each segment's dictionary is walked once per token (`segments` keeps what it found).
fn expansions(
    searcher: &Searcher,
    segments: &Segments,
    field: Field,
    token: &QueryToken,
    limit: usize,
    first_letter: FirstLetter,
) -> tantivy::Result<Vec<(String, usize)>> {
    let Some(first) = token.text.chars().next() else {
        return Ok(Vec::new());
    };
    if token.typos == 0 {
        return Ok(Vec::new());
    }
    let key = ExpansionKey {
        field,
        token: token.text.clone(),
        typos: token.typos,
        any_first_letter: first_letter == FirstLetter::Any,
    };
    let mut automaton: Option<Arc<DfaWrapper>> = None;
    let mut per_segment = Vec::with_capacity(searcher.segment_readers().len());
    for segment in searcher.segment_readers() {
        let walk = || -> tantivy::Result<Vec<Expansion>> {
            let automaton = match automaton {
                Some(ref kept) => kept,
                None => {
                    automaton.insert(segments.automaton(&token.text, token.typos, || typo_automaton(field, token))?)
                }
            };
            walk_terms(segment, field, token, automaton, first, first_letter)
        };
        per_segment.push(segments.of(segment)?.expansions(&key, walk)?);
    }
    let mut found: FxHashMap<&str, (u8, u64)> = FxHashMap::default();
    for expansion in per_segment.iter().flat_map(|found| found.iter()) {
        found.entry(&expansion.term).or_insert((expansion.distance, 0)).1 += expansion.documents;
    }
    let mut ranked: Vec<(&str, u8, u64)> = found
        .into_iter()
        .map(|(term, (distance, documents))| (term, distance, documents))
        .collect();
    ranked.sort_unstable_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
    ranked.truncate(limit);
    Ok(ranked
        .into_iter()
        .map(|(term, distance, _)| (term.to_owned(), usize::from(distance)))
        .collect())
}

/// The terms of `field` in one segment that `automaton` accepts, other than the token
/// itself; those starting with `first` only when the first letter is kept.
fn walk_terms(
    segment: &SegmentReader,
    field: Field,
    token: &QueryToken,
    automaton: &DfaWrapper,
    first: char,
    first_letter: FirstLetter,
) -> tantivy::Result<Vec<Expansion>> {
    let inverted = segment.inverted_index(field)?;
    let mut terms = inverted.terms().search(automaton);
    if first_letter == FirstLetter::Kept {
        terms = terms.ge(first.to_string().as_bytes());
        if let Some(next) = char::from_u32(first as u32 + 1) {
            terms = terms.lt(next.to_string().as_bytes());
        }
    }
    let mut stream = terms.into_stream()?;
    let mut found = Vec::new();
    while stream.advance() {
        let Ok(term) = std::str::from_utf8(stream.key()) else {
            continue;
        };
        if term != token.text {
            found.push(Expansion {
                distance: u8::try_from(edit_distance(term, &token.text)).unwrap_or(u8::MAX),
                term: Box::from(term),
                documents: u64::from(stream.value().doc_freq),
            });
        }
    }
    Ok(found)
}

/// The automaton of the words within `token`'s edit distance (a swap counts as one edit),
/// built only when a segment's dictionary must be walked and no search kept it.
fn typo_automaton(field: Field, token: &QueryToken) -> tantivy::Result<DfaWrapper> {
    FuzzyTermQuery::new(Term::from_field_text(field, &token.text), token.typos, true).automaton()
}

/// Whether a typo may be in a word's first letter.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FirstLetter {
    Kept,
    Any,
}

fn boosted_term(field: Field, text: &str, boost: f32) -> (Occur, Box<dyn Query>) {
    let term = TermQuery::new(Term::from_field_text(field, text), IndexRecordOption::WithFreqs);
    (Occur::Should, Box::new(BoostQuery::new(Box::new(term), boost)))
}

/// The query of `tokens` (any token may match; more matches score more), or `None`
/// when there is nothing to look for.
pub fn text_query(
    searcher: &Searcher,
    segments: &Segments,
    fields: &Fields,
    tokens: &[QueryToken],
    config: &SearchConfig,
) -> tantivy::Result<Option<BooleanQuery>> {
    let weighted = [
        (fields.title, config.title_boost, true),
        (fields.labels, config.labels_boost, true),
        (fields.body, config.body_boost, false),
    ];
    let mut clauses = Vec::new();
    for token in tokens {
        for &(field, boost, fuzzy) in &weighted {
            clauses.push(boosted_term(field, &token.text, boost));
            if fuzzy {
                let limit = config.fuzzy_max_expansions;
                for (text, distance) in expansions(searcher, segments, field, token, limit, FirstLetter::Kept)? {
                    let weight = boost * config.fuzzy_factor.powi(distance as i32);
                    clauses.push(boosted_term(field, &text, weight));
                }
            }
        }
    }
    Ok((!clauses.is_empty()).then(|| BooleanQuery::new(clauses)))
}

/// What search looks for: the free words; the catalog labels (lowercased, whole) the
/// query names by their own words, and those it only points to (a synonym, a tag);
/// and the words and labels ruled out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Wanted {
    pub tokens: Vec<QueryToken>,
    pub labels: Vec<String>,
    pub related_labels: Vec<String>,
    pub excluded_labels: Vec<String>,
    pub excluded_words: Vec<String>,
    /// The tokens are looked for in titles only: a query of stop words ("It", "In a"),
    /// or one a title carries whole, names a title, and its stop words match nearly
    /// every description.
    pub titles_only: bool,
}

/// How much a label's words count for an item that does not carry the label, when the
/// query is all labels ("horror": *The Rocky Horror Picture Show* is no horror film).
/// Beside other words they may be part of a title ("star wars"), and count in full.
const LABEL_WORDS_FACTOR: f32 = 0.5;
/// How much a label the query only points to counts, beside its words searched as text
/// ("alien" points to Sci-Fi, and still finds *Alien* first).
const RELATED_LABEL_FACTOR: f32 = 0.5;

/// The coverage query of `wanted` (see the module documentation) and the most it can
/// score (every token and label matched in the best way). Without tokens or labels:
/// every item but the excluded ones, each scoring 0 (a query that only filters).
pub fn coverage_query(
    searcher: &Searcher,
    segments: &Segments,
    fields: &Fields,
    stemmer: &mut TextAnalyzer,
    wanted: &Wanted,
    config: &SearchConfig,
) -> tantivy::Result<(Box<dyn Query>, f32)> {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut most = 0.0;
    let (everywhere, titles) = (everywhere(fields, config), title_only(fields, config));
    let places: &[Place] = match wanted.titles_only {
        true => &titles,
        false => &everywhere,
    };
    for token in &wanted.tokens {
        let weight = rarity(searcher, fields, &stem(stemmer, &token.text))?;
        clauses.push((
            Occur::Should,
            token_query(searcher, segments, places, stemmer, token, weight, config)?,
        ));
        most += weight * config.title_boost;
    }
    for label in &wanted.labels {
        let term = Term::from_field_text(fields.label, label);
        let weight = idf(searcher.doc_freq(&term)?, searcher.num_docs());
        let mut either: Vec<Box<dyn Query>> = vec![constant(term, weight * config.title_boost)];
        let mut words = Vec::new();
        // Items outside the label may carry its words in their titles; in their labels
        // or descriptions they add little to the label's own items and cost a long walk.
        for token in query_tokens(&mut super::schema::analyzer(), label, config) {
            words.push((
                Occur::Should,
                token_query(
                    searcher,
                    segments,
                    &title_only(fields, config),
                    stemmer,
                    &token,
                    weight,
                    config,
                )?,
            ));
        }
        if !words.is_empty() {
            let factor = match wanted.tokens.is_empty() {
                true => LABEL_WORDS_FACTOR,
                false => 1.0,
            };
            either.push(Box::new(BoostQuery::new(Box::new(BooleanQuery::new(words)), factor)));
        }
        clauses.push((Occur::Should, Box::new(DisjunctionMaxQuery::new(either))));
        most += weight * config.title_boost;
    }
    for label in &wanted.related_labels {
        let term = Term::from_field_text(fields.label, label);
        let score = idf(searcher.doc_freq(&term)?, searcher.num_docs()) * config.title_boost * RELATED_LABEL_FACTOR;
        clauses.push((Occur::Should, constant(term, score)));
        most += score;
    }
    let has_positive = !clauses.is_empty();
    for label in &wanted.excluded_labels {
        let term = Term::from_field_text(fields.label, label);
        clauses.push((Occur::MustNot, Box::new(TermQuery::new(term, IndexRecordOption::Basic))));
    }
    for word in &wanted.excluded_words {
        let stemmed = stem(stemmer, word);
        for (field, text) in [
            (fields.title, word.as_str()),
            (fields.labels, word.as_str()),
            (fields.title_stem, stemmed.as_str()),
            (fields.labels_stem, stemmed.as_str()),
        ] {
            let term = Term::from_field_text(field, text);
            clauses.push((Occur::MustNot, Box::new(TermQuery::new(term, IndexRecordOption::Basic))));
        }
    }
    if !has_positive {
        clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(Box::new(AllQuery), 0.0))));
    }
    Ok((Box::new(BooleanQuery::new(clauses)), most))
}

/// Where a token is looked for: a text field, its stemmed copy, the field's boost, and
/// whether typos are tolerated there.
type Place = (Field, Field, f32, bool);

/// The title, the labels and the body; typos in the first two.
fn everywhere(fields: &Fields, config: &SearchConfig) -> [Place; 3] {
    [
        (fields.title, fields.title_stem, config.title_boost, true),
        (fields.labels, fields.labels_stem, config.labels_boost, true),
        (fields.body, fields.body_stem, config.body_boost, false),
    ]
}

fn title_only(fields: &Fields, config: &SearchConfig) -> [Place; 1] {
    [(fields.title, fields.title_stem, config.title_boost, true)]
}

/// One token's best match in `places`: exact, stemmed, or within its edit distance, each
/// scoring `weight` × its field's boost × its form's factor.
fn token_query(
    searcher: &Searcher,
    segments: &Segments,
    places: &[Place],
    stemmer: &mut TextAnalyzer,
    token: &QueryToken,
    weight: f32,
    config: &SearchConfig,
) -> tantivy::Result<Box<dyn Query>> {
    let stemmed = stem(stemmer, &token.text);
    let mut forms: Vec<Box<dyn Query>> = Vec::new();
    for &(field, stemmed_field, boost, fuzzy) in places {
        let score = weight * boost;
        forms.push(constant(Term::from_field_text(field, &token.text), score));
        forms.push(constant(
            Term::from_field_text(stemmed_field, &stemmed),
            score * config.stem_factor,
        ));
        // A word the field has as typed is taken as meant there: its neighbours within a
        // typo ("east": "past", "last", "cast") would add their long lists for nothing.
        if fuzzy && searcher.doc_freq(&Term::from_field_text(field, &token.text))? == 0 {
            let limit = config.fuzzy_max_expansions;
            for (text, distance) in expansions(searcher, segments, field, token, limit, FirstLetter::Kept)? {
                let factor = config.fuzzy_factor.powi(distance as i32);
                forms.push(constant(Term::from_field_text(field, &text), score * factor));
            }
        }
    }
    Ok(Box::new(DisjunctionMaxQuery::new(forms)))
}

/// Whether the index has `token` nowhere: in no field, stemmed or not, and (in the
/// title and labels) not within its edit distance either, the first letter included
/// (this walk is made only for words the index lacks).
pub fn is_unknown(
    searcher: &Searcher,
    segments: &Segments,
    fields: &Fields,
    stemmer: &mut TextAnalyzer,
    token: &QueryToken,
) -> tantivy::Result<bool> {
    let stemmed = stem(stemmer, &token.text);
    for (field, text) in [
        (fields.title, &token.text),
        (fields.labels, &token.text),
        (fields.body, &token.text),
        (fields.title_stem, &stemmed),
        (fields.labels_stem, &stemmed),
        (fields.body_stem, &stemmed),
    ] {
        if searcher.doc_freq(&Term::from_field_text(field, text))? > 0 {
            return Ok(false);
        }
    }
    // The short walk first: most typos keep the first letter.
    for first_letter in [FirstLetter::Kept, FirstLetter::Any] {
        for field in [fields.title, fields.labels] {
            if !expansions(searcher, segments, field, token, 1, first_letter)?.is_empty() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

fn constant(term: Term, score: f32) -> Box<dyn Query> {
    let matches = TermQuery::new(term, IndexRecordOption::Basic);
    Box::new(ConstScoreQuery::new(Box::new(matches), score))
}

/// The stem of one analyzed token.
fn stem(stemmer: &mut TextAnalyzer, token: &str) -> String {
    let mut stream = stemmer.token_stream(token);
    match stream.advance() {
        true => stream.token().text.clone(),
        false => token.to_owned(),
    }
}

/// How much a token weighs: BM25's idf of its stem over the field where it is most
/// frequent (a token no item has weighs as a token one item has: it may be misspelt).
fn rarity(searcher: &Searcher, fields: &Fields, stemmed: &str) -> tantivy::Result<f32> {
    let mut frequency = 0;
    for field in [fields.title_stem, fields.labels_stem, fields.body_stem] {
        frequency = frequency.max(searcher.doc_freq(&Term::from_field_text(field, stemmed))?);
    }
    Ok(idf(frequency.max(1), searcher.num_docs()))
}

/// BM25's inverse document frequency.
fn idf(frequency: u64, documents: u64) -> f32 {
    let (frequency, documents) = (frequency as f32, documents.max(1) as f32);
    (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::search::schema::analyzer;

    fn config() -> SearchConfig {
        Config::load(None).unwrap().search
    }

    #[test]
    fn typo_tolerance_grows_with_token_length() {
        let config = config();
        assert_eq!(typos_allowed(3, &config), 0);
        assert_eq!(typos_allowed(4, &config), 1);
        assert_eq!(typos_allowed(7, &config), 1);
        assert_eq!(typos_allowed(8, &config), 2);
        let off = SearchConfig { fuzzy: false, ..config };
        assert_eq!(typos_allowed(12, &off), 0);
    }

    #[test]
    fn tokens_are_normalized_and_distinct() {
        let config = config();
        let tokens = query_tokens(&mut analyzer(), "Toy STORY toy, Amélie extraordinary", &config);
        let texts: Vec<(&str, u8)> = tokens.iter().map(|t| (t.text.as_str(), t.typos)).collect();
        assert_eq!(texts, [("toy", 0), ("story", 1), ("amelie", 1), ("extraordinary", 2)]);
        let many = "a b c d e f g h i j k l m n o p q r s t";
        assert_eq!(query_tokens(&mut analyzer(), many, &config).len(), MAX_QUERY_TOKENS);
        assert!(query_tokens(&mut analyzer(), " ,;! ", &config).is_empty());
    }

    #[test]
    fn a_swap_costs_one_edit() {
        assert_eq!(edit_distance("stroy", "storey"), 2);
        assert_eq!(edit_distance("stroy", "story"), 1);
        assert_eq!(edit_distance("jumaji", "jumanji"), 1);
        assert_eq!(edit_distance("matrix", "matrix"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
