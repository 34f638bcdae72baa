//! Helpers for the events and live-state tests (notes/EVENTS_CONTRACT.md):
//! ingest replies, snapshots, bounded polling and state comparison.

use std::thread;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{assert_error_body, assert_status, now, parse_time, rfc3339_ms, TestServer};

pub const EVENTS: &str = "/v1/events";
/// The two paths of the engagement format.
pub const ENGAGEMENT_PATHS: [&str; 3] = ["/catalog/engagement", "/cds/engagement", "/v1/catalog/engagement"];

/// `/v1/events/{id}`
pub fn event_path(id: &str) -> String {
    format!("/v1/events/{id}")
}

/// `/v1/sessions/{sid}`
pub fn session_path(sid: &str) -> String {
    format!("/v1/sessions/{sid}")
}

/// `/v1/users/{uid}/state`
pub fn user_state_path(uid: &str) -> String {
    format!("/v1/users/{uid}/state")
}

/// A v1 event of type `kind` with `original_timestamp` now, merged with `fields`
/// (a `null` field removes the key).
pub fn event(kind: &str, fields: Value) -> Value {
    let mut body = json!({"type": kind, "original_timestamp": rfc3339_ms(now())});
    let map = body.as_object_mut().unwrap();
    for (key, value) in fields.as_object().expect("fields object") {
        if value.is_null() {
            map.remove(key);
        } else {
            map.insert(key.clone(), value.clone());
        }
    }
    body
}

/// Asserts a 202 ingest reply `{accepted, ids, duplicates, rejected}` with the
/// given counts and returns the ids.
#[track_caller]
pub fn assert_ingested(reply: &(StatusCode, Value), accepted: usize, duplicates: usize, context: &str) -> Vec<String> {
    let body = assert_status(reply, 202, context);
    assert_eq!(body["accepted"], accepted, "{context}: accepted in {body}");
    assert_eq!(body["duplicates"], duplicates, "{context}: duplicates in {body}");
    assert!(
        body["rejected"].is_array(),
        "{context}: rejected is not an array: {body}"
    );
    let ids: Vec<String> = body["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no ids array in {body}"))
        .iter()
        .map(|id| match id.as_str() {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => panic!("{context}: id {id} is not a non-empty string in {body}"),
        })
        .collect();
    assert_eq!(ids.len(), accepted, "{context}: one id per accepted event: {body}");
    ids
}

/// The `(index, message)` of each rejection entry (`rejected` of a 202 or `details`
/// of a 400), asserting each has code `validation_error`.
#[track_caller]
pub fn rejections(entries: &Value, context: &str) -> Vec<(u64, String)> {
    entries
        .as_array()
        .unwrap_or_else(|| panic!("{context}: rejections are not an array: {entries}"))
        .iter()
        .map(|entry| {
            assert_error_body(entry, context);
            assert_eq!(entry["code"], "validation_error", "{context}: {entry}");
            let index = entry["index"]
                .as_u64()
                .unwrap_or_else(|| panic!("{context}: no index in {entry}"));
            (index, entry["message"].as_str().unwrap().to_string())
        })
        .collect()
}

/// `(item_id, type)` of each entry of a snapshot's `recent`.
#[track_caller]
pub fn recent_items(state: &Value) -> Vec<(String, String)> {
    state["recent"]
        .as_array()
        .unwrap_or_else(|| panic!("no recent array in {state}"))
        .iter()
        .map(|entry| {
            parse_time(&entry["at"]);
            let item = entry["item_id"]
                .as_str()
                .unwrap_or_else(|| panic!("recent entry {entry}"));
            let kind = entry["type"].as_str().unwrap_or_else(|| panic!("recent entry {entry}"));
            (item.to_string(), kind.to_string())
        })
        .collect()
}

/// A snapshot's list of strings (`event_ids`, `queries`, `sessions`, `purchased`).
#[track_caller]
pub fn strings(state: &Value, field: &str) -> Vec<String> {
    state[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} is not an array in {state}"))
        .iter()
        .map(|value| value.as_str().unwrap_or_else(|| panic!("{field}: {value}")).to_string())
        .collect()
}

