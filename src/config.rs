//! Configuration: one serde struct per section, layered as
//! compiled-in `config/default.toml` < `--config FILE` < `RANKSTREAM__SECTION__KEY`
//! environment variables < command-line flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// The compiled-in defaults; every key is documented there.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// HTTP frontend.
    pub server: ServerConfig,
    /// RocksDB location and durability.
    pub storage: StorageConfig,
    /// Actors and shards.
    pub engine: EngineConfig,
    /// API keys and rate quotas.
    pub auth: AuthConfig,
    /// Event streams over Kafka.
    pub kafka: KafkaConfig,
    /// Learners fed by the event stream, and the models file.
    pub training: TrainingConfig,
    /// `POST /chat`: conversations and the optional LLM that writes replies.
    pub chat: ChatConfig,
    /// The full-text index and how search and rerank blend text with personalization.
    pub search: SearchConfig,
    /// Embedding model, `/embed` limits and ingest-time item embeddings.
    pub embed: EmbedConfig,
    /// Which node of the topology this process is.
    pub node: NodeConfig,
    /// Cluster mode: standby replicas and failure detection.
    pub cluster: ClusterConfig,
}

/// How a cluster keeps its shards served when a node is lost.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Standby replicas of each shard, each on another node than its owner (fewer when
    /// the topology has fewer other nodes).
    pub standby_replicas: u16,
    /// How long a node may go without a heartbeat before it is declared down, in ms;
    /// 0 turns automatic failover off (failure is then the operator's to act on).
    /// Heartbeats go every fifth of it (every 2 s at 0).
    pub failure_timeout_ms: u64,
}

impl ClusterConfig {
    /// The timeout the membership view judges nodes by (10 s when failover is off).
    pub fn membership_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(match self.failure_timeout_ms {
            0 => 10_000,
            timeout => timeout,
        })
    }
}

/// This process's place in the topology.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The `id` of this node in the topology file (`--node-id`); empty: the only node of
    /// a one-node topology.
    pub id: String,
    /// How long a request forwarded to another node may take when the caller's own
    /// deadline is longer, in ms; a node that does not answer in time answers 503.
    pub forward_timeout_ms: u64,
    /// How long connecting to another node may take, in ms; past it the node counts as
    /// down and its shards answer 503 `shard_unavailable`.
    pub connect_timeout_ms: u64,
    /// Seconds a 503 `shard_unavailable` asks clients to wait (`Retry-After`).
    pub retry_after_s: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// Off: the node is the whole system and events arrive over REST only.
    pub enabled: bool,
    /// `bootstrap.servers` of the cluster.
    pub brokers: String,
    /// Consumer group offsets are committed under (they are also stored with each shard's state).
    pub group_id: String,
    /// Topics consumed; each has one partition per shard and is read partition = shard.
    pub inputs: Vec<KafkaInput>,
    /// Topic REST events are produced to (acks=all) before their 202; empty: none.
    pub rest_topic: String,
    /// Topic malformed messages are written to, with the reason in a header.
    pub dead_letter_topic: String,
    /// Most messages applied as one batch.
    pub max_batch: usize,
    /// How long the consumer waits for more messages before applying a batch, in ms.
    pub batch_wait_ms: u64,
    /// `fetch.wait.max.ms` of the consumer of the shards' partitions.
    pub fetch_wait_ms: u64,
    /// Compacted topic of catalog, user and API-key writes that every node of a cluster
    /// applies to its own storage.
    pub catalog_topic: String,
    /// Compacted topic of the shards' live state (one partition per shard), for moving a
    /// shard to another node.
    pub changelog_topic: String,
    /// Compacted one-partition topic of the topologies `cluster apply` published.
    pub topology_topic: String,
    /// Compacted one-partition topic of the nodes' heartbeats (keyed by node id).
    pub membership_topic: String,
    /// Extra librdkafka properties for the consumer and producers (security, SASL, ...).
    pub client: BTreeMap<String, String>,
}

/// One consumed topic and the format of its messages.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaInput {
    pub topic: String,
    pub format: EventFormat,
}

