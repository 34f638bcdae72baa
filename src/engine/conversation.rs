//! `ConversationActor`: one actor per active conversation, holding its turns and
//! the constraints in force, and the registry that finds or starts it.
//!
//! A turn is two messages: [`TakeTurn`] merges what the new message says into the
//! constraints in force (relative price words are read against the prices of the
//! previous answer) and returns them without changing the state; [`RecordTurn`]
//! stores the turn (message, reply, items shown with their prices) and the new
//! constraints, and persists the conversation before it answers, so a failed turn
//! leaves the conversation as it was and an answered one survives a restart.
//!
//! State is written through to the `state` column family (key
//! [`layout::conversation`], JSON) on a blocking thread; the handler holds the
//! actor's mailbox until the write is done, so turns apply in order. An actor idle
//! for the TTL stops; the next message for its id starts a new one from the
//! stored state. An id that was never seen starts an empty conversation.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::{
    Actor, ActorContext, ActorFutureExt, Addr, Arbiter, AsyncContext, AtomicResponse, Context, Handler, MailboxError,
    Message, WrapFuture,
};
use dashmap::DashMap;
use serde::{Deserialize, Serialize};

use crate::chat::constraints::{Ask, Constraints, Extracted, LastAnswer, Note, Scale};
use crate::clock::SharedClock;
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::{shard_for, ShardId};

/// How conversations are kept.
#[derive(Debug, Clone, Copy)]
pub struct ConversationSettings {
    /// Turns kept per conversation (oldest dropped first).
    pub max_turns: usize,
    /// An actor idle this long stops (its state is already stored).
    pub idle_ttl_ms: u64,
    /// Mailbox capacity of each conversation actor.
    pub mailbox: usize,
    /// How long a request waits for the conversation's actor.
    pub ask_timeout_ms: u64,
}

/// An item shown in an answer, with the price it was shown at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownItem {
    pub id: String,
    pub price: Option<f64>,
}

/// One exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's message.
    pub message: String,
    /// The reply given.
    pub reply: String,
    /// The items of the answer, in order.
    pub items: Vec<ShownItem>,
    /// The turn answered a question about one item of an earlier list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub about: bool,
    /// Unix ms.
    pub at: i64,
}

/// A conversation as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationState {
    pub id: String,
    /// Unix ms of the first turn.
    pub created_at: i64,
    /// Unix ms of the latest turn.
    pub updated_at: i64,
    /// The constraints in force after the latest turn.
    pub constraints: Constraints,
    /// The latest turns, oldest first.
    pub turns: VecDeque<Turn>,
    /// Turns taken in all (the history keeps only the latest).
    #[serde(default)]
    pub turn_count: u64,
    /// The users the conversation was held with (deleting one removes it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    /// The sessions it was held in (deleting their user removes it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_ids: Vec<String>,
}

impl ConversationState {
    /// The prices of the previous answer's items.
    pub fn last_prices(&self) -> Vec<f64> {
        self.turns
            .back()
            .map(|turn| turn.items.iter().filter_map(|item| item.price).collect())
            .unwrap_or_default()
    }

    /// What references read: the latest list of items (questions about one of its
    /// items leave it in place) and the item the latest question was about.
    pub fn last_answer(&self) -> LastAnswer {
        let focus = self
            .turns
            .back()
            .filter(|turn| turn.about)
            .and_then(|turn| turn.items.first())
            .map(|item| item.id.clone());
        let list = self.turns.iter().rev().find(|turn| !turn.about);
        LastAnswer {
            ids: list
                .map(|turn| turn.items.iter().map(|item| item.id.clone()).collect())
                .unwrap_or_default(),
            prices: self.last_prices(),
            focus,
        }
    }

    /// Whether the conversation was held with `uid` or in one of `sessions`.
    pub fn names(&self, uid: &str, sessions: &[String]) -> bool {
        self.user_ids.iter().any(|id| id == uid) || self.session_ids.iter().any(|id| sessions.contains(id))
    }

    /// Every item shown in the kept turns.
    pub fn shown(&self) -> Vec<String> {
        self.turns
            .iter()
            .flat_map(|turn| turn.items.iter().map(|item| item.id.clone()))
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The actor did not answer in time or is stopping (retryable).
    #[error("conversation unavailable: {0}")]
    Unavailable(String),
}

/// What a new message makes of the conversation, before retrieval.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    /// The constraints to answer with (not yet stored).
    pub constraints: Constraints,
    /// How relative words were read.
    pub notes: Vec<Note>,
    /// The item of an earlier answer the message asks about, and what it asks.
    pub about: Option<(String, Option<Ask>)>,
    /// Items shown earlier that the answer must not repeat ("more").
    pub skip: Vec<String>,
}

