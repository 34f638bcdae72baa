//! Chat: one turn of a conversation.
//!
//! message → constraints extracted against the catalog's label dictionary (a
//! "like <title>" resolved in the catalog) → the conversation's actor merges them
//! with the constraints in force (relative and band price words read against its
//! previous answer and the catalog's own prices) → then either
//! - a question about an item of an earlier answer ("is the second one available?")
//!   is answered about that item alone, or
//! - items are found: with free-text terms, by personalized search with a large pool
//!   filtered by the constraints; without them (only constraints, "like X", or
//!   nothing specific), by the `default` model's personalized ranking of every
//!   catalog item that meets the constraints; "more" leaves out what was shown;
//!   unavailable items go last → `limit` chat items → the reply (composed, or written
//!   by the configured LLM with the composed one as fallback)
//!
//! → the turn is stored → `{conversation_id, message, items, constraints}`.

mod retrieval;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::embedded_events::EmbeddedEvent;
use super::recommend::RankingService;
use super::search::Found;
use super::search::SearchService;
use super::vocabulary::Vocabulary;
use super::ServiceError;
use crate::chat::catalog::{CatalogRow, ChatCatalog};
use crate::chat::constraints::{extract, structured, Constraints, Extracted, Similar};
use crate::chat::dictionary::LabelDictionary;
use crate::chat::filter::price_of;
use crate::chat::reply::{answer_about, compose, describe, ItemFacts, TurnFindings};
use crate::clock::SharedClock;
use crate::config::ChatConfig;
use crate::domain::live_state::availability;
use crate::engine::catalog::ItemReader;
use crate::engine::conversation::{ConversationSettings, Conversations, RecordTurn, ShownItem, Turn};
use crate::engine::Engine;
use retrieval::ListFinds;

/// `limit` when absent, and its largest value.
pub const DEFAULT_LIMIT: usize = 4;
pub const MAX_LIMIT: usize = 50;
/// How long a request waits for its conversation actor.
const CONVERSATION_TIMEOUT_MS: u64 = 2_000;
/// Description characters per item given to the LLM.
const LLM_DESCRIPTION_CHARS: usize = 200;

/// The chat use case: the conversations, the LLM, and what a turn reads (the live
/// state, the search and ranking services, the catalog's vocabulary).
pub struct ChatService {
    pub conversations: Arc<Conversations>,
    config: ChatConfig,
    /// Writes replies when an LLM is configured (the composed reply is the fallback).
    llm: Option<Arc<dyn ReplyWriter>>,
    /// The catalog read for chat.
    items: Arc<ItemReader>,
    /// Turns are stamped with it.
    clock: SharedClock,
    /// Free-text turns are personalized searches.
    search: Arc<SearchService>,
    /// Turns without free text rank the catalog with a model.
    ranking: Arc<RankingService>,
    /// The catalog's labels, and words read by meaning against them.
    words: Arc<Vocabulary>,
    /// Every catalog item as chat filters it; replaced in the background once the
    /// catalog has changed (`refreshing` while that runs).
    catalog: Arc<parking_lot::Mutex<Option<Arc<ChatCatalog>>>>,
    refreshing: Arc<std::sync::atomic::AtomicBool>,
    /// Turns answered.
    turns: AtomicU64,
    /// Replies written by the LLM.
    llm_replies: AtomicU64,
    /// LLM calls that failed or timed out (the composed reply was used).
    llm_failures: AtomicU64,
    /// Messages whose constraints the LLM read.
    llm_extractions: AtomicU64,
    /// LLM readings that failed, timed out or were unusable (the rules read the message).
    llm_extraction_failures: AtomicU64,
}

/// Starts the conversation actors' arbiter (with the engine's stage: a shard move
/// carries conversations too).
pub fn start_conversations(engine: &Engine, config: &ChatConfig) -> Arc<Conversations> {
    Arc::new(engine.start_conversations(ConversationSettings {
        max_turns: config.max_turns,
        idle_ttl_ms: config.idle_ttl_ms,
        mailbox: config.mailbox,
        ask_timeout_ms: CONVERSATION_TIMEOUT_MS,
    }))
}

/// What a chat turn reads besides its own parts.
pub struct ChatReads {
    pub items: Arc<ItemReader>,
    pub clock: SharedClock,
    pub search: Arc<SearchService>,
    pub ranking: Arc<RankingService>,
    pub words: Arc<Vocabulary>,
}

