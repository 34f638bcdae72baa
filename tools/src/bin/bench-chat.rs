//! Chat benchmark: latency of one `POST /chat` turn, in 3-turn conversations, on the
//! MovieLens catalog with prices.
//!
//! 1. Setup: spawn `rankstream serve` (fresh temp data dir, generated admin key, durability
//!    sync, auth rate limit raised), upsert every movie of `--movies` (title → `name`,
//!    genres → `groups`, a synthetic `price` 1.00–29.99 and `availability` from the movie id)
//!    to table `movies`, and wait until search finds the last one.
//! 2. Closed loop: `--connections` keep-alive connections, one request in flight on each,
//!    for `--seconds` (after `--warmup-seconds` unmeasured). Each connection runs
//!    conversations of three turns taken from a fixed list of scripts ("comedies under 10" →
//!    "cheaper" → "for kids", ...): the first turn starts a conversation, the next two carry
//!    its `conversation_id`. Every request carries the connection's `session_id`. Latency is
//!    measured per turn, from sending the request to the end of the response.
//!
//! Every response must be a 200 with items or a reply: other statuses are counted and make
//! the run fail (no Markdown is written then).
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-chat
//! target/release/bench-chat --write-markdown BENCHMARKS.md
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Parser;
use hyper::StatusCode;
use serde_json::{json, Value};

use bench::{
    markdown_row, on_connections, percentile_cells, publish_section, section_head, server_binary, thousands,
    upsert_items, wait_searchable, Connection, Endpoint, Failures, IndexEntry, SpawnedServer, Target, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Chat";
/// This tool's line in the index at the top of BENCHMARKS.md.
const INDEX: IndexEntry = IndexEntry {
    tool: "bench-chat",
    row: "| Chat | `tools/src/bin/bench-chat.rs` (`bench-chat`) | a chat turn's p50/p99 (no target set) |",
};
const TABLE: &str = "movies";
const CHAT: Endpoint = Endpoint::post_json("/chat");
/// Movies per bulk upsert.
const SETUP_BATCH: usize = 2_000;
/// The conversations each connection runs in turn.
const SCRIPTS: [[&str; 3]; 6] = [
    ["comedies under 10", "cheaper", "for kids"],
    ["thrillers under 20", "something with murder in it", "cheaper"],
    ["dramas between 5 and 15", "with love", "more expensive"],
    ["sci-fi", "under 8", "any price"],
    ["animated movies for kids", "under 12", "cheaper"],
    ["romantic comedies", "under 15", "also dramas"],
];

#[derive(Parser, Debug)]
#[command(about = "Benchmark POST /chat: latency of a turn in 3-turn conversations")]
struct Args {
    /// MovieLens movies.csv (movieId,title,genres).
    #[arg(long, default_value = "../shared/data/movielens_latest_small/movies.csv")]
    movies: PathBuf,
    /// Keep-alive connections, one conversation in flight on each.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Unmeasured seconds before.
    #[arg(long, default_value_t = 3.0)]
    warmup_seconds: f64,
    /// `limit` of every turn.
    #[arg(long, default_value_t = 4)]
    limit: usize,
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Write (or replace) the `## Chat` section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

fn price_of(id: u64) -> f64 {
    1.0 + ((id * 7919) % 2900) as f64 / 100.0
}

/// The movies as catalog rows, and the title of the last one.
fn movie_rows(path: &PathBuf) -> Result<Vec<Value>> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record?;
        let id: u64 = record[0].parse().context("movieId")?;
        let genres: Vec<&str> = record[2].split('|').collect();
        let availability = if id.is_multiple_of(10) { "sold_out" } else { "available" };
        rows.push(json!({
            "id": id.to_string(), "_table": TABLE, "name": &record[1], "groups": genres,
            "price": price_of(id), "currency": "USD", "availability": availability,
        }));
    }
    ensure!(!rows.is_empty(), "{} has no movies", path.display());
    Ok(rows)
}

/// Upserts the movies and waits until search finds the last one; returns the seconds
/// that took.
async fn load_catalog(target: &Target, rows: &[Value]) -> Result<f64> {
    let mut sender = target.connect().await?;
    let started = Instant::now();
    upsert_items(target, &mut sender, rows, SETUP_BATCH).await?;
    let last = rows.last().expect("rows");
    let (name, id) = (
        last["name"].as_str().unwrap_or_default(),
        last["id"].as_str().unwrap_or_default(),
    );
    wait_searchable(target, &mut sender, name, id, Duration::from_secs(60)).await?;
    Ok(started.elapsed().as_secs_f64())
}

/// What one connection measured.
#[derive(Default)]
struct Measured {
    /// Per turn of a conversation (0, 1, 2): latencies in ms.
    by_turn: [Vec<f64>; 3],
    items: usize,
    /// Turns not answered with a 200 and a reply.
    failures: Failures,
}

