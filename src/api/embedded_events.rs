//! Request-embedded events (SPEC "Request-embedded event") of search, rerank and
//! chat: parsed and validated here; `service::embedded_events` folds them into the
//! request's ranking context.

use serde_json::{Map, Value};

use super::ApiError;
use crate::service::embedded_events::EmbeddedEvent;

/// Most embedded events in one request.
pub const MAX_EMBEDDED_EVENTS: usize = 1_000;

/// The `events` of a request body: absent or null is none; otherwise an array of
/// objects, each with an ISO 8601 `timestamp` and a non-empty `type`, and
/// optionally a non-empty string `item_id` and a string `description` (422 else).
pub fn embedded_events(body: &Map<String, Value>) -> Result<Vec<EmbeddedEvent>, ApiError> {
    let events = match body.get("events") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(events)) => events,
        Some(_) => return Err(ApiError::validation("\"events\" must be an array of event objects")),
    };
    if events.len() > MAX_EMBEDDED_EVENTS {
        return Err(ApiError::validation(format!(
            "at most {MAX_EMBEDDED_EVENTS} \"events\" per request"
        )));
    }
    events
        .iter()
        .enumerate()
        .map(|(index, event)| embedded_event(index, event))
        .collect()
}

fn embedded_event(index: usize, event: &Value) -> Result<EmbeddedEvent, ApiError> {
    let invalid = |what: &str| ApiError::validation(format!("events[{index}]: {what}"));
    let Value::Object(event) = event else {
        return Err(invalid("must be an object"));
    };
    let timestamp = match event.get("timestamp") {
        None | Some(Value::Null) => return Err(invalid("\"timestamp\" is required")),
        Some(Value::String(text)) => crate::timestamp::parse_iso8601(text)
            .ok_or_else(|| invalid("\"timestamp\" must be an ISO 8601 date-time"))?,
        Some(_) => return Err(invalid("\"timestamp\" must be an ISO 8601 string")),
    };
    let event_type = match event.get("type") {
        None | Some(Value::Null) => return Err(invalid("\"type\" is required")),
        Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
        Some(_) => return Err(invalid("\"type\" must be a non-empty string")),
    };
    let item_id = match event.get("item_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
        Some(_) => return Err(invalid("\"item_id\" must be a non-empty string")),
    };
    let description = match event.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(invalid("\"description\" must be a string")),
    };
    Ok(EmbeddedEvent {
        timestamp,
        event_type,
        item_id,
        description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(events: Value) -> Result<Vec<EmbeddedEvent>, ApiError> {
        embedded_events(json!({ "events": events }).as_object().unwrap())
    }

    #[test]
    fn valid_events_parse() {
        let events = parse(json!([
            {"timestamp": "2026-11-22T10:00:00Z", "type": "click", "item_id": "a", "description": "x"},
            {"timestamp": "2026-11-22T10:00:00", "type": "search"},
            {"timestamp": "2026-11-22", "type": "browse", "item_id": null}
        ]))
        .unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].item_id.as_deref(), Some("a"));
        assert_eq!(events[0].timestamp, events[1].timestamp);
        assert_eq!(events[2].timestamp, events[0].timestamp - 10 * 3_600_000);
        assert!(embedded_events(&Map::new()).unwrap().is_empty());
    }

    #[test]
    fn invalid_events_are_refused() {
        for bad in [
            json!({"type": "click"}),
            json!([{"type": "click"}]),
            json!([{"timestamp": "yesterday", "type": "click"}]),
            json!([{"timestamp": 1_700_000_000, "type": "click"}]),
            json!([{"timestamp": "2026-11-22T10:00:00Z"}]),
            json!([{"timestamp": "2026-11-22T10:00:00Z", "type": ""}]),
            json!([{"timestamp": "2026-11-22T10:00:00Z", "type": "click", "item_id": 3}]),
            json!([{"timestamp": "2026-11-22T10:00:00Z", "type": "click", "item_id": ""}]),
            json!([{"timestamp": "2026-11-22T10:00:00Z", "type": "click", "description": []}]),
            json!(["click"]),
        ] {
            let error = parse(bad.clone()).unwrap_err();
            assert!(matches!(error, ApiError::Validation { .. }), "{bad}: {error:?}");
        }
    }
}
