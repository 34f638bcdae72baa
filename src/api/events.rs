//! Event ingestion in both formats, the stored log by id, and live-state snapshots.

use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::error::row_failure;
use super::routes::Endpoint;
use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::domain::event::{decode_engagement, decode_v1, Event, InvalidEvent};

pub async fn handle(state: &AppState, endpoint: Endpoint, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    match endpoint {
        Endpoint::Events => {
            let events = match request.json_value()? {
                Value::Object(mut object) if object.contains_key("events") && !object.contains_key("type") => {
                    match object.remove("events") {
                        Some(Value::Array(events)) => events,
                        _ => return Err(ApiError::validation("\"events\" must be an array of events")),
                    }
                }
                event @ Value::Object(_) => vec![event],
                _ => {
                    return Err(ApiError::validation(
                        "the body must be an event object or {\"events\": [...]}",
                    ))
                }
            };
            ingest(state, events, |event, now| decode_v1(event, now, new_event_id)).await
        }
        Endpoint::Engagement => {
            let events = match request.json_value()? {
                Value::Array(events) => events,
                event @ Value::Object(_) => vec![event],
                _ => {
                    return Err(ApiError::validation(
                        "the body must be an engagement event or an array of them",
                    ))
                }
            };
            ingest(state, events, |event, now| decode_engagement(event, now, new_event_id)).await
        }
        Endpoint::Event => ok(&state.services.get_event(&request.params[0])?.to_json()),
        Endpoint::Session => {
            let sid = request.params[0].clone();
            let mut snapshot = state.services.session_snapshot(&sid).await?;
            let uid = snapshot.remove("uid").unwrap_or(Value::Null);
            let mut body = Map::from_iter([("sid".to_owned(), json!(sid)), ("uid".to_owned(), uid)]);
            body.extend(snapshot);
            ok(&body)
        }
        Endpoint::UserState => {
            let uid = request.params[0].clone();
            let (snapshot, profile) = state.services.user_snapshot(&uid).await?;
            let mut body = Map::from_iter([("uid".to_owned(), json!(uid))]);
            body.extend(snapshot);
            body.insert("profile".into(), Value::Object(profile));
            ok(&body)
        }
        _ => unreachable!("routes.rs sends only event endpoints here"),
    }
}

fn new_event_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Decodes, then ingests what decoded. 202 with accepted ids and per-index
/// rejections; 400 when nothing was accepted.
async fn ingest(
    state: &AppState,
    raw: Vec<Value>,
    decode: impl Fn(Value, i64) -> Result<Event, InvalidEvent>,
) -> Result<HttpResponse, ApiError> {
    if raw.is_empty() {
        return Err(ApiError::validation("no events in the request"));
    }
    let total = raw.len();
    let now = state.services.now_millis();
    let mut rejected = Vec::new();
    let mut indexes = Vec::with_capacity(total);
    let mut events = Vec::with_capacity(total);
    for (index, value) in raw.into_iter().enumerate() {
        match decode(value, now) {
            Ok(event) => {
                indexes.push(index);
                events.push(event);
            }
            Err(invalid) => rejected.push(row_failure(index, ApiError::validation(invalid.0))),
        }
    }
    let ids: Vec<String> = events.iter().map(|event| event.id.clone()).collect();
    let results = state.services.ingest_events(events).await?.results;
    let mut accepted_ids = Vec::with_capacity(ids.len());
    let mut duplicates = 0;
    let mut unavailable = None;
    for ((index, id), result) in indexes.into_iter().zip(ids).zip(results) {
        match result {
            Ok(duplicate) => {
                duplicates += usize::from(duplicate);
                accepted_ids.push(id);
            }
            Err(error) => {
                let error = ApiError::from(error);
                if matches!(error, ApiError::Unavailable(_)) {
                    unavailable = Some(error.to_string());
                }
                rejected.push(row_failure(index, error));
            }
        }
    }
    rejected.sort_by_key(|failure| failure["index"].as_u64());
    if accepted_ids.is_empty() {
        if let Some(message) = unavailable {
            return Err(ApiError::Unavailable(message));
        }
        let message = format!("all {total} events were rejected");
        return Err(ApiError::AllRejected {
            message,
            details: rejected,
        });
    }
    let body =
        json!({ "accepted": accepted_ids.len(), "ids": accepted_ids, "duplicates": duplicates, "rejected": rejected });
    Ok(json_response(StatusCode::ACCEPTED, &body))
}
