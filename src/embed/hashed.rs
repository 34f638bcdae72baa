//! The built-in embedder: needs no model files and costs microseconds.
//!
//! Signed feature hashing (the "hashing trick") of lowercased words, adjacent word
//! pairs and character trigrams of each word: each feature adds ±weight to one of
//! the 384 coordinates chosen by a seeded xxh3 hash, then the vector is
//! L2-normalised. Texts sharing words come out close, texts sharing spellings
//! (typos, inflections) somewhat close, unrelated texts near orthogonal. It knows
//! no synonyms: that is what the sentence model is for.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::image::ImageEmbedder;
use super::{l2_normalize, EmbedError, Embedder};

/// Name reported by `/embed`.
pub const NAME: &str = "rankstream-hashed-384";
/// Length of every vector.
pub const DIMENSIONS: usize = 384;
/// Seed of the feature hash; changing it changes every vector ever stored.
const SEED: u64 = 0x7261_6e6b_7374_7231; // "rankstr1"
/// Weight of one occurrence of a word, of a pair of adjacent words and of one
/// character trigram (trigrams are many per word, so each weighs little).
const WORD_WEIGHT: f32 = 1.0;
const PAIR_WEIGHT: f32 = 0.5;
const TRIGRAM_WEIGHT: f32 = 0.25;

/// Feature-hashing text embedder, with the shared content-based image vector.
pub struct HashedEmbedder {
    images: ImageEmbedder,
}

impl HashedEmbedder {
    pub fn new() -> HashedEmbedder {
        HashedEmbedder {
            images: ImageEmbedder::new(DIMENSIONS),
        }
    }

    fn embed_text(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let lowered = text.to_lowercase();
        let mut words: Vec<&str> = lowered
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .collect();
        if words.is_empty() {
            // Punctuation or symbols only: embed them as one token rather than refuse.
            let trimmed = lowered.trim();
            if trimmed.is_empty() {
                return Err(EmbedError::Invalid("the text is empty".into()));
            }
            words.push(trimmed);
        }
        let mut vector = vec![0.0f32; DIMENSIONS];
        for word in &words {
            add(&mut vector, b'w', word.as_bytes(), WORD_WEIGHT);
            let padded: Vec<char> = std::iter::once('^')
                .chain(word.chars())
                .chain(std::iter::once('$'))
                .collect();
            let mut trigram = String::with_capacity(12);
            for window in padded.windows(3) {
                trigram.clear();
                trigram.extend(window);
                add(&mut vector, b'c', trigram.as_bytes(), TRIGRAM_WEIGHT);
            }
        }
        let mut pair = String::new();
        for window in words.windows(2) {
            pair.clear();
            pair.push_str(window[0]);
            pair.push(' ');
            pair.push_str(window[1]);
            add(&mut vector, b'p', pair.as_bytes(), PAIR_WEIGHT);
        }
        if !l2_normalize(&mut vector) {
            // Every feature cancelled out (possible, vanishingly rare): fall back to
            // the whole text as one feature so the vector is still unit length.
            add(&mut vector, b't', lowered.as_bytes(), 1.0);
            l2_normalize(&mut vector);
        }
        Ok(vector)
    }
}

impl Default for HashedEmbedder {
    fn default() -> HashedEmbedder {
        HashedEmbedder::new()
    }
}

/// Adds ±`weight` for one feature; `kind` keeps words, pairs and trigrams apart.
fn add(vector: &mut [f32], kind: u8, feature: &[u8], weight: f32) {
    let mut key = Vec::with_capacity(feature.len() + 2);
    key.push(kind);
    key.push(b':');
    key.extend_from_slice(feature);
    let hash = xxh3_64_with_seed(&key, SEED);
    let index = (hash % DIMENSIONS as u64) as usize;
    let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
    vector[index] += sign * weight;
}

impl Embedder for HashedEmbedder {
    fn name(&self) -> &str {
        NAME
    }

    fn dimensions(&self) -> usize {
        DIMENSIONS
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts.iter().map(|text| self.embed_text(text)).collect()
    }

    fn embed_image(&self, bytes: &[u8]) -> Result<Vec<f32>, EmbedError> {
        self.images.embed(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::dot;

    fn cosine(embedder: &HashedEmbedder, a: &str, b: &str) -> f32 {
        let vectors = embedder.embed_texts(&[a, b]).unwrap();
        dot(&vectors[0], &vectors[1])
    }

    #[test]
    fn shared_words_and_spellings_are_close_unrelated_far() {
        let embedder = HashedEmbedder::new();
        let base = "That is a happy person";
        let very = cosine(&embedder, base, "That is a very happy person");
        let dog = cosine(&embedder, base, "That is a happy dog");
        let sunny = cosine(&embedder, base, "Today is a sunny day");
        let unrelated = cosine(&embedder, "cheap hotel in Oslo", "quantum chromodynamics lecture");
        assert!(very > dog && dog > sunny, "{very} {dog} {sunny}");
        assert!(unrelated.abs() < 0.25, "unrelated {unrelated}");
        let typo = cosine(&embedder, "toy story", "toy stroy");
        let other = cosine(&embedder, "toy story", "heat");
        assert!(typo > other, "typo {typo} other {other}");
    }

    #[test]
    fn vectors_are_unit_length_deterministic_and_case_blind() {
        let embedder = HashedEmbedder::new();
        let vectors = embedder
            .embed_texts(&["Hello World", "hello world", "?!", "Hello World"])
            .unwrap();
        for vector in &vectors {
            assert_eq!(vector.len(), DIMENSIONS);
            assert!((dot(vector, vector) - 1.0).abs() < 1e-5);
        }
        assert_eq!(vectors[0], vectors[1]);
        assert_eq!(vectors[0], vectors[3]);
    }

    #[test]
    fn pinned_coordinates_stay_the_same_across_builds() {
        // A stored vector must mean the same thing after an upgrade: the hash and
        // seed are fixed, so these coordinates are too.
        assert_eq!(xxh3_64_with_seed(b"w:stable", SEED), 10_527_954_777_295_055_343);
    }

    #[test]
    fn blank_text_is_invalid() {
        assert!(matches!(
            HashedEmbedder::new().embed_texts(&["   "]),
            Err(EmbedError::Invalid(_))
        ));
    }
}
