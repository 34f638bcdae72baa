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

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::embedded_events::EmbeddedEvent;
use super::search::{Found, SearchRequest};
use super::{ServiceError, Services};
use crate::chat::catalog::{CatalogRow, ChatCatalog};
use crate::chat::constraints::{extract, structured, Constraints, Extracted, Similar};
use crate::ranking::{rank, Candidate};
use crate::chat::dictionary::{words_of, LabelDictionary};
use crate::chat::filter::{failed_checks, groups_of, price_of, Applicable, Check};
use crate::chat::reply::{answer_about, compose, describe, ItemFacts, Outcome};
use crate::config::ChatConfig;
use crate::domain::live_state::availability;
use crate::engine::conversation::{ConversationSettings, Conversations, ShownItem, Turn};
use crate::engine::Engine;

/// `limit` when absent, and its largest value.
pub const DEFAULT_LIMIT: usize = 4;
pub const MAX_LIMIT: usize = 50;
/// How long a request waits for its conversation actor.
const CONVERSATION_TIMEOUT_MS: u64 = 2_000;
/// Interests (groups) of the user named in a reply, at most.
const MAX_INTERESTS: usize = 2;
/// Description characters per item given to the LLM.
const LLM_DESCRIPTION_CHARS: usize = 200;
/// Text matches looked through for a title named in "like <title>".
const TITLE_HITS: usize = 10;

