//! Soak: rankstream under steady mixed load for an hour, watching its memory and open
//! files. Targets (issue 19): RSS growth < 5% after warm-up, no growth of open files
//! other than the table files RocksDB keeps open (one per SST file on disk, which grow
//! with the data written), 0 failed requests.
//!
//! 1. Setup: spawn `rankstream serve` (fresh temp data dir, durability sync, per-key rate
//!    limit raised), upsert `--items` items and `--events-per-user` events for each of
//!    `--users` users and their sessions; then `--seed-events` more, uniform over items
//!    and sessions, and waits until the models have learned them: with `items` × 1,000
//!    the models start at their per-item bounds, so that the hour measures what does
//!    not stop growing.
//! 2. Capacity: a closed loop of `POST /v1/recommend` (100 candidates, a user and session
//!    with live state, model `default`) and one of `POST /v1/events` (one new event per
//!    request: the bodies carry no `id`, so the server names each), `--capacity-seconds`
//!    each on `--connections` connections: their maxima R and E.
//! 3. Soak: `--minutes` of both at once, open loops at R·f/2 and E·f/2 requests/s
//!    (f = `--load-fraction`, 0.5: half of the machine's capacity, shared by the two), in
//!    intervals of `--interval-seconds`. After each interval the tool reads the server's
//!    RSS and threads (`/proc/PID/status`), its open files (`/proc/PID/fd`, table files
//!    told apart), the SST files and bytes under its data dir, and the interval's
//!    latencies and failures.
//! 4. Verdict on window medians from the end of `--warmup-minutes` on: the readings'
//!    first window against their last (each a fifth of them, at least three), for RSS,
//!    the open files other than table files and sockets, and the sockets (the load's
//!    connections). Largest counts, and how many files are RocksDB logs, are shown.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-soak
//! target/release/bench-soak --seed-events 10000000 --write-markdown BENCHMARKS.md   # one hour
//! target/release/bench-soak --minutes 3 --warmup-minutes 1 --interval-seconds 20   # trying it out
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use hyper::StatusCode;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use bench::{
    goals_table, markdown_row, median, ms, percentile, post_events, print_goals, publish_section, section_head,
    server_binary, thousands, upsert_items, Endpoint, Goal, IndexEntry, Load, RunArgs, Span, SpawnedServer, Tally,
    Target, EVENTS, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Soak: one hour at half capacity";
const INDEX: IndexEntry = IndexEntry {
    tool: "bench-soak",
    row: "| Soak: one hour at half capacity | `tools/src/bin/bench-soak.rs` (`bench-soak`) | RSS growth < 5% after warm-up; \
          no growth of open files (table files aside); 0 failed requests |",
};
const TABLE: &str = "items";
const RECOMMEND: Endpoint = Endpoint::post_json("/v1/recommend");
const SETUP_BATCH: usize = 5_000;
/// Distinct bodies of each kind, cycled.
const BODIES: usize = 5_000;
const RSS_GROWTH_TARGET: f64 = 0.05;
/// Rankings kept 5 minutes instead of 7 days: at half capacity the recommend records
/// (100 items with their features each) are ~5 MB/s, which a week's retention would
/// keep on disk up to its 16 GB cap; five minutes keep the data dir at a few GB.
const RANKING_RETENTION: (&str, &str) = ("RANKSTREAM__TRAINING__RANKING_RETENTION_MS", "300000");
/// The hashed embedder: the soak embeds no text, and MiniLM (the default when it is
/// installed) would add a constant to RSS that the earlier runs did not have.
const HASHED_EMBEDDER: (&str, &str) = ("RANKSTREAM__EMBED__MODEL_DIR", "");

#[derive(Parser, Debug)]
#[command(about = "Soak rankstream at half capacity, watching RSS and open files")]
struct Args {
    /// Minutes of the soak (warm-up included).
    #[arg(long, default_value_t = 60.0)]
    minutes: f64,
    /// The first minutes, after which growth is measured.
    #[arg(long, default_value_t = 10.0)]
    warmup_minutes: f64,
    /// Seconds between two readings of the server.
    #[arg(long, default_value_t = 60.0)]
    interval_seconds: f64,
    /// Seconds of each closed loop that measures a maximum.
    #[arg(long, default_value_t = 10.0)]
    capacity_seconds: f64,
    /// The soak's load as a fraction of the capacity (shared by recommend and events).
    #[arg(long, default_value_t = 0.5)]
    load_fraction: f64,
    /// Keep-alive connections of each loop.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    #[arg(long, default_value_t = 10_000)]
    items: usize,
    #[arg(long, default_value_t = 1_000)]
    users: usize,
    #[arg(long, default_value_t = 10)]
    events_per_user: usize,
    /// Events posted before the clock starts, uniform over the items and the users'
    /// sessions, so that the models start at their bounds: a co-visitation model
    /// keeps at most 1,000 recent sessions per item, so `items` × 1,000 fills it.
    #[arg(long, default_value_t = 0)]
    seed_events: usize,
    #[command(flatten)]
    run: RunArgs,
}

fn item_id(index: usize) -> String {
    format!("soak-item-{index:06}")
}

fn user(index: usize) -> (String, String) {
    (format!("soak-u-{index:05}"), format!("soak-s-{index:05}"))
}

async fn set_up(target: &Target, args: &Args, rng: &mut StdRng) -> Result<()> {
    let mut sender = target.connect().await?;
    let items: Vec<Value> = (0..args.items)
        .map(|index| {
            json!({
                "id": item_id(index),
                "_table": TABLE,
                "name": format!("Soak item {index}"),
                "groups": [format!("group-{}", index % 20)],
                "tags": [format!("tag-{}", index % 7), format!("tag-{}", index % 11)],
                "price": (rng.random_range(500..50_000) as f64) / 100.0,
            })
        })
        .collect();
    upsert_items(target, &mut sender, &items, SETUP_BATCH).await?;
    let events: Vec<Value> = (0..args.users)
        .flat_map(|index| (0..args.events_per_user).map(move |seq| (index, seq)))
        .map(|(index, seq)| {
            view(
                format!("soak-setup-{index}-{seq}"),
                index,
                (index * 31 + seq * 7) % args.items,
            )
        })
        .collect();
    post_events(target, &mut sender, &events, SETUP_BATCH).await?;
    eprintln!(
        "setup: {} items, {} events",
        thousands(items.len() as f64),
        thousands(events.len() as f64)
    );
    Ok(())
}

/// A view of item `item` by user `user_index` in their session, stamped now.
fn view(id: String, user_index: usize, item: usize) -> Value {
    let (uid, sid) = user(user_index);
    json!({
        "id": id,
        "type": "view",
        "original_timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "uid": uid,
        "sid": sid,
        "item_id": item_id(item),
    })
}

/// Posts `--seed-events` events and waits until the models have learned them all.
async fn seed_models(target: &Target, args: &Args, rng: &mut StdRng) -> Result<()> {
    const CHUNK: usize = 100_000;
    let started = Instant::now();
    let mut sender = target.connect().await?;
    let mut posted = 0;
    while posted < args.seed_events {
        let chunk: Vec<Value> = (posted..args.seed_events.min(posted + CHUNK))
            .map(|seq| {
                let (user_index, item) = (rng.random_range(0..args.users), rng.random_range(0..args.items));
                view(format!("soak-seed-{seq}"), user_index, item)
            })
            .collect();
        post_events(target, &mut sender, &chunk, SETUP_BATCH).await?;
        posted += chunk.len();
        if posted % 1_000_000 < CHUNK {
            eprintln!("seed: {} events posted", thousands(posted as f64));
        }
    }
    let expected = (args.users * args.events_per_user + args.seed_events) as u64;
    loop {
        let stats = admin_stats(target).await?;
        let learned = stats["models"]["events_learned"].as_u64().unwrap_or(0);
        if learned >= expected {
            let mib = stats["models"]["memory_bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64;
            eprintln!(
                "seed: {} events learned in {:.0} s; models {mib:.1} MiB",
                thousands(learned as f64),
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        ensure!(
            started.elapsed().as_secs() < 3600,
            "the models learned {learned} of {expected} events in an hour"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

async fn admin_stats(target: &Target) -> Result<Value> {
    let mut connection = target.connect().await?;
    let (status, body) = target.get(&mut connection, "/v1/admin/stats").await?;
    ensure!(status == StatusCode::OK, "GET /v1/admin/stats answered {status}");
    Ok(serde_json::from_slice(&body)?)
}

fn recommend_bodies(args: &Args, rng: &mut StdRng) -> Result<Vec<Bytes>> {
    (0..BODIES)
        .map(|_| {
            let (uid, sid) = user(rng.random_range(0..args.users));
            let items: Vec<String> = sample(rng, args.items, 100.min(args.items))
                .iter()
                .map(item_id)
                .collect();
            let body = json!({"user_id": uid, "session_id": sid, "item_ids": items, "model_id": "default"});
            Ok(serde_json::to_vec(&body)?.into())
        })
        .collect()
}

/// Single events without an `id`: each post stores a new event.
fn event_bodies(args: &Args, rng: &mut StdRng) -> Result<Vec<Bytes>> {
    (0..BODIES)
        .map(|_| {
            let (uid, sid) = user(rng.random_range(0..args.users));
            let mut event = json!({
                "type": "view",
                "original_timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "uid": uid,
                "sid": sid,
                "item_id": item_id(rng.random_range(0..args.items)),
            });
            if rng.random_bool(0.3) {
                event["type"] = json!("click");
                event["click_type"] = json!("product");
            }
            Ok(serde_json::to_vec(&event)?.into())
        })
        .collect()
}

/// Counts a response other than `expected` as a failure.
fn expect(
    expected: StatusCode,
) -> impl Fn(usize, StatusCode, &[u8], &mut Tally) -> Result<()> + Clone + Send + 'static {
    move |_, status, response, tally| {
        if status != expected {
            tally.failures.record(status, response);
        }
        Ok(())
    }
}

/// What the tool reads of the server after each interval.
#[derive(Debug, Clone, Default)]
struct Reading {
    minute: f64,
    rss_mib: f64,
    threads: u64,
    table_fds: usize,
    /// Open files other than table files, and among them RocksDB's write-ahead logs
    /// (`*.log`, one more while a flush switches to a new one) and sockets.
    other_fds: usize,
    wal_fds: usize,
    socket_fds: usize,
    sst_files: usize,
    data_mib: f64,
    recommend_p50: f64,
    recommend_p99: f64,
    events_p99: f64,
    requests: usize,
    failures: usize,
    /// RocksDB's memory from `/v1/admin/stats` (`storage.memory`): all charged to the
    /// block cache, and the memtables among it, MiB.
    rocksdb_cache_mib: f64,
    rocksdb_memtables_mib: f64,
    /// The published models' estimated heap (`models.memory_bytes`), MiB; the
    /// learner's working copy shares all but what it changed since.
    models_mib: f64,
}

/// RocksDB's and the models' memory, from `/v1/admin/stats`.
async fn read_memory_stats(target: &Target, reading: &mut Reading) -> Result<()> {
    let stats = admin_stats(target).await?;
    let mib = |value: &Value| value.as_f64().unwrap_or(0.0) / (1 << 20) as f64;
    reading.rocksdb_cache_mib = mib(&stats["storage"]["memory"]["cache"]);
    reading.rocksdb_memtables_mib = mib(&stats["storage"]["memory"]["memtables"]);
    reading.models_mib = mib(&stats["models"]["memory_bytes"]);
    Ok(())
}

fn read_process(pid: u32, reading: &mut Reading) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("the server's /proc status")?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.split_whitespace().next()?.parse().ok())
    };
    reading.rss_mib = field("VmRSS:").unwrap_or(0) as f64 / 1024.0;
    reading.threads = field("Threads:").unwrap_or(0);
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        match target.extension().is_some_and(|extension| extension == "sst") {
            true => reading.table_fds += 1,
            false => reading.other_fds += 1,
        }
        if target.extension().is_some_and(|extension| extension == "log") {
            reading.wal_fds += 1;
        }
        if target.to_string_lossy().starts_with("socket:") {
            reading.socket_fds += 1;
        }
    }
    Ok(())
}

fn read_data_dir(directory: &Path, reading: &mut Reading) {
    let mut pending = vec![directory.to_path_buf()];
    let mut bytes = 0u64;
    while let Some(directory) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&directory) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.metadata() else { continue };
            if metadata.is_dir() {
                pending.push(entry.path());
                continue;
            }
            bytes += metadata.len();
            if entry.path().extension().is_some_and(|extension| extension == "sst") {
                reading.sst_files += 1;
            }
        }
    }
    reading.data_mib = bytes as f64 / (1 << 20) as f64;
}