/// The wire format of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventFormat {
    /// `POST /v1/events` events.
    Event,
    /// `POST /catalog/engagement` events.
    Engagement,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the HTTP frontend listens on.
    pub bind: String,
    /// Largest accepted request body in bytes (413 above it).
    pub body_limit_bytes: usize,
    /// Deadline for a whole request, body read included, in ms (408 after it).
    pub request_timeout_ms: u64,
    /// How long a graceful shutdown waits for in-flight requests, in ms.
    pub shutdown_grace_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// RocksDB directory.
    pub data_dir: PathBuf,
    /// Whether a write is fsynced before it is acknowledged.
    pub durability: Durability,
    /// How long after a user's deletion the key ranges that held them are purged
    /// from the files (deletions meanwhile share the purge), in ms.
    #[serde(default = "default_purge_delay_ms")]
    pub purge_delay_ms: u64,
    /// RocksDB's memory in MiB: its block cache, to which the memtables are charged
    /// (they flush at half of it).
    #[serde(default = "default_storage_memory_mb")]
    pub memory_mb: u64,
    /// Where `POST /v1/admin/backup` writes; empty: `<data_dir>-backups`, beside the
    /// data directory.
    #[serde(default)]
    pub backup_dir: PathBuf,
}

fn default_cached_item_rows_mb() -> usize {
    64
}

fn default_cached_queries() -> usize {
    1024
}

fn default_storage_memory_mb() -> u64 {
    256
}

fn default_purge_delay_ms() -> u64 {
    60_000
}

