//! `bench-cluster`: rankstream in cluster mode with 1, 2 and 3 nodes sharing 24 shards
//! over a tansu broker of its own, all in one run:
//!
//! 1. **events/s**: bulk `POST /v1/events` batches (500 events, many users) sent round-robin
//!    to every node; a 202 means produced to Kafka and applied by the owning node.
//! 2. **recommend req/s**: a closed loop of recommends with 100 candidates for users with
//!    live state, round-robin over the nodes; client p50/p99.
//! 3. **cross-node freshness** (2 and 3 nodes): a click posted to a node that does not own
//!    its user, timed until `GET /v1/users/{uid}/state` on another node lists it, beside
//!    the broker's own produce -> consume time measured in the same run (the floor).
//! 4. **forwarding overhead** (2 and 3 nodes): the same recommend sent to its owner and to
//!    another node, alternately; the difference is what forwarding costs.
//!
//! The nodes, the broker and this client share the machine's cores, so throughput does
//! not grow with nodes here: the figures show what forwarding and replication cost.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rankstream::topology::{shard_for, Topology};
use serde_json::{json, Value};

use bench::{
    check_upserted, elapsed_ms, kafka_floor, markdown_row, ms, percentile, publish_section, section_head,
    server_binary, thousands, Broker, Connection, Endpoint, IndexEntry, SpawnedServer, Target, CATALOG_ITEMS, EVENTS,
    RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Cluster";
const SHARDS: u16 = 24;
const FLOOR_TOPIC: &str = "bench-floor";
const RECOMMEND: Endpoint = Endpoint::post_json("/v1/recommend");
const ITEMS: usize = 1_000;
const CANDIDATES: usize = 100;
const BATCH: usize = 250;

#[derive(Parser, Debug)]
#[command(about = "Benchmark rankstream with 1, 2 and 3 nodes sharing 24 shards over Kafka")]
struct Args {
    /// The rankstream binary (default: target/release/rankstream beside this tool).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/broker.sh"))]
    broker_script: PathBuf,
    /// Users the events and recommends are spread over.
    #[arg(long, default_value_t = 2_000)]
    users: usize,
    /// Events posted for the events/s figure.
    #[arg(long, default_value_t = 10_000)]
    events: usize,
    /// Client connections (in all) of the events and recommend loops. More than two
    /// overload the tansu broker (sqlite) on two cores: produce requests time out.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// How long the recommend loop runs, in seconds.
    #[arg(long, default_value_t = 5)]
    recommend_secs: u64,
    /// Clicks timed for freshness, requests per side for forwarding, messages for the floor.
    #[arg(long, default_value_t = 300)]
    samples: usize,
    /// Extra librdkafka settings of the nodes (`[kafka.client]`), KEY=VALUE, repeatable.
    #[arg(long)]
    kafka_client: Vec<String>,
    /// Write the results as the "Cluster" section of this markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

/// The figures of one node count.
#[derive(Default)]
struct Run {
    nodes: usize,
    events_per_sec: f64,
    events_retried: usize,
    recommend_per_sec: f64,
    recommend_ms: Vec<f64>,
    freshness_ms: Vec<f64>,
    floor_ms: Vec<f64>,
    owner_ms: Vec<f64>,
    forwarded_ms: Vec<f64>,
}

/// A broker and `count` nodes, with the topology they share.
struct Cluster {
    _broker: Broker,
    topology: Topology,
    nodes: Vec<SpawnedServer>,
    targets: Vec<Arc<Target>>,
    brokers: String,
}

impl Cluster {
    async fn start(args: &Args, binary: &std::path::Path, count: usize) -> Result<Cluster> {
        let broker = Broker::start(&args.broker_script)?;
        let mut text = format!("shards = {SHARDS}\n");
        let per_node = usize::from(SHARDS) / count;
        for index in 0..count {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let last = if index + 1 == count {
                usize::from(SHARDS) - 1
            } else {
                (index + 1) * per_node - 1
            };
            text.push_str(&format!(
                "[[node]]\nid = \"n{index}\"\nhttp = \"127.0.0.1:{port}\"\nshards = \"{}-{last}\"\n",
                index * per_node
            ));
        }
        let topology = Topology::parse(&text)?;
        let topology_file = broker.dir.join("topology.toml");
        std::fs::write(&topology_file, &text)?;
        let config_file = broker.dir.join("rankstream.toml");
        let mut config = format!(
            "[kafka]\nenabled = true\nbrokers = \"{}\"\n[kafka.client]\n",
            broker.brokers()
        );
        for setting in &args.kafka_client {
            let (key, value) = setting.split_once('=').context("--kafka-client takes KEY=VALUE")?;
            config.push_str(&format!("{key:?} = {value:?}\n"));
        }
        std::fs::write(&config_file, config)?;
        let init = std::process::Command::new(binary)
            .args(["cluster", "init", "--brokers", &broker.brokers(), "--topology"])
            .arg(&topology_file)
            .output()?;
        ensure!(
            init.status.success(),
            "cluster init: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        broker.topic(FLOOR_TOPIC, 1)?;
        let key = bench::generate_key();
        let mut env: Vec<(&str, &str)> = RATE_LIMIT_ENV.to_vec();
        env.push(("RANKSTREAM_ADMIN_KEY", &key));
        let mut nodes = Vec::new();
        for node in &topology.nodes {
            let extra: Vec<OsString> = vec![
                "--config".into(),
                config_file.clone().into(),
                "--topology".into(),
                topology_file.clone().into(),
                "--node-id".into(),
                node.id.clone().into(),
                "--bind".into(),
                node.http.clone().into(),
            ];
            let server = SpawnedServer::start(binary, &extra, &env).await?;
            server.announce();
            nodes.push(server);
        }
        let targets = nodes
            .iter()
            .map(|node| Target::parse(&node.url, key.clone()).map(Arc::new))
            .collect::<Result<_>>()?;
        let brokers = broker.brokers();
        Ok(Cluster {
            _broker: broker,
            topology,
            nodes,
            targets,
            brokers,
        })
    }

    fn owner(&self, uid: &str) -> usize {
        self.topology.owner_of(shard_for(uid.as_bytes(), SHARDS))
    }

    async fn stop(self) -> Result<()> {
        for node in self.nodes {
            node.stop().await?;
        }
        Ok(())
    }
}

fn item(n: usize) -> String {
    format!("i{n}")
}

fn click(id: &str, uid: &str, item: usize) -> Value {
    json!({"id": id, "type": "click", "uid": uid, "sid": format!("s-{uid}"), "item_id": self::item(item),
           "click_type": "tile", "original_timestamp": chrono::Utc::now().timestamp_millis()})
}

/// The catalog through the first node, then visible on every node.
async fn load_catalog(cluster: &Cluster) -> Result<()> {
    let lines: Vec<String> = (0..ITEMS)
        .map(|n| {
            json!({"id": item(n), "title": format!("Item {n}"), "price": n % 50, "groups": [format!("g{}", n % 20)]})
                .to_string()
        })
        .collect();
    let first = &cluster.targets[0];
    let mut connection = first.connect().await?;
    let (status, body) = first
        .call(&mut connection, &CATALOG_ITEMS, Bytes::from(lines.join("\n")))
        .await?;
    check_upserted(status, &body, ITEMS)?;
    for target in &cluster.targets {
        let mut connection = target.connect().await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, _) = target
                .get(&mut connection, &format!("/v1/catalog/item/items/{}", item(ITEMS - 1)))
                .await?;
            if status == 200 {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "the catalog did not reach {} within 60 s",
                target.authority
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Part 1: bulk batches round-robin over the nodes; events per second of wall time, and
/// the batches answered 503 (and sent again).
async fn events_per_sec(cluster: &Cluster, args: &Args) -> Result<(f64, usize)> {
    let mut rng = StdRng::seed_from_u64(7);
    let batches: Vec<Bytes> = (0..args.events.div_ceil(BATCH))
        .map(|b| {
            let events: Vec<Value> = (0..BATCH)
                .map(|n| {
                    click(
                        &format!("bulk-{b}-{n}"),
                        &format!("u{}", rng.random_range(0..args.users)),
                        rng.random_range(0..ITEMS),
                    )
                })
                .collect();
            Bytes::from(json!({ "events": events }).to_string())
        })
        .collect();
    let batches = Arc::new(batches);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..args.connections {
        let target = cluster.targets[worker % cluster.targets.len()].clone();
        let (batches, next) = (batches.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut connection = target.connect().await?;
            let mut retries = 0;
            loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(batch) = batches.get(index) else {
                    return Ok::<_, anyhow::Error>(retries);
                };
                // A 503 or 408 (the broker did not take the batch in time) is retried as a
                // client would: events are applied once per id.
                loop {
                    let (status, body) = target.call(&mut connection, &EVENTS, batch.clone()).await?;
                    if status == 503 || status == 408 {
                        retries += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    check_all_accepted(status, &body, BATCH)?;
                    break;
                }
            }
        }));
    }
    let mut retries = 0;
    for worker in workers {
        retries += worker.await??;
    }
    Ok((
        (batches.len() * BATCH) as f64 / started.elapsed().as_secs_f64(),
        retries,
    ))
}

/// A 202 that accepted all `expected` events. With Kafka on, the node's consumer may
/// apply a REST event it produced before the REST path does; the 202 then counts it
/// among `duplicates`, and it is still applied once.
fn check_all_accepted(status: hyper::StatusCode, body: &[u8], expected: usize) -> Result<()> {
    ensure!(status == 202, "status {status}: {}", bench::snippet(body));
    let reply: Value = serde_json::from_slice(body)?;
    ensure!(
        reply["accepted"] == expected && reply["rejected"] == json!([]),
        "{expected} accepted events expected, {} were; first refusal: {}",
        reply["accepted"],
        reply["rejected"][0]
    );
    Ok(())
}

fn recommend_body(uid: &str, rng: &mut StdRng) -> Bytes {
    let candidates: Vec<String> = (0..CANDIDATES).map(|_| item(rng.random_range(0..ITEMS))).collect();
    Bytes::from(json!({"model_id": "default", "user_id": uid, "item_ids": candidates}).to_string())
}

/// Part 2: a closed loop of recommends round-robin over the nodes.
async fn recommend_load(cluster: &Cluster, args: &Args) -> Result<(f64, Vec<f64>)> {
    let deadline = Instant::now() + Duration::from_secs(args.recommend_secs);
    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..args.connections {
        let targets = cluster.targets.clone();
        let users = args.users;
        workers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(worker as u64);
            let mut connections: Vec<Connection> = Vec::new();
            for target in &targets {
                connections.push(target.connect().await?);
            }
            let mut latencies = Vec::new();
            let mut turn = worker;
            while Instant::now() < deadline {
                let index = turn % targets.len();
                turn += 1;
                let body = recommend_body(&format!("u{}", rng.random_range(0..users)), &mut rng);
                let sent = Instant::now();
                let (status, reply) = targets[index].call(&mut connections[index], &RECOMMEND, body).await?;
                ensure!(status == 200, "recommend: {status} {}", bench::snippet(&reply));
                latencies.push(elapsed_ms(sent));
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await??);
    }
    let per_sec = latencies.len() as f64 / started.elapsed().as_secs_f64();
    Ok((per_sec, latencies))
}

/// Part 3: a click posted to a node that does not own its user, until another node's
/// read of the user lists it.
async fn freshness(cluster: &Cluster, args: &Args) -> Result<Vec<f64>> {
    let count = cluster.targets.len();
    let mut connections = Vec::new();
    for target in &cluster.targets {
        connections.push(target.connect().await?);
    }
    let mut latencies = Vec::new();
    let mut n = 0;
    while latencies.len() < args.samples {
        n += 1;
        let uid = format!("fresh-{n}");
        let owner = cluster.owner(&uid);
        let (post, read) = ((owner + 1) % count, (owner + 2) % count);
        let id = format!("fresh-click-{n}");
        let body = Bytes::from(click(&id, &uid, n % ITEMS).to_string());
        let started = Instant::now();
        let (status, reply) = cluster.targets[post]
            .call(&mut connections[post], &EVENTS, body)
            .await?;
        check_all_accepted(status, &reply, 1)?;
        loop {
            let (status, state) = cluster.targets[read]
                .get(&mut connections[read], &format!("/v1/users/{uid}/state"))
                .await?;
            if status == 200 && String::from_utf8_lossy(&state).contains(&id) {
                break;
            }
            ensure!(
                started.elapsed() < Duration::from_secs(10),
                "{id} not visible on node {read} within 10 s"
            );
        }
        latencies.push(elapsed_ms(started));
    }
    Ok(latencies)
}

/// Part 4: the same recommend sent to its owner and to another node, alternately.
async fn forwarding(cluster: &Cluster, args: &Args) -> Result<(Vec<f64>, Vec<f64>)> {
    let count = cluster.targets.len();
    let mut connections = Vec::new();
    for target in &cluster.targets {
        connections.push(target.connect().await?);
    }
    let mut rng = StdRng::seed_from_u64(11);
    let (mut owner_ms, mut forwarded_ms) = (Vec::new(), Vec::new());
    for n in 0..args.samples {
        let uid = format!("u{}", n % args.users);
        let owner = cluster.owner(&uid);
        let body = recommend_body(&uid, &mut rng);
        for (node, out) in [(owner, &mut owner_ms), ((owner + 1) % count, &mut forwarded_ms)] {
            let sent = Instant::now();
            let (status, reply) = cluster.targets[node]
                .call(&mut connections[node], &RECOMMEND, body.clone())
                .await?;
            ensure!(
                status == 200,
                "recommend on node {node}: {status} {}",
                bench::snippet(&reply)
            );
            out.push(elapsed_ms(sent));
        }
    }
    Ok((owner_ms, forwarded_ms))
}

async fn run(args: &Args, binary: &std::path::Path, nodes: usize) -> Result<Run> {
    let cluster = Cluster::start(args, binary, nodes).await?;
    load_catalog(&cluster).await.context("loading the catalog")?;
    let mut run = Run {
        nodes,
        ..Run::default()
    };
    (run.events_per_sec, run.events_retried) = events_per_sec(&cluster, args).await.context("events")?;
    println!(
        "{nodes} node(s): {} events/s ({} batches answered 503/408 and sent again)",
        thousands(run.events_per_sec),
        run.events_retried
    );
    (run.recommend_per_sec, run.recommend_ms) = recommend_load(&cluster, args).await.context("recommend")?;
    println!(
        "{nodes} node(s): {} recommends/s, p50 {} p99 {}",
        thousands(run.recommend_per_sec),
        ms(percentile(&run.recommend_ms, 0.5)),
        ms(percentile(&run.recommend_ms, 0.99))
    );
    if nodes > 1 {
        run.freshness_ms = freshness(&cluster, args).await.context("freshness")?;
        run.floor_ms = kafka_floor(&cluster.brokers, args.samples, FLOOR_TOPIC, &[FLOOR_TOPIC], 0..1)
            .await?
            .0;
        (run.owner_ms, run.forwarded_ms) = forwarding(&cluster, args).await.context("forwarding")?;
        println!(
            "{nodes} nodes: freshness p50 {} p99 {} (floor p50 {} p99 {}); recommend at the owner p50 {} / forwarded p50 {}",
            ms(percentile(&run.freshness_ms, 0.5)),
            ms(percentile(&run.freshness_ms, 0.99)),
            ms(percentile(&run.floor_ms, 0.5)),
            ms(percentile(&run.floor_ms, 0.99)),
            ms(percentile(&run.owner_ms, 0.5)),
            ms(percentile(&run.forwarded_ms, 0.5))
        );
    }
    cluster.stop().await?;
    Ok(run)
}

fn markdown(args: &Args, runs: &[Run]) -> String {
    let mut out = section_head(MARKDOWN_HEADING, "bench-cluster");
    out.push_str(&format!(
        "- Setup: for 1, 2 and 3 nodes in turn, a fresh tansu broker (sqlite) and nodes on 127.0.0.1 with 24 shards split evenly, \
         topics made by `rankstream cluster init`, Kafka on for every node count (so 1 node is comparable), durability sync; \
         a catalog of {ITEMS} items through the first node. Events: {} clicks of {} users in batches of {BATCH}, round-robin \
         over the nodes on {} connections. Recommend: {} s closed loop on {} connections, {CANDIDATES} candidates, model \
         `default`, users with live state. Freshness: {} clicks, each posted to a node that does not own its user and timed \
         until a third node's `GET /v1/users/{{uid}}/state` lists it; floor: the broker's own produce -> consume time (one \
         partition, bare consumer) in the same run. Forwarding: {} recommends, each sent to its owner and to another node.\n\
         - **All nodes, the broker and the client share this machine's 2 cores**: throughput does not grow with nodes here; \
         what the columns show is what forwarding, Kafka and replication cost.\n\n",
        thousands(args.events as f64),
        thousands(args.users as f64),
        args.connections,
        args.recommend_secs,
        args.connections,
        args.samples,
        args.samples,
    ));
    out.push_str(&markdown_row(&[
        "nodes",
        "events/s",
        "event batches answered 503/408 (retried)",
        "recommend req/s",
        "recommend p50",
        "recommend p99",
    ]));
    out.push('\n');
    out.push_str(&markdown_row(&["---"; 6]));
    out.push('\n');
    for run in runs {
        out.push_str(&markdown_row(&[
            run.nodes.to_string(),
            thousands(run.events_per_sec),
            run.events_retried.to_string(),
            thousands(run.recommend_per_sec),
            ms(percentile(&run.recommend_ms, 0.5)),
            ms(percentile(&run.recommend_ms, 0.99)),
        ]));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&markdown_row(&[
        "nodes",
        "cross-node freshness p50 / p99",
        "broker floor p50 / p99",
        "p99 - floor p99 (target <= 2 ms)",
        "recommend at owner p50 / p99",
        "forwarded p50 / p99",
        "forwarding cost p50",
    ]));
    out.push('\n');
    out.push_str(&markdown_row(&["---"; 7]));
    out.push('\n');
    for run in runs.iter().filter(|run| run.nodes > 1) {
        let pair = |values: &[f64]| format!("{} / {}", ms(percentile(values, 0.5)), ms(percentile(values, 0.99)));
        let over = percentile(&run.freshness_ms, 0.99) - percentile(&run.floor_ms, 0.99);
        out.push_str(&markdown_row(&[
            run.nodes.to_string(),
            pair(&run.freshness_ms),
            pair(&run.floor_ms),
            format!("{} ({})", ms(over), if over <= 2.0 { "met" } else { "**not met**" }),
            pair(&run.owner_ms),
            pair(&run.forwarded_ms),
            ms(percentile(&run.forwarded_ms, 0.5) - percentile(&run.owner_ms, 0.5)),
        ]));
        out.push('\n');
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let binary = server_binary(args.server_bin.as_ref())?;
    let mut runs = Vec::new();
    for nodes in 1..=3 {
        runs.push(
            run(&args, &binary, nodes)
                .await
                .with_context(|| format!("{nodes} node(s)"))?,
        );
    }
    let section = markdown(&args, &runs);
    println!("\n{section}");
    if let Some(path) = &args.write_markdown {
        let index = IndexEntry {
            tool: "bench-cluster",
            row: "| Cluster | `tools/src/bin/bench-cluster.rs` (`bench-cluster`) | events/s and recommend req/s with 1, 2, 3 nodes; cross-node freshness p99 <= the broker's floor + 2 ms; forwarding cost |",
        };
        publish_section(path, MARKDOWN_HEADING, &section, Some(&index))?;
    }
    Ok(())
}
