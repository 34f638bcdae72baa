//! Events benchmark: how fresh live state is after an event arrives, and how fast events
//! are ingested, over REST and from Kafka. Four parts, each selectable by a flag (all run
//! when none is given), in one invocation:
//!
//! 1. `--rest-freshness`: one at a time on one keep-alive connection, POST one click event
//!    to `/v1/events` (sid from a pool of `--sessions`), then at once `GET /v1/sessions/{sid}`,
//!    whose `event_ids` must hold the id (the 202 comes after the apply). Reports the
//!    202 -> reflected time (the GET round trip) and the sent -> reflected time (the POST,
//!    with its durable write, and the GET), the share of first reads that reflected the
//!    event, and the POST latency. Target: p99 <= 1 ms from the 202.
//! 2. `--rest-bulk`: `{"events": [...]}` bodies of `--batch` click/page_view events over
//!    `--concurrency` keep-alive connections, `--bulk-events` per run, `--runs` runs.
//!    Target: median >= 50,000 events/s.
//! 3. `--kafka-freshness`: (a) the broker's floor: produce (acks=all) one message at a time to
//!    partition 0 of `bench-floor` and time until a bare rdkafka consumer assigned to it
//!    (fetch.wait.max.ms=10, like the server's) receives it; for information, again with the
//!    consumer assigned to 16 partitions (bench-floor, bench-floor-2) like the server's; (b)
//!    produce one event at a time to `rankstream-events` (key uid, murmur2) and poll
//!    `GET /v1/users/{uid}/state` (a tight loop unless `--poll-pause-us`) until its `event_ids`
//!    holds the id. Target: rankstream p99 <= floor p99 + 2 ms.
//! 4. `--kafka-ingest`: produce `--ingest-events` keyed events to `rankstream-events` before the
//!    server runs, time a bare consumer reading them all (the broker's consume floor), then
//!    start the server and poll `/v1/admin/stats` every 50 ms until `applied` reaches the
//!    count. Target (issue 23): from the server's spawn, >= 95% of the bare consumer's rate.
//!
//! The tool spawns `rankstream serve` itself (fresh temp data dir, generated admin key,
//! durability sync, auth rate limit raised so that its own requests are not throttled): one
//! server without Kafka for parts 1-2; for part 3 and again for part 4 a tansu broker
//! (`tools/broker.sh`, temp dir, free port) with rankstream-events and rankstream-engagement
//! (8 partitions) and rankstream-dead-letter (1) (part 3: also bench-floor and bench-floor-2,
//! 8), and a server with `--config` enabling Kafka (part 4: started after the produce). It
//! stops each of them once its part is done. `--quick` runs small counts, for trying it out.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-events
//! target/release/bench-events --write-markdown BENCHMARKS.md
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use hyper::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use bench::{
    brief_summary, check_accepted, consumer, elapsed_ms, goals_table, kafka_floor, max, median, ms, percentile,
    print_goals, produce, producer, publish_section, section_head, server_binary, thousands, Broker, Goal, Load, Span,
    SpawnedServer, Tally, Target, EVENTS, KAFKA_WARMUP, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Events: freshness and ingest";
const SHARDS: u16 = 8;
const EVENTS_TOPIC: &str = "rankstream-events";
const FLOOR_TOPIC: &str = "bench-floor";
/// Only read by the second floor consumer, which is assigned to as many partitions as the server's.
const FLOOR_TOPIC_2: &str = "bench-floor-2";
/// Unmeasured round trips first (connections, actors): REST freshness, Kafka freshness.
const REST_WARMUP: usize = 100;
/// Longest wait for one event to show up anywhere.
const EVENT_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Parser, Debug)]
#[command(about = "Benchmark event freshness and ingest (REST and Kafka) against a spawned server")]
struct Args {
    /// Part 1: REST freshness (POST /v1/events, then GET /v1/sessions/{sid}).
    #[arg(long)]
    rest_freshness: bool,
    /// Part 2: REST bulk ingest throughput.
    #[arg(long)]
    rest_bulk: bool,
    /// Part 3: Kafka produce -> live state freshness, against the broker's floor.
    #[arg(long)]
    kafka_freshness: bool,
    /// Part 4: Kafka ingest throughput of a pre-produced backlog.
    #[arg(long)]
    kafka_ingest: bool,
    /// Small default counts (1,000 / 20,000 / 200 / 50,000) for trying the tool out.
    #[arg(long)]
    quick: bool,
    /// Part 1 events [default: 10,000].
    #[arg(long)]
    freshness_events: Option<usize>,
    /// Part 1 session pool.
    #[arg(long, default_value_t = 1_000)]
    sessions: usize,
    /// Part 2 events per run [default: 200,000].
    #[arg(long)]
    bulk_events: Option<usize>,
    /// Part 2 events per request body.
    #[arg(long, default_value_t = 5_000)]
    batch: usize,
    /// Part 2 concurrent keep-alive connections.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Part 2 timed runs.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Part 3 messages, for the floor and for rankstream each [default: 2,000].
    #[arg(long)]
    kafka_messages: Option<usize>,
    /// Part 3 pause between two state GETs, in µs (0: a tight loop).
    #[arg(long, default_value_t = 0)]
    poll_pause_us: u64,
    /// Part 4 pre-produced events [default: 500,000].
    #[arg(long)]
    ingest_events: Option<usize>,
    /// User pool of parts 2 and 4.
    #[arg(long, default_value_t = 10_000)]
    users: usize,
    /// Seed of the generated events.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// The broker script (tansu).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/broker.sh"))]
    broker_script: PathBuf,
    /// Write (or replace) the `## Events: freshness and ingest` section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

/// The parts to run and their counts, `--quick` and the defaults resolved.
struct Plan {
    parts: [bool; 4],
    freshness_events: usize,
    bulk_events: usize,
    kafka_messages: usize,
    ingest_events: usize,
}

impl Plan {
    fn new(args: &Args) -> Plan {
        let chosen = [
            args.rest_freshness,
            args.rest_bulk,
            args.kafka_freshness,
            args.kafka_ingest,
        ];
        let all = !chosen.contains(&true);
        let count = |set: Option<usize>, full, quick| set.unwrap_or(if args.quick { quick } else { full });
        Plan {
            parts: chosen.map(|part| part || all),
            freshness_events: count(args.freshness_events, 10_000, 1_000),
            bulk_events: count(args.bulk_events, 200_000, 20_000),
            kafka_messages: count(args.kafka_messages, 2_000, 200),
            ingest_events: count(args.ingest_events, 500_000, 50_000),
        }
    }
}

/// What was measured, latencies in ms; the fields of a part not run stay empty.
#[derive(Default)]
struct Report {
    /// Part 1: 202 received -> the GET that reflected the event answered; the same from
    /// the moment the POST was sent (what a client that waits for nothing sees); POST
    /// latencies; reads right after the 202 that already reflected the event.
    fresh: Vec<f64>,
    fresh_from_send: Vec<f64>,
    post: Vec<f64>,
    first_read_hits: usize,
    bulk_runs: Vec<BulkRun>,
    /// Part 3: produce start -> the bare consumer received it / a state GET listed the id,
    /// the produce acks of both, and the state GETs sent while polling.
    floor: Vec<f64>,
    floor_acks: Vec<f64>,
    floor_16: Vec<f64>,
    rankstream: Vec<f64>,
    rankstream_acks: Vec<f64>,
    polls: usize,
    kafka_ingest: Option<KafkaIngest>,
}

struct BulkRun {
    seconds: f64,
    per_sec: f64,
    requests: Vec<f64>,
}

struct KafkaIngest {
    produce_seconds: f64,
    floor_seconds: f64,
    /// Server spawn -> its `listening` line, and -> stats showing every event applied.
    startup_seconds: f64,
    applied_seconds: f64,
}

impl KafkaIngest {
    /// rankstream's ingest rate as a share of the bare consumer's over the same backlog
    /// (the issue's headline): from the spawn, and from the `listening` line.
    fn share_of_floor(&self) -> (f64, f64) {
        (
            self.floor_seconds / self.applied_seconds,
            self.floor_seconds / (self.applied_seconds - self.startup_seconds),
        )
    }
}

// ---------------------------------------------------------------- helpers

/// A v1 event: click (item_id, click_type) or page_view (page_type).
fn v1_event(id: &str, click: bool, uid: Option<&str>, sid: &str, item: u32) -> Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut event = json!({"id": id, "type": "page_view", "original_timestamp": now, "sid": sid});
    if let Some(uid) = uid {
        event["uid"] = json!(uid);
    }
    if click {
        event["type"] = json!("click");
        event["item_id"] = json!(format!("item-{item:05}"));
        event["click_type"] = json!("product");
    } else {
        event["page_type"] = json!(if item.is_multiple_of(3) { "product" } else { "listing" });
    }
    event
}

