//! The input-topic consumer of a node: manual assignment of its shards'
//! partitions, resuming from the offsets stored with each shard's state.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{
    client_config, EventProducer, SharedStats, StreamError, ERROR_HEADER, FORMAT_HEADER, INTERNAL_FORMAT,
    INTERNAL_PREFIX,
};
use crate::config::{EventFormat, KafkaConfig};
use crate::domain::event::{decode_engagement, decode_plain_v1, decode_v1, Event};
use crate::engine::Engine;
use crate::topology::{shard_for, ShardId};

/// How often the consumer lag of each partition is measured.
const LAG_INTERVAL: Duration = Duration::from_secs(2);

/// Pause before retrying after the engine or the broker refused.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Creates the consumer and assigns this node's partitions (failing when a topic
/// is missing or has the wrong partition count), then applies messages in a task
/// until `shutdown` is cancelled: the task then ends between two batches, once the
/// batch in hand is applied and its offsets stored. In a cluster, an event keyed to
/// another node's shard is produced again to its shard's partition by `reroute` (the
/// REST topic's producer).
pub async fn start_consumer(
    config: KafkaConfig,
    shards: Vec<ShardId>,
    shard_count: u16,
    engine: Arc<Engine>,
    stats: SharedStats,
    reroute: Option<EventProducer>,
    shutdown: CancellationToken,
) -> Result<(tokio::task::JoinHandle<()>, ConsumerControl), StreamError> {
    let consumer: ShardConsumer = client_config(&config)
        .set("group.id", &config.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", config.fetch_wait_ms.to_string())
        .set("statistics.interval.ms", LAG_INTERVAL.as_millis().to_string())
        .create_with_context(PartitionEnds::default())?;
    let dead_letters = EventProducer::new(&config, &config.dead_letter_topic, shard_count)?;
    let mut assignment = TopicPartitionList::new();
    for input in &config.inputs {
        check_partitions(&consumer, &input.topic, shard_count).await?;
    }
    for &shard in &shards {
        add_partitions(&mut assignment, &config, &engine, &stats, shard)?;
    }
    consumer.assign(&assignment)?;
    tracing::info!(partitions = assignment.count(), "kafka consumer assigned");
    let consumer = Arc::new(consumer);
    let lag = watch_lag(consumer.clone(), stats.clone(), shutdown.clone());
    let (commands, control) = mpsc::channel(16);
    let work = consume(
        consumer,
        dead_letters,
        config,
        Placement {
            local: shards,
            shard_count,
        },
        engine,
        stats,
        reroute,
        control,
        shutdown,
    );
    let task = tokio::spawn(async move {
        tokio::join!(work, lag);
    });
    Ok((task, ConsumerControl { commands }))
}

/// Adds shard `shard`'s partition of every input topic to `assignment`, from the offset
/// stored with the shard's state (a partition never read: from its beginning).
fn add_partitions(
    assignment: &mut TopicPartitionList,
    config: &KafkaConfig,
    engine: &Engine,
    stats: &SharedStats,
    shard: ShardId,
) -> Result<(), StreamError> {
    for input in &config.inputs {
        // A stored offset that cannot be read stops the start: rewinding would
        // consume the partition again from its beginning.
        let stored = engine.stream_offset(shard, &input.topic).map_err(|error| {
            StreamError::Setup(format!(
                "reading the stored offset of {} for shard {shard}: {error}",
                input.topic
            ))
        })?;
        let offset = match stored {
            Some(next) => Offset::Offset(next),
            // A partition never read starts at its beginning: nothing is skipped.
            None => Offset::Beginning,
        };
        stats
            .positions
            .lock()
            .insert((input.topic.clone(), i32::from(shard)), stored.unwrap_or(0));
        assignment.add_partition_offset(&input.topic, i32::from(shard), offset)?;
    }
    Ok(())
}

/// Moves shards in and out of a running consumer (live shard moves).
#[derive(Clone)]
pub struct ConsumerControl {
    commands: mpsc::Sender<Command>,
}

enum Command {
    /// Stop consuming the shard's partitions once the batch in hand is applied and its
    /// offsets stored.
    Release(ShardId, oneshot::Sender<()>),
    /// Consume the shard's partitions from the offsets stored with its state.
    Acquire(ShardId, oneshot::Sender<Result<(), StreamError>>),
}

impl ConsumerControl {
    /// Returns once nothing more of `shard` is consumed here and its offsets are stored.
    pub async fn release(&self, shard: ShardId) {
        let (done, released) = oneshot::channel();
        if self.commands.send(Command::Release(shard, done)).await.is_ok() {
            let _ = released.await;
        }
    }

    /// Starts consuming `shard` from the offsets stored with its state.
    pub async fn acquire(&self, shard: ShardId) -> Result<(), StreamError> {
        let (done, acquired) = oneshot::channel();
        self.commands
            .send(Command::Acquire(shard, done))
            .await
            .map_err(|_| StreamError::Setup("the consumer stopped".into()))?;
        acquired
            .await
            .map_err(|_| StreamError::Setup("the consumer stopped".into()))?
    }
}

/// Which shards are this node's.
struct Placement {
    local: Vec<ShardId>,
    shard_count: u16,
}

impl Placement {
    fn is_local(&self, shard: ShardId) -> bool {
        self.local.contains(&shard)
    }
}

async fn consume(
    consumer: Arc<ShardConsumer>,
    dead_letters: EventProducer,
    config: KafkaConfig,
    placement: Placement,
    engine: Arc<Engine>,
    stats: SharedStats,
    reroute_to: Option<EventProducer>,
    mut commands: mpsc::Receiver<Command>,
    shutdown: CancellationToken,
) {
    let mut placement = placement;
    let shard_count = placement.shard_count;
    let formats: HashMap<String, EventFormat> = config.inputs.iter().map(|i| (i.topic.clone(), i.format)).collect();
    let batch_wait = Duration::from_millis(config.batch_wait_ms);
    let mut offsets_in_flight = None;
    // Without moves (one node), nobody sends commands: consume on.
    let mut controlled = true;
    loop {
        let first = tokio::select! {
            // Between two batches: the one before is applied, its offsets on their way.
            _ = shutdown.cancelled() => break,
            command = commands.recv(), if controlled => {
                let Some(command) = command else {
                    controlled = false;
                    continue;
                };
                // The batch before is applied; its offsets must be stored before a
                // released shard's offsets are handed on.
                if let Some(previous) = offsets_in_flight.take() {
                    let _ = previous.await;
                }
                obey(command, &consumer, &config, &engine, &stats, &mut placement);
                continue;
            }
            first = consumer.recv() => first,
        };
        let batch = next_batch(first, &consumer, config.max_batch, batch_wait, &stats).await;
        if batch.is_empty() {
            continue;
        }
        stats.consumed.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let format_of =
            |message: &BorrowedMessage<'_>| formats.get(message.topic()).copied().unwrap_or(EventFormat::Event);
        let mut events = Vec::with_capacity(batch.len());
        // The message each of `events` was decoded from.
        let mut sources = Vec::with_capacity(batch.len());
        let mut reroute = Vec::new();
        let mut next_offsets: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for message in &batch {
            let partition = message.partition() as ShardId;
            // Fetched before its shard was released: its new owner reads it.
            if !placement.is_local(partition) {
                continue;
            }
            advance(&mut next_offsets, message);
            match decode(message, format_of(message)) {
                Ok(event) => {
                    let shard = shard_for(event.routing_key().as_bytes(), shard_count);
                    if shard != partition {
                        stats.forwarded.fetch_add(1, Ordering::Relaxed);
                    }
                    if placement.is_local(shard) {
                        events.push(event);
                        sources.push(message);
                    } else {
                        reroute.push(event);
                    }
                }
                Err(reason) => dead_letter(&dead_letters, message, &reason, &stats).await,
            }
        }
        // The same bytes through the same decoder: only a time the event left out (the
        // time of decoding) can differ.
        let decode_again = |index: usize| {
            let message = sources[index];
            decode(message, format_of(message)).expect("a message decodes as it did before")
        };
        apply(&engine, events, decode_again, &stats).await;
        if let Some(producer) = &reroute_to {
            produce_again(producer, reroute).await;
        }
        // The events are durable; their offsets follow through the same ordered commit
        // queue while the next batch is fetched.
        // One batch's offsets at a time, so stored and group offsets only move forward.
        if let Some(previous) = offsets_in_flight.take() {
            let _ = previous.await;
        }
        stats
            .positions
            .lock()
            .extend(next_offsets.iter().map(|(partition, next)| (partition.clone(), *next)));
        let engine = engine.clone();
        offsets_in_flight = Some(tokio::spawn(async move {
            record_offsets(&engine, &next_offsets).await;
        }));
    }
    // The last batch's offsets are stored before the engine is told to stop.
    if let Some(last) = offsets_in_flight.take() {
        let _ = last.await;
    }
    tracing::info!("kafka consumer stopped");
}

/// Moves a partition's next offset past `message`; a map of a few partitions, searched
/// without allocating the topic's name for each message.
fn advance(next_offsets: &mut BTreeMap<(String, i32), i64>, message: &BorrowedMessage<'_>) {
    let (topic, partition, next) = (message.topic(), message.partition(), message.offset() + 1);
    match next_offsets
        .iter_mut()
        .find(|((t, p), _)| t == topic && *p == partition)
    {
        Some((_, offset)) => *offset = next,
        None => {
            next_offsets.insert((topic.to_owned(), partition), next);
        }
    }
}

/// The consumer of this node's partitions, with the partitions' ends as its
/// statistics last reported them.
type ShardConsumer = StreamConsumer<PartitionEnds>;

/// The end (high watermark) of each partition, as the broker reported it in its fetch
/// answers and librdkafka in its statistics every [`LAG_INTERVAL`]: lag is measured
/// without a request of its own to the broker, which one that opens a database
/// connection per request (tansu) spent much of a core answering.
#[derive(Default)]
struct PartitionEnds {
    ends: parking_lot::Mutex<BTreeMap<(String, i32), i64>>,
}

impl ClientContext for PartitionEnds {
    fn stats(&self, statistics: Statistics) {
        let mut ends = self.ends.lock();
        for (topic, partitions) in statistics.topics {
            for (partition, state) in partitions.partitions {
                if partition >= 0 && state.hi_offset >= 0 {
                    ends.insert((topic.clone(), partition), state.hi_offset);
                }
            }
        }
    }
}

impl ConsumerContext for PartitionEnds {}

/// Measures, every [`LAG_INTERVAL`], how far each partition of this node is behind
/// its end (see [`PartitionEnds`]); a partition whose end is not known yet keeps its
/// last figure. Also mirrors the positions into the consumer group when they moved
/// (for tooling: `cluster status` reads the group's lag), at this pace rather than
/// per batch, for the same reason.
async fn watch_lag(consumer: Arc<ShardConsumer>, stats: SharedStats, shutdown: CancellationToken) {
    let mut committed = Vec::new();
    let mut interval = tokio::time::interval(LAG_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let positions: Vec<((String, i32), i64)> = stats
            .positions
            .lock()
            .iter()
            .map(|(partition, next)| (partition.clone(), *next))
            .collect();
        if positions != committed {
            commit_to_group(&consumer, &positions);
            committed = positions.clone();
        }
        let ends = consumer.context().ends.lock().clone();
        let measured: Vec<_> = positions
            .into_iter()
            .filter_map(|(partition, next)| {
                let end = *ends.get(&partition)?;
                Some((partition, (end - next).max(0)))
            })
            .collect();
        stats.lag.lock().extend(measured);
    }
}

/// Carries out a move's command between two batches.
fn obey(
    command: Command,
    consumer: &ShardConsumer,
    config: &KafkaConfig,
    engine: &Engine,
    stats: &SharedStats,
    placement: &mut Placement,
) {
    match command {
        Command::Release(shard, done) if !placement.is_local(shard) => {
            let _ = done.send(());
        }
        Command::Release(shard, done) => {
            placement.local.retain(|&local| local != shard);
            let mut partitions = TopicPartitionList::new();
            for input in &config.inputs {
                partitions.add_partition(&input.topic, i32::from(shard));
                stats.positions.lock().remove(&(input.topic.clone(), i32::from(shard)));
                stats.lag.lock().remove(&(input.topic.clone(), i32::from(shard)));
                // Another node applies it now: this node's series says so rather than freeze.
                crate::metrics::kafka_lag(&input.topic, i32::from(shard), 0);
            }
            if let Err(error) = consumer.incremental_unassign(&partitions) {
                tracing::warn!(%error, shard, "unassigning a released shard's partitions failed; its messages are skipped");
            }
            let _ = done.send(());
        }
        Command::Acquire(shard, done) => {
            let mut partitions = TopicPartitionList::new();
            let acquired = add_partitions(&mut partitions, config, engine, stats, shard)
                .and_then(|()| Ok(consumer.incremental_assign(&partitions)?));
            if acquired.is_ok() && !placement.is_local(shard) {
                placement.local.push(shard);
            }
            let _ = done.send(acquired);
        }
    }
}

/// With the first message (or the error) received, takes what else arrives within `wait`.
async fn next_batch<'c>(
    first: KafkaResult<BorrowedMessage<'c>>,
    consumer: &'c ShardConsumer,
    max: usize,
    wait: Duration,
    stats: &SharedStats,
) -> Vec<BorrowedMessage<'c>> {
    let mut batch = Vec::new();
    match first {
        Ok(message) => batch.push(message),
        Err(error) => {
            stats.consume_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "kafka consume failed; retrying");
            tokio::time::sleep(RETRY_PAUSE).await;
            return batch;
        }
    }
    while batch.len() < max {
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(message)) => batch.push(message),
            Ok(Err(error)) => {
                stats.consume_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "kafka consume failed");
                break;
            }
            Err(_) => break,
        }
    }
    batch
}

