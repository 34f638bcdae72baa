//! Kafka test support (notes/EVENTS_CONTRACT.md, "Kafka"): a tansu broker per test
//! started with `tools/broker.sh`, a `rankstream serve --config FILE` server on the
//! shared harness, a producer and a partition reader.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tempfile::TempDir;

use crate::common::{assert_status, json, owned_port, poll_every, user_state_path, StatusCode, TestServer, Value};

pub const EVENTS_TOPIC: &str = "rankstream-events";
pub const ENGAGEMENT_TOPIC: &str = "rankstream-engagement";
pub const DEAD_LETTER_TOPIC: &str = "rankstream-dead-letter";
pub const SHARDS: u16 = 8;
/// Deadline of every wait on the broker or the server.
pub const WAIT: Duration = Duration::from_secs(20);

fn repo() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

/// Runs `tools/broker.sh ARGS` from the repository root, asserting success.
fn broker_sh(args: &[&str]) {
    let output = Command::new("bash")
        .arg("tools/broker.sh")
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .expect("run tools/broker.sh");
    assert!(
        output.status.success(),
        "tools/broker.sh {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Calls `probe` every 50 ms until it returns `Ok`, failing after [`WAIT`].
#[track_caller]
pub fn wait_for<T>(what: &str, probe: impl FnMut() -> Result<T, String>) -> T {
    poll_every(Duration::from_millis(50), WAIT, what, probe)
}

/// A tansu broker on a free port with the three rankstream topics; stopped on drop.
pub struct Broker {
    pub port: u16,
    dir: TempDir,
}

impl Broker {
    /// A broker with the three topics of a one-node server (8 shards).
    pub fn start() -> Broker {
        let broker = Broker::start_empty();
        let port = broker.port.to_string();
        for (topic, partitions) in [(EVENTS_TOPIC, "8"), (ENGAGEMENT_TOPIC, "8"), (DEAD_LETTER_TOPIC, "1")] {
            broker_sh(&["topic", topic, partitions, &port]);
        }
        broker
    }

    /// A broker without topics (`rankstream cluster init` makes a cluster's).
    pub fn start_empty() -> Broker {
        // A paused broker is started again on its port: the test owns it.
        let port = owned_port();
        // The broker's sqlite file lives in memory where the machine has a tmpfs: an
        // fsync per produce on a shared disk made the broker, not rankstream, what
        // the cluster tests measured. A broker restart keeps it (the process goes,
        // the file stays).
        let shm = std::path::Path::new("/dev/shm");
        let mut builder = tempfile::Builder::new();
        builder.prefix("rankstream-broker-");
        let dir = match shm.is_dir() {
            true => builder.tempdir_in(shm),
            false => builder.tempdir(),
        }
        .expect("broker dir");
        let broker = Broker { port, dir };
        broker_sh(&["start", &port.to_string(), broker.dir_str()]);
        broker
    }

    /// Stops the broker (an outage); [`Broker::resume`] starts it again on its data.
    pub fn pause(&self) {
        broker_sh(&["stop", self.dir_str()]);
    }

    pub fn resume(&self) {
        broker_sh(&["start", &self.port.to_string(), self.dir_str()]);
    }

    fn dir_str(&self) -> &str {
        self.dir.path().to_str().expect("utf-8 temp dir")
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn producer(&self) -> Producer {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .create()
            .expect("create producer");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        Producer { producer, runtime }
    }

    /// Every message of `topic`/`partition` from the beginning, once the partition
    /// holds at least `at_least`; reads up to the high watermark seen at that point.
    pub fn read_partition(&self, topic: &str, partition: i32, at_least: i64) -> Vec<OwnedMessage> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("group.id", format!("test-reader-{}-{}", std::process::id(), unique()))
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let high = wait_for(
            &format!("{topic}/{partition} to hold {at_least} messages"),
            || match consumer.fetch_watermarks(topic, partition, Duration::from_secs(5)) {
                Ok((_, high)) if high >= at_least => Ok(high),
                other => Err(format!("{other:?}")),
            },
        );
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .unwrap();
        consumer.assign(&assignment).expect("assign");
        let mut messages = Vec::new();
        let deadline = Instant::now() + WAIT;
        while messages.len() < high as usize {
            assert!(
                Instant::now() < deadline,
                "read {} of {high} messages of {topic}/{partition} within {WAIT:?}",
                messages.len()
            );
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => messages.push(message.detach()),
                Some(Err(error)) => panic!("consume {topic}/{partition}: {error}"),
                None => {}
            }
        }
        messages
    }

    /// The offset consumer group `group` committed for `topic`/`partition`, if any.
    pub fn committed_offset(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("create consumer");
        let mut list = TopicPartitionList::new();
        list.add_partition(topic, partition);
        let committed = consumer.committed_offsets(list, Duration::from_secs(5)).ok()?;
        match committed.find_partition(topic, partition)?.offset() {
            Offset::Offset(offset) => Some(offset),
            _ => None,
        }
    }

    /// The `[kafka]` section of a server config for this broker.
    pub fn server_config(&self) -> String {
        format!("[kafka]\nenabled = true\nbrokers = \"{}\"\n", self.bootstrap())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args(["tools/broker.sh", "stop", self.dir_str()])
            .current_dir(repo())
            .status();
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A `FutureProducer` driven from synchronous tests.
pub struct Producer {
    producer: FutureProducer,
    runtime: tokio::runtime::Runtime,
}

impl Producer {
    /// Produces one message (to `partition`, else the murmur2 partitioner's choice)
    /// and returns its `(partition, offset)` once acknowledged.
    pub fn send(&self, topic: &str, key: &str, payload: &[u8], partition: Option<i32>) -> (i32, i64) {
        let mut record = FutureRecord::to(topic).key(key).payload(payload);
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        let delivery = self
            .runtime
            .block_on(self.producer.send(record, Duration::from_secs(10)))
            .unwrap_or_else(|(error, _)| panic!("produce to {topic}: {error}"));
        (delivery.partition, delivery.offset)
    }

    pub fn send_json(&self, topic: &str, key: &str, payload: &Value) -> (i32, i64) {
        self.send(topic, key, &serde_json::to_vec(payload).unwrap(), None)
    }

    /// Produces every `(key, payload)` at once (partitioned by key) and waits until
    /// the broker acknowledged them all; a send the broker fails is retried (as a
    /// producer with retries would), up to five rounds.
    pub fn send_all_json(&self, topic: &str, messages: &[(String, Value)]) {
        let mut pending: Vec<(&str, Vec<u8>)> = messages
            .iter()
            .map(|(key, payload)| (key.as_str(), serde_json::to_vec(payload).unwrap()))
            .collect();
        for round in 1.. {
            let sends = pending.iter().map(|(key, payload)| {
                self.producer.send(
                    FutureRecord::to(topic).key(*key).payload(payload),
                    Duration::from_secs(10),
                )
            });
            let deliveries = self.runtime.block_on(futures::future::join_all(sends));
            let mut failed = Vec::new();
            for (message, delivery) in pending.into_iter().zip(deliveries) {
                if let Err((error, _)) = delivery {
                    assert!(round < 5, "produce to {topic}: {error} (after {round} tries)");
                    failed.push(message);
                }
            }
            if failed.is_empty() {
                return;
            }
            pending = failed;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A message header's value as a string, if present.
pub fn header(message: &OwnedMessage, name: &str) -> Option<String> {
    let headers: &OwnedHeaders = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == name)
        .map(|h| String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned())
}

/// `rankstream serve --config FILE` with Kafka on: the shared harness plus the
/// config file, which lives as long as the server and is reused by `restart`.
pub struct KafkaServer {
    server: TestServer,
    _config_dir: TempDir,
}

impl Deref for KafkaServer {
    type Target = TestServer;
    fn deref(&self) -> &TestServer {
        &self.server
    }
}

impl DerefMut for KafkaServer {
    fn deref_mut(&mut self) -> &mut TestServer {
        &mut self.server
    }
}

impl KafkaServer {
    pub fn start(config: &str) -> KafkaServer {
        let config_dir = tempfile::Builder::new()
            .prefix("rankstream-kafka-config-")
            .tempdir()
            .expect("config dir");
        let config_file = config_dir.path().join("kafka.toml");
        std::fs::write(&config_file, config).expect("write config file");
        let config_arg = config_file.to_str().expect("utf-8 temp path");
        let server = TestServer::start_with(&[], &["--config", config_arg]);
        KafkaServer {
            server,
            _config_dir: config_dir,
        }
    }

    /// GET with the admin key.
    pub fn get(&self, path: &str) -> (StatusCode, Value) {
        self.server.admin_get(path)
    }

    /// POST with the admin key.
    pub fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.server.admin_post(path, body.clone())
    }

    /// The `kafka` object of `/v1/admin/stats`.
    #[track_caller]
    pub fn stats(&self) -> Value {
        let reply = self.get("/v1/admin/stats");
        let stats = assert_status(&reply, 200, "stats")["kafka"].clone();
        assert!(stats.is_object(), "kafka stats missing: {}", reply.1);
        stats
    }

    /// A counter of the stream stats.
    #[track_caller]
    pub fn stat(&self, name: &str) -> u64 {
        let stats = self.stats();
        stats[name]
            .as_u64()
            .unwrap_or_else(|| panic!("stats.kafka.{name} is not a count: {stats}"))
    }

    /// The user's state, or `None` on 404.
    #[track_caller]
    pub fn user_state(&self, uid: &str) -> Option<Value> {
        let reply = self.get(&user_state_path(uid));
        if reply.0 == StatusCode::NOT_FOUND {
            return None;
        }
        let state = assert_status(&reply, 200, &format!("user {uid}")).clone();
        assert_eq!(state["uid"], json!(uid), "{state}");
        Some(state)
    }

    /// Polls the user's state until its `event_count` is `count`; returns the state.
    #[track_caller]
    pub fn wait_for_count(&self, uid: &str, count: u64) -> Value {
        wait_for(&format!("user {uid} event_count {count}"), || {
            let state = self.user_state(uid);
            match &state {
                Some(state) if state["event_count"] == count => Ok(state.clone()),
                _ => Err(format!("{state:?}; stats {}", self.stats())),
            }
        })
    }
}