/// One event of a mixed stream (30% clicks) keyed by its uid, as parts 2 and 4 send them.
fn mixed_event(rng: &mut StdRng, users: usize) -> (String, Value) {
    let user = rng.random_range(0..users);
    let (uid, sid) = (
        format!("u-{user:06}"),
        format!("s-{user:06}-{}", rng.random_range(0..3)),
    );
    let id = uuid::Uuid::now_v7().to_string();
    let event = v1_event(&id, rng.random_bool(0.3), Some(&uid), &sid, rng.random_range(0..20_000));
    (uid, event)
}

fn ids_contain(snapshot: &[u8], id: &str) -> Result<bool> {
    let snapshot: Value = serde_json::from_slice(snapshot)?;
    let ids = snapshot["event_ids"].as_array().context("snapshot without event_ids")?;
    Ok(ids.iter().any(|known| known.as_str() == Some(id)))
}

/// A Markdown table of p50 / p99 / max per row.
fn latency_table(rows: &[(&str, &[f64])]) -> String {
    let mut out = String::from("| | p50 | p99 | max |\n|---|---:|---:|---:|\n");
    for (name, values) in rows {
        let (p50, p99) = (percentile(values, 0.5), percentile(values, 0.99));
        out.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            ms(p50),
            ms(p99),
            ms(max(values))
        ));
    }
    out
}