/// Decodes a message: rankstream's own encoding (REST events), or the topic's format.
/// A message without an `id` gets one from its position, so a re-delivery is
/// recognised as the same event.
pub(super) fn decode(message: &impl Message, format: EventFormat) -> Result<Event, String> {
    let payload = message.payload().ok_or("the message has no payload")?;
    let internal = match payload.strip_prefix(INTERNAL_PREFIX) {
        Some(event) => Some(event),
        None => message
            .headers()
            .is_some_and(|headers| {
                headers
                    .iter()
                    .any(|h| h.key == FORMAT_HEADER && h.value == Some(INTERNAL_FORMAT.as_bytes()))
            })
            .then_some(payload),
    };
    if let Some(event) = internal {
        return serde_json::from_slice(event).map_err(|error| format!("undecodable internal event: {error}"));
    }
    let position_id = || format!("kafka:{}:{}:{}", message.topic(), message.partition(), message.offset());
    let now = chrono::Utc::now().timestamp_millis();
    if format == EventFormat::Event {
        if let Some(event) = decode_plain_v1(payload, now, position_id) {
            return Ok(event);
        }
    }
    let value = serde_json::from_slice(payload).map_err(|error| format!("not JSON: {error}"))?;
    let decoded = match format {
        EventFormat::Event => decode_v1(value, now, position_id),
        EventFormat::Engagement => decode_engagement(value, now, position_id),
    };
    decoded.map_err(|invalid| invalid.0)
}

