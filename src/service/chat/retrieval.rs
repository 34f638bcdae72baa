//! Chat's retrieval: the items of a list answer, by the `default` model's ranking of
//! every catalog item meeting the constraints (no free-text words, or "like X"), or
//! by personalized search filtered by them; whether the user's and session's signals
//! changed the order; and what to relax when nothing matched.

use std::collections::{HashMap, HashSet};

use serde_json::Map;

use super::ChatService;
use super::{found_of, item_facts, ChatRequest};
use crate::chat::catalog::ChatCatalog;
use crate::chat::constraints::Constraints;
use crate::chat::dictionary::{words_of, LabelDictionary};
use crate::chat::filter::{failed_checks, groups_of, Applicable, Check};
use crate::domain::candidate::Candidate;
use crate::domain::live_state::availability;
use crate::ranking::{rank, RankContext};
use crate::service::embedded_events::EmbeddedEvent;
use crate::service::recommend::Profile;
use crate::service::search::{Found, SearchRequest};
use crate::service::ServiceError;

/// Interests (groups) of the user named in a reply, at most.
const MAX_INTERESTS: usize = 2;
/// Text matches looked through for a title named in "like <title>".
const TITLE_HITS: usize = 10;
/// The model whose ranking orders a turn without words (without it in the models
/// file, matching items come in catalog order).
const CHAT_MODEL: &str = "default";