// ---------------------------------------------------------------- part 1

async fn rest_freshness(target: &Target, events: usize, args: &Args, report: &mut Report) -> Result<()> {
    let mut sender = target.connect().await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    for index in 0..REST_WARMUP + events {
        let sid = format!("bench-s-{:05}", rng.random_range(0..args.sessions));
        let id = uuid::Uuid::now_v7().to_string();
        let body = v1_event(&id, true, None, &sid, rng.random_range(0..20_000)).to_string();
        let posted = Instant::now();
        let (status, response) = target.call(&mut sender, &EVENTS, body.into()).await?;
        let post_ms = elapsed_ms(posted);
        let json = check_accepted(status, &response, 1).with_context(|| format!("POST of event {index}"))?;
        ensure!(json["ids"][0] == id.as_str(), "the 202 lists another id: {json}");
        let accepted = Instant::now();
        for read in 0.. {
            let (status, snapshot) = target.get(&mut sender, &format!("/v1/sessions/{sid}")).await?;
            if status == StatusCode::OK && ids_contain(&snapshot, &id)? {
                if index >= REST_WARMUP {
                    report.fresh.push(elapsed_ms(accepted));
                    report.fresh_from_send.push(elapsed_ms(posted));
                    report.post.push(post_ms);
                    report.first_read_hits += usize::from(read == 0);
                }
                break;
            }
            if read == 0 {
                eprintln!("MISS: event {id} not in session {sid} right after its 202 (read: {status})");
            }
            ensure!(
                accepted.elapsed() < EVENT_DEADLINE,
                "event {id} not in session {sid} 10 s after its 202"
            );
        }
    }
    println!(
        "REST freshness, {events} events: 202 -> reflected {}; sent -> reflected {}; first reads reflecting it: \
         {}/{events}; POST {}",
        brief_summary(&report.fresh),
        brief_summary(&report.fresh_from_send),
        report.first_read_hits,
        brief_summary(&report.post)
    );
    Ok(())
}

