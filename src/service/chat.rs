//! Chat: one turn of a conversation.
//!
//! message → constraints extracted against the catalog's label dictionary → the
//! conversation's actor merges them with the constraints in force (relative price
//! words read against its previous answer) → personalized search with a large
//! pool (the query terms plus the named groups and tags) → the pool filtered by
//! the constraints, unavailable items last → `limit` chat items → the reply
//! (composed, or written by the configured LLM with the composed one as fallback)
//! → the turn is stored → `{conversation_id, message, items}`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::embedded_events::EmbeddedEvent;
use super::search::{Found, SearchRequest};
use super::{ServiceError, Services};
use crate::chat::constraints::{extract, Constraints};
use crate::chat::dictionary::LabelDictionary;
use crate::chat::filter::{failed_checks, groups_of, price_of, Applicable, Check};
use crate::chat::reply::{compose, describe, Outcome};
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

/// The chat use case's shared parts.
pub struct ChatService {
    pub conversations: Conversations,
    config: ChatConfig,
    /// Writes replies when an LLM is configured (the composed reply is the fallback).
    llm: Option<Arc<dyn ReplyWriter>>,
    /// The search index's label snapshot and the chat dictionary built from it.
    dictionary: parking_lot::Mutex<Option<(Arc<crate::search::CatalogLabels>, Arc<LabelDictionary>)>>,
    /// Turns answered.
    turns: AtomicU64,
    /// Replies written by the LLM.
    llm_replies: AtomicU64,
    /// LLM calls that failed or timed out (the composed reply was used).
    llm_failures: AtomicU64,
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
            turns: AtomicU64::new(0),
            llm_replies: AtomicU64::new(0),
            llm_failures: AtomicU64::new(0),
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

/// Writes a reply from the system prompt and the user's message (the optional LLM).
pub trait ReplyWriter: Send + Sync {
    fn reply<'a>(&'a self, system: &'a str, user: &'a str) -> BoxFuture<'a, Result<String, ReplyError>>;
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
        let extracted = extract(&request.message, &dictionary);
        let plan = chat.conversations.take_turn(&conversation_id, extracted).await?;
        let constraints = plan.constraints;

