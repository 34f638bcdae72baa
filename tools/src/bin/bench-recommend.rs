//! Recommend benchmark: `POST /v1/recommend` with 100 candidates, a `user_id` and a
//! `session_id` that both have live state, and a named model (`--model`, `default`) against
//! a bare hyper 1.x server that reads the same request bodies and answers a constant JSON
//! of the same size, measured in the same run. Targets: >= 50% of the bare server's
//! throughput, and p99 <= 2 ms at half rankstream's maximum load.
//!
//! 1. Setup: spawn `rankstream serve` (fresh temp data dir, generated admin key, durability
//!    sync, auth rate limit raised so that the tool's own requests are not throttled), upsert
//!    `--items` items to table `items` (name, groups, tags, price; NDJSON bulk), and post
//!    `--events-per-user` click/view events for each of `--users` users, each user with one
//!    session (uid and sid on every event; the 202 comes after the apply, so the state is
//!    live when the tool goes on). The request bodies (`{"user_id", "session_id", "item_ids":
//!    100 random catalog ids, "model_id"}`, no `limit`) are generated before any timing; the
//!    bare server gets the identical bodies. The bare server's answer is a constant JSON padded
//!    to the median length of 20 real recommend responses.
//! 2. Maximum throughput, closed loop: `--connections` keep-alive connections, one request in
//!    flight on each, for `--seconds`, alternating bare, rankstream, bare, rankstream, ...
//!    (`--rounds` each, after `--warmup-seconds` of unmeasured load on each). Medians are
//!    reported, and rankstream's median / the bare server's; and each round's CPU time per
//!    request (`/proc`) of the server it measured and of the client, which tells what the
//!    ratio is made of on a machine all three share.
//! 3. Latency, open loop: `--latency-seconds` at half of rankstream's median maximum, first on
//!    rankstream, then on the bare server at the same rate. A dispatcher thread schedules
//!    request i at start + i / rate and hands it to a pool of `--latency-connections`
//!    keep-alive connections (the first free one takes it); latency runs from the scheduled
//!    time to the end of the response, so a stalled server is not hidden by a waiting client
//!    (no coordinated omission). Each phase also reports the share of the machine's CPU
//!    time the hypervisor took away (steal, from `/proc/stat`).
//! 4. rankstream's own account: its recommend time per request from `/v1/admin/stats`
//!    (parsed request head -> response ready), over all the run's recommend requests.
//!
//! The headline (issue 23) is the server CPU per request against the bare server's, from
//! the closed-loop rounds, with rankstream's own p99 and p99.9; the throughput ratio and
//! the client-side p99 are for information (the client shares the CPUs).
//! `--candidates 10,100,1000` sweeps the candidate count instead: closed-loop rounds of
//! each, interleaved with the bare server's, and a line fitted through the CPU figures.
//!
//! Every response must be a 200: non-200s are counted and reported, and make the run fail
//! (no Markdown is written then).
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-recommend
//! target/release/bench-recommend --write-markdown BENCHMARKS.md
//! # trying it out (short, no figures written):
//! target/release/bench-recommend --model test_model_item_200 --seconds 2 --rounds 1 \
//!     --warmup-seconds 1 --latency-seconds 2
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use bench::{
    count_non_200, goals_table, least_squares, median, ms, own_cpu_seconds, percentile, percentile_cells, post_events,
    print_goals, process_cpu_seconds, publish_section, section_head, server_binary, snippet, summary, thousands,
    upsert_items, ClosedRun, Endpoint, Failures, Goal, IndexEntry, Load, OpenRun, RunArgs, ServerTimes, Span,
    SpawnedServer, Target, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Recommend latency";
/// This tool's line in the index at the top of BENCHMARKS.md.
const INDEX: IndexEntry = IndexEntry {
    tool: "bench-recommend",
    row: "| Recommend latency | `tools/src/bin/bench-recommend.rs` (`bench-recommend`) | server CPU per request <= 3x a bare \
          hyper server's, own p99 <= 0.25 ms and p99.9 <= 1 ms (issue 23); >= 50% of its throughput and p99 <= 2 ms \
          at half the maximum load (for information); `--candidates 10,100,1000`: the cost by candidates |",
};
const TABLE: &str = "items";
const RECOMMEND: Endpoint = Endpoint::post_json("/v1/recommend");
/// Items per catalog bulk request and events per events request during the setup.
const SETUP_BATCH: usize = 5_000;
/// The bare server's runtime threads (their CPU time is told apart from the client's).
const BARE_THREAD_NAME: &str = "bare-hyper";
/// Distinct request bodies, cycled through by every phase.
const BODIES: usize = 10_000;
/// Real recommend responses whose median length sizes the bare server's answer.
const SIZE_SAMPLES: usize = 20;
/// Targets of the issue.
const RATIO_TARGET: f64 = 0.5;
const P99_TARGET_MS: f64 = 2.0;
/// Ids each `--rules` body excludes.
const EXCLUDED: usize = 50;
/// The `--rules` section of BENCHMARKS.md.
const RULES_HEADING: &str = "## Recommend with business rules";
/// The sweep's section of BENCHMARKS.md.
const SWEEP_HEADING: &str = "## Recommend cost by candidates";
/// Issue 23's targets: server CPU per recommend against the bare server's, and
/// rankstream's own p99 and p99.9.
const CPU_RATIO_TARGET: f64 = 3.0;
const OWN_P99_TARGET_MS: f64 = 0.25;
const OWN_P999_TARGET_MS: f64 = 1.0;

#[derive(Parser, Debug)]
#[command(about = "Benchmark POST /v1/recommend (throughput and latency) against a bare hyper server")]
struct Args {
    /// The `model_id` of every request.
    #[arg(long, default_value = "default")]
    model: String,
    /// Candidates (`item_ids`) per request. Several (`--candidates 10,100,1000`): the
    /// sweep instead, closed-loop rounds of each count interleaved with the bare server's,
    /// with the server CPU per request against the count (a line fitted through them). No
    /// latency phase then.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    candidates: Vec<usize>,
    /// Catalog items (table `items`).
    #[arg(long, default_value_t = 10_000)]
    items: usize,
    /// Users with live state, one session each; requests draw from them.
    #[arg(long, default_value_t = 1_000)]
    users: usize,
    /// Events (click or view) posted per user and session before the measurements.
    #[arg(long, default_value_t = 10)]
    events_per_user: usize,
    /// Keep-alive connections of the closed-loop (maximum throughput) phase.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Seconds of each closed-loop round.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Closed-loop rounds per target (interleaved: bare, rankstream, bare, ...).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Unmeasured closed-loop seconds on each target before the rounds.
    #[arg(long, default_value_t = 3.0)]
    warmup_seconds: f64,
    /// Seconds of the open-loop latency phase, per target.
    #[arg(long, default_value_t = 20.0)]
    latency_seconds: f64,
    /// Keep-alive connections of the open-loop phase (the pool that takes scheduled requests).
    #[arg(long, default_value_t = 16)]
    latency_connections: usize,
    /// Load of the latency phase as a fraction of rankstream's median maximum throughput.
    #[arg(long, default_value_t = 0.5)]
    load_fraction: f64,
    /// Tokio worker threads of the bare server [default: the CPUs, like rankstream's runtime].
    #[arg(long)]
    bare_threads: Option<usize>,
    #[command(flatten)]
    run: RunArgs,
    /// Measure the cost of a typical rule set instead: each body also carries 50 excluded
    /// ids, 2 filters and 1 boost; closed-loop rounds interleave bare, rankstream without
    /// the rules and rankstream with them (the same bodies otherwise). No latency phase.
    #[arg(long)]
    rules: bool,
}

// ---------------------------------------------------------------- setup

fn item_id(index: usize) -> String {
    format!("item-{index:05}")
}

async fn create_catalog(target: &Target, args: &Args, rng: &mut StdRng) -> Result<()> {
    const GROUPS: [&str; 12] = [
        "Boat Tours",
        "Walking Tours",
        "Food & Drink",
        "Museums",
        "Day Trips",
        "Outdoor",
        "Nightlife",
        "Classes",
        "Shows",
        "Cruises",
        "Bike Tours",
        "Family",
    ];
    const TAGS: [&str; 10] = [
        "family",
        "romantic",
        "private",
        "small-group",
        "outdoor",
        "indoor",
        "accessible",
        "evening",
        "morning",
        "pets",
    ];
    let mut sender = target.connect().await?;
    let started = Instant::now();
    let items: Vec<Value> = (0..args.items)
        .map(|index| {
            let (group_count, tag_count) = (rng.random_range(1..=2), rng.random_range(1..=3));
            let groups: Vec<&str> = sample(rng, GROUPS.len(), group_count)
                .iter()
                .map(|g| GROUPS[g])
                .collect();
            let tags: Vec<&str> = sample(rng, TAGS.len(), tag_count).iter().map(|t| TAGS[t]).collect();
            json!({
                "id": item_id(index),
                "_table": TABLE,
                "name": format!("Bench item {index}"),
                "groups": groups,
                "tags": tags,
                "price": (rng.random_range(500..50_000) as f64) / 100.0,
            })
        })
        .collect();
    upsert_items(target, &mut sender, &items, SETUP_BATCH).await?;
    eprintln!(
        "catalog: {} items in {:.2} s",
        thousands(args.items as f64),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn user(index: usize) -> (String, String) {
    (format!("bench-u-{index:05}"), format!("bench-s-{index:05}"))
}

/// `--events-per-user` events for every user and its session (60% views, 40% clicks), with
/// timestamps of the last few minutes in order, posted in bodies of `SETUP_BATCH`.
async fn create_live_state(target: &Target, args: &Args, rng: &mut StdRng) -> Result<()> {
    let now = chrono::Utc::now();
    let mut events = Vec::new();
    for index in 0..args.users {
        let (uid, sid) = user(index);
        for seq in 0..args.events_per_user {
            let at = now - chrono::Duration::seconds(((args.events_per_user - seq) * 20) as i64);
            let mut event = json!({
                "id": uuid::Uuid::now_v7().to_string(),
                "type": "view",
                "original_timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "uid": uid,
                "sid": sid,
                "item_id": item_id(rng.random_range(0..args.items)),
            });
            if rng.random_bool(0.4) {
                event["type"] = json!("click");
                event["click_type"] = json!("product");
            }
            events.push(event);
        }
    }
    let mut sender = target.connect().await?;
    let started = Instant::now();
    post_events(target, &mut sender, &events, SETUP_BATCH).await?;
    eprintln!(
        "events: {} for {} users and sessions in {:.2} s (applied: the 202 follows the apply)",
        thousands(events.len() as f64),
        thousands(args.users as f64),
        started.elapsed().as_secs_f64()
    );
    // The state is live: the first user's and session's snapshots list their events.
    let (uid, sid) = user(0);
    for path in [format!("/v1/users/{uid}/state"), format!("/v1/sessions/{sid}")] {
        let (status, body) = target.get(&mut sender, &path).await?;
        ensure!(status == StatusCode::OK, "GET {path}: {status}: {}", snippet(&body));
        let snapshot: Value = serde_json::from_slice(&body)?;
        let ids = snapshot["event_ids"].as_array().map_or(0, Vec::len);
        ensure!(ids > 0, "GET {path}: no events in the live state: {}", snippet(&body));
    }
    Ok(())
}

/// `BODIES` recommend request bodies: a user with state, its session, `candidates`
/// distinct random catalog ids, the model.
fn request_bodies(args: &Args, candidates: usize, rng: &mut StdRng) -> Result<Vec<Bytes>> {
    (0..BODIES)
        .map(|_| {
            let (uid, sid) = user(rng.random_range(0..args.users));
            let items: Vec<String> = sample(rng, args.items, candidates).iter().map(item_id).collect();
            let body = json!({"user_id": uid, "session_id": sid, "item_ids": items, "model_id": args.model});
            Ok(serde_json::to_vec(&body)?.into())
        })
        .collect()
}

/// `bodies` with a typical rule set each: 50 catalog ids excluded, a price ceiling and a
/// group left out, a boost for one tag.
fn with_rules(bodies: &[Bytes], args: &Args, rng: &mut StdRng) -> Result<Vec<Bytes>> {
    bodies
        .iter()
        .map(|body| {
            let mut body: Value = serde_json::from_slice(body)?;
            let excluded: Vec<String> = sample(rng, args.items, EXCLUDED).iter().map(item_id).collect();
            body["exclude_ids"] = json!(excluded);
            body["filters"] = json!([
                {"field": "price", "op": "lte", "value": 400},
                {"field": "groups", "op": "nin", "value": ["Nightlife"]}
            ]);
            body["boosts"] = json!([{"field": "tags", "op": "in", "value": ["family"], "multiply": 1.2}]);
            Ok(serde_json::to_vec(&body)?.into())
        })
        .collect()
}

/// Sends `SIZE_SAMPLES` real recommend requests; returns the median response length and
/// one response.
async fn sample_responses(target: &Target, bodies: &[Bytes], args: &Args, candidates: usize) -> Result<(usize, Value)> {
    let mut sender = target.connect().await?;
    let (mut lengths, mut example) = (Vec::new(), Value::Null);
    for body in bodies.iter().take(SIZE_SAMPLES) {
        let (status, response) = target.call(&mut sender, &RECOMMEND, body.clone()).await?;
        ensure!(
            status == StatusCode::OK,
            "recommend with model {:?}: {status}: {}",
            args.model,
            snippet(&response)
        );
        example = serde_json::from_slice(&response)?;
        let items = example["items"].as_array().map_or(0, Vec::len);
        ensure!(
            items == candidates,
            "{candidates} candidates, {items} items in the response: {}",
            snippet(&response)
        );
        lengths.push(response.len() as f64);
    }
    Ok((median(&lengths) as usize, example))
}

// ---------------------------------------------------------------- the bare server

/// A constant JSON of exactly `length` bytes (when `length` is above its minimum).
fn padded_json(length: usize) -> Bytes {
    let base = json!({"rec_id": "bare", "items": [], "pad": ""}).to_string();
    let pad = "x".repeat(length.saturating_sub(base.len()));
    json!({"rec_id": "bare", "items": [], "pad": pad}).to_string().into()
}

/// Starts a bare hyper 1.x HTTP/1.1 server on `runtime` (its own threads, apart from the
/// tool's client): every request's body is read to its end, then answered 200 with `body`.
fn start_bare_server(runtime: &tokio::runtime::Runtime, body: Bytes) -> Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            stream.set_nodelay(true).ok();
            let body = body.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let body = body.clone();
                async move {
                    let _request = request.into_body().collect().await?.to_bytes();
                    let response = Response::builder()
                        .header(CONTENT_TYPE, "application/json")
                        .body(Full::new(body))
                        .expect("a valid response");
                    Ok::<_, hyper::Error>(response)
                }
            });
            tokio::spawn(async move {
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                    .ok();
            });
        }
    });
    Ok(address)
}

