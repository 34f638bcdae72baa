//! rankstream: a real-time ranking engine.
//!
//! # Layout
//!
//! The layers, top first; a module imports only its own layer and those below
//! (`tests/it/layering.rs` checks it):
//!
//! - [`api`]: the hyper frontend: routing, auth, rate quota, body limits, deadline;
//!   one file per endpoint group that decodes a request, makes one service call and
//!   encodes the answer; shared decoding rules in `api::decode`; the one place errors
//!   become statuses (`api::error`). The only module that speaks HTTP (also as a
//!   client: image fetching, the optional chat LLM). It imports only `service` and
//!   the base.
//! - [`service`]: the node's use cases without HTTP, one service a family (catalog,
//!   events, ranking, search, chat, embed, experiments, admin, backups, cluster),
//!   each built with only the handles it uses and one method a use case, typed
//!   requests and results, one [`service::ServiceError`].
//! - [`engine`]: the actors and the router from keys to them. Per shard: a
//!   `CatalogShard` (items, users, tables) and a `ShardHost` (the shard's event log
//!   and its live sessions' and users' state; a folder: ingest, live keys,
//!   state reads, recovery, messages). [`engine::catalog`] holds the catalog's
//!   rules; conversations live in `engine::conversation`.
//! - [`ranking`]: the model kinds (popularity, co-visitation, affinity, embedding,
//!   the learned ranker, blends) and their trained artifacts ([`ranking::Trained`],
//!   read as lock-free snapshots), the model registry, and ranking of candidates and
//!   of modules; pure, no HTTP.
//! - [`training`]: the learner thread fed by durable events, which updates the
//!   artifacts and publishes their snapshots, persists them to the `models` column
//!   family and rebuilds them from the log (without deleted users) on a thread of
//!   its own. The arrow is training → ranking, never back.
//! - [`chat`]: what a chat message asks for (constraints, merged across turns),
//!   which rows satisfy it, and the reply text; pure.
//! - [`search`]: the catalog's full-text index (tantivy), fed from catalog writes
//!   by its indexer thread; BM25 with typo tolerance; pure, no HTTP.
//! - [`embed`]: the `Embedder` trait, the MiniLM sentence model and the built-in
//!   hashed embedder, run off the request threads in bounded lanes.
//! - [`stream`]: Kafka: the consumer of the node's shard partitions, the producer of
//!   REST events, dead letters.
//! - [`api_keys`]: API keys, stored hashed.
//! - [`experiments`]: A/B experiments used as a `model_id`: sticky assignment of arms
//!   by hash, the `rec_id` that records the arm, per-arm counts (outcome events are
//!   attributed as `Engine::ingest` applies them) and their 95% intervals.
//! - [`storage`]: the only module that touches RocksDB (column families, the key
//!   layout, durable batches, the bounded group-commit writer thread); used only
//!   below the service layer.
//! - The base, which imports no layer: [`domain`] (events, live state, signals, item
//!   features, which live state a request is about, and the vocabulary the `api`
//!   names: candidates and explanations, business rules, catalog tables and field
//!   types, experiments, API keys, backups), [`config`], [`topology`] (shards
//!   and nodes; key → shard with Kafka's murmur2 partitioner), [`clock`] (the
//!   engine's injected clock), [`timestamp`] (timestamps on the wire),
//!   [`metrics`] (the Prometheus recorder every layer counts through).
//! - [`server`]: assembles a node ([`server::RunningNode`]) in stages (storage → learning →
//!   engine → stream → cluster → services → HTTP), each from what the earlier ones
//!   built, with one shutdown token shared by every task it spawns; stops the stages
//!   in reverse order (HTTP drained first, storage flushed last).
//!
//! # Path of a request
//!
//! `api::serve` accepts a connection → `api::handle` applies the deadline →
//! `api::route` matches the path to its record in the route table (`api::routes`,
//! where each endpoint is declared once with its methods, scopes, forwarding rule,
//! OpenAPI operation and handler), authorizes the key and the method's scope
//! (`api::auth`), takes a token from the key's rate bucket, reads the body under the
//! size limit → in a cluster, the method's forwarding rule (`api::forward::by_rule`)
//! asks the service layer where the request's key lives
//! ([`service::cluster::Cluster::place`]: its uid, else sid, else cid → shard → owner
//! node): a request for another node's key is sent there as it came
//! (`api::forward::to_owner`, with what is left of the deadline) and its answer
//! returned unchanged; a request whose session a user on another node claimed goes to
//! that node (`api::forward::to_claimant`); a read by an id that does not name its
//! shard (an event), answered 404 here, asks the other nodes in turn
//! (`api::forward::first_found`) → otherwise, here, the method's handler, in the
//! endpoint's file, decodes the body into a typed request and calls one method of
//! its family's service (e.g. [`service::catalog::CatalogService`]) → the service
//! does the use case:
//!
//! - catalog and users: key → shard → that shard's `CatalogShard`, which validates,
//!   stamps reserved fields and commits a durable RocksDB batch before replying
//!   (items first get their vectors when ingest-time embedding is on); reads go
//!   straight to RocksDB and the table registry;
//! - events: through Kafka first when it is on, then the path of an event below;
//!   live-state reads ask the key's `ShardHost`;
//! - recommend and modules: the candidates' catalog features (`ItemReader`), the
//!   session's and user's signals (published by their shard hosts while live, else read from
//!   their hosts under a deadline), the model scores them over the latest trained
//!   snapshot, the ranking is ordered, and what it showed is recorded for learning;
//! - search and rerank: the [`search::SearchIndex`] (which the catalog shards feed
//!   through the indexer thread after each durable write), blended with the same
//!   ranking features; chat: a conversation actor merges the message's constraints,
//!   search retrieves, the rows are filtered, and the reply is composed (or written
//!   by the LLM); embed: the embedder's request lane.
//!
//! The service's answer is encoded by the endpoint; a [`service::ServiceError`]
//! becomes a status and a `{code, message}` body in `api::error`.
//!
//! # Path of an event
//!
//! REST (`api::events`): in a cluster the batch is scattered by owner
//! (`ingest_where_owned`: each event's routing key → its shard's node; the events of
//! other nodes go to each in one batch at `/v1/internal/events`, all at once, and the
//! answers are gathered back into the request's order) → `EventService::ingest_events`
//! (produced to Kafka first when it is on) → one [`domain::event::Event`]; or Kafka
//! (`stream::consumer`, which reads only the partitions of this node's shards, from the
//! offsets stored with their state) → the same event → `Engine::ingest` takes credits for the events in
//! flight on their shard (callers wait past `engine.max_events_in_flight`) and
//! routes each by its routing key (uid, else sid, else cid) to that shard's
//! `ShardHost` → the host drops duplicates (event id index), gives it the next log
//! sequence number and queues it for the group commit (a bounded queue) → once the
//! batch is fsynced, it is applied in sequence order to the live state of its uid
//! and of its sid (on the sid's shard), and handed to the
//! learner's bounded queue → the caller is answered when every shard the batch
//! reached has applied it and the learner took it; a new click or conversion
//! carrying a `rec_id` is then counted for the experiment arm it names
//! (`Engine::observe_outcomes`). Checkpoints persist live state
//! (a failed persist fails the checkpoint, which then moves no replay point); after
//! a crash each shard replays its log past its checkpoint.

pub mod allocator;
pub mod api;
pub mod api_keys;
pub mod chat;
pub mod clock;
pub mod config;
pub mod domain;
pub mod embed;
pub mod engine;
pub mod experiments;
pub mod metrics;
pub mod ranking;
pub mod search;
pub mod server;
pub mod service;
pub mod storage;
pub mod stream;
pub mod timestamp;
pub mod topology;
pub mod training;
