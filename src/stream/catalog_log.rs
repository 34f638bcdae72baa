//! The catalog log of a cluster: every catalog, user, API-key and experiment write a node accepts
//! is produced (acks=all) to one compacted topic, and every node applies the writes of
//! the others to its own storage and search index, in the topic's order.
//!
//! The topic has a single partition, so every node sees the writes in one order.
//! Each message is keyed by what it changes (`item/<table>/<id>`, `user/<uid>`, ...), so
//! compaction keeps the last write of each. The accepting node applied its write
//! before producing it and skips its own messages (its origin is the node id and its
//! data directory's `store_id`: a node back on an empty directory applies what it took
//! before); the others apply them. Two nodes
//! writing the same item at the same moment can leave different last values (each
//! keeps the other's as the later one); writes of one key through one node cannot.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::producer::Producer;
use super::{client_config, StreamError};
use crate::api_keys::KeyStore;
use crate::config::KafkaConfig;
use crate::domain::api_key::ApiKey;
use crate::domain::catalog::{FieldType, Relation};
use crate::domain::experiment::StoredExperiment;
use crate::engine::catalog::RowKind;
use crate::engine::conversation::Conversations;
use crate::engine::Purger;
use crate::engine::{Catalog, Engine};
use crate::experiments::{ExperimentError, Experiments};

/// Header naming the node that accepted a write.
const ORIGIN_HEADER: &str = "rankstream-origin";
/// Pause before retrying a write that could not be applied for a passing reason.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// The catalog topic's one partition; its offset is stored under this shard.
const PARTITION: i32 = 0;

/// One write, as the accepting node applied it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CatalogChange {
    PutTable {
        name: String,
        description: Option<String>,
        relations: Option<Vec<Relation>>,
    },
    DeleteTable {
        name: String,
    },
    RemapField {
        table: String,
        field: String,
        to: FieldType,
    },
    /// An item as it was upserted (with its vector when one was computed at ingest).
    UpsertItem {
        table: String,
        id: String,
        row: Value,
    },
    DeleteItem {
        table: String,
        id: String,
        purge: bool,
    },
    UpsertUser {
        uid: String,
        row: Value,
    },
    DeleteUser {
        uid: String,
        /// The user's sessions, as the node that took the deletion knew them: their
        /// anonymous events and state go on every node.
        #[serde(default)]
        sessions: Vec<String>,
    },
    PutKey {
        key: ApiKey,
    },
    RevokeKey {
        id: String,
    },
    /// An experiment as it was created (running).
    PutExperiment {
        experiment: StoredExperiment,
    },
    /// An experiment stopped, at unix ms `stopped_at` (a key of its own: compaction
    /// keeps it beside the experiment's creation).
    StopExperiment {
        id: String,
        stopped_at: i64,
    },
}

impl CatalogChange {
    /// What the write changes: compaction keeps the last message of each.
    fn compaction_key(&self) -> String {
        match self {
            CatalogChange::PutTable { name, .. } | CatalogChange::DeleteTable { name } => format!("table/{name}"),
            CatalogChange::RemapField { table, field, .. } => format!("field/{table}/{field}"),
            CatalogChange::UpsertItem { table, id, .. } | CatalogChange::DeleteItem { table, id, .. } => {
                format!("item/{table}/{id}")
            }
            CatalogChange::UpsertUser { uid, .. } | CatalogChange::DeleteUser { uid, .. } => format!("user/{uid}"),
            CatalogChange::PutKey { key } => format!("key/{}", key.id),
            CatalogChange::RevokeKey { id } => format!("key/{id}"),
            CatalogChange::PutExperiment { experiment } => format!("experiment/{}", experiment.experiment.id),
            CatalogChange::StopExperiment { id, .. } => format!("experiment-stop/{id}"),
        }
    }
}

/// Counters of the catalog log, for `/v1/admin/stats`.
#[derive(Debug)]
pub struct ReplicationStats {
    /// Writes of this node produced to the log.
    pub published: AtomicU64,
    /// Writes of other nodes applied here.
    pub applied: AtomicU64,
    /// Writes of other nodes this node refused (a conflicting concurrent write).
    pub conflicts: AtomicU64,
    /// Milliseconds between the last applied write's produce and its apply here.
    pub last_lag_ms: AtomicI64,
    /// The largest such lag seen.
    pub max_lag_ms: AtomicI64,
    /// The next offset this node reads in the log.
    pub position: AtomicI64,
    /// The log's end when this node started following it.
    pub end_at_start: AtomicI64,
    /// Whether this node has read the log up to `end_at_start`: a node that joins with
    /// an empty data directory takes no shard over before it has (see `service::cluster::moves`).
    pub caught_up: watch::Sender<bool>,
}

