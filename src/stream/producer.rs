//! Produces events to Kafka with acks=all, each to the partition of its routing
//! key's shard (murmur2, as Kafka's Java default partitioner would choose).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::join_all;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message, OwnedHeaders, ToBytes};
use rdkafka::producer::{BaseProducer, BaseRecord, FutureRecord, ProducerContext};

use super::{client_config, StreamError, INTERNAL_PREFIX};
use crate::config::KafkaConfig;
use crate::domain::event::Event;
use crate::topology::shard_for;

/// How long a produce may wait for room in the producer's queue.
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the broker has to acknowledge a message (`message.timeout.ms`).
const DELIVERY_TIMEOUT_MS: &str = "5000";
/// How long the broker has to answer one produce request (`request.timeout.ms`).
const REQUEST_TIMEOUT_MS: &str = "4000";
/// The most a send waits in all. librdkafka's own timeouts above usually fail it
/// sooner, but a message caught in flight when the broker dies has been seen to wait
/// past a REST request's 10 s deadline (408 instead of 503).
const SEND_DEADLINE: Duration = Duration::from_secs(7);
/// How long one poll of the producer's events waits for them. Acknowledgements are
/// served as they arrive, whatever this is; it is how often the polling thread checks
/// that it should stop. rdkafka's own polling thread waits 100 ms and, since each poll
/// also spins through its last millisecond, kept ~1% of a core busy per producer, idle.
const POLL_WINDOW: Duration = Duration::from_secs(1);
/// How long a send waits before it tries again when the producer's queue is full.
const QUEUE_FULL_RETRY: Duration = Duration::from_millis(100);

/// An acks=all producer, ordered per partition (one request in flight per broker).
///
/// Not idempotent: tansu 0.6 (the broker the project tests with) panics on a produce
/// of an idempotent producer that outlived a broker restart, and then serves nothing.
/// A retried send may therefore store a message twice: the owning shard applies an
/// event once by its id and a catalog write is an upsert, so state does not change;
/// the other nodes' learners (which read partitions by offset) count such a copy twice.
pub struct Producer {
    producer: Arc<BaseProducer<Acknowledgements>>,
    /// Tells the polling thread to stop (within [`POLL_WINDOW`]) when this is dropped.
    stop: Arc<AtomicBool>,
}

/// What a send waits for: the partition's offset of its message, or why it failed.
type Acknowledgement = oneshot::Sender<Result<i64, KafkaError>>;

/// Hands each delivery report to the send that waits for it.
struct Acknowledgements;

impl ClientContext for Acknowledgements {}

impl ProducerContext for Acknowledgements {
    type DeliveryOpaque = Box<Acknowledgement>;

    fn delivery(&self, result: &DeliveryResult<'_>, acknowledgement: Box<Acknowledgement>) {
        let offset = result
            .as_ref()
            .map(|message| message.offset())
            .map_err(|(error, _)| error.clone());
        // A send that gave up waiting dropped its receiver.
        let _ = acknowledgement.send(offset);
    }
}

impl Producer {
    pub fn new(config: &KafkaConfig, extra: &[(&str, &str)]) -> Result<Producer, StreamError> {
        let mut settings = client_config(config);
        settings
            .set("acks", "all")
            .set("enable.idempotence", "false")
            .set("max.in.flight.requests.per.connection", "1")
            .set("linger.ms", "1")
            // A broker that does not acknowledge within this fails the write (503 to a
            // REST client, who may retry) well inside the request's deadline.
            .set("message.timeout.ms", DELIVERY_TIMEOUT_MS)
            // A request already sent waits for its answer this long (30 s by default),
            // whatever message.timeout.ms says: a broker that hangs must fail it too.
            .set("request.timeout.ms", REQUEST_TIMEOUT_MS);
        for (key, value) in extra {
            settings.set(*key, *value);
        }
        // The operator's `[kafka.client]` settings win over these defaults.
        for (key, value) in &config.client {
            settings.set(key, value);
        }
        let producer: Arc<BaseProducer<Acknowledgements>> = Arc::new(settings.create_with_context(Acknowledgements)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (polled, stopping) = (producer.clone(), stop.clone());
        // Detached: it stops within a poll window of the drop, and the last of the
        // producer goes with it.
        std::thread::Builder::new()
            .name("kafka-producer".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    polled.poll(POLL_WINDOW);
                }
            })
            .map_err(|error| StreamError::Setup(format!("no producer polling thread: {error}")))?;
        Ok(Producer { producer, stop })
    }

    /// Produces one message and waits for the broker's acknowledgement; answers the
    /// message's offset in its partition.
    pub async fn send<K, P>(&self, record: FutureRecord<'_, K, P>) -> Result<i64, KafkaError>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        match tokio::time::timeout(SEND_DEADLINE, self.deliver(record)).await {
            Ok(sent) => sent,
            Err(_) => Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)),
        }
    }

    /// Queues the message, waiting up to [`PRODUCE_TIMEOUT`] for room in a full queue,
    /// then waits for its delivery report.
    async fn deliver<K, P>(&self, record: FutureRecord<'_, K, P>) -> Result<i64, KafkaError>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let (acknowledgement, acknowledged) = oneshot::channel();
        let mut record = BaseRecord {
            topic: record.topic,
            partition: record.partition,
            payload: record.payload,
            key: record.key,
            timestamp: record.timestamp,
            headers: record.headers,
            delivery_opaque: Box::new(acknowledgement),
        };
        let started = Instant::now();
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned))
                    if started.elapsed() < PRODUCE_TIMEOUT =>
                {
                    record = returned;
                    tokio::time::sleep(QUEUE_FULL_RETRY).await;
                }
                Err((error, _)) => return Err(error),
            }
        }
        acknowledged.await.unwrap_or(Err(KafkaError::Canceled))
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A producer of events to one topic.
pub struct EventProducer {
    producer: Producer,
    topic: String,
    shards: u16,
}

impl EventProducer {
    pub fn new(config: &KafkaConfig, topic: &str, shards: u16) -> Result<EventProducer, StreamError> {
        Ok(EventProducer {
            producer: Producer::new(config, &[("partitioner", "murmur2_random")])?,
            topic: topic.to_owned(),
            shards,
        })
    }

    /// Produces every event and waits until the broker acknowledged all of them.
    pub async fn produce(&self, events: &[Event]) -> Result<(), StreamError> {
        let sends = events.iter().map(|event| async move {
            let key = event.routing_key();
            let mut payload = INTERNAL_PREFIX.to_vec();
            serde_json::to_writer(&mut payload, event).expect("events serialize");
            let record = FutureRecord::to(&self.topic)
                .key(key)
                .payload(&payload)
                .partition(i32::from(shard_for(key.as_bytes(), self.shards)));
            self.producer.send(record).await
        });
        for result in join_all(sends).await {
            result?;
        }
        Ok(())
    }

    /// Produces one raw message (dead letters) and waits for the acknowledgement.
    pub async fn produce_raw(
        &self,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: OwnedHeaders,
    ) -> Result<(), StreamError> {
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.topic).headers(headers);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(payload) = payload {
            record = record.payload(payload);
        }
        self.producer.send(record).await?;
        Ok(())
    }
}