/// Runs conversations on one connection until `end`; turns that end before `measure_from`
/// are not recorded.
async fn run_connection(
    target: &Target,
    (connection, mut sender): (usize, Connection),
    limit: usize,
    measure_from: Instant,
    end: Instant,
) -> Result<Measured> {
    let mut measured = Measured::default();
    let session = format!("bench-chat-s-{connection}");
    let mut script_index = connection;
    while Instant::now() < end {
        let script = SCRIPTS[script_index % SCRIPTS.len()];
        script_index += 1;
        let mut conversation: Option<String> = None;
        for (turn, message) in script.iter().enumerate() {
            let mut body = json!({"message": message, "session_id": session, "limit": limit});
            if let Some(id) = &conversation {
                body["conversation_id"] = json!(id);
            }
            let started = Instant::now();
            let (status, response) = target.call(&mut sender, &CHAT, body.to_string().into()).await?;
            let latency = started.elapsed().as_secs_f64() * 1000.0;
            let reply: Value = serde_json::from_slice(&response).unwrap_or(Value::Null);
            let valid = status == StatusCode::OK && reply["message"].as_str().is_some_and(|m| !m.is_empty());
            if !valid {
                measured.failures.record(status, &response);
                break;
            }
            conversation = reply["conversation_id"].as_str().map(str::to_owned);
            if started >= measure_from && Instant::now() <= end {
                measured.by_turn[turn].push(latency);
                measured.items += reply["items"].as_array().map_or(0, Vec::len);
            }
        }
    }
    Ok(measured)
}

/// A latency in ms, one decimal fewer than the other tools' (a turn takes milliseconds).
fn ms(value: f64) -> String {
    match value {
        v if v < 10.0 => format!("{v:.2} ms"),
        v if v < 100.0 => format!("{v:.1} ms"),
        v => format!("{v:.0} ms"),
    }
}

/// `| name | count | p50 | p90 | p99 | max |`.
fn row(name: &str, values: &[f64]) -> String {
    let [p50, p90, p99, max] = percentile_cells(values, ms);
    markdown_row(&[name.to_owned(), thousands(values.len() as f64), p50, p90, p99, max])
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.connections > 0 && args.limit > 0,
        "--connections and --limit must be > 0"
    );
    let rows = movie_rows(&args.movies)?;
    let binary = server_binary(args.server_bin.as_ref())?;
    let server = SpawnedServer::start(&binary, &[], &RATE_LIMIT_ENV).await?;
    let target = Arc::new(server.target()?);
    let work = async {
        let load_seconds = load_catalog(&target, &rows).await?;
        eprintln!("catalog: {} movies searchable after {load_seconds:.2} s", rows.len());
        let connections = target.connect_many(args.connections).await?;
        let measure_from = Instant::now() + Duration::from_secs_f64(args.warmup_seconds);
        let end = measure_from + Duration::from_secs_f64(args.seconds);
        on_connections(connections, |connection, sender| {
            let (target, limit) = (target.clone(), args.limit);
            async move { run_connection(&target, (connection, sender), limit, measure_from, end).await }
        })
        .await
    };
    let measured = server.stop_after(work).await?;
    let mut by_turn: [Vec<f64>; 3] = Default::default();
    let (mut items, mut failures) = (0, Failures::default());
    for connection in measured {
        for (all, turn) in by_turn.iter_mut().zip(connection.by_turn) {
            all.extend(turn);
        }
        items += connection.items;
        failures.merge(connection.failures);
    }
    ensure!(
        failures.count == 0,
        "{} failed turns; first: {}",
        failures.count,
        failures.first.unwrap_or_default()
    );
    let all: Vec<f64> = by_turn.iter().flatten().copied().collect();
    ensure!(!all.is_empty(), "no turn was measured");
    let turns_per_second = all.len() as f64 / args.seconds;
    let mut table = vec![
        "| turns | count | p50 | p90 | p99 | max |".to_owned(),
        "|---|---:|---:|---:|---:|---:|".to_owned(),
        row("all", &all),
    ];
    for (index, name) in ["1st (new conversation)", "2nd", "3rd"].iter().enumerate() {
        table.push(row(name, &by_turn[index]));
    }
    let table = table.join("\n");
    println!("{table}");
    println!(
        "{turns_per_second:.0} turns/s, {:.1} items per turn",
        items as f64 / all.len() as f64
    );
    if let Some(path) = &args.write_markdown {
        let mut section = section_head(MARKDOWN_HEADING, "bench-chat");
        section.push_str(&format!(
            "- Server: `rankstream serve` spawned by the tool on a fresh data dir, durability sync, defaults (no \
             LLM: replies are composed); auth rate limit raised.\n\
             - Data: {} MovieLens movies in table `{TABLE}` (title → name, genres → groups, synthetic price \
             1.00–29.99 and availability from the movie id).\n\
             - Load: closed loop, {} keep-alive connections, one request in flight on each, {} s measured after {} s \
             of warm-up; 3-turn conversations from {} scripts (e.g. \"comedies under 10\" → \"cheaper\" → \"for \
             kids\"), `limit` {}, a `session_id` per connection. A turn = constraint extraction, the conversation \
             actor, retrieval (the `default` model's ranking of every movie meeting the constraints when the \
             message has no free-text words, as in \"comedies under 10\"; personalized search with a pool of 500 \
             and filtering when it has, as in \"something with murder in it\"), reply, and the turn persisted.\n\
             - Result: {turns_per_second:.0} turns/s, {:.1} items per turn. The machine is shared and noisy: \
             figures vary from run to run.\n\n{table}\n",
            thousands(rows.len() as f64),
            args.connections,
            args.seconds,
            args.warmup_seconds,
            SCRIPTS.len(),
            args.limit,
            items as f64 / all.len() as f64,
        ));
        publish_section(path, MARKDOWN_HEADING, &section, Some(&INDEX))?;
    }
    Ok(())
}