/// Merges a message into the constraints in force, with the catalog's scale for
/// words without amounts; the state is not changed.
#[derive(Message)]
#[rtype(result = "TurnPlan")]
pub struct TakeTurn(pub Extracted, pub Scale);

/// Stores a turn and the constraints it was answered with, durably, then answers.
#[derive(Message)]
#[rtype(result = "Result<(), ConversationError>")]
pub struct RecordTurn {
    pub turn: Turn,
    pub constraints: Constraints,
    /// Who sent the message, if the request said.
    pub user_id: Option<String>,
    pub session_id: Option<String>,
}

/// Deletes the stored conversation and stops its actor (a user's deletion).
#[derive(Message)]
#[rtype(result = "Result<(), ConversationError>")]
pub struct Forget;

/// The stored state, for inspection.
#[derive(Message)]
#[rtype(result = "ConversationState")]
pub struct Snapshot;

/// The actor of one conversation.
pub struct ConversationActor {
    state: ConversationState,
    shard: ShardId,
    storage: Storage,
    clock: SharedClock,
    settings: ConversationSettings,
    /// Unix ms of the last message handled.
    last_active: i64,
    /// The registry this actor removes itself from when it stops.
    live: Arc<DashMap<String, Addr<ConversationActor>>>,
    stats: Arc<ConversationStats>,
}

impl Actor for ConversationActor {
    type Context = Context<Self>;

    fn started(&mut self, context: &mut Context<Self>) {
        context.set_mailbox_capacity(self.settings.mailbox);
        let tick = Duration::from_millis((self.settings.idle_ttl_ms / 2).clamp(10, 60_000));
        context.run_interval(tick, |actor, context| {
            if actor.clock.now_millis() - actor.last_active >= actor.settings.idle_ttl_ms as i64 {
                context.stop();
            }
        });
    }

    fn stopped(&mut self, context: &mut Context<Self>) {
        let me = context.address();
        if self.live.remove_if(&self.state.id, |_, addr| *addr == me).is_some() {
            self.stats.passivated.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(conversation = %self.state.id, "conversation passivated");
    }
}

impl Handler<TakeTurn> for ConversationActor {
    type Result = actix::MessageResult<TakeTurn>;

    fn handle(&mut self, TakeTurn(extracted, scale): TakeTurn, _: &mut Context<Self>) -> Self::Result {
        self.last_active = self.clock.now_millis();
        let mut constraints = self.state.constraints.clone();
        let last = self.state.last_answer();
        let notes = constraints.apply(&extracted, &last, &scale);
        let about = match (extracted.reference, &extracted.similar) {
            (Some(reference), None) => reference.resolve(&last).map(|id| (id.clone(), extracted.ask)),
            _ => None,
        };
        let skip = if extracted.more { self.state.shown() } else { Vec::new() };
        actix::MessageResult(TurnPlan {
            constraints,
            notes,
            about,
            skip,
        })
    }
}

impl Handler<RecordTurn> for ConversationActor {
    type Result = AtomicResponse<Self, Result<(), ConversationError>>;

    fn handle(&mut self, record: RecordTurn, _: &mut Context<Self>) -> Self::Result {
        let now = self.clock.now_millis();
        self.last_active = now;
        if self.state.turn_count == 0 {
            self.state.created_at = now;
        }
        self.state.updated_at = now;
        self.state.turn_count += 1;
        self.state.constraints = record.constraints;
        self.state.turns.push_back(record.turn);
        add_once(&mut self.state.user_ids, record.user_id);
        add_once(&mut self.state.session_ids, record.session_id);
        while self.state.turns.len() > self.settings.max_turns {
            self.state.turns.pop_front();
        }
        let value = serde_json::to_vec(&self.state).expect("conversation state serializes");
        let key = layout::conversation(self.shard, &self.state.id);
        let storage = self.storage.clone();
        let write = async move {
            tokio::task::spawn_blocking(move || storage.put_unsynced(Cf::State, &key, &value))
                .await
                .map_err(|error| ConversationError::Unavailable(error.to_string()))?
                .map_err(ConversationError::from)
        };
        AtomicResponse::new(Box::pin(write.into_actor(self).map(|result, _, _| result)))
    }
}

impl Handler<Forget> for ConversationActor {
    type Result = Result<(), ConversationError>;