impl ChatService {
    /// `llm` writes replies when configured.
    pub fn new(
        conversations: Arc<Conversations>,
        config: &ChatConfig,
        llm: Option<Arc<dyn ReplyWriter>>,
        reads: ChatReads,
    ) -> ChatService {
        let ChatReads {
            items,
            clock,
            search,
            ranking,
            words,
        } = reads;
        ChatService {
            conversations,
            llm,
            config: config.clone(),
            items,
            clock,
            search,
            ranking,
            words,
            catalog: Arc::new(parking_lot::Mutex::new(None)),
            refreshing: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            turns: AtomicU64::new(0),
            llm_replies: AtomicU64::new(0),
            llm_failures: AtomicU64::new(0),
            llm_extractions: AtomicU64::new(0),
            llm_extraction_failures: AtomicU64::new(0),
        }
    }

    /// The `[chat]` settings.
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    /// Counters for `/v1/admin/stats`.
    pub fn stats_json(&self) -> Value {
        let conversations = self.conversations.stats();
        json!({
            "turns": self.turns.load(Ordering::Relaxed),
            "llm_enabled": self.llm.is_some(),
            "llm_replies": self.llm_replies.load(Ordering::Relaxed),
            "llm_failures": self.llm_failures.load(Ordering::Relaxed),
            "llm_extractions": self.llm_extractions.load(Ordering::Relaxed),
            "llm_extraction_failures": self.llm_extraction_failures.load(Ordering::Relaxed),
            "live_conversations": self.conversations.live_count(),
            "conversations_started": conversations.started.load(Ordering::Relaxed),
            "conversations_restored": conversations.restored.load(Ordering::Relaxed),
            "conversations_passivated": conversations.passivated.load(Ordering::Relaxed),
        })
    }

    /// Stops the conversation actors (their state is stored after every turn).
    pub fn stop(&self) {
        self.conversations.stop();
    }
}

/// A chat request, valid by the SPEC's rules.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub message: String,
    /// A new conversation when absent.
    pub conversation_id: Option<String>,
    pub session_id: Option<String>,
    pub user_id: Option<String>,
    pub events: Vec<EmbeddedEvent>,
    pub limit: usize,
}

/// The answer to a turn.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChatAnswer {
    pub conversation_id: String,
    /// The reply text.
    pub message: String,
    pub items: Vec<ChatItem>,
    /// The constraints in force after this turn (keys without a value are left out).
    #[schema(value_type = Object)]
    pub constraints: Constraints,
}

/// A chat item: all strings, as the SPEC shows them.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChatItem {
    pub item_id: String,
    pub title: String,
    /// `available`, `unavailable` or `unknown`.
    pub status: &'static str,
    pub description: String,
    /// Two decimals and the currency when the item has one; empty without a price.
    pub price: String,
}

/// The optional LLM: writes a reply from the system prompt and the user's message,
/// and reads a message into JSON following a schema (structured output).
pub trait ReplyWriter: Send + Sync {
    fn reply<'a>(&'a self, system: &'a str, user: &'a str) -> BoxFuture<'a, Result<String, ReplyError>>;
    fn structured<'a>(
        &'a self,
        system: &'a str,
        user: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ReplyError>>;
}

/// The reply writer failed (the composed reply is used instead).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplyError(pub String);

