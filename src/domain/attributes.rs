//! Affinity attribute keys (`group:…`, `tag:…`, `price_band:…`) interned as small
//! numbers for the ranking loop, which looks up every attribute of every candidate:
//! comparing numbers there instead of strings spares a cache miss per key.
//!
//! Catalog field names are interned here too (`field:…`), for the business rules,
//! which look up fields of every candidate.
//!
//! The table is process-wide and only grows; it holds one entry per distinct
//! attribute value the catalog and the events have shown (a vocabulary, not a count
//! of items).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;

/// The number an attribute key is known by in this process.
pub type AttributeId = u32;

struct Table {
    ids: DashMap<Box<str>, AttributeId, FxBuildHasher>,
    next: AtomicU32,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        ids: DashMap::default(),
        next: AtomicU32::new(0),
    })
}

/// The id of `key`, the same for the same key for the life of the process.
pub fn intern(key: &str) -> AttributeId {
    let table = table();
    if let Some(id) = table.ids.get(key) {
        return *id;
    }
    *table
        .ids
        .entry(key.into())
        .or_insert_with(|| table.next.fetch_add(1, Ordering::Relaxed))
}

/// The id of `key` if it was ever interned: a lookup that never grows the table (for
/// names a request brings, which may be anything).
pub fn interned(key: &str) -> Option<AttributeId> {
    table().ids.get(key).map(|id| *id)
}

/// The key a catalog field's name is interned under (beside the attribute keys).
pub fn field_key(name: &str) -> String {
    format!("field:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_gets_the_same_id_and_others_another() {
        let shoes = intern("group:test-shoes");
        assert_eq!(intern("group:test-shoes"), shoes);
        assert_ne!(intern("group:test-hats"), shoes);
    }
}
