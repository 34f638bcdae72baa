//! rankstream: a real-time ranking engine.
//!
//! # Layout
//!
//! - [`config`]: configuration sections, layered defaults < file < environment.
//! - [`topology`]: shards and nodes; key → shard with Kafka's murmur2 partitioner.
//! - [`storage`]: the only module that touches RocksDB (column families, key layout,
//!   durable batches).
//! - [`engine`]: the shard actors and the router from keys to them; [`engine::catalog`]
//!   holds the catalog's rules (field types, tables, reserved fields).
//! - [`keys`]: API keys, stored hashed, shared by the HTTP admin API and the CLI.
//! - [`api`]: the hyper frontend: routing, auth, rate quota, body limits, deadline,
//!   one file per endpoint group, and the one place errors become statuses.
//! - [`server`]: assembles a node and stops it in order.
//! - [`clock`], [`time`]: the injected clock and timestamp formats.
//!
//! # Path of a request
//!
//! `api::serve` accepts a connection → `api::handle` applies the deadline →
//! `api::route` matches the path (`api::routes`), authorizes the key and its scope
//! (`api::auth`), takes a token from the key's rate bucket, reads the body under the
//! size limit → an endpoint module (`api::catalog`, `api::users`, `api::admin`) decodes
//! JSON and calls the [`engine::Engine`] → writes go key → shard → that shard's
//! `CatalogShard` actor, which validates, stamps reserved fields and commits a durable
//! RocksDB batch before replying; reads go straight to RocksDB and the table registry.
//!
//! # Path of an event
//!
//! Events (REST and Kafka into session and user actors) arrive with the events issue;
//! they will take the same key → shard route. User deletion already removes the
//! user's indexed events (`user_events` → `events`).

pub mod api;
pub mod clock;
pub mod config;
pub mod engine;
pub mod keys;
pub mod server;
pub mod storage;
pub mod stream;
pub mod time;
pub mod topology;
