//! Assertions on replies, server times and stored values, shared by all test files.

use std::thread;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use reqwest::StatusCode;
use serde_json::Value;

// ---- assertions ----------------------------------------------------------

/// Asserts the status and returns the body.
#[track_caller]
pub fn assert_status<'a>(reply: &'a (StatusCode, Value), status: u16, context: &str) -> &'a Value {
    assert_eq!(
        reply.0.as_u16(),
        status,
        "{context}: expected {status}, got {} with body {}",
        reply.0,
        reply.1
    );
    &reply.1
}

/// Asserts an error reply: the status, a `{code, message}` body with string
/// fields and the given code. Returns the message.
#[track_caller]
pub fn assert_error(reply: &(StatusCode, Value), status: u16, code: &str, context: &str) -> String {
    let body = assert_status(reply, status, context);
    assert_error_body(body, context);
    assert_eq!(body["code"], code, "{context}: wrong error code in {body}");
    body["message"].as_str().unwrap().to_string()
}

/// Asserts a JSON error body `{"code": string, "message": string, "details"?: array}`.
#[track_caller]
pub fn assert_error_body(body: &Value, context: &str) {
    assert!(
        body["code"].is_string(),
        "{context}: error body without string code: {body}"
    );
    assert!(
        body["message"].is_string(),
        "{context}: error body without string message: {body}"
    );
    if let Some(details) = body.get("details") {
        assert!(
            details.is_array() || details.is_null(),
            "{context}: details is not an array: {body}"
        );
    }
}

// ---- time ----------------------------------------------------------------

pub fn now() -> DateTime<Utc> {
    Utc::now()
}

/// RFC 3339 UTC with milliseconds, the server's own format.
pub fn rfc3339_ms(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn millis(ms: i64) -> TimeDelta {
    TimeDelta::milliseconds(ms)
}

/// Parses an RFC 3339 string value.
#[track_caller]
pub fn parse_time(value: &Value) -> DateTime<Utc> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("time is not a string: {value}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|error| panic!("{text:?} is not RFC 3339: {error}"))
        .with_timezone(&Utc)
}

/// Asserts a server-written time: RFC 3339 UTC with milliseconds
/// (`2026-11-22T03:14:51.123Z`), and returns it.
#[track_caller]
pub fn assert_server_time(value: &Value) -> DateTime<Utc> {
    let time = parse_time(value);
    let text = value.as_str().unwrap();
    let shape_ok = text.len() == 24
        && text.bytes().enumerate().all(|(index, byte)| match index {
            4 | 7 => byte == b'-',
            10 => byte == b'T',
            13 | 16 => byte == b':',
            19 => byte == b'.',
            23 => byte == b'Z',
            _ => byte.is_ascii_digit(),
        });
    assert!(shape_ok, "{text:?} is not RFC 3339 UTC with milliseconds");
    time
}

/// Asserts a server time lies in `[before, after]` (with a small slack for
/// millisecond truncation and clock reads) and returns it.
#[track_caller]
pub fn assert_server_time_between(value: &Value, before: DateTime<Utc>, after: DateTime<Utc>) -> DateTime<Utc> {
    let time = assert_server_time(value);
    assert!(
        time >= before - millis(1000) && time <= after + millis(1000),
        "server time {time} is not between {before} and {after}"
    );
    time
}

/// Busy-waits (no sleep) until the wall clock is at least 2 ms past `time`, so
/// that a following server write gets a strictly later millisecond timestamp.
pub fn wait_for_clock_past(time: DateTime<Utc>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Utc::now() <= time + millis(2) {
        assert!(Instant::now() < deadline, "wall clock does not advance past {time}");
        thread::yield_now();
    }
}

// ---- stored values -------------------------------------------------------

/// Whether a stored value equals what was sent: numbers by value (3 == 3.0),
/// RFC 3339 strings by instant, arrays and objects element-wise.
pub fn same_value(sent: &Value, stored: &Value) -> bool {
    match (sent, stored) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) if a != b => {
            match (DateTime::parse_from_rfc3339(a), DateTime::parse_from_rfc3339(b)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, x)| b.get(key).is_some_and(|y| same_value(x, y)))
        }
        _ => sent == stored,
    }
}

/// Asserts every custom (non-reserved, non-null) field of `sent` is stored unchanged.
#[track_caller]
pub fn assert_custom_fields_stored(sent: &Value, stored: &Value) {
    const RESERVED: [&str; 4] = ["created_at", "updated_at", "is_deleted", "_table"];
    for (field, value) in sent.as_object().expect("sent an object") {
        if RESERVED.contains(&field.as_str()) || value.is_null() {
            continue;
        }
        assert!(
            same_value(value, &stored[field]),
            "field {field:?}: sent {value}, stored {}\nstored object: {stored}",
            stored[field]
        );
    }
}

/// The `index` of each per-row failure in `failures` (a bulk answer's `failed`,
/// `rejected` or an error's `details`), in order.
pub fn row_indexes(failures: &Value) -> Vec<u64> {
    failures
        .as_array()
        .unwrap_or_else(|| panic!("not a list of row failures: {failures}"))
        .iter()
        .map(|failure| {
            failure["index"]
                .as_u64()
                .unwrap_or_else(|| panic!("no index in {failure}"))
        })
        .collect()
}