// ---------------------------------------------------------------- part 2

async fn rest_bulk(target: &Arc<Target>, events: usize, args: &Args) -> Result<Vec<BulkRun>> {
    let mut rng = StdRng::seed_from_u64(args.seed + 1);
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        // Fresh ids every run; the bodies are serialized before the clock starts.
        let generated: Vec<Value> = (0..events).map(|_| mixed_event(&mut rng, args.users).1).collect();
        let chunks = generated.chunks(args.batch);
        let counts: Arc<Vec<usize>> = Arc::new(chunks.clone().map(<[Value]>::len).collect());
        let bodies = chunks
            .map(|chunk| Ok(serde_json::to_vec(&json!({ "events": chunk }))?.into()))
            .collect::<Result<Vec<Bytes>>>()?;
        let load = Load {
            target: target.clone(),
            endpoint: EVENTS,
            bodies: Arc::new(bodies),
        };
        let all_accepted = move |index: usize, status, response: &[u8], _: &mut Tally| {
            check_accepted(status, response, counts[index]).context("bulk POST /v1/events")?;
            Ok(())
        };
        let measured = load
            .closed_loop(args.concurrency, Span::EachBodyOnce, all_accepted)
            .await?;
        let (seconds, requests) = (measured.seconds, measured.latencies);
        let per_sec = events as f64 / seconds;
        println!(
            "REST bulk run {run}: {} events in {seconds:.3} s = {} events/s (requests {})",
            thousands(events as f64),
            thousands(per_sec),
            brief_summary(&requests)
        );
        runs.push(BulkRun {
            seconds,
            per_sec,
            requests,
        });
    }
    Ok(runs)
}

// ---------------------------------------------------------------- Kafka

/// Part 3 (`ingest` false) or 4 (true), each with a broker and a Kafka-enabled server of its own.
async fn kafka_part(args: &Args, plan: &Plan, binary: &Path, ingest: bool, report: &mut Report) -> Result<()> {
    let broker = Broker::start(&args.broker_script)?;
    let mut topics = vec![
        (EVENTS_TOPIC, SHARDS),
        ("rankstream-engagement", SHARDS),
        ("rankstream-dead-letter", 1),
    ];
    if !ingest {
        topics.extend([(FLOOR_TOPIC, SHARDS), (FLOOR_TOPIC_2, SHARDS)]);
    }
    for (topic, partitions) in topics {
        broker.topic(topic, partitions)?;
    }
    let (brokers, config) = (broker.brokers(), broker.dir.join("rankstream.toml"));
    std::fs::write(&config, format!("[kafka]\nenabled = true\nbrokers = \"{brokers}\"\n"))?;
    let backlog = match ingest {
        true => Some(produce_backlog(&brokers, plan.ingest_events, args).await?),
        false => None,
    };
    let spawned = Instant::now();
    let config_args = [OsString::from("--config"), config.into_os_string()];
    let server = SpawnedServer::start(binary, &config_args, &RATE_LIMIT_ENV).await?;
    let startup_seconds = spawned.elapsed().as_secs_f64();
    let target = server.target()?;
    let work = async {
        if let Some((produce_seconds, floor_seconds)) = backlog {
            let applied_seconds = wait_applied(&target, plan.ingest_events, spawned).await?;
            println!(
                "Kafka ingest: {} events applied {applied_seconds:.3} s after the spawn = {} events/s (listening \
                 after {startup_seconds:.3} s)",
                thousands(plan.ingest_events as f64),
                thousands(plan.ingest_events as f64 / applied_seconds),
            );
            let times = KafkaIngest {
                produce_seconds,
                floor_seconds,
                startup_seconds,
                applied_seconds,
            };
            report.kafka_ingest = Some(times);
        } else {
            let messages = plan.kafka_messages;
            (report.floor, report.floor_acks) =
                kafka_floor(&brokers, messages, FLOOR_TOPIC, &[FLOOR_TOPIC], 0..1).await?;
            let both = [FLOOR_TOPIC, FLOOR_TOPIC_2];
            report.floor_16 = kafka_floor(&brokers, messages, FLOOR_TOPIC, &both, 0..i32::from(SHARDS))
                .await?
                .0;
            kafka_freshness(&brokers, &target, messages, args, report).await?;
        }
        anyhow::Ok(())
    };
    let outcome = server.stop_after(work).await;
    drop(broker);
    outcome
}

