//! API keys: stored as a keyed hash in the `meta` column family, looked up by that
//! hash from an in-memory index. Shared by the HTTP admin endpoints and the `keys` CLI.
//!
//! The stored hash is HMAC-SHA-256, keyed with a secret of the node kept in `meta`,
//! of the secret's SHA-256 (its fingerprint): a copy of the stored keys alone does not
//! let anyone test guesses of an operator-chosen key offline. Between the nodes of a
//! cluster a key travels with its fingerprint, which each node keys with its own
//! secret when it stores it.

use std::sync::Arc;

use dashmap::DashMap;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::clock::SharedClock;
use crate::domain::api_key::{ApiKey, AuthFailure, NewKey, SCOPES};
use crate::storage::{layout, Cf, Storage, StorageError};

/// Id of the key made from `RANKSTREAM_ADMIN_KEY` or generated on first start.
pub const BOOTSTRAP_ID: &str = "bootstrap-admin";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The node's keys.
pub struct KeyStore {
    storage: Storage,
    /// Keyed hash → key, for lookups on every request.
    by_hash: DashMap<String, Arc<ApiKey>>,
    /// What the stored hashes are keyed with; generated on first start, kept in `meta`.
    hash_key: [u8; 32],
    clock: SharedClock,
}

impl KeyStore {
    pub fn load(storage: Storage, clock: SharedClock) -> Result<KeyStore, StorageError> {
        let store = KeyStore {
            hash_key: hash_key(&storage)?,
            storage,
            by_hash: DashMap::new(),
            clock,
        };
        let mut unkeyed = Vec::new();
        for entry in store.storage.scan_prefix(Cf::Meta, layout::API_KEY_PREFIX) {
            let (key, value) = entry?;
            let api_key: ApiKey = serde_json::from_slice(&value).map_err(|error| StorageError::Corrupt {
                key: String::from_utf8_lossy(&key).into_owned(),
                reason: error.to_string(),
            })?;
            match api_key.keyed {
                true => _ = store.by_hash.insert(api_key.hash.clone(), Arc::new(api_key)),
                false => unkeyed.push(api_key),
            }
        }
        // Records from before keyed hashes are keyed now, in place.
        for api_key in unkeyed {
            store.store(api_key).map_err(|error| match error {
                KeyError::Storage(error) => error,
                KeyError::Invalid(reason) => StorageError::Corrupt {
                    key: "api key".into(),
                    reason,
                },
            })?;
        }
        Ok(store)
    }

    /// The key as another node must receive it: with its fingerprint, not this node's hash.
    pub fn replicable(key: &ApiKey, secret: &str) -> ApiKey {
        ApiKey {
            hash: hex::encode(fingerprint(secret)),
            keyed: false,
            ..key.clone()
        }
    }

