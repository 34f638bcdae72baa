//! `bench-faults`: what clients see, and what is kept, when the node's dependencies fail.
//! Two scenarios, each selectable by a flag (both run when none is given):
//!
//! 1. `--broker-outage`: a tansu broker of the tool's own and a server with Kafka on
//!    (consuming `rankstream-events`, and producing REST events to it before their 202).
//!    `--rest-workers` keep-alive connections POST single click events with unique ids to
//!    `/v1/events` and a producer (acks=all) writes events with unique ids to
//!    `rankstream-events`, for `--phase-secs`; then the broker is killed (SIGKILL), load
//!    goes on for `--outage-secs`, the broker is restarted on the same data, and load goes
//!    on for `--phase-secs` more. Every answer that is not a 202 must be a 503 with
//!    `Retry-After` and a `{code, message}` body. Once the load stops, every acknowledged
//!    event (REST 202, Kafka ack) must be stored (`GET /v1/events/{id}`, all of them) and
//!    counted exactly once in its user's live state (`event_count`, every user, against the
//!    acknowledged events plus the unacknowledged ones that were stored anyway).
//! 2. `--disk-full`: the server's data dir on a tmpfs of `--tmpfs-mb` MiB filled (by a
//!    filler file in the same filesystem) to `--headroom-mb` free before the server starts.
//!    Items (`PUT /v1/catalog/item`) and events (`POST /v1/events`) are written until the
//!    writes fail; the answers are tallied (target: 503/507 with a code and `Retry-After`,
//!    never a 500 without a clear code, never a hang past the request timeout), with a bulk
//!    items, a bulk events and a read request while the disk is full. Then the filler is
//!    deleted and the time until writes succeed again is measured; then the server is
//!    stopped, started again on the same data dir, and every acknowledged write is read back.
//!
//! The tool must run as root (it mounts a tmpfs), with the broker script's tansu installed.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-faults
//! target/release/bench-faults --write-markdown BENCHMARKS.md
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, RETRY_AFTER};
use hyper::{Method, Request, StatusCode};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use bench::{
    elapsed_ms, generate_key, goals_table, ms, percentile, print_goals, publish_section, section_head, server_binary,
    thousands, Broker, Connection, Goal, IndexEntry, SpawnedServer, Target, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Faults: broker outage and disk full";
const SHARDS: u16 = 8;
const EVENTS_TOPIC: &str = "rankstream-events";
/// The server's request deadline (`server.request_timeout_ms`, default 10 s); an answer
/// later than this plus a margin counts as a hang.
const HANG: Duration = Duration::from_secs(15);

#[derive(Parser, Debug)]
#[command(about = "Broker outage and disk-full faults against a spawned server: statuses, recovery, 0 lost, 0 doubled")]
struct Args {
    /// Scenario 1: kill and restart the broker under REST and Kafka load.
    #[arg(long)]
    broker_outage: bool,
    /// Scenario 2: the data dir's filesystem fills up, then space returns.
    #[arg(long)]
    disk_full: bool,
    /// Scenario 1: seconds of load before the kill, and again after the restart.
    #[arg(long, default_value_t = 10)]
    phase_secs: u64,
    /// Scenario 1: seconds the broker stays down.
    #[arg(long, default_value_t = 15)]
    outage_secs: u64,
    /// Scenario 1: concurrent REST connections, each sending one event at a time.
    #[arg(long, default_value_t = 8)]
    rest_workers: usize,
    /// Scenario 1: pause of each REST connection between two events, in ms.
    #[arg(long, default_value_t = 50)]
    rest_pause_ms: u64,
    /// Scenario 1: Kafka events produced per second.
    #[arg(long, default_value_t = 100)]
    kafka_rate: u64,
    /// Scenario 1: users the events are spread over.
    #[arg(long, default_value_t = 50)]
    users: usize,
    /// Scenario 2: size of the tmpfs holding the data dir, in MiB.
    #[arg(long, default_value_t = 256)]
    tmpfs_mb: u64,
    /// Scenario 2: free space left by the filler when the server starts, in MiB.
    #[arg(long, default_value_t = 3)]
    headroom_mb: u64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The rankstream binary (default: `rankstream` beside this tool).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/broker.sh"))]
    broker_script: PathBuf,
    /// Write the results as the "Faults: broker outage and disk full" section of this file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

// ---------------------------------------------------------------- HTTP with headers

/// One answer: status, `Retry-After`, body, time taken.
struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: Bytes,
    ms: f64,
}

impl Answer {
    /// The body's `code` when it is a `{code, message}` error body.
    fn error_code(&self) -> Option<String> {
        let json: Value = serde_json::from_slice(&self.body).ok()?;
        json["message"].as_str()?;
        json["code"].as_str().map(str::to_owned)
    }

    /// A failure a client can act on: 503 or 507, `Retry-After`, `{code, message}`.
    fn is_clear_retry(&self) -> bool {
        matches!(self.status.as_u16(), 503 | 507) && self.retry_after.is_some() && self.error_code().is_some()
    }

    /// `503 unavailable` style label of a status and its code.
    fn label(&self) -> String {
        match self.error_code() {
            Some(code) => format!("{} {code}", self.status.as_u16()),
            None => self.status.as_u16().to_string(),
        }
    }
}

/// Sends one authenticated request on `connection`; `Err` for a connection failure or a
/// hang (no answer within [`HANG`]).
async fn call(
    target: &Target,
    connection: &mut Connection,
    method: Method,
    path: &str,
    body: Option<(&str, Bytes)>,
) -> Result<Answer> {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("{}{path}", target.base_path))
        .header(HOST, &target.authority)
        .header(AUTHORIZATION, format!("Bearer {}", target.key));
    let body = match body {
        Some((content_type, body)) => {
            request = request.header(CONTENT_TYPE, content_type);
            body
        }
        None => Bytes::new(),
    };
    let started = Instant::now();
    let exchange = async {
        connection.ready().await?;
        let response = connection.send_request(request.body(Full::new(body))?).await?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, retry_after, body))
    };
    let (status, retry_after, body) = tokio::time::timeout(HANG, exchange)
        .await
        .with_context(|| format!("no answer to {path} within {} s", HANG.as_secs()))??;
    Ok(Answer {
        status,
        retry_after,
        body,
        ms: elapsed_ms(started),
    })
}