impl ChatService {
    /// One turn of a conversation (see the module documentation).
    pub async fn chat_turn(&self, request: ChatRequest) -> Result<ChatAnswer, ServiceError> {
        let chat = self;
        let conversation_id = request
            .conversation_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let dictionary = self.words.dictionary();
        let catalog = self.chat_catalog().await?;
        let mut extracted = self
            .read_message(&request, &conversation_id, &dictionary, &catalog)
            .await;
        if let Some(Similar::Title(words)) = &extracted.similar {
            if let Some(id) = self.find_title(words, &catalog).await? {
                extracted.similar = Some(Similar::Item(id));
            }
        }
        let plan = chat
            .conversations
            .take_turn(&conversation_id, extracted, catalog.scale)
            .await?;
        let constraints = plan.constraints;
        let notes: Vec<String> = plan
            .notes
            .iter()
            .map(|note| crate::chat::reply::note_words(note, &constraints))
            .collect();
        let (shown, reply, about) = match plan.about.as_ref().and_then(|(id, ask)| Some((catalog.get(id)?, *ask))) {
            Some((item, ask)) => {
                let facts = item_facts(&item.row, &item.id);
                let mut sentences = notes;
                sentences.push(answer_about(&facts, ask));
                (vec![found_of(item)], sentences.join(" "), true)
            }
            None => {
                let found = self
                    .find_items(&request, &constraints, &plan.skip, &dictionary, &catalog)
                    .await?;
                let like = constraints
                    .similar_to
                    .as_ref()
                    .and_then(|id| catalog.get(id))
                    .map(|item| item_facts(&item.row, &item.id).title);
                let outcome = TurnFindings {
                    notes: &plan.notes,
                    shown: found.shown.len(),
                    matched: found.matched,
                    retrieved: found.retrieved,
                    interests: found.interests.clone(),
                    personalized: found.personalized,
                    unchecked: found.unchecked.clone(),
                    relax: found.relax,
                    like,
                    paged: !plan.skip.is_empty(),
                    ..TurnFindings::new(&constraints)
                };
                let reply = self
                    .write_reply(&request, &conversation_id, &constraints, &found, &outcome)
                    .await;
                (found.shown, reply, false)
            }
        };
        let items: Vec<ChatItem> = shown.iter().map(|found| chat_item(&found.row, &found.id)).collect();
        let turn = Turn {
            message: request.message,
            reply: reply.clone(),
            items: shown
                .iter()
                .map(|found| ShownItem {
                    id: found.id.clone(),
                    price: price_of(&found.row),
                })
                .collect(),
            about,
            at: self.clock.now_millis(),
        };
        let record = RecordTurn {
            turn,
            constraints: constraints.clone(),
            user_id: request.user_id.clone(),
            session_id: request.session_id.clone(),
        };
        chat.conversations.record_turn(&conversation_id, record).await?;
        chat.turns.fetch_add(1, Ordering::Relaxed);
        Ok(ChatAnswer {
            conversation_id,
            message: reply,
            items,
            constraints,
        })
    }

