//! The service layer: the node's use cases, without HTTP. One service a family of
//! use cases, each built with only the handles it uses (its fields say which); one
//! method per use case takes a typed request and answers a typed result or a
//! [`ServiceError`]. The HTTP frontend (`api`) decodes a request, makes one call to
//! the service of its family and encodes the answer; the CLI and the tools call the
//! same methods. [`Services`] only carries the services to the frontend: it has no
//! methods of its own.
//!
//! - [`catalog::CatalogService`] ([`catalog`]): tables, items (embedded
//!   at ingest), users, deletes, field remaps.
//! - [`forget::ForgetService`] ([`forget`]): forgetting a user everywhere.
//! - [`events::EventService`] ([`events`]): event ingest (through Kafka when it is
//!   on), the log by id, live-state snapshots, session claims.
//! - [`recommend::RankingService`] ([`recommend`], [`modules`], [`embedded_events`]):
//!   ranking candidates and modules with a model and the live state; the rank context
//!   search and chat rank with too.
//! - [`search::SearchService`] ([`search`], `search_reading`): personalized full-text
//!   search and rerank.
//! - [`chat::ChatService`] ([`chat`]): one turn of a conversation.
//! - [`vocabulary::Vocabulary`]: the catalog's labels and words read by meaning
//!   (chat and search read with it).
//! - [`embed::EmbedService`] ([`embed`]): text and image vectors.
//! - [`experiments::ExperimentService`] ([`experiments`]): A/B experiments: create,
//!   stop, figures; the arm of a request.
//! - [`admin::AdminService`] ([`admin`]): keys, statistics, metrics, retraining.
//! - [`backup::BackupService`] ([`backup`]): backups of the running node.
//! - [`cluster::Cluster`] ([`cluster`], [`moves`]): which node owns a key; shard moves.

pub mod admin;
pub mod backup;
pub mod catalog;
pub mod chat;
pub mod cluster;
pub mod embed;
pub mod embedded_events;
mod error;
pub mod events;
pub mod experiments;
pub mod forget;
pub mod modules;
pub mod recommend;
pub mod search;
mod search_reading;
pub mod vocabulary;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub use error::ServiceError;

/// The node's services, as the HTTP frontend holds them.
pub struct Services {
    pub catalog: Arc<catalog::CatalogService>,
    pub forget: Arc<forget::ForgetService>,
    pub events: Arc<events::EventService>,
    pub ranking: Arc<recommend::RankingService>,
    pub search: Arc<search::SearchService>,
    pub chat: Arc<chat::ChatService>,
    pub embed: Arc<embed::EmbedService>,
    pub experiments: Arc<experiments::ExperimentService>,
    pub admin: Arc<admin::AdminService>,
    pub backups: Arc<backup::BackupService>,
    pub cluster: Arc<cluster::Cluster>,
}

/// How the ranking path fares reading live state.
#[derive(Debug, Default)]
pub struct RankingStats {
    /// Deadline of a live-state read, in ms.
    pub state_deadline_ms: u64,
    /// Reads that missed the deadline (the request was ranked without that state).
    pub state_timeouts: AtomicU64,
    /// Reads that failed.
    pub state_errors: AtomicU64,
}
