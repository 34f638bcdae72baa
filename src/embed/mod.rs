//! Embeddings: the [`Embedder`] trait that `/embed`, hybrid search and ingest-time
//! item embeddings share. Implementations turn text (and image bytes) into vectors
//! of one fixed dimensionality, L2-normalised, so a dot product is a cosine.
//!
//! - [`hashed`]: the built-in default, signed feature hashing of words, word pairs
//!   and character trigrams; needs no files.
//! - [`minilm`]: the all-MiniLM-L6-v2 sentence model run on the CPU with candle,
//!   loaded from a local directory (`tools/fetch-model.sh` puts it there).
//! - [`image`]: the content-based image vector both share (colour, layout and edge
//!   features under a fixed projection); it has the texts' dimensionality but is
//!   not aligned with the text space.

pub mod hashed;
pub mod image;
pub mod minilm;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::EmbedConfig;

pub use hashed::HashedEmbedder;
pub use minilm::MiniLmEmbedder;

/// Why an embedding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The input cannot be embedded (empty text, undecodable image): the caller's fault.
    #[error("{0}")]
    Invalid(String),
    /// The model failed at run time: the server's fault.
    #[error("embedding model failed: {0}")]
    Model(String),
}

/// A text (and image) embedding model. Calls may block for milliseconds: call
/// them off the async workers (`spawn_blocking`).
pub trait Embedder: Send + Sync {
    /// The model's name, reported by `/embed`.
    fn name(&self) -> &str;

    /// Length of every vector this model returns.
    fn dimensions(&self) -> usize;

    /// One L2-normalised vector per text, in order.
    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// An L2-normalised vector of an encoded image (PNG, JPEG, ...), in the same
    /// dimensionality as the texts.
    fn embed_image(&self, bytes: &[u8]) -> Result<Vec<f32>, EmbedError>;
}

/// The embedder the configuration names: MiniLM from `model_dir`, or the built-in
/// hashed embedder when `model_dir` is empty. A directory that cannot be loaded is
/// an error (the node should not start with a model other than the one asked for).
pub fn from_config(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    if config.model_dir.trim().is_empty() {
        return Ok(Arc::new(HashedEmbedder::new()));
    }
    let model = MiniLmEmbedder::load(&expand_home(config.model_dir.trim()))?;
    Ok(Arc::new(model))
}

/// `~/rest` as `$HOME/rest`; any other path as it is.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Scales `vector` to unit length in place; false (and untouched) when it is all zeros.
pub fn l2_normalize(vector: &mut [f32]) -> bool {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return false;
    }
    vector.iter_mut().for_each(|x| *x /= norm);
    true
}

/// Dot product: the cosine of two L2-normalised vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_makes_unit_vectors_and_leaves_zeros() {
        let mut v = vec![3.0, 4.0];
        assert!(l2_normalize(&mut v));
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut zeros = vec![0.0; 3];
        assert!(!l2_normalize(&mut zeros));
    }
}
