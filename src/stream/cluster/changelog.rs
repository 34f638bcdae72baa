//! The changelog of a cluster's shards (one compacted partition per shard), through
//! which a live move hands a shard's state from its old owner to its new one.
//!
//! A hand-off of shard `s` at epoch `e` is, on partition `s`: a `begin` marker, the
//! export's entries packed into chunks of up to [`CHUNK_BYTES`] (keyed by their index,
//! so that compaction keeps the latest chunk of each index), then a `released` marker
//! that carries the log sequence to continue after, the entry count and the offset of
//! its `begin`. The new owner reads the partition from its last message on until it
//! sees the `released` of epoch `e`, then reads the hand-off from its `begin`: a move
//! reads the bytes of that hand-off and not the partition's history. Packing matters
//! because a broker's cost is per message: a shard of 10k users is ~20k entries but
//! only a few chunks. An old owner that crashed mid-way and hands off again writes the
//! whole sequence again with a new `begin`, and a reader keeps only chunks that follow
//! the `begin` its marker names.

use std::time::Duration;

use futures::future::join_all;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use crate::config::KafkaConfig;
use crate::engine::ShardExport;
use crate::stream::producer::Producer;
use crate::stream::{client_config, StreamError};
use crate::topology::ShardId;

/// Header naming what a changelog message is: `begin`, `chunk`, `released`.
const KIND_HEADER: &str = "rankstream-move";
/// A chunk's payload is closed once it holds this many bytes (well under the 1 MB a
/// broker takes by default in one message).
const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks produced at once (each waits for its acknowledgement).
const PRODUCE_WINDOW: usize = 8;
/// An entry's tag in a chunk: a `state` entry or an event-id index entry.
const STATE: u8 = b's';
const EVENT_ID: u8 = b'e';

/// The `begin` and `released` markers' payload.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    epoch: u64,
    next_seq: u64,
    entries: usize,
    /// In a `released` marker: the offset of its hand-off's `begin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    begin: Option<i64>,
}

/// Packs `export`'s entries into chunks: each entry is its tag, then its key and its
/// value, each after its length (u32, little-endian).
fn chunks(export: &ShardExport) -> Vec<Vec<u8>> {
    let tagged = export
        .state
        .iter()
        .map(|entry| (STATE, entry))
        .chain(export.event_ids.iter().map(|entry| (EVENT_ID, entry)));
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    for (tag, (key, value)) in tagged {
        chunk.push(tag);
        for part in [key, value] {
            chunk.extend_from_slice(&(part.len() as u32).to_le_bytes());
            chunk.extend_from_slice(part);
        }
        if chunk.len() >= CHUNK_BYTES {
            chunks.push(std::mem::take(&mut chunk));
        }
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// Adds a chunk's entries to `export`; `None` when the chunk is cut short.
fn unpack(mut chunk: &[u8], export: &mut ShardExport) -> Option<()> {
    fn part(rest: &mut &[u8]) -> Option<Vec<u8>> {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let value = tail.get(..len)?.to_vec();
        *rest = &tail[len..];
        Some(value)
    }
    while let Some((&tag, tail)) = chunk.split_first() {
        chunk = tail;
        let entry = (part(&mut chunk)?, part(&mut chunk)?);
        match tag {
            STATE => export.state.push(entry),
            EVENT_ID => export.event_ids.push(entry),
            _ => return None,
        }
    }
    Some(())
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
    let marker = |kind: &'static str, begin: Option<i64>| {
        let payload = serde_json::to_vec(&Marker {
            epoch,
            next_seq: export.next_seq,
            entries,
            begin,
        })
        .expect("a marker serializes");
        (kind, kind.as_bytes().to_vec(), payload)
    };
    let begin = send(producer, topic, shard, vec![marker("begin", None)]).await?;
    let chunks: Vec<_> = chunks(export)
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| {
            (
                "chunk",
                [b"c".as_slice(), &(index as u32).to_be_bytes()].concat(),
                chunk,
            )
        })
        .collect();
    for window in chunks.chunks(PRODUCE_WINDOW) {
        send(producer, topic, shard, window.to_vec()).await?;
    }
    send(producer, topic, shard, vec![marker("released", begin)]).await?;
    Ok(())
}

