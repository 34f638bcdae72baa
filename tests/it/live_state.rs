//! Live state: session and user snapshots after events (recent items, queries,
//! affinities from catalog items), stitching, passivation, eviction, user
//! deletion and restarts.

use std::time::{Duration, Instant};

use crate::common::*;
use chrono::TimeDelta;

fn click(id: &str, uid: Option<&str>, sid: Option<&str>, item: &str) -> Value {
    event(
        "click",
        json!({"id": id, "uid": uid, "sid": sid, "item_id": item, "click_type": "tile"}),
    )
}

fn pairs<'a>(expected: &[(&'a str, &'a str)]) -> Vec<(String, String)> {
    expected.iter().map(|(i, t)| (i.to_string(), t.to_string())).collect()
}

#[test]
fn recent_queries_purchases_and_profile() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__ENGINE__RECENT_ITEMS", "3")]);
    assert_error(
        &server.admin_get(&session_path("s-live")),
        404,
        "not_found",
        "unknown session",
    );
    assert_error(
        &server.admin_get(&user_state_path("u-live")),
        404,
        "not_found",
        "unknown user",
    );
    let user = json!({"uid": "u-live", "country": "NO", "tier": "gold"});
    assert_status(&server.admin_post("/v1/users", user), 200, "user row");
    let state = server.user_state("u-live");
    assert_eq!(state["event_count"], 0, "{state}");
    assert_eq!(
        (&state["profile"]["country"], &state["profile"]["tier"]),
        (&json!("NO"), &json!("gold"))
    );
    assert_eq!(state["recent"], json!([]));

    let (uid, sid) = (Some("u-live"), Some("s-live"));
    server.ingest_ok(click("l0", uid, sid, "i1"));
    server.ingest_ok(event(
        "add_to_cart",
        json!({"id": "l1", "uid": "u-live", "sid": "s-live", "item_id": "i2"}),
    ));
    for state in [server.session_state("s-live"), server.user_state("u-live")] {
        assert_eq!(
            recent_items(&state),
            pairs(&[("i2", "add_to_cart"), ("i1", "click")]),
            "{state}"
        );
        assert_eq!(state["recent"][1]["dwell_ms"], Value::Null);
        assert_eq!(state["live"], true, "{state}");
        assert_eq!(state["event_count"], 2);
        assert_eq!(strings(&state, "event_ids"), ["l1", "l0"]);
        parse_time(&state["last_event_at"]);
    }
    assert_eq!(server.session_state("s-live")["uid"], "u-live");

    server.ingest_ok(json!({"events": [
        event("search", json!({"id": "l2", "uid": "u-live", "sid": "s-live", "search_query": "red shoes"})),
        event("dwell_time", json!({"id": "l3", "uid": "u-live", "sid": "s-live", "item_id": "i3", "dwell_ms": 1500})),
        event("search", json!({"id": "l4", "uid": "u-live", "sid": "s-live", "query": "boots"})),
    ]}));
    server.ingest_ok(click("l5", uid, sid, "i4"));
    let expected = pairs(&[("i4", "click"), ("i3", "dwell_time"), ("i2", "add_to_cart")]);
    for state in [server.session_state("s-live"), server.user_state("u-live")] {
        assert_eq!(
            recent_items(&state),
            expected,
            "recent capped at engine.recent_items=3: {state}"
        );
        assert_eq!(state["recent"][1]["dwell_ms"].as_f64(), Some(1500.0), "{state}");
        assert_eq!(strings(&state, "queries"), ["boots", "red shoes"]);
        assert_eq!(state["event_count"], 6);
        assert_eq!(strings(&state, "event_ids"), ["l5", "l4", "l3", "l2", "l1", "l0"]);
    }
    let state = server.user_state("u-live");
    assert_eq!(strings(&state, "sessions"), ["s-live"]);
    assert_eq!(state["profile"]["country"], "NO");

    let conversion = json!({"uid": "u-buyer", "conversion_type": "purchase", "item_ids": ["i7", "i8"]});
    server.ingest_ok(event("conversion", conversion));
    let mut purchased = strings(&server.user_state("u-buyer"), "purchased");
    purchased.sort();
    assert_eq!(purchased, ["i7", "i8"]);
}

