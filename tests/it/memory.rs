//! The live-actor cap bounds resident memory: the same users and events on a node whose
//! cap holds every user and on one whose cap holds a few hundred. RocksDB's memory is
//! kept small on both and the models learn the same events, so what tells the two apart
//! is the live state. (The figures per user are `bench-memory`'s, in BENCHMARKS.md.)

use std::time::Duration;

use crate::common::*;
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// Users added before the first reading (the node's one-time growth), then after it:
/// many users with a few events each, so that what a live key costs whatever its
/// events (its entry, its signals, its slots and key) stands well above the noise.
const WARM_USERS: usize = 10_000;
const MORE_USERS: usize = 100_000;
const EVENTS_PER_USER: usize = 3;
const EVENTS_PER_REQUEST: usize = 10_000;
const ITEMS: usize = 2_000;
/// A cap per shard that holds a few hundred live actors over the default 8 shards.
const SMALL_CAP: usize = 50;
const SHARDS: usize = 8;
/// Time for checkpoints and flushes before RSS is read.
const SETTLE: Duration = Duration::from_secs(3);

fn add_users(server: &TestServer, users: std::ops::Range<usize>) {
    let mut events: Vec<Value> = Vec::with_capacity(EVENTS_PER_REQUEST);
    let now = chrono::Utc::now();
    let post = |events: &mut Vec<Value>| {
        let reply = server.admin_post("/v1/events", json!({ "events": events }));
        let body = assert_status(&reply, 202, "events");
        assert_eq!(body["accepted"], events.len(), "every event accepted: {body}");
        events.clear();
    };
    for user in users {
        for event in 0..EVENTS_PER_USER {
            let at = now - chrono::Duration::seconds(((EVENTS_PER_USER - event) * 10) as i64);
            events.push(json!({
                "type": "view",
                "uid": format!("capped-user-{user:06}"),
                "item_id": format!("item-{:04}", (user * 7 + event * 13) % ITEMS),
                "original_timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            }));
            if events.len() == EVENTS_PER_REQUEST {
                post(&mut events);
            }
        }
    }
    if !events.is_empty() {
        post(&mut events);
    }
}

/// The live actors of every shard and kind, from `/metrics`.
fn live_actors(server: &TestServer) -> usize {
    let response = Client::new()
        .get(format!("{}/metrics", server.base_url))
        .bearer_auth(&server.admin_key)
        .send()
        .expect("scrape");
    let text = response.text().expect("the metrics text");
    text.lines()
        .filter(|line| line.starts_with("rankstream_live_actors{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

/// RSS growth (KiB) over `MORE_USERS` users after `WARM_USERS`, and the live actors at the
/// end, on a node with a cap of `cap_per_shard`.
fn growth_with_cap(cap_per_shard: usize) -> (u64, usize) {
    let cap = cap_per_shard.to_string();
    let server = TestServer::start_with_env(&[
        ("RANKSTREAM__ENGINE__MAX_LIVE_ACTORS_PER_SHARD", cap.as_str()),
        ("RANKSTREAM__STORAGE__MEMORY_MB", "16"),
    ]);
    let items: Vec<Value> = (0..ITEMS)
        .map(|index| {
            json!({"id": format!("item-{index:04}"), "name": format!("Item {index}"),
                            "groups": [format!("group-{}", index % 20)], "price": index % 300})
        })
        .collect();
    assert_status(
        &server.admin_put("/v1/catalog/items", Value::Array(items)),
        200,
        "catalog",
    );
    add_users(&server, 0..WARM_USERS);
    std::thread::sleep(SETTLE);
    let before = server.rss_kib();
    add_users(&server, WARM_USERS..WARM_USERS + MORE_USERS);
    std::thread::sleep(SETTLE);
    (server.rss_kib().saturating_sub(before), live_actors(&server))
}

#[test]
fn the_live_actor_cap_bounds_resident_memory() {
    let (all_live_growth, all_live) = growth_with_cap(100_000);
    let (capped_growth, capped_live) = growth_with_cap(SMALL_CAP);
    assert_eq!(all_live, WARM_USERS + MORE_USERS, "every user live under the large cap");
    assert!(
        capped_live <= SMALL_CAP * SHARDS,
        "{capped_live} live actors over a cap of {SMALL_CAP} on each of {SHARDS} shards"
    );
    eprintln!(
        "RSS growth over {MORE_USERS} users: {} MiB with all live, {} MiB with {capped_live} live",
        all_live_growth / 1024,
        capped_growth / 1024
    );
    // What the cap is for: a user it keeps from being live does not hold its state in
    // memory. Both nodes learn the same events (the models' growth is on both); a live
    // key with three events adds its state and signals, the host's entry and the
    // board's with their keys, and the allocator's rounding: 43-79 MiB over these
    // 100,000 users in six runs (~0.7 KB a key). A cap that bounded nothing would save
    // about nothing; at least 256 bytes saved per user kept out of memory. (1 KiB a user
    // was asserted over 35,000 users with ten events each while a live user cost
    // ~4 KB; at ~2 KB that no longer stood above the noise of the capped node's RSS.)
    let kept_out = MORE_USERS.saturating_sub(capped_live) as u64;
    let saved = all_live_growth.saturating_sub(capped_growth);
    assert!(
        saved >= kept_out / 4,
        "the cap did not bound memory: {capped_growth} KiB capped against {all_live_growth} KiB all live, \
         {saved} KiB saved for {kept_out} users kept out of memory (at least 256 bytes each)"
    );
}
