//! Bulk catalog upsert benchmark: how many items per second `PUT /v1/catalog/items`
//! stores with `durability = "sync"` (a 200 means the batch is in the fsynced WAL).
//!
//! By default it starts its own server (`rankstream serve --bind 127.0.0.1:0` on a
//! fresh data dir under the system temp dir, generated admin key, durability sync),
//! learns its address from the `rankstream listening on http://...` line, and stops it
//! with SIGTERM at the end. With `--url URL --key KEY` it uses a running server
//! instead (the key needs `catalog:write`; durability is whatever that server uses).
//!
//! Each run sends `--items` generated products (deterministic from `--seed`, fresh ids
//! every run, so every run inserts) as NDJSON bodies of `--batch` items over
//! `--concurrency` HTTP/1.1 keep-alive connections, one request in flight on each.
//! Bodies are serialized before the clock starts. A non-200 response, a non-empty
//! `failed` list or a short `upserted` count aborts the benchmark.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-catalog
//! target/release/bench-catalog --write-markdown BENCHMARKS.md
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use hyper::{Method, StatusCode};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use bench::{
    check_upserted, median, percentile, publish_section, section_head, server_binary, thousands, Load, Span,
    SpawnedServer, Target, CATALOG_ITEMS,
};

/// What the median over the runs should reach.
const TARGET_ITEMS_PER_SEC: f64 = 50_000.0;
/// The server's default `server.body_limit_bytes` (16 MiB).
const DEFAULT_BODY_LIMIT_BYTES: usize = 16 * 1024 * 1024;
const MARKDOWN_HEADING: &str = "## Catalog bulk upsert";
const TABLE: &str = "products";

#[derive(Parser, Debug)]
#[command(about = "Benchmark bulk catalog upsert (PUT /v1/catalog/items, NDJSON)")]
struct Args {
    /// Use a running server at this base URL (http only) instead of spawning one.
    #[arg(long, requires = "key")]
    url: Option<String>,
    /// API key with `catalog:write`, for `--url`.
    #[arg(long, requires = "url")]
    key: Option<String>,
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long, conflicts_with = "url")]
    server_bin: Option<PathBuf>,
    /// Items per run.
    #[arg(long, default_value_t = 100_000)]
    items: usize,
    /// Items per request body.
    #[arg(long, default_value_t = 5_000)]
    batch: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Timed runs; each inserts `--items` new items.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Length of an `embeddings` vector per item (0: no embeddings).
    #[arg(long, default_value_t = 0)]
    embedding_dims: usize,
    /// Seed of the generated catalog (same seed, same items apart from the ids).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Write (or replace) the `## Catalog bulk upsert` section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

/// One catalog item, shaped like a travel-activities catalog (SPEC's Good/Better tiers).
#[derive(Serialize)]
struct Product {
    id: String,
    #[serde(rename = "_table")]
    table: &'static str,
    name: String,
    description: String,
    groups: Vec<&'static str>,
    tags: Vec<&'static str>,
    price: f64,
    currency: &'static str,
    availability: bool,
    url: String,
    reviews: u32,
    rating: f64,
    created_date: String,
    attraction_age_range: &'static str,
    operator_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    embeddings: Option<Vec<f32>>,
}

const GROUPS: &str = "Museums,Walking Tours,Food Tours,Wine Tasting,Boat Tours,Day Trips,\
    Theme Parks,Zoos,Aquariums,Concerts,Theatre,Sports Events,Cooking Classes,Bike Tours,Hiking,\
    Kayaking,Snorkeling,Scuba Diving,Skiing,Spa,Hot Air Balloons,Helicopter Tours,City Passes,\
    Airport Transfers,Bus Tours,Segway Tours,Photography Tours,Night Tours,Ghost Tours,\
    Historical Sites,Castles,Cathedrals,Art Galleries,Observation Decks,Cruises,Safaris,Climbing,\
    Surfing,Fishing,Horse Riding,Escape Rooms,Nightlife,Shopping Tours,Workshops,Festivals,\
    Gardens,Water Parks,Caves,Volcano Tours,Wildlife Watching";
const TAGS: &str = "family-friendly,skip-the-line,small-group,private,guided,self-guided,\
    wheelchair-accessible,free-cancellation,bestseller,new,outdoor,indoor,half-day,full-day,\
    evening,morning,romantic,adventure,cultural,educational,eco,pet-friendly,hotel-pickup,\
    lunch-included,audio-guide";
const WORDS: &str = "old,town,river,harbour,sunset,mountain,lake,historic,royal,garden,market,\
    bridge,tower,palace,village,coast,island,forest,valley,canal,square,cathedral,vineyard,local,\
    hidden,grand,classic,scenic,secret,street,art,food,wine,tour,cruise,walk,experience,adventure,\
    journey,visit,guide,tasting,views,panoramic,evening,morning,medieval,modern,ancient,quarter,\
    stories,legends,flavours,with,and,the,of,a,through,along,including,expert,traditional";