#[test]
fn affinities_come_from_catalog_items() {
    let server = TestServer::start();
    let items = [
        json!({"id": "shoe1", "groups": ["Shoes", "Footwear"], "tags": ["red", "sale"], "price": 7}),
        json!({"id": "shoe2", "groups": ["Shoes"], "tags": ["red"], "price": 7}),
        json!({"id": "hat1", "group": "Hats", "tags": ["blue"], "price": 100}),
        json!({"id": "bag1", "category": "Bags", "price": 0}),
        json!({"id": "twin", "_table": "shelf_a", "groups": ["Alpha"]}),
        json!({"id": "twin", "_table": "shelf_b", "groups": ["Beta"]}),
    ];
    for item in items {
        assert_status(&server.admin_put(ITEM, item.clone()), 200, &item.to_string());
    }
    let (uid, sid) = (Some("u-aff"), Some("s-aff"));
    for (n, item) in ["shoe1", "shoe2", "shoe1", "hat1", "bag1"].iter().enumerate() {
        server.ingest_ok(click(&format!("a{n}"), uid, sid, item));
    }
    for state in [server.session_state("s-aff"), server.user_state("u-aff")] {
        let score = |key| affinity(&state, key);
        assert!(score("group:Hats") > 0.0, "{state}");
        assert!(score("group:Shoes") > score("group:Hats"), "3 clicks beat 1: {state}");
        assert!(score("group:Footwear") > 0.0 && score("group:Bags") > 0.0, "{state}");
        assert!(
            score("tag:red") > score("tag:blue") && score("tag:blue") > 0.0,
            "{state}"
        );
        assert!(score("tag:sale") > 0.0, "{state}");
        assert!(
            score("price_band:3") > score("price_band:6") && score("price_band:6") > 0.0,
            "{state}"
        );
        assert!(score("price_band:0") > 0.0, "price 0 -> band 0: {state}");
        assert_eq!(score("group:Alpha") + score("group:Beta"), 0.0, "{state}");
    }

    // item_id_relation picks the table to look the item up in.
    let relation = json!({"sid": "s-rel", "item_id": "twin", "item_id_relation": "shelf_b", "click_type": "t"});
    server.ingest_ok(event("click", relation));
    let state = server.session_state("s-rel");
    assert!(affinity(&state, "group:Beta") > 0.0, "{state}");
    assert_eq!(affinity(&state, "group:Alpha"), 0.0, "{state}");
}

#[test]
fn anonymous_session_is_stitched_to_user() {
    let server = TestServer::start();
    assert_status(
        &server.admin_put(ITEM, json!({"id": "a1", "groups": ["Anon"]})),
        200,
        "item",
    );
    server.ingest_ok(click("st0", None, Some("s-anon"), "a1"));
    server.ingest_ok(click("st1", None, Some("s-anon"), "a2"));
    let state = server.session_state("s-anon");
    assert_eq!(
        (&state["uid"], &state["event_count"]),
        (&Value::Null, &json!(2)),
        "{state}"
    );
    assert_error(
        &server.admin_get(&user_state_path("u-st")),
        404,
        "not_found",
        "no user yet",
    );

    server.ingest_ok(click("st2", Some("u-st"), Some("s-anon"), "a3"));
    let session = server.session_state("s-anon");
    assert_eq!(session["uid"], "u-st", "{session}");
    assert_eq!(session["event_count"], 3);
    assert_eq!(strings(&session, "event_ids"), ["st2", "st1", "st0"]);
    assert_eq!(
        recent_items(&session),
        pairs(&[("a3", "click"), ("a2", "click"), ("a1", "click")])
    );

    let user = server.user_state("u-st");
    assert!(strings(&user, "sessions").contains(&"s-anon".to_string()), "{user}");
    let mut items: Vec<String> = recent_items(&user).into_iter().map(|(item, _)| item).collect();
    items.sort();
    assert_eq!(items, ["a1", "a2", "a3"], "the user has the anonymous signals: {user}");
    assert!(affinity(&user, "group:Anon") > 0.0, "{user}");
}

