//! Search benchmark: `POST /v1/search` latency on a 100k-item catalog, and
//! `POST /v1/search/rerank` of 100 ids. Target: search p99 <= 5 ms.
//!
//! 1. Setup: spawn `rankstream serve` (fresh temp data dir, generated admin key, durability
//!    sync, auth rate limit raised), build the catalog from the MovieLens movies (title →
//!    `name`, genres → `groups`), replicated with variant suffixes ("Redux", "Director's Cut",
//!    ...) to `--items` items, each with a generated description and a price; upsert it
//!    (NDJSON bulk, table `movies`) and poll until the last item is searchable by its name
//!    and a sample of others is too. Then `--session-events` clicks for one user and one
//!    session, so that every request reads live state.
//! 2. Request bodies, made before any timing: `--queries` searches drawn from real titles
//!    (whole, or their first words), genre words and misspelt titles (two neighbouring
//!    letters swapped), with that user and session and the default limit (50); and
//!    `--queries` reranks of `--rerank-ids` random catalog ids with a random
//!    `retrieval_score` each and a title as the query.
//! 3. Closed loop: `--connections` keep-alive connections, one request in flight on each;
//!    `--warmup` unmeasured requests, then every body once. Search, then rerank.
//!
//! Every response must be a 200: otherwise the run fails and no Markdown is written.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-search
//! target/release/bench-search --write-markdown BENCHMARKS.md
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use hyper::StatusCode;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use bench::{
    markdown_row, percentile, percentile_cells, post_events, process_cpu_seconds, publish_section, section_head,
    server_binary, thousands, upsert_items, wait_searchable, ClosedRun, Endpoint, Load, RunArgs, ServerTimes, Span,
    SpawnedServer, Tally, Target, RATE_LIMIT_ENV, SEARCH,
};

const MARKDOWN_HEADING: &str = "## Search and rerank";
const TABLE: &str = "movies";
const RERANK: Endpoint = Endpoint::post_json("/v1/search/rerank");
const SETUP_BATCH: usize = 5_000;
/// Issue 23: search p99 on the 100k-item catalog, judged by rankstream's own p99
/// (`/v1/admin/stats`).
const P99_TARGET_MS: f64 = 2.0;
const USER: &str = "bench-search-user";
const SESSION: &str = "bench-search-session";
const VARIANTS: [&str; 10] = [
    "Redux",
    "Director's Cut",
    "Remastered",
    "Extended Edition",
    "Special Edition",
    "Anniversary Edition",
    "Final Cut",
    "Collector's Edition",
    "Restored",
    "Ultimate Edition",
];
const ADJECTIVES: [&str; 12] = [
    "gripping",
    "tender",
    "hilarious",
    "haunting",
    "sweeping",
    "quiet",
    "bold",
    "dark",
    "joyful",
    "tense",
    "moving",
    "strange",
];
const SUBJECTS: [&str; 12] = [
    "family",
    "friendship",
    "revenge",
    "love",
    "survival",
    "ambition",
    "loss",
    "adventure",
    "betrayal",
    "childhood",
    "war",
    "music",
];

#[derive(Parser, Debug)]
#[command(about = "Benchmark POST /v1/search and POST /v1/search/rerank on a MovieLens-based catalog")]
struct Args {
    /// Catalog items (MovieLens movies, replicated with variant suffixes).
    #[arg(long, default_value_t = 100_000)]
    items: usize,
    /// MovieLens movies.csv.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/movielens_latest_small/movies.csv"))]
    movies: PathBuf,
    /// Measured requests per endpoint.
    #[arg(long, default_value_t = 3_000)]
    queries: usize,
    /// Unmeasured requests per endpoint before the measured ones.
    #[arg(long, default_value_t = 300)]
    warmup: usize,
    /// Keep-alive connections, one request in flight on each.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Ids per rerank request.
    #[arg(long, default_value_t = 100)]
    rerank_ids: usize,
    /// Clicks of the benchmark's user and session before the measurements.
    #[arg(long, default_value_t = 20)]
    session_events: usize,
    /// Print this many of the slowest searches with their bodies (one connection only).
    #[arg(long, default_value_t = 0)]
    slowest: usize,
    #[command(flatten)]
    run: RunArgs,
}

