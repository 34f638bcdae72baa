//! Authentication (`Authorization: Bearer` or legacy `X-API-Key`), scopes, and the
//! per-key rate quota (a token bucket per key, from `governor`).

use std::num::NonZeroU32;
use std::sync::Arc;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;

use super::ApiError;
use crate::config::AuthConfig;
use crate::service::admin::{ApiKey, AuthFailure};
use crate::service::Services;

/// Finds the key a request presents and checks it may use `scope`.
pub fn authorize(services: &Services, headers: &HeaderMap, scope: &'static str) -> Result<Arc<ApiKey>, ApiError> {
    let key = identify(services, headers)?;
    if !key.allows(scope) {
        return Err(ApiError::Forbidden(scope));
    }
    Ok(key)
}

/// The valid key a request presents, whatever its scopes (401 without one).
pub fn identify(services: &Services, headers: &HeaderMap) -> Result<Arc<ApiKey>, ApiError> {
    let secret = presented_secret(headers)?;
    services.authenticate(secret).map_err(|failure| match failure {
        AuthFailure::Unknown => ApiError::Unauthorized("unknown API key"),
        AuthFailure::Expired => ApiError::Unauthorized("API key expired"),
    })
}

fn presented_secret(headers: &HeaderMap) -> Result<&str, ApiError> {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let text = value
            .to_str()
            .map_err(|_| ApiError::Unauthorized("malformed Authorization header"))?;
        let (scheme, secret) = text
            .split_once(' ')
            .ok_or(ApiError::Unauthorized("Authorization must be \"Bearer <key>\""))?;
        if !scheme.eq_ignore_ascii_case("bearer") || secret.trim().is_empty() {
            return Err(ApiError::Unauthorized("Authorization must be \"Bearer <key>\""));
        }
        return Ok(secret.trim());
    }
    match headers.get("x-api-key") {
        Some(value) => value
            .to_str()
            .map(str::trim)
            .map_err(|_| ApiError::Unauthorized("malformed X-API-Key header")),
        None => Err(ApiError::Unauthorized(
            "missing API key: send Authorization: Bearer <key> or X-API-Key",
        )),
    }
}

/// One token bucket per key id.
pub struct RateLimits {
    limiters: DashMap<String, Arc<DefaultDirectRateLimiter>>,
    defaults: AuthConfig,
}

impl RateLimits {
    pub fn new(defaults: AuthConfig) -> RateLimits {
        RateLimits {
            limiters: DashMap::new(),
            defaults,
        }
    }

    /// Takes one token from the key's bucket, or says how long to wait.
    pub fn check(&self, key: &ApiKey) -> Result<(), ApiError> {
        let limiter = self
            .limiters
            .entry(key.id.clone())
            .or_insert_with(|| {
                let rate = key.rate_per_sec.unwrap_or(self.defaults.default_rate_per_sec);
                let burst = key.burst.unwrap_or(self.defaults.default_burst);
                let quota = Quota::per_second(NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN))
                    .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
                Arc::new(RateLimiter::direct(quota))
            })
            .clone();
        limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            // Retry-After is in whole seconds; never tell a client to retry at once.
            ApiError::RateLimited(wait.as_secs_f64().ceil().max(1.0) as u64)
        })
    }

    /// Forgets a key's bucket (after revocation).
    pub fn forget(&self, key_id: &str) {
        self.limiters.remove(key_id);
    }
}
