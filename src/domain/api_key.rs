//! What an API key is, as every layer names it: its scopes, the stored record (the
//! secret itself is never stored), what a new one asks for, and why a presented secret
//! is refused. The keys themselves (hashed, stored, looked up) live in
//! `crate::api_keys`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::timestamp::format_rfc3339;

/// Every scope a key can carry; `admin` implies all of them.
pub const SCOPES: [&str; 10] = [
    "recommend",
    "search",
    "chat",
    "embed",
    "catalog:read",
    "catalog:write",
    "users:write",
    "events:write",
    "metrics",
    "admin",
];

/// A stored key; the secret itself is never stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    /// Stored: hex HMAC-SHA-256, keyed with the node's secret, of the secret's SHA-256
    /// (`keyed`). In a replicated change, and in records written before keyed hashes:
    /// hex SHA-256 of the secret (not `keyed`), keyed when stored or loaded.
    pub hash: String,
    #[serde(default)]
    pub keyed: bool,
    pub scopes: Vec<String>,
    /// Unix ms after which the key is refused.
    pub expires_at: Option<i64>,
    pub created_at: i64,
    /// Own rate quota; the configured default when absent.
    pub rate_per_sec: Option<u32>,
    pub burst: Option<u32>,
}

impl ApiKey {
    /// Whether the key may use an endpoint needing `scope`.
    pub fn allows(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope || s == "admin")
    }

    /// The public view: everything but the hash.
    pub fn view(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "scopes": self.scopes,
            "expires_at": self.expires_at.map(format_rfc3339),
            "created_at": format_rfc3339(self.created_at),
            "rate_per_sec": self.rate_per_sec,
            "burst": self.burst,
        })
    }
}

/// What a new key should be.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    pub name: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<i64>,
    pub rate_per_sec: Option<u32>,
    pub burst: Option<u32>,
}

/// Why a presented secret was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    Unknown,
    Expired,
}