struct Movie {
    title: String,
    genres: Vec<String>,
}

fn read_movies(path: &PathBuf) -> Result<Vec<Movie>> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let mut movies = Vec::new();
    for record in reader.records() {
        let record = record?;
        movies.push(Movie {
            title: record[1].to_string(),
            genres: record[2]
                .split('|')
                .filter(|genre| *genre != "(no genres listed)")
                .map(str::to_string)
                .collect(),
        });
    }
    ensure!(!movies.is_empty(), "no movies in {}", path.display());
    Ok(movies)
}

/// Item `index`: a movie, its title with a variant suffix past the first copy.
fn item(movies: &[Movie], index: usize, rng: &mut StdRng) -> Value {
    let movie = &movies[index % movies.len()];
    let copy = index / movies.len();
    let name = match copy {
        0 => movie.title.clone(),
        copy if copy <= VARIANTS.len() => format!("{} {}", movie.title, VARIANTS[copy - 1]),
        copy => format!("{} {} {}", movie.title, VARIANTS[copy % VARIANTS.len()], copy),
    };
    let genres = movie.genres.join(" and ").to_lowercase();
    let description = format!(
        "A {} {} film about {} and {}.",
        ADJECTIVES[rng.random_range(0..ADJECTIVES.len())],
        if genres.is_empty() {
            "genre-less".to_string()
        } else {
            genres
        },
        SUBJECTS[rng.random_range(0..SUBJECTS.len())],
        SUBJECTS[rng.random_range(0..SUBJECTS.len())],
    );
    let mut row = json!({
        "id": format!("m-{index:06}"),
        "_table": TABLE,
        "name": name,
        "description": description,
        "price": (rng.random_range(199..2_999) as f64) / 100.0,
    });
    if !movie.genres.is_empty() {
        row["groups"] = json!(movie.genres);
    }
    row
}

/// Upserts the catalog and waits until it is searchable; returns the item names.
async fn create_catalog(target: &Target, args: &Args, movies: &[Movie], rng: &mut StdRng) -> Result<Vec<String>> {
    let mut sender = target.connect().await?;
    let started = Instant::now();
    let items: Vec<Value> = (0..args.items).map(|index| item(movies, index, rng)).collect();
    let names: Vec<String> = items
        .iter()
        .map(|row| row["name"].as_str().unwrap_or_default().to_string())
        .collect();
    upsert_items(target, &mut sender, &items, SETUP_BATCH).await?;
    let stored = started.elapsed().as_secs_f64();
    let samples: Vec<usize> = (0..8).map(|i| i * args.items / 8).chain([args.items - 1]).collect();
    for index in samples {
        let id = format!("m-{index:06}");
        wait_searchable(target, &mut sender, &names[index], &id, Duration::from_secs(300)).await?;
    }
    eprintln!(
        "catalog: {} items stored in {stored:.2} s, searchable after {:.2} s",
        thousands(args.items as f64),
        started.elapsed().as_secs_f64()
    );
    Ok(names)
}

