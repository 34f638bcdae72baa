//! Cluster mode: a session that started anonymous on the node owning its sid's shard
//! and then carries a uid owned by another node is *claimed* by the user's owner: it
//! asks the sid's owner for the session's state (so the user absorbs the anonymous
//! signals, as on one node) and the sid's owner records that the session now lives
//! with that user (so a request carrying only the sid is sent there).
//!
//! The engine asks through this trait; the HTTP frontend implements it (nodes talk
//! HTTP to each other), so the engine does not depend on the transport.

use futures::future::BoxFuture;

use super::live_state::LiveState;
use crate::topology::ShardId;

/// What a claim answers: the session's state on the sid's owner (`None` when it has
/// none), or why the owner could not be asked.
pub type Claimed = Result<Option<LiveState>, String>;

/// Asks the node owning `shard` (the sid's shard) for session `sid`, now of user `uid`.
pub trait SessionClaims: Send + Sync {
    fn claim(&self, shard: ShardId, sid: &str, uid: &str) -> BoxFuture<'static, Claimed>;
}