async fn post_json(target: &Target, connection: &mut Connection, path: &str, body: &Value) -> Result<Answer> {
    let body = Bytes::from(serde_json::to_vec(body)?);
    call(target, connection, Method::POST, path, Some(("application/json", body))).await
}

async fn get(target: &Target, connection: &mut Connection, path: &str) -> Result<Answer> {
    call(target, connection, Method::GET, path, None).await
}

/// A click event of `uid` with id `id`, in the v1 shape.
fn click(id: &str, uid: &str, item: u32) -> Value {
    json!({
        "id": id, "type": "click", "uid": uid, "sid": format!("{uid}-s"),
        "item_id": format!("item-{item:04}"), "click_type": "product",
        "original_timestamp": chrono::Utc::now().timestamp_millis(),
    })
}

/// Counts of answers by label (`202`, `503 unavailable`, `error: ...`), in label order.
type Tally = BTreeMap<String, usize>;

fn tally_text(tally: &Tally) -> String {
    if tally.is_empty() {
        return "none".into();
    }
    tally
        .iter()
        .map(|(label, count)| format!("{label}: {}", thousands(*count as f64)))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------- scenario 1

/// One REST request of scenario 1.
struct RestSend {
    at: f64,
    id: String,
    uid: String,
    /// `None`: a connection failure or a hang.
    label: String,
    accepted: bool,
    /// For a non-202: 503/507 with Retry-After and `{code, message}`.
    clear: bool,
    ms: f64,
    /// A 202 whose body counted the (new) event as a duplicate.
    reported_duplicate: bool,
}

struct KafkaSend {
    at: f64,
    id: String,
    uid: String,
    acked: bool,
    /// From the send to the ack (or the failure), in ms.
    ms: f64,
}

#[derive(Default)]
struct OutageReport {
    kill_at: f64,
    restart_at: f64,
    load_secs: f64,
    rest: Vec<RestSend>,
    kafka: Vec<KafkaSend>,
    /// First 202 after the kill, and after the restart (seconds since the load began).
    first_202_after_restart: Option<f64>,
    /// Acknowledged events not found / found by `GET /v1/events/{id}` once applied.
    acked_missing: usize,
    acked_found: usize,
    /// Unacknowledged events that were stored anyway (a produce the broker took just before it died).
    unacked_stored: usize,
    unacked: usize,
    /// Seconds from the end of the load until every acknowledged event was stored.
    settle_secs: f64,
    /// Users whose event_count was above / below the events stored for them, and by how much.
    doubled: u64,
    lost_in_state: u64,
    users_checked: usize,
    state_events: u64,
    kafka_stats: Value,
}

impl OutageReport {
    fn rest_in(&self, from: f64, to: f64) -> impl Iterator<Item = &RestSend> {
        self.rest.iter().filter(move |send| send.at >= from && send.at < to)
    }
}

fn rest_tally<'a>(sends: impl Iterator<Item = &'a RestSend>) -> Tally {
    let mut tally = Tally::new();
    for send in sends {
        *tally.entry(send.label.clone()).or_default() += 1;
    }
    tally
}

async fn broker_outage(args: &Args, binary: &Path) -> Result<OutageReport> {
    let broker = Broker::start(&args.broker_script)?;
    for (topic, partitions) in [
        (EVENTS_TOPIC, SHARDS),
        ("rankstream-engagement", SHARDS),
        ("rankstream-dead-letter", 1),
    ] {
        broker.topic(topic, partitions)?;
    }
    let brokers = broker.brokers();
    let port = brokers.rsplit(':').next().unwrap_or_default().to_owned();
    let broker_dir = broker.dir.join("broker");
    let config = broker.dir.join("rankstream.toml");
    // REST events are produced to rankstream-events (kafka.rest_topic, the default) before their 202.
    std::fs::write(&config, format!("[kafka]\nenabled = true\nbrokers = \"{brokers}\"\n"))?;
    let config_args = [OsString::from("--config"), config.into_os_string()];
    let server = SpawnedServer::start(binary, &config_args, &RATE_LIMIT_ENV).await?;
    server.announce();
    let target = Arc::new(server.target()?);
    let work = async {
        let mut report = OutageReport::default();
        drive_outage(args, &target, &brokers, &port, &broker, &broker_dir, &mut report).await?;
        verify_outage(args, &target, &mut report).await?;
        anyhow::Ok(report)
    };
    let outcome = server.stop_after(work).await;
    drop(broker);
    outcome
}

/// The producer of the tool: acks=all like the harness's, but waiting up to two minutes
/// for a broker (librdkafka retries until `message.timeout.ms`), so that what was sent
/// during the outage is delivered after the restart or reported as failed.
fn patient_producer(brokers: &str) -> Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .set("queue.buffering.max.messages", "1000000")
        .create()?)
}

