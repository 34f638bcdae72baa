//! The optional LLM of chat: an OpenAI-compatible `POST {llm_url}/chat/completions`
//! with `{model, messages}`, over plain http with hyper's client. It writes replies,
//! and reads constraints with structured output (`response_format` of type
//! `json_schema`). Any failure (connection, status, timeout, an answer without text
//! or not JSON) is an [`LlmError`]; the caller then uses the composed reply or the
//! rule extractor.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use crate::config::ChatConfig;
use crate::service::chat::{ReplyError, ReplyWriter};

/// Largest LLM answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("llm request failed: {0}")]
    Transport(String),
    #[error("llm answered {0}")]
    Status(u16),
    #[error("llm answer has no message text")]
    NoText,
    #[error("llm did not answer within {0} ms")]
    Timeout(u64),
    #[error("llm answer is not JSON: {0}")]
    NotJson(String),
}

/// A client of one configured endpoint.
pub struct LlmClient {
    client: Client<HttpConnector, Full<Bytes>>,
    endpoint: Uri,
    model: String,
    /// `Authorization: Bearer ...`, read once from the configured environment variable.
    authorization: Option<String>,
    timeout: Duration,
}

impl LlmClient {
    /// `None` when `llm_url` is empty. The URL is checked by config validation;
    /// a URL hyper cannot parse is reported here.
    pub fn from_config(config: &ChatConfig) -> anyhow::Result<Option<LlmClient>> {
        if config.llm_url.is_empty() {
            return Ok(None);
        }
        let endpoint: Uri = format!("{}/chat/completions", config.llm_url.trim_end_matches('/'))
            .parse()
            .map_err(|error| anyhow::anyhow!("chat.llm_url {:?}: {error}", config.llm_url))?;
        let authorization = match config.llm_api_key_env.as_str() {
            "" => None,
            name => std::env::var(name)
                .ok()
                .filter(|key| !key.is_empty())
                .map(|key| format!("Bearer {key}")),
        };
        let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        Ok(Some(LlmClient {
            client,
            endpoint,
            model: config.llm_model.clone(),
            authorization,
            timeout: Duration::from_millis(config.llm_timeout_ms),
        }))
    }

    /// The assistant's text for `system` + `user`, within the configured timeout.
    pub async fn reply(&self, system: &str, user: &str) -> Result<String, LlmError> {
        self.within_timeout(self.ask(system, user, None)).await
    }

    /// The assistant's JSON answer following `schema`, within the configured timeout.
    pub async fn structured(&self, system: &str, user: &str, schema: &Value) -> Result<Value, LlmError> {
        let text = self.within_timeout(self.ask(system, user, Some(schema))).await?;
        serde_json::from_str(&text).map_err(|error| LlmError::NotJson(error.to_string()))
    }

    async fn within_timeout<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, LlmError>>,
    ) -> Result<T, LlmError> {
        let timeout_ms = self.timeout.as_millis() as u64;
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| LlmError::Timeout(timeout_ms))?
    }

    async fn ask(&self, system: &str, user: &str, schema: Option<&Value>) -> Result<String, LlmError> {
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0.2,
        });
        if let Some(schema) = schema {
            body["temperature"] = json!(0);
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "constraints", "strict": true, "schema": schema},
            });
        }
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|error| LlmError::Transport(error.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|error| LlmError::Transport(error.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(LlmError::Status(status.as_u16()));
        }
        let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|error| LlmError::Transport(error.to_string()))?
            .to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).map_err(|_| LlmError::NoText)?;
        answer["choices"][0]["message"]["content"]
            .as_str()
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .ok_or(LlmError::NoText)
    }
}

impl ReplyWriter for LlmClient {
    fn reply<'a>(
        &'a self,
        system: &'a str,
        user: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, ReplyError>> {
        Box::pin(async move {
            LlmClient::reply(self, system, user)
                .await
                .map_err(|error| ReplyError(error.to_string()))
        })
    }

    fn structured<'a>(
        &'a self,
        system: &'a str,
        user: &'a str,
        schema: &'a Value,
    ) -> futures::future::BoxFuture<'a, Result<Value, ReplyError>> {
        Box::pin(async move {
            LlmClient::structured(self, system, user, schema)
                .await
                .map_err(|error| ReplyError(error.to_string()))
        })
    }
}