/// Writes a malformed message to the dead-letter topic, retrying until the broker
/// takes it: its offset is recorded only after, so it is never silently skipped.
async fn dead_letter(producer: &EventProducer, message: &impl Message, reason: &str, stats: &SharedStats) {
    let partition = message.partition().to_string();
    let offset = message.offset().to_string();
    tracing::warn!(
        topic = message.topic(),
        partition = message.partition(),
        offset = message.offset(),
        reason,
        "dead-lettering a malformed message"
    );
    loop {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: ERROR_HEADER,
                value: Some(reason),
            })
            .insert(Header {
                key: "rankstream-source-topic",
                value: Some(message.topic()),
            })
            .insert(Header {
                key: "rankstream-source-partition",
                value: Some(&partition),
            })
            .insert(Header {
                key: "rankstream-source-offset",
                value: Some(&offset),
            });
        match producer.produce_raw(message.key(), message.payload(), headers).await {
            Ok(()) => break,
            Err(error) => {
                tracing::error!(%error, "dead-letter produce failed; retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
    stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
    crate::metrics::events("kafka", 0, 0, 1);
}

/// Applies events through the REST ingest path, retrying what the engine could not
/// take (a full or stopping shard) until it is durable. The engine takes the events
/// themselves; one to retry is decoded again from its message (`decode_again` of its
/// index in `events`), not kept as a copy of every event for the rare retry.
async fn apply(engine: &Engine, events: Vec<Event>, decode_again: impl Fn(usize) -> Event, stats: &SharedStats) {
    let mut indexes: Vec<usize> = (0..events.len()).collect();
    let mut events = events;
    while !events.is_empty() {
        let results = engine.ingest(events).await;
        let mut retry = Vec::new();
        let (mut applied, mut duplicates) = (0, 0);
        for (&index, result) in indexes.iter().zip(results) {
            match result {
                Ok(true) => duplicates += 1,
                Ok(false) => applied += 1,
                Err(error) => retry.push((index, error)),
            }
        }
        stats.applied.fetch_add(applied as u64, Ordering::Relaxed);
        stats.duplicates.fetch_add(duplicates as u64, Ordering::Relaxed);
        crate::metrics::events("kafka", applied, duplicates, 0);
        events = retry
            .iter()
            .map(|(index, error)| {
                let event = decode_again(*index);
                tracing::warn!(id = %event.id, %error, "event not applied; retrying");
                event
            })
            .collect();
        indexes = retry.into_iter().map(|(index, _)| index).collect();
        if !events.is_empty() {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// Produces events keyed to another node's shard to that shard's partition, retrying
/// until the broker takes them: their offsets here are recorded only after.
async fn produce_again(producer: &EventProducer, events: Vec<Event>) {
    if events.is_empty() {
        return;
    }
    while let Err(error) = producer.produce(&events).await {
        tracing::warn!(%error, "producing events to their owning shard's partition failed; retrying");
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// Durably records the next offsets with the shards' state. Re-reading messages
/// after a failure here is harmless: event ids make it a no-op.
async fn record_offsets(engine: &Engine, next: &BTreeMap<(String, i32), i64>) {
    let offsets = next
        .iter()
        .map(|((topic, partition), offset)| (*partition as ShardId, topic.as_str(), *offset));
    if let Err(error) = engine.store_stream_offsets(offsets).await {
        tracing::error!(%error, "failed to store consumer offsets");
    }
}

/// Mirrors consumed offsets into the consumer group (best effort, for tooling; the
/// offsets of record are stored with each shard's state).
fn commit_to_group(consumer: &ShardConsumer, next: &[((String, i32), i64)]) {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        if list
            .add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .is_err()
        {
            continue;
        }
    }
    if let Err(error) = consumer.commit(&list, CommitMode::Async) {
        tracing::debug!(%error, "group offset commit failed (stored offsets still hold)");
    }
}

/// Refuses a topic whose partition count is not the shard count.
async fn check_partitions(consumer: &ShardConsumer, topic: &str, shards: u16) -> Result<(), StreamError> {
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len());
    if partitions != usize::from(shards) {
        return Err(StreamError::Setup(format!(
            "topic {topic:?} has {partitions} partitions; it needs one per shard ({shards}); create it first"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};
    use serde_json::json;

    use super::*;

    fn message(payload: Vec<u8>, headers: Option<OwnedHeaders>) -> OwnedMessage {
        OwnedMessage::new(
            Some(payload),
            None,
            "events".into(),
            Timestamp::NotAvailable,
            3,
            41,
            headers,
        )
    }

    /// A REST event as the producer writes it, its body in the topic's own format
    /// (which would decode differently: no `ingest_timestamp`, an id from its position).
    fn rest_event() -> Event {
        let value = json!({"type": "click", "uid": "u", "item_id": "i", "click_type": "tile",
                           "original_timestamp": 1_700_000_000_000_i64});
        let mut event = decode_v1(value, 1_700_000_000_500, || "rest-7".into()).expect("a valid click");
        event.ingest_timestamp = 1_700_000_000_123;
        event
    }

    #[test]
    fn the_internal_encoding_is_known_by_its_prefix_and_by_the_older_header() {
        let event = rest_event();
        let mut prefixed = INTERNAL_PREFIX.to_vec();
        serde_json::to_writer(&mut prefixed, &event).unwrap();
        assert_eq!(decode(&message(prefixed, None), EventFormat::Event), Ok(event.clone()));

        let headers = OwnedHeaders::new().insert(Header {
            key: FORMAT_HEADER,
            value: Some(INTERNAL_FORMAT),
        });
        let older = message(serde_json::to_vec(&event).unwrap(), Some(headers));
        assert_eq!(decode(&older, EventFormat::Event), Ok(event));
    }

    #[test]
    fn a_producers_json_is_decoded_in_the_topics_format() {
        let body = json!({"type": "click", "uid": "u", "item_id": "i", "click_type": "tile",
                          "original_timestamp": 1_700_000_000_000_i64});
        let decoded = decode(&message(serde_json::to_vec(&body).unwrap(), None), EventFormat::Event).unwrap();
        assert_eq!(decoded.id, "kafka:events:3:41");
        assert!(decode(&message(b"\0rs1 not json".to_vec(), None), EventFormat::Event)
            .unwrap_err()
            .starts_with("undecodable internal event"));
    }
}
