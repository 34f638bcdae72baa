//! Events: ingest (produced to Kafka first when it is on), the stored log by id,
//! and the live state of a session or user as a snapshot.

use serde_json::{json, Map, Value};

use super::cluster::KeyHome;
use super::ServiceError;
use crate::domain::event::Event;
use crate::domain::live_state::LiveState;
use crate::domain::LiveStateId;
use std::sync::Arc;

use super::cluster::Cluster;
use crate::engine::Engine;
use crate::stream::EventProducer;

/// What ingest made of each event, in request order.
#[derive(Debug)]
pub struct Ingested {
    /// Per event: `Ok(true)` for a duplicate of one already accepted (not applied
    /// again), `Ok(false)` for a new one, or why it was refused.
    pub results: Vec<Result<bool, ServiceError>>,
}

/// Events: ingest (through Kafka when it is on), the log by id, live-state
/// snapshots, session claims.
pub struct EventService {
    engine: Arc<Engine>,
    /// With Kafka on: REST events are produced here before they are accepted.
    producer: Option<EventProducer>,
    /// Where a session's key lives, for claims.
    cluster: Arc<Cluster>,
}

impl EventService {
    pub fn new(engine: Arc<Engine>, producer: Option<EventProducer>, cluster: Arc<Cluster>) -> EventService {
        EventService {
            engine,
            producer,
            cluster,
        }
    }

    /// The node's clock, in unix ms: the time an event without one is given.
    pub fn now_millis(&self) -> i64 {
        self.engine.now_millis()
    }
}

impl EventService {
    /// Accepts decoded events: each is durable and applied to its live state when
    /// this returns `Ok` for it. With Kafka on, the batch is produced to the REST
    /// topic first (a failure there fails the whole call: nothing was accepted).
    pub async fn ingest_events(&self, events: Vec<Event>) -> Result<Ingested, ServiceError> {
        if let Some(producer) = &self.producer {
            producer
                .produce(&events)
                .await
                .map_err(|error| ServiceError::Unavailable(format!("event stream: {error}")))?;
        }
        let results = self
            .engine
            .ingest(events)
            .await
            .into_iter()
            .map(|result| result.map_err(ServiceError::from))
            .collect();
        Ok(Ingested { results })
    }

    /// Cluster mode: another node claims session `sid` of this node's shards for user
    /// `uid`, which it owns; answers the session's state here (`None`: it has none).
    pub async fn grant_session_claim(&self, sid: &str, uid: &str) -> Result<Option<LiveState>, ServiceError> {
        if let KeyHome::Remote { node, shard } = self.cluster.place(sid) {
            return Err(ServiceError::Unavailable(format!(
                "session {sid:?} is on shard {shard}, owned by node {:?} in this node's topology",
                node.id
            )));
        }
        Ok(self.engine.grant_session_claim(sid, uid).await?)
    }

    /// Cluster mode: the user another node claimed session `sid` for, when that node
    /// owns the user: a request naming only the sid is served there.
    pub fn session_claimed_by(&self, sid: &str) -> Result<Option<String>, ServiceError> {
        if !self.cluster.is_multi_node() || !matches!(self.cluster.place(sid), KeyHome::Local) {
            return Ok(None);
        }
        let uid = self.engine.session_link(sid)?;
        Ok(uid.filter(|uid| matches!(self.cluster.place(uid), KeyHome::Remote { .. })))
    }

    /// A stored event by id.
    pub fn get_event(&self, id: &str) -> Result<Event, ServiceError> {
        Ok(self.engine.get_event(id)?)
    }

    /// A session's live state as JSON fields (`uid` among them); `NotFound` when it has none.
    pub async fn session_snapshot(&self, sid: &str) -> Result<Map<String, Value>, ServiceError> {
        self.snapshot(LiveStateId::Session(sid.to_owned()))
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("session {sid:?}")))
    }

    /// A user's live state as JSON fields and their stored profile (without its
    /// reserved fields); `NotFound` when they have neither.
    pub async fn user_snapshot(&self, uid: &str) -> Result<(Map<String, Value>, Map<String, Value>), ServiceError> {
        let profile = match self.engine.catalog().get_user(uid) {
            Ok(mut row) => {
                for reserved in ["uid", "_table", "created_at", "updated_at", "is_deleted"] {
                    row.remove(reserved);
                }
                Some(row)
            }
            Err(crate::engine::catalog::CatalogError::NotFound(_)) => None,
            Err(error) => return Err(error.into()),
        };
        let snapshot = self.snapshot(LiveStateId::User(uid.to_owned())).await?;
        if snapshot.is_none() && profile.is_none() {
            return Err(ServiceError::NotFound(format!("user {uid:?}")));
        }
        let snapshot = snapshot.unwrap_or_else(|| self.empty_user_snapshot());
        Ok((snapshot, profile.unwrap_or_default()))
    }

    /// A state snapshot as JSON fields, or `None` when the key has no state.
    async fn snapshot(&self, key: LiveStateId) -> Result<Option<Map<String, Value>>, ServiceError> {
        let params = self.engine.decay(&key);
        let is_user = matches!(key, LiveStateId::User(_));
        let Some((live_state, live)) = self.engine.read_state(key).await? else {
            return Ok(None);
        };
        let mut fields = live_state.snapshot(self.engine.now_millis(), params, live);
        if is_user {
            fields.insert("purchased".into(), json!(live_state.purchased));
            fields.insert("sessions".into(), json!(live_state.sessions));
        } else {
            fields.insert("uid".into(), json!(live_state.uid));
        }
        Ok(Some(fields))
    }

    /// The snapshot of a user known only by their stored row.
    fn empty_user_snapshot(&self) -> Map<String, Value> {
        let params = self.engine.decay(&LiveStateId::User(String::new()));
        let mut fields = LiveState::default().snapshot(self.engine.now_millis(), params, false);
        fields.insert("purchased".into(), json!([]));
        fields.insert("sessions".into(), json!([]));
        fields
    }
}