// ---------------------------------------------------------------- closed-loop rounds

/// One closed-loop round on one target.
struct Round {
    requests: usize,
    seconds: f64,
    per_sec: f64,
    latencies: Vec<f64>,
    /// CPU time per request, where `/proc` could be read.
    cpu: Option<RoundCpu>,
}

/// CPU time per request of a closed-loop round, in µs.
#[derive(Clone, Copy)]
struct RoundCpu {
    /// The measured server's: all of rankstream's process, or the bare server's threads.
    server_us: f64,
    /// The tool's own threads but the bare server's: the load generator.
    client_us: f64,
}

/// CPU seconds used so far by the rankstream server, the bare server's threads, and
/// the rest of this tool (the load generator).
#[derive(Clone, Copy)]
struct CpuUse {
    rankstream: f64,
    bare: f64,
    client: f64,
}

impl CpuUse {
    fn now(server_pid: Option<u32>) -> Option<CpuUse> {
        let rankstream = process_cpu_seconds(server_pid?)?;
        let (all, bare) = own_cpu_seconds(BARE_THREAD_NAME)?;
        Some(CpuUse {
            rankstream,
            bare,
            client: all - bare,
        })
    }

    /// Per request of a round of `requests` on the bare server (`bare`) or on rankstream.
    fn per_request(self, later: CpuUse, bare: bool, requests: usize) -> RoundCpu {
        let server = if bare {
            later.bare - self.bare
        } else {
            later.rankstream - self.rankstream
        };
        let per_request_us = |seconds: f64| seconds * 1e6 / requests.max(1) as f64;
        RoundCpu {
            server_us: per_request_us(server),
            client_us: per_request_us(later.client - self.client),
        }
    }
}

