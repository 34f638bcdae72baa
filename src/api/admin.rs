//! `/v1/admin/*`: create, list and revoke API keys, the node's statistics,
//! retraining, and purging deleted users' records (admin scope).

use hyper::StatusCode;
use serde::Deserialize;

use serde_json::{json, Value};

use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::domain::api_key::NewKey;
use crate::timestamp::parse_time_value;

/// Body of `POST /v1/admin/keys`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateKeyBody {
    name: String,
    scopes: Vec<String>,
    /// RFC 3339 or unix seconds/milliseconds.
    #[schema(value_type = Option<Object>)]
    expires_at: Option<Value>,
    /// Requests per second (>= 1); the server's default when absent.
    #[serde(default, deserialize_with = "optional_whole_u32")]
    #[schema(minimum = 1)]
    rate_per_sec: Option<u32>,
    /// Requests in a burst (>= 1).
    #[serde(default, deserialize_with = "optional_whole_u32")]
    #[schema(minimum = 1)]
    burst: Option<u32>,
}

/// Body of `POST /v1/admin/compact` (optional).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompactBody {
    /// Compact every shard's key ranges, not only those that held deleted users.
    #[serde(default)]
    all: bool,
}

/// An optional `u32` that may be written as a whole float (`5.0`).
fn optional_whole_u32<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => crate::domain::whole_number(&value)
            .and_then(|number| u32::try_from(number).ok())
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("expected an integer from 0 to 4294967295")),
    }
}

/// `POST /v1/admin/keys`: a new key, its secret shown only here (201).
pub async fn create_key(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body: CreateKeyBody = request.json()?;
    let expires_at = match body.expires_at {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            parse_time_value(&value)
                .ok_or_else(|| ApiError::validation("\"expires_at\" must be an RFC 3339 time or a unix number"))?,
        ),
    };
    let new = NewKey {
        name: body.name,
        scopes: body.scopes,
        expires_at,
        rate_per_sec: body.rate_per_sec,
        burst: body.burst,
    };
    let (key, secret) = state.services.admin.create_key(new).await?;
    let mut view = key.view();
    view["key"] = Value::String(secret);
    Ok(json_response(StatusCode::CREATED, &view))
}

/// `GET /v1/admin/keys`: every key, without secrets.
pub async fn list_keys(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let keys: Vec<Value> = state.services.admin.list_keys().iter().map(|key| key.view()).collect();
    ok(&json!({ "keys": keys }))
}

/// `DELETE /v1/admin/keys/{id}`.
pub async fn revoke_key(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let id = &request.params[0];
    state.services.admin.revoke_key(id).await?;
    state.limits.forget(id);
    ok(&json!({ "id": id, "revoked": true }))
}

/// `GET /v1/admin/stats`: the node's statistics, with the frontend's own.
pub async fn stats(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let mut stats = state.services.admin.stats();
    stats["requests"] = state.request_times.to_json();
    stats["auth"] = state.failed_auth.to_json();
    ok(&stats)
}

/// `POST /v1/admin/models/retrain`.
pub async fn retrain(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&json!(state.services.admin.retrain().await?))
}

/// `POST /v1/admin/compact`, with an optional body.
pub async fn compact(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body: CompactBody = match request.body.iter().all(u8::is_ascii_whitespace) {
        true => CompactBody::default(),
        false => request.json()?,
    };
    ok(&state.services.forget.compact(body.all).await?)
}

/// `POST /v1/admin/backup`: always into `storage.backup_dir` (a request never chooses
/// where the node writes).
pub async fn backup(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state.services.backups.backup().await?)
}

/// `GET /v1/admin/backup`.
pub async fn backup_status(state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state.services.backups.backup_status()?)
}