/// Part 4, before the server runs: produces the backlog (keyed by uid, murmur2), then times a
/// bare consumer reading it all. Returns both times in seconds.
async fn produce_backlog(brokers: &str, events: usize, args: &Args) -> Result<(f64, f64)> {
    let producer = producer(brokers, "5")?;
    let mut rng = StdRng::seed_from_u64(args.seed + 2);
    let started = Instant::now();
    let mut sent = 0;
    while sent < events {
        let chunk: Vec<(String, String)> = (sent..events.min(sent + 50_000))
            .map(|_| mixed_event(&mut rng, args.users))
            .map(|(uid, event)| (uid, event.to_string()))
            .collect();
        let acks = chunk
            .iter()
            .map(|(uid, payload)| produce(&producer, (EVENTS_TOPIC, SHARDS), None, uid, payload));
        for ack in futures::future::join_all(acks).await {
            ack?;
        }
        sent += chunk.len();
    }
    let produce_seconds = started.elapsed().as_secs_f64();
    let rate = |seconds: f64| thousands(events as f64 / seconds);
    println!(
        "Kafka ingest: produced {} events in {produce_seconds:.3} s ({} events/s)",
        thousands(events as f64),
        rate(produce_seconds)
    );

    let consumer = consumer(brokers, &[EVENTS_TOPIC], 0..i32::from(SHARDS))?;
    let started = Instant::now();
    for _ in 0..events {
        tokio::time::timeout(EVENT_DEADLINE, consumer.recv())
            .await
            .context("the bare consumer stalled")??;
    }
    let floor_seconds = started.elapsed().as_secs_f64();
    println!(
        "Kafka ingest: a bare consumer read them in {floor_seconds:.3} s ({} events/s)",
        rate(floor_seconds)
    );
    Ok((produce_seconds, floor_seconds))
}

