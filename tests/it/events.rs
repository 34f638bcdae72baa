//! Event ingest: the v1 format (standard and custom types, validation,
//! timestamps, ids, bulk), the engagement format, idempotent re-delivery and scopes.

use crate::common::*;
use chrono::{TimeZone, Utc};

/// The mandatory field of each standard type with a valid value (scroll has none).
fn standard_events() -> Vec<(&'static str, Value)> {
    vec![
        ("page_view", json!({"page_type": "home"})),
        ("module_view", json!({"rank": 2})),
        ("impression", json!({"item_id": "i-imp", "rank": 0})),
        ("click", json!({"item_id": "i-click", "click_type": "tile"})),
        (
            "conversion",
            json!({"conversion_type": "purchase", "item_ids": ["i-a", "i-b"]}),
        ),
        ("dwell_time", json!({"dwell_ms": 1500})),
        ("scroll", json!({})),
    ]
}

#[test]
fn standard_types_are_accepted_and_stored() {
    let server = TestServer::start();
    for (kind, fields) in standard_events() {
        let id = format!("std-{kind}");
        let mut sent = event(kind, fields.clone());
        sent["id"] = json!(id);
        sent["uid"] = json!("u-std");
        sent["sid"] = json!("s-std");
        let ids = assert_ingested(&server.ingest(sent.clone()), 1, 0, kind);
        assert_eq!(ids, std::slice::from_ref(&id));
        let stored = server.stored_event(&id);
        assert_eq!(stored["id"], id.as_str());
        assert_eq!(stored["type"], kind);
        assert_eq!(stored["uid"], "u-std");
        assert_eq!(stored["sid"], "s-std");
        assert!(
            same_value(&sent["original_timestamp"], &stored["original_timestamp"]),
            "{stored}"
        );
        for (field, value) in fields.as_object().unwrap() {
            assert!(
                same_value(value, &stored[field]),
                "{kind}.{field}: sent {value}, stored {stored}"
            );
        }
    }
    assert_eq!(server.user_state("u-std")["event_count"], 7);
    assert_eq!(server.session_state("s-std")["event_count"], 7);
}

#[test]
fn missing_or_mistyped_mandatory_fields_are_rejected() {
    let server = TestServer::start();
    let cases: Vec<(&str, &str, Value)> = vec![
        ("page_view", "page_type", json!(5)),
        ("module_view", "rank", json!("first")),
        ("module_view", "rank", json!(-1)),
        ("impression", "item_id", json!(5)),
        ("impression", "rank", json!("x")),
        ("click", "item_id", json!(["i1"])),
        ("click", "click_type", json!(1)),
        ("conversion", "conversion_type", json!(true)),
        ("conversion", "item_ids", json!("i1")),
        ("conversion", "item_ids", json!([])),
        ("dwell_time", "dwell_ms", json!("100")),
        ("dwell_time", "dwell_ms", json!(-5)),
    ];
    let valid: std::collections::HashMap<&str, Value> = standard_events().into_iter().collect();
    // Index 0 is valid; then for every mandatory field one event without it,
    // then one with each bad value.
    let mut batch = vec![event("scroll", json!({"id": "ok-0", "uid": "u-bad"}))];
    let mut expected_fields = vec![];
    for (kind, fields) in standard_events() {
        for field in fields.as_object().unwrap().keys() {
            let mut body = event(kind, valid[kind].clone());
            body.as_object_mut().unwrap().remove(field);
            expected_fields.push(field.clone());
            batch.push(body);
        }
    }
    for (kind, field, bad) in &cases {
        let mut body = event(kind, valid[kind].clone());
        body[*field] = bad.clone();
        expected_fields.push(field.to_string());
        batch.push(body);
    }
    for (index, body) in batch.iter_mut().enumerate().skip(1) {
        body["id"] = json!(format!("bad-{index}"));
        body["uid"] = json!("u-bad");
    }
    let reply = server.ingest(json!({"events": batch}));
    assert_eq!(assert_ingested(&reply, 1, 0, "mandatory fields"), ["ok-0"]);
    let rejected = rejections(&reply.1["rejected"], "mandatory fields");
    let indices: Vec<u64> = rejected.iter().map(|(index, _)| *index).collect();
    assert_eq!(indices, (1..batch.len() as u64).collect::<Vec<_>>(), "{}", reply.1);
    for ((index, message), field) in rejected.iter().zip(&expected_fields) {
        assert!(
            message.contains(field.as_str()),
            "rejection {index} of {} does not name {field}: {message:?}",
            batch[*index as usize]
        );
        assert_error(
            &server.admin_get(&event_path(&format!("bad-{index}"))),
            404,
            "not_found",
            "rejected event",
        );
    }
    assert_eq!(server.user_state("u-bad")["event_count"], 1);

    // A single invalid event: 400 with details naming the field.
    let body = event("click", json!({"uid": "u-bad", "item_id": "i1"}));
    let reply = server.ingest(body);
    assert_error(&reply, 400, "validation_error", "click without click_type");
    let details = rejections(&reply.1["details"], "single click");
    assert_eq!(details.len(), 1, "{}", reply.1);
    assert_eq!(details[0].0, 0);
    assert!(details[0].1.contains("click_type"), "{details:?}");
}

