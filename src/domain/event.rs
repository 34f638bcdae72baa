//! The one internal `Event` both input formats (SPEC "Event" and "Engagement
//! event") and the Kafka topics decode into, with the validation rules of SPEC
//! "Events".

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::timestamp::{format_rfc3339, parse_time_value};
use crate::topology::ShardId;

mod plain;
mod stored;

pub use plain::decode_plain_v1;
pub use stored::{decode_stored, encode_stored};

/// Largest custom object value in an event, serialized.
const MAX_OBJECT_BYTES: usize = 4 * 1024;
/// Longest id, key or string field, in bytes.
const MAX_STRING_BYTES: usize = 16 * 1024;

/// A behaviour event, whatever format it arrived in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// When the user acted, unix ms.
    pub original_timestamp: i64,
    /// When the recommendation was requested, unix ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_timestamp: Option<i64>,
    /// When rankstream received the event, unix ms.
    pub ingest_timestamp: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub item_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub item_ids: Vec<String>,
    /// The table `item_id`/`item_ids` belong to.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub item_id_relation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rank: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dwell_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub query: Option<String>,
    /// Linking ids (rec_id, impression_id, page_view_id, module_view_id) and the
    /// standard string fields (page_type, click_type, conversion_type).
    #[serde(skip_serializing_if = "Map::is_empty", default)]
    pub links: Map<String, Value>,
    /// Every key that is not a known field.
    #[serde(skip_serializing_if = "Map::is_empty", default)]
    pub properties: Map<String, Value>,
}

/// Optional string fields kept in `links`.
const LINK_FIELDS: [&str; 7] = [
    "rec_id",
    "page_view_id",
    "module_view_id",
    "impression_id",
    "page_type",
    "click_type",
    "conversion_type",
];

/// How far ahead of its arrival an event's own time may be and still be believed:
/// client clocks run fast; an event from further ahead counts as this far ahead.
pub const MAX_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

impl Event {
    /// When the event happened as the models count time: its `original_timestamp`,
    /// but never more than [`MAX_CLOCK_SKEW_MS`] after it arrived, so that one event
    /// stamped in the future cannot age every other signal. Decays run on this time,
    /// not the wall clock, so a backfill of history learns what the live stream did.
    pub fn event_time(&self) -> i64 {
        self.original_timestamp
            .min(self.ingest_timestamp.saturating_add(MAX_CLOCK_SKEW_MS))
    }

    /// The key that decides the owning shard: uid, else sid, else cid.
    pub fn routing_key(&self) -> &str {
        self.uid
            .as_deref()
            .or(self.sid.as_deref())
            .or(self.cid.as_deref())
            .expect("validated: one of uid/sid/cid")
    }

    /// Items this event is about.
    pub fn items(&self) -> impl Iterator<Item = &str> {
        self.item_id
            .as_deref()
            .into_iter()
            .chain(self.item_ids.iter().map(String::as_str))
    }

    /// The stored form as the API returns it: times as RFC 3339, links and custom
    /// fields at the top level beside `properties`.
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(self).expect("events serialize");
        let object = value.as_object_mut().expect("an event is an object");
        for field in ["original_timestamp", "ingest_timestamp", "server_timestamp"] {
            if let Some(millis) = object.get(field).and_then(Value::as_i64) {
                object.insert(field.into(), Value::String(format_rfc3339(millis)));
            }
        }
        if let Some(Value::Object(links)) = object.remove("links") {
            object.extend(links);
        }
        object.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        value
    }
}

/// Why one event was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidEvent(pub String);

fn invalid(message: impl Into<String>) -> InvalidEvent {
    InvalidEvent(message.into())
}

/// Reads an optional non-empty string field.
fn optional_string(object: &mut Map<String, Value>, field: &str) -> Result<Option<String>, InvalidEvent> {
    match object.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Err(invalid(format!("{field:?} must not be empty"))),
        Some(Value::String(text)) if text.len() > MAX_STRING_BYTES => {
            Err(invalid(format!("{field:?} is longer than {MAX_STRING_BYTES} bytes")))
        }
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(format!("{field:?} must be a string"))),
    }
}

