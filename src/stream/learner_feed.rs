//! In a cluster, every node's learner also learns the events of the other nodes'
//! partitions, so that every node ranks with models of all events. A consumer of its
//! own reads those partitions for the learner only (their owners apply them to live
//! state); it fetches less eagerly than the applying consumer, since models may lag a
//! little where live state may not, and a broker serves every node's fetches.
//!
//! Where to resume is kept with the models: each such partition is a learner source of
//! its own whose sequence is the partition's next offset, stored when the models are.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::consumer::decode;
use super::{client_config, SharedStats, StreamError};
use crate::config::{EventFormat, KafkaConfig};
use crate::domain::event::SequencedEvent;
use crate::engine::catalog::ItemReader;
use crate::topology::{shard_for, ShardId};
use crate::training::Training;

/// How long the broker may hold a fetch of these partitions open waiting for messages.
const FETCH_WAIT_MS: &str = "100";
/// How long the feed gathers a batch for the learner.
const BATCH_WAIT: Duration = Duration::from_millis(20);
/// How often an idle feed looks whether the learner rebuilt its models.
const REBUILD_CHECK: Duration = Duration::from_millis(500);
/// Pause before retrying after the broker refused.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The learner's source id of another node's partition of the `topic_index`-th input
/// topic: past every shard id, so its sequence (the partition's next offset) is kept
/// apart from the local logs' in the stored models.
fn learner_source(topic_index: usize, shard: ShardId, shard_count: u16) -> ShardId {
    let index = (topic_index as u32 + 1) * u32::from(shard_count) + u32::from(shard);
    ShardId::try_from(index).unwrap_or(ShardId::MAX)
}

/// Assigns the partitions of `others` of every input topic from where the learner's
/// latest models stop (a source they never learned: the partition's start), or, with
/// `from_start`, all from their start.
fn assign(
    consumer: &StreamConsumer,
    topics: &[String],
    others: &[ShardId],
    shard_count: u16,
    learner: &Training,
    from_start: bool,
) -> Result<(), StreamError> {
    let mut learned = learner.latest().applied.clone();
    if from_start {
        learned.clear();
    }
    let mut assignment = TopicPartitionList::new();
    for (topic_index, topic) in topics.iter().enumerate() {
        for &shard in others {
            // The learner's sequence of such a source is the next offset to read.
            let offset = match learned.get(&learner_source(topic_index, shard, shard_count)) {
                Some(&next) => Offset::Offset(next as i64),
                None => Offset::Beginning,
            };
            assignment.add_partition_offset(topic, i32::from(shard), offset)?;
        }
    }
    Ok(consumer.assign(&assignment)?)
}

