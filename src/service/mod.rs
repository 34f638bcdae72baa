//! The service layer: the node's use cases, without HTTP. One struct,
//! [`Services`], holds what they need (the engine, the learner, the models, the
//! search index, the embedder, the conversations, Kafka's producer); one method per
//! use case takes a typed request and answers a typed result or a
//! [`ServiceError`]. The HTTP frontend (`api`) decodes a request, makes one call
//! here and encodes the answer; the CLI and the tools call the same methods.
//!
//! - [`catalog`]: tables, items (embedded at ingest), users, deletes, field remaps.
//! - [`events`]: event ingest (through Kafka when it is on), the log by id, live-state snapshots.
//! - [`recommend`]: ranking candidates with a model and the live state; the rank context.
//! - [`modules`]: ranking modules and the items inside them, with pins.
//! - [`search`]: personalized full-text search and rerank.
//! - [`chat`]: one turn of a conversation.
//! - [`embed`]: text and image vectors.
//! - [`admin`]: keys, statistics, metrics, retraining.
//! - [`backup`]: backups of the running node.
//! - [`embedded_events`]: request-embedded events folded into one request's context.
//! - [`cluster`]: which node owns a key; forwarding and replication counters.
//! - [`experiments`]: A/B experiments: create, stop, figures; the arm of a request.

pub mod admin;
pub mod backup;
pub mod catalog;
pub mod chat;
pub mod cluster;
pub mod embed;
pub mod embedded_events;
mod error;
pub mod events;
pub mod experiments;
pub mod forget;
pub mod modules;
pub mod moves;
pub mod recommend;
pub mod search;
mod search_reading;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub use error::ServiceError;

use crate::api_keys::KeyStore;
use crate::config::EmbedConfig;
use crate::embed::SharedEmbedder;
use crate::engine::{Engine, Purger};
use crate::experiments::Experiments;
use crate::ranking::{Model, ModelRegistry};
use crate::search::SearchIndex;
use crate::stream::catalog_log::CatalogLog;
use crate::stream::{EventProducer, SharedStats};
use crate::training::Training;

/// The node's services: every handle a use case needs.
pub struct Services {
    /// The shard actors: catalog, events, live state.
    pub engine: Arc<Engine>,
    /// API keys, stored hashed.
    pub keys: Arc<KeyStore>,
    /// The learner and the snapshots of its artifacts.
    pub training: Arc<Training>,
    /// Ranking models by id.
    pub models: ModelRegistry,
    /// The catalog's full-text index (search, rerank, chat).
    pub search: Arc<SearchIndex>,
    /// Text and image embeddings for `/embed`, ingest-time item vectors and search.
    pub embedder: SharedEmbedder,
    /// `/embed` limits and ingest-time embedding settings.
    pub embed_config: EmbedConfig,
    /// Conversations, the optional LLM, counters.
    pub chat: chat::ChatService,
    /// With Kafka on: REST events are produced here before they are accepted.
    pub producer: Option<EventProducer>,
    /// With Kafka on: the consumer's counters.
    pub stream_stats: Option<SharedStats>,
    /// Live-state reads on the ranking path: deadline and misses.
    pub ranking: RankingStats,
    /// The topology from this node's seat: who owns which key.
    pub cluster: Arc<cluster::Cluster>,
    /// In a cluster: where this node's catalog, user and key writes go for the others.
    pub catalog_log: Option<CatalogLog>,
    /// Purges deleted users' records from the files.
    pub purger: Arc<Purger>,
    /// Where backups go, and the one running.
    pub backups: backup::Backups,
    /// The node's A/B experiments and their counts.
    pub experiments: Arc<Experiments>,
    /// Each item's prior for search, made from the models now and then.
    pub search_priors: search_reading::PriorsCache,
}

/// How the ranking path fares reading live state.
#[derive(Debug, Default)]
pub struct RankingStats {
    /// Deadline of a live-state read, in ms.
    pub state_deadline_ms: u64,
    /// Reads that missed the deadline (the request was ranked without that state).
    pub state_timeouts: AtomicU64,
    /// Reads that failed.
    pub state_errors: AtomicU64,
}

impl Services {
    /// A configured model, or [`ServiceError::UnknownModel`] (also for an experiment's
    /// id: resolve it first with [`Services::experiment_arm`]).
    pub fn model(&self, model_id: &str) -> Result<Arc<dyn Model>, ServiceError> {
        self.models
            .get(model_id)
            .ok_or_else(|| ServiceError::UnknownModel(model_id.to_owned()))
    }

    /// The cluster's topology and counters, with the catalog log's.
    pub fn cluster_stats(&self) -> serde_json::Value {
        let mut stats = self.cluster.to_json();
        if self.cluster.is_multi_node() {
            stats["session_claims"] = self.engine.claim_stats();
        }
        if let Some(log) = &self.catalog_log {
            stats["replication"] = log.stats.to_json();
        }
        stats
    }

    /// The node's clock, in unix ms.
    pub fn now_millis(&self) -> i64 {
        self.engine.now_millis()
    }
}