#[test]
fn custom_types_and_custom_keys_are_kept() {
    let server = TestServer::start();
    let custom = json!({"color": "red", "size": 42, "flags": ["a", "b"], "meta": {"k": "v"}, "ok": true});
    let mut body = event("wishlist_add", custom.clone());
    body["id"] = json!("custom-1");
    body["session_id"] = json!("s-alias");
    body["item_id"] = json!("i-custom");
    server.ingest_ok(body);
    let stored = server.stored_event("custom-1");
    assert_eq!(stored["type"], "wishlist_add");
    assert_eq!(stored["sid"], "s-alias", "session_id is an alias of sid: {stored}");
    assert_eq!(stored["item_id"], "i-custom");
    assert!(same_value(&custom, &stored["properties"]), "properties {stored}");
    assert_eq!(server.session_state("s-alias")["event_count"], 1);

    // A standard type keeps its custom keys too.
    let body = event(
        "click",
        json!({"id": "click-1", "uid": "u1", "item_id": "i1", "click_type": "cta", "campaign": "spring"}),
    );
    server.ingest_ok(body);
    let stored = server.stored_event("click-1");
    assert_eq!(stored["properties"], json!({"campaign": "spring"}));
    assert_eq!(stored["click_type"], "cta");
}

#[test]
fn type_timestamp_and_identity_are_required() {
    let server = TestServer::start();
    let cases = [
        (json!({"type": null, "uid": "u1"}), Some("type")),
        (json!({"type": "", "uid": "u1"}), Some("type")),
        (json!({"type": 5, "uid": "u1"}), Some("type")),
        (
            json!({"original_timestamp": null, "uid": "u1"}),
            Some("original_timestamp"),
        ),
        (json!({}), None),
        (json!({"uid": ""}), None),
        (json!({"uid": 7}), None),
    ];
    for (fields, field) in cases {
        let body = event("scroll", fields);
        let reply = server.ingest(body.clone());
        let message = assert_error(&reply, 400, "validation_error", &body.to_string());
        if let Some(field) = field {
            let detail = &reply.1["details"][0]["message"];
            assert!(
                message.contains(field) || detail.as_str().is_some_and(|d| d.contains(field)),
                "{body}: {field} not named in {}",
                reply.1
            );
        }
    }
    // Each identity alone is enough.
    for identity in ["uid", "sid", "cid"] {
        let body = event("scroll", json!({"id": format!("only-{identity}"), identity: "x1"}));
        server.ingest_ok(body);
        assert_eq!(server.stored_event(&format!("only-{identity}"))[identity], "x1");
    }
}