/// The chat use case's shared parts.
pub struct ChatService {
    pub conversations: Conversations,
    config: ChatConfig,
    /// Writes replies when an LLM is configured (the composed reply is the fallback).
    llm: Option<Arc<dyn ReplyWriter>>,
    /// The search index's label snapshot and the chat dictionary built from it.
    dictionary: parking_lot::Mutex<Option<(Arc<crate::search::CatalogLabels>, Arc<LabelDictionary>)>>,
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

impl ChatService {
    /// Starts the conversation actors' arbiter; `llm` writes replies when configured.
    pub fn start(engine: &Engine, config: &ChatConfig, llm: Option<Arc<dyn ReplyWriter>>) -> ChatService {
        let settings = ConversationSettings {
            max_turns: config.max_turns,
            idle_ttl_ms: config.idle_ttl_ms,
            mailbox: config.mailbox,
            ask_timeout_ms: CONVERSATION_TIMEOUT_MS,
        };
        ChatService {
            conversations: engine.start_conversations(settings),
            llm,
            config: config.clone(),
            dictionary: parking_lot::Mutex::new(None),
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

impl Services {
    /// One turn of a conversation (see the module documentation).
    pub async fn chat_turn(&self, request: ChatRequest) -> Result<ChatAnswer, ServiceError> {
        let chat = &self.chat;
        let conversation_id = request
            .conversation_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let dictionary = self.chat_dictionary();
        let catalog = self.chat_catalog().await?;
        let mut extracted = self.read_message(&request, &conversation_id, &dictionary, &catalog).await;
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
                let outcome = Outcome {
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
                    ..Outcome::new(&constraints)
                };
                let reply = self.write_reply(&request, &conversation_id, &constraints, &found, &outcome).await;
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
            at: self.engine.now_millis(),
        };
        chat.conversations
            .record_turn(&conversation_id, turn, constraints.clone())
            .await?;
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
        dictionary: &LabelDictionary,
        catalog: &ChatCatalog,
    ) -> Extracted {
        let Some(llm) = &self.chat.llm else {
            return extract(&request.message, dictionary);
        };
        let shown = match &request.conversation_id {
            Some(id) => self.chat.conversations.snapshot(id).await.ok().flatten(),
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
            .and_then(|answer| structured::read_answer(&answer, dictionary).ok_or_else(|| format!("not the schema's object: {answer}")));
        match read {
            Ok(extracted) => {
                self.chat.llm_extractions.fetch_add(1, Ordering::Relaxed);
                extracted
            }
            Err(error) => {
                self.chat.llm_extraction_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, conversation = %conversation_id, "llm reading failed; the rules read the message");
                extract(&request.message, dictionary)
            }
        }
    }

    /// The composed reply, or the LLM's when one is configured and answers.
    async fn write_reply(
        &self,
        request: &ChatRequest,
        conversation_id: &str,
        constraints: &Constraints,
        found: &FoundItems,
        outcome: &Outcome<'_>,
    ) -> String {
        let composed = compose(outcome);
        let Some(llm) = &self.chat.llm else {
            return composed;
        };
        let system = llm_prompt(constraints, found, &composed);
        match llm.reply(&system, &request.message).await {
            Ok(text) => {
                self.chat.llm_replies.fetch_add(1, Ordering::Relaxed);
                text
            }
            Err(error) => {
                self.chat.llm_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, conversation = %conversation_id, "llm reply failed; using the composed reply");
                composed
            }
        }
    }

    /// The catalog's labels as a chat dictionary, built once per snapshot of the
    /// search index's labels.
    fn chat_dictionary(&self) -> Arc<LabelDictionary> {
        let words = self.search.labels();
        let mut cached = self.chat.dictionary.lock();
        if let Some((source, dictionary)) = cached.as_ref() {
            if Arc::ptr_eq(source, &words) {
                return dictionary.clone();
            }
        }
        let groups: Vec<&String> = words.groups.values().collect();
        let tags: Vec<&String> = words.tags.values().collect();
        let dictionary = Arc::new(LabelDictionary::new(&groups, &tags));
        *cached = Some((words, dictionary.clone()));
        dictionary
    }

    /// The catalog as chat filters it. Read once at the first turn; after a catalog
    /// change, turns go on with the copy they have while a new one is read in the
    /// background (as the search index follows the catalog near-real-time).
    async fn chat_catalog(&self) -> Result<Arc<ChatCatalog>, ServiceError> {
        let version = self.engine.items().version();
        let cached = self.chat.catalog.lock().clone();
        if let Some(catalog) = &cached {
            if catalog.version != version && !self.chat.refreshing.swap(true, Ordering::AcqRel) {
                let (engine, slot, refreshing) = (
                    Arc::clone(&self.engine),
                    Arc::clone(&self.chat.catalog),
                    Arc::clone(&self.chat.refreshing),
                );
                tokio::task::spawn_blocking(move || {
                    match read_catalog(&engine) {
                        Ok(catalog) => *slot.lock() = Some(Arc::new(catalog)),
                        Err(error) => tracing::warn!(%error, "re-reading the catalog for chat failed; keeping the last copy"),
                    }
                    refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(catalog.clone());
        }
        let engine = Arc::clone(&self.engine);
        let catalog = tokio::task::spawn_blocking(move || read_catalog(&engine))
            .await
            .map_err(|error| ServiceError::Internal(format!("reading the catalog failed: {error}")))??;
        let catalog = Arc::new(catalog);
        *self.chat.catalog.lock() = Some(catalog.clone());
        Ok(catalog)
    }

    /// The catalog item a "like <title>" names: among the best text matches of the
    /// words, the one whose title holds them all with the fewest other words.
    async fn find_title(&self, words: &[String], catalog: &ChatCatalog) -> Result<Option<String>, ServiceError> {
        let wanted: Vec<&String> = words.iter().filter(|word| !crate::chat::text::is_stopword(word)).collect();
        if wanted.is_empty() {
            return Ok(None);
        }
        let hits = self.text_search(&words.join(" "), TITLE_HITS, &[]).await?;
        let best = hits
            .iter()
            .enumerate()
            .filter_map(|(rank, hit)| {
                let item = catalog.get(&hit.id)?;
                let title = words_of(&item_facts(&item.row, &item.id).title);
                let holds_all = wanted.iter().all(|word| title.contains(word));
                holds_all.then_some((title.len(), rank, hit.id.clone()))
            })
            .min();
        Ok(best.map(|(_, _, id)| id))
    }

    /// The items of a list answer (see the module documentation).
    async fn find_items(
        &self,
        request: &ChatRequest,
        constraints: &Constraints,
        skip: &[String],
        dictionary: &LabelDictionary,
        catalog: &ChatCatalog,
    ) -> Result<FoundItems, ServiceError> {
        let children = dictionary.children_groups();
        let mut skip: HashSet<&str> = skip.iter().map(String::as_str).collect();
        if let Some(id) = &constraints.similar_to {
            skip.insert(id);
        }
        let signalled = self.has_signals(request).await;
        let mut found = if constraints.query.is_empty() || constraints.similar_to.is_some() {
            self.rank_catalog(request, constraints, &skip, children, catalog, signalled).await?
        } else {
            self.search_catalog(request, constraints, &skip, dictionary, signalled).await?
        };
        if found.personalized {
            found.interests = self.interests(request, &found.shown).await.0;
        }
        Ok(found)
    }

    /// Whether the request's user, session or events carry any signal to personalize with.
    async fn has_signals(&self, request: &ChatRequest) -> bool {
        if !request.events.is_empty() {
            return true;
        }
        if !interests_possible(request) {
            return false;
        }
        let context = self
            .rank_context(request.user_id.clone(), request.session_id.clone(), Map::new())
            .await;
        let signalled = [&context.session, &context.user]
            .into_iter()
            .flatten()
            .any(|signals| !signals.recent.is_empty() || signals.affinities_at(context.now).next().is_some());
        signalled
    }

    /// Without words: every catalog item meeting the constraints, ranked by the
    /// `default` model with the request's user, session and events (and, for "like X",
    /// a fresh view of X); `personalized` when that order differs from the one
    /// without them.
    async fn rank_catalog(
        &self,
        request: &ChatRequest,
        constraints: &Constraints,
        skip: &HashSet<&str>,
        children: &[String],
        catalog: &ChatCatalog,
        signalled: bool,
    ) -> Result<FoundItems, ServiceError> {
        let applicable = Applicable::of(catalog.rows.iter().map(|item| &item.row), children);
        let mut passing = Vec::new();
        let mut single_failures: HashMap<Check, usize> = HashMap::new();
        for item in &catalog.rows {
            match failed_checks(&item.row, constraints, applicable, children).as_slice() {
                [] if !skip.contains(item.id.as_str()) => passing.push(item),
                [] => {}
                [only] => *single_failures.entry(*only).or_default() += 1,
                _ => {}
            }
        }
        let matched = passing.len();
        let items = self.engine.items();
        let candidates = passing
            .iter()
            .map(|item| {
                Ok(Candidate {
                    id: item.id.clone(),
                    attributes: Map::new(),
                    features: items.features(&item.id)?,
                })
            })
            .collect::<Result<Vec<Candidate>, ServiceError>>()?;
        let like: Vec<EmbeddedEvent> = constraints
            .similar_to
            .iter()
            .map(|id| EmbeddedEvent {
                timestamp: self.engine.now_millis(),
                event_type: "click".to_owned(),
                item_id: Some(id.clone()),
                description: None,
            })
            .collect();
        let model = self.model(CHAT_MODEL)?;
        let keep = Some(request.limit * 4 + 16);
        let ranked_with = |context: crate::ranking::RankContext| {
            rank(model.as_ref(), &context, &candidates, keep).map_err(ServiceError::from)
        };
        let mut personal = self
            .rank_context(request.user_id.clone(), request.session_id.clone(), Map::new())
            .await;
        let mut events = request.events.clone();
        events.extend(like.iter().cloned());
        self.apply_embedded_events(&mut personal, &events);
        let ranked = ranked_with(personal)?;
        let shown = available_first(ranked.iter().map(|item| found_of(passing[item.index])).collect(), request.limit);
        let personalized = signalled && {
            let mut plain = self.rank_context(None, None, Map::new()).await;
            self.apply_embedded_events(&mut plain, &like);
            let plain = ranked_with(plain)?;
            let plain = available_first(plain.iter().map(|item| found_of(passing[item.index])).collect(), request.limit);
            !same_ids(&shown, &plain)
        };
        Ok(FoundItems {
            relax: relax(matched, single_failures),
            shown,
            matched,
            retrieved: catalog.rows.len(),
            unchecked: unchecked(constraints, applicable, !catalog.rows.is_empty()),
            personalized,
            interests: Vec::new(),
        })
    }

    /// With words: the personalized search's pool (see [`Self::search_pool`]) filtered
    /// by the constraints; `personalized` when the order differs from the same search
    /// without the user, session and events.
    async fn search_catalog(
        &self,
        request: &ChatRequest,
        constraints: &Constraints,
        skip: &HashSet<&str>,
        dictionary: &LabelDictionary,
        signalled: bool,
    ) -> Result<FoundItems, ServiceError> {
        let pool = self.search_pool(request, constraints, dictionary).await?;
        let mut found = select(&pool, constraints, dictionary, request.limit, skip);
        if signalled {
            let anonymous = ChatRequest {
                user_id: None,
                session_id: None,
                events: Vec::new(),
                ..request.clone()
            };
            let plain_pool = self.search_pool(&anonymous, constraints, dictionary).await?;
            let plain = select(&plain_pool, constraints, dictionary, request.limit, skip);
            found.personalized = !same_ids(&found.shown, &plain.shown);
        }
        Ok(found)
    }

    /// The retrieval pool of a search turn. The query terms are searched alone (labels
    /// in the text would let a title that merely names a genre outrank a real match);
    /// when that pool holds fewer than `limit` items meeting the constraints, the terms
    /// plus the labels are searched too and the new items appended.
    async fn search_pool(
        &self,
        request: &ChatRequest,
        constraints: &Constraints,
        dictionary: &LabelDictionary,
    ) -> Result<Vec<Found>, ServiceError> {
        let search = |query: String| SearchRequest {
            query,
            user_id: request.user_id.clone(),
            session_id: request.session_id.clone(),
            events: request.events.clone(),
            limit: self.chat.config.retrieval_pool,
            tables: Vec::new(),
        };
        let terms = constraints.query.join(" ");
        let labels = label_text(constraints, dictionary);
        let mut pool = self.search(&search(terms.clone())).await?;
        let none_skipped = HashSet::new();
        if labels.is_empty() || select(&pool, constraints, dictionary, request.limit, &none_skipped).matched >= request.limit {
            return Ok(pool);
        }
        let wider = self.search(&search(format!("{terms} {labels}"))).await?;
        let seen: HashSet<String> = pool.iter().map(|found| found.id.clone()).collect();
        pool.extend(wider.into_iter().filter(|found| !seen.contains(&found.id)));
        Ok(pool)
    }

    /// The groups the user/session (and the request's events) lean to that the shown
    /// items share, strongest first; and whether there was any such signal at all.
    async fn interests(&self, request: &ChatRequest, shown: &[Found]) -> (Vec<String>, bool) {
        if shown.is_empty() {
            return (Vec::new(), false);
        }
        let mut weights: HashMap<String, f64> = HashMap::new();
        let mut signalled = false;
        if interests_possible(request) {
            let context = self
                .rank_context(request.user_id.clone(), request.session_id.clone(), Map::new())
                .await;
            for signals in [&context.session, &context.user].into_iter().flatten() {
                signalled |= !signals.recent.is_empty() || signals.affinities_at(context.now).next().is_some();
                for (affinity, weight) in signals.affinities_at(context.now) {
                    if let Some(group) = affinity.attribute.strip_prefix("group:") {
                        *weights.entry(group.to_lowercase()).or_default() += weight;
                    }
                }
            }
        }
        let items = self.engine.items();
        for event in &request.events {
            let Some(id) = event.item_id.as_deref() else { continue };
            let row = match items.find(id, None) {
                Ok(Some(row)) => row,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, item = id, "item unreadable; the reply's interests go without it");
                    continue;
                }
            };
            signalled = true;
            for group in groups_of(&row) {
                *weights.entry(group.to_lowercase()).or_default() += 1.0;
            }
        }
        let mut shown_groups: Vec<&str> = Vec::new();
        for found in shown {
            for group in groups_of(&found.row) {
                if !shown_groups.iter().any(|g| g.eq_ignore_ascii_case(group)) {
                    shown_groups.push(group);
                }
            }
        }
        let mut shared: Vec<(&str, f64)> = shown_groups
            .into_iter()
            .filter_map(|group| Some((group, *weights.get(&group.to_lowercase())?)))
            .filter(|(_, weight)| *weight > 0.0)
            .collect();
        shared.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let named = shared
            .into_iter()
            .take(MAX_INTERESTS)
            .map(|(group, _)| group.to_owned())
            .collect();
        (named, signalled)
    }
}

/// The model whose ranking orders a turn without words.
const CHAT_MODEL: &str = "default";

/// Reads every stored item for chat.
fn read_catalog(engine: &Engine) -> Result<ChatCatalog, ServiceError> {
    let items = engine.items();
    let version = items.version();
    let mut rows = Vec::new();
    items
        .scan_items(&mut |row| rows.push(row))
        .map_err(|error| ServiceError::Internal(format!("reading the catalog: {error}")))?;
    Ok(ChatCatalog::new(version, rows))
}

/// A catalog row as a found item.
fn found_of(item: &CatalogRow) -> Found {
    Found {
        id: item.id.clone(),
        table: item.table.clone(),
        score: 0.0,
        row: item.row.clone(),
    }
}

/// What a reply says about one item.
fn item_facts(row: &Map<String, Value>, id: &str) -> ItemFacts {
    let item = chat_item(row, id);
    ItemFacts {
        title: if item.title.is_empty() { id.to_owned() } else { item.title },
        available: availability(row),
        price: item.price,
    }
}

/// Whether two answers show the same items in the same order.
fn same_ids(a: &[Found], b: &[Found]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.id == b.id)
}

/// The first `limit` items, those that cannot be had after the others.
fn available_first(items: Vec<Found>, limit: usize) -> Vec<Found> {
    let (mut shown, unavailable): (Vec<Found>, Vec<Found>) =
        items.into_iter().partition(|found| availability(&found.row) != Some(false));
    shown.extend(unavailable);
    shown.truncate(limit);
    shown
}

/// When nothing matched: the constraint whose removal alone would match most items.
fn relax(matched: usize, single_failures: HashMap<Check, usize>) -> Option<(Check, usize)> {
    if matched > 0 {
        return None;
    }
    single_failures
        .into_iter()
        .max_by_key(|(check, count)| (*count, std::cmp::Reverse(*check as u8)))
        .filter(|(_, count)| *count > 0)
}

/// Constraints no row could be checked against (and so were not applied).
fn unchecked(constraints: &Constraints, applicable: Applicable, any_rows: bool) -> Vec<Check> {
    let mut unchecked = Vec::new();
    if constraints.language.is_some() && !applicable.language && any_rows {
        unchecked.push(Check::Language);
    }
    if constraints.audience.is_some() && !applicable.audience && any_rows {
        unchecked.push(Check::Audience);
    }
    unchecked
}

/// The named groups and tags (and the catalog's children groups for kids) as search text.
fn label_text(constraints: &Constraints, dictionary: &LabelDictionary) -> String {
    let mut parts: Vec<String> = constraints.groups.clone();
    parts.extend(constraints.tags.iter().cloned());
    if constraints.audience == Some(crate::chat::constraints::Audience::Kids) {
        parts.extend(dictionary.children_groups().iter().cloned());
    }
    parts.join(" ")
}

/// What a list turn found.
struct FoundItems {
    /// At most `limit` items, available ones first.
    shown: Vec<Found>,
    /// Items meeting every constraint.
    matched: usize,
    /// Items looked at before the constraints were applied.
    retrieved: usize,
    unchecked: Vec<Check>,
    relax: Option<(Check, usize)>,
    /// Whether the user, session or events changed the order shown.
    personalized: bool,
    /// Their interests (groups) the shown items share, when personalized.
    interests: Vec<String>,
}

/// What a search turn shows out of its pool: the items meeting every constraint and
/// not to be skipped, in pool order, available ones first.
fn select(
    pool: &[Found],
    constraints: &Constraints,
    dictionary: &LabelDictionary,
    limit: usize,
    skip: &HashSet<&str>,
) -> FoundItems {
    let children = dictionary.children_groups();
    let applicable = Applicable::of(pool.iter().map(|found| &found.row), children);
    let mut matched = Vec::new();
    let mut single_failures: HashMap<Check, usize> = HashMap::new();
    for found in pool {
        match failed_checks(&found.row, constraints, applicable, children).as_slice() {
            [] if !skip.contains(found.id.as_str()) => matched.push(found.clone()),
            [] => {}
            [only] => *single_failures.entry(*only).or_default() += 1,
            _ => {}
        }
    }
    let count = matched.len();
    FoundItems {
        shown: available_first(matched, limit),
        matched: count,
        retrieved: pool.len(),
        unchecked: unchecked(constraints, applicable, !pool.is_empty()),
        relax: relax(count, single_failures),
        personalized: false,
        interests: Vec::new(),
    }
}

/// Whether the request names someone whose live state may have shaped the order.
fn interests_possible(request: &ChatRequest) -> bool {
    request.user_id.is_some() || request.session_id.is_some()
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
fn llm_prompt(constraints: &Constraints, selection: &FoundItems, composed: &str) -> String {
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
