//! Event ingestion in both formats, the stored log by id, and live-state snapshots.

use std::collections::BTreeMap;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

use super::error::row_failure;
use super::forward;
use super::routes::INTERNAL_EVENTS_PATH;
use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::domain::event::{decode_engagement, decode_v1, Event, InvalidEvent};
use crate::service::cluster::KeyHome;
use crate::topology::Node;

/// `POST /v1/events`: one event, `{"events": [...]}` or an array of events (202).
pub async fn post_events(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let events = match request.json_value()? {
        Value::Object(mut object) if object.contains_key("events") && !object.contains_key("type") => {
            match object.remove("events") {
                Some(Value::Array(events)) => events,
                _ => return Err(ApiError::validation("\"events\" must be an array of events")),
            }
        }
        event @ Value::Object(_) => vec![event],
        Value::Array(events) => events,
        _ => {
            return Err(ApiError::validation(
                "the body must be an event object, {\"events\": [...]} or an array of events",
            ))
        }
    };
    ingest(state, &request, events, |event, now| {
        decode_v1(event, now, new_event_id)
    })
    .await
}

/// `POST /catalog/engagement`: one engagement event, `{"events": [...]}` or an array
/// of them (202). SPEC "Errors": this endpoint's malformed bodies are 400s, not 422s.
pub async fn post_engagement(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let events = match request.json_value()? {
        Value::Array(events) if events.is_empty() => {
            return Err(ApiError::InvalidCombination("no events in the request".into()))
        }
        Value::Array(events) => events,
        Value::Object(mut object) if object.contains_key("events") && !object.contains_key("type") => {
            match object.remove("events") {
                Some(Value::Array(events)) if !events.is_empty() => events,
                _ => {
                    return Err(ApiError::InvalidCombination(
                        "\"events\" must be a non-empty array of engagement events".into(),
                    ))
                }
            }
        }
        event @ Value::Object(_) => vec![event],
        _ => {
            return Err(ApiError::InvalidCombination(
                "the body must be an engagement event or an array of them".into(),
            ))
        }
    };
    ingest(state, &request, events, |event, now| {
        decode_engagement(event, now, new_event_id)
    })
    .await
}

/// `GET /v1/events/{id}`: the id does not name the node that has the event: here
/// first, then the others.
pub async fn get_event(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let local = state
        .services
        .events
        .get_event(&request.params[0])
        .map_err(ApiError::from);
    forward::first_found(state, &request, local.and_then(|event| ok(&event.to_json()))).await
}

/// `GET /v1/sessions/{sid}`: on the node of the user that claimed the session, else
/// here first, then the others (the sid does not name the node that has it).
pub async fn session(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    if let Some(answer) = forward::to_claimant(state, &request, &request.params[0]).await {
        return answer;
    }
    let local = session_here(state, &request.params[0]).await;
    forward::first_found(state, &request, local).await
}

/// `GET /v1/users/{uid}/state`: the user's live state and profile.
pub async fn user_state(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let uid = request.params[0].clone();
    let (snapshot, profile) = state.services.events.user_snapshot(&uid).await?;
    let mut body = Map::from_iter([("uid".to_owned(), json!(uid))]);
    body.extend(snapshot);
    body.insert("profile".into(), Value::Object(profile));
    ok(&body)
}

/// A session's live state on this node.
async fn session_here(state: &AppState, sid: &str) -> Result<HttpResponse, ApiError> {
    let mut snapshot = state.services.events.session_snapshot(sid).await?;
    let uid = snapshot.remove("uid").unwrap_or(Value::Null);
    let mut body = Map::from_iter([("sid".to_owned(), json!(sid)), ("uid".to_owned(), uid)]);
    body.extend(snapshot);
    ok(&body)
}