#[test]
fn timestamp_forms() {
    let server = TestServer::start();
    let cases = [
        (
            json!("2024-05-01T12:00:00+02:00"),
            Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).unwrap(),
        ),
        (
            json!("2024-05-01T10:00:00.250Z"),
            Utc.timestamp_millis_opt(1_714_557_600_250).unwrap(),
        ),
        (json!(1_700_000_000), Utc.timestamp_opt(1_700_000_000, 0).unwrap()),
        (
            json!(1_700_000_000_123_i64),
            Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
        ),
        // Every ISO 8601 form with a date; no offset is UTC; a date alone is midnight.
        (
            json!("2026-11-23"),
            Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap(),
        ),
        (
            json!("2026-11-23T08:30:00"),
            Utc.with_ymd_and_hms(2026, 11, 23, 8, 30, 0).unwrap(),
        ),
        (
            json!("20261123T083000+0100"),
            Utc.with_ymd_and_hms(2026, 11, 23, 7, 30, 0).unwrap(),
        ),
        (
            json!("2026-W48-1"),
            Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap(),
        ),
        (json!("2026-327"), Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap()),
    ];
    for (index, (sent, expected)) in cases.into_iter().enumerate() {
        let id = format!("ts-{index}");
        let body = event(
            "scroll",
            json!({"id": id, "uid": "u-ts", "original_timestamp": sent, "server_timestamp": sent}),
        );
        server.ingest_ok(body);
        let stored = server.stored_event(&id);
        // Normalised to RFC 3339 whatever form came in.
        assert!(
            chrono::DateTime::parse_from_rfc3339(stored["original_timestamp"].as_str().unwrap()).is_ok(),
            "{stored}"
        );
        assert_eq!(parse_time(&stored["original_timestamp"]), expected, "{sent}: {stored}");
        assert_eq!(parse_time(&stored["server_timestamp"]), expected, "{sent}: {stored}");
    }
    for bad in [
        json!("yesterday"),
        json!("2024-13-01T00:00:00Z"),
        json!(true),
        json!({"s": 1}),
    ] {
        let body = event("scroll", json!({"uid": "u-ts", "original_timestamp": bad}));
        assert_error(
            &server.ingest(body),
            400,
            "validation_error",
            &format!("timestamp {bad}"),
        );
    }
    assert_eq!(server.user_state("u-ts")["event_count"], 9);
}

#[test]
fn generated_ids_and_ingest_timestamp() {
    let server = TestServer::start();
    let old = "2020-01-02T03:04:05.000Z";
    let before = now();
    let ids = server.ingest_ok(json!({"events": [
        event("scroll", json!({"uid": "u-gen", "original_timestamp": old})),
        event("scroll", json!({"uid": "u-gen"})),
    ]}));
    let after = now();
    assert_ne!(ids[0], ids[1], "generated ids are unique");
    for id in &ids {
        let bytes = id.as_bytes();
        let uuid_shape = bytes.len() == 36
            && [8, 13, 18, 23].iter().all(|&i| bytes[i] == b'-')
            && bytes[14] == b'7'
            && id.chars().filter(|c| *c != '-').all(|c| c.is_ascii_hexdigit());
        assert!(uuid_shape, "generated id {id:?} is not a UUID v7");
        let stored = server.stored_event(id);
        assert_eq!(stored["id"], id.as_str());
        assert_time_between(&stored["ingest_timestamp"], before, after);
    }
    let stored = server.stored_event(&ids[0]);
    assert_eq!(parse_time(&stored["original_timestamp"]), parse_time(&json!(old)));
    assert_eq!(
        strings(&server.user_state("u-gen"), "event_ids"),
        [ids[1].clone(), ids[0].clone()]
    );
}