/// When a write counts as acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fsync of the WAL before the response, grouped across concurrent writers.
    Sync,
    /// In the WAL buffer before the response; a crash may lose the newest writes.
    Async,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Mailbox capacity of each shard actor.
    pub shard_mailbox: usize,
    /// Events in flight per shard (accepted, not yet applied everywhere and learned);
    /// past it, ingest waits.
    pub max_events_in_flight: usize,
    /// Batches the group-commit writer queues; past it, writers wait.
    pub commit_queue: usize,
    /// Topology file; empty means the embedded single-node topology.
    pub topology_file: String,
    /// A live session idle this long persists its state and leaves memory.
    pub session_idle_ttl_ms: u64,
    /// A live user idle this long persists its state and leaves memory.
    pub user_idle_ttl_ms: u64,
    /// Live sessions + users per shard; above it the least recently used is passivated.
    pub max_live_actors_per_shard: usize,
    /// Item interactions kept per session and user.
    pub recent_items: usize,
    /// Time for a session affinity to halve.
    pub session_half_life_ms: u64,
    /// Time for a user affinity to halve.
    pub user_half_life_ms: u64,
    /// How often live state is persisted and the crash-replay point moved forward.
    pub checkpoint_interval_ms: u64,
    /// How long the ranking path waits for a session's or user's live state.
    pub state_read_deadline_ms: u64,
    /// Memory for item rows kept decoded, for search's answers and ingest's
    /// affinities, in MB (0: none).
    #[serde(default = "default_cached_item_rows_mb")]
    pub cached_item_rows_mb: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingConfig {
    /// The model registry (`config/models.toml` shape); empty means the embedded one.
    pub models_file: String,
    /// How often the learned artifacts are written to the `models` column family.
    pub persist_interval_ms: u64,
    /// How often the artifacts are rebuilt from the event log (deleted users drop out).
    pub retrain_interval_ms: u64,
    /// Time for an item's popularity to halve.
    pub popularity_half_life_ms: u64,
    /// How long what a ranking showed is kept for learning from its outcomes.
    pub ranking_retention_ms: u64,
    /// Popularity is also counted per value of this event property and request
    /// `context` field (a segment such as region or device); empty: overall only.
    pub segment_field: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatConfig {
    /// Base URL of an OpenAI-compatible API (`http://host:port/v1`) whose
    /// `/chat/completions` writes the reply from the retrieved items; empty: replies are
    /// composed without an LLM. Plain http only.
    pub llm_url: String,
    /// `model` sent to the LLM.
    pub llm_model: String,
    /// Name of the environment variable holding the LLM's API key (sent as a Bearer
    /// token); empty: no key is sent.
    pub llm_api_key_env: String,
    /// How long a reply waits for the LLM before the composed reply is used, in ms.
    pub llm_timeout_ms: u64,
    /// Longest accepted `message`, in bytes (422 above it).
    pub max_message_bytes: usize,
    /// Items retrieved by search before the conversation's constraints filter them.
    pub retrieval_pool: usize,
    /// Turns kept per conversation.
    pub max_turns: usize,
    /// A conversation actor idle this long stops (its state is stored; the next message restores it), in ms.
    pub idle_ttl_ms: u64,
    /// Mailbox capacity of each conversation actor.
    pub mailbox: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// The indexer commits (makes changes searchable) at most this often, in ms.
    pub commit_interval_ms: u64,
    /// Catalog changes queued for the indexer; a full queue makes catalog writers wait.
    pub change_queue: usize,
    /// Memory of the index writer, in bytes.
    pub writer_memory_bytes: usize,
    /// Decompressed document-store blocks cached per index segment.
    pub doc_store_cache_blocks: usize,
    /// Typo tolerance on or off.
    pub fuzzy: bool,
    /// Query tokens of at least this many characters tolerate one typo.
    pub typo_one_min_chars: usize,
    /// Query tokens of at least this many characters tolerate two typos.
    pub typo_two_min_chars: usize,
    /// Most index terms a misspelt query token expands to, per field.
    pub fuzzy_max_expansions: usize,
    /// Weight of a typo-tolerant match relative to an exact one.
    pub fuzzy_factor: f32,
    /// Weight of a match of a word's stem only ("comedies" for "comedy") relative to
    /// an exact one.
    pub stem_factor: f32,
    /// Rank by the BM25 text score alone: no stems, labels, prior, query reading or
    /// personalization (the relevance suite's baseline).
    #[serde(default)]
    pub bm25_only: bool,
    /// BM25 weight of the title (`title` or `name`).
    pub title_boost: f32,
    /// BM25 weight of groups, genres and tags.
    pub labels_boost: f32,
    /// BM25 weight of the description and the other text fields.
    pub body_boost: f32,
    /// Text matches considered for personalization: at least this many (4 × limit when larger).
    pub candidate_pool: usize,
    /// Recent queries whose best matches are kept until the next commit or priors
    /// (0: none).
    #[serde(default = "default_cached_queries")]
    pub cached_queries: usize,
    /// Weight of the text score: how much of the query an item covers, in [0, 1].
    pub text_weight: f32,
    /// Weight of the item's prior (its popularity, scaled to [0, 1] on a log scale, and
    /// availability), which decides between items that cover the query equally.
    pub prior_weight: f32,
    /// Weight of co-visitation with the session's items.
    pub covisit_weight: f32,
    /// Weight of the session's and user's affinity to the item's attributes.
    pub affinity_weight: f32,
    /// Weight of the item's popularity.
    pub popularity_weight: f32,
    /// Weight of the cosine to the recent items' mean embedding.
    pub embedding_weight: f32,
    /// Weight of the cosine between a query vector and the item's `embeddings`.
    pub vector_weight: f32,
    /// Weight of "the catalog says it is unavailable" (negative demotes).
    pub unavailable_weight: f32,
    /// Rerank: weight of the text score of each given item.
    pub rerank_text_weight: f32,
    /// Rerank: weight of the named model's score (scaled to [0, 1] over the items).
    pub rerank_model_weight: f32,
    /// Rerank: weight of the caller's retrieval metadata (retrieval_score and rank).
    pub rerank_retrieval_weight: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Refill rate (requests per second) of keys without their own.
    pub default_rate_per_sec: u32,
    /// Bucket size of keys without their own.
    pub default_burst: u32,
    /// Requests presenting a key that is not valid, per client address and minute;
    /// past it that address gets 429 for every request with a key until its bucket
    /// refills (20 at once, then one per 60/N s).
    #[serde(default = "default_failures_per_minute")]
    pub failures_per_minute: u32,
}

fn default_failures_per_minute() -> u32 {
    20
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedConfig {
    /// Directory of the all-MiniLM-L6-v2 sentence model (`config.json`, `tokenizer.json`,
    /// `model.safetensors`); `auto` (the default): where set-up puts it, if it is there,
    /// else the hashed embedder; empty: the built-in hashed embedder, which needs no files.
    pub model_dir: String,
    /// Longest `text` accepted by `/embed`, in bytes (422 above it).
    pub max_text_bytes: usize,
    /// Whether `/embed` may fetch an `image_url` (an SSRF risk: off by default, 422 when off).
    pub image_url_fetch: bool,
    /// Hosts an `image_url` may name (exact, case-insensitive match); nothing else is fetched.
    pub image_url_allow_hosts: Vec<String>,
    /// Largest image accepted, decoded from `image_bytes` or fetched from `image_url`, in bytes.
    pub image_max_bytes: usize,
    /// How long fetching an `image_url` may take in all, in ms.
    pub image_fetch_timeout_ms: u64,
    /// Whether catalog items upserted without `embeddings` get one computed from their text.
    pub embed_items_at_ingest: bool,
    /// The item fields (strings or arrays of strings) whose text is embedded at ingest.
    pub item_text_fields: Vec<String>,
}

impl Config {
    /// Layers the defaults, an optional file and the environment, then validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::new().merge(Toml::string(DEFAULT_TOML));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError(vec![format!(
                    "config file {} does not exist",
                    file.display()
                )]));
            }
            figment = figment.merge(Toml::file(file));
        }
        let config: Config = figment
            .merge(Env::prefixed("RANKSTREAM__").split("__"))
            .extract()
            .map_err(|error| ConfigError(error.into_iter().map(|e| e.to_string()).collect()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reports every problem at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        if self.server.bind.parse::<std::net::SocketAddr>().is_err() {
            problems.push(format!("server.bind {:?} is not an IP:PORT address", self.server.bind));
        }
        if self.server.body_limit_bytes == 0 {
            problems.push("server.body_limit_bytes must be > 0".to_owned());
        }
        if self.storage.memory_mb < 16 {
            problems.push(format!(
                "storage.memory_mb must be >= 16, not {}",
                self.storage.memory_mb
            ));
        }
        if self.server.request_timeout_ms == 0 {
            problems.push("server.request_timeout_ms must be > 0".to_owned());
        }
        let engine = &self.engine;
        for (name, value) in [
            ("engine.shard_mailbox", engine.shard_mailbox as u64),
            ("engine.max_events_in_flight", engine.max_events_in_flight as u64),
            ("engine.commit_queue", engine.commit_queue as u64),
            ("engine.session_idle_ttl_ms", engine.session_idle_ttl_ms),
            ("engine.user_idle_ttl_ms", engine.user_idle_ttl_ms),
            (
                "engine.max_live_actors_per_shard",
                engine.max_live_actors_per_shard as u64,
            ),
            ("engine.recent_items", engine.recent_items as u64),
            ("engine.session_half_life_ms", engine.session_half_life_ms),
            ("engine.user_half_life_ms", engine.user_half_life_ms),
            ("engine.checkpoint_interval_ms", engine.checkpoint_interval_ms),
            ("engine.state_read_deadline_ms", engine.state_read_deadline_ms),
            ("training.persist_interval_ms", self.training.persist_interval_ms),
            ("training.retrain_interval_ms", self.training.retrain_interval_ms),
            (
                "training.popularity_half_life_ms",
                self.training.popularity_half_life_ms,
            ),
            ("training.ranking_retention_ms", self.training.ranking_retention_ms),
            ("chat.llm_timeout_ms", self.chat.llm_timeout_ms),
            ("chat.max_message_bytes", self.chat.max_message_bytes as u64),
            ("chat.retrieval_pool", self.chat.retrieval_pool as u64),
            ("chat.max_turns", self.chat.max_turns as u64),
            ("chat.idle_ttl_ms", self.chat.idle_ttl_ms),
            ("chat.mailbox", self.chat.mailbox as u64),
            ("node.forward_timeout_ms", self.node.forward_timeout_ms),
            ("node.connect_timeout_ms", self.node.connect_timeout_ms),
        ] {
            if value == 0 {
                problems.push(format!("{name} must be > 0"));
            }
        }
        if !self.chat.llm_url.is_empty() && !self.chat.llm_url.starts_with("http://") {
            problems.push(format!(
                "chat.llm_url {:?} must be an http:// URL (https is not supported)",
                self.chat.llm_url
            ));
        }
        problems.extend(self.search.problems());
        let embed = &self.embed;
        for (name, value) in [
            ("embed.max_text_bytes", embed.max_text_bytes as u64),
            ("embed.image_max_bytes", embed.image_max_bytes as u64),
            ("embed.image_fetch_timeout_ms", embed.image_fetch_timeout_ms),
        ] {
            if value == 0 {
                problems.push(format!("{name} must be > 0"));
            }
        }
        if embed.image_url_fetch && embed.image_url_allow_hosts.iter().all(|host| host.trim().is_empty()) {
            problems.push("embed.image_url_fetch is on but embed.image_url_allow_hosts names no host".to_owned());
        }
        if embed.embed_items_at_ingest && embed.item_text_fields.is_empty() {
            problems.push("embed.embed_items_at_ingest is on but embed.item_text_fields is empty".to_owned());
        }
        if self.cluster.failure_timeout_ms != 0 && self.cluster.failure_timeout_ms < 1000 {
            problems.push(format!(
                "cluster.failure_timeout_ms must be 0 (off) or >= 1000, not {}",
                self.cluster.failure_timeout_ms
            ));
        }
        if self.auth.default_rate_per_sec == 0 {
            problems.push("auth.default_rate_per_sec must be > 0".to_owned());
        }
        if self.auth.default_burst == 0 {
            problems.push("auth.default_burst must be > 0".to_owned());
        }
        let kafka = &self.kafka;
        if kafka.enabled {
            if kafka.brokers.trim().is_empty() {
                problems.push("kafka.brokers must name at least one broker".to_owned());
            }
            if kafka.inputs.is_empty() && kafka.rest_topic.is_empty() {
                problems.push("kafka is enabled but has no kafka.inputs and no kafka.rest_topic".to_owned());
            }
            if kafka.dead_letter_topic.is_empty() && !kafka.inputs.is_empty() {
                problems.push("kafka.dead_letter_topic is required when kafka.inputs are consumed".to_owned());
            }
            if kafka.max_batch == 0 {
                problems.push("kafka.max_batch must be > 0".to_owned());
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError(problems))
        }
    }
}