        let pool = self.retrieve(&request, &constraints, &dictionary).await?;
        let selection = select(&pool, &constraints, &dictionary, request.limit);
        let (interests, personalized) = self.interests(&request, &selection.shown).await;
        let outcome = Outcome {
            notes: &plan.notes,
            shown: selection.shown.len(),
            matched: selection.matched,
            retrieved: pool.len(),
            interests,
            personalized,
            unchecked: selection.unchecked.clone(),
            relax: selection.relax,
            ..Outcome::new(&constraints)
        };
        let composed = compose(&outcome);
        let reply = match &chat.llm {
            None => composed,
            Some(llm) => {
                let system = llm_prompt(&constraints, &selection, &composed);
                match llm.reply(&system, &request.message).await {
                    Ok(text) => {
                        chat.llm_replies.fetch_add(1, Ordering::Relaxed);
                        text
                    }
                    Err(error) => {
                        chat.llm_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%error, conversation = %conversation_id, "llm reply failed; using the composed reply");
                        composed
                    }
                }
            }
        };
        let items: Vec<ChatItem> = selection
            .shown
            .iter()
            .map(|found| chat_item(&found.row, &found.id))
            .collect();
        let turn = Turn {
            message: request.message,
            reply: reply.clone(),
            items: selection
                .shown
                .iter()
                .map(|found| ShownItem {
                    id: found.id.clone(),
                    price: price_of(&found.row),
                })
                .collect(),
            at: self.engine.now_millis(),
        };
        chat.conversations
            .record_turn(&conversation_id, turn, constraints)
            .await?;
        chat.turns.fetch_add(1, Ordering::Relaxed);
        Ok(ChatAnswer {
            conversation_id,
            message: reply,
            items,
        })
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

    /// The retrieval pool of a turn. The query terms are searched alone (labels in the
    /// text would let a title that merely names a genre outrank a real match); when that
    /// pool holds fewer than `limit` items meeting the constraints, the terms plus the
    /// labels are searched too and the new items appended. Without query terms, the
    /// labels are the search text; with neither, there is nothing to retrieve.
    async fn retrieve(
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
        if terms.is_empty() {
            if labels.is_empty() {
                return Ok(Vec::new());
            }
            return self.search(&search(labels)).await;
        }
        let mut pool = self.search(&search(terms.clone())).await?;
        if labels.is_empty() || select(&pool, constraints, dictionary, request.limit).matched >= request.limit {
            return Ok(pool);
        }
        let wider = self.search(&search(format!("{terms} {labels}"))).await?;
        let seen: HashSet<String> = pool.iter().map(|found| found.id.clone()).collect();
        pool.extend(wider.into_iter().filter(|found| !seen.contains(&found.id)));
        Ok(pool)
    }

    /// The groups the user/session (and the request's events) lean to that the shown
    /// items share, strongest first; and whether there was any such signal at all.
    async fn interests(&self, request: &ChatRequest, shown: &[&Found]) -> (Vec<String>, bool) {
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

/// The named groups and tags (and the catalog's children groups for kids) as search text.
fn label_text(constraints: &Constraints, dictionary: &LabelDictionary) -> String {
    let mut parts: Vec<String> = constraints.groups.clone();
    parts.extend(constraints.tags.iter().cloned());
    if constraints.audience == Some(crate::chat::constraints::Audience::Kids) {
        parts.extend(dictionary.children_groups().iter().cloned());
    }
    parts.join(" ")
}

/// What a turn shows out of its retrieval pool.
struct Selection<'a> {
    /// At most `limit` items, available ones first, in retrieval order otherwise.
    shown: Vec<&'a Found>,
    /// Items of the pool meeting every constraint.
    matched: usize,
    unchecked: Vec<Check>,
    relax: Option<(Check, usize)>,
}

fn select<'a>(
    pool: &'a [Found],
    constraints: &Constraints,
    dictionary: &LabelDictionary,
    limit: usize,
) -> Selection<'a> {
    let children = dictionary.children_groups();
    let applicable = Applicable::of(pool.iter().map(|found| &found.row), children);
    let mut unchecked = Vec::new();
    if constraints.language.is_some() && !applicable.language && !pool.is_empty() {
        unchecked.push(Check::Language);
    }
    if constraints.audience.is_some() && !applicable.audience && !pool.is_empty() {
        unchecked.push(Check::Audience);
    }
    let mut matched = Vec::new();
    let mut unavailable = Vec::new();
    let mut single_failures: HashMap<Check, usize> = HashMap::new();
    for found in pool {
        match failed_checks(&found.row, constraints, applicable, children).as_slice() {
            [] if availability(&found.row) == Some(false) => unavailable.push(found),
            [] => matched.push(found),
            [only] => *single_failures.entry(*only).or_default() += 1,
            _ => {}
        }
    }
    let total = matched.len() + unavailable.len();
    matched.extend(unavailable);
    matched.truncate(limit);
    let relax = match total {
        0 => single_failures
            .into_iter()
            .max_by_key(|(check, count)| (*count, std::cmp::Reverse(*check as u8)))
            .filter(|(_, count)| *count > 0),
        _ => None,
    };
    Selection {
        shown: matched,
        matched: total,
        unchecked,
        relax,
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
fn llm_prompt(constraints: &Constraints, selection: &Selection, composed: &str) -> String {
    let mut prompt = String::from(
        "You are the shopping assistant of a catalog. Answer the user's last message in one to three \
         sentences. Mention only the items listed below, in their order, and never invent items, prices or \
         facts.\n",
    );
    prompt.push_str(&format!(
        "What the user asked for so far: {}.\n",
        describe(constraints, selection.shown.len(), &selection.unchecked)
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
