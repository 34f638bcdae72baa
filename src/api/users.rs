//! User endpoints: the user table is a catalog table keyed by `uid`, stored on the
//! same shard actors as items.

use serde_json::{json, Value};

use super::error::row_failure;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};

/// `POST /v1/users`: one user object, `{"users": [...]}` or an array of users.
pub async fn put_users(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let services = &state.services;
    let users = match request.json_value()? {
        // Many users: `{"users": [...]}` or a bare array.
        Value::Array(users) => users,
        Value::Object(mut object) if object.contains_key("users") && !object.contains_key("uid") => {
            match object.remove("users") {
                Some(Value::Array(users)) => users,
                _ => return Err(ApiError::validation("\"users\" must be an array of user objects")),
            }
        }
        user @ Value::Object(_) => {
            let user = services
                .catalog
                .upsert_users(vec![user])
                .await?
                .pop()
                .expect("one result per row")?;
            return ok(&user);
        }
        _ => {
            return Err(ApiError::validation(
                "the body must be a user object, {\"users\": [...]} or an array of users",
            ))
        }
    };
    if users.is_empty() {
        return Err(ApiError::validation("no users in the request"));
    }
    let mut stored = Vec::new();
    let mut failed = Vec::new();
    for (index, result) in services.catalog.upsert_users(users).await?.into_iter().enumerate() {
        match result {
            Ok(user) => stored.push(Value::Object(user)),
            Err(error) => failed.push(row_failure(index, error)),
        }
    }
    // As for events: a bulk request none of whose rows was stored is a 400.
    if stored.is_empty() {
        return Err(ApiError::AllRejected {
            message: format!("all {} users were rejected", failed.len()),
            details: failed,
        });
    }
    ok(&json!({ "users": stored, "failed": failed }))
}

/// `GET /v1/users/{uid}`: the stored user object itself.
pub async fn get_user(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state.services.catalog.get_user(&request.params[0])?)
}

/// `PATCH /v1/users/{uid}`: merge the fields sent (null removes one).
pub async fn patch_user(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let patch = super::catalog::patch_body(&request)?;
    ok(&state.services.catalog.patch_user(&request.params[0], patch).await?)
}

/// `DELETE /v1/users/{uid}`: the user, their events and every trace of them.
pub async fn delete_user(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state.services.forget.delete_user(&request.params[0]).await?)
}
