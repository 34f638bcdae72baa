//! Memory benchmark: what a live user and a known (persisted, not live) user cost in
//! resident memory, measured black-box (`/proc/PID/status` VmRSS of the server).
//! Targets (issue 23): <= 1 KB of RSS per live user with 10 recent events, <= 0.2 GiB per
//! 1M known users, and a default node (its default live-actor cap full) under 2 GiB.
//!
//! 1. Live: `rankstream serve` with a live-actor cap that holds every user (durability
//!    sync, a fresh temp dir) and a catalog of `--items` items. Users are added in `--steps` equal steps
//!    up to `--users`, each with `--events-per-user` click/view events (`uid` only, no
//!    session, so one live actor per user). After each step, once the server has settled,
//!    RSS and the live actors (`rankstream_live_actors` in `/metrics`) are read. The cost
//!    of a live user is the least-squares slope of RSS over live actors.
//! 2. Known: a second server with the live cap lowered to `--known-cap-per-shard` per shard,
//!    the same steps up to `--known-users`: the live actors stay at the cap, the others are
//!    passivated to RocksDB. The cost of a known user is the slope of RSS over users.
//! 3. Projection: the node at rest (RSS before any user) + the default cap
//!    (`engine.max_live_actors_per_shard` × 8 shards) × the cost of a live user.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-memory
//! target/release/bench-memory --write-markdown BENCHMARKS.md
//! ```

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use hyper::StatusCode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use bench::{
    goals_table, least_squares, markdown_row, post_events, print_goals, publish_section, section_head, server_binary,
    thousands, upsert_items, Goal, IndexEntry, RunArgs, SpawnedServer, Target, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Memory per user";
const INDEX: IndexEntry = IndexEntry {
    tool: "bench-memory",
    row: "| Memory per user | `tools/src/bin/bench-memory.rs` (`bench-memory`) | <= 1 KB RSS per live user with 10 events; \
          <= 0.2 GiB per 1M known users; a default node under 2 GiB (issue 23) |",
};
const TABLE: &str = "items";
const SETUP_BATCH: usize = 5_000;
/// Events per request while users are added.
const EVENT_BATCH: usize = 10_000;
/// The server's default live-actor cap, per shard, and its shards (`config/default.toml`,
/// the embedded single-node topology).
const DEFAULT_CAP_PER_SHARD: usize = 20_000;
const DEFAULT_SHARDS: usize = 8;
const CAP_ENV: &str = "RANKSTREAM__ENGINE__MAX_LIVE_ACTORS_PER_SHARD";
/// The live phase's cap per shard: room for every user of the phase.
const LIVE_PHASE_CAP_PER_SHARD: usize = 100_000;
/// Targets of the issue.
const LIVE_TARGET_BYTES: f64 = 1024.0;
const KNOWN_TARGET_BYTES: f64 = 0.2 * (1u64 << 30) as f64 / 1e6;
const NODE_TARGET_BYTES: f64 = 2.0 * (1u64 << 30) as f64;
/// Time given to the server after a step before RSS is read (checkpoints, flushes).
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Parser, Debug)]
#[command(about = "Measure the resident memory of live and known users")]
struct Args {
    /// Users of the live phase (every one stays live).
    #[arg(long, default_value_t = 200_000)]
    users: usize,
    /// Users of the known phase (most are passivated).
    #[arg(long, default_value_t = 400_000)]
    known_users: usize,
    /// Live actors per shard in the known phase.
    #[arg(long, default_value_t = 1_000)]
    known_cap_per_shard: usize,
    /// Steps of each phase (a reading after each).
    #[arg(long, default_value_t = 4)]
    steps: usize,
    /// Events per user (clicks and views of random items).
    #[arg(long, default_value_t = 10)]
    events_per_user: usize,
    /// Catalog items.
    #[arg(long, default_value_t = 10_000)]
    items: usize,
    #[command(flatten)]
    run: RunArgs,
}