impl TrainingConfig {
    /// How long rankings are kept (`ranking_retention_ms`), as the storage takes it.
    pub fn ranking_retention(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.ranking_retention_ms)
    }
}

impl SearchConfig {
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, value) in [
            ("search.commit_interval_ms", self.commit_interval_ms),
            ("search.change_queue", self.change_queue as u64),
            ("search.doc_store_cache_blocks", self.doc_store_cache_blocks as u64),
            ("search.candidate_pool", self.candidate_pool as u64),
        ] {
            if value == 0 {
                problems.push(format!("{name} must be > 0"));
            }
        }
        if self.writer_memory_bytes < 15_000_000 {
            problems.push("search.writer_memory_bytes must be at least 15000000".to_owned());
        }
        if self.typo_one_min_chars == 0 || self.typo_two_min_chars < self.typo_one_min_chars {
            problems.push("search.typo_one_min_chars must be > 0 and <= search.typo_two_min_chars".to_owned());
        }
        let weights = [
            ("search.fuzzy_factor", self.fuzzy_factor),
            ("search.stem_factor", self.stem_factor),
            ("search.prior_weight", self.prior_weight),
            ("search.title_boost", self.title_boost),
            ("search.labels_boost", self.labels_boost),
            ("search.body_boost", self.body_boost),
            ("search.text_weight", self.text_weight),
            ("search.covisit_weight", self.covisit_weight),
            ("search.affinity_weight", self.affinity_weight),
            ("search.popularity_weight", self.popularity_weight),
            ("search.embedding_weight", self.embedding_weight),
            ("search.vector_weight", self.vector_weight),
            ("search.unavailable_weight", self.unavailable_weight),
            ("search.rerank_text_weight", self.rerank_text_weight),
            ("search.rerank_model_weight", self.rerank_model_weight),
            ("search.rerank_retrieval_weight", self.rerank_retrieval_weight),
        ];
        for (name, value) in weights {
            if !value.is_finite() {
                problems.push(format!("{name} must be a finite number"));
            }
        }
        problems
    }
}

/// Every problem found in a configuration.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {}", .0.join("; "))]
pub struct ConfigError(pub Vec<String>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load_and_validate() {
        let config = Config::load(None).unwrap();
        assert_eq!(config.storage.durability, Durability::Sync);
        assert_eq!(config.server.body_limit_bytes, 16 * 1024 * 1024);
    }

    #[test]
    fn kafka_client_properties_keep_their_dotted_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kafka.toml");
        std::fs::write(
            &file,
            "[kafka]\nenabled = true\n[kafka.client]\n\"security.protocol\" = \"SSL\"\n",
        )
        .unwrap();
        let config = Config::load(Some(&file)).unwrap();
        assert!(config.kafka.enabled);
        assert_eq!(
            config.kafka.client.get("security.protocol").map(String::as_str),
            Some("SSL")
        );
        assert_eq!(config.kafka.inputs.len(), 2, "the default inputs stay");
    }

    #[test]
    fn validate_reports_every_problem() {
        let mut config = Config::load(None).unwrap();
        config.server.bind = "nowhere".into();
        config.auth.default_burst = 0;
        let problems = config.validate().unwrap_err().0;
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