async fn drive_outage(
    args: &Args,
    target: &Arc<Target>,
    brokers: &str,
    port: &str,
    broker: &Broker,
    broker_dir: &Path,
    report: &mut OutageReport,
) -> Result<()> {
    let users: Arc<Vec<String>> = Arc::new((0..args.users).map(|n| format!("fault-u-{n:03}")).collect());
    let started = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rest_log = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for worker in 0..args.rest_workers {
        let (target, users, stop, log) = (target.clone(), users.clone(), stop.clone(), rest_log.clone());
        let (pause, seed) = (Duration::from_millis(args.rest_pause_ms), args.seed + worker as u64);
        workers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut connection = target.connect().await?;
            for n in 0.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let (id, uid) = (
                    format!("rest-{worker}-{n}"),
                    users[rng.random_range(0..users.len())].clone(),
                );
                let at = started.elapsed().as_secs_f64();
                let body = json!({ "events": [click(&id, &uid, rng.random_range(0..1000))] });
                let send = match post_json(&target, &mut connection, "/v1/events", &body).await {
                    Ok(answer) => {
                        let accepted = answer.status == StatusCode::ACCEPTED;
                        let mut reported_duplicate = false;
                        if accepted {
                            let json: Value = serde_json::from_slice(&answer.body)?;
                            ensure!(
                                json["accepted"] == 1 && json["ids"][0] == id.as_str(),
                                "a 202 that did not accept {id}: {json}"
                            );
                            // The consumer may apply the REST copy read back from the topic
                            // before the request's own ingest does (counted, not a failure).
                            reported_duplicate = json["duplicates"] == 1;
                        }
                        RestSend {
                            reported_duplicate,
                            at,
                            id,
                            uid,
                            label: answer.label(),
                            accepted,
                            clear: accepted || answer.is_clear_retry(),
                            ms: answer.ms,
                        }
                    }
                    Err(error) => {
                        eprintln!("REST {id}: {error:#}");
                        connection = target.connect().await?;
                        let label = format!("no answer ({})", error.root_cause());
                        RestSend {
                            reported_duplicate: false,
                            at,
                            id,
                            uid,
                            label,
                            accepted: false,
                            clear: false,
                            ms: f64::NAN,
                        }
                    }
                };
                log.lock().push(send);
                tokio::time::sleep(pause).await;
            }
            anyhow::Ok(())
        }));
    }

    let producer = Arc::new(patient_producer(brokers)?);
    let kafka_log = Arc::new(Mutex::new(Vec::new()));
    let producing = {
        let (producer, users, stop, log) = (producer.clone(), users.clone(), stop.clone(), kafka_log.clone());
        let (interval, seed) = (
            Duration::from_micros(1_000_000 / args.kafka_rate.max(1)),
            args.seed + 1000,
        );
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut sends = tokio::task::JoinSet::new();
            let mut ticker = tokio::time::interval(interval);
            for n in 0.. {
                ticker.tick().await;
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let (id, uid) = (format!("kafka-{n}"), users[rng.random_range(0..users.len())].clone());
                let payload = click(&id, &uid, rng.random_range(0..1000)).to_string();
                let (producer, log) = (producer.clone(), log.clone());
                let at = started.elapsed().as_secs_f64();
                sends.spawn(async move {
                    let sent = Instant::now();
                    let record = FutureRecord::to(EVENTS_TOPIC).key(&uid).payload(&payload);
                    let acked = producer.send(record, Duration::from_secs(10)).await.is_ok();
                    log.lock().push(KafkaSend {
                        at,
                        id,
                        uid,
                        acked,
                        ms: elapsed_ms(sent),
                    });
                });
            }
            // Every send ends in an ack or a failure within message.timeout.ms.
            while sends.join_next().await.is_some() {}
        })
    };

    tokio::time::sleep(Duration::from_secs(args.phase_secs)).await;
    let pid = std::fs::read_to_string(broker_dir.join("tansu.pid"))?.trim().to_owned();
    std::process::Command::new("kill").args(["-KILL", &pid]).status()?;
    report.kill_at = started.elapsed().as_secs_f64();
    println!("t={:.1} s: broker killed (SIGKILL, pid {pid})", report.kill_at);
    tokio::time::sleep(Duration::from_secs(args.outage_secs)).await;
    // `broker.sh start` returns once the port is open again.
    broker.script(&["start", port, &broker_dir.to_string_lossy()])?;
    report.restart_at = started.elapsed().as_secs_f64();
    println!(
        "t={:.1} s: broker restarted on the same data and listening",
        report.restart_at
    );
    tokio::time::sleep(Duration::from_secs(args.phase_secs)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    report.load_secs = started.elapsed().as_secs_f64();
    for worker in workers {
        worker.await??;
    }
    tokio::time::timeout(Duration::from_secs(180), producing)
        .await
        .context("Kafka sends unresolved 180 s after the load")??;
    println!(
        "t={:.1} s: load stopped, every Kafka send acked or failed",
        started.elapsed().as_secs_f64()
    );
    report.rest = std::mem::take(&mut *rest_log.lock());
    report.kafka = std::mem::take(&mut *kafka_log.lock());
    report.rest.sort_by(|a, b| a.at.total_cmp(&b.at));
    report.kafka.sort_by(|a, b| a.at.total_cmp(&b.at));
    report.first_202_after_restart = report
        .rest
        .iter()
        .find(|send| send.accepted && send.at >= report.kill_at && send.at + send.ms / 1000.0 >= report.restart_at)
        .map(|send| send.at + send.ms / 1000.0);
    Ok(())
}