#[test]
fn idle_actors_passivate_and_restore() {
    let server = TestServer::start_with_env(&[
        ("RANKSTREAM__ENGINE__SESSION_IDLE_TTL_MS", "300"),
        ("RANKSTREAM__ENGINE__USER_IDLE_TTL_MS", "300"),
    ]);
    assert_status(
        &server.admin_put(ITEM, json!({"id": "x1", "groups": ["G"], "price": 3})),
        200,
        "item",
    );
    server.ingest_ok(click("p0", Some("u-p"), Some("s-p"), "x1"));
    server.ingest_ok(click("p1", Some("u-p"), Some("s-p"), "x2"));
    let before = [server.session_state("s-p"), server.user_state("u-p")];
    assert_eq!(before[0]["event_count"], 2);

    let read = |index: usize| match index {
        0 => server.session_state("s-p"),
        _ => server.user_state("u-p"),
    };
    for (index, old) in before.iter().enumerate() {
        // Probes are 1 s apart (more than the TTL), so that the reads
        // themselves cannot keep the actor busy.
        let passivated = poll_every(Duration::from_secs(1), Duration::from_secs(10), "passivation", || {
            let state = read(index);
            if state["live"] == false {
                Ok(state)
            } else {
                Err(state.to_string())
            }
        });
        assert_same_state(old, &passivated, "after passivation");
        let again = read(index);
        assert_eq!(again["live"], false, "a snapshot read restarted the actor: {again}");
        assert_same_state(old, &again, "second read");
    }

    let started = Instant::now();
    server.ingest_ok(click("p2", Some("u-p"), Some("s-p"), "x3"));
    let after = [server.session_state("s-p"), server.user_state("u-p")];
    let quick = started.elapsed() < Duration::from_millis(250);
    for (old, new) in before.iter().zip(&after) {
        if quick {
            assert_eq!(new["live"], true, "a new event restarts the actor: {new}");
        }
        assert_eq!(new["event_count"], 3, "{new}");
        assert_eq!(strings(new, "event_ids"), ["p2", "p1", "p0"]);
        let mut expected = vec![("x3".to_string(), "click".to_string())];
        expected.extend(recent_items(old));
        assert_eq!(recent_items(new), expected, "restored recent items: {new}");
        assert!(
            affinity(new, "group:G") > 0.0 && affinity(new, "price_band:2") > 0.0,
            "{new}"
        );
    }
}

#[test]
fn eviction_keeps_every_state_complete() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__ENGINE__MAX_LIVE_ACTORS_PER_SHARD", "2")]);
    let count = |user: usize| 1 + user % 3;
    for round in 0..3 {
        let batch: Vec<Value> = (0..30)
            .filter(|&user| round < count(user))
            .map(|user| {
                let uid = format!("ev-{user:02}");
                click(
                    &format!("ev-{user}-{round}"),
                    Some(uid.as_str()),
                    None,
                    &format!("it-{user}-{round}"),
                )
            })
            .collect();
        // Half the round one event per request, the rest in one bulk.
        let (single, bulk) = batch.split_at(batch.len() / 2);
        for body in single {
            server.ingest_ok(body.clone());
        }
        server.ingest_ok(json!({"events": bulk}));
    }
    let live = poll_until(Duration::from_secs(10), "at most 16 live actors", || {
        let mut live = vec![];
        for user in 0..30 {
            let state = server.user_state(&format!("ev-{user:02}"));
            assert_eq!(state["event_count"], count(user), "{state}");
            let ids: Vec<String> = (0..count(user))
                .rev()
                .map(|round| format!("ev-{user}-{round}"))
                .collect();
            assert_eq!(strings(&state, "event_ids"), ids, "{state}");
            assert_eq!(recent_items(&state).len(), count(user), "{state}");
            if state["live"] == true {
                live.push(user);
            }
        }
        if live.len() <= 16 {
            Ok(live)
        } else {
            Err(format!("live users {live:?}"))
        }
    });
    assert!(live.contains(&29), "the most recently used actor is live: {live:?}");

    let before = server.user_state("ev-00");
    server.ingest_ok(click("ev-0-new", Some("ev-00"), None, "it-new"));
    let after = server.user_state("ev-00");
    assert_eq!(after["event_count"], 2, "{before} -> {after}");
    assert_eq!(strings(&after, "event_ids"), ["ev-0-new", "ev-0-0"]);
}