impl ChatService {
    /// The catalog item a "like <title>" names: among the best text matches of the
    /// words, the one whose title holds them all with the fewest other words.
    pub(super) async fn find_title(
        &self,
        words: &[String],
        catalog: &ChatCatalog,
    ) -> Result<Option<String>, ServiceError> {
        let wanted: Vec<&String> = words
            .iter()
            .filter(|word| !crate::chat::text::is_stopword(word))
            .collect();
        if wanted.is_empty() {
            return Ok(None);
        }
        let hits = self.search.text_search(&words.join(" "), TITLE_HITS, &[]).await?;
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
    pub(super) async fn find_items(
        &self,
        request: &ChatRequest,
        constraints: &Constraints,
        skip: &[String],
        dictionary: &LabelDictionary,
        catalog: &ChatCatalog,
    ) -> Result<ListFinds, ServiceError> {
        let children = dictionary.children_groups();
        let mut skip: HashSet<&str> = skip.iter().map(String::as_str).collect();
        if let Some(id) = &constraints.similar_to {
            skip.insert(id);
        }
        let mut found = if constraints.query.is_empty() || constraints.similar_to.is_some() {
            self.rank_catalog(request, constraints, &skip, children, catalog)
                .await?
        } else {
            self.search_catalog(request, constraints, &skip, dictionary).await?
        };
        if found.personalized {
            found.interests = self.interests(request, &found.shown).await;
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
            .ranking
            .rank_context(
                request.user_id.clone(),
                request.session_id.clone(),
                Map::new(),
                Profile::Skipped,
            )
            .await;
        carries_signals(&context)
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
    ) -> Result<ListFinds, ServiceError> {
        let applicable = Applicable::of(catalog.rows.iter().map(|item| item.row.as_ref()), children);
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
        let items = &self.items;
        let candidates = passing
            .iter()
            .map(|item| {
                Ok(Candidate {
                    id: item.id.as_str().into(),
                    attributes: Map::new(),
                    features: items.features(&item.id)?,
                })
            })
            .collect::<Result<Vec<Candidate>, ServiceError>>()?;
        let like: Vec<EmbeddedEvent> = constraints
            .similar_to
            .iter()
            .map(|id| EmbeddedEvent {
                timestamp: self.clock.now_millis(),
                event_type: "click".to_owned(),
                item_id: Some(id.clone()),
                description: None,
            })
            .collect();
        // A models file without `default`: matching items in catalog order.
        let model = self.ranking.model(CHAT_MODEL).ok();
        let keep = request.limit * 4 + 16;
        let ranked_with = |context: RankContext| -> Result<Vec<Found>, ServiceError> {
            let order: Vec<usize> = match &model {
                Some(model) => rank(model.as_ref(), &context, &candidates, Some(keep), &[])?
                    .into_iter()
                    .map(|ranked| ranked.index)
                    .collect(),
                None => (0..candidates.len().min(keep)).collect(),
            };
            let found = order.into_iter().map(|index| found_of(passing[index])).collect();
            Ok(available_first(found, request.limit))
        };
        let mut personal = self
            .ranking
            .rank_context(
                request.user_id.clone(),
                request.session_id.clone(),
                Map::new(),
                Profile::Made,
            )
            .await;
        let signalled = !request.events.is_empty() || carries_signals(&personal);
        let mut events = request.events.clone();
        events.extend(like.iter().cloned());
        self.ranking.apply_embedded_events(&mut personal, &events);
        let shown = ranked_with(personal)?;
        let personalized = signalled && {
            let mut plain = self.ranking.rank_context(None, None, Map::new(), Profile::Made).await;
            self.ranking.apply_embedded_events(&mut plain, &like);
            !same_ids(&shown, &ranked_with(plain)?)
        };
        Ok(ListFinds {
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
    ) -> Result<ListFinds, ServiceError> {
        let pool = self.search_pool(request, constraints, dictionary).await?;
        let mut found = select(&pool, constraints, dictionary, request.limit, skip);
        if self.has_signals(request).await {
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
            limit: self.config.retrieval_pool,
            tables: Vec::new(),
            rules: None,
            explain: false,
        };
        let terms = constraints.query.join(" ");
        let labels = label_text(constraints, dictionary);
        let mut pool = self.search.search(&search(terms.clone())).await?;
        let none_skipped = HashSet::new();
        if labels.is_empty()
            || select(&pool, constraints, dictionary, request.limit, &none_skipped).matched >= request.limit
        {
            return Ok(pool);
        }
        let wider = self.search.search(&search(format!("{terms} {labels}"))).await?;
        let seen: HashSet<String> = pool.iter().map(|found| found.id.clone()).collect();
        pool.extend(wider.into_iter().filter(|found| !seen.contains(&found.id)));
        Ok(pool)
    }

    /// The groups the user/session (and the request's events) lean to that the shown
    /// items share, strongest first.
    async fn interests(&self, request: &ChatRequest, shown: &[Found]) -> Vec<String> {
        if shown.is_empty() {
            return Vec::new();
        }
        let mut weights: HashMap<String, f64> = HashMap::new();
        if interests_possible(request) {
            let context = self
                .ranking
                .rank_context(
                    request.user_id.clone(),
                    request.session_id.clone(),
                    Map::new(),
                    Profile::Skipped,
                )
                .await;
            for signals in [&context.session, &context.user].into_iter().flatten() {
                for (affinity, weight) in signals.affinities() {
                    if let Some(group) = affinity.attribute().strip_prefix("group:") {
                        *weights.entry(group.to_lowercase()).or_default() += weight;
                    }
                }
            }
        }
        let items = &self.items;
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
        shared
            .into_iter()
            .take(MAX_INTERESTS)
            .map(|(group, _)| group.to_owned())
            .collect()
    }
}

/// Whether a context's session or user has any recent item or live affinity.
fn carries_signals(context: &RankContext) -> bool {
    [&context.session, &context.user]
        .into_iter()
        .flatten()
        .any(|signals| !signals.recent.is_empty() || signals.affinities().next().is_some())
}

/// Whether two answers show the same items in the same order.
fn same_ids(a: &[Found], b: &[Found]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.id == b.id)
}

/// The first `limit` items, those that cannot be had after the others.
fn available_first(items: Vec<Found>, limit: usize) -> Vec<Found> {
    let (mut shown, unavailable): (Vec<Found>, Vec<Found>) = items
        .into_iter()
        .partition(|found| availability(&found.row) != Some(false));
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
pub(super) struct ListFinds {
    /// At most `limit` items, available ones first.
    pub(super) shown: Vec<Found>,
    /// Items meeting every constraint.
    pub(super) matched: usize,
    /// Items looked at before the constraints were applied.
    pub(super) retrieved: usize,
    pub(super) unchecked: Vec<Check>,
    pub(super) relax: Option<(Check, usize)>,
    /// Whether the user, session or events changed the order shown.
    pub(super) personalized: bool,
    /// Their interests (groups) the shown items share, when personalized.
    pub(super) interests: Vec<String>,
}

/// What a search turn shows out of its pool: the items meeting every constraint and
/// not to be skipped, in pool order, available ones first.
fn select(
    pool: &[Found],
    constraints: &Constraints,
    dictionary: &LabelDictionary,
    limit: usize,
    skip: &HashSet<&str>,
) -> ListFinds {
    let children = dictionary.children_groups();
    let applicable = Applicable::of(pool.iter().map(|found| found.row.as_ref()), children);
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
    ListFinds {
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