async fn kafka_stats(target: &Target, connection: &mut Connection) -> Result<Value> {
    let answer = get(target, connection, "/v1/admin/stats").await?;
    ensure!(answer.status == StatusCode::OK, "stats: {}", answer.status);
    Ok(serde_json::from_slice::<Value>(&answer.body)?["kafka"].take())
}

async fn verify_outage(args: &Args, target: &Target, report: &mut OutageReport) -> Result<()> {
    let mut connection = target.connect().await?;
    let settling = Instant::now();
    // (id, uid, acknowledged)
    let sent: Vec<(String, String, bool)> = report
        .rest
        .iter()
        .map(|send| (send.id.clone(), send.uid.clone(), send.accepted))
        .chain(
            report
                .kafka
                .iter()
                .map(|send| (send.id.clone(), send.uid.clone(), send.acked)),
        )
        .collect();
    // Every acknowledged event stored (the Kafka ones are applied as the consumer catches up).
    let mut missing: Vec<&(String, String, bool)> = sent.iter().filter(|(_, _, acked)| *acked).collect();
    loop {
        let mut still = Vec::new();
        for event in missing {
            let answer = get(target, &mut connection, &format!("/v1/events/{}", event.0)).await?;
            match answer.status {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND => still.push(event),
                status => bail!(
                    "GET /v1/events/{}: {status} {}",
                    event.0,
                    String::from_utf8_lossy(&answer.body)
                ),
            }
        }
        missing = still;
        if missing.is_empty() || settling.elapsed() > Duration::from_secs(120) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report.settle_secs = settling.elapsed().as_secs_f64();
    report.acked_missing = missing.len();
    report.acked_found = sent.iter().filter(|(_, _, acked)| *acked).count() - missing.len();
    if let Some(first) = missing.first() {
        eprintln!(
            "{} acknowledged events not stored after 120 s, the first: {}",
            missing.len(),
            first.0
        );
    }
    // The consumer has read everything (the REST copies on the topic included), so
    // nothing more will be applied.
    loop {
        let stats = kafka_stats(target, &mut connection).await?;
        let caught_up = stats["lag_by_shard"]
            .as_object()
            .is_some_and(|shards| shards.values().all(|lag| lag.as_i64() == Some(0)));
        if caught_up {
            report.kafka_stats = stats;
            break;
        }
        ensure!(
            settling.elapsed() < Duration::from_secs(180),
            "consumer lag stays: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Unacknowledged events the node stored anyway count in the state too.
    let mut stored_by_user: HashMap<&str, u64> = HashMap::new();
    for (id, uid, acked) in &sent {
        let stored = match acked {
            true => !missing.iter().any(|event| &event.0 == id),
            false => {
                report.unacked += 1;
                let answer = get(target, &mut connection, &format!("/v1/events/{id}")).await?;
                let stored = answer.status == StatusCode::OK;
                report.unacked_stored += usize::from(stored);
                stored
            }
        };
        if stored {
            *stored_by_user.entry(uid.as_str()).or_default() += 1;
        }
    }
    for n in 0..args.users {
        let uid = format!("fault-u-{n:03}");
        let expected = stored_by_user.get(uid.as_str()).copied().unwrap_or(0);
        let answer = get(target, &mut connection, &format!("/v1/users/{uid}/state")).await?;
        let count = match answer.status {
            StatusCode::OK => serde_json::from_slice::<Value>(&answer.body)?["event_count"]
                .as_u64()
                .context("a state without event_count")?,
            StatusCode::NOT_FOUND => 0,
            status => bail!("GET /v1/users/{uid}/state: {status}"),
        };
        report.users_checked += 1;
        report.state_events += count;
        if count != expected {
            eprintln!("{uid}: event_count {count}, events stored for the user {expected}");
        }
        report.doubled += count.saturating_sub(expected);
        report.lost_in_state += expected.saturating_sub(count);
    }
    Ok(())
}

// ---------------------------------------------------------------- scenario 2

/// The tmpfs of scenario 2 and the server on it: dropped on any path, the server is
/// killed and the tmpfs unmounted.
struct DiskRig {
    root: PathBuf,
    mount: PathBuf,
    mounted: bool,
    server: Option<tokio::process::Child>,
}

impl DiskRig {
    fn new(size_mb: u64) -> Result<DiskRig> {
        let root = std::env::temp_dir().join(format!("rankstream-faults-{}", uuid::Uuid::now_v7().simple()));
        let mount = root.join("fs");
        std::fs::create_dir_all(&mount)?;
        let mut rig = DiskRig {
            root,
            mount,
            mounted: false,
            server: None,
        };
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(&rig.mount)
            .status()?;
        ensure!(status.success(), "mount -t tmpfs (run as root): {status}");
        rig.mounted = true;
        Ok(rig)
    }

    fn data_dir(&self) -> PathBuf {
        self.mount.join("data")
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("filler")
    }

    fn free_bytes(&self) -> Result<u64> {
        let output = std::process::Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.mount)
            .output()?;
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .nth(1)
            .context("df printed no value")?
            .trim()
            .parse()
            .context("df")
    }

    /// Writes the filler file until `headroom` bytes are left free.
    fn fill(&self, headroom: u64) -> Result<u64> {
        use std::io::Write;
        let size = self.free_bytes()?.saturating_sub(headroom);
        let mut file = std::fs::File::create(self.filler())?;
        let block = vec![0x5a_u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            file.write_all(&block[..n])?;
            left -= n as u64;
        }
        file.sync_all()?;
        Ok(size)
    }

    /// Starts `rankstream serve` on the data dir (its log beside the mount, not on it).
    async fn start(&mut self, binary: &Path, key: &str, log_name: &str) -> Result<Target> {
        let log = self.root.join(log_name);
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(self.data_dir())
            .env("RANKSTREAM_ADMIN_KEY", key)
            .env("RANKSTREAM__STORAGE__DURABILITY", "sync")
            .envs(RATE_LIMIT_ENV.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        self.server = Some(child);
        let listening = async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("rankstream listening on ") {
                    return Ok(url.trim().to_string());
                }
            }
            bail!("server exited before listening; see {}", log.display())
        };
        let url = tokio::time::timeout(Duration::from_secs(60), listening)
            .await
            .context("server not listening after 60 s")??;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        eprintln!("spawned {} at {url} on {}", binary.display(), self.data_dir().display());
        Target::parse(&url, key.to_owned())
    }

    /// SIGTERM and wait; fails unless the server exits cleanly within 60 s.
    async fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.server.take() else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()?;
        }
        let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .context("server still running 60 s after SIGTERM")??;
        ensure!(status.success(), "server exited with {status}");
        Ok(())
    }

    fn log(&self, log_name: &str) -> String {
        std::fs::read_to_string(self.root.join(log_name)).unwrap_or_default()
    }
}