#[test]
fn bulk_partial_and_total_rejection() {
    let server = TestServer::start();
    let batch = json!({"events": [
        event("click", json!({"id": "b0", "uid": "u-bulk", "item_id": "i0", "click_type": "tile"})),
        event("click", json!({"type": null, "uid": "u-bulk"})),
        event("page_view", json!({"uid": "u-bulk", "page_type": "pdp"})),
        event("scroll", json!({"uid": "u-bulk", "original_timestamp": "not a time"})),
        event("scroll", json!({"id": "b4", "sid": "s-bulk"})),
        7,
    ]});
    let reply = server.ingest(batch);
    let ids = assert_ingested(&reply, 3, 0, "partial bulk");
    assert_eq!((ids[0].as_str(), ids[2].as_str()), ("b0", "b4"), "{}", reply.1);
    assert_eq!(server.stored_event(&ids[1])["type"], "page_view");
    let indices: Vec<u64> = rejections(&reply.1["rejected"], "partial")
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(indices, [1, 3, 5]);
    assert_eq!(server.user_state("u-bulk")["event_count"], 2);
    assert_eq!(server.session_state("s-bulk")["event_count"], 1);

    let all_bad = json!({"events": [event("click", json!({"uid": "u-x"})), json!("x"), event("scroll", json!({}))]});
    let reply = server.ingest(all_bad);
    assert_error(&reply, 400, "validation_error", "all rejected");
    let indices: Vec<u64> = rejections(&reply.1["details"], "all rejected")
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(indices, [0, 1, 2]);
    assert_error(
        &server.admin_get(&user_state_path("u-x")),
        404,
        "not_found",
        "nothing applied",
    );

    let raw = server.raw(
        Method::POST,
        EVENTS,
        &server.admin_key,
        b"{\"type\": ",
        "application/json",
    );
    assert_error(&raw, 400, "malformed_json", "truncated JSON");
    for body in [json!({"events": 5}), json!(5), json!([])] {
        assert_error(&server.ingest(body.clone()), 422, "validation_error", &body.to_string());
    }
}

fn engagement(kind: &str, user: &str, session: &str, properties: Value) -> Value {
    json!({"type": kind, "userId": user, "sessionId": session, "timestamp": rfc3339_ms(now()), "properties": properties})
}