/// Clicks of the benchmark's user and session on random items.
async fn session_state(target: &Target, args: &Args, rng: &mut StdRng) -> Result<()> {
    let now = chrono::Utc::now();
    let events: Vec<Value> = (0..args.session_events)
        .map(|seq| {
            let at = now - chrono::Duration::seconds(((args.session_events - seq) * 10) as i64);
            json!({
                "type": "click", "click_type": "select", "uid": USER, "sid": SESSION,
                "item_id": format!("m-{:06}", rng.random_range(0..args.items)),
                "original_timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            })
        })
        .collect();
    let mut sender = target.connect().await?;
    post_events(target, &mut sender, &events, events.len().max(1)).await
}

/// Swaps two neighbouring letters of the longest word.
fn misspell(title: &str, rng: &mut StdRng) -> String {
    let mut words: Vec<String> = title.split(' ').map(str::to_string).collect();
    let Some((index, _)) = words.iter().enumerate().max_by_key(|(_, w)| w.chars().count()) else {
        return title.to_string();
    };
    let mut letters: Vec<char> = words[index].chars().collect();
    if letters.len() >= 4 {
        let at = rng.random_range(1..letters.len() - 1);
        letters.swap(at, at + 1);
        words[index] = letters.into_iter().collect();
    }
    words.join(" ")
}

/// The kinds of search query, as the latency breakdown names them.
const KINDS: [&str; 4] = ["title", "first words", "genre word", "misspelt title"];

/// Search bodies and the kind of each: 30% titles, 20% their first two words, 20% genre
/// words, 30% misspelt titles.
fn search_bodies(movies: &[Movie], count: usize, rng: &mut StdRng) -> Result<(Vec<Bytes>, Vec<usize>)> {
    let genres: Vec<&str> = {
        let mut all: Vec<&str> = movies
            .iter()
            .flat_map(|m| m.genres.iter().map(String::as_str))
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let (mut bodies, mut kinds) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for _ in 0..count {
        let movie = &movies[rng.random_range(0..movies.len())];
        let title = movie
            .title
            .rsplit_once(" (")
            .map_or(movie.title.as_str(), |(title, _)| title);
        let (kind, query) = match rng.random_range(0..10) {
            0..=2 => (0, title.to_string()),
            3..=4 => (1, title.split(' ').take(2).collect::<Vec<_>>().join(" ")),
            5..=6 => (2, genres[rng.random_range(0..genres.len())].to_lowercase()),
            _ => (3, misspell(title, rng)),
        };
        let body = json!({"query": query, "user_id": USER, "session_id": SESSION});
        bodies.push(serde_json::to_vec(&body)?.into());
        kinds.push(kind);
    }
    Ok((bodies, kinds))
}

/// Search latencies by query kind, each kind's in one list. Only with one connection,
/// where the latencies are in the bodies' order.
fn by_kind(run: &ClosedRun, kinds: &[usize]) -> Vec<(&'static str, Vec<f64>)> {
    KINDS
        .iter()
        .enumerate()
        .map(|(kind, name)| {
            let latencies = run
                .latencies
                .iter()
                .zip(kinds)
                .filter(|(_, k)| **k == kind)
                .map(|(latency, _)| *latency)
                .collect();
            (*name, latencies)
        })
        .collect()
}

/// The `count` slowest searches, slowest first, with their bodies (one connection only,
/// where the latencies are in the bodies' order): what to look at when the tail grows.
fn print_slowest(run: &ClosedRun, bodies: &[Bytes], count: usize) {
    let mut order: Vec<usize> = (0..run.latencies.len().min(bodies.len())).collect();
    order.sort_by(|a, b| run.latencies[*b].total_cmp(&run.latencies[*a]));
    for at in order.into_iter().take(count) {
        let body = String::from_utf8_lossy(&bodies[at]);
        println!("  slow: {} {body}", ms(run.latencies[at]));
    }
}

fn rerank_bodies(args: &Args, movies: &[Movie], count: usize, rng: &mut StdRng) -> Result<Vec<Bytes>> {
    (0..count)
        .map(|_| {
            let ids: Vec<String> = sample(rng, args.items, args.rerank_ids)
                .iter()
                .map(|i| format!("m-{i:06}"))
                .collect();
            let metadata: Vec<Value> = ids
                .iter()
                .map(|id| json!({"item_id": id, "retrieval_score": rng.random_range(0.0..1.0)}))
                .collect();
            let title = &movies[rng.random_range(0..movies.len())].title;
            let body = json!({"query": title, "item_ids": ids, "item_retrieval_metadata": metadata,
                              "user_id": USER, "session_id": SESSION});
            Ok(serde_json::to_vec(&body)?.into())
        })
        .collect()
}

/// Sends every body once to `endpoint` over `connections` connections, one request in
/// flight on each, counting the items of every 200 and the other answers.
async fn closed_loop(
    target: &Arc<Target>,
    endpoint: Endpoint,
    bodies: Arc<Vec<Bytes>>,
    connections: usize,
) -> Result<ClosedRun> {
    let load = Load {
        target: target.clone(),
        endpoint,
        bodies,
    };
    let count_items = |_body, status, response: &[u8], tally: &mut Tally| {
        if status == StatusCode::OK {
            let json: Value = serde_json::from_slice(response)?;
            tally.items += json["items"].as_array().map_or(0, Vec::len);
        } else {
            tally.failures.record(status, response);
        }
        Ok(())
    };
    load.closed_loop(connections, Span::EachBodyOnce, count_items).await
}

/// A latency in ms to two decimals (this section's format since its first figures).
fn ms(value: f64) -> String {
    format!("{value:.2} ms")
}

/// Whether rankstream's own search p99 meets the target.
fn verdict(own: &ServerTimes) -> &'static str {
    if own.p99_ms <= P99_TARGET_MS {
        "met"
    } else {
        "NOT met"
    }
}

fn summary(run: &ClosedRun) -> String {
    let [p50, p90, p99, max] = percentile_cells(&run.latencies, ms);
    format!(
        "p50 {p50}, p90 {p90}, p99 {p99}, max {max}; {} req/s; {:.1} items per response",
        thousands(run.per_sec()),
        run.tally.items as f64 / run.latencies.len().max(1) as f64
    )
}

fn markdown_section(
    args: &Args,
    search: &ClosedRun,
    rerank: &ClosedRun,
    setup: &str,
    kinds: &[(&str, Vec<f64>)],
    own: &ServerTimes,
    cpu_per_search: Option<f64>,
) -> String {
    let client_p99 = percentile(&search.latencies, 0.99);
    let row = |name: &str, run: &ClosedRun| {
        let [p50, p90, p99, max] = percentile_cells(&run.latencies, ms);
        let count = thousands(run.latencies.len() as f64);
        markdown_row(&[name.to_owned(), count, p50, p90, p99, max, thousands(run.per_sec())])
    };
    let mut out = section_head(MARKDOWN_HEADING, "bench-search");
    out.push_str(&format!(
        "- Catalog: {} items built from the MovieLens latest-small movies (title → `name` with a variant \
         suffix past the first copy, genres → `groups`, a generated description, a price); {setup}\n\
         - Requests: closed loop, {} keep-alive connection(s), one request in flight each, {} unmeasured first; \
         search bodies are titles, first words of titles, genre words and misspelt titles with a user and a session \
         that have {} live clicks, default limit (50); rerank bodies are {} random catalog ids with a retrieval_score \
         each and a title as the query, same user and session, default model\n\
         - Target (issue 23): search p99 <= {P99_TARGET_MS} ms by rankstream's own account: {} (own p99 {}; \
         the client's p99 {})\n\
         - rankstream's own search times (`/v1/admin/stats`, every search it answered, the unmeasured first \
         ones and the setup's included): {}\n\
         - Server CPU per search (`/proc`, around the measured searches): {}\n\
         - A query asked again within one index generation and one set of priors is answered from the \
         server's cache of recent queries (`search.cached_queries`): the genre words repeat, most titles do not\n\
         - The machine is shared and noisy (2 cores, other builds may run): compare runs of the same day.\n\n\
         | endpoint | requests | p50 | p90 | p99 | max | req/s |\n|---|---|---|---|---|---|---|\n{}\n{}\n",
        thousands(args.items as f64),
        args.connections,
        args.warmup,
        args.session_events,
        args.rerank_ids,
        verdict(own),
        ms(own.p99_ms),
        ms(client_p99),
        own.summary(),
        cpu_per_search.map_or("not read".to_owned(), |micros| format!("{micros:.0} µs")),
        row("POST /v1/search", search),
        row(&format!("POST /v1/search/rerank ({} ids)", args.rerank_ids), rerank),
    ));
    if !kinds.is_empty() {
        out.push_str("\n| search query kind | requests | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n");
        for (name, latencies) in kinds {
            let [p50, p90, p99, max] = percentile_cells(latencies, ms);
            let count = thousands(latencies.len() as f64);
            out.push_str(&markdown_row(&[name.to_string(), count, p50, p90, p99, max]));
            out.push('\n');
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.items > 0 && args.queries > 0 && args.connections > 0,
        "counts must be > 0"
    );
    ensure!(args.rerank_ids <= args.items, "--rerank-ids must be <= --items");
    let movies = read_movies(&args.movies)?;
    let binary = server_binary(args.run.server_bin.as_ref())?;
    let mut rng = StdRng::seed_from_u64(args.run.seed);
    let server = SpawnedServer::start(&binary, &[], &RATE_LIMIT_ENV).await?;
    server.announce();
    let target = Arc::new(server.target()?);
    let server_pid = server.pid();
    let work = async {
        let started = Instant::now();
        create_catalog(&target, &args, &movies, &mut rng).await?;
        let setup = format!(
            "stored and searchable {:.1} s after the first upsert",
            started.elapsed().as_secs_f64()
        );
        session_state(&target, &args, &mut rng).await?;
        let (searches, kinds) = search_bodies(&movies, args.queries, &mut rng)?;
        let searches = Arc::new(searches);
        let warm_searches = Arc::new(search_bodies(&movies, args.warmup, &mut rng)?.0);
        let reranks = Arc::new(rerank_bodies(&args, &movies, args.queries, &mut rng)?);
        let warm_reranks = Arc::new(rerank_bodies(&args, &movies, args.warmup, &mut rng)?);
        closed_loop(&target, SEARCH, warm_searches, args.connections).await?;
        let cpu_before = server_pid.and_then(process_cpu_seconds);
        let search = closed_loop(&target, SEARCH, searches.clone(), args.connections).await?;
        let cpu_after = server_pid.and_then(process_cpu_seconds);
        println!("search: {}", summary(&search));
        // Read from /proc in 10 ms ticks: a few thousand searches make it exact to ~1%.
        let cpu_per_search = cpu_before
            .zip(cpu_after)
            .map(|(before, after)| (after - before) * 1e6 / search.latencies.len().max(1) as f64);
        if let Some(micros) = cpu_per_search {
            println!("server CPU per search: {micros:.0} µs");
        }
        let own = ServerTimes::read(&target, SEARCH.path).await?;
        println!("rankstream's own search times (/v1/admin/stats): {}", own.summary());
        let kinds = match args.connections {
            1 => by_kind(&search, &kinds),
            _ => Vec::new(),
        };
        for (name, latencies) in &kinds {
            let [p50, _, p99, max] = percentile_cells(latencies, ms);
            println!("  {name} ({}): p50 {p50}, p99 {p99}, max {max}", latencies.len());
        }
        if args.connections == 1 {
            print_slowest(&search, &searches, args.slowest);
        }
        closed_loop(&target, RERANK, warm_reranks, args.connections).await?;
        let rerank = closed_loop(&target, RERANK, reranks, args.connections).await?;
        println!("rerank ({} ids): {}", args.rerank_ids, summary(&rerank));
        anyhow::Ok((search, rerank, setup, kinds, own, cpu_per_search))
    };
    let (search, rerank, setup, kinds, own, cpu_per_search) = server.stop_after(work).await?;
    for (name, run) in [("search", &search), ("rerank", &rerank)] {
        let failures = &run.tally.failures;
        if failures.count > 0 {
            bail!(
                "{name}: {} responses were not 200, the first: {:?}; no Markdown written",
                failures.count,
                failures.first
            );
        }
    }
    println!(
        "target search p99 <= {P99_TARGET_MS} ms by rankstream's own account: {} ({}; the client's {})",
        verdict(&own),
        ms(own.p99_ms),
        ms(percentile(&search.latencies, 0.99))
    );
    if let Some(path) = &args.run.write_markdown {
        let section = markdown_section(&args, &search, &rerank, &setup, &kinds, &own, cpu_per_search);
        publish_section(path, MARKDOWN_HEADING, &section, None)?;
    }
    Ok(())
}