const CURRENCIES: &str = "EUR,EUR,EUR,USD,USD,GBP";
const AGE_RANGES: &str = "0-99,3-12,6-99,12-99,16-99,18-99,18-65";

/// Generates `count` products deterministically from `seed`; ids are set per run.
fn generate_products(count: usize, seed: u64, embedding_dims: usize) -> Vec<Product> {
    let list = |csv: &'static str| csv.split(',').map(str::trim).collect::<Vec<_>>();
    let (groups, tags, words) = (list(GROUPS), list(TAGS), list(WORDS));
    let (currencies, age_ranges) = (list(CURRENCIES), list(AGE_RANGES));
    let mut rng = StdRng::seed_from_u64(seed);
    let start_of_2020 = 1_577_836_800_i64;
    let mut products = Vec::with_capacity(count);
    for index in 0..count {
        let name_words: Vec<String> = (0..rng.random_range(2..=5))
            .map(|_| capitalize(pick(&words, &mut rng)))
            .collect();
        let description_len = rng.random_range(150..=300);
        let mut description = capitalize(pick(&words, &mut rng));
        while description.len() < description_len {
            description.push(' ');
            description.push_str(pick(&words, &mut rng));
        }
        description.push('.');
        let (group_count, tag_count) = (rng.random_range(1..=3), rng.random_range(2..=6));
        let created = start_of_2020 + rng.random_range(0..5 * 365 * 86_400);
        products.push(Product {
            id: String::new(),
            table: TABLE,
            name: name_words.join(" "),
            description,
            groups: groups.choose_multiple(&mut rng, group_count).copied().collect(),
            tags: tags.choose_multiple(&mut rng, tag_count).copied().collect(),
            price: (rng.random_range(5.0f64..500.0).powf(1.2) * 100.0).round() / 100.0,
            currency: pick(&currencies, &mut rng),
            availability: rng.random_bool(0.9),
            url: format!("https://tours.example.com/activity/{index}"),
            reviews: rng.random_range(0..5_000u32).pow(2) / 5_000,
            rating: (rng.random_range(2.5f64..5.0) * 10.0).round() / 10.0,
            created_date: chrono::DateTime::from_timestamp(created, 0)
                .expect("timestamp in range")
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            attraction_age_range: pick(&age_ranges, &mut rng),
            operator_id: format!("op-{:04}", rng.random_range(0..500)),
            embeddings: (embedding_dims > 0)
                .then(|| (0..embedding_dims).map(|_| rng.random_range(-1.0f32..1.0)).collect()),
        });
    }
    products
}

