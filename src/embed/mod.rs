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

use tokio::sync::Semaphore;

use crate::config::EmbedConfig;

pub use hashed::HashedEmbedder;
pub use minilm::MiniLmEmbedder;

/// Why an embedding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The input cannot be embedded (empty text, undecodable image): the caller's fault.
    #[error("{0}")]
    Invalid(String),
    /// The image is larger than the node decodes: the caller's fault.
    #[error("{0}")]
    TooLarge(String),
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

    /// Whether texts close in meaning get close vectors (a language model), not only
    /// texts sharing words (the hashed embedder).
    fn understands_meaning(&self) -> bool {
        false
    }
}

/// Who a model run is for. Each kind has its own bound, so that catalog uploads that
/// embed thousands of items hold no run a `/embed` or search request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A request waiting on the vector: `/embed`, a hybrid search's query.
    Request,
    /// The catalog's own work: items embedded as the catalog takes them
    /// (`embed.embed_items_at_ingest`), the labels' meanings for chat and search.
    Ingest,
}

/// The node's embedder as the request handlers share it: each call runs off the async
/// workers (`spawn_blocking`), and at most `concurrent` run at once in each [`Lane`].
/// A model run takes milliseconds of CPU and buffers of its own; without the bound, a
/// burst of `/embed`, search or catalog requests would start one for every request at
/// once, on up to the blocking pool's 512 threads. With it, the extra calls wait their
/// turn, under their request's deadline.
/// Clones share the model and its turns.
#[derive(Clone)]
pub struct SharedEmbedder {
    model: Arc<dyn Embedder>,
    requests: Arc<Semaphore>,
    ingest: Arc<Semaphore>,
}

impl SharedEmbedder {
    /// `concurrent` is raised to 1 if it is 0.
    pub fn new(model: Arc<dyn Embedder>, concurrent: usize) -> SharedEmbedder {
        SharedEmbedder {
            model,
            requests: Arc::new(Semaphore::new(concurrent.max(1))),
            ingest: Arc::new(Semaphore::new(concurrent.max(1))),
        }
    }

    pub fn name(&self) -> &str {
        self.model.name()
    }

    pub fn dimensions(&self) -> usize {
        self.model.dimensions()
    }

    pub fn understands_meaning(&self) -> bool {
        self.model.understands_meaning()
    }

    /// The vectors of `texts`, in order, embedded in one run of `lane`.
    pub async fn embed_owned(&self, lane: Lane, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(lane, move |embedder| {
            embedder.embed_texts(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
    }

    /// Runs `work` with the model on a blocking thread once a run of its lane is free.
    pub async fn run<T, F>(&self, lane: Lane, work: F) -> Result<T, EmbedError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Embedder) -> Result<T, EmbedError> + Send + 'static,
    {
        let (runs, lane_name) = match lane {
            Lane::Request => (&self.requests, "request"),
            Lane::Ingest => (&self.ingest, "ingest"),
        };
        let waiting = std::time::Instant::now();
        let permit = Arc::clone(runs)
            .acquire_owned()
            .await
            .map_err(|_| EmbedError::Model("the embedder is shut down".into()))?;
        crate::metrics::embed_wait(lane_name, waiting.elapsed());
        let model = Arc::clone(&self.model);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(model.as_ref())
        })
        .await
        .map_err(|error| EmbedError::Model(format!("the embedding task failed: {error}")))?
    }
}

/// The embedder the configuration names: MiniLM from `model_dir`, or the built-in
/// hashed embedder when `model_dir` is empty; with [`AUTO`] (the default), MiniLM
/// where set-up puts it ([`setup_model_dir`]) when its files are there, else the
/// hashed embedder with a warning. A directory named explicitly that cannot be loaded
/// is an error (the node should not start with a model other than the one asked for).
pub fn from_config(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    let named = config.model_dir.trim();
    if named.is_empty() {
        return Ok(Arc::new(HashedEmbedder::new()));
    }
    if named != AUTO {
        return Ok(Arc::new(MiniLmEmbedder::load(&expand_home(named))?));
    }
    let directory = setup_model_dir();
    let fallback = |reason: String| -> Arc<dyn Embedder> {
        tracing::warn!(
            directory = %directory.display(),
            "{reason}; embedding with the built-in hashed embedder (run tools/setup.sh for the real model)"
        );
        Arc::new(HashedEmbedder::new())
    };
    let missing: Vec<&str> = MODEL_FILES
        .into_iter()
        .filter(|file| !directory.join(file).is_file())
        .collect();
    if !missing.is_empty() {
        return Ok(fallback(format!(
            "the MiniLM model is not where set-up puts it (missing {})",
            missing.join(", ")
        )));
    }
    Ok(match MiniLmEmbedder::load(&directory) {
        Ok(model) => Arc::new(model),
        Err(error) => fallback(format!("the MiniLM model where set-up puts it does not load: {error}")),
    })
}

/// `embed.model_dir` that takes the model from where set-up puts it, if it is there.
pub const AUTO: &str = "auto";

/// The files of a MiniLM model directory.
const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Where `tools/setup.sh` (`tools/fetch-model.sh`) puts all-MiniLM-L6-v2:
/// `$RANKSTREAM_MODELS/all-MiniLM-L6-v2`, `~/.cache/rankstream/models/...` by default.
pub fn setup_model_dir() -> PathBuf {
    let models = std::env::var_os("RANKSTREAM_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| expand_home("~/.cache/rankstream/models"));
    models.join("all-MiniLM-L6-v2")
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
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shared_embedder_runs_at_most_its_bound_at_once() {
        let shared = Arc::new(SharedEmbedder::new(Arc::new(HashedEmbedder::new()), 2));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let calls: Vec<_> = (0..8)
            .map(|call| {
                let (shared, running, most) = (shared.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    shared
                        .run(Lane::Request, move |model| {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            let vectors = model.embed_texts(&[&format!("call {call}")]);
                            std::thread::sleep(Duration::from_millis(50));
                            running.fetch_sub(1, Ordering::SeqCst);
                            vectors
                        })
                        .await
                })
            })
            .collect();
        for call in calls {
            let vectors = call.await.unwrap().unwrap();
            assert_eq!(vectors[0].len(), shared.dimensions());
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            2,
            "8 calls, at most 2 at once, and 2 did overlap"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ingest_runs_do_not_wait_for_request_runs() {
        let shared = Arc::new(SharedEmbedder::new(Arc::new(HashedEmbedder::new()), 1));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (started, has_started) = tokio::sync::oneshot::channel::<()>();
        let holder = shared.clone();
        let held = tokio::spawn(async move {
            holder
                .run(Lane::Request, move |model| {
                    started.send(()).ok();
                    released.recv_timeout(Duration::from_secs(10)).ok();
                    model.embed_texts(&["held"])
                })
                .await
        });
        has_started.await.unwrap();
        // The request lane's only run is taken; an ingest run still goes through.
        let ingest = tokio::time::timeout(
            Duration::from_secs(5),
            shared.run(Lane::Ingest, |model| model.embed_texts(&["an item"])),
        )
        .await;
        release.send(()).unwrap();
        assert_eq!(
            ingest
                .expect("an ingest run waited for the request lane")
                .unwrap()
                .len(),
            1
        );
        assert_eq!(held.await.unwrap().unwrap().len(), 1);
    }

    #[test]
    fn normalize_makes_unit_vectors_and_leaves_zeros() {
        let mut v = vec![3.0, 4.0];
        assert!(l2_normalize(&mut v));
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut zeros = vec![0.0; 3];
        assert!(!l2_normalize(&mut zeros));
    }
}
