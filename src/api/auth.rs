//! Authentication (`Authorization: Bearer` or legacy `X-API-Key`), scopes, the
//! per-key rate quota (a token bucket per key, from `governor`), and the throttling
//! of client addresses that present keys that are not valid.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use serde_json::{json, Value};

use super::{ApiError, AppState};
use crate::config::AuthConfig;
use crate::domain::api_key::{ApiKey, AuthFailure};

/// Finds the key a request presents and checks it may use `scope`.
pub fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    client: IpAddr,
    scope: &'static str,
) -> Result<Arc<ApiKey>, ApiError> {
    let key = identify(state, headers, client)?;
    if !key.allows(scope) {
        return Err(ApiError::Forbidden(scope));
    }
    Ok(key)
}

/// The valid key a request presents, whatever its scopes: 401 without one, 429 once
/// the client's address presented too many keys that are not valid.
pub fn identify(state: &AppState, headers: &HeaderMap, client: IpAddr) -> Result<Arc<ApiKey>, ApiError> {
    let presented = match presented_secret(headers) {
        // Nothing to guess with: no key is not a failed attempt.
        Err(Missing) => return Err(ApiError::Unauthorized(MISSING_KEY)),
        Ok(presented) => presented,
    };
    state.failed_auth.admit(client)?;
    let refused = match presented {
        Err(malformed) => malformed,
        Ok(secret) => match state.services.admin.authenticate(secret) {
            Ok(key) => return Ok(key),
            Err(AuthFailure::Unknown) => ApiError::Unauthorized("unknown API key"),
            Err(AuthFailure::Expired) => ApiError::Unauthorized("API key expired"),
        },
    };
    state.failed_auth.failed(client)?;
    Err(refused)
}

const MISSING_KEY: &str = "missing API key: send Authorization: Bearer <key> or X-API-Key";

/// A request that presents no key at all.
struct Missing;

/// The secret a request presents: `Err(Missing)` without one, `Ok(Err(..))` for a
/// header that is not a well-formed key.
fn presented_secret(headers: &HeaderMap) -> Result<Result<&str, ApiError>, Missing> {
    if headers.get(AUTHORIZATION).is_none() && headers.get("x-api-key").is_none() {
        return Err(Missing);
    }
    Ok(parse_secret(headers))
}

fn parse_secret(headers: &HeaderMap) -> Result<&str, ApiError> {
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
        None => Err(ApiError::Unauthorized(MISSING_KEY)),
    }
}

/// Keys that were not valid, per client address: a token bucket of
/// `auth.failures_per_minute` per address; an address whose bucket is empty is
/// refused (429) on every request with a key, valid or not, until it refills, so
/// guessing stays at that rate. Counted in `/v1/admin/stats` (`auth`).
pub struct FailedAuth {
    buckets: DefaultKeyedRateLimiter<IpAddr>,
    /// Addresses refused until then.
    blocked: DashMap<IpAddr, Instant>,
    failures: AtomicU64,
    throttled: AtomicU64,
}

impl FailedAuth {
    pub fn new(per_minute: u32) -> FailedAuth {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        FailedAuth {
            buckets: RateLimiter::keyed(Quota::per_minute(per_minute)),
            blocked: DashMap::new(),
            failures: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }
    }

    /// Refuses an address that is blocked now.
    fn admit(&self, client: IpAddr) -> Result<(), ApiError> {
        let Some(until) = self.blocked.get(&client).map(|until| *until) else {
            return Ok(());
        };
        let now = Instant::now();
        if until <= now {
            self.blocked.remove_if(&client, |_, until| *until <= now);
            return Ok(());
        }
        self.throttled.fetch_add(1, Ordering::Relaxed);
        Err(ApiError::RateLimited(whole_seconds(until - now)))
    }

    /// Counts a refused key; the one past the address's quota blocks it (429).
    fn failed(&self, client: IpAddr) -> Result<(), ApiError> {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures % 4096 == 0 {
            self.buckets.retain_recent();
            let now = Instant::now();
            self.blocked.retain(|_, until| *until > now);
        }
        let Err(not_until) = self.buckets.check_key(&client) else {
            return Ok(());
        };
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        self.blocked.insert(client, Instant::now() + wait);
        self.throttled.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%client, "too many requests with keys that are not valid; throttled");
        Err(ApiError::RateLimited(whole_seconds(wait)))
    }

    pub fn to_json(&self) -> Value {
        json!({
            "failures": self.failures.load(Ordering::Relaxed),
            "throttled": self.throttled.load(Ordering::Relaxed),
            "blocked_addresses": self.blocked.len(),
        })
    }
}

/// Retry-After is in whole seconds; never tell a client to retry at once.
fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
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
            ApiError::RateLimited(whole_seconds(not_until.wait_time_from(DefaultClock::default().now())))
        })
    }

    /// Forgets a key's bucket (after revocation).
    pub fn forget(&self, key_id: &str) {
        self.limiters.remove(key_id);
    }
}