/// Produces `messages` to partition `shard` at once; answers the first one's offset.
async fn send(
    producer: &Producer,
    topic: &str,
    shard: ShardId,
    messages: Vec<(&'static str, Vec<u8>, Vec<u8>)>,
) -> Result<Option<i64>, StreamError> {
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
    let mut first = None;
    for sent in join_all(sends).await {
        first = first.or(Some(sent?));
    }
    Ok(first)
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
    // Read from the partition's last message on. A node that looks before the hand-off
    // is written (the usual case: both nodes follow the same topology) reads it as it
    // comes; one that finds its `released` marker already written reads it again from
    // the `begin` the marker names, once.
    let mut reader = Reader::new(config, shard, Offset::OffsetTail(1))?;
    let mut export: Option<ShardExport> = None;
    let mut reread_from = None;
    loop {
        let (kind, _, payload) = reader.next().await;
        match kind.as_slice() {
            b"begin" | b"released" => {
                let Ok(marker) = serde_json::from_slice::<Marker>(&payload) else {
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
                    if reread_from != Some(marker.begin) {
                        reread_from = Some(marker.begin);
                        reader.seek(marker.begin.map_or(Offset::Beginning, Offset::Offset))?;
                    }
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
            b"chunk" => {
                let Some(export) = export.as_mut() else {
                    continue;
                };
                if unpack(&payload, export).is_none() {
                    return Err(StreamError::Setup(format!(
                        "a chunk of the hand-off of shard {shard} at epoch {epoch} is cut short"
                    )));
                }
                progress(export.state.len() + export.event_ids.len());
            }
            _ => {}
        }
    }
}

/// Reads one changelog partition from an offset on, message by message.
struct Reader {
    consumer: StreamConsumer,
    topic: String,
    shard: ShardId,
}

impl Reader {
    fn new(config: &KafkaConfig, shard: ShardId, from: Offset) -> Result<Reader, StreamError> {
        let consumer: StreamConsumer = client_config(config)
            .set("group.id", format!("{}-restore", config.group_id))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()?;
        let reader = Reader {
            consumer,
            topic: config.changelog_topic.clone(),
            shard,
        };
        reader.seek(from)?;
        Ok(reader)
    }

    /// Reads on from `from` (messages fetched before are dropped).
    fn seek(&self, from: Offset) -> Result<(), StreamError> {
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(&self.topic, i32::from(self.shard), from)?;
        Ok(self.consumer.assign(&assignment)?)
    }

    /// The next message's kind, key and payload, retrying while the broker fails.
    async fn next(&mut self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        loop {
            match self.consumer.recv().await {
                Ok(message) => {
                    let kind = message
                        .headers()
                        .and_then(|headers| headers.iter().find(|header| header.key == KIND_HEADER))
                        .and_then(|header| header.value)
                        .unwrap_or_default();
                    let key = message.key().unwrap_or_default();
                    let payload = message.payload().unwrap_or_default();
                    return (kind.to_vec(), key.to_vec(), payload.to_vec());
                }
                Err(error) => {
                    tracing::warn!(%error, shard = self.shard, "reading the changelog failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_packs_into_chunks_and_unpacks_whole() {
        let export = ShardExport {
            state: (0..5_000u32)
                .map(|n| (format!("user/{n}").into_bytes(), vec![n as u8; 100]))
                .collect(),
            event_ids: (0..3_000u32).map(|n| (n.to_be_bytes().to_vec(), vec![])).collect(),
            next_seq: 7,
        };
        let packed = chunks(&export);
        assert!(packed.len() > 1, "{} chunks", packed.len());
        assert!(packed.iter().all(|chunk| chunk.len() < CHUNK_BYTES + 200));
        let mut unpacked = ShardExport::default();
        for chunk in &packed {
            unpack(chunk, &mut unpacked).expect("a whole chunk");
        }
        assert_eq!(unpacked.state, export.state);
        assert_eq!(unpacked.event_ids, export.event_ids);
        assert!(unpack(&packed[0][..packed[0].len() - 1], &mut ShardExport::default()).is_none());
    }
}