    fn handle(&mut self, _: Forget, context: &mut Context<Self>) -> Self::Result {
        self.storage
            .delete(Cf::State, &layout::conversation(self.shard, &self.state.id))?;
        self.state = ConversationState::default();
        context.stop();
        Ok(())
    }
}

fn add_once(ids: &mut Vec<String>, id: Option<String>) {
    if let Some(id) = id.filter(|id| !ids.contains(id)) {
        ids.push(id);
    }
}

impl Handler<Snapshot> for ConversationActor {
    type Result = actix::MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        actix::MessageResult(self.state.clone())
    }
}

/// The ids and keys of the stored conversations held with `uid` or in `sessions`.
fn conversations_naming(
    storage: &Storage,
    shards: u16,
    uid: &str,
    sessions: &[String],
) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    let needles: Vec<Vec<u8>> = std::iter::once(uid)
        .chain(sessions.iter().map(String::as_str))
        .map(|id| serde_json::to_vec(id).expect("a string serializes"))
        .collect();
    let mut named = Vec::new();
    for shard in 0..shards {
        let prefix = layout::conversations_prefix(shard);
        for entry in storage.scan_prefix(Cf::State, &prefix) {
            let (key, bytes) = entry?;
            if !needles
                .iter()
                .any(|needle| memchr::memmem::find(&bytes, needle).is_some())
            {
                continue;
            }
            match serde_json::from_slice::<ConversationState>(&bytes) {
                Ok(state) if state.names(uid, sessions) => named.push((state.id, key.into_vec())),
                Ok(_) => {}
                // Unreadable, and it names them: it goes too.
                Err(_) => named.push((String::new(), key.into_vec())),
            }
        }
    }
    Ok(named)
}

/// Counters of the registry.
#[derive(Debug, Default)]
pub struct ConversationStats {
    /// Conversations started with an id never seen.
    pub started: AtomicU64,
    /// Actors started from a stored conversation.
    pub restored: AtomicU64,
    /// Actors stopped after their idle TTL.
    pub passivated: AtomicU64,
}

/// Finds or starts the actor of a conversation id. Actors run on one arbiter thread
/// of their own.
pub struct Conversations {
    live: Arc<DashMap<String, Addr<ConversationActor>>>,
    storage: Storage,
    shards: u16,
    clock: SharedClock,
    settings: ConversationSettings,
    arbiter: parking_lot::Mutex<Option<Arbiter>>,
    handle: actix::ArbiterHandle,
    stats: Arc<ConversationStats>,
}

impl Conversations {
    /// Starts the arbiter the conversation actors will run on.
    pub fn start(storage: Storage, shards: u16, clock: SharedClock, settings: ConversationSettings) -> Conversations {
        let arbiter = Arbiter::new();
        Conversations {
            live: Arc::new(DashMap::new()),
            storage,
            shards,
            clock,
            settings,
            handle: arbiter.handle(),
            arbiter: parking_lot::Mutex::new(Some(arbiter)),
            stats: Arc::new(ConversationStats::default()),
        }
    }

