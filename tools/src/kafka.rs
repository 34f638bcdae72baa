//! Kafka for the tools: a tansu broker of the tool's own ([`Broker`], through
//! `tools/broker.sh`), a producer and a consumer set up like the server's, and the
//! broker's own produce -> consume time ([`kafka_floor`]) that Kafka freshness is
//! compared to in the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rankstream::topology::shard_for;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::stats::{brief_summary, elapsed_ms};

/// Messages produced before the floor is measured.
pub const KAFKA_WARMUP: usize = 20;
/// How long the floor consumer may take to receive one message.
const FLOOR_DEADLINE: Duration = Duration::from_secs(10);

/// A tansu broker this tool started, in a temp dir that also holds the server's config;
/// stopped and its dir removed when dropped.
pub struct Broker {
    script: PathBuf,
    /// Holds the broker's data (`broker/`) and whatever the tool writes beside it.
    pub dir: PathBuf,
    port: u16,
}

impl Broker {
    pub fn start(script: &Path) -> Result<Broker> {
        let dir = std::env::temp_dir().join(format!("rankstream-bench-broker-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let broker = Broker {
            script: script.to_owned(),
            dir,
            port,
        };
        broker.script(&["start", &port.to_string(), &broker.dir.join("broker").to_string_lossy()])?;
        Ok(broker)
    }

    pub fn script(&self, args: &[&str]) -> Result<()> {
        let status = std::process::Command::new("bash")
            .arg(&self.script)
            .args(args)
            .status()?;
        ensure!(status.success(), "{} {args:?}: {status}", self.script.display());
        Ok(())
    }

    pub fn topic(&self, name: &str, partitions: u16) -> Result<()> {
        self.script(&["topic", name, &partitions.to_string(), &self.port.to_string()])
    }

    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let broker_dir = self.dir.join("broker");
        let pid = std::fs::read_to_string(broker_dir.join("tansu.pid")).unwrap_or_default();
        self.script(&["stop", &broker_dir.to_string_lossy()]).ok();
        // Wait until it is gone (or a zombie) before removing its files.
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

pub fn producer(brokers: &str, linger_ms: &str) -> Result<FutureProducer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("partitioner", "murmur2_random");
    Ok(config
        .set("linger.ms", linger_ms)
        .set("queue.buffering.max.messages", "1000000")
        .create()?)
}

/// A bare consumer set up like the server's, assigned to `partitions` of `topic` from their start.
pub fn consumer(brokers: &str, topics: &[&str], partitions: std::ops::Range<i32>) -> Result<StreamConsumer> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("bench-{}", uuid::Uuid::now_v7().simple()))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "10")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for (topic, partition) in topics
        .iter()
        .flat_map(|topic| partitions.clone().map(move |p| (topic, p)))
    {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Produces one keyed message, waits for its ack (acks=all) and checks that it landed on
/// the key's shard of `shards` when `partition` is None (murmur2); returns the ack time in ms.
pub async fn produce(
    producer: &FutureProducer,
    (topic, shards): (&str, u16),
    partition: Option<i32>,
    key: &str,
    payload: &str,
) -> Result<f64> {
    let mut record = FutureRecord::to(topic).key(key).payload(payload);
    record.partition = partition;
    let started = Instant::now();
    let delivery = producer
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(error, _)| error)?;
    let expected = partition.unwrap_or_else(|| i32::from(shard_for(key.as_bytes(), shards)));
    ensure!(
        delivery.partition == expected,
        "{key} went to partition {}, not {expected}",
        delivery.partition
    );
    Ok(elapsed_ms(started))
}

/// The broker's own produce -> consume time: `messages` (after [`KAFKA_WARMUP`]
/// unmeasured ones) produced one at a time to partition 0 of `floor_topic`, each timed
/// until a bare consumer assigned to `partitions` of `topics` receives it. Returns the
/// latencies and the produce acks, in ms.
pub async fn kafka_floor(
    brokers: &str,
    messages: usize,
    floor_topic: &str,
    topics: &[&str],
    partitions: std::ops::Range<i32>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let producer = producer(brokers, "0")?;
    let consumer = consumer(brokers, topics, partitions.clone())?;
    let (mut floor, mut acks) = (Vec::new(), Vec::new());
    let (received_tx, mut received) = tokio::sync::mpsc::unbounded_channel();
    let receiver = tokio::spawn(async move {
        while let Ok(message) = consumer.recv().await {
            let payload = message.payload().map(|payload| payload.to_vec());
            if received_tx.send((payload, Instant::now())).is_err() {
                break;
            }
        }
    });
    // Payloads unique to this call: an earlier call's messages on bench-floor are skipped.
    let run = uuid::Uuid::now_v7().simple().to_string();
    for seq in 0..KAFKA_WARMUP + messages {
        let payload = format!("{run}:{seq}");
        let started = Instant::now();
        let ack = produce(&producer, (floor_topic, 1), Some(0), "floor", &payload).await?;
        let at = loop {
            match tokio::time::timeout(FLOOR_DEADLINE, received.recv()).await {
                Ok(Some((got, at))) if got.as_deref() == Some(payload.as_bytes()) => break at,
                Ok(Some(_)) => continue,
                _ => bail!("the floor consumer did not receive message {seq} (or failed)"),
            }
        };
        if seq >= KAFKA_WARMUP {
            floor.push((at - started).as_secs_f64() * 1000.0);
            acks.push(ack);
        }
    }
    receiver.abort();
    let assigned = topics.len() * partitions.len();
    println!(
        "Kafka floor, consumer on {assigned} partition(s), {messages} messages: produce -> consumed {}",
        brief_summary(&floor)
    );
    Ok((floor, acks))
}
