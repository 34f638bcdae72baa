//! Kafka test support (notes/EVENTS_CONTRACT.md, "Kafka"): a tansu broker per test
//! started with `tools/broker.sh`, a `rankstream serve --config FILE` process (the
//! shared harness cannot pass `--config`), a producer and a partition reader.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use reqwest::blocking::Client;
use tempfile::TempDir;

use crate::common::{assert_status, json, poll_every, user_state_path, StatusCode, Value};

pub const EVENTS_TOPIC: &str = "rankstream-events";
pub const ENGAGEMENT_TOPIC: &str = "rankstream-engagement";
pub const DEAD_LETTER_TOPIC: &str = "rankstream-dead-letter";
pub const SHARDS: u16 = 8;
/// Deadline of every wait on the broker or the server.
pub const WAIT: Duration = Duration::from_secs(20);
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
const LISTENING_PREFIX: &str = "rankstream listening on ";

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
    pub fn start() -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("pick a free port")
            .port();
        let dir = tempfile::Builder::new()
            .prefix("rankstream-broker-")
            .tempdir()
            .expect("broker dir");
        let broker = Broker { port, dir };
        let port = port.to_string();
        broker_sh(&["start", &port, broker.dir_str()]);
        for (topic, partitions) in [(EVENTS_TOPIC, "8"), (ENGAGEMENT_TOPIC, "8"), (DEAD_LETTER_TOPIC, "1")] {
            broker_sh(&["topic", topic, partitions, &port]);
        }
        broker
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
}

/// A message header's value as a string, if present.
pub fn header(message: &OwnedMessage, name: &str) -> Option<String> {
    let headers: &OwnedHeaders = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == name)
        .map(|h| String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned())
}

/// `rankstream serve --config FILE --bind 127.0.0.1:0 --data-dir DIR` with Kafka on.
pub struct KafkaServer {
    pub base_url: String,
    pub admin_key: String,
    data_dir: TempDir,
    config_file: PathBuf,
    child: Option<Child>,
    client: Client,
    output: Arc<Mutex<VecDeque<String>>>,
}

impl KafkaServer {
    pub fn start(config: &str) -> KafkaServer {
        let data_dir = tempfile::Builder::new()
            .prefix("rankstream-kafka-test-")
            .tempdir()
            .expect("data dir");
        let config_file = data_dir.path().with_extension("toml");
        std::fs::write(&config_file, config).expect("write config file");
        let mut server = KafkaServer {
            base_url: String::new(),
            admin_key: format!("test-admin-{:x}", unique()),
            data_dir,
            config_file,
            child: None,
            client: Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            output: Arc::default(),
        };
        server.spawn();
        server
    }

    pub fn data_path(&self) -> &Path {
        self.data_dir.path()
    }

    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn spawn(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rankstream"))
            .arg("serve")
            .arg("--config")
            .arg(&self.config_file)
            .args(["--bind", "127.0.0.1:0", "--data-dir"])
            .arg(self.data_dir.path())
            .env("RANKSTREAM_ADMIN_KEY", &self.admin_key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rankstream");
        let (sender, lines) = mpsc::channel();
        drain(child.stdout.take().unwrap(), self.output.clone(), Some(sender));
        drain(child.stderr.take().unwrap(), self.output.clone(), None);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(url) = line.trim().strip_prefix(LISTENING_PREFIX) {
                        self.base_url = url.trim_end_matches('/').to_string();
                        self.child = Some(child);
                        return;
                    }
                }
                Err(error) => {
                    let _ = child.kill();
                    let status = child.wait();
                    panic!(
                        "server did not start ({error:?}, {status:?}); output:\n{}",
                        self.output()
                    );
                }
            }
        }
    }

    /// SIGTERM, then waits (bounded) for exit code 0.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("server is not running");
        let pid = child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = poll_every(
            Duration::from_millis(50),
            Duration::from_secs(60),
            "exit after SIGTERM",
            || child.try_wait().unwrap().ok_or_else(|| "still running".to_string()),
        );
        assert!(
            status.success(),
            "exit status {status} after SIGTERM; output:\n{}",
            self.output()
        );
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("server is not running");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait for the killed server");
    }

    /// Starts again on the same data dir and config file.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop or kill the server first");
        self.spawn();
    }

    pub fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request(self.client.get(format!("{}{path}", self.base_url)), path)
    }

    pub fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.request(self.client.post(format!("{}{path}", self.base_url)).json(body), path)
    }

    fn request(&self, request: reqwest::blocking::RequestBuilder, path: &str) -> (StatusCode, Value) {
        let response = request
            .bearer_auth(&self.admin_key)
            .send()
            .unwrap_or_else(|error| panic!("{path}: {error}; output:\n{}", self.output()));
        let status = response.status();
        let body = response.json().unwrap_or(Value::Null);
        (status, body)
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

impl Drop for KafkaServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.config_file);
    }
}

/// Keeps the last lines of `stream` in `log`, forwarding them to `lines_to` while
/// someone listens; reads to EOF so the server never blocks on a full pipe.
fn drain(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<VecDeque<String>>>,
    lines_to: Option<mpsc::Sender<String>>,
) {
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buffer = Vec::new();
        while let Ok(1..) = reader.read_until(b'\n', &mut buffer) {
            let line = String::from_utf8_lossy(&buffer).trim_end().to_string();
            buffer.clear();
            {
                let mut log = log.lock().unwrap();
                if log.len() >= 400 {
                    log.pop_front();
                }
                log.push_back(line.clone());
            }
            if let Some(sender) = &lines_to {
                let _ = sender.send(line);
            }
        }
    });
}
