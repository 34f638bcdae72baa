//! `bench-moves`: how long a live move of one shard takes. Two nodes share 8 shards
//! over a tansu broker of the tool's own; one shard is filled with `--users` live
//! users (one click each, through its owner), then `rankstream cluster apply` gives
//! that shard to the other node. Timed from the apply until the new owner serves the
//! shard and no move is in progress, beside the broker's floor measured in the same
//! run: a bare consumer reading the bytes of the hand-off (the shard's changelog
//! partition) from the broker.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::Parser;
use rankstream::topology::shard_for;
use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::{json, Value};

use bench::{
    consumer, elapsed_ms, ms, publish_section, section_head, server_binary, thousands, Broker, IndexEntry,
    SpawnedServer, Target, EVENTS, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Shard moves";
/// Few shards: with two nodes following every partition, the sqlite tansu broker
/// spends its one busy core on fetches of 24 shards' partitions and times produces out.
const SHARDS: u16 = 8;
/// The shard that moves.
const MOVED: u16 = 0;
const BATCH: usize = 200;
const CHANGELOG: &str = "rankstream-changelog";

#[derive(Parser, Debug)]
#[command(about = "Time a live move of one shard holding many live users, against the broker's read floor")]
struct Args {
    /// The rankstream binary (default: target/release/rankstream beside this tool).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/broker.sh"))]
    broker_script: PathBuf,
    /// Live users on the moving shard.
    #[arg(long, default_value_t = 100_000)]
    users: usize,
    /// Write the results as the "Shard moves" section of this markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

struct Figures {
    users: usize,
    fill_secs: f64,
    move_ms: f64,
    floor_ms: f64,
    messages: usize,
    bytes: usize,
}

fn topology(ports: [u16; 2], shards: [&str; 2]) -> String {
    let mut text = format!("shards = {SHARDS}\n");
    for (index, (port, shards)) in ports.iter().zip(shards).enumerate() {
        text.push_str(&format!(
            "[[node]]\nid = \"n{index}\"\nhttp = \"127.0.0.1:{port}\"\nshards = \"{shards}\"\n"
        ));
    }
    text
}

fn cluster_cli(binary: &Path, action: &str, brokers: &str, topology: &Path) -> Result<String> {
    let output = std::process::Command::new(binary)
        .args(["cluster", action, "--brokers", brokers, "--topology"])
        .arg(topology)
        .output()?;
    ensure!(
        output.status.success(),
        "cluster {action}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

async fn stats(target: &Target) -> Result<Value> {
    let mut connection = target.connect().await?;
    let (status, body) = target.get(&mut connection, "/v1/admin/stats").await?;
    ensure!(status == 200, "stats: {status}");
    Ok(serde_json::from_slice(&body)?)
}

async fn run(args: &Args, binary: &Path) -> Result<Figures> {
    let broker = Broker::start(&args.broker_script)?;
    let ports = [0, 1].map(|_| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap_or(0)
    });
    let before = broker.dir.join("before.toml");
    let after = broker.dir.join("after.toml");
    std::fs::write(&before, topology(ports, ["0-3", "4-7"]))?;
    std::fs::write(&after, topology(ports, ["1-3", "0,4-7"]))?;
    let config_file = broker.dir.join("rankstream.toml");
    std::fs::write(
        &config_file,
        format!("[kafka]\nenabled = true\nbrokers = \"{}\"\n", broker.brokers()),
    )?;
    cluster_cli(binary, "init", &broker.brokers(), &before)?;
    let key = bench::generate_key();
    let live_cap = (args.users * 2).to_string();
    let mut env: Vec<(&str, &str)> = RATE_LIMIT_ENV.to_vec();
    env.push(("RANKSTREAM_ADMIN_KEY", &key));
    env.push(("RANKSTREAM__ENGINE__MAX_LIVE_ACTORS_PER_SHARD", &live_cap));
    let mut nodes = Vec::new();
    for (index, port) in ports.iter().enumerate() {
        let extra: Vec<OsString> = [
            "--config",
            &config_file.to_string_lossy(),
            "--topology",
            &before.to_string_lossy(),
            "--node-id",
            &format!("n{index}"),
            "--bind",
            &format!("127.0.0.1:{port}"),
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let server = SpawnedServer::start(binary, &extra, &env).await?;
        server.announce();
        nodes.push(server);
    }
    let targets: Vec<Target> = nodes
        .iter()
        .map(|node| Target::parse(&node.url, key.clone()))
        .collect::<Result<_>>()?;

    // Fill the moving shard through its owner.
    let uids: Vec<String> = (0..)
        .map(|n| format!("user-{n}"))
        .filter(|uid| shard_for(uid.as_bytes(), SHARDS) == MOVED)
        .take(args.users)
        .collect();
    let filled = Instant::now();
    let mut connection = targets[0].connect().await?;
    for (batch_index, batch) in uids.chunks(BATCH).enumerate() {
        let events: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(n, uid)| {
                json!({"id": format!("mv-{batch_index}-{n}"), "type": "click", "uid": uid,
                       "item_id": format!("p{}", n % 100), "click_type": "tile",
                       "original_timestamp": chrono::Utc::now().timestamp_millis()})
            })
            .collect();
        let body = Bytes::from(serde_json::to_vec(&json!({ "events": events }))?);
        // A batch the broker did not take in time (503) is sent again, as a client would.
        for attempt in 1.. {
            let (status, answer) = targets[0].call(&mut connection, &EVENTS, body.clone()).await?;
            if status == 202 {
                break;
            }
            ensure!(
                status == 503 && attempt < 60,
                "events: {status} {}",
                String::from_utf8_lossy(&answer)
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if (batch_index + 1) % 50 == 0 {
            println!("{} users filled", thousands(((batch_index + 1) * BATCH) as f64));
        }
    }
    let fill_secs = filled.elapsed().as_secs_f64();
    println!(
        "{} live users on shard {MOVED} in {fill_secs:.1} s",
        thousands(uids.len() as f64)
    );

    // The broker (one busy core) is left to answer the apply once both nodes have
    // consumed what was written.
    loop {
        let lags: Vec<Value> = [stats(&targets[0]).await?, stats(&targets[1]).await?]
            .iter()
            .map(|stats| stats["kafka"]["lag_by_shard"].clone())
            .collect();
        let caught_up = lags.iter().all(|lag| {
            lag.as_object()
                .is_some_and(|shards| shards.values().all(|lag| lag.as_i64() == Some(0)))
        });
        if caught_up {
            break;
        }
        ensure!(
            filled.elapsed() < Duration::from_secs(1800),
            "the nodes did not catch up: {lags:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Move it, and time until the new owner serves it.
    let started = Instant::now();
    let applied = cluster_cli(binary, "apply", &broker.brokers(), &after)?;
    println!("{}", applied.trim());
    loop {
        let receiver = stats(&targets[1]).await?;
        let releaser = stats(&targets[0]).await?;
        let serving = receiver["cluster"]["local_shards"]
            .as_array()
            .is_some_and(|shards| shards.contains(&json!(MOVED)));
        let idle = [&receiver, &releaser]
            .iter()
            .all(|stats| stats["cluster"]["moves"] == json!([]) && stats["cluster"]["epoch"] == 2);
        if serving && idle {
            break;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the move did not finish: {receiver}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let move_ms = elapsed_ms(started);
    let mut check = targets[1].connect().await?;
    for uid in uids.iter().step_by((uids.len() / 100).max(1)) {
        let (status, body) = targets[1].get(&mut check, &format!("/v1/users/{uid}/state")).await?;
        let state: Value = serde_json::from_slice(&body)?;
        ensure!(
            status == 200 && state["event_count"] == 1,
            "{uid} after the move: {status} {state}"
        );
    }

    // The floor: a bare consumer reading the hand-off's bytes from the broker, found as
    // the new owner finds them: the last message (the `released` marker) names the
    // offset where the hand-off begins.
    let partition = i32::from(MOVED);
    let reader_from = |offset: Offset| -> Result<rdkafka::consumer::StreamConsumer> {
        let reader = consumer(&broker.brokers(), &[], 0..0)?;
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(CHANGELOG, partition, offset)?;
        reader.assign(&assignment)?;
        Ok(reader)
    };
    let reader = reader_from(Offset::OffsetTail(1))?;
    let (_, end) = reader.fetch_watermarks(CHANGELOG, partition, Duration::from_secs(60))?;
    let marker = tokio::time::timeout(Duration::from_secs(60), reader.recv())
        .await
        .context("reading the released marker")??;
    let marker: Value = serde_json::from_slice(marker.payload().unwrap_or_default())?;
    let begin = marker["begin"]
        .as_i64()
        .with_context(|| format!("a released marker without begin: {marker}"))?;
    println!("hand-off at offsets {begin}..{end} of {CHANGELOG}/{partition}");
    let read = Instant::now();
    let reader = reader_from(Offset::Offset(begin))?;
    let (mut messages, mut bytes) = (0, 0);
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), reader.recv())
            .await
            .with_context(|| format!("reading the changelog after {messages} messages"))??;
        messages += 1;
        bytes += message.payload().map_or(0, <[u8]>::len) + message.key().map_or(0, <[u8]>::len);
        if message.offset() + 1 >= end {
            break;
        }
    }
    let floor_ms = elapsed_ms(read);
    for node in nodes {
        node.stop().await?;
    }
    drop(broker);
    Ok(Figures {
        users: uids.len(),
        fill_secs,
        move_ms,
        floor_ms,
        messages,
        bytes,
    })
}

fn markdown(figures: &Figures) -> String {
    let mut out = section_head(MARKDOWN_HEADING, "bench-moves");
    out.push_str(&format!(
        "- Setup: a fresh tansu broker (sqlite) and two nodes on 127.0.0.1 sharing 8 shards (topics by `rankstream cluster \
         init`); shard {MOVED} filled with {} live users (one click each, through its owner: {:.1} s), then `rankstream \
         cluster apply` gives shard {MOVED} to the other node. Move: from the apply until the new owner serves the shard \
         and neither node has a move in progress. Floor: a bare consumer reading the hand-off (the shard's changelog \
         partition, {} messages, {:.1} MB) from the broker, in the same run. Nodes, broker and client share 2 cores.\n\n",
        thousands(figures.users as f64),
        figures.fill_secs,
        thousands(figures.messages as f64),
        figures.bytes as f64 / 1e6,
    ));
    out.push_str("| live users moved | move | broker read floor | move / floor |\n|---|---|---|---|\n");
    out.push_str(&format!(
        "| {} | {} | {} | {:.1}x |\n",
        thousands(figures.users as f64),
        ms(figures.move_ms),
        ms(figures.floor_ms),
        figures.move_ms / figures.floor_ms.max(0.001)
    ));
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let binary = server_binary(args.server_bin.as_ref())?;
    let figures = run(&args, &binary).await?;
    let section = markdown(&figures);
    println!("\n{section}");
    if let Some(path) = &args.write_markdown {
        let index = IndexEntry {
            tool: "bench-moves",
            row: "| Shard moves | `tools/src/bin/bench-moves.rs` (`bench-moves`) | time to move one shard full of live users (`--users`, default 100k) against the broker's read floor |",
        };
        publish_section(path, MARKDOWN_HEADING, &section, Some(&index))?;
    }
    Ok(())
}