/// An affinity score, 0 when absent; asserts present scores are positive numbers.
#[track_caller]
pub fn affinity(state: &Value, key: &str) -> f64 {
    match state["affinities"].get(key) {
        None | Some(Value::Null) => 0.0,
        Some(score) => {
            let score = score.as_f64().unwrap_or_else(|| panic!("affinity {key} = {score}"));
            assert!(score > 0.0, "affinity {key} = {score} is not > 0 in {state}");
            score
        }
    }
}

/// Asserts two snapshots of the same key are equal except `live`; affinity
/// scores (time-decayed) only need the same keys and values within 5 %.
#[track_caller]
pub fn assert_same_state(before: &Value, after: &Value, context: &str) {
    let strip = |state: &Value| {
        let mut state = state.as_object().expect("snapshot object").clone();
        state.remove("live");
        let affinities = state.remove("affinities").unwrap_or(Value::Null);
        (state, affinities)
    };
    let (before_rest, before_aff) = strip(before);
    let (after_rest, after_aff) = strip(after);
    assert_eq!(before_rest, after_rest, "{context}: state changed");
    let before_aff = before_aff.as_object().expect("affinities object");
    let after_aff = after_aff.as_object().expect("affinities object");
    let mut before_keys: Vec<_> = before_aff.keys().collect();
    let mut after_keys: Vec<_> = after_aff.keys().collect();
    before_keys.sort();
    after_keys.sort();
    assert_eq!(before_keys, after_keys, "{context}: affinity keys changed");
    for (key, old) in before_aff {
        let (old, new) = (old.as_f64().unwrap(), after_aff[key].as_f64().unwrap());
        assert!(
            (old - new).abs() <= old.abs() * 0.05,
            "{context}: affinity {key} changed from {old} to {new}"
        );
    }
}

/// Asserts a time value lies within `[before - 1 s, after + 1 s]`.
#[track_caller]
pub fn assert_time_between(value: &Value, before: DateTime<Utc>, after: DateTime<Utc>) -> DateTime<Utc> {
    let time = parse_time(value);
    let slack = chrono::TimeDelta::seconds(1);
    assert!(
        time >= before - slack && time <= after + slack,
        "time {time} is not between {before} and {after}"
    );
    time
}

/// Calls `probe` every 100 ms until it returns `Ok`, failing after `timeout`
/// with the last `Err` observation.
#[track_caller]
pub fn poll_until<T>(timeout: Duration, what: &str, probe: impl FnMut() -> Result<T, String>) -> T {
    poll_every(Duration::from_millis(100), timeout, what, probe)
}

/// [`poll_until`] with another interval between probes.
#[track_caller]
pub fn poll_every<T>(
    interval: Duration,
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) => assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}; last: {last}"
            ),
        }
        thread::sleep(interval);
    }
}

impl TestServer {
    /// `POST /v1/events` with the admin key.
    pub fn ingest(&self, body: Value) -> (StatusCode, Value) {
        self.admin_post(EVENTS, body)
    }

    /// Posts events that must all be accepted as new; returns their ids.
    #[track_caller]
    pub fn ingest_ok(&self, body: Value) -> Vec<String> {
        let count = match body.get("events") {
            Some(events) => events.as_array().expect("events array").len(),
            None => 1,
        };
        let reply = self.ingest(body.clone());
        let ids = assert_ingested(&reply, count, 0, &format!("ingest {body}"));
        assert_eq!(reply.1["rejected"], json!([]), "ingest {body}");
        ids
    }

    /// `GET /v1/events/{id}`, asserting 200.
    #[track_caller]
    pub fn stored_event(&self, id: &str) -> Value {
        assert_status(&self.admin_get(&event_path(id)), 200, &format!("event {id}")).clone()
    }

    /// `GET /v1/sessions/{sid}`, asserting 200 and the sid.
    #[track_caller]
    pub fn session_state(&self, sid: &str) -> Value {
        let state = assert_status(&self.admin_get(&session_path(sid)), 200, &format!("session {sid}")).clone();
        assert_eq!(state["sid"], sid, "{state}");
        state
    }

    /// `GET /v1/users/{uid}/state`, asserting 200 and the uid.
    #[track_caller]
    pub fn user_state(&self, uid: &str) -> Value {
        let state = assert_status(&self.admin_get(&user_state_path(uid)), 200, &format!("user {uid}")).clone();
        assert_eq!(state["uid"], uid, "{state}");
        state
    }
}
