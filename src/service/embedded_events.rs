//! Request-embedded events (SPEC "Request-embedded event") of search, rerank and
//! chat, folded into one request's ranking context. They shape that request only
//! and are never stored (DESIGN.md §3); the HTTP frontend parses them.

use std::sync::Arc;

use super::recommend::RankingService;
use crate::domain::live_state::InteractionKind;
use crate::domain::recent::Interaction;
use crate::domain::{LiveStateId, Signals};
use crate::engine::catalog::ItemReader;
use crate::ranking::RankContext;

/// One request-embedded event.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedEvent {
    /// When it happened, unix ms.
    pub timestamp: i64,
    /// browse, click, purchase, search, ...
    pub event_type: String,
    pub item_id: Option<String>,
    pub description: Option<String>,
}

impl RankingService {
    /// Folds a request's embedded events into its context ([`apply_to_context`]),
    /// decayed with the sessions' half-life.
    pub fn apply_embedded_events(&self, context: &mut RankContext, events: &[EmbeddedEvent]) {
        let half_life_ms = self.engine.decay(&LiveStateId::Session(String::new())).half_life_ms;
        apply_to_context(self.engine.items(), context, events, half_life_ms);
    }
}

/// Folds `events` into `context` as the session's newest signals: their items
/// become its most recent items (in time order) and their items' attributes add
/// to its affinities, weighted by event type like live events and decayed from
/// their timestamp with the session's half-life (`half_life_ms` when the request
/// has no session state).
pub fn apply_to_context(items: &ItemReader, context: &mut RankContext, events: &[EmbeddedEvent], half_life_ms: f64) {
    let mut ordered: Vec<&EmbeddedEvent> = events.iter().filter(|event| event.item_id.is_some()).collect();
    if ordered.is_empty() {
        return;
    }
    ordered.sort_by_key(|event| event.timestamp);
    let session = Arc::make_mut(context.session.get_or_insert_with(|| {
        Arc::new(Signals {
            half_life_ms,
            ..Signals::default()
        })
    }));
    for event in ordered {
        let Some(item_id) = &event.item_id else { continue };
        let kind = InteractionKind::of(&event.event_type);
        if kind == InteractionKind::Impression {
            continue;
        }
        session.recent.move_to_newest(Interaction {
            item_id,
            event_type: &event.event_type,
            at: event.timestamp,
            dwell_ms: None,
        });
        session.newest_at = session.newest_at.max(event.timestamp);
        if kind == InteractionKind::Conversion && !session.consumed.iter().any(|id| id == item_id) {
            session.consumed.insert(0, item_id.as_str().into());
        }
        let weight = kind.weight(None);
        if weight <= 0.0 {
            continue;
        }
        match items.features(item_id) {
            Ok(Some(features)) => {
                for key in &features.attributes {
                    session.add_affinity(key, weight, event.timestamp);
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, item = %item_id, "item unreadable; its embedded event adds no affinities")
            }
        }
    }
}
