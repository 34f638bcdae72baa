//! The harness shared by the benchmark tools (`bench-catalog`, `bench-chat`,
//! `bench-embed`, `bench-events`, `bench-memory`, `bench-recommend`, `bench-search`, `bench-cluster`) and `eval-offline`,
//! included by each with `#[path = "bench_common.rs"] mod bench_common;`. Its modules
//! live in `tools/bench/` and everything they export is re-exported here:
//!
//! - `client`: [`Target`], a keep-alive HTTP/1.1 client of one server, and the
//!   [`Endpoint`]s the tools send bodies to.
//! - `server`: [`SpawnedServer`], a `rankstream serve` on a temp dir with a generated
//!   admin key (killed, its dir removed, if the tool is interrupted).
//! - `setup`: filling that server before the measurements (catalog upserts, events,
//!   waiting for search) and checking the answers.
//! - `load`: the closed and the open load loops, and what they tally.
//! - `stats`: percentiles, medians, latencies in ms, thousands separators.
//! - `own_times`: [`ServerTimes`], rankstream's own request times by endpoint
//!   (`/v1/admin/stats`).
//! - `cpu`: CPU times from `/proc` (a process's, the tool's own threads', steal).
//! - `kafka`: a tansu broker of the tool's own, a producer and a consumer set up like
//!   the server's, and the broker's produce -> consume floor.
//! - `report`: the head of a BENCHMARKS.md section, the targets table, writing the
//!   section and the tool's index line.
// Each tool uses a different part of the harness, and of the re-exports below.
#![allow(dead_code, unused_imports)]

#[path = "bench/client.rs"]
mod client;
#[path = "bench/cpu.rs"]
mod cpu;
#[path = "bench/kafka.rs"]
mod kafka;
#[path = "bench/load.rs"]
mod load;
#[path = "bench/own_times.rs"]
mod own_times;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/server.rs"]
mod server;
#[path = "bench/setup.rs"]
mod setup;
#[path = "bench/stats.rs"]
mod stats;

pub use client::*;
pub use cpu::*;
pub use kafka::*;
pub use load::*;
pub use own_times::*;
pub use report::*;
pub use server::*;
pub use setup::*;
pub use stats::*;
