//! The membership log: every node of a cluster produces a heartbeat to a compacted
//! one-partition topic, keyed by its id, and every node follows the topic, so each
//! knows when it last heard of each other node (the judging is
//! `service::cluster::membership`'s).

use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::KafkaConfig;
use crate::stream::producer::Producer;
use crate::stream::{client_config, StreamError};
use crate::topology::ShardId;

/// What a node says of itself, every heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub node: String,
    /// Random per process start: a node that restarted is a new incarnation.
    pub incarnation: u64,
    /// The sender's clock, unix ms (for display; judging uses the receiver's clock).
    pub sent_at_ms: i64,
    /// The topology epoch the node follows.
    pub epoch: u64,
    /// The shards it serves now.
    pub serving: Vec<ShardId>,
}

/// Produces the heartbeats of one node (acks=all, one at a time).
pub struct HeartbeatSender {
    producer: Producer,
    topic: String,
}

impl HeartbeatSender {
    /// A heartbeat not acknowledged within `deadline` fails (and the next one is tried).
    pub fn new(config: &KafkaConfig, deadline: Duration) -> Result<HeartbeatSender, StreamError> {
        let deadline_ms = deadline.as_millis().max(1).to_string();
        let producer = Producer::new(
            config,
            &[
                ("message.timeout.ms", &deadline_ms),
                ("request.timeout.ms", &deadline_ms),
            ],
        )?;
        Ok(HeartbeatSender {
            producer,
            topic: config.membership_topic.clone(),
        })
    }

    /// Produces `heartbeat` and waits for the broker's acknowledgement.
    pub async fn send(&self, heartbeat: &Heartbeat) -> Result<(), StreamError> {
        let payload = serde_json::to_vec(heartbeat).expect("a heartbeat serializes");
        let record = FutureRecord::to(&self.topic)
            .key(&heartbeat.node)
            .payload(&payload)
            .partition(0);
        self.producer.send(record).await?;
        Ok(())
    }
}

/// Sends every heartbeat in the topic, from its beginning (the latest of each node,
/// once compacted) on, from a task that ends when the receiver goes or `shutdown` is
/// cancelled.
pub fn follow(
    config: &KafkaConfig,
    group: &str,
    shutdown: CancellationToken,
) -> Result<(mpsc::UnboundedReceiver<Heartbeat>, tokio::task::JoinHandle<()>), StreamError> {
    let consumer: StreamConsumer = client_config(config)
        .set("group.id", format!("{}-membership-{group}", config.group_id))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&config.membership_topic, 0, Offset::Beginning)?;
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
                    tracing::warn!(%error, "reading the membership log failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let Some(heartbeat) = message
                .payload()
                .and_then(|payload| serde_json::from_slice(payload).ok())
            else {
                tracing::warn!(offset = message.offset(), "an undecodable heartbeat is skipped");
                continue;
            };
            if sender.send(heartbeat).is_err() {
                return;
            }
        }
    });
    Ok((receiver, task))
}
