//! The cluster's topics: which exist, created once by `rankstream cluster init`, and
//! how far the nodes are behind on each partition (`rankstream cluster status`).

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{client_config, StreamError};
use crate::config::KafkaConfig;

/// How long a metadata or offset request to the broker may take.
// A busy broker (the sqlite tansu one under a shard's backlog) has taken over 10 s to
// answer; an operator's command waits rather than fail.
const BROKER_TIMEOUT: Duration = Duration::from_secs(30);

/// A topic the cluster needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    /// `cleanup.policy=compact` (keep the last message per key) rather than delete.
    pub compact: bool,
}

/// What `init` found or did for a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicOutcome {
    Created,
    /// It was there with the right partition count already.
    Existed,
}

/// Every topic a cluster of `shards` shards needs: the input topics and the REST topic
/// (one partition per shard), dead letters (likewise), the catalog log (one partition,
/// compacted), the live-state changelog (one partition per shard, compacted), the
/// topology log and the membership log (one partition each, compacted).
pub fn cluster_topics(config: &KafkaConfig, shards: u16) -> Vec<TopicSpec> {
    let per_shard = |name: &str, compact| TopicSpec {
        name: name.to_owned(),
        partitions: i32::from(shards),
        compact,
    };
    let mut topics: Vec<TopicSpec> = Vec::new();
    let mut add = |spec: TopicSpec| {
        if !spec.name.is_empty() && !topics.iter().any(|known| known.name == spec.name) {
            topics.push(spec);
        }
    };
    for input in &config.inputs {
        add(per_shard(&input.topic, false));
    }
    add(per_shard(&config.rest_topic, false));
    add(per_shard(&config.dead_letter_topic, false));
    add(TopicSpec {
        name: config.catalog_topic.clone(),
        partitions: 1,
        compact: true,
    });
    add(per_shard(&config.changelog_topic, true));
    add(TopicSpec {
        name: config.topology_topic.clone(),
        partitions: 1,
        compact: true,
    });
    add(TopicSpec {
        name: config.membership_topic.clone(),
        partitions: 1,
        compact: true,
    });
    topics
}

/// Creates the topics that do not exist; refuses (naming it) one that exists with
/// another partition count. Running it again changes nothing.
pub async fn create_topics(
    config: &KafkaConfig,
    topics: &[TopicSpec],
    replication: i32,
) -> Result<Vec<(String, TopicOutcome)>, StreamError> {
    let admin: AdminClient<DefaultClientContext> = client_config(config).create()?;
    let existing = partition_counts(config, topics)?;
    let mut outcomes = Vec::new();
    let mut missing = Vec::new();
    for (spec, partitions) in topics.iter().zip(existing) {
        match partitions {
            0 => missing.push(spec),
            n if n == spec.partitions as usize => outcomes.push((spec.name.clone(), TopicOutcome::Existed)),
            n => {
                return Err(StreamError::Setup(format!(
                    "topic {:?} exists with {n} partitions; the cluster needs {} (delete it, or keep the shard count it was made for)",
                    spec.name, spec.partitions
                )))
            }
        }
    }
    let policies: Vec<&str> = missing
        .iter()
        .map(|spec| if spec.compact { "compact" } else { "delete" })
        .collect();
    let new_topics: Vec<NewTopic<'_>> = missing
        .iter()
        .zip(&policies)
        .map(|(spec, policy)| {
            NewTopic::new(&spec.name, spec.partitions, TopicReplication::Fixed(replication))
                .set("cleanup.policy", policy)
        })
        .collect();
    if !new_topics.is_empty() {
        let options = AdminOptions::new().operation_timeout(Some(BROKER_TIMEOUT));
        for result in admin.create_topics(&new_topics, &options).await? {
            match result {
                Ok(name) => outcomes.push((name, TopicOutcome::Created)),
                // Another `init` made it meanwhile.
                Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => outcomes.push((name, TopicOutcome::Existed)),
                Err((name, code)) => return Err(StreamError::Setup(format!("creating topic {name:?}: {code}"))),
            }
        }
    }
    Ok(outcomes)
}

/// The partition count of each topic (0 for one that does not exist).
pub fn partition_counts(config: &KafkaConfig, topics: &[TopicSpec]) -> Result<Vec<usize>, StreamError> {
    let consumer: BaseConsumer = client_config(config).create()?;
    let metadata = consumer.fetch_metadata(None, BROKER_TIMEOUT)?;
    Ok(topics
        .iter()
        .map(|spec| {
            metadata
                .topics()
                .iter()
                .find(|topic| topic.name() == spec.name && topic.error().is_none())
                .map_or(0, |topic| topic.partitions().len())
        })
        .collect())
}

/// How far the cluster's consumer group is behind on one partition.
#[derive(Debug, Clone)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The offset the next message will get.
    pub end: i64,
    /// The next offset the group will read, if it committed one.
    pub committed: Option<i64>,
}

impl PartitionLag {
    /// Messages not yet applied (all of them when nothing was committed).
    pub fn lag(&self) -> i64 {
        (self.end - self.committed.unwrap_or(0)).max(0)
    }
}

/// The end offset and the group's committed offset of every partition of `topics`.
pub fn partition_lags(
    config: &KafkaConfig,
    topics: &[String],
    partitions: i32,
) -> Result<Vec<PartitionLag>, StreamError> {
    let consumer: BaseConsumer = client_config(config).set("group.id", &config.group_id).create()?;
    let mut list = TopicPartitionList::new();
    for topic in topics {
        for partition in 0..partitions {
            list.add_partition(topic, partition);
        }
    }
    let committed = consumer.committed_offsets(list.clone(), BROKER_TIMEOUT)?;
    // Every partition's end in one request (a timestamp of -1 asks for the latest
    // offset), not a round trip a partition: 72 of them took seconds on a loaded broker.
    list.set_all_offsets(Offset::End)?;
    let ends: HashMap<(String, i32), i64> = consumer
        .offsets_for_times(list, BROKER_TIMEOUT)?
        .elements()
        .iter()
        .filter_map(|element| match element.offset() {
            Offset::Offset(end) => Some(((element.topic().to_owned(), element.partition()), end)),
            _ => None,
        })
        .collect();
    let mut lags = Vec::new();
    for element in committed.elements() {
        let end = match ends.get(&(element.topic().to_owned(), element.partition())) {
            Some(&end) => end,
            None => {
                consumer
                    .fetch_watermarks(element.topic(), element.partition(), BROKER_TIMEOUT)?
                    .1
            }
        };
        lags.push(PartitionLag {
            topic: element.topic().to_owned(),
            partition: element.partition(),
            end,
            committed: match element.offset() {
                Offset::Offset(offset) => Some(offset),
                _ => None,
            },
        });
    }
    Ok(lags)
}
