//! rankstream: a real-time ranking engine.
//!
//! # Layout
//!
//! - [`config`]: configuration sections, layered defaults < file < environment.
//! - [`topology`]: shards and nodes; key → shard with Kafka's murmur2 partitioner.
//! - [`storage`]: the only module that touches RocksDB (column families, key layout,
//!   durable batches, the group-commit writer thread).
//! - [`engine`]: the actors and the router from keys to them. Per shard: a
//!   `CatalogShard` (items, users, tables) and a `ShardHost` (the shard's event log
//!   and its live `SessionActor`s and `UserActor`s). [`engine::catalog`] holds the
//!   catalog's rules, [`engine::event`] the event formats, [`engine::live_state`]
//!   how live state changes and decays.
//! - [`stream`]: Kafka: the consumer of the node's shard partitions, the producer of
//!   REST events, dead letters.
//! - [`ranking`]: the model trait, the registry of models by id, and ranking of
//!   candidates (order, limit, duplicate-id echo) and of modules (placement of
//!   pinned modules and items); pure, no HTTP.
//! - [`training`]: the learner thread fed by durable events (popularity,
//!   co-visitation, the learned ranker from `rec_id` outcomes), its artifacts in the
//!   `models` column family, rebuilt from the log without deleted users.
//! - [`chat`]: what a chat message asks for (constraints, merged across turns), which
//!   rows satisfy it, and the reply text; pure. Conversations live in
//!   `engine::conversation` (one `ConversationActor` each), the endpoint in `api::chat`.
//! - [`search`]: the catalog's full-text index (tantivy), fed from catalog writes
//!   by its indexer thread; BM25 with typo tolerance; pure, no HTTP.
//! - [`keys`]: API keys, stored hashed, shared by the HTTP admin API and the CLI.
//! - [`api`]: the hyper frontend: routing, auth, rate quota, body limits, deadline,
//!   one file per endpoint group, and the one place errors become statuses.
//! - [`server`]: assembles a node (recovery, checkpoints, Kafka) and stops it in order.
//! - [`clock`], [`time`]: the injected clock and timestamp formats.
//! - [`embed`]: the `Embedder` trait, the MiniLM sentence model and the built-in hashed embedder.
//!
//! # Path of a request
//!
//! `api::serve` accepts a connection → `api::handle` applies the deadline →
//! `api::route` matches the path (`api::routes`), authorizes the key and its scope
//! (`api::auth`), takes a token from the key's rate bucket, reads the body under the
//! size limit → an endpoint module (`api::catalog`, `api::users`, `api::events`,
//! `api::admin`) decodes JSON and calls the [`engine::Engine`] → catalog writes go
//! key → shard → that shard's `CatalogShard`, which validates, stamps reserved fields
//! and commits a durable RocksDB batch before replying; reads go straight to RocksDB
//! and the table registry; live-state reads ask the key's `ShardHost`. Searches
//! (`api::search`, `api::rerank`) read the [`search::SearchIndex`] directly, which
//! the catalog shards feed through the indexer thread after each durable write.
//!
//! # Path of an event
//!
//! REST (`api::events`) or Kafka (`stream`) → one [`engine::event::Event`] →
//! `Engine::ingest` routes it by its routing key (uid, else sid, else cid) to that
//! shard's `ShardHost` → the host drops duplicates (event id index), gives it the
//! next log sequence number and queues it for the group commit → once the batch is
//! fsynced, it is applied in sequence order to the `UserActor` of its uid and the
//! `SessionActor` of its sid (on the sid's shard) → the caller is answered when every
//! actor the batch reached has applied it. Checkpoints persist live state; after a
//! crash each shard replays its log past its checkpoint.

pub mod api;
pub mod chat;
pub mod clock;
pub mod config;
pub mod embed;
pub mod engine;
pub mod keys;
pub mod ranking;
pub mod search;
pub mod server;
pub mod storage;
pub mod stream;
pub mod time;
pub mod topology;
pub mod training;