fn new_event_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Decodes, then ingests what decoded (on this node, and on the nodes owning the
/// others' keys). 202 with accepted ids and per-index rejections; 400 when nothing was
/// accepted; 503 when nothing was accepted because a part of the system is down.
async fn ingest(
    state: &AppState,
    request: &ApiRequest,
    raw: Vec<Value>,
    decode: impl Fn(Value, i64) -> Result<Event, InvalidEvent>,
) -> Result<HttpResponse, ApiError> {
    if raw.is_empty() {
        return Err(ApiError::validation("no events in the request"));
    }
    let total = raw.len();
    let now = state.services.events.now_millis();
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
    let outcomes = ingest_where_owned(state, request, events).await?;
    let mut accepted_ids = Vec::with_capacity(ids.len());
    let mut duplicates = 0;
    let mut retryable = None;
    for ((index, id), outcome) in indexes.into_iter().zip(ids).zip(outcomes) {
        match outcome {
            Admission::Accepted { duplicate } => {
                duplicates += usize::from(duplicate);
                accepted_ids.push(id);
            }
            Admission::Failed(error) => {
                rejected.push(json!({ "index": index, "code": error.code(), "message": error.to_string() }));
                if is_retryable(error.status()) && retryable.is_none() {
                    retryable = Some(error);
                }
            }
            Admission::Refused(mut failure) => {
                let status = failure
                    .get("status")
                    .and_then(Value::as_u64)
                    .and_then(|status| StatusCode::from_u16(u16::try_from(status).ok()?).ok());
                if status.is_some_and(is_retryable) && retryable.is_none() {
                    retryable = Some(ApiError::Unavailable(
                        failure
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("unavailable")
                            .to_owned(),
                    ));
                }
                if let Some(object) = failure.as_object_mut() {
                    object.remove("status");
                    object.insert("index".into(), json!(index));
                }
                rejected.push(failure);
            }
        }
    }
    rejected.sort_by_key(|failure| failure["index"].as_u64());
    crate::metrics::events("rest", accepted_ids.len() - duplicates, duplicates, rejected.len());
    if accepted_ids.is_empty() {
        // Nothing taken, and something only for now (a shard moving, a deadline passed
        // under load): the whole request is to be retried, not corrected.
        if let Some(error) = retryable {
            return Err(error);
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

/// Whether a failure of this status passes by itself (the client retries as it was).
fn is_retryable(status: StatusCode) -> bool {
    matches!(status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::REQUEST_TIMEOUT)
}

/// What became of one event.
enum Admission {
    Accepted {
        duplicate: bool,
    },
    /// Refused here.
    Failed(ApiError),
    /// Refused by the owning node: its `{code, message, status}`.
    Refused(Value),
}

/// Ingests each event on the node owning its routing key: here, or (in a cluster)
/// forwarded in one batch per owner to [`ingest_internal`] there, all at once.
async fn ingest_where_owned(
    state: &AppState,
    request: &ApiRequest,
    events: Vec<Event>,
) -> Result<Vec<Admission>, ApiError> {
    let cluster = &state.services.cluster;
    if !cluster.is_multi_node() {
        return ingest_here(state, events).await;
    }
    let mut outcomes: Vec<Option<Admission>> = (0..events.len()).map(|_| None).collect();
    let mut local: (Vec<usize>, Vec<Event>) = Default::default();
    let mut remote: BTreeMap<String, (Node, Vec<usize>, Vec<Event>)> = BTreeMap::new();
    let until = forward::move_wait_until(request);
    for (index, event) in events.into_iter().enumerate() {
        match cluster.place(event.routing_key()) {
            // A shard this node is taking over in a move: wait for it (within the
            // deadline) before the event is produced.
            KeyHome::Local if !cluster.wait_serving(event.routing_key(), until).await => {
                outcomes[index] = Some(Admission::Failed(forward::moving(cluster)));
            }
            KeyHome::Local => {
                local.0.push(index);
                local.1.push(event);
            }
            KeyHome::Remote { node, .. } if forward::was_forwarded(request) => {
                outcomes[index] = Some(Admission::Failed(forward::unavailable(cluster, &node)));
            }
            KeyHome::Remote { node, .. } => {
                let entry = remote
                    .entry(node.id.clone())
                    .or_insert_with(|| (node, Vec::new(), Vec::new()));
                entry.1.push(index);
                entry.2.push(event);
            }
        }
    }
    let key = forward::presented_key(request);
    let sends = remote.into_values().map(|(node, indexes, events)| {
        let key = key.clone();
        async move {
            let body = Bytes::from(serde_json::to_vec(&events).expect("events serialize"));
            let answer = state
                .peers
                .send(
                    cluster,
                    &node,
                    Method::POST,
                    INTERNAL_EVENTS_PATH,
                    key.as_ref(),
                    body,
                    request.deadline,
                    None,
                )
                .await;
            let outcomes = match answer {
                Some((status, body)) if status == StatusCode::OK => parse_internal_results(&body, indexes.len()),
                Some((status, body)) => {
                    let failure: Value = serde_json::from_slice(&body)
                        .unwrap_or_else(|_| json!({"code": "unavailable", "message": "the owning node failed"}));
                    let mut failure = failure;
                    failure["status"] = json!(status.as_u16());
                    (0..indexes.len())
                        .map(|_| Admission::Refused(failure.clone()))
                        .collect()
                }
                None => (0..indexes.len())
                    .map(|_| Admission::Failed(forward::unavailable(cluster, &node)))
                    .collect(),
            };
            (indexes, outcomes)
        }
    });
    let here = async {
        if local.1.is_empty() {
            return (local.0, Vec::new());
        }
        let outcomes = match ingest_here(state, local.1).await {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let failure =
                    json!({"code": error.code(), "message": error.to_string(), "status": error.status().as_u16()});
                local.0.iter().map(|_| Admission::Refused(failure.clone())).collect()
            }
        };
        (local.0, outcomes)
    };
    let (here, there) = futures::join!(here, futures::future::join_all(sends));
    for (indexes, answers) in std::iter::once(here).chain(there) {
        for (index, outcome) in indexes.into_iter().zip(answers) {
            outcomes[index] = Some(outcome);
        }
    }
    Ok(outcomes
        .into_iter()
        .map(|outcome| {
            outcome.unwrap_or_else(|| Admission::Failed(ApiError::Internal("an event got no answer".into())))
        })
        .collect())
}

/// Ingests events owned here.
async fn ingest_here(state: &AppState, events: Vec<Event>) -> Result<Vec<Admission>, ApiError> {
    Ok(state
        .services
        .events
        .ingest_events(events)
        .await?
        .results
        .into_iter()
        .map(|result| match result {
            Ok(duplicate) => Admission::Accepted { duplicate },
            Err(error) => Admission::Failed(error.into()),
        })
        .collect())
}

/// `POST /v1/internal/events`: events in rankstream's own encoding that another node
/// accepted for shards of this one. 200 `{"results": [{"duplicate"} | {"code",
/// "message", "status"}]}`, one per event in order.
pub async fn ingest_internal(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let events: Vec<Event> = serde_json::from_slice(&request.body)
        .map_err(|error| ApiError::validation(format!("not a list of events: {error}")))?;
    let results: Vec<Value> = ingest_here(state, events)
        .await?
        .into_iter()
        .map(|outcome| match outcome {
            Admission::Accepted { duplicate } => json!({ "duplicate": duplicate }),
            Admission::Failed(error) => {
                json!({"code": error.code(), "message": error.to_string(), "status": error.status().as_u16()})
            }
            Admission::Refused(failure) => failure,
        })
        .collect();
    ok(&json!({ "results": results }))
}

/// `POST /v1/internal/sessions/claim {"sid", "uid"}`: another node claims a session of
/// this node's shards for a user it owns. 200 `{"state": <the session's state> | null}`.
pub async fn grant_claim(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    #[derive(serde::Deserialize)]
    struct Claim {
        sid: String,
        uid: String,
    }
    let claim: Claim = serde_json::from_slice(&request.body)
        .map_err(|error| ApiError::validation(format!("not a session claim {{\"sid\", \"uid\"}}: {error}")))?;
    if claim.sid.is_empty() || claim.uid.is_empty() {
        return Err(ApiError::validation("\"sid\" and \"uid\" must not be empty"));
    }
    let session = state
        .services
        .events
        .grant_session_claim(&claim.sid, &claim.uid)
        .await?;
    ok(&json!({ "state": session }))
}

/// The owner's answers to forwarded events; a garbled answer fails them all.
fn parse_internal_results(body: &[u8], count: usize) -> Vec<Admission> {
    let results = serde_json::from_slice::<Value>(body).ok().and_then(|mut answer| {
        match answer.get_mut("results").map(Value::take) {
            Some(Value::Array(results)) if results.len() == count => Some(results),
            _ => None,
        }
    });
    match results {
        Some(results) => results
            .into_iter()
            .map(|result| match result.get("duplicate").and_then(Value::as_bool) {
                Some(duplicate) => Admission::Accepted { duplicate },
                None => Admission::Refused(result),
            })
            .collect(),
        None => (0..count)
            .map(|_| Admission::Failed(ApiError::Internal("the owning node's answer was not understood".into())))
            .collect(),
    }
}
