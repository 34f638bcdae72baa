//! Embedding benchmark: both embedders (the built-in `rankstream-hashed-384` and
//! all-MiniLM-L6-v2 from `--model-dir`), in process and through `POST /embed`.
//!
//! 1. In process: the embedder is loaded (load time reported), warmed up, then
//!    `--single` calls of one short sentence each (latency p50/p99), and `--batches`
//!    calls of 32 sentences each (cost per sentence: median and p99 of batch time / 32).
//! 2. Over HTTP: a spawned release `rankstream serve` with that embedder; `--requests`
//!    sequential `POST /embed` requests of one sentence on one keep-alive connection,
//!    latency p50/p99 from request start to the end of the response body.
//!
//! Sentences are generated deterministically (subject × verb × object), all distinct,
//! 6-9 words. Every HTTP response must be a 200 with 384 floats, or the run fails.
//!
//! ```text
//! tools/fetch-model.sh    # once
//! cargo build --release --bin rankstream --bin bench-embed
//! target/release/bench-embed --write-markdown BENCHMARKS.md
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use hyper::StatusCode;
use serde_json::{json, Value};

use bench::{
    command_line, elapsed_ms, machine_description, percentile, server_binary, utc_now, write_markdown_section,
    Endpoint, SpawnedServer, RATE_LIMIT_ENV,
};
use rankstream::embed::{Embedder, HashedEmbedder, MiniLmEmbedder};

const MARKDOWN_HEADING: &str = "## Embeddings";
const BATCH: usize = 32;
const EMBED: Endpoint = Endpoint::post_json("/embed");

#[derive(Parser, Debug)]
#[command(about = "Embedding latency in process and through POST /embed")]
struct Args {
    /// MiniLM model directory (default: $RANKSTREAM_MODELS or ~/.cache/rankstream/models, + /all-MiniLM-L6-v2).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// In-process calls of one sentence, per embedder.
    #[arg(long, default_value_t = 300)]
    single: usize,
    /// In-process calls of 32 sentences, per embedder.
    #[arg(long, default_value_t = 30)]
    batches: usize,
    /// Sequential HTTP requests, per embedder.
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// The rankstream binary (default: next to this one).
    #[arg(long)]
    server_binary: Option<PathBuf>,
    /// Write the figures as the "Embeddings" section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

/// Figures of one embedder, in milliseconds.
struct Report {
    name: String,
    load_ms: f64,
    single_p50: f64,
    single_p99: f64,
    per_sentence_median: f64,
    per_sentence_p99: f64,
    http_p50: f64,
    http_p99: f64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let model_dir = args.model_dir.clone().unwrap_or_else(default_model_dir);
    ensure!(
        model_dir.join("model.safetensors").is_file(),
        "{} has no model: run tools/fetch-model.sh (or tools/setup.sh)",
        model_dir.display()
    );
    let sentences = sentences(BATCH * 8);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut reports = Vec::new();
    for minilm in [false, true] {
        let started = Instant::now();
        let embedder: Arc<dyn Embedder> = if minilm {
            Arc::new(MiniLmEmbedder::load(&model_dir)?)
        } else {
            Arc::new(HashedEmbedder::new())
        };
        let load_ms = elapsed_ms(started);
        let name = embedder.name().to_owned();
        eprintln!("{name}: loaded in {load_ms:.1} ms; in-process runs");
        let (single_p50, single_p99) = single_latency(embedder.as_ref(), &sentences, args.single)?;
        let (per_sentence_median, per_sentence_p99) = batch_cost(embedder.as_ref(), &sentences, args.batches)?;
        drop(embedder);
        eprintln!("{name}: HTTP runs");
        let env: Vec<(&str, &str)> = if minilm {
            vec![(
                "RANKSTREAM__EMBED__MODEL_DIR",
                model_dir.to_str().context("model dir is not UTF-8")?,
            )]
        } else {
            Vec::new()
        };
        let (http_p50, http_p99) = runtime.block_on(http_latency(&args, &env, &sentences, &name))?;
        let report = Report {
            name,
            load_ms,
            single_p50,
            single_p99,
            per_sentence_median,
            per_sentence_p99,
            http_p50,
            http_p99,
        };
        eprintln!(
            "{}: single p50 {:.3} ms p99 {:.3} ms; batch of 32: {:.3} ms/sentence (p99 {:.3}); HTTP p50 {:.3} ms p99 {:.3} ms",
            report.name,
            report.single_p50,
            report.single_p99,
            report.per_sentence_median,
            report.per_sentence_p99,
            report.http_p50,
            report.http_p99
        );
        reports.push(report);
    }
    let section = markdown_section(&args, &reports);
    println!("{section}");
    if let Some(path) = &args.write_markdown {
        write_markdown_section(path, MARKDOWN_HEADING, &section)?;
        eprintln!("wrote the {MARKDOWN_HEADING:?} section of {}", path.display());
    }
    Ok(())
}

fn default_model_dir() -> PathBuf {
    let models = std::env::var_os("RANKSTREAM_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/rankstream/models"));
    models.join("all-MiniLM-L6-v2")
}