#[test]
fn deleting_a_user_removes_events_and_state() {
    let server = TestServer::start();
    assert_status(&server.admin_post("/v1/users", json!({"uid": "u-del"})), 200, "row");
    server.ingest_ok(click("d0", Some("u-del"), None, "i1"));
    server.ingest_ok(json!({"events": [
        click("d1", Some("u-del"), Some("s-del"), "i2"),
        click("k0", Some("u-keep"), None, "i3"),
        event("scroll", json!({"id": "d2", "uid": "u-del"})),
    ]}));
    server.ingest_ok(click("k1", Some("u-keep"), None, "i4"));
    assert_eq!(server.user_state("u-del")["event_count"], 3);

    let reply = server.admin_delete("/v1/users/u-del");
    let body = assert_status(&reply, 200, "delete");
    assert_eq!(
        (&body["uid"], &body["deleted"], &body["events_removed"]),
        (&json!("u-del"), &json!(true), &json!(3)),
        "{body}"
    );
    assert_eq!(body["removed"]["sessions"], json!(["s-del"]), "{body}");
    for id in ["d0", "d1", "d2"] {
        assert_error(&server.admin_get(&event_path(id)), 404, "not_found", id);
    }
    assert_error(&server.admin_get(&user_state_path("u-del")), 404, "not_found", "state");
    for id in ["k0", "k1"] {
        assert_eq!(server.stored_event(id)["uid"], "u-keep");
    }
    let keep = server.user_state("u-keep");
    assert_eq!(
        (&keep["event_count"], strings(&keep, "event_ids")),
        (&json!(2), vec!["k1".to_string(), "k0".to_string()])
    );

    server.ingest_ok(click("d3", Some("u-del"), None, "i5"));
    let state = server.user_state("u-del");
    assert_eq!(state["event_count"], 1, "starts from nothing: {state}");
    assert_eq!(strings(&state, "event_ids"), ["d3"]);
    assert_eq!(recent_items(&state), pairs(&[("i5", "click")]));
}

#[test]
fn restart_keeps_live_state() {
    let mut server = TestServer::start();
    assert_status(
        &server.admin_put(ITEM, json!({"id": "r1", "tags": ["t"], "price": 15})),
        200,
        "item",
    );
    let old = rfc3339_ms(now() - TimeDelta::seconds(30));
    server.ingest_ok(json!({"events": [
        click("r0", Some("u-r1"), Some("s-r1"), "r1"),
        event("search", json!({"id": "r1", "uid": "u-r1", "sid": "s-r1", "query": "q"})),
        event("conversion", json!({"id": "r2", "uid": "u-r1", "sid": "s-r1", "conversion_type": "buy", "item_ids": ["r1"]})),
        event("dwell_time", json!({"id": "r3", "uid": "u-r2", "dwell_ms": 10, "original_timestamp": old})),
        click("r4", None, Some("s-r3"), "r9"),
    ]}));
    let paths = [
        session_path("s-r1"),
        session_path("s-r3"),
        user_state_path("u-r1"),
        user_state_path("u-r2"),
    ];
    let snapshot = |server: &TestServer| -> Vec<Value> {
        paths
            .iter()
            .map(|path| assert_status(&server.admin_get(path), 200, path).clone())
            .collect()
    };
    let before = snapshot(&server);
    let events: Vec<Value> = ["r0", "r1", "r2", "r3", "r4"]
        .iter()
        .map(|id| server.stored_event(id))
        .collect();

    server.stop();
    server.restart();
    for ((path, old), new) in paths.iter().zip(&before).zip(snapshot(&server)) {
        assert_same_state(old, &new, path);
    }
    for stored in events {
        assert_eq!(server.stored_event(stored["id"].as_str().unwrap()), stored);
    }
    server.ingest_ok(click("r5", Some("u-r1"), Some("s-r1"), "r1"));
    assert_eq!(server.session_state("s-r1")["event_count"], 4);
    assert_eq!(server.user_state("u-r1")["event_count"], 4);
}