/// One reading after a step (at rest: no users).
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    users: usize,
    live: usize,
    rss_bytes: f64,
    /// RocksDB's block cache (memtables charged to it) and table readers.
    rocksdb_bytes: f64,
    /// The models' heap (`/v1/admin/stats` `models.memory_bytes`).
    models_bytes: f64,
}

impl Reading {
    /// RSS but RocksDB's and the models': the live actors, the event pipeline, the rest.
    fn other_bytes(&self) -> f64 {
        self.rss_bytes - self.rocksdb_bytes - self.models_bytes
    }
}

/// One phase: the node at rest, then a reading per step.
struct Phase {
    at_rest: Reading,
    readings: Vec<Reading>,
}

impl Phase {
    /// `y` per unit of `x` (least squares over the readings and the node at rest).
    fn slope(&self, x: impl Fn(&Reading) -> f64, y: impl Fn(&Reading) -> f64) -> f64 {
        let points: Vec<(f64, f64)> = std::iter::once(&self.at_rest)
            .chain(&self.readings)
            .map(|reading| (x(reading), y(reading)))
            .collect();
        least_squares(&points).0
    }
}

fn rss_bytes(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("the server's /proc status")?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .context("no VmRSS in /proc status")?;
    Ok(kib * 1024.0)
}

/// RSS, RocksDB's memory and the models' now, with `users` added so far.
async fn read(target: &Target, pid: u32, users: usize) -> Result<Reading> {
    let mut sender = target.connect().await?;
    let (status, body) = target.get(&mut sender, "/v1/admin/stats").await?;
    ensure!(status == StatusCode::OK, "GET /v1/admin/stats: {status}");
    let stats: Value = serde_json::from_slice(&body)?;
    let number = |value: &Value| value.as_f64().unwrap_or(0.0);
    let memory = &stats["storage"]["memory"];
    Ok(Reading {
        users,
        live: live_actors(target).await?,
        rss_bytes: rss_bytes(pid)?,
        rocksdb_bytes: number(&memory["cache"]) + number(&memory["table_readers"]),
        models_bytes: number(&stats["models"]["memory_bytes"]),
    })
}