// ---------------------------------------------------------------- report

struct Report {
    response_bytes: usize,
    bare_bytes: usize,
    bare_rounds: Vec<Round>,
    ours_rounds: Vec<Round>,
    ours_latency: OpenRun,
    bare_latency: OpenRun,
    /// Non-200s of the closed-loop phase, per target (the open loop's are in `OpenRun`).
    bare_failures: Failures,
    ours_failures: Failures,
    bare_threads: usize,
    /// rankstream's own account of its recommend requests (`/v1/admin/stats`), all phases.
    server_times: Option<ServerTimes>,
}

impl Report {
    fn median_rate(rounds: &[Round]) -> f64 {
        median(&rounds.iter().map(|round| round.per_sec).collect::<Vec<_>>())
    }

    fn ratio(&self) -> f64 {
        Report::median_rate(&self.ours_rounds) / Report::median_rate(&self.bare_rounds)
    }

    fn non_200(&self) -> usize {
        self.bare_failures.count
            + self.ours_failures.count
            + self.ours_latency.tally.failures.count
            + self.bare_latency.tally.failures.count
    }
}

/// The targets of the issue, measured.
fn goals(report: &Report, args: &Args) -> Vec<Goal> {
    let ratio = report.ratio();
    let p99 = percentile(&report.ours_latency.latencies, 0.99);
    let share = args.load_fraction * 100.0;
    let mut goals = Vec::new();
    if let Some((bare, ours)) = server_cpu_medians(&report.bare_rounds, &report.ours_rounds) {
        goals.push(Goal::new(
            "server CPU per request, rankstream / bare hyper (medians; the headline)",
            format!("{:.2}x ({ours:.1} µs against {bare:.1} µs)", ours / bare),
            "<= 3x",
            ours / bare <= CPU_RATIO_TARGET,
        ));
    }
    if let Some(times) = &report.server_times {
        goals.push(Goal::new(
            "rankstream's own p99 (/v1/admin/stats, all phases)",
            ms(times.p99_ms),
            "<= 0.25 ms",
            times.p99_ms <= OWN_P99_TARGET_MS,
        ));
        goals.push(Goal::new(
            "rankstream's own p99.9 (/v1/admin/stats, all phases)",
            ms(times.p999_ms),
            "<= 1 ms",
            times.p999_ms <= OWN_P999_TARGET_MS,
        ));
    }
    goals.extend([
        Goal::new(
            "throughput, rankstream / bare hyper (medians; for information: the client shares the CPUs)",
            format!("{:.1}%", ratio * 100.0),
            ">= 50%",
            ratio >= RATIO_TARGET,
        ),
        Goal::new(
            format!("rankstream p99 at {share:.0}% of its maximum"),
            ms(p99),
            "<= 2 ms",
            p99 <= P99_TARGET_MS,
        ),
        Goal::new(
            "non-200 responses",
            thousands(report.non_200() as f64),
            "0",
            report.non_200() == 0,
        ),
    ]);
    goals
}

