//! The integration tests, one module a concern, in one test binary: one link instead of
//! one per file (each links the whole server crate, ~570 MB), helpers as plain modules.
//! Most drive the real `rankstream` binary over HTTP on 127.0.0.1 with a fresh RocksDB
//! directory each (`common::TestServer`), the Kafka ones their own tansu broker
//! (`common::kafka`), the cluster ones several nodes (`common::cluster`). Tests run in
//! parallel, so none uses a fixed port or a shared directory.
//!
//! `tests/backpressure.rs` stays a binary of its own: it runs a node in its own process
//! and bounds that process's resident memory, which other tests would share here.
//!
//! Run one module with `cargo test --release --test it -- catalog::`.

mod common;
mod phrases;

mod auth;
mod backup;
mod catalog;
mod catalog_types;
mod chat;
mod chat_phrases;
mod cluster;
mod contract;
mod dashboard;
mod durability;
mod embed;
mod events;
mod events_crash;
mod experiments;
mod forget;
mod fuzz;
mod http_frontend;
mod import;
mod kafka;
mod layering;
mod live_state;
mod logging;
mod memory;
mod metrics;
mod moves;
mod openapi;
mod personalization;
mod ranking_models;
mod recommend;
mod recommend_module;
mod rules;
mod search;
mod search_relevance;
mod shutdown;
mod users;
