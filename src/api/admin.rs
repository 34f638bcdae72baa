//! `/v1/admin/keys`: create, list and revoke API keys (admin scope).

use hyper::StatusCode;
use serde::Deserialize;
use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::routes::Endpoint;
use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::keys::NewKey;
use crate::time::parse_time_value;

/// Body of `POST /v1/admin/keys`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKeyBody {
    name: String,
    scopes: Vec<String>,
    /// RFC 3339 or unix seconds/milliseconds.
    expires_at: Option<Value>,
    rate_per_sec: Option<u32>,
    burst: Option<u32>,
}

/// Runs a key write (an fsync) off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ApiError::Internal(error.to_string()))
}

pub async fn handle(state: &AppState, endpoint: Endpoint, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    match (endpoint, request.method.as_str()) {
        (Endpoint::AdminKeys, "POST") => {
            let body: CreateKeyBody = request.json()?;
            let expires_at =
                match body.expires_at {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(parse_time_value(&value).ok_or_else(|| {
                        ApiError::validation("\"expires_at\" must be an RFC 3339 time or a unix number")
                    })?),
                };
            let new = NewKey {
                name: body.name,
                scopes: body.scopes,
                expires_at,
                rate_per_sec: body.rate_per_sec,
                burst: body.burst,
            };
            let keys = state.keys.clone();
            let (key, secret) = blocking(move || keys.create(new)).await??;
            let mut view = key.view();
            view["key"] = Value::String(secret);
            Ok(json_response(StatusCode::CREATED, &view))
        }
        (Endpoint::AdminStats, _) => {
            let stream = state.stream_stats.as_ref().map(|stats| stats.to_json());
            let trained = state.training.read();
            let models = json!({
                "events_learned": trained.events,
                "items": trained.items.len(),
                "ltr_examples": trained.ltr.examples(),
                "ltr_trained": trained.ltr.weights().is_some(),
            });
            drop(trained);
            let ranking = json!({
                "state_read_deadline_ms": state.ranking.state_deadline_ms,
                "state_read_timeouts": state.ranking.state_timeouts.load(Ordering::Relaxed),
                "state_read_errors": state.ranking.state_errors.load(Ordering::Relaxed),
            });
            let chat = state.chat.stats_json();
            let requests = state.request_times.to_json();
            ok(&json!({ "kafka": stream, "models": models, "ranking": ranking, "chat": chat, "requests": requests }))
        }
        (Endpoint::AdminRetrain, _) => {
            let report = state.training.retrain().await.map_err(ApiError::Unavailable)?;
            ok(&json!(report))
        }
        (Endpoint::AdminKeys, _) => {
            let keys: Vec<Value> = state.keys.list().iter().map(|key| key.view()).collect();
            ok(&json!({ "keys": keys }))
        }
        (Endpoint::AdminKey, _) => {
            let id = &request.params[0];
            let (keys, owned) = (state.keys.clone(), id.clone());
            if !blocking(move || keys.revoke(&owned)).await?? {
                return Err(ApiError::NotFound(format!("API key {id:?} not found")));
            }
            state.limits.forget(id);
            ok(&json!({ "id": id, "revoked": true }))
        }
        _ => unreachable!("routes.rs sends only admin endpoints here"),
    }
}