impl Default for ReplicationStats {
    fn default() -> ReplicationStats {
        ReplicationStats {
            published: AtomicU64::default(),
            applied: AtomicU64::default(),
            conflicts: AtomicU64::default(),
            last_lag_ms: AtomicI64::default(),
            max_lag_ms: AtomicI64::default(),
            position: AtomicI64::default(),
            end_at_start: AtomicI64::default(),
            caught_up: watch::Sender::new(false),
        }
    }
}

impl ReplicationStats {
    pub fn to_json(&self) -> Value {
        json!({
            "published": self.published.load(Ordering::Relaxed),
            "applied": self.applied.load(Ordering::Relaxed),
            "conflicts": self.conflicts.load(Ordering::Relaxed),
            "lag_ms": self.last_lag_ms.load(Ordering::Relaxed),
            "max_lag_ms": self.max_lag_ms.load(Ordering::Relaxed),
            "position": self.position.load(Ordering::Relaxed),
            "end_at_start": self.end_at_start.load(Ordering::Relaxed),
            "caught_up": *self.caught_up.borrow(),
        })
    }
}

/// The producing side: this node's writes go to the log.
pub struct CatalogLog {
    producer: Producer,
    topic: String,
    origin: String,
    pub stats: Arc<ReplicationStats>,
}

impl CatalogLog {
    pub fn new(config: &KafkaConfig, origin: &str) -> Result<CatalogLog, StreamError> {
        Ok(CatalogLog {
            producer: Producer::new(config, &[])?,
            topic: config.catalog_topic.clone(),
            origin: origin.to_owned(),
            stats: Arc::default(),
        })
    }