    /// What the message says: read by the LLM with structured output when one is
    /// configured, by the rules when not or when that fails.
    async fn read_message(
        &self,
        request: &ChatRequest,
        conversation_id: &str,
        dictionary: &Arc<LabelDictionary>,
        catalog: &ChatCatalog,
    ) -> Extracted {
        let Some(llm) = &self.llm else {
            return self.read_by_rules(&request.message, dictionary).await;
        };
        let shown = match &request.conversation_id {
            Some(id) => self.conversations.snapshot(id).await.ok().flatten(),
            None => None,
        };
        let titles: Vec<String> = shown
            .map(|state| state.last_answer().ids)
            .unwrap_or_default()
            .iter()
            .map(|id| match catalog.get(id) {
                Some(item) => item_facts(&item.row, id).title,
                None => id.clone(),
            })
            .collect();
        let system = structured::instructions(dictionary, &titles);
        let schema = structured::schema();
        let read = llm
            .structured(&system, &request.message, &schema)
            .await
            .map_err(|error| error.0)
            .and_then(|answer| {
                structured::read_answer(&answer, dictionary).ok_or_else(|| format!("not the schema's object: {answer}"))
            });
        match read {
            Ok(extracted) => {
                self.llm_extractions.fetch_add(1, Ordering::Relaxed);
                extracted
            }
            Err(error) => {
                self.llm_extraction_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, conversation = %conversation_id, "llm reading failed; the rules read the message");
                self.read_by_rules(&request.message, dictionary).await
            }
        }
    }

    /// The rules' reading, with the words they leave read by meaning.
    async fn read_by_rules(&self, message: &str, dictionary: &Arc<LabelDictionary>) -> Extracted {
        let mut extracted = extract(message, dictionary);
        self.words.read_by_meaning(&mut extracted, dictionary).await;
        extracted
    }

    /// The composed reply, or the LLM's when one is configured and answers.
    async fn write_reply(
        &self,
        request: &ChatRequest,
        conversation_id: &str,
        constraints: &Constraints,
        found: &ListFinds,
        outcome: &TurnFindings<'_>,
    ) -> String {
        let composed = compose(outcome);
        let Some(llm) = &self.llm else {
            return composed;
        };
        let system = llm_prompt(constraints, found, &composed);
        match llm.reply(&system, &request.message).await {
            Ok(text) => {
                self.llm_replies.fetch_add(1, Ordering::Relaxed);
                text
            }
            Err(error) => {
                self.llm_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, conversation = %conversation_id, "llm reply failed; using the composed reply");
                composed
            }
        }
    }

    /// The catalog as chat filters it. Read once at the first turn; after a catalog
    /// change, turns go on with the copy they have while a new one is read in the
    /// background (as the search index follows the catalog near-real-time).
    async fn chat_catalog(&self) -> Result<Arc<ChatCatalog>, ServiceError> {
        let version = self.items.version();
        let cached = self.catalog.lock().clone();
        if let Some(catalog) = &cached {
            if catalog.version != version && !self.refreshing.swap(true, Ordering::AcqRel) {
                let (items, slot, refreshing) = (
                    Arc::clone(&self.items),
                    Arc::clone(&self.catalog),
                    Arc::clone(&self.refreshing),
                );
                tokio::task::spawn_blocking(move || {
                    match read_catalog(&items) {
                        Ok(catalog) => *slot.lock() = Some(Arc::new(catalog)),
                        Err(error) => {
                            tracing::warn!(%error, "re-reading the catalog for chat failed; keeping the last copy")
                        }
                    }
                    refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(catalog.clone());
        }
        let items = Arc::clone(&self.items);
        let catalog = tokio::task::spawn_blocking(move || read_catalog(&items))
            .await
            .map_err(|error| ServiceError::Internal(format!("reading the catalog failed: {error}")))??;
        let catalog = Arc::new(catalog);
        *self.catalog.lock() = Some(catalog.clone());
        Ok(catalog)
    }
}

/// Reads every stored item for chat.
fn read_catalog(items: &ItemReader) -> Result<ChatCatalog, ServiceError> {
    let version = items.version();
    let mut rows = Vec::new();
    items
        .scan_items(&mut |row| rows.push(row))
        .map_err(|error| ServiceError::Internal(format!("reading the catalog: {error}")))?;
    Ok(ChatCatalog::new(version, rows))
}

/// A catalog row as a found item.
pub(super) fn found_of(item: &CatalogRow) -> Found {
    Found {
        id: item.id.clone(),
        table: item.table.clone(),
        score: 0.0,
        row: item.row.clone(),
        explanation: None,
    }
}

/// What a reply says about one item.
pub(super) fn item_facts(row: &Map<String, Value>, id: &str) -> ItemFacts {
    let item = chat_item(row, id);
    ItemFacts {
        title: if item.title.is_empty() {
            id.to_owned()
        } else {
            item.title
        },
        available: availability(row),
        price: item.price,
    }
}

/// A chat item: `{item_id, title, status, description, price}`, all strings.
fn chat_item(row: &Map<String, Value>, id: &str) -> ChatItem {
    let text = |field: &str| row.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
    let title = match text("title") {
        title if title.is_empty() => text("name"),
        title => title,
    };
    let status = match availability(row) {
        Some(true) => "available",
        Some(false) => "unavailable",
        None => "unknown",
    };
    let price = match (price_of(row), text("currency")) {
        (Some(price), currency) if currency.is_empty() => format!("{price:.2}"),
        (Some(price), currency) => format!("{price:.2} {currency}"),
        (None, _) => String::new(),
    };
    ChatItem {
        item_id: id.to_owned(),
        title,
        status,
        description: text("description"),
        price,
    }
}

/// The LLM's instructions: the constraints, the items in order, and the composed
/// reply as the facts to keep to.
fn llm_prompt(constraints: &Constraints, selection: &ListFinds, composed: &str) -> String {
    let mut prompt = String::from(
        "You are the shopping assistant of a catalog. Answer the user's last message in one to three \
         sentences. Mention only the items listed below, in their order, and never invent items, prices or \
         facts.\n",
    );
    prompt.push_str(&format!(
        "What the user asked for so far: {}.\n",
        describe(constraints, selection.shown.len(), &selection.unchecked, None)
    ));
    if selection.shown.is_empty() {
        prompt.push_str("No item matched.\n");
    } else {
        prompt.push_str("Items:\n");
        for (position, found) in selection.shown.iter().enumerate() {
            let item = chat_item(&found.row, &found.id);
            let description: String = item.description.chars().take(LLM_DESCRIPTION_CHARS).collect();
            prompt.push_str(&format!(
                "{}. {} (id {}; price {}; {}){}\n",
                position + 1,
                item.title,
                found.id,
                match item.price.as_str() {
                    "" => "unknown",
                    price => price,
                },
                item.status,
                if description.is_empty() {
                    String::new()
                } else {
                    format!(": {description}")
                },
            ));
        }
    }
    prompt.push_str(&format!("Facts to keep to: {composed}\n"));
    prompt
}