struct Soak {
    recommend_max: f64,
    events_max: f64,
    recommend_rate: f64,
    events_rate: f64,
    readings: Vec<Reading>,
    failures: usize,
    first_failure: Option<String>,
}

impl Soak {
    /// The first and the last window of readings from the end of warm-up on: each a fifth
    /// of those readings, at least three (all of them when there are fewer). A verdict
    /// on two windows' medians is not swayed by one reading taken during a flush or a
    /// compaction, as a verdict on two single readings was.
    fn windows(&self, args: &Args) -> Option<(&[Reading], &[Reading])> {
        let warm = self
            .readings
            .iter()
            .rposition(|reading| reading.minute <= args.warmup_minutes + 1e-9)?;
        let span = &self.readings[warm..];
        let width = (span.len() / 5).max(3).min(span.len());
        Some((&span[..width], &span[span.len() - width..]))
    }

    fn goals(&self, args: &Args) -> Vec<Goal> {
        let Some((first, last)) = self.windows(args) else {
            return Vec::new();
        };
        let minutes =
            |window: &[Reading]| format!("minutes {:.0}-{:.0}", window[0].minute, window[window.len() - 1].minute);
        let median_of =
            |window: &[Reading], value: fn(&Reading) -> f64| median(&window.iter().map(value).collect::<Vec<_>>());
        let (rss_first, rss_last) = (
            median_of(first, |reading| reading.rss_mib),
            median_of(last, |reading| reading.rss_mib),
        );
        let growth = rss_last / rss_first - 1.0;
        // Open files and sockets are judged the same way: the last window's median
        // against the first's. The largest count is shown, not judged: RocksDB opens a
        // new log before it closes the old one, and sockets are the load's connections,
        // which the client opens and closes as requests overlap.
        let files = |reading: &Reading| (reading.other_fds - reading.socket_fds) as f64;
        let sockets = |reading: &Reading| reading.socket_fds as f64;
        let most = |value: fn(&Reading) -> f64| first.iter().chain(last).map(value).fold(0.0, f64::max);
        let (files_first, files_last) = (median_of(first, files), median_of(last, files));
        let (sockets_first, sockets_last) = (median_of(first, sockets), median_of(last, sockets));
        let windows = format!("{} → {} ({} readings each)", minutes(first), minutes(last), first.len());
        vec![
            Goal::new(
                format!("RSS, median of {windows}"),
                format!("{rss_first:.1} → {rss_last:.1} MiB ({:+.1}%)", growth * 100.0),
                "< 5% growth",
                growth < RSS_GROWTH_TARGET,
            ),
            Goal::new(
                format!("open files other than table files and sockets, median of {windows}"),
                format!("{files_first:.0} → {files_last:.0} (at most {:.0})", most(files)),
                "no growth (last window's median ≤ first's)",
                files_last <= files_first,
            ),
            Goal::new(
                format!("sockets (the load's connections), median of {windows}"),
                format!("{sockets_first:.0} → {sockets_last:.0} (at most {:.0})", most(sockets)),
                "no growth (last window's median ≤ first's)",
                sockets_last <= sockets_first,
            ),
            Goal::new(
                "table files open vs SST files on disk, at the end",
                format!(
                    "{} open, {} on disk",
                    last[last.len() - 1].table_fds,
                    last[last.len() - 1].sst_files
                ),
                "one per file",
                last[last.len() - 1].table_fds <= last[last.len() - 1].sst_files,
            ),
            Goal::new(
                "failed requests",
                format!(
                    "{} of {}",
                    self.failures,
                    thousands(self.readings.iter().map(|r| r.requests).sum::<usize>() as f64)
                ),
                "0",
                self.failures == 0,
            ),
        ]
    }
}