    /// The conversation's stored state, or `None` for an id never seen.
    fn load(&self, id: &str) -> Result<Option<ConversationState>, StorageError> {
        let key = layout::conversation(shard_for(id.as_bytes(), self.shards), id);
        let Some(bytes) = self.storage.get(Cf::State, &key)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| StorageError::Corrupt {
                key: format!("conversation {id}"),
                reason: error.to_string(),
            })
    }

    /// The live actor of `id`, started (from the stored state, or empty) if needed.
    fn actor(&self, id: &str) -> Result<Addr<ConversationActor>, ConversationError> {
        if let Some(addr) = self.live.get(id).filter(|addr| addr.connected()) {
            return Ok(addr.clone());
        }
        let stored = self.load(id)?;
        let entry = self.live.entry(id.to_owned());
        if let dashmap::mapref::entry::Entry::Occupied(occupied) = &entry {
            if occupied.get().connected() {
                return Ok(occupied.get().clone());
            }
        }
        let counter = if stored.is_some() {
            &self.stats.restored
        } else {
            &self.stats.started
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let state = stored.unwrap_or_else(|| ConversationState {
            id: id.to_owned(),
            ..ConversationState::default()
        });
        let actor = ConversationActor {
            state,
            shard: shard_for(id.as_bytes(), self.shards),
            storage: self.storage.clone(),
            clock: self.clock.clone(),
            settings: self.settings,
            last_active: self.clock.now_millis(),
            live: self.live.clone(),
            stats: self.stats.clone(),
        };
        let addr = ConversationActor::start_in_arbiter(&self.handle, move |_| actor);
        entry.insert(addr.clone());
        Ok(addr)
    }

    /// Sends a message to the conversation's actor, restarting it once if it was
    /// stopping when the message arrived.
    async fn ask<M>(&self, id: &str, message: impl Fn() -> M) -> Result<M::Result, ConversationError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ConversationActor: Handler<M>,
    {
        let timeout = Duration::from_millis(self.settings.ask_timeout_ms);
        for _attempt in 0..2 {
            let addr = self.actor(id)?;
            match tokio::time::timeout(timeout, addr.send(message())).await {
                Ok(Ok(result)) => return Ok(result),
                Ok(Err(MailboxError::Closed)) => {
                    self.live.remove_if(id, |_, live| *live == addr);
                }
                Ok(Err(MailboxError::Timeout)) | Err(_) => {
                    return Err(ConversationError::Unavailable(format!(
                        "conversation {id:?} did not answer within {} ms",
                        self.settings.ask_timeout_ms
                    )))
                }
            }
        }
        Err(ConversationError::Unavailable(format!(
            "conversation {id:?} is restarting"
        )))
    }

    /// Merges a message into conversation `id` (started if absent) and returns
    /// what to answer with.
    pub async fn take_turn(&self, id: &str, extracted: Extracted, scale: Scale) -> Result<TurnPlan, ConversationError> {
        self.ask(id, || TakeTurn(extracted.clone(), scale)).await
    }

    /// Stores an answered turn and who it was with; resolves once it is written.
    pub async fn record_turn(&self, id: &str, record: RecordTurn) -> Result<(), ConversationError> {
        self.ask(id, || RecordTurn {
            turn: record.turn.clone(),
            constraints: record.constraints.clone(),
            user_id: record.user_id.clone(),
            session_id: record.session_id.clone(),
        })
        .await?
    }

    /// Deletes every conversation held with `uid` or in one of `sessions`, stored
    /// or live; answers how many. Reads every stored conversation of the node (one
    /// is decoded only when its bytes name one of them).
    pub async fn forget(&self, uid: &str, sessions: &[String]) -> Result<usize, ConversationError> {
        let storage = self.storage.clone();
        let shards = self.shards;
        let (owner, held) = (uid.to_owned(), sessions.to_vec());
        let named = tokio::task::spawn_blocking(move || conversations_naming(&storage, shards, &owner, &held))
            .await
            .map_err(|error| ConversationError::Unavailable(error.to_string()))??;
        for (id, key) in &named {
            match self.live.remove(id) {
                Some((_, addr)) => match addr.send(Forget).await {
                    Ok(result) => result?,
                    // Stopped meanwhile: its state is stored, and deleted here.
                    Err(_) => self.storage.delete(Cf::State, key)?,
                },
                None => self.storage.delete(Cf::State, key)?,
            }
        }
        Ok(named.len())
    }

    /// The current state of a conversation (`None` for an id never seen).
    pub async fn snapshot(&self, id: &str) -> Result<Option<ConversationState>, ConversationError> {
        if self.live.get(id).is_none() && self.load(id)?.is_none() {
            return Ok(None);
        }
        self.ask(id, || Snapshot).await.map(Some)
    }

    /// Actors live now.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    pub fn stats(&self) -> &ConversationStats {
        &self.stats
    }

    /// Stops every actor and the arbiter thread (their state is already stored).
    pub fn stop(&self) {
        self.live.clear();
        if let Some(arbiter) = self.arbiter.lock().take() {
            arbiter.stop();
            let _ = arbiter.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_prices_come_from_the_latest_turn() {
        let mut state = ConversationState::default();
        assert!(state.last_prices().is_empty());
        for prices in [[Some(1.0), None], [Some(3.0), Some(5.0)]] {
            state.turns.push_back(Turn {
                message: "m".into(),
                reply: "r".into(),
                items: prices
                    .iter()
                    .enumerate()
                    .map(|(index, price)| ShownItem {
                        id: index.to_string(),
                        price: *price,
                    })
                    .collect(),
                about: false,
                at: 0,
            });
        }
        assert_eq!(state.last_prices(), vec![3.0, 5.0]);
    }

    #[test]
    fn state_round_trips_as_json_and_tolerates_missing_counters() {
        let state = ConversationState {
            id: "c1".into(),
            turn_count: 3,
            ..ConversationState::default()
        };
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<ConversationState>(&json).unwrap(), state);
        let older = json.replace(",\"turn_count\":3", "");
        assert_eq!(serde_json::from_str::<ConversationState>(&older).unwrap().turn_count, 0);
    }
}