impl Drop for DiskRig {
    fn drop(&mut self) {
        if let Some(child) = &mut self.server {
            child.start_kill().ok();
            // A killed process closes its files at once; give it a moment before the unmount.
            std::thread::sleep(Duration::from_millis(300));
        }
        if self.mounted {
            let unmounted = std::process::Command::new("umount").arg(&self.mount).status();
            if !unmounted.is_ok_and(|status| status.success()) {
                eprintln!("warning: umount {} failed; lazy unmount", self.mount.display());
                std::process::Command::new("umount")
                    .arg("-l")
                    .arg(&self.mount)
                    .status()
                    .ok();
            }
        }
        std::fs::remove_dir_all(&self.root).ok();
    }
}

#[derive(Default)]
struct DiskReport {
    filler_bytes: u64,
    /// Writes acknowledged before the first failure, and all acknowledged.
    acked_before_full: usize,
    acked_items: Vec<String>,
    acked_events: Vec<String>,
    /// Writes that failed (never acknowledged), by kind.
    failed_items: Vec<String>,
    failed_events: Vec<String>,
    /// Answers to single writes while full, by label; the clear ones (503/507 + Retry-After + code).
    full_tally: Tally,
    full_clear: usize,
    full_total: usize,
    full_max_ms: f64,
    full_p99_ms: f64,
    /// A bulk items, a bulk events, and a read while full: the label of each.
    bulk_items: String,
    bulk_events: String,
    read_while_full: String,
    /// Seconds from freeing the space until the first 202, and the probes it took.
    recovery_secs: f64,
    recovery_probes: usize,
    /// Writes after recovery, all expected to succeed.
    after_ok: usize,
    after_total: usize,
    clean_stop: bool,
    /// After the restart: acknowledged writes read back / missing; failed writes found stored.
    restart_found: usize,
    restart_missing: usize,
    failed_but_stored: usize,
    panics: usize,
    sample_message: String,
}

/// The next write of the fill loop: an item (~8 KB of text) or an event, alternately.
async fn write_one(
    target: &Target,
    connection: &mut Connection,
    n: usize,
    filler_text: &str,
) -> Result<(bool, String, Answer)> {
    if n.is_multiple_of(2) {
        let id = format!("disk-item-{n}");
        let body = json!({"id": id, "_table": "items", "name": format!("disk item {n}"), "description": filler_text});
        let body = Bytes::from(serde_json::to_vec(&body)?);
        let answer = call(
            target,
            connection,
            Method::PUT,
            "/v1/catalog/item",
            Some(("application/json", body)),
        )
        .await?;
        Ok((true, id, answer))
    } else {
        let id = format!("disk-event-{n}");
        let answer = post_json(
            target,
            connection,
            "/v1/events",
            &click(&id, &format!("disk-u-{}", n % 20), n as u32),
        )
        .await?;
        Ok((false, id, answer))
    }
}