/// Polls `/v1/admin/stats` every 50 ms until `applied` reaches `events`; seconds since `since`.
async fn wait_applied(target: &Target, events: usize, since: Instant) -> Result<f64> {
    let mut sender = target.connect().await?;
    let mut last_progress = Instant::now();
    loop {
        let (status, body) = target.get(&mut sender, "/v1/admin/stats").await?;
        let seconds = since.elapsed().as_secs_f64();
        ensure!(status == StatusCode::OK, "stats: {status}: {body:?}");
        let kafka = serde_json::from_slice::<Value>(&body)?["kafka"].take();
        let applied = kafka["applied"].as_u64().context("no kafka.applied in the stats")? as usize;
        ensure!(
            kafka["dead_lettered"] == 0 && kafka["consume_errors"] == 0,
            "stream errors: {kafka}"
        );
        ensure!(applied <= events, "applied {applied} > produced {events}: {kafka}");
        if applied == events {
            eprintln!("stats at the end: {kafka}");
            return Ok(seconds);
        }
        ensure!(
            seconds < 600.0,
            "only {applied} of {events} applied after 600 s: {kafka}"
        );
        if last_progress.elapsed() > Duration::from_secs(5) {
            eprintln!("  {seconds:.1} s: {kafka}");
            last_progress = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Part 3b: produce an event, then poll the user's state until it lists the id.
async fn kafka_freshness(
    brokers: &str,
    target: &Target,
    messages: usize,
    args: &Args,
    result: &mut Report,
) -> Result<()> {
    let producer = producer(brokers, "0")?;
    let mut sender = target.connect().await?;
    let mut rng = StdRng::seed_from_u64(args.seed + 3);
    for index in 0..KAFKA_WARMUP + messages {
        let uid = format!("kf-u-{:04}", rng.random_range(0..1_000));
        let id = uuid::Uuid::now_v7().to_string();
        let (sid, item) = (format!("kf-s-{uid}"), rng.random_range(0..20_000));
        let payload = v1_event(&id, true, Some(&uid), &sid, item).to_string();
        let path = format!("/v1/users/{uid}/state");
        let started = Instant::now();
        let ack = produce(&producer, (EVENTS_TOPIC, SHARDS), None, &uid, &payload).await?;
        let mut polls = 0;
        loop {
            let (status, body) = target.get(&mut sender, &path).await?;
            polls += 1;
            match status {
                StatusCode::OK if ids_contain(&body, &id)? => break,
                StatusCode::OK | StatusCode::NOT_FOUND => {}
                _ => bail!("GET {path}: {status}: {body:?}"),
            }
            ensure!(
                started.elapsed() < EVENT_DEADLINE,
                "event {id} of {uid} not applied after 10 s"
            );
            if args.poll_pause_us > 0 {
                tokio::time::sleep(Duration::from_micros(args.poll_pause_us)).await;
            }
        }
        if index >= KAFKA_WARMUP {
            result.rankstream.push(elapsed_ms(started));
            result.rankstream_acks.push(ack);
            result.polls += polls;
        }
    }
    println!(
        "Kafka rankstream, {messages} events: produce -> state reflects it {} ({} state GETs)",
        brief_summary(&result.rankstream),
        thousands(result.polls as f64)
    );
    Ok(())
}

// ---------------------------------------------------------------- report

/// The targets of the issue, of the parts that ran.
fn goals(report: &Report, plan: &Plan) -> Vec<Goal> {
    let per_sec = |rate: f64| format!("{} events/s", thousands(rate));
    let mut goals = Vec::new();
    if !report.fresh.is_empty() {
        let p99 = percentile(&report.fresh, 0.99);
        goals.push(Goal::new(
            "REST freshness p99 (202 -> read)",
            ms(p99),
            "<= 1 ms",
            p99 <= 1.0,
        ));
        let (hits, reads) = (report.first_read_hits, report.fresh.len());
        let share = format!("{:.2}%", 100.0 * hits as f64 / reads as f64);
        goals.push(Goal::new(
            "REST first reads reflecting it",
            share,
            "100%",
            hits == reads,
        ));
    }
    if !report.bulk_runs.is_empty() {
        let rate = median(&report.bulk_runs.iter().map(|run| run.per_sec).collect::<Vec<_>>());
        goals.push(Goal::new(
            "REST bulk ingest, median",
            per_sec(rate),
            ">= 50,000 events/s",
            rate >= 50e3,
        ));
    }
    if !report.rankstream.is_empty() {
        let extra = percentile(&report.rankstream, 0.99) - percentile(&report.floor, 0.99);
        goals.push(Goal::new(
            "Kafka freshness p99 - floor p99",
            ms(extra),
            "<= 2 ms",
            extra <= 2.0,
        ));
    }
    if let Some(ingest) = &report.kafka_ingest {
        let rate = |seconds: f64| plan.ingest_events as f64 / seconds;
        let (spawned, listening) = ingest.share_of_floor();
        goals.push(Goal::new(
            "Kafka ingest (spawn -> applied), share of the bare consumer's rate",
            format!(
                "{:.1}% ({} against {}; listening -> applied: {:.1}%)",
                100.0 * spawned,
                per_sec(rate(ingest.applied_seconds)),
                per_sec(rate(ingest.floor_seconds)),
                100.0 * listening
            ),
            ">= 95%",
            spawned >= 0.95,
        ));
    }
    goals
}

fn markdown_section(args: &Args, plan: &Plan, report: &Report) -> String {
    let mut out = section_head(MARKDOWN_HEADING, "bench-events");
    out.push_str(&format!(
        "- Server: `rankstream serve` spawned by the tool on a fresh data dir, durability sync, 8 shards, engine \
         defaults; auth rate limit and burst raised to {}/s (the tool's own requests exceed the 1,000/s default). \
         Parts 1-2: Kafka off. Parts 3 and 4: each a tansu 0.6 broker (sqlite storage) and a server of its own, \
         started by the tool on 127.0.0.1, topics rankstream-events and rankstream-engagement (8 partitions), \
         rankstream-dead-letter (1), bench-floor and bench-floor-2 (8, part 3); the server's `--config` sets \
         `[kafka] enabled = true` and the brokers, other Kafka settings at their defaults (batch_wait_ms 1, max_batch 5000, consumer \
         fetch.wait.max.ms 10).\n\
         - Client: the tool itself, on the same machine as the server and the broker (they share its CPUs).\n\n",
        thousands(RATE_LIMIT_ENV[0].1.parse().unwrap_or(f64::NAN)),
    ));
    out.push_str(&goals_table(&goals(report, plan)));
    if !report.fresh.is_empty() {
        let r = report;
        let (hits, reads) = (thousands(r.first_read_hits as f64), thousands(r.fresh.len() as f64));
        out.push_str(&format!(
            "\n### REST freshness\n\n{reads} click events (after {REST_WARMUP} unmeasured) one at a time on one \
             keep-alive connection, `sid` from a pool of {}: `POST /v1/events` with one event, then at once \
             `GET /v1/sessions/{{sid}}`, checking that its `event_ids` holds the event's id.\n\n{}\n\
             First reads that already reflected the event: {hits} of {reads} ({:.2}%).\n",
            thousands(args.sessions as f64),
            latency_table(&[
                ("202 -> snapshot reflects the event (the GET round trip)", &r.fresh),
                (
                    "POST sent -> snapshot reflects the event (the POST and the GET)",
                    &r.fresh_from_send
                ),
                ("`POST /v1/events`, one event (sync durability)", &r.post),
            ]),
            100.0 * r.first_read_hits as f64 / r.fresh.len() as f64,
        ));
    }
    if !report.bulk_runs.is_empty() {
        let runs = &report.bulk_runs;
        out.push_str(&format!(
            "\n### REST bulk ingest\n\n{} events per run as `{{\"events\": [...]}}` bodies of {} v1 events (30% \
             click, 70% page_view, {} users, fresh ids every run) over {} keep-alive connections, one request in \
             flight on each; the runs follow one another on one server, so each adds to the same users' live \
             state.\n\n| run | seconds | events/s | request p50 | request p99 |\n|---:|---:|---:|---:|---:|\n",
            thousands(plan.bulk_events as f64),
            thousands(args.batch as f64),
            thousands(args.users as f64),
            args.concurrency,
        ));
        for (number, run) in runs.iter().enumerate() {
            let (p50, p99) = (ms(percentile(&run.requests, 0.5)), ms(percentile(&run.requests, 0.99)));
            let (seconds, rate) = (run.seconds, thousands(run.per_sec));
            out.push_str(&format!("| {} | {seconds:.3} | {rate} | {p50} | {p99} |\n", number + 1));
        }
        let rate = median(&runs.iter().map(|run| run.per_sec).collect::<Vec<_>>());
        out.push_str(&format!("\nMedian: **{} events/s**.\n", thousands(rate)));
    }
    if !report.rankstream.is_empty() {
        let k = report;
        let polling = match args.poll_pause_us {
            0 => "in a tight loop".to_string(),
            pause => format!("with {pause} µs between GETs"),
        };
        out.push_str(&format!(
            "\n### Kafka freshness against the broker's floor\n\n{} messages each (after {KAFKA_WARMUP} unmeasured), \
             produced one at a time (acks=all, linger.ms 0), timed from the start of the produce. Floor: to \
             partition 0 of bench-floor, until a bare rdkafka consumer assigned to that one partition \
             (fetch.wait.max.ms 10) receives it; for information, the same with the consumer assigned to 16 \
             partitions (bench-floor and bench-floor-2), as many as the server's consumer has (2 input topics x \
             8). rankstream: a click event to rankstream-events keyed by its uid (1,000 users, murmur2, each on \
             its uid's shard), until `GET /v1/users/{{uid}}/state`, polled {polling} \
             on one keep-alive connection ({} GETs), lists its id.\n\n{}\n\
             rankstream p99 - floor p99 = **{}** (target <= 2 ms); against the 16-partition floor: {}.\n",
            thousands(k.floor.len() as f64),
            thousands(k.polls as f64),
            latency_table(&[
                ("floor: produce -> the bare consumer receives it", &k.floor),
                (
                    "floor, the consumer assigned to 16 partitions like the server's",
                    &k.floor_16
                ),
                ("rankstream: produce -> the user's state reflects it", &k.rankstream),
                ("produce ack (acks=all) of the floor messages", &k.floor_acks),
                ("produce ack (acks=all) of the rankstream events", &k.rankstream_acks),
            ]),
            ms(percentile(&k.rankstream, 0.99) - percentile(&k.floor, 0.99)),
            ms(percentile(&k.rankstream, 0.99) - percentile(&k.floor_16, 0.99)),
        ));
    }
    if let Some(i) = &report.kafka_ingest {
        let events = thousands(plan.ingest_events as f64);
        out.push_str(&format!(
            "\n### Kafka ingest\n\n{events} v1 events (30% click, 70% page_view, {} users, keyed by uid, murmur2) \
             produced to rankstream-events before the server ran; then the server was started and \
             `/v1/admin/stats` polled every 50 ms until `applied` = {events}. The server was listening {:.3} s \
             after its spawn.\n\n| step | seconds | events/s |\n|---|---:|---:|\n",
            thousands(args.users as f64),
            i.startup_seconds,
        ));
        for (step, seconds) in [
            ("produce the backlog (acks=all, linger.ms 5)", i.produce_seconds),
            (
                "a bare consumer reads it all (the broker's consume floor)",
                i.floor_seconds,
            ),
            ("rankstream: spawn -> all applied", i.applied_seconds),
            (
                "rankstream: listening -> all applied",
                i.applied_seconds - i.startup_seconds,
            ),
        ] {
            let rate = thousands(plan.ingest_events as f64 / seconds);
            out.push_str(&format!("| {step} | {seconds:.3} | {rate} |\n"));
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let plan = Plan::new(&args);
    let counts = [args.batch, args.concurrency, args.runs, args.sessions, args.users];
    ensure!(
        !counts.contains(&0),
        "--batch, --concurrency, --runs, --sessions and --users must be > 0"
    );
    let binary = server_binary(args.server_bin.as_ref())?;
    let mut report = Report::default();

    if plan.parts[0] || plan.parts[1] {
        let server = SpawnedServer::start(&binary, &[], &RATE_LIMIT_ENV).await?;
        server.announce();
        let target = Arc::new(server.target()?);
        let work = async {
            if plan.parts[0] {
                rest_freshness(&target, plan.freshness_events, &args, &mut report).await?;
            }
            if plan.parts[1] {
                report.bulk_runs = rest_bulk(&target, plan.bulk_events, &args).await?;
            }
            anyhow::Ok(())
        };
        server.stop_after(work).await?;
    }
    for (part, ingest) in [(2, false), (3, true)] {
        if plan.parts[part] {
            kafka_part(&args, &plan, &binary, ingest, &mut report).await?;
        }
    }

    print_goals(&goals(&report, &plan));
    if let Some(path) = &args.write_markdown {
        publish_section(path, MARKDOWN_HEADING, &markdown_section(&args, &plan, &report), None)?;
    }
    Ok(())
}
