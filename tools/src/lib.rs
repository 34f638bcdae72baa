//! The harness the benchmark and evaluation tools share (`src/bin/`: `bench-catalog`,
//! `bench-chat`, `bench-cluster`, `bench-embed`, `bench-events`, `bench-faults`,
//! `bench-fuzz`, `bench-memory`, `bench-moves`, `bench-recommend`, `bench-search`,
//! `bench-soak`, `eval-offline`, `eval-search`). Each module is one concern, and its
//! items are also exported at the root, so a tool writes `use bench::{Target, ...}`:
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

pub mod client;
pub mod cpu;
pub mod kafka;
pub mod load;
pub mod own_times;
pub mod report;
pub mod server;
pub mod setup;
pub mod stats;

pub use client::*;
pub use cpu::*;
pub use kafka::*;
pub use load::*;
pub use own_times::*;
pub use report::*;
pub use server::*;
pub use setup::*;
pub use stats::*;
