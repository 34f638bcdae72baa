//! The common v1 event (standard fields only, no custom ones) read straight from its
//! bytes into an [`Event`]: no `Value` tree, no map of its fields to take apart. Kafka
//! ingest decodes every message, and the tree was a tenth of its CPU. Anything this
//! cannot take as it is (a custom field, an empty string, a time it does not read, two
//! spellings of one field) goes the general way, [`super::decode_v1`], which also
//! words the errors: the two agree on every event this takes (tested below).

use serde::de::{self, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::{check_standard_type, Event, LINK_FIELDS, MAX_STRING_BYTES};
use crate::timestamp::{parse_iso8601, parse_time_value};

/// The fields of SPEC "Events", each optional here; any other field fails the read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plain {
    #[serde(rename = "type")]
    event_type: Option<String>,
    original_timestamp: Option<Time>,
    server_timestamp: Option<Time>,
    /// Set by the server, whatever the producer wrote.
    #[allow(dead_code)]
    ingest_timestamp: Option<IgnoredAny>,
    id: Option<String>,
    uid: Option<String>,
    sid: Option<String>,
    session_id: Option<String>,
    cid: Option<String>,
    item_id: Option<String>,
    item_ids: Option<Vec<String>>,
    item_id_relation: Option<String>,
    rank: Option<u64>,
    dwell_ms: Option<f64>,
    search_query: Option<String>,
    query: Option<String>,
    rec_id: Option<String>,
    page_view_id: Option<String>,
    module_view_id: Option<String>,
    impression_id: Option<String>,
    page_type: Option<String>,
    click_type: Option<String>,
    conversion_type: Option<String>,
}

/// A time field as [`parse_time_value`] reads it; `None` when it does not.
struct Time(Option<i64>);

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Time, D::Error> {
        struct TimeVisitor;
        impl Visitor<'_> for TimeVisitor {
            type Value = Time;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a time")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Time, E> {
                Ok(Time(parse_iso8601(text)))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Time, E> {
                Ok(Time(parse_time_value(&Value::from(number))))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Time, E> {
                Ok(Time(parse_time_value(&Value::from(number))))
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Time, E> {
                Ok(Time(parse_time_value(&Value::from(number))))
            }
        }
        deserializer.deserialize_any(TimeVisitor)
    }
}

/// A string field as the general way keeps it: `None` when it would refuse it.
fn usable(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_STRING_BYTES
}