    /// Produces the writes and waits until the broker acknowledged every one.
    pub async fn publish(&self, changes: &[CatalogChange]) -> Result<(), StreamError> {
        let sends = changes.iter().map(|change| async move {
            let key = change.compaction_key();
            let payload = serde_json::to_vec(change).expect("catalog changes serialize");
            let headers = OwnedHeaders::new().insert(Header {
                key: ORIGIN_HEADER,
                value: Some(self.origin.as_str()),
            });
            let record = FutureRecord::to(&self.topic)
                .key(&key)
                .payload(&payload)
                .partition(PARTITION)
                .headers(headers);
            self.producer.send(record).await
        });
        for result in join_all(sends).await {
            result?;
        }
        self.stats.published.fetch_add(changes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// What the other nodes' writes are applied to.
pub struct Replica {
    pub engine: Arc<Engine>,
    pub keys: Arc<KeyStore>,
    /// A deleted user's conversations held on this node go with them.
    pub conversations: Arc<Conversations>,
    /// A deleted user's records are purged from this node's files too.
    pub purger: Arc<Purger>,
    /// Experiments created and stopped on other nodes.
    pub experiments: Arc<Experiments>,
}

/// Starts applying the other nodes' writes from the offset stored with this node's
/// state (the log's beginning the first time), in a task that runs until `shutdown`
/// is cancelled (it ends between two messages, the last one applied and its offset
/// stored).
pub async fn follow_catalog_log(
    config: KafkaConfig,
    origin: String,
    replica: Replica,
    stats: Arc<ReplicationStats>,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, StreamError> {
    let engine = replica.engine.clone();
    let consumer: StreamConsumer = client_config(&config)
        .set("group.id", format!("{}-catalog-{origin}", config.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        // Every node follows this log; at 10 ms the sqlite tansu broker spent half a
        // core answering two idle nodes' fetches of it. A catalog write reaches the
        // other nodes within ~100 ms.
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let topic = config.catalog_topic.clone();
    let metadata = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
    if metadata.topics().first().map_or(0, |t| t.partitions().len()) == 0 {
        return Err(StreamError::Setup(format!(
            "the catalog topic {topic:?} does not exist; create the cluster's topics with `rankstream cluster init`"
        )));
    }
    let stored = engine
        .stream_offset(PARTITION as u16, &topic)
        .map_err(|error| StreamError::Setup(format!("reading the stored offset of {topic}: {error}")))?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&topic, PARTITION, stored.map_or(Offset::Beginning, Offset::Offset))?;
    consumer.assign(&assignment)?;
    let (_, end) = consumer.fetch_watermarks(&topic, PARTITION, Duration::from_secs(10))?;
    let mut catch_up = CatchUp::new(&stats, stored.unwrap_or(0), end);
    Ok(tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                _ = shutdown.cancelled() => break,
                received = consumer.recv() => received,
            };
            let message = match received {
                Ok(message) => message.detach(),
                Err(error) => {
                    tracing::warn!(%error, "reading the catalog log failed; retrying");
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            if origin_of(&message).as_deref() != Some(origin.as_str()) {
                apply_message(&replica, &stats, &message).await;
            }
            let offsets = [(PARTITION as u16, topic.as_str(), message.offset() + 1)];
            if let Err(error) = engine.store_stream_offsets(offsets.into_iter()).await {
                tracing::warn!(%error, "storing the catalog log's offset failed; the write is applied again after a restart");
            }
            catch_up.read(&stats, message.offset() + 1);
        }
        tracing::info!("catalog log follower stopped");
    }))
}

/// How far a node that started behind has read the catalog log, told in the log
/// every few seconds until it has read up to where the log ended at its start.
struct CatchUp {
    end: i64,
    last_told: Instant,
}

impl CatchUp {
    const TELL_EVERY: Duration = Duration::from_secs(2);

    fn new(stats: &ReplicationStats, position: i64, end: i64) -> CatchUp {
        stats.position.store(position, Ordering::Relaxed);
        stats.end_at_start.store(end, Ordering::Relaxed);
        if position >= end {
            stats.caught_up.send_replace(true);
        } else {
            tracing::info!(
                position,
                end,
                "reading the catalog log (catalog, users, keys) before taking shards"
            );
        }
        CatchUp {
            end,
            last_told: Instant::now(),
        }
    }

    fn read(&mut self, stats: &ReplicationStats, position: i64) {
        stats.position.store(position, Ordering::Relaxed);
        if *stats.caught_up.borrow() {
            return;
        }
        if position >= self.end {
            tracing::info!(position, "the catalog log is read up to where it ended at start");
            stats.caught_up.send_replace(true);
        } else if self.last_told.elapsed() >= Self::TELL_EVERY {
            tracing::info!(position, end = self.end, "reading the catalog log");
            self.last_told = Instant::now();
        }
    }
}

fn origin_of(message: &OwnedMessage) -> Option<String> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|header| header.key == ORIGIN_HEADER)
        .and_then(|header| header.value)
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// Applies one write of another node, retrying while this node cannot take it.
async fn apply_message(replica: &Replica, stats: &ReplicationStats, message: &OwnedMessage) {
    let Some(change) = message
        .payload()
        .and_then(|payload| serde_json::from_slice::<CatalogChange>(payload).ok())
    else {
        tracing::error!(
            offset = message.offset(),
            "an undecodable catalog log message was skipped"
        );
        stats.conflicts.fetch_add(1, Ordering::Relaxed);
        return;
    };
    loop {
        match apply(replica, change.clone()).await {
            Ok(()) => break,
            Err(Failure::Passing(reason)) => {
                tracing::warn!(%reason, "applying a catalog write failed; retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(Failure::Refused(reason)) => {
                tracing::warn!(%reason, ?change, "a catalog write of another node was refused here");
                stats.conflicts.fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
    }
    stats.applied.fetch_add(1, Ordering::Relaxed);
    if let Some(produced) = message.timestamp().to_millis() {
        let lag = chrono::Utc::now().timestamp_millis() - produced;
        stats.last_lag_ms.store(lag, Ordering::Relaxed);
        stats.max_lag_ms.fetch_max(lag, Ordering::Relaxed);
    }
}

/// Why a write could not be applied.
enum Failure {
    /// The node cannot take it now (a stopping actor, storage trouble): retry.
    Passing(String),
    /// The write itself is refused here (it conflicts with a concurrent one).
    Refused(String),
}

async fn apply(replica: &Replica, change: CatalogChange) -> Result<(), Failure> {
    use crate::engine::catalog::CatalogError;
    let (catalog, keys) = (replica.engine.catalog(), &replica.keys);
    let refusal = |error: CatalogError| match error {
        CatalogError::Unavailable(reason) => Failure::Passing(reason),
        CatalogError::Storage(error) => Failure::Passing(error.to_string()),
        // Deleting what is already gone is done.
        CatalogError::NotFound(_) => Failure::Refused(String::new()),
        error => Failure::Refused(error.to_string()),
    };
    let done_if_gone = |result: Result<(), Failure>| match result {
        Err(Failure::Refused(reason)) if reason.is_empty() => Ok(()),
        other => other,
    };
    match change {
        CatalogChange::PutTable {
            name,
            description,
            relations,
        } => catalog
            .put_table(&name, description, relations)
            .await
            .map(drop)
            .map_err(refusal),
        CatalogChange::DeleteTable { name } => done_if_gone(catalog.delete_table(&name).await.map_err(refusal)),
        CatalogChange::RemapField { table, field, to } => {
            // The node that took the remap checked it; here it applies as it did there.
            catalog
                .remap_field(&table, &field, to, true)
                .await
                .map(drop)
                .map_err(refusal)
        }
        CatalogChange::UpsertItem { row, .. } => upsert(catalog, RowKind::Item, row).await.map_err(refusal),
        CatalogChange::UpsertUser { row, .. } => upsert(catalog, RowKind::User, row).await.map_err(refusal),
        CatalogChange::DeleteItem { table, id, purge } => {
            done_if_gone(catalog.delete_item(&table, &id, purge).await.map_err(refusal))
        }
        CatalogChange::DeleteUser { uid, sessions } => forget_user(replica, &uid, sessions).await,
        CatalogChange::PutKey { key } => keys
            .put_replicated(key)
            .map_err(|error| Failure::Passing(error.to_string())),
        CatalogChange::RevokeKey { id } => keys
            .revoke(&id)
            .map(drop)
            .map_err(|error| Failure::Passing(error.to_string())),
        CatalogChange::PutExperiment { experiment } => replica
            .experiments
            .put_replicated(experiment)
            .map_err(experiment_failure),
        CatalogChange::StopExperiment { id, stopped_at } => replica
            .experiments
            .stop_at(&id, stopped_at)
            .map(drop)
            .map_err(experiment_failure),
    }
}

/// Storage trouble passes; a conflicting or unknown experiment is refused here.
fn experiment_failure(error: ExperimentError) -> Failure {
    match error {
        ExperimentError::Storage(error) => Failure::Passing(error.to_string()),
        error => Failure::Refused(error.to_string()),
    }
}

async fn upsert(catalog: &Catalog, kind: RowKind, row: Value) -> Result<(), crate::engine::catalog::CatalogError> {
    catalog
        .upsert_replicated_rows(kind, vec![row])
        .await
        .pop()
        .expect("one result per row")
        .map(drop)
}

/// A user deleted on another node: their records here, the conversations held here
/// with them or their sessions, and (later) the purge of this node's files. A user
/// already gone here still has their conversations looked for (a retry after a
/// partial failure).
async fn forget_user(replica: &Replica, uid: &str, sessions: Vec<String>) -> Result<(), Failure> {
    let (sessions, shards) = match replica.engine.delete_user(uid, &sessions).await {
        Ok(removal) => (removal.sessions, removal.shards),
        Err(error) => match deletion(error) {
            Failure::Refused(reason) if reason.is_empty() => (sessions, Default::default()),
            failure => return Err(failure),
        },
    };
    let passing = |error: &dyn std::fmt::Display| Failure::Passing(error.to_string());
    replica
        .conversations
        .forget(uid, &sessions)
        .await
        .map_err(|error| passing(&error))?;
    replica.purger.schedule(&shards).map_err(|error| passing(&error))
}

fn deletion(error: crate::engine::DeleteUserError) -> Failure {
    use crate::engine::catalog::CatalogError;
    use crate::engine::DeleteUserError;
    match error {
        DeleteUserError::Catalog(CatalogError::NotFound(_)) => Failure::Refused(String::new()),
        error => Failure::Passing(error.to_string()),
    }
}