/// `count` distinct short sentences.
fn sentences(count: usize) -> Vec<String> {
    const SUBJECTS: [&str; 8] = [
        "The old fisherman",
        "A curious child",
        "My neighbour's cat",
        "The tired engineer",
        "Our tour guide",
        "A famous chef",
        "The young violinist",
        "Every visitor",
    ];
    const VERBS: [&str; 8] = [
        "quietly watched",
        "happily described",
        "carefully repaired",
        "loudly praised",
        "slowly explored",
        "eagerly booked",
        "barely noticed",
        "proudly photographed",
    ];
    const OBJECTS: [&str; 8] = [
        "the harbour at sunset",
        "a cheap museum ticket",
        "the broken bicycle",
        "a spicy street food stall",
        "the medieval castle walls",
        "a boat trip for families",
        "the crowded night market",
        "a quiet mountain village",
    ];
    (0..count)
        .map(|i| format!("{} {} {}.", SUBJECTS[i % 8], VERBS[(i / 8) % 8], OBJECTS[(i / 64) % 8]))
        .collect()
}

fn single_latency(embedder: &dyn Embedder, sentences: &[String], calls: usize) -> Result<(f64, f64)> {
    for sentence in sentences.iter().take(10) {
        embedder.embed_texts(&[sentence])?;
    }
    let mut latencies = Vec::with_capacity(calls);
    for i in 0..calls {
        let sentence = sentences[i % sentences.len()].as_str();
        let started = Instant::now();
        let vectors = embedder.embed_texts(&[sentence])?;
        latencies.push(elapsed_ms(started));
        ensure!(vectors[0].len() == embedder.dimensions(), "wrong dimensionality");
    }
    Ok((percentile(&latencies, 0.5), percentile(&latencies, 0.99)))
}

fn batch_cost(embedder: &dyn Embedder, sentences: &[String], batches: usize) -> Result<(f64, f64)> {
    let chunks: Vec<Vec<&str>> = sentences
        .chunks(BATCH)
        .map(|chunk| chunk.iter().map(String::as_str).collect())
        .collect();
    embedder.embed_texts(&chunks[0])?;
    let mut per_sentence = Vec::with_capacity(batches);
    for i in 0..batches {
        let chunk = &chunks[i % chunks.len()];
        let started = Instant::now();
        let vectors = embedder.embed_texts(chunk)?;
        per_sentence.push(elapsed_ms(started) / chunk.len() as f64);
        ensure!(vectors.len() == chunk.len(), "one vector per sentence");
    }
    Ok((percentile(&per_sentence, 0.5), percentile(&per_sentence, 0.99)))
}

async fn http_latency(args: &Args, env: &[(&str, &str)], sentences: &[String], name: &str) -> Result<(f64, f64)> {
    let binary = server_binary(args.server_binary.as_ref())?;
    let mut env = env.to_vec();
    // The tool's own requests must not be throttled.
    env.extend(RATE_LIMIT_ENV);
    let server = SpawnedServer::start(&binary, &[], &env).await?;
    let target = server.target()?;
    let mut connection = target.connect().await?;
    let mut latencies = Vec::with_capacity(args.requests);
    for i in 0..args.requests + 10 {
        let body = Bytes::from(serde_json::to_vec(&json!({ "text": sentences[i % sentences.len()] }))?);
        let started = Instant::now();
        let (status, reply) = target.call(&mut connection, &EMBED, body).await?;
        let elapsed = elapsed_ms(started);
        ensure!(
            status == StatusCode::OK,
            "POST /embed: {status} {}",
            String::from_utf8_lossy(&reply)
        );
        let reply: Value = serde_json::from_slice(&reply)?;
        ensure!(
            reply["model"] == name,
            "the server runs {}, expected {name}",
            reply["model"]
        );
        ensure!(
            reply["embedding"].as_array().map_or(0, Vec::len) == 384,
            "384 floats expected"
        );
        if i >= 10 {
            latencies.push(elapsed);
        }
    }
    server.stop().await?;
    Ok((percentile(&latencies, 0.5), percentile(&latencies, 0.99)))
}

fn markdown_section(args: &Args, reports: &[Report]) -> String {
    let mut out = format!(
        "{MARKDOWN_HEADING}\n\n\
         Measured {} on {}, release build, CPU only. Machines here are shared (2 cores):\n\
         run it with nothing else running, and treat p99s as indicative.\n\n\
         Command: `{}`\n\n\
         In process: `--single {}` calls of one short sentence (6-9 words), `--batches {}` calls of\n\
         32 sentences (cost per sentence = batch time / 32). HTTP: `--requests {}` sequential\n\
         `POST /embed` of one sentence on one keep-alive connection to a spawned release server\n\
         (request start to end of body, 10 warm-up requests not counted).\n\n\
         | embedder | load | one sentence p50 / p99 | batch of 32, per sentence median / p99 | `POST /embed` p50 / p99 |\n\
         |---|---|---|---|---|\n",
        utc_now(),
        machine_description(),
        command_line(),
        args.single,
        args.batches,
        args.requests,
    );
    for report in reports {
        out.push_str(&format!(
            "| {} | {:.0} ms | {:.3} / {:.3} ms | {:.3} / {:.3} ms | {:.3} / {:.3} ms |\n",
            report.name,
            report.load_ms,
            report.single_p50,
            report.single_p99,
            report.per_sentence_median,
            report.per_sentence_p99,
            report.http_p50,
            report.http_p99
        ));
    }
    out
}