async fn soak(server: &SpawnedServer, args: &Args, rng: &mut StdRng) -> Result<Soak> {
    let target = Arc::new(server.target()?);
    let pid = server.pid().context("the server's pid")?;
    set_up(&target, args, rng).await?;
    seed_models(&target, args, rng).await?;
    let recommend = Load {
        target: target.clone(),
        endpoint: RECOMMEND,
        bodies: Arc::new(recommend_bodies(args, rng)?),
    };
    let events = Load {
        target: target.clone(),
        endpoint: EVENTS,
        bodies: Arc::new(event_bodies(args, rng)?),
    };
    let span = Span::Seconds(args.capacity_seconds);
    let recommend_max = recommend
        .closed_loop(args.connections, span, expect(StatusCode::OK))
        .await?;
    let events_max = events
        .closed_loop(args.connections, span, expect(StatusCode::ACCEPTED))
        .await?;
    ensure!(
        recommend_max.tally.failures.count == 0,
        "recommend failed: {:?}",
        recommend_max.tally.failures.first
    );
    ensure!(
        events_max.tally.failures.count == 0,
        "events failed: {:?}",
        events_max.tally.failures.first
    );
    let share = args.load_fraction / 2.0;
    let mut result = Soak {
        recommend_max: recommend_max.per_sec(),
        events_max: events_max.per_sec(),
        recommend_rate: recommend_max.per_sec() * share,
        events_rate: events_max.per_sec() * share,
        readings: Vec::new(),
        failures: 0,
        first_failure: None,
    };
    eprintln!(
        "capacity: recommend {:.0}/s, events {:.0}/s; soak at {:.0} + {:.0} requests/s",
        result.recommend_max, result.events_max, result.recommend_rate, result.events_rate
    );
    let started = Instant::now();
    let intervals = (args.minutes * 60.0 / args.interval_seconds).round().max(1.0) as usize;
    for _ in 0..intervals {
        let (ours, theirs) = tokio::try_join!(
            recommend.open_loop(
                args.connections,
                result.recommend_rate,
                args.interval_seconds,
                expect(StatusCode::OK)
            ),
            events.open_loop(
                args.connections,
                result.events_rate,
                args.interval_seconds,
                expect(StatusCode::ACCEPTED)
            ),
        )?;
        let mut reading = Reading {
            minute: started.elapsed().as_secs_f64() / 60.0,
            recommend_p50: percentile(&ours.latencies, 0.5),
            recommend_p99: percentile(&ours.latencies, 0.99),
            events_p99: percentile(&theirs.latencies, 0.99),
            requests: ours.latencies.len() + theirs.latencies.len(),
            failures: ours.tally.failures.count + theirs.tally.failures.count,
            ..Reading::default()
        };
        result.failures += reading.failures;
        result.first_failure = result
            .first_failure
            .take()
            .or(ours.tally.failures.first)
            .or(theirs.tally.failures.first);
        read_process(pid, &mut reading)?;
        read_data_dir(&server.dir.join("data"), &mut reading);
        read_memory_stats(&target, &mut reading).await?;
        eprintln!("{reading:?}");
        result.readings.push(reading);
    }
    Ok(result)
}

