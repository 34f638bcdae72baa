//! `POST /chat`: decodes a [`ChatRequest`], runs one turn with
//! [`ChatService::chat_turn`] and answers `{conversation_id, message, items}`. The
//! optional LLM that writes replies is an HTTP client, so it lives here too
//! ([`llm::LlmClient`]) and is handed to the chat service as its `ReplyWriter`.
//!
//! [`ChatService::chat_turn`]: crate::service::chat::ChatService::chat_turn

mod llm;

use serde_json::{Map, Value};

use super::embedded_events::embedded_events;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::config::ChatConfig;
use crate::service::chat::{ChatRequest, DEFAULT_LIMIT, MAX_LIMIT};
pub use llm::LlmClient;

/// Longest `conversation_id`, in bytes.
const MAX_CONVERSATION_ID_BYTES: usize = 256;

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let request = parse(&request, state.services.chat.config())?;
    ok(&state.services.chat.chat_turn(request).await?)
}

fn optional_id(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if id.is_empty() => Err(ApiError::validation(format!("\"{field}\" must not be empty"))),
        Some(Value::String(id)) if id.len() > MAX_CONVERSATION_ID_BYTES => Err(ApiError::validation(format!(
            "\"{field}\" is longer than {MAX_CONVERSATION_ID_BYTES} bytes"
        ))),
        Some(Value::String(id)) if id.chars().any(char::is_control) => Err(ApiError::validation(format!(
            "\"{field}\" must not contain control characters"
        ))),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(_) => Err(ApiError::validation(format!("\"{field}\" must be a string"))),
    }
}

fn parse(request: &ApiRequest, config: &ChatConfig) -> Result<ChatRequest, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let message = match body.get("message") {
        None | Some(Value::Null) => return Err(ApiError::validation("\"message\" is required")),
        Some(Value::String(message)) if message.trim().is_empty() => {
            return Err(ApiError::validation("\"message\" must not be empty"))
        }
        Some(Value::String(message)) if message.len() > config.max_message_bytes => {
            return Err(ApiError::validation(format!(
                "\"message\" is longer than {} bytes",
                config.max_message_bytes
            )))
        }
        Some(Value::String(message)) => message.clone(),
        Some(_) => return Err(ApiError::validation("\"message\" must be a string")),
    };
    let limit = match body.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(value) => match crate::domain::whole_number(value) {
            Some(limit) if (1..=MAX_LIMIT as u64).contains(&limit) => limit as usize,
            _ => {
                return Err(ApiError::validation(format!(
                    "\"limit\" must be an integer from 1 to {MAX_LIMIT}"
                )))
            }
        },
    };
    Ok(ChatRequest {
        message,
        conversation_id: optional_id(&body, "conversation_id")?,
        session_id: optional_id(&body, "session_id")?,
        user_id: optional_id(&body, "user_id")?,
        events: embedded_events(&body)?,
        limit,
    })
}
