//! `DELETE /v1/users/{uid}` end to end, and the purge that takes what a deletion
//! removed out of the database files: the engine removes the user's records and
//! their sessions' (see `engine::forget`), chat the conversations held with them,
//! the other nodes the same on theirs (the change carries the sessions), and the
//! purger (`engine::purge`) compacts the shards that held them a little later, off
//! the request path, all deletions of that while at once.

use serde::Serialize;
use serde_json::json;

use std::sync::Arc;

use super::catalog::Replication;
use super::ServiceError;
use crate::engine::catalog::CatalogError;
use crate::engine::conversation::Conversations;
use crate::engine::UserRemoval;
use crate::engine::{Engine, Purger};
use crate::stream::catalog_log::CatalogChange;

/// What a user's deletion removed (the 200 answer).
#[derive(Debug, Clone, Serialize)]
pub struct UserDeletion {
    pub uid: String,
    pub deleted: bool,
    /// Every event removed: the user's and their sessions' anonymous ones.
    pub events_removed: usize,
    pub removed: Removed,
    /// When the purge that takes the removed records out of the files is due (unix
    /// ms); `POST /v1/admin/compact` runs it at once.
    pub purge_due_at: i64,
}

/// The parts of a deletion.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    #[serde(flatten)]
    pub records: UserRemoval,
    pub conversations: usize,
}

/// Forgetting a user: their records, sessions and conversations removed here and on
/// the other nodes, and purged from the files.
pub struct ForgetService {
    engine: Arc<Engine>,
    conversations: Arc<Conversations>,
    purger: Arc<Purger>,
    /// In a cluster, the deletion reaches the other nodes through the catalog log.
    replication: Replication,
}

impl ForgetService {
    pub fn new(
        engine: Arc<Engine>,
        conversations: Arc<Conversations>,
        purger: Arc<Purger>,
        replication: Replication,
    ) -> ForgetService {
        ForgetService {
            engine,
            conversations,
            purger,
            replication,
        }
    }
}

impl ForgetService {
    /// Deletes a user and everything stored about them and their sessions on this
    /// node, hands the deletion to the other nodes, and schedules the purge. Any
    /// part that could not be removed fails the call (a retry finds the rest).
    pub async fn delete_user(&self, uid: &str) -> Result<UserDeletion, ServiceError> {
        let records = self.engine.delete_user(uid, &[]).await?;
        let conversations = self
            .conversations
            .forget(uid, &records.sessions)
            .await
            .map_err(|error| ServiceError::Unavailable(format!("conversations were not all removed: {error}")))?;
        self.purger.schedule(&records.shards).map_err(CatalogError::from)?;
        self.replication
            .replicate(vec![CatalogChange::DeleteUser {
                uid: uid.to_owned(),
                sessions: records.sessions.clone(),
            }])
            .await?;
        Ok(UserDeletion {
            uid: uid.to_owned(),
            deleted: true,
            events_removed: records.events + records.anonymous_events,
            removed: Removed { records, conversations },
            purge_due_at: self.engine.now_millis() + self.purger.delay_ms(),
        })
    }

    /// `POST /v1/admin/compact`: runs the pending purge now (every shard with `all`).
    pub async fn compact(&self, all: bool) -> Result<serde_json::Value, ServiceError> {
        let report = self.purger.run(all).await.map_err(CatalogError::from)?;
        Ok(json!({ "compacted": report, "purges": self.purger.runs() }))
    }
}