fn markdown_section(args: &Args, soak: &Soak) -> String {
    let mut out = section_head(MARKDOWN_HEADING, "bench-soak");
    out.push_str(&format!(
        "- Server: `rankstream serve` spawned by the tool on a fresh data dir, durability sync, defaults otherwise \
         (per-key rate limit raised; rankings kept 5 minutes, not 7 days, so that the disk holds the hour; \
         the hashed embedder, as in the earlier runs: the soak embeds nothing, and MiniLM would add a constant).\n\
         - Data: {} items; {} users with a session each and {} events each, then {} more spread over the \
         items and the sessions (`--seed-events`, the models learn them before the clock starts).\n\
         - Capacity (closed loops of {:.0} s, {} connections): recommend {:.0}/s (100 candidates, model \
         `default`), events {:.0}/s (one new event per request).\n\
         - Soak: {:.0} minutes of both at once, open loops at {:.0} recommend/s and {:.0} events/s ({} of each \
         maximum: {:.0}% of the machine's capacity, shared); a reading every {:.0} s; warm-up {:.0} minutes.\n\
         - Client: the tool, on the same 2 cores.\n\n",
        thousands(args.items as f64),
        thousands(args.users as f64),
        args.events_per_user,
        thousands(args.seed_events as f64),
        args.capacity_seconds,
        args.connections,
        soak.recommend_max,
        soak.events_max,
        args.minutes,
        soak.recommend_rate,
        soak.events_rate,
        args.load_fraction / 2.0,
        args.load_fraction * 100.0,
        args.interval_seconds,
        args.warmup_minutes,
    ));
    out.push_str(&goals_table(&soak.goals(args)));
    if let Some(first) = &soak.first_failure {
        out.push_str(&format!("\nFirst failure: `{first}`\n"));
    }
    out.push_str(
        "\n| minute | RSS MiB | RocksDB cache / memtables MiB | models MiB | threads | open files (tables / other) | SST files | data MiB | recommend p50 / p99 | events p99 | requests | failed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let every = (soak.readings.len() / 12).max(1);
    for (index, reading) in soak.readings.iter().enumerate() {
        if index % every != 0 && index + 1 != soak.readings.len() {
            continue;
        }
        out.push_str(&markdown_row(&[
            format!("{:.1}", reading.minute),
            format!("{:.1}", reading.rss_mib),
            format!(
                "{:.1} / {:.1}",
                reading.rocksdb_cache_mib, reading.rocksdb_memtables_mib
            ),
            format!("{:.1}", reading.models_mib),
            reading.threads.to_string(),
            format!(
                "{} / {} ({} logs, {} sockets)",
                reading.table_fds, reading.other_fds, reading.wal_fds, reading.socket_fds
            ),
            reading.sst_files.to_string(),
            format!("{:.1}", reading.data_mib),
            format!("{} / {}", ms(reading.recommend_p50), ms(reading.recommend_p99)),
            ms(reading.events_p99),
            thousands(reading.requests as f64),
            reading.failures.to_string(),
        ]));
        out.push('\n');
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.minutes > args.warmup_minutes && args.interval_seconds > 0.0,
        "--minutes must exceed --warmup-minutes"
    );
    ensure!(
        args.load_fraction > 0.0 && args.load_fraction <= 1.0,
        "--load-fraction must be in (0, 1]"
    );
    let binary = server_binary(args.run.server_bin.as_ref())?;
    let mut rng = StdRng::seed_from_u64(args.run.seed);
    let mut env = RATE_LIMIT_ENV.to_vec();
    env.push(RANKING_RETENTION);
    env.push(HASHED_EMBEDDER);
    let server = SpawnedServer::start(&binary, &[], &env).await?;
    server.announce();
    let outcome = soak(&server, &args, &mut rng).await;
    server.stop().await?;
    let soak = outcome?;
    let goals = soak.goals(&args);
    print_goals(&goals);
    if let Some(path) = &args.run.write_markdown {
        publish_section(path, MARKDOWN_HEADING, &markdown_section(&args, &soak), Some(&INDEX))?;
    }
    ensure!(goals.iter().all(|goal| goal.met), "a soak target was missed");
    Ok(())
}
