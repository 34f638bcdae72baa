//! Event ingestion in both formats, the stored log by id, and live-state snapshots.

use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::error::row_failure;
use super::routes::Endpoint;
use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::engine::catalog::CatalogError;
use crate::engine::event::{decode_engagement, decode_v1, Event, InvalidEvent};
use crate::engine::StateKey;

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
        Endpoint::Event => ok(&state.engine.get_event(&request.params[0])?.to_json()),
        Endpoint::Session => {
            let sid = request.params[0].clone();
            let mut snapshot = snapshot(state, StateKey::Session(sid.clone()))
                .await?
                .ok_or_else(|| ApiError::NotFound(format!("session {sid:?} not found")))?;
            let uid = snapshot.remove("uid").unwrap_or(Value::Null);
            let mut body = Map::from_iter([("sid".to_owned(), json!(sid)), ("uid".to_owned(), uid)]);
            body.extend(snapshot);
            ok(&body)
        }
        Endpoint::UserState => {
            let uid = request.params[0].clone();
            let profile = match state.engine.get_user(&uid) {
                Ok(mut row) => {
                    for reserved in ["uid", "_table", "created_at", "updated_at", "is_deleted"] {
                        row.remove(reserved);
                    }
                    Some(row)
                }
                Err(CatalogError::NotFound(_)) => None,
                Err(error) => return Err(error.into()),
            };
            let snapshot = snapshot(state, StateKey::User(uid.clone())).await?;
            if snapshot.is_none() && profile.is_none() {
                return Err(ApiError::NotFound(format!("user {uid:?} not found")));
            }
            let mut body = Map::from_iter([("uid".to_owned(), json!(uid))]);
            body.extend(snapshot.unwrap_or_else(|| empty_user_snapshot(state)));
            body.insert("profile".into(), Value::Object(profile.unwrap_or_default()));
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
    let now = state.engine.now_millis();
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
    if let Some(producer) = &state.producer {
        producer
            .produce(&events)
            .await
            .map_err(|error| ApiError::Unavailable(format!("event stream: {error}")))?;
    }
    let results = state.engine.ingest(events).await;
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

/// A state snapshot as JSON fields, or `None` when the key has no state.
async fn snapshot(state: &AppState, key: StateKey) -> Result<Option<Map<String, Value>>, ApiError> {
    let params = state.engine.decay(&key);
    let is_user = matches!(key, StateKey::User(_));
    let Some((live_state, live)) = state.engine.read_state(key).await? else {
        return Ok(None);
    };
    let mut fields = live_state.snapshot(state.engine.now_millis(), params, live);
    if is_user {
        fields.insert("purchased".into(), json!(live_state.purchased));
        fields.insert("sessions".into(), json!(live_state.sessions));
    } else {
        fields.insert("uid".into(), json!(live_state.uid));
    }
    Ok(Some(fields))
}

/// The snapshot of a user known only by their stored row.
fn empty_user_snapshot(state: &AppState) -> Map<String, Value> {
    let params = state.engine.decay(&StateKey::User(String::new()));
    let mut fields = crate::engine::live_state::LiveState::default().snapshot(state.engine.now_millis(), params, false);
    fields.insert("purchased".into(), json!([]));
    fields.insert("sessions".into(), json!([]));
    fields
}
