//! The errors of the service layer: what a use case answers when it cannot do
//! what was asked. The HTTP frontend maps each to a status in one place
//! (`api::error`); the CLI and the tools report them as they are.

use crate::api_keys::KeyError;
use crate::embed::EmbedError;
use crate::engine::catalog::CatalogError;
use crate::engine::conversation::ConversationError;
use crate::engine::{DeleteUserError, LiveStateError};
use crate::experiments::ExperimentError;
use crate::ranking::ModelError;
use crate::search::SearchError;
use crate::training::TrainingError;

/// Every way a use case can fail.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A value breaks a rule of the request or the catalog (422 `validation_error`).
    #[error("{0}")]
    Invalid(String),
    /// Parameters that do not go together, or a model's refusal (400 `validation_error`).
    #[error("{0}")]
    InvalidCombination(String),
    /// A custom field got a value of another type than the one it has (422 `type_mismatch`).
    #[error("{0}")]
    TypeMismatch(String),
    /// An image larger than the node decodes (422 `image_too_large`).
    #[error("{0}")]
    ImageTooLarge(String),
    /// The thing asked for does not exist (404); the text names it.
    #[error("{0} not found")]
    NotFound(String),
    /// The request conflicts with what is stored (409).
    #[error("{0}")]
    Conflict(String),
    /// `model_id` names no configured model (422 `unknown_model`).
    #[error("no model {0:?} is configured")]
    UnknownModel(String),
    /// A model is rate limited (429 with `Retry-After`).
    #[error("model rate limited; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// A part of the node cannot serve now (503): a stopped actor, a full queue, Kafka.
    #[error("{0}")]
    Unavailable(String),
    /// Storage failed to read or write (500 `storage_error`): nothing was claimed done.
    #[error("storage error: {0}")]
    Storage(String),
    /// A bug or an unexpected failure (500 `internal`).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<CatalogError> for ServiceError {
    fn from(error: CatalogError) -> ServiceError {
        match error {
            CatalogError::Invalid(message) => ServiceError::Invalid(message),
            error @ CatalogError::TypeMismatch { .. } => ServiceError::TypeMismatch(error.to_string()),
            CatalogError::NotFound(what) => ServiceError::NotFound(what),
            CatalogError::Unavailable(message) => ServiceError::Unavailable(message),
            CatalogError::Storage(error) => ServiceError::Storage(error.to_string()),
        }
    }
}

impl From<LiveStateError> for ServiceError {
    fn from(error: LiveStateError) -> ServiceError {
        match error {
            LiveStateError::NotFound(what) => ServiceError::NotFound(what),
            LiveStateError::Unavailable(message) => ServiceError::Unavailable(message),
            LiveStateError::Storage(error) => ServiceError::Storage(error.to_string()),
        }
    }
}

impl From<DeleteUserError> for ServiceError {
    fn from(error: DeleteUserError) -> ServiceError {
        match error {
            DeleteUserError::Catalog(error) => error.into(),
            DeleteUserError::LiveState(error) => error.into(),
        }
    }
}

impl From<ModelError> for ServiceError {
    fn from(error: ModelError) -> ServiceError {
        match error {
            ModelError::Refused(message) => ServiceError::InvalidCombination(message),
            ModelError::RateLimited { retry_after_secs } => ServiceError::RateLimited { retry_after_secs },
            ModelError::Unavailable(message) => ServiceError::Unavailable(message),
        }
    }
}

impl From<SearchError> for ServiceError {
    fn from(error: SearchError) -> ServiceError {
        ServiceError::Internal(error.to_string())
    }
}

impl From<EmbedError> for ServiceError {
    fn from(error: EmbedError) -> ServiceError {
        match error {
            EmbedError::Invalid(message) => ServiceError::Invalid(message),
            EmbedError::TooLarge(message) => ServiceError::ImageTooLarge(message),
            error @ EmbedError::Model(_) => ServiceError::Internal(error.to_string()),
        }
    }
}

impl From<KeyError> for ServiceError {
    fn from(error: KeyError) -> ServiceError {
        match error {
            KeyError::Invalid(message) => ServiceError::Invalid(message),
            KeyError::Storage(error) => ServiceError::Storage(error.to_string()),
        }
    }
}

impl From<ExperimentError> for ServiceError {
    fn from(error: ExperimentError) -> ServiceError {
        match error {
            error @ ExperimentError::Invalid(_) => ServiceError::Invalid(error.to_string()),
            ExperimentError::Conflict(message) => ServiceError::Conflict(message),
            error @ ExperimentError::NotFound(_) => ServiceError::NotFound(error.to_string()),
            ExperimentError::Storage(error) => ServiceError::Storage(error.to_string()),
        }
    }
}

impl From<ConversationError> for ServiceError {
    fn from(error: ConversationError) -> ServiceError {
        match error {
            ConversationError::Storage(error) => ServiceError::Storage(error.to_string()),
            ConversationError::Unavailable(message) => ServiceError::Unavailable(message),
        }
    }
}

impl From<TrainingError> for ServiceError {
    fn from(error: TrainingError) -> ServiceError {
        match error {
            TrainingError::Storage(message) => ServiceError::Storage(message),
            TrainingError::Stopped | TrainingError::Frozen => ServiceError::Unavailable(error.to_string()),
        }
    }
}