/// Assigns every input partition of the shards not in `local`, from where the learner's
/// stored models stop, and feeds the learner in a task until `shutdown` is cancelled
/// (the task ends between two batches).
pub fn follow_other_partitions(
    config: &KafkaConfig,
    local: &[ShardId],
    shard_count: u16,
    items: Arc<ItemReader>,
    learner: Arc<Training>,
    stats: SharedStats,
    shutdown: CancellationToken,
) -> Result<(tokio::task::JoinHandle<()>, FeedControl), StreamError> {
    let consumer: StreamConsumer = client_config(config)
        .set("group.id", format!("{}-learner", config.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", FETCH_WAIT_MS)
        .create()?;
    let mut others: Vec<ShardId> = (0..shard_count).filter(|shard| !local.contains(shard)).collect();
    let (control, mut commands) = mpsc::unbounded_channel();
    let topics: Vec<String> = config.inputs.iter().map(|input| input.topic.clone()).collect();
    let mut rebuilds = learner.rebuilds();
    assign(&consumer, &topics, &others, shard_count, &learner, false)?;
    let inputs: HashMap<String, (usize, EventFormat)> = config
        .inputs
        .iter()
        .enumerate()
        .map(|(index, input)| (input.topic.clone(), (index, input.format)))
        .collect();
    let max_batch = config.max_batch;
    let task = tokio::spawn(async move {
        while !shutdown.is_cancelled() {
            while let Ok(command) = commands.try_recv() {
                obey(command, &consumer, &topics, &mut others, shard_count, &learner);
            }
            // A rebuild relearned this node's own log only: read the others again from
            // where the rebuilt models stop (their start).
            // (What the feed handed over between the swap and now counts twice.)
            if learner.rebuilds() != rebuilds {
                rebuilds = learner.rebuilds();
                let sources = (0..topics.len())
                    .flat_map(|topic| {
                        others
                            .iter()
                            .map(move |&shard| learner_source(topic, shard, shard_count))
                    })
                    .collect();
                learner.forget_sources(sources).await;
                if let Err(error) = assign(&consumer, &topics, &others, shard_count, &learner, true) {
                    tracing::error!(%error, "re-reading other nodes' partitions after a rebuild failed");
                }
            }
            // Wait for a first message at most so long, then see about rebuilds again.
            let first = tokio::select! {
                _ = shutdown.cancelled() => break,
                first = tokio::time::timeout(REBUILD_CHECK, consumer.recv()) => first,
            };
            let first = match first {
                Err(_) => continue,
                Ok(Err(error)) => {
                    stats.consume_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "reading other nodes' partitions failed; retrying");
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
                Ok(Ok(message)) => message.detach(),
            };
            let mut batch: Vec<OwnedMessage> = vec![first];
            while batch.len() < max_batch {
                match tokio::time::timeout(BATCH_WAIT, consumer.recv()).await {
                    Ok(Ok(message)) => batch.push(message.detach()),
                    _ => break,
                }
            }
            let mut learn = Vec::with_capacity(batch.len());
            for message in &batch {
                let Some(&(topic_index, format)) = inputs.get(message.topic()) else {
                    continue;
                };
                let partition = message.partition() as ShardId;
                // Fetched before its shard came to this node: its log learns it.
                if !others.contains(&partition) {
                    continue;
                }
                // The owner dead-letters what does not decode; an event keyed to a
                // third shard is learned where it is produced again.
                let Ok(event) = decode(message, format) else { continue };
                if shard_for(event.routing_key().as_bytes(), shard_count) != partition {
                    continue;
                }
                let attributes = items.affinity_attributes(&event);
                learn.push(Arc::new(SequencedEvent {
                    source: learner_source(topic_index, partition, shard_count),
                    seq: (message.offset() + 1) as u64,
                    event,
                    attributes,
                }));
            }
            if !learn.is_empty() {
                learner.observe(learn).await;
            }
        }
        tracing::info!("learner feed of other nodes' partitions stopped");
    });
    Ok((task, FeedControl { commands: control }))
}

/// Moves shards in and out of the feed (live shard moves): a shard this node stops
/// serving is learned from its partitions again, one it starts serving from its log.
#[derive(Clone)]
pub struct FeedControl {
    commands: mpsc::UnboundedSender<FeedCommand>,
}

enum FeedCommand {
    /// Learn the shard's partitions from these next offsets (per input topic) on, or
    /// from where the models stop if that is later.
    Add(ShardId, Vec<(String, i64)>),
    Remove(ShardId),
}

impl FeedControl {
    pub fn add(&self, shard: ShardId, next_offsets: Vec<(String, i64)>) {
        let _ = self.commands.send(FeedCommand::Add(shard, next_offsets));
    }

    pub fn remove(&self, shard: ShardId) {
        let _ = self.commands.send(FeedCommand::Remove(shard));
    }
}

fn obey(
    command: FeedCommand,
    consumer: &StreamConsumer,
    topics: &[String],
    others: &mut Vec<ShardId>,
    shard_count: u16,
    learner: &Training,
) {
    let mut partitions = TopicPartitionList::new();
    let changed = match command {
        FeedCommand::Add(shard, next_offsets) => {
            let learned = &learner.latest().applied;
            for (topic_index, topic) in topics.iter().enumerate() {
                let given = next_offsets
                    .iter()
                    .find(|(name, _)| name == topic)
                    .map_or(0, |(_, next)| *next);
                let known = learned
                    .get(&learner_source(topic_index, shard, shard_count))
                    .map_or(0, |&next| next as i64);
                let _ = partitions.add_partition_offset(topic, i32::from(shard), Offset::Offset(given.max(known)));
            }
            others.push(shard);
            consumer.incremental_assign(&partitions)
        }
        FeedCommand::Remove(shard) => {
            for topic in topics {
                partitions.add_partition(topic, i32::from(shard));
            }
            others.retain(|&other| other != shard);
            consumer.incremental_unassign(&partitions)
        }
    };
    if let Err(error) = changed {
        tracing::warn!(%error, "changing the partitions the learner reads failed");
    }
}
