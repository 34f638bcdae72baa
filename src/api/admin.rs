//! `/v1/admin/*`: create, list and revoke API keys, the node's statistics, and
//! retraining (admin scope).

use hyper::StatusCode;
use serde::Deserialize;

use serde_json::{json, Value};

use super::routes::Endpoint;
use super::{json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::admin::NewKey;
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
            let (key, secret) = state.services.create_key(new).await?;
            let mut view = key.view();
            view["key"] = Value::String(secret);
            Ok(json_response(StatusCode::CREATED, &view))
        }
        (Endpoint::AdminStats, _) => {
            let mut stats = state.services.stats();
            stats["requests"] = state.request_times.to_json();
            ok(&stats)
        }
        (Endpoint::AdminRetrain, _) => ok(&json!(state.services.retrain().await?)),
        (Endpoint::AdminKeys, _) => {
            let keys: Vec<Value> = state.services.list_keys().iter().map(|key| key.view()).collect();
            ok(&json!({ "keys": keys }))
        }
        (Endpoint::AdminKey, _) => {
            let id = &request.params[0];
            state.services.revoke_key(id).await?;
            state.limits.forget(id);
            ok(&json!({ "id": id, "revoked": true }))
        }
        _ => unreachable!("routes.rs sends only admin endpoints here"),
    }
}