/// The median server CPU per request of the bare server's rounds and of rankstream's,
/// if `/proc` told.
fn server_cpu_medians(bare: &[Round], ours: &[Round]) -> Option<(f64, f64)> {
    Some((median_server_cpu(bare)?, median_server_cpu(ours)?))
}

fn median_server_cpu(rounds: &[Round]) -> Option<f64> {
    let values: Vec<f64> = rounds
        .iter()
        .map(|round| round.cpu.map(|cpu| cpu.server_us))
        .collect::<Option<_>>()?;
    Some(median(&values))
}

/// The rounds' median CPU time per request, of each server and of the client, and
/// what they say of the throughput ratio (the client and both servers share the CPUs).
fn cpu_medians(bare: &[Round], ours: &[Round]) -> Option<String> {
    let median_of = |rounds: &[Round], part: fn(RoundCpu) -> f64| -> Option<f64> {
        let values: Vec<f64> = rounds.iter().map(|round| round.cpu.map(part)).collect::<Option<_>>()?;
        Some(median(&values))
    };
    let bare_server = median_of(bare, |cpu| cpu.server_us)?;
    let ours_server = median_of(ours, |cpu| cpu.server_us)?;
    let bare_client = median_of(bare, |cpu| cpu.client_us)?;
    let ours_client = median_of(ours, |cpu| cpu.client_us)?;
    Some(format!(
        "CPU per request (medians): bare server {bare_server:.1} µs, rankstream {ours_server:.1} µs ({:.1}x); \
         client {bare_client:.1} µs per bare request, {ours_client:.1} µs per rankstream request. All in, \
         {:.1} µs per bare request and {:.1} µs per rankstream request.",
        ours_server / bare_server,
        bare_server + bare_client,
        ours_server + ours_client,
    ))
}

