//! The one place where errors become HTTP statuses and `{code, message}` bodies
//! (DESIGN.md §7).

use hyper::header::{HeaderValue, ALLOW, RETRY_AFTER};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use super::{json_response, HttpResponse};
use crate::service::ServiceError;

/// Seconds a 503 `unavailable` asks the client to wait before retrying.
const UNAVAILABLE_RETRY_AFTER_S: u64 = 1;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON (400).
    #[error("request body is not valid JSON: {0}")]
    MalformedJson(String),
    /// An invalid combination of parameters, or a body of the wrong shape where the
    /// SPEC says 400 (`/catalog/engagement`) (400 `validation_error`).
    #[error("{0}")]
    InvalidCombination(String),
    /// Every item of a bulk request was refused (400 `validation_error`, each in `details`).
    #[error("{message}")]
    AllRejected { message: String, details: Vec<Value> },
    /// A missing required field, a wrong type or a bad format (422 `validation_error`).
    #[error("{message}")]
    Validation { message: String, details: Vec<Value> },
    /// A custom field got a value of another type (422 `type_mismatch`).
    #[error("{0}")]
    TypeMismatch(String),
    /// An image larger than the node decodes (422 `image_too_large`).
    #[error("{0}")]
    ImageTooLarge(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("this key lacks the {0:?} scope")]
    Forbidden(&'static str),
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with what is stored (409 `conflict`).
    #[error("{0}")]
    Conflict(String),
    #[error("{method} is not allowed here")]
    MethodNotAllowed { method: Method, allowed: Vec<Method> },
    #[error("the request did not complete within {0} ms")]
    Timeout(u64),
    #[error("request body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    /// `model_id` names no configured model (422 `unknown_model`).
    #[error("{0}")]
    UnknownModel(String),
    #[error("rate quota exceeded; retry after {0} s")]
    RateLimited(u64),
    #[error("{0}")]
    Unavailable(String),
    /// The node owning the key's shard cannot be reached (503 with `Retry-After`).
    #[error("{message}")]
    ShardUnavailable { message: String, retry_after_s: u64 },
    /// Storage failed; nothing was claimed done (500 `storage_error`).
    #[error("{0}")]
    Storage(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 422 `validation_error` without details.
    pub fn validation(message: impl Into<String>) -> ApiError {
        ApiError::Validation {
            message: message.into(),
            details: Vec::new(),
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::MalformedJson(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            // Every row refused because the node could not store it (a full disk, a
            // stopped part) is not the client's fault: 503 with `Retry-After`, like one row.
            ApiError::AllRejected { details, .. } if all_unavailable(details) => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            ApiError::InvalidCombination(_) | ApiError::AllRejected { .. } => {
                (StatusCode::BAD_REQUEST, "validation_error")
            }
            ApiError::Validation { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"),
            ApiError::TypeMismatch(_) => (StatusCode::UNPROCESSABLE_ENTITY, "type_mismatch"),
            ApiError::ImageTooLarge(_) => (StatusCode::UNPROCESSABLE_ENTITY, "image_too_large"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::MethodNotAllowed { .. } => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, "timeout"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::UnknownModel(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unknown_model"),
            ApiError::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::ShardUnavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, "shard_unavailable"),
            ApiError::Storage(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage_error"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The HTTP status of the error.
    pub fn status(&self) -> StatusCode {
        self.status_and_code().0
    }

    /// The `code` of the body, also used for per-row failures in bulk responses.
    pub fn code(&self) -> &'static str {
        self.status_and_code().1
    }

    pub fn into_response(self) -> HttpResponse {
        let (status, code) = self.status_and_code();
        if status.is_server_error() {
            tracing::error!(code, error = %self, "request failed");
        }
        let mut body = json!({ "code": code, "message": self.to_string() });
        if let ApiError::Validation { details, .. } | ApiError::AllRejected { details, .. } = &self {
            if !details.is_empty() {
                body["details"] = Value::Array(details.clone());
            }
        }
        let mut response = json_response(status, &body);
        let headers = response.headers_mut();
        match &self {
            ApiError::RateLimited(seconds)
            | ApiError::ShardUnavailable {
                retry_after_s: seconds, ..
            } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(*seconds));
            }
            // A node part that cannot serve now (a full queue, the broker, a full disk) is worth a retry.
            ApiError::Unavailable(_) | ApiError::AllRejected { .. } if status == StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_AFTER_S));
            }
            ApiError::MethodNotAllowed { allowed, .. } => {
                let list = allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
                headers.insert(
                    ALLOW,
                    HeaderValue::from_str(&list).expect("method names are valid header text"),
                );
            }
            _ => {}
        }
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> ApiError {
        match error {
            ServiceError::Invalid(message) => ApiError::validation(message),
            ServiceError::InvalidCombination(message) => ApiError::InvalidCombination(message),
            error @ ServiceError::TypeMismatch(_) => ApiError::TypeMismatch(error.to_string()),
            ServiceError::ImageTooLarge(message) => ApiError::ImageTooLarge(message),
            error @ ServiceError::NotFound(_) => ApiError::NotFound(error.to_string()),
            ServiceError::Conflict(message) => ApiError::Conflict(message),
            error @ ServiceError::UnknownModel(_) => ApiError::UnknownModel(error.to_string()),
            ServiceError::RateLimited { retry_after_secs } => ApiError::RateLimited(retry_after_secs),
            ServiceError::Unavailable(message) => ApiError::Unavailable(message),
            error @ ServiceError::Storage(_) => ApiError::Storage(error.to_string()),
            ServiceError::Internal(message) => ApiError::Internal(message),
        }
    }
}

/// Whether every per-row failure of a bulk request is a 503 `unavailable` one.
fn all_unavailable(details: &[Value]) -> bool {
    !details.is_empty() && details.iter().all(|row| row["code"] == "unavailable")
}

/// A per-row failure in a bulk response: `{index, code, message}`.
pub fn row_failure(index: usize, error: impl Into<ApiError>) -> Value {
    let error = error.into();
    json!({ "index": index, "code": error.code(), "message": error.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_rejected(details: Vec<Value>) -> ApiError {
        ApiError::AllRejected {
            message: format!("all {} items were rejected", details.len()),
            details,
        }
    }

    #[test]
    fn a_bulk_request_refused_only_for_want_of_storage_is_a_503_with_retry_after() {
        let full = || ApiError::Unavailable("write failed: rocksdb: IO error: No space left on device".into());
        let response = all_rejected(vec![row_failure(0, full()), row_failure(1, full())]).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");

        let mixed = all_rejected(vec![
            row_failure(0, full()),
            row_failure(1, ApiError::validation("no id")),
        ]);
        assert_eq!(
            (mixed.status(), mixed.code()),
            (StatusCode::BAD_REQUEST, "validation_error")
        );
        let response = mixed.into_response();
        assert!(!response.headers().contains_key(RETRY_AFTER));
    }
}