    /// Hex HMAC of a secret's fingerprint under this node's hash key.
    fn keyed_hash(&self, fingerprint: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.hash_key).expect("HMAC takes any key length");
        mac.update(fingerprint);
        hex::encode(mac.finalize().into_bytes())
    }

    /// Validates and stores a new key; returns it with its secret (shown only now).
    pub fn create(&self, new: NewKey) -> Result<(Arc<ApiKey>, String), KeyError> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        self.insert(id, new, generate_secret())
    }

    fn insert(&self, id: String, new: NewKey, secret: String) -> Result<(Arc<ApiKey>, String), KeyError> {
        let mut problems = Vec::new();
        if new.name.trim().is_empty() {
            problems.push("\"name\" must not be empty".to_owned());
        }
        if new.scopes.is_empty() {
            problems.push("\"scopes\" must name at least one scope".to_owned());
        }
        for scope in &new.scopes {
            if !SCOPES.contains(&scope.as_str()) {
                problems.push(format!("unknown scope {scope:?} (known: {})", SCOPES.join(", ")));
            }
        }
        if new.expires_at.is_some_and(|at| at <= self.clock.now_millis()) {
            problems.push("\"expires_at\" is in the past".to_owned());
        }
        if new.rate_per_sec == Some(0) || new.burst == Some(0) {
            problems.push("\"rate_per_sec\" and \"burst\" must be > 0".to_owned());
        }
        if !problems.is_empty() {
            return Err(KeyError::Invalid(problems.join("; ")));
        }
        let key = ApiKey {
            id,
            name: new.name,
            hash: self.keyed_hash(&fingerprint(&secret)),
            keyed: true,
            scopes: new.scopes,
            expires_at: new.expires_at,
            created_at: self.clock.now_millis(),
            rate_per_sec: new.rate_per_sec,
            burst: new.burst,
        };
        Ok((self.store(key)?, secret))
    }

    /// Stores a key another node of the cluster created (its secret stays unknown here).
    pub fn put_replicated(&self, key: ApiKey) -> Result<(), KeyError> {
        self.store(key).map(drop)
    }

    /// Writes a key and indexes it by its keyed hash (keying a fingerprint first).
    fn store(&self, mut key: ApiKey) -> Result<Arc<ApiKey>, KeyError> {
        if !key.keyed {
            let fingerprint = hex::decode(&key.hash)
                .ok()
                .filter(|bytes| bytes.len() == 32)
                .ok_or_else(|| KeyError::Invalid(format!("key {:?} has no SHA-256 fingerprint", key.id)))?;
            key.hash = self.keyed_hash(&fingerprint);
            key.keyed = true;
        }
        let mut batch = self.storage.batch();
        batch.put(
            Cf::Meta,
            &layout::api_key(&key.id),
            &serde_json::to_vec(&key).expect("key serializes"),
        );
        batch.commit()?;
        let key = Arc::new(key);
        self.by_hash.insert(key.hash.clone(), key.clone());
        Ok(key)
    }

    /// Every key, oldest first.
    pub fn list(&self) -> Vec<Arc<ApiKey>> {
        let mut all: Vec<_> = self.by_hash.iter().map(|entry| entry.value().clone()).collect();
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        all
    }

    /// Removes a key; `false` when there is none with that id.
    pub fn revoke(&self, id: &str) -> Result<bool, KeyError> {
        let Some(hash) = self
            .by_hash
            .iter()
            .find(|e| e.value().id == id)
            .map(|e| e.key().clone())
        else {
            return Ok(false);
        };
        let mut batch = self.storage.batch();
        batch.delete(Cf::Meta, &layout::api_key(id));
        batch.commit()?;
        self.by_hash.remove(&hash);
        Ok(true)
    }

    /// The key a presented secret belongs to.
    pub fn authenticate(&self, secret: &str) -> Result<Arc<ApiKey>, AuthFailure> {
        let key = self
            .by_hash
            .get(&self.keyed_hash(&fingerprint(secret)))
            .map(|e| e.value().clone())
            .ok_or(AuthFailure::Unknown)?;
        match key.expires_at {
            Some(at) if at <= self.clock.now_millis() => Err(AuthFailure::Expired),
            _ => Ok(key),
        }
    }

    /// Makes sure an admin key exists. With `secret` (from `RANKSTREAM_ADMIN_KEY`) that
    /// secret becomes the bootstrap admin key. Without it, a key is generated when no
    /// admin key exists yet, and its secret returned so it can be printed once.
    pub fn bootstrap_admin(&self, secret: Option<&str>) -> Result<Option<String>, KeyError> {
        let admin = NewKey {
            name: "bootstrap admin".into(),
            scopes: vec!["admin".into()],
            ..NewKey::default()
        };
        if let Some(secret) = secret {
            if secret.trim().is_empty() {
                return Err(KeyError::Invalid("RANKSTREAM_ADMIN_KEY is empty".into()));
            }
            if self.authenticate(secret).is_ok_and(|key| key.allows("admin")) {
                return Ok(None);
            }
            self.revoke(BOOTSTRAP_ID)?;
            self.insert(BOOTSTRAP_ID.into(), admin, secret.to_owned())?;
            return Ok(None);
        }
        if self
            .by_hash
            .iter()
            .any(|e| e.value().scopes.iter().any(|s| s == "admin"))
        {
            return Ok(None);
        }
        let (_, secret) = self.insert(BOOTSTRAP_ID.into(), admin, generate_secret())?;
        Ok(Some(secret))
    }
}

impl KeyStore {
    /// Cluster mode: this node's own key, for its calls to the other nodes (claiming
    /// a session), and its secret, kept in `meta` so that it survives restarts. Scope
    /// `events:write` only, with a rate no request path reaches.
    pub fn node_key(&self, node_id: &str) -> Result<(Arc<ApiKey>, String), KeyError> {
        let secret_key = layout::node_secret(node_id);
        let secret = match self.storage.get(Cf::Meta, &secret_key)? {
            Some(secret) => String::from_utf8_lossy(&secret).into_owned(),
            None => {
                let secret = generate_secret();
                let mut batch = self.storage.batch();
                batch.put(Cf::Meta, &secret_key, secret.as_bytes());
                batch.commit()?;
                secret
            }
        };
        if let Ok(key) = self.authenticate(&secret) {
            return Ok((key, secret));
        }
        let key = ApiKey {
            id: format!("node-{node_id}"),
            name: format!("cluster node {node_id}"),
            hash: self.keyed_hash(&fingerprint(&secret)),
            keyed: true,
            scopes: vec!["events:write".into()],
            expires_at: None,
            created_at: self.clock.now_millis(),
            rate_per_sec: Some(u32::MAX),
            burst: Some(u32::MAX),
        };
        Ok((self.store(key)?, secret))
    }
}