fn markdown_section(args: &Args, report: &Report) -> String {
    let (ours_max, bare_max) = (
        Report::median_rate(&report.ours_rounds),
        Report::median_rate(&report.bare_rounds),
    );
    let mut out = section_head(MARKDOWN_HEADING, "bench-recommend");
    out.push_str(&format!(
        "- Server: `rankstream serve` spawned by the tool on a fresh data dir, durability sync, 8 shards, engine \
         defaults; auth rate limit and burst raised to {}/s (the tool's own requests exceed the 1,000/s default).\n\
         - Data: {} catalog items in table `{TABLE}` (name, groups, tags, price); {} users, one session each, \
         {} click/view events per user and session posted before the measurements (live state).\n\
         - Requests: `POST /v1/recommend` with `user_id` and `session_id` of those users, {} random catalog ids in \
         `item_ids`, `model_id` `{}`, no `limit` ({} distinct bodies, cycled); the responses are {} bytes \
         (median).\n\
         - Bare server: hyper 1.x HTTP/1.1 in the tool's process on a runtime of its own ({} worker threads), \
         TCP_NODELAY; reads each request body to its end, answers 200 with a constant JSON of {} bytes; it gets \
         the identical request bodies.\n\
         - Client: the tool itself, on the same machine as both servers (they share its CPUs).\n\n",
        thousands(RATE_LIMIT_ENV[0].1.parse().unwrap_or(f64::NAN)),
        thousands(args.items as f64),
        thousands(args.users as f64),
        args.events_per_user,
        args.candidates[0],
        args.model,
        thousands(BODIES as f64),
        report.response_bytes,
        report.bare_threads,
        report.bare_bytes,
    ));
    out.push_str(&goals_table(&goals(report, args)));
    out.push_str(&format!(
        "\n### Maximum throughput\n\nClosed loop: {} keep-alive connections, one request in flight on each, \
         {} s per round after {} s of unmeasured load on each target; rounds alternate bare, rankstream, bare, \
         ...; CPU per request is the server's CPU time during the round (all of rankstream's process; the bare \
         server's runtime threads) and the load generator's (the tool's other threads), over the round's \
         requests.\n\n| round | bare hyper req/s | rankstream req/s | rankstream p50 | rankstream p99 | \
         CPU/request: bare server | CPU/request: rankstream | CPU/request: client (bare, rankstream) |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.connections, args.seconds, args.warmup_seconds,
    ));
    let micros = |cpu: Option<RoundCpu>, part: fn(RoundCpu) -> f64| {
        cpu.map_or("-".to_owned(), |cpu| format!("{:.1} µs", part(cpu)))
    };
    for (number, (bare, ours)) in report.bare_rounds.iter().zip(&report.ours_rounds).enumerate() {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {}, {} |\n",
            number + 1,
            thousands(bare.per_sec),
            thousands(ours.per_sec),
            ms(percentile(&ours.latencies, 0.5)),
            ms(percentile(&ours.latencies, 0.99)),
            micros(bare.cpu, |cpu| cpu.server_us),
            micros(ours.cpu, |cpu| cpu.server_us),
            micros(bare.cpu, |cpu| cpu.client_us),
            micros(ours.cpu, |cpu| cpu.client_us),
        ));
    }
    out.push_str(&format!(
        "\nMedians: bare hyper **{} req/s**, rankstream **{} req/s** = **{:.1}%** of the bare server.\n",
        thousands(bare_max),
        thousands(ours_max),
        report.ratio() * 100.0,
    ));
    if let Some(line) = cpu_medians(&report.bare_rounds, &report.ours_rounds) {
        out.push_str(&format!("\n{line}\n"));
    }
    let (ours, bare) = (&report.ours_latency, &report.bare_latency);
    out.push_str(&format!(
        "\n### Latency at {:.0}% of rankstream's maximum\n\nOpen loop at {} req/s for {} s per target \
         (rankstream first): a dispatcher thread schedules request i at start + i / rate and a pool of {} keep-alive \
         connections takes them, the first free one each; latency runs from the scheduled time to the end of the \
         response (no coordinated omission), so it includes any wait for a free connection.\n\n\
         | target | requests | achieved req/s | p50 | p90 | p99 | max | non-200 | send lag p99 | CPU steal |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.load_fraction * 100.0,
        thousands(ours.rate),
        args.latency_seconds,
        args.latency_connections,
    ));
    for (name, run) in [("rankstream", ours), ("bare hyper", bare)] {
        let [p50, p90, p99, max] = percentile_cells(&run.latencies, ms);
        out.push_str(&format!(
            "| {name} | {} | {} | {p50} | {p90} | {p99} | {max} | {} | {} | {} |\n",
            thousands(run.latencies.len() as f64),
            thousands(run.achieved),
            run.tally.failures.count,
            ms(percentile(&run.send_lag, 0.99)),
            steal(run.steal),
        ));
    }
    out.push_str(
        "\nSend lag: scheduled time -> the request handed to its connection (the client's own share of the \
         latency, included in it). CPU steal: the share of the machine's CPU time that the hypervisor gave to \
         other guests during the phase (`/proc/stat`); while a virtual CPU is taken away, every thread on it \
         stalls, the bare server's too.\n",
    );
    if let Some(times) = &report.server_times {
        out.push_str(&format!(
            "\nrankstream's own time per recommend, as its `/v1/admin/stats` counts it (parsed request head -> \
             response ready, waits for a CPU while it ran included; over every recommend request of the run, the \
             closed-loop rounds at full load too): {}.\n",
            times.summary()
        ));
    }
    out
}

/// A steal share as a percentage, or "n/a" where `/proc/stat` could not be read.
fn steal(share: Option<f64>) -> String {
    share.map_or("n/a".to_string(), |share| format!("{:.1}%", share * 100.0))
}

// ---------------------------------------------------------------- main

fn print_latency(name: &str, run: &OpenRun) {
    println!(
        "latency {name} at {} req/s: {} requests ({} req/s achieved): {}; non-200 {}; send lag p99 {}; CPU steal {}",
        thousands(run.rate),
        thousands(run.latencies.len() as f64),
        thousands(run.achieved),
        summary(&run.latencies),
        run.tally.failures.count,
        ms(percentile(&run.send_lag, 0.99)),
        steal(run.steal),
    );
}

