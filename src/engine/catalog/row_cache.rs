//! The item rows read most recently, kept decoded up to a memory budget, least
//! recently used out first. [`ItemReader`](super::ItemReader) keeps it in step with
//! the catalog's writes.

use std::sync::Arc;

use lru::LruCache;
use serde::Serialize;
use serde_json::{Map, Value};

/// What a kept row is counted for beyond its stored JSON: the map's nodes, an
/// allocation per key and string, the key and the cache's own entry. Measured with
/// `bench-search`'s rows (7 fields, ~200 bytes of JSON): ~975 bytes of RSS each.
const DECODED_OVERHEAD_BYTES: usize = 800;

/// What a [`RowCache`] keeps (`/v1/admin/stats` `storage.cached_item_rows`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RowCacheUse {
    pub rows: usize,
    /// As counted by [`weight`].
    pub bytes: usize,
    pub budget: usize,
}

/// Decoded rows by storage key, at most `budget` bytes of them as counted by [`weight`].
pub struct RowCache {
    rows: LruCache<Vec<u8>, (Arc<Map<String, Value>>, usize)>,
    bytes: usize,
    budget: usize,
}

/// The bytes a row decoded from `stored` JSON bytes is counted for.
pub fn weight(stored: usize) -> usize {
    stored + DECODED_OVERHEAD_BYTES
}

impl RowCache {
    pub fn new(budget: usize) -> RowCache {
        RowCache {
            rows: LruCache::unbounded(),
            bytes: 0,
            budget,
        }
    }

    pub fn get(&mut self, key: &[u8]) -> Option<Arc<Map<String, Value>>> {
        self.rows.get(key).map(|(row, _)| row.clone())
    }

    /// Keeps `row` (counted for `weight` bytes), forgetting the least recently used
    /// rows past the budget; a row larger than the whole budget is not kept.
    pub fn put(&mut self, key: Vec<u8>, row: Arc<Map<String, Value>>, weight: usize) {
        if weight > self.budget {
            return;
        }
        if let Some((_, replaced)) = self.rows.put(key, (row, weight)) {
            self.bytes -= replaced;
        }
        self.bytes += weight;
        while self.bytes > self.budget {
            match self.rows.pop_lru() {
                Some((_, (_, weight))) => self.bytes -= weight,
                None => break,
            }
        }
    }

    pub fn remove(&mut self, key: &[u8]) {
        if let Some((_, weight)) = self.rows.pop(key) {
            self.bytes -= weight;
        }
    }

    pub fn clear(&mut self) {
        self.rows.clear();
        self.bytes = 0;
    }

    /// What is kept, for `/v1/admin/stats`.
    pub fn usage(&self) -> RowCacheUse {
        RowCacheUse {
            rows: self.rows.len(),
            bytes: self.bytes,
            budget: self.budget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(id: &str) -> Arc<Map<String, Value>> {
        match json!({ "id": id }) {
            Value::Object(row) => Arc::new(row),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_least_recently_used_rows_go_past_the_budget() {
        let mut cache = RowCache::new(300);
        cache.put(b"a".to_vec(), row("a"), 100);
        cache.put(b"b".to_vec(), row("b"), 100);
        cache.put(b"c".to_vec(), row("c"), 100);
        assert!(cache.get(b"a").is_some(), "a is now the most recent");
        cache.put(b"d".to_vec(), row("d"), 100);
        assert!(cache.get(b"b").is_none(), "b was the least recently used");
        assert!(cache.get(b"a").is_some() && cache.get(b"c").is_some() && cache.get(b"d").is_some());
        assert_eq!(cache.usage().bytes, 300);

        // Replacing a row counts its new weight only; removing one frees it.
        cache.put(b"a".to_vec(), row("a2"), 50);
        assert_eq!(cache.usage().bytes, 250);
        assert_eq!(cache.get(b"a").unwrap()["id"], "a2");
        cache.remove(b"c");
        assert_eq!(cache.usage().bytes, 150);
        cache.put(b"big".to_vec(), row("big"), 301);
        assert!(cache.get(b"big").is_none(), "larger than the budget");
        cache.clear();
        assert_eq!(cache.usage().bytes, 0);
        assert!(cache.get(b"d").is_none());
    }
}
