//! The topology log of a cluster: `rankstream cluster apply` publishes each new
//! topology with the next epoch to a one-partition compacted topic, and every node
//! reads the latest at start and then follows it. A node's topology file is epoch 0:
//! what a cluster starts with before any `apply`.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::KafkaConfig;
use crate::stream::producer::Producer;
use crate::stream::{client_config, StreamError};

/// How long a metadata or offsets request may take.
// A busy broker (the sqlite tansu one under a shard's backlog) has taken over 10 s to
// answer; an operator's command waits rather than fail.
const BROKER_TIMEOUT: Duration = Duration::from_secs(30);
/// The message key of every topology (compaction keeps the latest).
const KEY: &str = "topology";

/// A topology as published, with its epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub epoch: u64,
    /// The topology file's text.
    pub text: String,
}

/// Publishes `applied` and waits for the broker's acknowledgement.
pub async fn publish(config: &KafkaConfig, applied: &Applied) -> Result<(), StreamError> {
    let producer = Producer::new(config, &[])?;
    let payload = serde_json::to_vec(applied).expect("a topology serializes");
    let record = FutureRecord::to(&config.topology_topic)
        .key(KEY)
        .payload(&payload)
        .partition(0);
    producer.send(record).await?;
    Ok(())
}

/// The latest published topology and the offset after it; `None` when nothing was
/// published (or the topic does not exist: a cluster made before `apply` existed).
pub fn latest(config: &KafkaConfig) -> Result<(Option<Applied>, i64), StreamError> {
    let consumer: BaseConsumer = client_config(config)
        .set("group.id", format!("{}-topology", config.group_id))
        .set("enable.auto.commit", "false")
        .create()?;
    let topic = &config.topology_topic;
    let metadata = consumer.fetch_metadata(Some(topic), BROKER_TIMEOUT)?;
    if metadata.topics().first().map_or(0, |t| t.partitions().len()) == 0 {
        return Ok((None, 0));
    }
    let (low, high) = consumer.fetch_watermarks(topic, 0, BROKER_TIMEOUT)?;
    if high <= low {
        return Ok((None, high));
    }
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Offset(low))?;
    consumer.assign(&assignment)?;
    let mut latest: Option<Applied> = None;
    let deadline = std::time::Instant::now() + BROKER_TIMEOUT;
    let mut next = low;
    while next < high {
        if std::time::Instant::now() > deadline {
            return Err(StreamError::Setup(format!(
                "reading the topology topic {topic:?} timed out"
            )));
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message?;
        next = message.offset() + 1;
        if let Some(applied) = decode(message.payload()) {
            if latest.as_ref().is_none_or(|known| applied.epoch > known.epoch) {
                latest = Some(applied);
            }
        }
    }
    Ok((latest, high))
}

/// Sends every topology published from `offset` on, in order, from a task that ends
/// when the receiver goes or `shutdown` is cancelled.
pub fn follow(
    config: &KafkaConfig,
    offset: i64,
    shutdown: CancellationToken,
) -> Result<(mpsc::UnboundedReceiver<Applied>, tokio::task::JoinHandle<()>), StreamError> {
    let consumer: StreamConsumer = client_config(config)
        .set("group.id", format!("{}-topology", config.group_id))
        .set("enable.auto.commit", "false")
        // Topologies change rarely; a move starts within half a second of its apply.
        .set("fetch.wait.max.ms", "500")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&config.topology_topic, 0, Offset::Offset(offset))?;
    consumer.assign(&assignment)?;
    let (sender, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                _ = shutdown.cancelled() => return,
                received = consumer.recv() => received,
            };
            let message = match received {
                Ok(message) => message.detach(),
                Err(error) => {
                    tracing::warn!(%error, "reading the topology log failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            let Some(applied) = decode(message.payload()) else {
                tracing::warn!(offset = message.offset(), "an undecodable topology message is skipped");
                continue;
            };
            if sender.send(applied).is_err() {
                return;
            }
        }
    });
    Ok((receiver, task))
}

fn decode(payload: Option<&[u8]>) -> Option<Applied> {
    serde_json::from_slice(payload?).ok()
}