fn optional_time(object: &mut Map<String, Value>, field: &str) -> Result<Option<i64>, InvalidEvent> {
    match object.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => parse_time_value(&value).map(Some).ok_or_else(|| {
            invalid(format!(
                "{field:?} must be an ISO 8601 time with a date, or a unix number"
            ))
        }),
    }
}

fn string_array(value: Value, field: &str) -> Result<Vec<String>, InvalidEvent> {
    let error = || invalid(format!("{field:?} must be an array of non-empty strings"));
    let Value::Array(values) = value else {
        return Err(error());
    };
    values
        .into_iter()
        .map(|v| match v {
            Value::String(s) if !s.is_empty() => Ok(s),
            _ => Err(error()),
        })
        .collect()
}

/// Custom fields: any JSON, objects at most 4 KB.
fn check_properties(properties: &Map<String, Value>) -> Result<(), InvalidEvent> {
    for (field, value) in properties {
        if value.is_object() && serde_json::to_vec(value).map_or(usize::MAX, |b| b.len()) > MAX_OBJECT_BYTES {
            return Err(invalid(format!(
                "field {field:?} is larger than {MAX_OBJECT_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

/// Decodes a `POST /v1/events` event. `new_id` makes an id when the event has none.
pub fn decode_v1(value: Value, now_millis: i64, new_id: impl FnOnce() -> String) -> Result<Event, InvalidEvent> {
    let Value::Object(mut object) = value else {
        return Err(invalid("an event must be a JSON object"));
    };
    let event_type = optional_string(&mut object, "type")?.ok_or_else(|| invalid("\"type\" is required"))?;
    let original_timestamp = optional_time(&mut object, "original_timestamp")?
        .ok_or_else(|| invalid("\"original_timestamp\" is required"))?;
    let server_timestamp = optional_time(&mut object, "server_timestamp")?;
    object.remove("ingest_timestamp");
    let id = optional_string(&mut object, "id")?.unwrap_or_else(new_id);
    let uid = optional_string(&mut object, "uid")?;
    let sid = match optional_string(&mut object, "sid")? {
        Some(sid) => Some(sid),
        None => optional_string(&mut object, "session_id")?,
    };
    let cid = optional_string(&mut object, "cid")?;
    if uid.is_none() && sid.is_none() && cid.is_none() {
        return Err(invalid("one of \"uid\", \"sid\", \"cid\" is required"));
    }
    let item_id = optional_string(&mut object, "item_id")?;
    let item_ids = match object.remove("item_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => string_array(value, "item_ids")?,
    };
    let item_id_relation = optional_string(&mut object, "item_id_relation")?;
    let (rank, dwell_ms) = (rank(&mut object)?, dwell_ms(&mut object)?);
    let query = match optional_string(&mut object, "search_query")? {
        Some(query) => Some(query),
        None => optional_string(&mut object, "query")?,
    };
    let links = links(&mut object)?;
    check_properties(&object)?;
    let event = Event {
        id,
        event_type,
        original_timestamp,
        server_timestamp,
        ingest_timestamp: now_millis,
        uid,
        sid,
        cid,
        item_id,
        item_ids,
        item_id_relation,
        rank,
        dwell_ms,
        query,
        links,
        properties: object,
    };
    check_standard_type(&event)?;
    Ok(event)
}

/// The standard `rank` field: an integer >= 0.
fn rank(object: &mut Map<String, Value>) -> Result<Option<u64>, InvalidEvent> {
    match object.remove("rank") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Ok(Some(
            super::whole_number(&value).ok_or_else(|| invalid("\"rank\" must be an integer >= 0"))?,
        )),
    }
}

/// The standard `dwell_ms` field: a number >= 0.
fn dwell_ms(object: &mut Map<String, Value>) -> Result<Option<f64>, InvalidEvent> {
    match object.remove("dwell_ms") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Ok(Some(
            value
                .as_f64()
                .filter(|d| *d >= 0.0)
                .ok_or_else(|| invalid("\"dwell_ms\" must be a number >= 0"))?,
        )),
    }
}

/// The link and standard-type string fields ([`LINK_FIELDS`]) taken out of `object`.
fn links(object: &mut Map<String, Value>) -> Result<Map<String, Value>, InvalidEvent> {
    let mut links = Map::new();
    for field in LINK_FIELDS {
        if let Some(text) = optional_string(object, field)? {
            links.insert(field.into(), Value::String(text));
        }
    }
    Ok(links)
}

/// The mandatory fields of SPEC "Events" for the standard types.
fn check_standard_type(event: &Event) -> Result<(), InvalidEvent> {
    let required: &[&str] = match event.event_type.as_str() {
        "page_view" => &["page_type"],
        "module_view" => &["rank"],
        "impression" => &["item_id", "rank"],
        "click" => &["item_id", "click_type"],
        "conversion" => &["conversion_type", "item_ids"],
        "dwell_time" => &["dwell_ms"],
        _ => &[],
    };
    for field in required {
        let present = match *field {
            "rank" => event.rank.is_some(),
            "item_id" => event.item_id.is_some(),
            "item_ids" => !event.item_ids.is_empty(),
            "dwell_ms" => event.dwell_ms.is_some(),
            link => event.links.contains_key(link),
        };
        if !present {
            return Err(invalid(format!("a {} event requires {field:?}", event.event_type)));
        }
    }
    Ok(())
}

/// Decodes a `POST /catalog/engagement` event.
pub fn decode_engagement(
    value: Value,
    now_millis: i64,
    new_id: impl FnOnce() -> String,
) -> Result<Event, InvalidEvent> {
    let Value::Object(mut object) = value else {
        return Err(invalid("an engagement event must be a JSON object"));
    };
    let event_type = optional_string(&mut object, "type")?.ok_or_else(|| invalid("\"type\" is required"))?;
    let uid = optional_string(&mut object, "userId")?.ok_or_else(|| invalid("\"userId\" is required"))?;
    let sid = optional_string(&mut object, "sessionId")?.ok_or_else(|| invalid("\"sessionId\" is required"))?;
    let timestamp = optional_time(&mut object, "timestamp")?.ok_or_else(|| invalid("\"timestamp\" is required"))?;
    let mut properties = match object.remove("properties") {
        Some(Value::Object(properties)) => properties,
        None | Some(Value::Null) => return Err(invalid("\"properties\" is required")),
        Some(_) => return Err(invalid("\"properties\" must be an object")),
    };
    let id = optional_string(&mut object, "id")?.unwrap_or_else(new_id);
    // The standard fields live in `properties` in this format; the standard types
    // need the same of them as in `POST /v1/events`.
    let item_id = optional_string(&mut properties, "item_id")?;
    let item_ids = match properties.remove("item_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => string_array(value, "item_ids")?,
    };
    let item_id_relation = optional_string(&mut properties, "item_id_relation")?;
    let (rank, dwell_ms) = (rank(&mut properties)?, dwell_ms(&mut properties)?);
    let query = optional_string(&mut properties, "query")?;
    let links = links(&mut properties)?;
    properties.extend(object);
    check_properties(&properties)?;
    let event = Event {
        id,
        event_type,
        original_timestamp: timestamp,
        server_timestamp: None,
        ingest_timestamp: now_millis,
        uid: Some(uid),
        sid: Some(sid),
        cid: None,
        item_id,
        item_ids,
        item_id_relation,
        rank,
        dwell_ms,
        query,
        links,
        properties,
    };
    check_standard_type(&event)?;
    Ok(event)
}

/// An event of a shard's log, with the affinity keys of its items looked up once.
#[derive(Debug)]
pub struct SequencedEvent {
    /// The shard whose log holds the event.
    pub source: ShardId,
    pub seq: u64,
    pub event: Event,
    pub attributes: Vec<String>,
}

/// Where a shard hands its events once they are durable and applied (the learner).
/// The future resolves once the sink took them: the shard waits for it before it
/// answers, so a sink that falls behind slows ingest down instead of queueing
/// without limit.
pub trait DurableEventSink: Send + Sync {
    fn accept(&self, events: Vec<std::sync::Arc<SequencedEvent>>) -> futures::future::BoxFuture<'static, ()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1(value: Value) -> Result<Event, InvalidEvent> {
        decode_v1(value, 5, || "generated".into())
    }

    #[test]
    fn standard_types_need_their_fields() {
        let base = |extra: Value| {
            let mut event = json!({"type": "x", "original_timestamp": 1_700_000_000, "uid": "u"});
            event
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            event
        };
        assert!(v1(base(json!({"type": "click", "item_id": "i", "click_type": "tap"}))).is_ok());
        assert!(v1(base(json!({"type": "click", "item_id": "i"}))).is_err());
        assert!(v1(base(
            json!({"type": "conversion", "conversion_type": "order", "item_ids": []})
        ))
        .is_err());
        assert!(v1(base(json!({"type": "impression", "item_id": "i", "rank": -1}))).is_err());
        assert!(v1(base(json!({"type": "scroll"}))).is_ok());
        let custom = v1(base(json!({"type": "media_pause", "position": 12}))).unwrap();
        assert_eq!(custom.properties["position"], 12);
        assert_eq!(custom.id, "generated");
    }

    #[test]
    fn needs_a_routing_key_type_and_time() {
        assert!(v1(json!({"type": "scroll", "original_timestamp": 1})).is_err());
        assert!(v1(json!({"original_timestamp": 1, "uid": "u"})).is_err());
        assert!(v1(json!({"type": "scroll", "uid": "u"})).is_err());
        let event =
            v1(json!({"type": "scroll", "original_timestamp": "2023-11-14T22:13:20Z", "session_id": "s"})).unwrap();
        assert_eq!(
            (event.routing_key(), event.original_timestamp),
            ("s", 1_700_000_000_000)
        );
    }

    #[test]
    fn engagement_maps_onto_the_same_event() {
        let event = decode_engagement(
            json!({"type": "purchase", "userId": "u", "sessionId": "s", "timestamp": "2023-11-14T22:13:20Z",
                   "properties": {"item_id": "i9", "order_id": "o1", "query": "boots"}}),
            5,
            || "g".into(),
        )
        .unwrap();
        assert_eq!(
            (event.uid.as_deref(), event.sid.as_deref(), event.item_id.as_deref()),
            (Some("u"), Some("s"), Some("i9"))
        );
        assert_eq!(event.query.as_deref(), Some("boots"));
        assert_eq!(event.properties["order_id"], "o1");
        let roundtrip: Event = serde_json::from_slice(&serde_json::to_vec(&event).unwrap()).unwrap();
        assert_eq!(roundtrip, event);
        assert!(decode_engagement(
            json!({"type": "view", "userId": "u", "timestamp": 1, "properties": {}}),
            5,
            || "g".into()
        )
        .is_err());
        // The standard types need the same fields as in `POST /v1/events`.
        for (event_type, properties) in [
            ("click", json!({})),
            ("click", json!({"item_id": "i"})),
            ("page_view", json!({})),
            ("conversion", json!({"item_id": "i"})),
            ("impression", json!({"item_id": "i"})),
            ("dwell_time", json!({"dwell_ms": -1})),
        ] {
            let body =
                json!({"type": event_type, "userId": "u", "sessionId": "s", "timestamp": 1, "properties": properties});
            assert!(decode_engagement(body.clone(), 5, || "g".into()).is_err(), "{body}");
        }
        let click = decode_engagement(
            json!({"type": "click", "userId": "u", "sessionId": "s", "timestamp": 1,
                   "properties": {"item_id": "i", "click_type": "tile", "rank": 2}}),
            5,
            || "g".into(),
        )
        .unwrap();
        assert_eq!(
            (click.rank, click.links["click_type"].as_str()),
            (Some(2), Some("tile"))
        );
    }
}
