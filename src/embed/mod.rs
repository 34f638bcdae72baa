//! Embeddings: the [`Embedder`] trait that `/embed`, hybrid search and ingest-time
//! item embeddings share. Implementations turn text (and image bytes) into vectors
//! of one fixed dimensionality, L2-normalised, so a dot product is a cosine.

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