fn generate_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("rsk_{}", hex::encode(bytes))
}

/// A secret's SHA-256.
fn fingerprint(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The node's key for hashing API keys, made on first start.
fn hash_key(storage: &Storage) -> Result<[u8; 32], StorageError> {
    if let Some(stored) = storage.get(Cf::Meta, layout::KEY_HASH_SECRET)? {
        return stored.try_into().map_err(|_| StorageError::Corrupt {
            key: "key hash secret".into(),
            reason: "not 32 bytes".into(),
        });
    }
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let mut batch = storage.batch();
    batch.put(Cf::Meta, layout::KEY_HASH_SECRET, &secret);
    batch.commit()?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::config::Durability;

    fn store(clock: Arc<ManualClock>) -> (tempfile::TempDir, KeyStore) {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        (dir, KeyStore::load(storage, clock).unwrap())
    }

    #[test]
    fn keys_expire_by_the_injected_clock() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let (_dir, keys) = store(clock.clone());
        let new = NewKey {
            name: "k".into(),
            scopes: vec!["search".into()],
            expires_at: Some(1_000_500),
            ..NewKey::default()
        };
        let (key, secret) = keys.create(new).unwrap();
        assert!(keys.authenticate(&secret).unwrap().allows("search"));
        assert!(!key.allows("catalog:write"));
        clock.advance(500);
        assert_eq!(keys.authenticate(&secret).unwrap_err(), AuthFailure::Expired);
    }

    #[test]
    fn bootstrap_generates_once_and_keys_survive_reload() {
        let clock = Arc::new(ManualClock::new(1));
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        let keys = KeyStore::load(storage.clone(), clock.clone()).unwrap();
        let secret = keys.bootstrap_admin(None).unwrap().expect("first start generates");
        assert_eq!(keys.bootstrap_admin(None).unwrap(), None);
        let reloaded = KeyStore::load(storage, clock).unwrap();
        assert!(reloaded.authenticate(&secret).unwrap().allows("catalog:write"));
        assert!(reloaded.revoke(BOOTSTRAP_ID).unwrap());
        assert_eq!(reloaded.authenticate(&secret).unwrap_err(), AuthFailure::Unknown);
    }

    #[test]
    fn stored_hashes_are_keyed_and_older_records_are_keyed_at_load() {
        let clock = Arc::new(ManualClock::new(1));
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
        let keys = KeyStore::load(storage.clone(), clock.clone()).unwrap();
        let operator_chosen = "hunter2";
        keys.bootstrap_admin(Some(operator_chosen)).unwrap();
        let stored = storage.get(Cf::Meta, &layout::api_key(BOOTSTRAP_ID)).unwrap().unwrap();
        let plain = hex::encode(fingerprint(operator_chosen));
        assert!(
            !String::from_utf8_lossy(&stored).contains(&plain),
            "the plain SHA-256 is stored"
        );

        // A record written before keyed hashes, and one another node replicated.
        let (key, secret) = keys
            .create(NewKey {
                name: "old".into(),
                scopes: vec!["search".into()],
                ..NewKey::default()
            })
            .unwrap();
        let old = KeyStore::replicable(&key, &secret);
        storage
            .put_unsynced(Cf::Meta, &layout::api_key(&old.id), &serde_json::to_vec(&old).unwrap())
            .unwrap();
        let reloaded = KeyStore::load(storage.clone(), clock.clone()).unwrap();
        assert!(reloaded.authenticate(&secret).unwrap().allows("search"));
        assert!(reloaded.authenticate(operator_chosen).unwrap().allows("admin"));
        let rewritten: ApiKey =
            serde_json::from_slice(&storage.get(Cf::Meta, &layout::api_key(&old.id)).unwrap().unwrap()).unwrap();
        assert!(rewritten.keyed && rewritten.hash != old.hash, "{rewritten:?}");

        // Another node (another hash key) stores the replicated form and accepts the secret.
        let other_dir = tempfile::tempdir().unwrap();
        let other = KeyStore::load(Storage::open(other_dir.path(), Durability::Sync).unwrap(), clock).unwrap();
        other.put_replicated(KeyStore::replicable(&key, &secret)).unwrap();
        assert!(other.authenticate(&secret).is_ok());
        assert_ne!(
            other.list()[0].hash,
            rewritten.hash,
            "each node keys with its own secret"
        );
    }
}