#[test]
fn engagement_format_on_both_paths() {
    let server = TestServer::start();
    for path in ENGAGEMENT_PATHS {
        let (uid, sid) = (
            format!("eu{path}").replace('/', "-"),
            format!("es{path}").replace('/', "-"),
        );
        let mut one = engagement("view", &uid, &sid, json!({"item_id": "p1", "page_type": "pdp"}));
        one["id"] = json!(format!("{sid}-0"));
        let ids = assert_ingested(&server.admin_post(path, one), 1, 0, path);
        let stored = server.stored_event(&ids[0]);
        assert_eq!(
            (&stored["uid"], &stored["sid"], &stored["item_id"]),
            (&json!(uid), &json!(sid), &json!("p1")),
            "{stored}"
        );
        assert_eq!(stored["type"], "view");

        // The standard types need the same fields as on `/v1/events`, from `properties`.
        let mut array = vec![engagement(
            "click",
            &uid,
            &sid,
            json!({"item_id": "p2", "click_type": "tile"}),
        )];
        for missing in ["userId", "sessionId", "timestamp", "properties"] {
            let mut bad = engagement("click", &uid, &sid, json!({"item_id": "px"}));
            bad.as_object_mut().unwrap().remove(missing);
            array.push(bad);
        }
        let mut unix = engagement("search", &uid, &sid, json!({"query": "tents"}));
        unix["timestamp"] = json!(1_700_000_000_500_i64);
        array.push(unix);
        array.push(engagement(
            "purchase",
            &uid,
            &sid,
            json!({"item_id": "p3", "order_id": "o1", "total_value": 9.5, "currency": "EUR"}),
        ));
        array.push(engagement("click", &uid, &sid, json!({})));
        array.push(engagement("page_view", &uid, &sid, json!({"item_id": "p1"})));
        array.push(engagement("conversion", &uid, &sid, json!({"item_id": "p3"})));
        let reply = server.admin_post(path, json!(array));
        let ids = assert_ingested(&reply, 3, 0, path);
        let indices: Vec<u64> = rejections(&reply.1["rejected"], path).iter().map(|r| r.0).collect();
        assert_eq!(indices, [1, 2, 3, 4, 7, 8, 9], "{path}");
        assert_eq!(
            parse_time(&server.stored_event(&ids[1])["original_timestamp"]),
            Utc.timestamp_millis_opt(1_700_000_000_500).unwrap()
        );

        let state = server.session_state(&sid);
        assert_eq!(state["uid"], uid.as_str());
        assert_eq!(state["event_count"], 4);
        let recent = recent_items(&state);
        let expected = [("p3", "purchase"), ("p2", "click"), ("p1", "view")];
        assert_eq!(
            recent.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect::<Vec<_>>(),
            expected,
            "{path}"
        );
        assert_eq!(strings(&state, "queries"), ["tents"]);
        assert_eq!(server.user_state(&uid)["event_count"], 4);

        let single_bad = json!({"type": "view", "sessionId": sid, "timestamp": rfc3339_ms(now()), "properties": {}});
        assert_error(&server.admin_post(path, single_bad), 400, "validation_error", path);
        let all_bad = json!([{"type": "view"}, {"userId": uid}]);
        let reply = server.admin_post(path, all_bad);
        assert_error(&reply, 400, "validation_error", path);
        assert_eq!(
            rejections(&reply.1["details"], path)
                .iter()
                .map(|r| r.0)
                .collect::<Vec<_>>(),
            [0, 1]
        );
        // This endpoint's errors are 400s (SPEC "Errors").
        assert_error(&server.admin_post(path, json!(5)), 400, "validation_error", path);
        assert_error(&server.admin_post(path, json!([])), 400, "validation_error", path);
        let raw = server.raw(Method::POST, path, &server.admin_key, b"[{", "application/json");
        assert_error(&raw, 400, "malformed_json", path);
        assert_eq!(
            server.session_state(&sid)["event_count"],
            4,
            "{path}: rejected events not applied"
        );
    }
}

#[test]
fn redelivery_is_applied_once() {
    let server = TestServer::start();
    let first = event(
        "click",
        json!({"id": "dup-1", "uid": "u-dup", "sid": "s-dup", "item_id": "i1", "click_type": "t"}),
    );
    assert_eq!(assert_ingested(&server.ingest(first.clone()), 1, 0, "first"), ["dup-1"]);
    assert_eq!(
        assert_ingested(&server.ingest(first.clone()), 1, 1, "re-delivery"),
        ["dup-1"]
    );
    let state = server.session_state("s-dup");
    assert_eq!(state["event_count"], 1);
    assert_eq!(strings(&state, "event_ids"), ["dup-1"]);

    let second = event(
        "click",
        json!({"id": "dup-2", "uid": "u-dup", "sid": "s-dup", "item_id": "i2", "click_type": "t"}),
    );
    let third = event(
        "click",
        json!({"id": "dup-3", "uid": "u-dup", "sid": "s-dup", "item_id": "i3", "click_type": "t"}),
    );
    let reply = server.ingest(json!({"events": [second, second, third, first]}));
    assert_eq!(
        assert_ingested(&reply, 4, 2, "bulk with repeats"),
        ["dup-2", "dup-2", "dup-3", "dup-1"]
    );
    for state in [server.session_state("s-dup"), server.user_state("u-dup")] {
        assert_eq!(state["event_count"], 3, "{state}");
        assert_eq!(strings(&state, "event_ids"), ["dup-3", "dup-2", "dup-1"]);
        let items: Vec<String> = recent_items(&state).into_iter().map(|(item, _)| item).collect();
        assert_eq!(items, ["i3", "i2", "i1"]);
    }

    // The engagement format is idempotent too.
    let mut view = engagement("view", "u-dup", "s-dup", json!({"item_id": "i4"}));
    view["id"] = json!("dup-4");
    assert_ingested(
        &server.admin_post(ENGAGEMENT_PATHS[0], view.clone()),
        1,
        0,
        "engagement",
    );
    assert_ingested(
        &server.admin_post(ENGAGEMENT_PATHS[1], json!([view])),
        1,
        1,
        "engagement again",
    );
    assert_eq!(server.user_state("u-dup")["event_count"], 4);
}