fn pick(choices: &[&'static str], rng: &mut StdRng) -> &'static str {
    choices.choose(rng).expect("non-empty list")
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map_or(String::new(), |first| first.to_uppercase().chain(chars).collect())
}

/// One pre-serialized request body.
struct Batch {
    /// NDJSON, one product per line.
    body: Bytes,
    /// Products in `body`: the `upserted` count to expect.
    items: usize,
}

fn ndjson_batches(products: &[Product], batch_size: usize) -> Result<Vec<Batch>> {
    let mut batches = Vec::new();
    for chunk in products.chunks(batch_size) {
        let mut body = Vec::with_capacity(chunk.len() * 800);
        for product in chunk {
            serde_json::to_writer(&mut body, product)?;
            body.push(b'\n');
        }
        batches.push(Batch {
            body: body.into(),
            items: chunk.len(),
        });
    }
    Ok(batches)
}

/// The measurements of one timed run.
struct RunResult {
    items: usize,
    seconds: f64,
    items_per_sec: f64,
    /// Wall time of each bulk request, in milliseconds.
    latencies_ms: Vec<f64>,
}

/// Sends all batches over `concurrency` connections and times the whole run.
async fn timed_run(target: &Arc<Target>, batches: Vec<Batch>, concurrency: usize) -> Result<RunResult> {
    let items: usize = batches.iter().map(|batch| batch.items).sum();
    let counts: Arc<Vec<usize>> = Arc::new(batches.iter().map(|batch| batch.items).collect());
    let load = Load {
        target: target.clone(),
        endpoint: CATALOG_ITEMS,
        bodies: Arc::new(batches.into_iter().map(|batch| batch.body).collect()),
    };
    let run = load
        .closed_loop(concurrency, Span::EachBodyOnce, move |index, status, response, _| {
            check_upserted(status, response, counts[index]).with_context(|| format!("bulk request {index}"))
        })
        .await?;
    Ok(RunResult {
        items,
        seconds: run.seconds,
        items_per_sec: items as f64 / run.seconds,
        latencies_ms: run.latencies,
    })
}

fn latency_summary(latencies_ms: &[f64]) -> String {
    let (p50, p99) = (percentile(latencies_ms, 0.50), percentile(latencies_ms, 0.99));
    format!("p50 {p50:.1} ms, p99 {p99:.1} ms")
}

/// The Markdown section for BENCHMARKS.md.
fn markdown_section(args: &Args, durability: &str, runs: &[RunResult], median_rate: f64) -> String {
    let met = if median_rate >= TARGET_ITEMS_PER_SEC {
        "met"
    } else {
        "**not met**"
    };
    let mut out = section_head(MARKDOWN_HEADING, "bench-catalog");
    out.push_str(&format!(
        "- Configuration: {items} items per run, NDJSON bodies of {batch} items, {concurrency} \
         concurrent HTTP/1.1 keep-alive connections, durability {durability}, embedding dims \
         {dims}, fresh ids every run (all inserts)\n\
         - Target: median >= {target} items/s: {met}\n\n\
         | run | items | seconds | items/s | bulk request latency |\n\
         |---:|---:|---:|---:|---|\n",
        items = thousands(args.items as f64),
        batch = thousands(args.batch as f64),
        concurrency = args.concurrency,
        dims = args.embedding_dims,
        target = thousands(TARGET_ITEMS_PER_SEC),
    ));
    for (number, run) in runs.iter().enumerate() {
        out.push_str(&format!(
            "| {} | {} | {:.3} | {} | {} |\n",
            number + 1,
            thousands(run.items as f64),
            run.seconds,
            thousands(run.items_per_sec),
            latency_summary(&run.latencies_ms),
        ));
    }
    let all_latencies: Vec<f64> = runs.iter().flat_map(|run| run.latencies_ms.clone()).collect();
    out.push_str(&format!(
        "\nMedian: **{} items/s**. Bulk request latency over all runs: {}.\n",
        thousands(median_rate),
        latency_summary(&all_latencies),
    ));
    out
}

/// Creates the table, then times `--runs` runs, each on fresh ids.
async fn run_benchmark(args: &Args, target: &Arc<Target>) -> Result<Vec<RunResult>> {
    let mut sender = target.connect().await?;
    let table = serde_json::json!({"table_name": TABLE, "description": "bench-catalog products"});
    let (status, body) = target
        .send(
            &mut sender,
            Method::PUT,
            "/v1/catalog/table",
            Some("application/json"),
            table.to_string().into(),
        )
        .await?;
    ensure!(status == StatusCode::OK, "PUT /v1/catalog/table: {status}: {body:?}");
    drop(sender);

    eprintln!("generating {} products (seed {})", args.items, args.seed);
    let mut products = generate_products(args.items, args.seed, args.embedding_dims);
    // The first 12 hex digits of a UUID v7 are its millisecond timestamp: ids stay fresh
    // across invocations too, so repeated benchmarks against one server still insert.
    let invocation = uuid::Uuid::now_v7().simple().to_string()[..12].to_string();
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        for (index, product) in products.iter_mut().enumerate() {
            product.id = format!("bench-{invocation}-r{run}-{index:07}");
        }
        let batches = ndjson_batches(&products, args.batch)?;
        let largest = batches.iter().map(|batch| batch.body.len()).max().unwrap_or(0);
        if args.url.is_none() && largest > DEFAULT_BODY_LIMIT_BYTES {
            bail!("a {largest}-byte body exceeds the default 16 MiB body limit: lower --batch");
        }
        let result = timed_run(target, batches, args.concurrency).await?;
        println!(
            "run {run}: {} items in {:.3} s = {} items/s (bulk requests {})",
            thousands(result.items as f64),
            result.seconds,
            thousands(result.items_per_sec),
            latency_summary(&result.latencies_ms),
        );
        runs.push(result);
    }
    Ok(runs)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(args.items > 0 && args.batch > 0, "--items and --batch must be > 0");
    ensure!(
        args.concurrency > 0 && args.runs > 0,
        "--concurrency and --runs must be > 0"
    );

    let (runs, durability) = match (&args.url, &args.key) {
        (Some(url), Some(key)) => {
            let target = Arc::new(Target::parse(url, key.clone())?);
            (run_benchmark(&args, &target).await?, "as configured on that server")
        }
        _ => {
            let binary = server_binary(args.server_bin.as_ref())?;
            let server = SpawnedServer::start(&binary, &[], &[]).await?;
            server.announce();
            let target = Arc::new(server.target()?);
            (server.stop_after(run_benchmark(&args, &target)).await?, "sync")
        }
    };

    let rates: Vec<f64> = runs.iter().map(|run| run.items_per_sec).collect();
    let median_rate = median(&rates);
    let all_latencies: Vec<f64> = runs.iter().flat_map(|run| run.latencies_ms.clone()).collect();
    let verdict = if median_rate >= TARGET_ITEMS_PER_SEC {
        "met"
    } else {
        "NOT met"
    };
    println!(
        "median: {} items/s (target >= {}: {verdict}); bulk requests {}",
        thousands(median_rate),
        thousands(TARGET_ITEMS_PER_SEC),
        latency_summary(&all_latencies),
    );

    if let Some(path) = &args.write_markdown {
        let section = markdown_section(&args, durability, &runs, median_rate);
        publish_section(path, MARKDOWN_HEADING, &section, None)?;
    }
    Ok(())
}