async fn disk_full(args: &Args, binary: &Path) -> Result<DiskReport> {
    let mut report = DiskReport::default();
    let mut rig = DiskRig::new(args.tmpfs_mb)?;
    std::fs::create_dir_all(rig.data_dir())?;
    report.filler_bytes = rig.fill(args.headroom_mb << 20)?;
    println!(
        "tmpfs of {} MiB at {}: filler of {:.1} MiB, {:.1} MiB left",
        args.tmpfs_mb,
        rig.mount.display(),
        report.filler_bytes as f64 / (1 << 20) as f64,
        rig.free_bytes()? as f64 / (1 << 20) as f64
    );
    let key = generate_key();
    let target = rig.start(binary, &key, "server-1.log").await?;
    let mut connection = target.connect().await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let filler_text: String = (0..1200)
        .map(|_| format!("w{:05}", rng.random_range(0..100_000)))
        .collect::<Vec<_>>()
        .join(" ");

    // Fill: write until 40 writes in a row failed (or 20,000 writes without a failure).
    let mut latencies = Vec::new();
    let mut failing_in_a_row = 0;
    let mut n = 0;
    while failing_in_a_row < 40 {
        ensure!(n < 20_000, "20,000 writes and the disk never filled");
        let (item, id, answer) = match write_one(&target, &mut connection, n, &filler_text).await {
            Ok(write) => write,
            Err(error) => {
                // A hang or a dropped connection: counted, and the next write on a new connection.
                *report
                    .full_tally
                    .entry(format!("no answer ({})", error.root_cause()))
                    .or_default() += 1;
                report.full_total += 1;
                failing_in_a_row += 1;
                connection = target.connect().await?;
                n += 1;
                continue;
            }
        };
        let ok = matches!(answer.status, StatusCode::OK | StatusCode::ACCEPTED);
        match (ok, item) {
            (true, true) => report.acked_items.push(id),
            (true, false) => report.acked_events.push(id),
            (false, true) => report.failed_items.push(id),
            (false, false) => report.failed_events.push(id),
        }
        if ok {
            failing_in_a_row = 0;
            if report.full_total == 0 {
                report.acked_before_full += 1;
            }
        } else {
            failing_in_a_row += 1;
            report.full_total += 1;
            report.full_clear += usize::from(answer.is_clear_retry());
            *report.full_tally.entry(answer.label()).or_default() += 1;
            latencies.push(answer.ms);
            if report.sample_message.is_empty() {
                report.sample_message = String::from_utf8_lossy(&answer.body).chars().take(240).collect();
                println!(
                    "first failed write (#{n}, after {} acknowledged): {} Retry-After {:?}: {}",
                    report.acked_before_full, answer.status, answer.retry_after, report.sample_message
                );
            }
        }
        n += 1;
    }
    report.full_max_ms = latencies.iter().copied().fold(0.0, f64::max);
    report.full_p99_ms = percentile(&latencies, 0.99);
    println!(
        "disk full after {} acknowledged writes; failed writes: {}",
        report.acked_before_full,
        tally_text(&report.full_tally)
    );

    // While full: bulk writes and a read.
    let bulk: String = (0..10)
        .map(|i| json!({"id": format!("disk-bulk-{i}"), "_table": "items", "name": "bulk"}).to_string() + "\n")
        .collect();
    let answer = call(
        &target,
        &mut connection,
        Method::PUT,
        "/v1/catalog/items",
        Some(("application/x-ndjson", Bytes::from(bulk))),
    )
    .await?;
    report.bulk_items = format!("{}{}", answer.label(), retry_note(&answer));
    let events: Vec<Value> = (0..10)
        .map(|i| click(&format!("disk-bulk-ev-{i}"), "disk-u-bulk", i))
        .collect();
    let answer = post_json(&target, &mut connection, "/v1/events", &json!({ "events": events })).await?;
    report.bulk_events = format!("{}{}", answer.label(), retry_note(&answer));
    let read = format!(
        "/v1/catalog/item/items/{}",
        report.acked_items.first().context("no item was stored")?
    );
    report.read_while_full = get(&target, &mut connection, &read).await?.label();
    println!(
        "while full: bulk items {}, bulk events {}, GET of a stored item {}",
        report.bulk_items, report.bulk_events, report.read_while_full
    );

    // Space returns: time until an event is accepted again.
    std::fs::remove_file(rig.filler())?;
    let freed = Instant::now();
    println!(
        "filler deleted: {:.1} MiB free",
        rig.free_bytes()? as f64 / (1 << 20) as f64
    );
    loop {
        let id = format!("disk-probe-{}", report.recovery_probes);
        report.recovery_probes += 1;
        let answer = post_json(&target, &mut connection, "/v1/events", &click(&id, "disk-u-probe", 1)).await?;
        if answer.status == StatusCode::ACCEPTED {
            report.acked_events.push(id);
            break;
        }
        report.failed_events.push(id);
        ensure!(
            answer.is_clear_retry(),
            "after space returned: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
        ensure!(
            freed.elapsed() < Duration::from_secs(120),
            "writes still fail 120 s after space returned: {}",
            String::from_utf8_lossy(&answer.body)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    report.recovery_secs = freed.elapsed().as_secs_f64();
    println!(
        "writes accepted again {:.2} s after space returned",
        report.recovery_secs
    );
    for i in 0..100 {
        let (item, id, answer) = write_one(&target, &mut connection, n + i, &filler_text).await?;
        report.after_total += 1;
        if matches!(answer.status, StatusCode::OK | StatusCode::ACCEPTED) {
            report.after_ok += 1;
            match item {
                true => report.acked_items.push(id),
                false => report.acked_events.push(id),
            }
        }
    }
    drop(connection);

    // Stop, start again on the same data, read every acknowledged write back.
    report.clean_stop = rig.stop().await.map_err(|error| eprintln!("stop: {error:#}")).is_ok();
    let target = rig.start(binary, &key, "server-2.log").await?;
    let mut connection = target.connect().await?;
    for (ids, path) in [
        (&report.acked_items, "/v1/catalog/item/items/"),
        (&report.acked_events, "/v1/events/"),
    ] {
        for id in ids {
            match get(&target, &mut connection, &format!("{path}{id}")).await?.status {
                StatusCode::OK => report.restart_found += 1,
                status => {
                    eprintln!("acknowledged {id} after the restart: {status}");
                    report.restart_missing += 1;
                }
            }
        }
    }
    for (ids, path) in [
        (&report.failed_items, "/v1/catalog/item/items/"),
        (&report.failed_events, "/v1/events/"),
    ] {
        for id in ids {
            if get(&target, &mut connection, &format!("{path}{id}")).await?.status == StatusCode::OK {
                report.failed_but_stored += 1;
            }
        }
    }
    drop(connection);
    rig.stop().await?;
    report.panics = ["server-1.log", "server-2.log"]
        .iter()
        .map(|log| rig.log(log).matches("panicked").count())
        .sum();
    println!(
        "after the restart: {} of {} acknowledged writes read back; {} failed writes stored anyway; panics in the logs: {}",
        report.restart_found,
        report.restart_found + report.restart_missing,
        report.failed_but_stored,
        report.panics
    );
    drop(rig);
    Ok(report)
}

fn retry_note(answer: &Answer) -> String {
    match &answer.retry_after {
        Some(seconds) => format!(", Retry-After {seconds}"),
        None => String::new(),
    }
}

// ---------------------------------------------------------------- report

fn outage_goals(report: &OutageReport) -> Vec<Goal> {
    let non_202: Vec<&RestSend> = report.rest.iter().filter(|send| !send.accepted).collect();
    let clear = non_202.iter().filter(|send| send.clear).count();
    let acked = report.acked_found + report.acked_missing;
    vec![
        Goal::new(
            "REST non-202 answers that were 503 + Retry-After + {code, message}",
            format!("{} of {}", thousands(clear as f64), thousands(non_202.len() as f64)),
            "all",
            clear == non_202.len(),
        ),
        Goal::new(
            "acknowledged events (REST 202 + Kafka acks) lost",
            format!("{} of {}", report.acked_missing, thousands(acked as f64)),
            "0",
            report.acked_missing == 0,
        ),
        Goal::new(
            "events counted twice in live state (event_count over events stored)",
            report.doubled.to_string(),
            "0",
            report.doubled == 0,
        ),
        Goal::new(
            "stored events missing from live state",
            report.lost_in_state.to_string(),
            "0",
            report.lost_in_state == 0,
        ),
        Goal::new(
            "REST accepts events again after the restart",
            match report.first_202_after_restart {
                Some(at) => format!("{:.1} s after", at - report.restart_at),
                None => "never".into(),
            },
            "yes",
            report.first_202_after_restart.is_some(),
        ),
    ]
}

fn disk_goals(report: &DiskReport) -> Vec<Goal> {
    let clear_bulk = |label: &str| label.starts_with("503") || label.starts_with("507");
    vec![
        Goal::new(
            "writes while full answered 503/507 + Retry-After + {code, message}",
            format!("{} of {}", report.full_clear, report.full_total),
            "all (no 500, no hang)",
            report.full_clear == report.full_total && report.full_total > 0,
        ),
        Goal::new(
            "slowest failed write while full",
            ms(report.full_max_ms),
            "< 10 s request timeout",
            report.full_max_ms < 10_000.0,
        ),
        Goal::new(
            "bulk writes while full (items, events)",
            format!("{}; {}", report.bulk_items, report.bulk_events),
            "503/507 with a code",
            clear_bulk(&report.bulk_items) && clear_bulk(&report.bulk_events),
        ),
        Goal::new(
            "writes accepted again after space returned",
            format!(
                "{:.1} s, then {} of {} writes",
                report.recovery_secs, report.after_ok, report.after_total
            ),
            "yes, without a restart",
            report.after_ok == report.after_total,
        ),
        Goal::new(
            "acknowledged writes missing after a restart on the same data",
            format!(
                "{} of {}",
                report.restart_missing,
                thousands((report.restart_found + report.restart_missing) as f64)
            ),
            "0 (DB opens cleanly)",
            report.restart_missing == 0 && report.clean_stop,
        ),
        Goal::new(
            "panics in the server logs",
            report.panics.to_string(),
            "0",
            report.panics == 0,
        ),
    ]
}

fn outage_markdown(args: &Args, report: &OutageReport) -> String {
    let rest_acked = report.rest.iter().filter(|send| send.accepted).count();
    let reported_duplicates = report.rest.iter().filter(|send| send.reported_duplicate).count();
    let kafka_acked = report.kafka.iter().filter(|send| send.acked).count();
    let kafka_during: Vec<f64> = report
        .kafka
        .iter()
        .filter(|send| send.acked && send.at >= report.kill_at && send.at < report.restart_at)
        .map(|send| send.ms)
        .collect();
    let rest_outage_ms: Vec<f64> = report
        .rest_in(report.kill_at, report.restart_at)
        .filter(|send| !send.accepted)
        .map(|send| send.ms)
        .filter(|ms| ms.is_finite())
        .collect();
    let mut out = format!(
        "\n### Broker outage under REST and Kafka load\n\n\
         A tansu broker (sqlite) and a server with `[kafka] enabled = true` (consuming rankstream-events, and producing \
         REST events to it, acks=all, before their 202). Load: {} REST connections each POSTing one click event at a \
         time to `/v1/events` ({} ms apart), and a producer writing {} click events/s (acks=all, keyed by uid, \
         `message.timeout.ms` 120 s) to rankstream-events; unique ids, {} users. The broker was killed (SIGKILL) at \
         t={:.1} s and restarted on the same data at t={:.1} s (listening); load stopped at t={:.1} s.\n\n\
         | period (when the request was sent) | REST answers |\n|---|---|\n| before the kill | {} |\n| broker down | {} |\n| after the restart | {} |\n\n",
        args.rest_workers,
        args.rest_pause_ms,
        args.kafka_rate,
        args.users,
        report.kill_at,
        report.restart_at,
        report.load_secs,
        tally_text(&rest_tally(report.rest_in(0.0, report.kill_at))),
        tally_text(&rest_tally(report.rest_in(report.kill_at, report.restart_at))),
        tally_text(&rest_tally(report.rest_in(report.restart_at, f64::INFINITY))),
    );
    out.push_str(&format!(
        "- REST: {} sent, {} accepted (202), {} of these 202s with `\"duplicates\": 1` for the new event (the \
         consumer had applied its copy read back from rankstream-events first; stored once); while the broker was down a refused POST took p50 {} / max {} (the \
         node's produce deadline); the first 202 after the restart came {}.\n\
         - Kafka: {} produced, {} acknowledged ({} sent while the broker was down, delivered after the restart: ack \
         p50 {}), {} failed.\n\
         - Afterwards: all {} acknowledged events looked up by `GET /v1/events/{{id}}` ({} stored within {:.1} s of \
         the end of the load, {} missing); {} unacknowledged events checked, {} of them stored anyway. Live state of \
         all {} users: {} events counted, {} over and {} under the events stored for them. Consumer stats at the end: \
         consumed {}, applied {}, duplicates {} (the REST copies read back), dead-lettered {}.\n",
        thousands(report.rest.len() as f64),
        thousands(rest_acked as f64),
        reported_duplicates,
        ms(percentile(&rest_outage_ms, 0.5)),
        ms(rest_outage_ms.iter().copied().fold(0.0, f64::max)),
        match report.first_202_after_restart {
            Some(at) => format!("{:.1} s after it", at - report.restart_at),
            None => "never".into(),
        },
        thousands(report.kafka.len() as f64),
        thousands(kafka_acked as f64),
        thousands(kafka_during.len() as f64),
        ms(percentile(&kafka_during, 0.5)),
        report.kafka.len() - kafka_acked,
        thousands((report.acked_found + report.acked_missing) as f64),
        thousands(report.acked_found as f64),
        report.settle_secs,
        report.acked_missing,
        thousands(report.unacked as f64),
        report.unacked_stored,
        report.users_checked,
        thousands(report.state_events as f64),
        report.doubled,
        report.lost_in_state,
        report.kafka_stats["consumed"],
        report.kafka_stats["applied"],
        report.kafka_stats["duplicates"],
        report.kafka_stats["dead_lettered"],
    ));
    out
}

fn disk_markdown(args: &Args, report: &DiskReport) -> String {
    format!(
        "\n### Disk full\n\n\
         The server's data dir on a {} MiB tmpfs, filled by a filler file to {} MiB free before the server started \
         (so RocksDB could not preallocate its WAL). Items (`PUT /v1/catalog/item`, ~8 KB of text each) and click \
         events (`POST /v1/events`) were written alternately, one at a time, until 40 writes in a row failed; then \
         the filler was deleted.\n\n\
         - Acknowledged before the first failure: {} writes. Failed writes: {} (p99 {}, max {}); \
         Retry-After and `{{code, message}}` on {} of them. The first failure: `{}`.\n\
         - While full: bulk `PUT /v1/catalog/items` (10 items) {}; bulk `POST /v1/events` (10 events) {}; \
         `GET` of a stored item {}.\n\
         - Space returned: writes accepted again after {:.2} s ({} probes, 250 ms apart; RocksDB's SstFileManager \
         clears the background error on its next check, every 5 s, once free space exceeds its reserved buffer, the \
         64 MiB write buffer); then {} of {} writes succeeded.\n\
         - Stopped ({}) and started again on the same data dir: {} of {} acknowledged writes read back; {} writes that \
         had failed were found stored; panics in the server logs: {}.\n",
        args.tmpfs_mb,
        args.headroom_mb,
        report.acked_before_full,
        tally_text(&report.full_tally),
        ms(report.full_p99_ms),
        ms(report.full_max_ms),
        report.full_clear,
        report.sample_message.replace('`', "'"),
        report.bulk_items,
        report.bulk_events,
        report.read_while_full,
        report.recovery_secs,
        report.recovery_probes,
        report.after_ok,
        report.after_total,
        if report.clean_stop {
            "clean exit"
        } else {
            "**not a clean exit**"
        },
        thousands(report.restart_found as f64),
        thousands((report.restart_found + report.restart_missing) as f64),
        report.failed_but_stored,
        report.panics,
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let all = !args.broker_outage && !args.disk_full;
    let binary = server_binary(args.server_bin.as_ref())?;
    let outage = match args.broker_outage || all {
        true => Some(broker_outage(&args, &binary).await?),
        false => None,
    };
    let disk = match args.disk_full || all {
        true => Some(disk_full(&args, &binary).await?),
        false => None,
    };
    let mut goals = Vec::new();
    goals.extend(outage.as_ref().map(outage_goals).unwrap_or_default());
    goals.extend(disk.as_ref().map(disk_goals).unwrap_or_default());
    print_goals(&goals);
    let mut section = section_head(MARKDOWN_HEADING, "bench-faults");
    section.push_str(
        "- Server: `rankstream serve` spawned by the tool, durability sync, 8 shards, request timeout 10 s, auth rate \
         limit raised; the tool, the server and the broker share the machine.\n\n",
    );
    section.push_str(&goals_table(&goals));
    if let Some(report) = &outage {
        section.push_str(&outage_markdown(&args, report));
    }
    if let Some(report) = &disk {
        section.push_str(&disk_markdown(&args, report));
    }
    println!("\n{section}");
    if let Some(path) = &args.write_markdown {
        let index = IndexEntry {
            tool: "bench-faults",
            row: "| Faults: broker outage and disk full | `tools/src/bin/bench-faults.rs` (`bench-faults`) | REST and Kafka ingest across a broker kill and restart (answers, 0 lost, 0 doubled); a full data disk (answers, recovery when space returns, acknowledged writes after a restart) |",
        };
        publish_section(path, MARKDOWN_HEADING, &section, Some(&index))?;
    }
    ensure!(goals.iter().all(|goal| goal.met), "some targets were not met");
    Ok(())
}