#[test]
fn scopes() {
    let server = TestServer::start();
    let writer = server.create_key(&["events:write"], json!({"name": "writer"}));
    let others: Vec<&str> = ALL_SCOPES
        .iter()
        .copied()
        .filter(|s| *s != "events:write" && *s != "admin")
        .collect();
    let no_events = server.create_key(&others, json!({"name": "no events"}));
    let body = event(
        "click",
        json!({"id": "sc-1", "uid": "u-sc", "sid": "s-sc", "item_id": "i1", "click_type": "t"}),
    );
    let view = engagement("view", "u-sc", "s-sc", json!({"item_id": "i2"}));

    assert_error(
        &server.post(EVENTS, &no_events, body.clone()),
        403,
        "forbidden",
        "v1 without events:write",
    );
    for path in ENGAGEMENT_PATHS {
        assert_error(&server.post(path, &no_events, view.clone()), 403, "forbidden", path);
    }
    assert_error(
        &server.post(EVENTS, "rs_unknown_key_0123456789", body.clone()),
        401,
        "unauthorized",
        "unknown key",
    );
    assert_error(
        &server.admin_get(&event_path("sc-1")),
        404,
        "not_found",
        "forbidden write stored nothing",
    );

    assert_ingested(&server.post(EVENTS, &writer, body), 1, 0, "writer");
    assert_ingested(
        &server.post(ENGAGEMENT_PATHS[1], &writer, view),
        1,
        0,
        "writer engagement",
    );
    for path in [session_path("s-sc"), user_state_path("u-sc"), event_path("sc-1")] {
        assert_error(&server.get(&path, &writer), 403, "forbidden", &path);
        assert_error(&server.get(&path, &no_events), 403, "forbidden", &path);
        assert_status(&server.admin_get(&path), 200, &path);
    }
    assert_eq!(server.session_state("s-sc")["event_count"], 2);
}

/// Every bulk endpoint takes both the bare array and the wrapped form.
#[test]
fn bulk_bodies_take_the_bare_array_and_the_wrapped_form() {
    let server = TestServer::start();
    let items = json!({"items": [{"id": "w1", "title": "a"}, {"id": "w2", "title": "b"}]});
    let result = assert_status(&server.admin_put(ITEMS, items), 200, "wrapped items").clone();
    assert_eq!(
        (&result["upserted"], &result["failed"]),
        (&json!(2), &json!([])),
        "{result}"
    );
    let users = json!([{"uid": "wu1"}, {"uid": "wu2", "age": 3}]);
    let result = assert_status(&server.admin_post("/v1/users", users), 200, "bare users").clone();
    assert_eq!(result["users"].as_array().map(Vec::len), Some(2), "{result}");
    let events = json!([
        event("scroll", json!({"id": "wb1", "uid": "wu1"})),
        event("scroll", json!({"id": "wb2", "uid": "wu2"})),
    ]);
    assert_ingested(&server.ingest(events), 2, 0, "bare events");
    for path in ENGAGEMENT_PATHS {
        let sid = format!("ws{}", path.len());
        let view = json!({"type": "view", "userId": "wu1", "sessionId": sid, "timestamp": rfc3339_ms(now()),
                          "properties": {"item_id": "w1"}});
        assert_ingested(&server.admin_post(path, json!({ "events": [view] })), 1, 0, path);
    }
    assert_eq!(server.user_state("wu1")["event_count"], 1 + ENGAGEMENT_PATHS.len());
}
