//! Kafka: the node consumes the partitions of its own shards from every input
//! topic (partition = shard, assigned from the topology, not by group rebalancing),
//! applies each event through the same ingest path as REST, and records offsets
//! only after the events are durable. REST events are produced to the REST topic
//! (acks=all) before their 202. Malformed messages go to a dead-letter topic.

pub mod catalog_log;
pub mod cluster;
mod consumer;
pub mod learner_feed;
mod producer;
pub mod topics;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdkafka::ClientConfig;
use serde_json::{json, Value};

pub use consumer::{start_consumer, ConsumerControl};
pub use producer::{EventProducer, Producer};

use crate::config::KafkaConfig;

/// Header naming why a message was dead-lettered.
pub const ERROR_HEADER: &str = "rankstream-error";
/// The bytes that begin rankstream's own event encoding (REST events), before the
/// serialized internal `Event`. No JSON text begins with a NUL, so a producer's own
/// messages can never be taken for them.
///
/// A prefix and not a header: the sqlite tansu broker looks a fetched message's
/// headers up by scanning every header it holds, so a header on every event made each
/// fetch cost as much as the topic's length (a 100k-event shard could not be filled).
pub const INTERNAL_PREFIX: &[u8] = b"\0rs1";
/// Header that marked the internal encoding before [`INTERNAL_PREFIX`]; messages
/// written then still carry it and are still read.
pub const FORMAT_HEADER: &str = "rankstream-format";
/// Value of [`FORMAT_HEADER`] for a serialized internal `Event`.
pub const INTERNAL_FORMAT: &str = "event-v1-internal";

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("{0}")]
    Setup(String),
}

/// Counters of the stream path, for logs and `/v1/admin/stats`.
#[derive(Debug, Default)]
pub struct StreamStats {
    /// Messages read from input topics.
    pub consumed: AtomicU64,
    /// Events applied (first delivery).
    pub applied: AtomicU64,
    /// Events seen again (re-delivery, replay, or produced by our REST path).
    pub duplicates: AtomicU64,
    /// Events whose routing key belongs to another shard than their partition.
    pub forwarded: AtomicU64,
    /// Malformed messages written to the dead-letter topic.
    pub dead_lettered: AtomicU64,
    /// Errors from the broker while consuming.
    pub consume_errors: AtomicU64,
    /// Per (input topic, partition) of this node: the next offset to apply.
    pub positions: parking_lot::Mutex<BTreeMap<(String, i32), i64>>,
    /// Per (input topic, partition) of this node: messages between the next offset to
    /// apply and the partition's end, as last measured (every couple of seconds).
    pub lag: parking_lot::Mutex<BTreeMap<(String, i32), i64>>,
}

impl StreamStats {
    pub fn to_json(&self) -> Value {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        json!({
            "consumed": get(&self.consumed),
            "applied": get(&self.applied),
            "duplicates": get(&self.duplicates),
            "forwarded": get(&self.forwarded),
            "dead_lettered": get(&self.dead_lettered),
            "consume_errors": get(&self.consume_errors),
            "lag_by_shard": self.lag_by_shard(),
        })
    }

    /// Consumer lag per shard (summed over the input topics), as a JSON object.
    fn lag_by_shard(&self) -> Value {
        let mut by_shard: BTreeMap<i32, i64> = BTreeMap::new();
        for ((_, partition), lag) in self.lag.lock().iter() {
            *by_shard.entry(*partition).or_default() += lag;
        }
        Value::Object(
            by_shard
                .into_iter()
                .map(|(shard, lag)| (shard.to_string(), json!(lag)))
                .collect(),
        )
    }
}

/// The librdkafka settings shared by consumer and producers.
fn client_config(config: &KafkaConfig) -> ClientConfig {
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", &config.brokers);
    for (key, value) in &config.client {
        client.set(key, value);
    }
    client
}

/// Shared handle on the stream counters.
pub type SharedStats = Arc<StreamStats>;