/// `bytes` as an [`Event`] when it is a plain v1 event; `None` sends it the general way
/// (valid or not). `new_id` is called only for an event taken without an id.
pub fn decode_plain_v1(bytes: &[u8], now_millis: i64, new_id: impl FnOnce() -> String) -> Option<Event> {
    let plain: Plain = serde_json::from_slice(bytes).ok()?;
    // The general way keeps the second spelling as a custom field when both are given.
    if (plain.sid.is_some() && plain.session_id.is_some()) || (plain.search_query.is_some() && plain.query.is_some()) {
        return None;
    }
    let strings = [
        &plain.event_type,
        &plain.id,
        &plain.uid,
        &plain.sid,
        &plain.session_id,
        &plain.cid,
        &plain.item_id,
        &plain.item_id_relation,
        &plain.search_query,
        &plain.query,
    ];
    let links = [
        &plain.rec_id,
        &plain.page_view_id,
        &plain.module_view_id,
        &plain.impression_id,
        &plain.page_type,
        &plain.click_type,
        &plain.conversion_type,
    ];
    if strings
        .iter()
        .chain(links.iter())
        .flat_map(|text| text.as_deref())
        .any(|text| !usable(text))
    {
        return None;
    }
    let item_ids = plain.item_ids.unwrap_or_default();
    if item_ids.iter().any(String::is_empty) || plain.dwell_ms.is_some_and(|dwell| dwell < 0.0) {
        return None;
    }
    let original_timestamp = plain.original_timestamp?.0?;
    let server_timestamp = match plain.server_timestamp {
        Some(Time(Some(at))) => Some(at),
        Some(Time(None)) => return None,
        None => None,
    };
    let (uid, sid, cid) = (plain.uid, plain.sid.or(plain.session_id), plain.cid);
    if uid.is_none() && sid.is_none() && cid.is_none() {
        return None;
    }
    let mut linked = Map::new();
    for (field, text) in LINK_FIELDS.into_iter().zip([
        plain.rec_id,
        plain.page_view_id,
        plain.module_view_id,
        plain.impression_id,
        plain.page_type,
        plain.click_type,
        plain.conversion_type,
    ]) {
        if let Some(text) = text {
            linked.insert(field.into(), Value::String(text));
        }
    }
    let mut event = Event {
        id: String::new(),
        event_type: plain.event_type?,
        original_timestamp,
        server_timestamp,
        ingest_timestamp: now_millis,
        uid,
        sid,
        cid,
        item_id: plain.item_id,
        item_ids,
        item_id_relation: plain.item_id_relation,
        rank: plain.rank,
        dwell_ms: plain.dwell_ms,
        query: plain.search_query.or(plain.query),
        links: linked,
        properties: Map::new(),
    };
    check_standard_type(&event).ok()?;
    event.id = plain.id.unwrap_or_else(new_id);
    Some(event)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::decode_v1;
    use super::*;

    fn both(value: Value) -> (Option<Event>, Option<Event>) {
        let bytes = serde_json::to_vec(&value).unwrap();
        let plain = decode_plain_v1(&bytes, 7, || "made".into());
        let general = decode_v1(value, 7, || "made".into()).ok();
        (plain, general)
    }

    #[test]
    fn plain_events_decode_as_the_general_way_decodes_them() {
        let events = [
            json!({"id": "e1", "type": "click", "original_timestamp": "2026-11-27T10:00:00.123Z", "uid": "u", "sid": "s", "item_id": "i", "click_type": "product"}),
            json!({"type": "page_view", "original_timestamp": 1_700_000_000, "session_id": "s", "page_type": "listing"}),
            json!({"id": "e3", "type": "conversion", "original_timestamp": 1_700_000_000_123_u64, "cid": "c", "item_ids": ["a", "b"], "conversion_type": "purchase", "rec_id": "r", "server_timestamp": 1_700_000_000.5, "ingest_timestamp": "ignored"}),
            json!({"id": "e4", "type": "impression", "original_timestamp": "2026-11-27", "uid": "u", "item_id": "i", "rank": 3, "module_view_id": "m", "impression_id": "p", "page_view_id": "v"}),
            json!({"id": "e5", "type": "dwell_time", "original_timestamp": 1_700_000_000, "uid": "u", "item_id": null, "dwell_ms": 1500, "search_query": "red shoes", "item_id_relation": "items"}),
            json!({"id": "e6", "type": "search", "original_timestamp": 1_700_000_000, "uid": "u", "query": "boots"}),
        ];
        for event in events {
            let (plain, general) = both(event.clone());
            assert!(plain.is_some(), "taken: {event}");
            assert_eq!(plain, general, "{event}");
            let (plain, general) = (plain.unwrap(), general.unwrap());
            assert_eq!(
                serde_json::to_vec(&plain).unwrap(),
                serde_json::to_vec(&general).unwrap(),
                "{event}"
            );
        }
    }

    #[test]
    fn anything_else_goes_the_general_way() {
        let events = [
            // A custom field.
            json!({"id": "e", "type": "click", "original_timestamp": 1_700_000_000, "uid": "u", "item_id": "i", "click_type": "x", "color": "red"}),
            // Empty or mistyped strings, a time it does not read, a negative rank.
            json!({"id": "", "type": "view", "original_timestamp": 1_700_000_000, "uid": "u"}),
            json!({"id": "e", "type": "view", "original_timestamp": 1_700_000_000, "uid": 5}),
            json!({"id": "e", "type": "view", "original_timestamp": "yesterday", "uid": "u"}),
            json!({"id": "e", "type": "view", "original_timestamp": 1_700_000_000, "uid": "u", "server_timestamp": "soon"}),
            json!({"id": "e", "type": "module_view", "original_timestamp": 1_700_000_000, "uid": "u", "rank": -1}),
            json!({"id": "e", "type": "view", "original_timestamp": 1_700_000_000, "uid": "u", "item_ids": [""]}),
            // Both spellings (the second is kept as a custom field), or no key at all.
            json!({"id": "e", "type": "view", "original_timestamp": 1_700_000_000, "sid": "s", "session_id": "t"}),
            json!({"id": "e", "type": "view", "original_timestamp": 1_700_000_000}),
            // A standard type without its fields; no type; no time.
            json!({"id": "e", "type": "click", "original_timestamp": 1_700_000_000, "uid": "u"}),
            json!({"id": "e", "original_timestamp": 1_700_000_000, "uid": "u"}),
            json!({"id": "e", "type": "view", "uid": "u"}),
        ];
        for event in events {
            let (plain, _) = both(event.clone());
            assert!(plain.is_none(), "not taken: {event}");
        }
        assert!(decode_plain_v1(b"[1, 2]", 7, || "made".into()).is_none());
        assert!(decode_plain_v1(b"not json", 7, || "made".into()).is_none());
    }
}
