//! Filling a spawned server before the measurements (catalog items, events, waiting
//! for search to see them) and the checks of the answers to those requests, which the
//! bulk load loops use too.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::client::{snippet, Connection, Target, CATALOG_ITEMS, EVENTS, SEARCH};

/// Fails unless a bulk upsert answered 200 with an empty `failed` list and all
/// `expected` items upserted.
pub fn check_upserted(status: StatusCode, body: &[u8], expected: usize) -> Result<()> {
    let text = String::from_utf8_lossy(body);
    ensure!(status == StatusCode::OK, "status {status}: {text}");
    let json: Value = serde_json::from_slice(body).context(text.to_string())?;
    let failed = json["failed"]
        .as_array()
        .with_context(|| format!("no `failed`: {text}"))?;
    if let Some(first) = failed.first() {
        bail!("{} items failed, the first: {first}", failed.len());
    }
    let upserted = json["upserted"].as_u64().unwrap_or(0);
    ensure!(upserted == expected as u64, "upserted {upserted} of {expected} items");
    Ok(())
}

/// Fails unless a 202 accepted all `expected` events as new ones; returns its JSON.
pub fn check_accepted(status: StatusCode, body: &[u8], expected: usize) -> Result<Value> {
    ensure!(status == StatusCode::ACCEPTED, "status {status}: {}", snippet(body));
    let json: Value = serde_json::from_slice(body).with_context(|| snippet(body))?;
    let all_new = json["accepted"] == expected && json["duplicates"] == 0 && json["rejected"] == json!([]);
    ensure!(all_new, "{expected} new events expected: {}", snippet(body));
    Ok(json)
}

/// Upserts `items` in NDJSON bodies of `batch` items each, checking every answer.
pub async fn upsert_items(target: &Target, sender: &mut Connection, items: &[Value], batch: usize) -> Result<()> {
    for (number, chunk) in items.chunks(batch).enumerate() {
        let mut body = String::new();
        for item in chunk {
            body.push_str(&item.to_string());
            body.push('\n');
        }
        let (status, response) = target.call(sender, &CATALOG_ITEMS, body.into()).await?;
        let first = number * batch;
        check_upserted(status, &response, chunk.len())
            .with_context(|| format!("catalog upsert of items {first}..{}", first + chunk.len()))?;
    }
    Ok(())
}

/// Posts `events` in `{"events": [...]}` bodies of `batch` events each, checking that
/// every one was accepted as new.
pub async fn post_events(target: &Target, sender: &mut Connection, events: &[Value], batch: usize) -> Result<()> {
    for chunk in events.chunks(batch) {
        let body = serde_json::to_vec(&json!({ "events": chunk }))?;
        let (status, response) = target.call(sender, &EVENTS, body.into()).await?;
        check_accepted(status, &response, chunk.len()).context("events")?;
    }
    Ok(())
}

/// Search is fed near-real-time: searches `query` every 50 ms until item `id` is among
/// the results, for at most `within`.
pub async fn wait_searchable(
    target: &Target,
    sender: &mut Connection,
    query: &str,
    id: &str,
    within: Duration,
) -> Result<()> {
    let body = serde_json::to_vec(&json!({"query": query, "limit": 50}))?;
    let deadline = Instant::now() + within;
    loop {
        let (status, response) = target.call(sender, &SEARCH, body.clone().into()).await?;
        let found: Value = serde_json::from_slice(&response).unwrap_or(Value::Null);
        let searchable = status == StatusCode::OK
            && found["items"]
                .as_array()
                .is_some_and(|items| items.iter().any(|item| item["id"] == id));
        if searchable {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{id} ({query:?}) not searchable after {} s: {status}",
            within.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