/// One closed-loop round of `load` for `span_seconds`, with the CPU time per request it
/// cost; its non-200s are added to `failures`.
async fn round(
    load: &Load,
    args: &Args,
    span_seconds: f64,
    (is_bare, server_pid): (bool, Option<u32>),
    failures: &mut Failures,
) -> Result<Round> {
    let before = CpuUse::now(server_pid);
    let ClosedRun {
        latencies,
        seconds,
        tally,
    } = load
        .closed_loop(args.connections, Span::Seconds(span_seconds), count_non_200)
        .await?;
    let requests = latencies.len();
    let cpu = before
        .zip(CpuUse::now(server_pid))
        .map(|(before, after)| before.per_request(after, is_bare, requests));
    failures.merge(tally.failures);
    Ok(Round {
        requests,
        seconds,
        per_sec: requests as f64 / seconds,
        latencies,
        cpu,
    })
}

async fn measure(
    args: &Args,
    ours: &Load,
    bare: &Load,
    (response_bytes, bare_bytes, bare_threads): (usize, usize, usize),
    server_pid: Option<u32>,
) -> Result<Report> {
    let (mut bare_failures, mut ours_failures) = (Failures::default(), Failures::default());
    for (name, load, is_bare, failures) in [
        ("bare", bare, true, &mut bare_failures),
        ("rankstream", ours, false, &mut ours_failures),
    ] {
        let warmup = round(load, args, args.warmup_seconds, (is_bare, server_pid), failures).await?;
        eprintln!("warm-up {name}: {} req/s", thousands(warmup.per_sec));
    }
    let (mut bare_rounds, mut ours_rounds) = (Vec::new(), Vec::new());
    for number in 1..=args.rounds {
        for (name, load, is_bare, failures, rounds) in [
            ("bare hyper", bare, true, &mut bare_failures, &mut bare_rounds),
            ("rankstream", ours, false, &mut ours_failures, &mut ours_rounds),
        ] {
            let result = round(load, args, args.seconds, (is_bare, server_pid), failures).await?;
            println!(
                "round {number} {name}: {} requests in {:.2} s = {} req/s ({}){}",
                thousands(result.requests as f64),
                result.seconds,
                thousands(result.per_sec),
                summary(&result.latencies),
                result.cpu.map_or(String::new(), |cpu| format!(
                    "; CPU per request: server {:.1} µs, client {:.1} µs",
                    cpu.server_us, cpu.client_us
                )),
            );
            rounds.push(result);
        }
    }
    let ours_max = Report::median_rate(&ours_rounds);
    let bare_max = Report::median_rate(&bare_rounds);
    println!(
        "max throughput (medians): bare {} req/s, rankstream {} req/s = {:.1}%",
        thousands(bare_max),
        thousands(ours_max),
        100.0 * ours_max / bare_max
    );
    if let Some(line) = cpu_medians(&bare_rounds, &ours_rounds) {
        println!("{line}");
    }
    let rate = ours_max * args.load_fraction;
    ensure!(rate > 0.0, "no rankstream throughput to take a fraction of");
    let (n, seconds) = (args.latency_connections, args.latency_seconds);
    let ours_latency = ours.open_loop(n, rate, seconds, count_non_200).await?;
    print_latency("rankstream", &ours_latency);
    let bare_latency = bare.open_loop(n, rate, seconds, count_non_200).await?;
    print_latency("bare hyper", &bare_latency);
    // Optional: a server binary from before /v1/admin/stats had request times can still be measured.
    let server_times = match ServerTimes::read(&ours.target, "/v1/recommend").await {
        Ok(times) => {
            println!(
                "rankstream's own time per recommend (/v1/admin/stats, all phases), {}",
                times.summary()
            );
            Some(times)
        }
        Err(error) => {
            eprintln!("rankstream's own request times are not available: {error:#}");
            None
        }
    };
    Ok(Report {
        response_bytes,
        bare_bytes,
        bare_rounds,
        ours_rounds,
        ours_latency,
        bare_latency,
        bare_failures,
        ours_failures,
        bare_threads,
        server_times,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(!args.candidates.is_empty(), "--candidates needs a count");
    let counts = [
        *args.candidates.iter().min().unwrap_or(&0),
        args.items,
        args.users,
        args.events_per_user,
        args.connections,
        args.rounds,
        args.latency_connections,
    ];
    ensure!(!counts.contains(&0), "counts must be > 0");
    ensure!(
        args.candidates.iter().all(|count| *count <= args.items),
        "--candidates must be <= --items"
    );
    ensure!(
        !(args.rules && args.candidates.len() > 1),
        "--rules takes one --candidates count"
    );
    ensure!(
        args.seconds > 0.0 && args.latency_seconds > 0.0 && args.warmup_seconds >= 0.0,
        "durations must be > 0"
    );
    ensure!(
        args.load_fraction > 0.0 && args.load_fraction <= 1.0,
        "--load-fraction must be in (0, 1]"
    );
    let binary = server_binary(args.run.server_bin.as_ref())?;
    let mut rng = StdRng::seed_from_u64(args.run.seed);

    let server = SpawnedServer::start(&binary, &[], &RATE_LIMIT_ENV).await?;
    server.announce();
    let (ours, server_pid) = (Arc::new(server.target()?), server.pid());
    let bare_threads = args
        .bare_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bare_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(bare_threads)
        .thread_name(BARE_THREAD_NAME)
        .enable_all()
        .build()?;
    let work = async {
        create_catalog(&ours, &args, &mut rng).await?;
        create_live_state(&ours, &args, &mut rng).await?;
        let bodies = Arc::new(request_bodies(&args, args.candidates[0], &mut rng)?);
        let (response_bytes, example) = sample_responses(&ours, &bodies, &args, args.candidates[0]).await?;
        let bare_body = padded_json(response_bytes);
        eprintln!(
            "recommend responses: {response_bytes} bytes (median of {SIZE_SAMPLES}), e.g. {}",
            snippet(example.to_string().as_bytes())
        );
        let bare_address = start_bare_server(&bare_runtime, bare_body.clone())?;
        let bare = Target::parse(&format!("http://{bare_address}"), ours.key.clone())?;
        eprintln!(
            "bare hyper server at {bare_address} ({bare_threads} threads), answering {} bytes",
            bare_body.len()
        );
        let load = |target| Load {
            target,
            endpoint: RECOMMEND,
            bodies: bodies.clone(),
        };
        let sizes = (response_bytes, bare_body.len(), bare_threads);
        if args.candidates.len() > 1 {
            let mut swept = vec![(RULE_KINDS[0].to_string(), load(Arc::new(bare)))];
            for &count in &args.candidates {
                let bodies = Arc::new(request_bodies(&args, count, &mut rng)?);
                sample_responses(&ours, &bodies, &args, count).await?;
                let load = Load {
                    target: ours.clone(),
                    endpoint: RECOMMEND,
                    bodies,
                };
                swept.push((format!("rankstream, {count} candidates"), load));
            }
            let kinds: Vec<(&str, &Load)> = swept.iter().map(|(name, load)| (name.as_str(), load)).collect();
            let (rounds, failures) = interleaved(&args, &kinds, server_pid).await?;
            return Ok(Measured::Sweep(SweepReport { rounds, failures }));
        }
        if args.rules {
            let ruled = Load {
                target: ours.clone(),
                endpoint: RECOMMEND,
                bodies: Arc::new(with_rules(&bodies, &args, &mut rng)?),
            };
            let loads = [&load(Arc::new(bare)), &load(ours.clone()), &ruled];
            return measure_rules(&args, loads, server_pid).await.map(Measured::Rules);
        }
        measure(&args, &load(ours.clone()), &load(Arc::new(bare)), sizes, server_pid)
            .await
            .map(Measured::Plain)
    };
    let outcome = server.stop_after(work).await;
    bare_runtime.shutdown_background();
    let report = match outcome? {
        Measured::Plain(report) => report,
        Measured::Rules(rules) => return rules.publish(&args),
        Measured::Sweep(sweep) => return sweep.publish(&args),
    };

    print_goals(&goals(&report, &args));
    if report.non_200() > 0 {
        for (name, failures) in [
            ("bare, closed loop", &report.bare_failures),
            ("rankstream, closed loop", &report.ours_failures),
            ("rankstream, open loop", &report.ours_latency.tally.failures),
            ("bare, open loop", &report.bare_latency.tally.failures),
        ] {
            if let Some(first) = &failures.first {
                eprintln!("{name}: {} non-200, the first: {first}", failures.count);
            }
        }
        bail!("{} responses were not 200; no Markdown written", report.non_200());
    }
    if let Some(path) = &args.run.write_markdown {
        publish_section(path, MARKDOWN_HEADING, &markdown_section(&args, &report), Some(&INDEX))?;
    }
    Ok(())
}

// ---------------------------------------------------------------- --rules

/// What a run measured: the usual report, the cost of the rules, or the sweep.
enum Measured {
    Plain(Report),
    Rules(RulesReport),
    Sweep(SweepReport),
}

/// Closed-loop rounds of the bare server, rankstream without rules and with them.
struct RulesReport {
    /// Per kind (bare, plain, with rules), its rounds.
    rounds: [Vec<Round>; 3],
    failures: Failures,
}

const RULE_KINDS: [&str; 3] = ["bare hyper", "rankstream", "rankstream + rules"];

async fn measure_rules(args: &Args, loads: [&Load; 3], server_pid: Option<u32>) -> Result<RulesReport> {
    let kinds: Vec<(&str, &Load)> = RULE_KINDS.iter().copied().zip(loads).collect();
    let (rounds, failures) = interleaved(args, &kinds, server_pid).await?;
    let rounds: [Vec<Round>; 3] = rounds.try_into().map_err(|_| anyhow::anyhow!("three kinds"))?;
    Ok(RulesReport { rounds, failures })
}

/// An error when some response was not a 200 (no Markdown is written then).
fn no_failures(failures: &Failures) -> Result<()> {
    if failures.count > 0 {
        bail!(
            "{} responses were not 200 (the first: {:?}); no Markdown written",
            failures.count,
            failures.first
        );
    }
    Ok(())
}

/// Closed-loop rounds of each of `kinds` (the first the bare server), interleaved, after
/// a warm-up of each: each kind's rounds, and the non-200s of all.
async fn interleaved(
    args: &Args,
    kinds: &[(&str, &Load)],
    server_pid: Option<u32>,
) -> Result<(Vec<Vec<Round>>, Failures)> {
    let mut failures = Failures::default();
    for (kind, (name, load)) in kinds.iter().enumerate() {
        let warmup = round(load, args, args.warmup_seconds, (kind == 0, server_pid), &mut failures).await?;
        eprintln!("warm-up {name}: {} req/s", thousands(warmup.per_sec));
    }
    let mut rounds: Vec<Vec<Round>> = kinds.iter().map(|_| Vec::new()).collect();
    for number in 1..=args.rounds {
        for (kind, (name, load)) in kinds.iter().enumerate() {
            let result = round(load, args, args.seconds, (kind == 0, server_pid), &mut failures).await?;
            println!(
                "round {number} {name}: {} req/s ({}){}",
                thousands(result.per_sec),
                summary(&result.latencies),
                result.cpu.map_or(String::new(), |cpu| format!(
                    "; server CPU per request {:.1} µs",
                    cpu.server_us
                )),
            );
            rounds[kind].push(result);
        }
    }
    Ok((rounds, failures))
}

impl RulesReport {
    /// The median server CPU per request of each kind, if `/proc` told.
    fn cpu(&self) -> Option<[f64; 3]> {
        Some([
            median_server_cpu(&self.rounds[0])?,
            median_server_cpu(&self.rounds[1])?,
            median_server_cpu(&self.rounds[2])?,
        ])
    }

    fn publish(&self, args: &Args) -> Result<()> {
        no_failures(&self.failures)?;
        let cpu = self.cpu().context("no CPU figures from /proc")?;
        let rates: Vec<f64> = self.rounds.iter().map(|rounds| Report::median_rate(rounds)).collect();
        let line = format!(
            "server CPU per request (medians): bare {:.1} µs, rankstream {:.1} µs ({:.2}x bare), with the rules {:.1} µs \
             ({:.2}x bare): the rules cost {:.1} µs per request ({:+.1}%)",
            cpu[0],
            cpu[1],
            cpu[1] / cpu[0],
            cpu[2],
            cpu[2] / cpu[0],
            cpu[2] - cpu[1],
            100.0 * (cpu[2] / cpu[1] - 1.0),
        );
        println!("{line}");
        let Some(path) = &args.run.write_markdown else {
            return Ok(());
        };
        let mut out = section_head(RULES_HEADING, "bench-recommend");
        out.push_str(&format!(
            "- Setup as in \"Recommend latency\" ({} items, {} users with live state, {} candidates per request, \
             model `{}`). The rule set of every request: `exclude_ids` of {EXCLUDED} random catalog ids, two filters \
             (`price lte 400`, `groups nin [\"Nightlife\"]`), one boost (`tags in [\"family\"]`, multiply 1.2).\n\
             - Closed loop, {} connections, {} rounds of {} s interleaved: bare, rankstream, rankstream with the rules \
             (the same bodies but for the rules).\n\n",
            thousands(args.items as f64),
            thousands(args.users as f64),
            args.candidates[0],
            args.model,
            args.connections,
            args.rounds,
            args.seconds,
        ));
        out.push_str("| | req/s (median) | server CPU per request (median) | vs bare |\n|---|---|---|---|\n");
        for kind in 0..3 {
            out.push_str(&format!(
                "| {} | {} | {:.1} µs | {:.2}x |\n",
                RULE_KINDS[kind],
                thousands(rates[kind]),
                cpu[kind],
                cpu[kind] / cpu[0]
            ));
        }
        out.push_str(&format!("\n{line}.\n"));
        publish_section(path, RULES_HEADING, &out, None)
    }
}

// ---------------------------------------------------------------- --candidates 10,100,1000

/// Closed-loop rounds of the bare server and of rankstream with each candidate count.
struct SweepReport {
    /// The bare server's rounds, then each count's, in `--candidates` order.
    rounds: Vec<Vec<Round>>,
    failures: Failures,
}

impl SweepReport {
    fn publish(&self, args: &Args) -> Result<()> {
        no_failures(&self.failures)?;
        let cpu: Vec<f64> = self
            .rounds
            .iter()
            .map(|rounds| median_server_cpu(rounds))
            .collect::<Option<_>>()
            .context("no CPU figures from /proc")?;
        let bare = cpu[0];
        let points: Vec<(f64, f64)> = args
            .candidates
            .iter()
            .map(|&count| count as f64)
            .zip(cpu[1..].iter().copied())
            .collect();
        let (slope, intercept) = least_squares(&points);
        let line = format!(
            "server CPU per recommend ≈ {intercept:.1} µs + {slope:.3} µs × candidates (least squares over the medians); \
             the bare server {bare:.1} µs per request: the intercept is {:.2}x it",
            intercept / bare
        );
        let mut table = String::from(
            "| | req/s (median) | server CPU per request (median) | vs bare | (CPU − bare) / candidates |\n|---|---|---|---|---|\n",
        );
        table.push_str(&format!(
            "| bare hyper | {} | {bare:.1} µs | 1.00x | |\n",
            thousands(Report::median_rate(&self.rounds[0]))
        ));
        for (index, &count) in args.candidates.iter().enumerate() {
            let cpu = cpu[index + 1];
            table.push_str(&format!(
                "| rankstream, {count} candidates | {} | {cpu:.1} µs | {:.2}x | {:.2} µs |\n",
                thousands(Report::median_rate(&self.rounds[index + 1])),
                cpu / bare,
                (cpu - bare) / count as f64,
            ));
        }
        print!("{table}");
        println!("{line}");
        let Some(path) = &args.run.write_markdown else {
            return Ok(());
        };
        let mut out = section_head(SWEEP_HEADING, "bench-recommend");
        out.push_str(&format!(
            "- Setup as in \"Recommend latency\" ({} items, {} users with live state, model `{}`); each candidate \
             count has its own {} bodies of random catalog ids.\n\
             - Closed loop, {} connections, {} rounds of {} s interleaved: bare, then each count. Per candidate: \
             (rankstream's CPU − the bare server's) / candidates.\n\n",
            thousands(args.items as f64),
            thousands(args.users as f64),
            args.model,
            thousands(BODIES as f64),
            args.connections,
            args.rounds,
            args.seconds,
        ));
        out.push_str(&table);
        out.push_str(&format!("\n{line}.\n"));
        publish_section(path, SWEEP_HEADING, &out, None)
    }
}
