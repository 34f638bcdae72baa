//! Cluster mode, both sides of a session claim (see [`crate::domain::session_claim`]).
//!
//! The user's owner, before it ingests an event with a uid and a sid whose shard
//! another node owns, claims the session when it has no state for it yet (not live,
//! nothing stored): the sid's owner answers the session's state and links the sid to
//! the uid. The state is adopted as the session's starting point here, so the event
//! that brings the uid stitches it to the user exactly as on one node. A claim that
//! fails (the sid's owner down, say) leaves the session to start empty here: the
//! event is still accepted, and the failure is counted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::join_all;
use serde_json::{json, Value};

use crate::domain::event::Event;
use crate::domain::live_state::LiveState;
use crate::domain::live_state_id::LiveStateId;
use crate::domain::session_claim::SessionClaims;
use crate::engine::shard_host::AdoptSession;
use crate::engine::{mailbox_error, Engine, LiveStateError};
use crate::storage::{layout, Cf};

/// How this node claims sessions, and what claims did.
#[derive(Default)]
pub(in crate::engine) struct Claiming {
    /// Set once at assembly in a cluster; never on a single node.
    claims: OnceLock<Arc<dyn SessionClaims>>,
    /// Claims this node made (answered or not).
    made: AtomicU64,
    /// Of those, the ones that brought a state to adopt.
    adopted: AtomicU64,
    /// Of those, the ones the sid's owner could not answer.
    failed: AtomicU64,
    /// Claims other nodes made of sessions here.
    granted: AtomicU64,
}

impl Engine {
    /// Lets ingest claim sessions from the other nodes (cluster mode).
    pub fn set_session_claims(&self, claims: Arc<dyn SessionClaims>) {
        if self.claiming.claims.set(claims).is_err() {
            tracing::warn!("session claims set twice; the first stays");
        }
    }

    /// Claims, before `events` are ingested, the sessions they identify whose sid's
    /// shard another node owns and of which this node has no state yet.
    pub(in crate::engine) async fn claim_sessions(&self, events: &[Event]) {
        let Some(claims) = self.claiming.claims.get() else {
            return;
        };
        let current = self.ownership.current();
        let mut seen = HashSet::new();
        let mut wanted = Vec::new();
        for event in events {
            let (Some(uid), Some(sid)) = (&event.uid, &event.sid) else {
                continue;
            };
            let shard = self.shard_of(sid);
            if current.phases.contains_key(&shard) || !seen.insert(sid.as_str()) {
                continue;
            }
            if self.board.get(&LiveStateId::Session(sid.clone())).is_some() {
                continue;
            }
            match self.storage.get(Cf::State, &layout::session_state(shard, sid)) {
                Ok(None) => wanted.push((shard, sid.clone(), uid.clone())),
                Ok(Some(_)) => {}
                Err(error) => tracing::warn!(%sid, %error, "reading a session's state failed; not claiming it"),
            }
        }
        let claiming = wanted.into_iter().map(|(shard, sid, uid)| async move {
            self.claiming.made.fetch_add(1, Ordering::Relaxed);
            match claims.claim(shard, &sid, &uid).await {
                Ok(None) => {}
                Ok(Some(mut state)) => {
                    self.claiming.adopted.fetch_add(1, Ordering::Relaxed);
                    // Its marks of applied events name the other node's logs.
                    state.applied.clear();
                    let adopt = AdoptSession {
                        sid: sid.clone(),
                        state: Box::new(state),
                    };
                    if let Err(error) = self.hosts.host(shard).send(adopt).await.map_err(mailbox_error) {
                        tracing::warn!(%sid, %error, "adopting a claimed session failed");
                    }
                }
                Err(error) => {
                    self.claiming.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%sid, %uid, %error, "claiming a session from its sid's owner failed; it starts empty here");
                }
            }
        });
        join_all(claiming).await;
    }

    /// The sid's owner's side of a claim: links the session to `uid` (so requests
    /// naming only the sid go to the user's owner) and answers its state here.
    pub async fn grant_session_claim(&self, sid: &str, uid: &str) -> Result<Option<LiveState>, LiveStateError> {
        let shard = self.shard_of(sid);
        self.storage
            .put_unsynced(Cf::State, &layout::session_link(shard, sid), uid.as_bytes())?;
        self.claiming.granted.fetch_add(1, Ordering::Relaxed);
        Ok(self
            .read_state(LiveStateId::Session(sid.to_owned()))
            .await?
            .map(|(state, _)| state))
    }

    /// The user a session of this node's shards was claimed for, if it was.
    pub fn session_link(&self, sid: &str) -> Result<Option<String>, LiveStateError> {
        let link = self
            .storage
            .get(Cf::State, &layout::session_link(self.shard_of(sid), sid))?;
        Ok(link.map(|uid| String::from_utf8_lossy(&uid).into_owned()))
    }

    /// The claim counters, for `/v1/admin/stats`.
    pub fn claim_stats(&self) -> Value {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let claiming = &self.claiming;
        json!({
            "made": get(&claiming.made),
            "adopted": get(&claiming.adopted),
            "failed": get(&claiming.failed),
            "granted": get(&claiming.granted),
        })
    }
}
