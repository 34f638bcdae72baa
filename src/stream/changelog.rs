//! The changelog of a cluster's shards (one compacted partition per shard), through
//! which a live move hands a shard's state from its old owner to its new one.
//!
//! A hand-off of shard `s` at epoch `e` is, on partition `s`: a `begin` marker, one
//! message per entry of the export (keyed by its column family and key, so that
//! compaction keeps the latest of each), then a `released` marker that carries the
//! log sequence to continue after and the entry count. The new owner reads the
//! partition from its start, keeps what follows the last `begin` of epoch `e`, and
//! is done at the `released` of epoch `e`: an old owner that crashed mid-way and
//! hands off again restarts the sequence with a new `begin`.

use std::time::Duration;

use futures::future::join_all;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::producer::Producer;
use super::{client_config, StreamError};
use crate::config::KafkaConfig;
use crate::engine::ShardExport;
use crate::topology::ShardId;

/// Header naming what a changelog message is: `begin`, `state`, `event-id`, `released`.
const KIND_HEADER: &str = "rankstream-move";
/// Entries produced at once (each waits for its acknowledgement).
const PRODUCE_WINDOW: usize = 512;

/// The `begin` and `released` markers' payload.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    epoch: u64,
    next_seq: u64,
    entries: usize,
}

/// Produces `export` as shard `shard`'s hand-off at `epoch` and waits until the broker
/// has all of it.
pub async fn release(
    producer: &Producer,
    topic: &str,
    shard: ShardId,
    epoch: u64,
    export: &ShardExport,
) -> Result<(), StreamError> {
    let entries = export.state.len() + export.event_ids.len();
    let marker = |kind: &'static str| {
        let payload = serde_json::to_vec(&Marker {
            epoch,
            next_seq: export.next_seq,
            entries,
        })
        .expect("a marker serializes");
        (kind, kind.as_bytes().to_vec(), payload)
    };
    send(producer, topic, shard, vec![marker("begin")]).await?;
    let state = export
        .state
        .iter()
        .map(|(key, value)| ("state", [b"s".as_slice(), key].concat(), value.clone()));
    let ids = export
        .event_ids
        .iter()
        .map(|(key, value)| ("event-id", [b"e".as_slice(), key].concat(), value.clone()));
    let all: Vec<_> = state.chain(ids).collect();
    for window in all.chunks(PRODUCE_WINDOW) {
        send(producer, topic, shard, window.to_vec()).await?;
    }
    send(producer, topic, shard, vec![marker("released")]).await
}

async fn send(
    producer: &Producer,
    topic: &str,
    shard: ShardId,
    messages: Vec<(&'static str, Vec<u8>, Vec<u8>)>,
) -> Result<(), StreamError> {
    let sends = messages.iter().map(|(kind, key, payload)| {
        let headers = OwnedHeaders::new().insert(Header {
            key: KIND_HEADER,
            value: Some(*kind),
        });
        let record = FutureRecord::to(topic)
            .key(key.as_slice())
            .payload(payload.as_slice())
            .partition(i32::from(shard))
            .headers(headers);
        producer.send(record)
    });
    for sent in join_all(sends).await {
        sent?;
    }
    Ok(())
}

/// Reads shard `shard`'s hand-off at `epoch` from its partition, waiting for it as long
/// as it takes (the old owner may be restarting), with `progress` told the entries
/// read so far.
pub async fn restore(
    config: &KafkaConfig,
    shard: ShardId,
    epoch: u64,
    progress: impl Fn(usize),
) -> Result<ShardExport, StreamError> {
    let consumer: StreamConsumer = client_config(config)
        .set("group.id", format!("{}-restore", config.group_id))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "50")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&config.changelog_topic, i32::from(shard), Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut export: Option<ShardExport> = None;
    loop {
        let message = match consumer.recv().await {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(%error, shard, "reading the changelog failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let kind = message
            .headers()
            .and_then(|headers| headers.iter().find(|header| header.key == KIND_HEADER))
            .and_then(|header| header.value)
            .unwrap_or_default();
        let key = message.key().unwrap_or_default();
        let payload = message.payload().unwrap_or_default();
        match kind {
            b"begin" | b"released" => {
                let Ok(marker) = serde_json::from_slice::<Marker>(payload) else {
                    continue;
                };
                if marker.epoch != epoch {
                    export = None;
                    continue;
                }
                if kind == b"begin" {
                    export = Some(ShardExport::default());
                    continue;
                }
                let Some(mut done) = export.take() else {
                    continue;
                };
                let read = done.state.len() + done.event_ids.len();
                if read != marker.entries {
                    return Err(StreamError::Setup(format!(
                        "the hand-off of shard {shard} at epoch {epoch} has {read} entries, its marker says {}",
                        marker.entries
                    )));
                }
                done.next_seq = marker.next_seq;
                return Ok(done);
            }
            b"state" | b"event-id" => {
                let Some(export) = export.as_mut() else {
                    continue;
                };
                let entry = (key.get(1..).unwrap_or_default().to_vec(), payload.to_vec());
                match kind {
                    b"state" => export.state.push(entry),
                    _ => export.event_ids.push(entry),
                }
                progress(export.state.len() + export.event_ids.len());
            }
            _ => {}
        }
    }
}
