//! Administration: API keys (stored hashed; the secret is shown once), the node's
//! statistics, and rebuilding the models from the event log.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::catalog::Replication;
use super::chat::ChatService;
use super::cluster::Cluster;
use super::RankingStats;
use super::ServiceError;
use crate::api_keys::KeyStore;
use crate::domain::api_key::{ApiKey, AuthFailure, NewKey};
use crate::engine::{Engine, Purger};
use crate::search::SearchIndex;
use crate::stream::catalog_log::CatalogChange;
use crate::stream::SharedStats;
use crate::training::RetrainReport;
use crate::training::Training;

/// Administration: keys, statistics and metrics, retraining.
pub struct AdminService {
    parts: AdminParts,
}

/// The handles the admin service reads.
pub struct AdminParts {
    pub keys: Arc<KeyStore>,
    pub engine: Arc<Engine>,
    pub training: Arc<Training>,
    /// With Kafka on: the consumer's counters.
    pub stream_stats: Option<SharedStats>,
    pub ranking_stats: Arc<RankingStats>,
    pub index: Arc<SearchIndex>,
    pub chat: Arc<ChatService>,
    pub cluster: Arc<Cluster>,
    pub purger: Arc<Purger>,
    /// In a cluster, keys reach the other nodes through the catalog log.
    pub replication: Replication,
}

impl AdminService {
    pub fn new(parts: AdminParts) -> AdminService {
        AdminService { parts }
    }

    /// The cluster's topology and counters, with the catalog log's.
    pub fn cluster_stats(&self) -> Value {
        let mut stats = self.parts.cluster.to_json();
        if self.parts.cluster.is_multi_node() {
            stats["session_claims"] = self.parts.engine.claim_stats();
        }
        if let Some(replication) = self.parts.replication.stats_json() {
            stats["replication"] = replication;
        }
        stats
    }
}

impl AdminService {
    /// Creates a key; answers it with its secret (shown only here).
    pub async fn create_key(&self, new: NewKey) -> Result<(Arc<ApiKey>, String), ServiceError> {
        let keys = self.parts.keys.clone();
        let (key, secret) = blocking(move || keys.create(new)).await??;
        self.parts
            .replication
            .replicate(vec![CatalogChange::PutKey {
                key: KeyStore::replicable(&key, &secret),
            }])
            .await?;
        Ok((key, secret))
    }

    /// Cluster mode: hands this node's own key to the other nodes, so that they accept
    /// its calls; retried until the catalog log takes it or the node stops.
    pub async fn publish_node_key(&self, key: ApiKey, shutdown: CancellationToken) {
        loop {
            match self
                .parts
                .replication
                .replicate(vec![CatalogChange::PutKey { key: key.clone() }])
                .await
            {
                Ok(()) => return,
                Err(error) => {
                    tracing::warn!(%error, "publishing this node's key failed; retrying in 5 s");
                    tokio::select! {
                        // Published again at the next start.
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                    }
                }
            }
        }
    }

    /// Every key, without secrets.
    pub fn list_keys(&self) -> Vec<Arc<ApiKey>> {
        self.parts.keys.list()
    }

    /// Revokes a key; `NotFound` when there is no such key.
    pub async fn revoke_key(&self, id: &str) -> Result<(), ServiceError> {
        if id == crate::api_keys::BOOTSTRAP_ID {
            return Err(ServiceError::Conflict(
                "the bootstrap admin key cannot be revoked over the API: set another RANKSTREAM_ADMIN_KEY and restart"
                    .into(),
            ));
        }
        let (keys, owned) = (self.parts.keys.clone(), id.to_owned());
        if !blocking(move || keys.revoke(&owned)).await?? {
            return Err(ServiceError::NotFound(format!("API key {id:?}")));
        }
        self.parts
            .replication
            .replicate(vec![CatalogChange::RevokeKey { id: id.to_owned() }])
            .await
    }

    /// The key a secret belongs to, if it is valid now.
    pub fn authenticate(&self, secret: &str) -> Result<Arc<ApiKey>, AuthFailure> {
        self.parts.keys.authenticate(secret)
    }

    /// The node's counters: Kafka, models, live-state reads, chat.
    pub fn stats(&self) -> Value {
        let stream = self.parts.stream_stats.as_ref().map(|stats| stats.to_json());
        let trained = self.parts.training.latest();
        let models = json!({
            "events_learned": trained.events,
            "items": trained.items.len(),
            "ltr_examples": trained.ltr.examples(),
            "ltr_trained": trained.ltr.weights().is_some(),
            // Of the published snapshot; the learner's working copy shares all it has not changed since.
            "memory_bytes": self.parts.training.heap_bytes(&trained),
            // What the last rebuild's self-tuner chose, with its held-out figures.
            "tuning": trained.tuning,
        });
        let ranking = json!({
            "state_read_deadline_ms": self.parts.ranking_stats.state_deadline_ms,
            "state_read_timeouts": self.parts.ranking_stats.state_timeouts.load(Ordering::Relaxed),
            "state_read_errors": self.parts.ranking_stats.state_errors.load(Ordering::Relaxed),
        });
        json!({
            "kafka": stream,
            "models": models,
            "ranking": ranking,
            "chat": self.parts.chat.stats_json(),
            "cluster": self.cluster_stats(),
            "purge": { "runs": self.parts.purger.runs(), "pending_shards": self.parts.purger.pending() },
            "storage": {
                "memory": self.parts.engine.storage_memory(),
                "cached_item_rows": self.parts.engine.items().cached_rows(),
            },
        })
    }

    /// `GET /metrics`: the node's metrics in Prometheus' text format, with the gauges
    /// of what lives in other parts (consumer lag, models, search index) read now.
    pub fn metrics_text(&self) -> String {
        if let Some(stream) = &self.parts.stream_stats {
            for ((topic, partition), lag) in stream.lag.lock().iter() {
                crate::metrics::kafka_lag(topic, *partition, *lag);
            }
        }
        let trained = self.parts.training.latest();
        crate::metrics::models(
            trained.events,
            trained.items.len(),
            self.parts.training.heap_bytes(&trained),
        );
        crate::metrics::search_index(self.parts.index.lag(), self.parts.index.documents());
        crate::metrics::render()
    }

    /// Rebuilds the models from the whole event log and answers when done.
    pub async fn retrain(&self) -> Result<RetrainReport, ServiceError> {
        Ok(self.parts.training.retrain().await?)
    }
}

/// Runs a key write (an fsync) off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ServiceError::Internal(error.to_string()))
}