/// The live actors of every shard and kind, from `/metrics`.
async fn live_actors(target: &Target) -> Result<usize> {
    let mut sender = target.connect().await?;
    let (status, body) = target.get(&mut sender, "/metrics").await?;
    ensure!(status == StatusCode::OK, "GET /metrics: {status}");
    let text = String::from_utf8_lossy(&body);
    let live: f64 = text
        .lines()
        .filter(|line| line.starts_with("rankstream_live_actors{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Ok(live as usize)
}

/// The server's environment with a live-actor cap of `cap` per shard.
fn with_cap(cap: &str) -> Vec<(&str, &str)> {
    let mut env = RATE_LIMIT_ENV.to_vec();
    env.push((CAP_ENV, cap));
    env
}

fn user_id(index: usize) -> String {
    format!("mem-user-{index:07}")
}

/// Adds users `from..to`, each with `events_per_user` events on random items.
async fn add_users(target: &Target, args: &Args, from: usize, to: usize, rng: &mut StdRng) -> Result<()> {
    let mut sender = target.connect().await?;
    let mut events = Vec::with_capacity(EVENT_BATCH);
    let now = chrono::Utc::now();
    for user in from..to {
        for event in 0..args.events_per_user {
            let item = format!("item-{:05}", rng.random_range(0..args.items));
            let at = now - chrono::Duration::seconds((args.events_per_user - event) as i64 * 10);
            let mut event = json!({"type": "view", "uid": user_id(user), "item_id": item,
                                   "original_timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)});
            if rng.random_bool(0.5) {
                event["type"] = json!("click");
                event["click_type"] = json!("product");
            }
            events.push(event);
        }
        if events.len() >= EVENT_BATCH {
            post_events(target, &mut sender, &events, EVENT_BATCH).await?;
            events.clear();
        }
    }
    if !events.is_empty() {
        post_events(target, &mut sender, &events, EVENT_BATCH).await?;
    }
    Ok(())
}

async fn create_catalog(target: &Target, args: &Args) -> Result<()> {
    let mut sender = target.connect().await?;
    let items: Vec<Value> = (0..args.items)
        .map(|index| {
            json!({"id": format!("item-{index:05}"), "_table": TABLE, "name": format!("Item {index}"),
                   "groups": [format!("group-{}", index % 20)], "price": (index % 500) as f64})
        })
        .collect();
    upsert_items(target, &mut sender, &items, SETUP_BATCH).await
}

/// Runs one phase on a fresh server with `env`: `total` users in `args.steps` steps.
async fn phase(binary: &std::path::Path, args: &Args, env: &[(&str, &str)], total: usize, name: &str) -> Result<Phase> {
    let server = SpawnedServer::start(binary, &[], env).await?;
    server.announce();
    let pid = server.pid().context("the server's pid")?;
    let target = server.target()?;
    let work = async {
        let mut rng = StdRng::seed_from_u64(args.run.seed);
        create_catalog(&target, args).await?;
        tokio::time::sleep(SETTLE).await;
        let at_rest = read(&target, pid, 0).await?;
        println!(
            "{name}: at rest with {} items: {}",
            thousands(args.items as f64),
            describe(&at_rest)
        );
        let mut readings = Vec::new();
        for step in 1..=args.steps {
            let (from, to) = ((step - 1) * total / args.steps, step * total / args.steps);
            add_users(&target, args, from, to, &mut rng).await?;
            tokio::time::sleep(SETTLE).await;
            let reading = read(&target, pid, to).await?;
            println!(
                "{name}: {} users, {} live actors: {}",
                thousands(reading.users as f64),
                thousands(reading.live as f64),
                describe(&reading)
            );
            readings.push(reading);
        }
        anyhow::Ok(Phase { at_rest, readings })
    };
    server.stop_after(work).await
}

const MIB: f64 = (1u64 << 20) as f64;

fn describe(reading: &Reading) -> String {
    format!(
        "RSS {:.1} MiB (RocksDB {:.1}, models {:.1}, the rest {:.1})",
        reading.rss_bytes / MIB,
        reading.rocksdb_bytes / MIB,
        reading.models_bytes / MIB,
        reading.other_bytes() / MIB
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.users > 0 && args.known_users > 0 && args.steps > 0 && args.events_per_user > 0 && args.items > 0,
        "counts must be > 0"
    );
    ensure!(
        args.users <= LIVE_PHASE_CAP_PER_SHARD * DEFAULT_SHARDS,
        "--users above the live phase's cap would not all stay live"
    );
    let binary = server_binary(args.run.server_bin.as_ref())?;
    let (live_cap, known_cap) = (
        LIVE_PHASE_CAP_PER_SHARD.to_string(),
        args.known_cap_per_shard.to_string(),
    );
    let live = phase(&binary, &args, &with_cap(&live_cap), args.users, "live").await?;
    let known = phase(&binary, &args, &with_cap(&known_cap), args.known_users, "known").await?;

    let live_actors = |reading: &Reading| reading.live as f64;
    let users = |reading: &Reading| reading.users as f64;
    let per_live = live.slope(live_actors, |reading| reading.rss_bytes);
    let per_known = known.slope(users, |reading| reading.rss_bytes);
    let parts = |phase: &Phase, x: &dyn Fn(&Reading) -> f64| {
        [
            phase.slope(x, |reading| reading.rocksdb_bytes),
            phase.slope(x, |reading| reading.models_bytes),
            phase.slope(x, Reading::other_bytes),
        ]
    };
    let (live_parts, known_parts) = (parts(&live, &live_actors), parts(&known, &users));
    for (name, [rocksdb, models, other]) in [("live user", live_parts), ("known user", known_parts)] {
        println!("per {name}: RocksDB {rocksdb:.0} bytes, models {models:.0} bytes, the rest {other:.0} bytes");
    }
    let default_cap = (DEFAULT_CAP_PER_SHARD * DEFAULT_SHARDS) as f64;
    let projected = live.at_rest.rss_bytes + default_cap * per_live;
    let goals = vec![
        Goal::new(
            format!("RSS per live user with {} events", args.events_per_user),
            format!("{per_live:.0} bytes"),
            "<= 1 KB",
            per_live <= LIVE_TARGET_BYTES,
        ),
        Goal::new(
            "RSS per 1M known (persisted, not live) users",
            format!(
                "{:.3} GiB ({per_known:.0} bytes a user)",
                per_known * 1e6 / (1u64 << 30) as f64
            ),
            "<= 0.2 GiB",
            per_known <= KNOWN_TARGET_BYTES,
        ),
        Goal::new(
            format!(
                "a default node with its live cap ({} actors) full",
                thousands(default_cap)
            ),
            format!("{:.2} GiB (projected)", projected / (1u64 << 30) as f64),
            "< 2 GiB",
            projected < NODE_TARGET_BYTES,
        ),
    ];
    print_goals(&goals);
    if let Some(path) = &args.run.write_markdown {
        let section = markdown_section(&args, &live, &known, &goals, [live_parts, known_parts]);
        publish_section(path, MARKDOWN_HEADING, &section, Some(&INDEX))?;
    }
    Ok(())
}

fn markdown_section(args: &Args, live: &Phase, known: &Phase, goals: &[Goal], parts: [[f64; 3]; 2]) -> String {
    let mut out = section_head(MARKDOWN_HEADING, "bench-memory");
    out.push_str(&format!(
        "- Server: `rankstream serve` spawned by the tool on a fresh data dir, durability sync, engine defaults; \
         RSS is `VmRSS` of `/proc/PID/status`, read {} s after each step; live actors from `/metrics`.\n\
         - Data: {} catalog items; users added in {} steps, each with {} click/view events on random items, `uid` \
         only (one live actor a user).\n\
         - Live phase: a cap of {} per shard ({} shards), {} users, all live. Known phase: a cap of {} per \
         shard, {} users. The projection: the node at rest + the default cap ({} per shard) × a live user. Each cost is the least-squares slope of RSS over live actors (live) or users (known), \
         the node at rest included.\n\n",
        SETTLE.as_secs(),
        thousands(args.items as f64),
        args.steps,
        args.events_per_user,
        thousands(LIVE_PHASE_CAP_PER_SHARD as f64),
        DEFAULT_SHARDS,
        thousands(args.users as f64),
        thousands(args.known_cap_per_shard as f64),
        thousands(args.known_users as f64),
        thousands(DEFAULT_CAP_PER_SHARD as f64),
    ));
    out.push_str(&goals_table(goals));
    out.push_str(
        "\nWhere a user's bytes go (slopes of each part; RocksDB: block cache with its memtables, and table \
         readers; models: their heap; the rest: RSS less both, the live actors among it):\n\n\
         | per | RocksDB | models | the rest |\n|---|---|---|---|\n",
    );
    for (name, [rocksdb, models, other]) in [("live user", parts[0]), ("known user", parts[1])] {
        out.push_str(&format!(
            "| {name} | {rocksdb:.0} bytes | {models:.0} bytes | {other:.0} bytes |\n"
        ));
    }
    out.push_str(
        "\n| phase | users | live actors | RSS | RocksDB | models | the rest |\n|---|---|---|---|---|---|---|\n",
    );
    for (name, phase) in [("live", live), ("known", known)] {
        for reading in std::iter::once(&phase.at_rest).chain(&phase.readings) {
            out.push_str(&markdown_row(&[
                name.to_string(),
                thousands(reading.users as f64),
                thousands(reading.live as f64),
                format!("{:.1} MiB", reading.rss_bytes / MIB),
                format!("{:.1} MiB", reading.rocksdb_bytes / MIB),
                format!("{:.1} MiB", reading.models_bytes / MIB),
                format!("{:.1} MiB", reading.other_bytes() / MIB),
            ]));
            out.push('\n');
        }
    }
    out
}
