//! Kafka ingestion (notes/EVENTS_CONTRACT.md, "Kafka"): every test runs its own tansu
//! broker (tools/broker.sh) and a server started with `--config FILE` pointing at it.

use std::collections::{BTreeMap, BTreeSet};

use crate::common;
use crate::common::kafka::*;
use crate::common::{assert_status, event, json, recent_items, rfc3339_ms, strings, Value, EVENTS};
use rankstream::topology::shard_for;
use rdkafka::message::Message;

/// The id a message without `id` gets: `kafka:{topic}:{partition}:{offset}`.
fn position_id(topic: &str, (partition, offset): (i32, i64)) -> String {
    format!("kafka:{topic}:{partition}:{offset}")
}

/// A broker and a server consuming from it.
fn setup() -> (Broker, KafkaServer, Producer) {
    let broker = Broker::start();
    let server = KafkaServer::start(&broker.server_config());
    let producer = broker.producer();
    (broker, server, producer)
}

/// A snapshot's `event_ids` as a set, asserting it holds no duplicate.
#[track_caller]
fn unique_event_ids(state: &Value) -> BTreeSet<String> {
    let ids = strings(state, "event_ids");
    let set: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(set.len(), ids.len(), "duplicate event ids in {state}");
    set
}

/// Asserts the stats counters named in `expected` have exactly those values.
#[track_caller]
fn assert_stats(server: &KafkaServer, expected: Value) {
    let stats = server.stats();
    for (name, value) in expected.as_object().unwrap() {
        assert_eq!(&stats[name], value, "stats.kafka.{name} in {stats}");
    }
}

#[test]
fn consume_applies_events_to_live_state() {
    let (_broker, server, producer) = setup();
    assert_stats(&server, json!({"consumed": 0, "applied": 0, "dead_lettered": 0}));
    // uid -> (event ids, item ids) produced for it
    let mut produced: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for i in 0..50 {
        let uid = format!("u{}", i % 5);
        let item = format!("item-{i}");
        let mut body = if i % 2 == 0 {
            event("click", json!({"item_id": item, "click_type": "tile"}))
        } else {
            event("page_view", json!({"item_id": item, "page_type": "pdp"}))
        };
        body["uid"] = json!(uid);
        body["sid"] = json!(format!("s-{uid}"));
        if i % 3 == 0 {
            body["id"] = json!(format!("kafka-ev-{i}"));
        }
        let position = producer.send_json(EVENTS_TOPIC, &uid, &body);
        let id = match body["id"].as_str() {
            Some(id) => id.to_string(),
            None => position_id(EVENTS_TOPIC, position),
        };
        let entry = produced.entry(uid).or_default();
        entry.0.insert(id);
        entry.1.insert(item);
    }
    for j in 0..5 {
        let uid = format!("u{j}");
        let item = format!("eng-item-{j}");
        let body = json!({
            "type": "view", "userId": uid, "sessionId": format!("s-{uid}"),
            "timestamp": rfc3339_ms(common::now()), "properties": {"item_id": item},
        });
        let position = producer.send_json(ENGAGEMENT_TOPIC, &uid, &body);
        let entry = produced.get_mut(&uid).unwrap();
        entry.0.insert(position_id(ENGAGEMENT_TOPIC, position));
        entry.1.insert(item);
    }

    for (uid, (ids, items)) in &produced {
        assert_eq!(ids.len(), 11, "{uid}");
        let state = server.wait_for_count(uid, 11);
        assert_eq!(&unique_event_ids(&state), ids, "event ids of {uid}: {state}");
        let recent: BTreeSet<String> = recent_items(&state).into_iter().map(|(item, _)| item).collect();
        assert_eq!(&recent, items, "recent items of {uid}: {state}");
        assert_eq!(strings(&state, "sessions"), vec![format!("s-{uid}")], "{state}");
    }
    let stats = server.stats();
    assert!(stats["consumed"].as_u64().unwrap() >= 55, "{stats}");
    assert_stats(
        &server,
        json!({"applied": 55, "duplicates": 0, "forwarded": 0, "dead_lettered": 0}),
    );
}

/// Produces `count` events without `id` for `uid`; returns their position ids.
fn produce_batch(producer: &Producer, uid: &str, first: usize, count: usize) -> Vec<String> {
    (first..first + count)
        .map(|i| {
            let body = event(
                "click",
                json!({"uid": uid, "item_id": format!("item-{i}"), "click_type": "tile"}),
            );
            position_id(EVENTS_TOPIC, producer.send_json(EVENTS_TOPIC, uid, &body))
        })
        .collect()
}

/// 30 events, a stop (graceful or SIGKILL) right after they are applied, 20 more
/// while the server is down, a restart: exactly 50 applied, each once.
fn resume_after_restart(crash: bool) {
    let (broker, mut server, producer) = setup();
    let uid = "resume";
    let partition = i32::from(shard_for(uid.as_bytes(), 8));
    let mut ids = produce_batch(&producer, uid, 0, 30);
    server.wait_for_count(uid, 30);
    if crash {
        server.kill();
    } else {
        // The group commit follows the durable store of the offsets: once it shows
        // 30, a restart must resume at offset 30 and read nothing twice.
        wait_for("group offset 30", || {
            match broker.committed_offset("rankstream", EVENTS_TOPIC, partition) {
                Some(30) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        server.stop();
    }
    ids.extend(produce_batch(&producer, uid, 30, 20));
    server.restart();
    let state = server.wait_for_count(uid, 50);
    for _ in 0..20 {
        let again = server.user_state(uid).unwrap();
        assert_eq!(again["event_count"], 50, "count moved after reaching 50: {again}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let expected: BTreeSet<String> = ids.into_iter().collect();
    assert_eq!(expected.len(), 50);
    assert_eq!(unique_event_ids(&state), expected, "{state}");
    assert_eq!(unique_event_ids(&server.user_state(uid).unwrap()), expected);
    // Only the 20 new events are first deliveries, whatever a crash made it read again.
    let stats = server.stats();
    assert_eq!(stats["applied"], 20, "{stats}");
    let consumed = stats["consumed"].as_u64().unwrap();
    assert_eq!(stats["duplicates"].as_u64().unwrap(), consumed - 20, "{stats}");
    if !crash {
        assert_eq!(consumed, 20, "resumed at the stored offset: {stats}");
    }
}

#[test]
fn offsets_resume_after_restart_nothing_lost_nothing_twice() {
    resume_after_restart(false);
}

#[test]
fn offsets_resume_after_kill_nothing_lost_nothing_twice() {
    resume_after_restart(true);
}

#[test]
fn malformed_messages_are_dead_lettered() {
    let (broker, server, producer) = setup();
    let not_json = b"{not json at all".to_vec();
    let no_type = serde_json::to_vec(&json!({
        "id": "bad-no-type", "uid": "bad2", "original_timestamp": rfc3339_ms(common::now()),
    }))
    .unwrap();
    let bad = [
        (
            "bad1",
            not_json.clone(),
            producer.send(EVENTS_TOPIC, "bad1", &not_json, None),
        ),
        (
            "bad2",
            no_type.clone(),
            producer.send(EVENTS_TOPIC, "bad2", &no_type, None),
        ),
    ];
    let valid = event(
        "click",
        json!({"id": "good-1", "uid": "good", "item_id": "i1", "click_type": "tile"}),
    );
    producer.send_json(EVENTS_TOPIC, "good", &valid);

    let state = server.wait_for_count("good", 1);
    assert_eq!(strings(&state, "event_ids"), vec!["good-1"], "{state}");
    wait_for("dead_lettered == 2", || match server.stat("dead_lettered") {
        2 => Ok(()),
        other => Err(format!("{other}: {}", server.stats())),
    });
    assert_stats(&server, json!({"consumed": 3, "applied": 1, "dead_lettered": 2}));

    let letters = broker.read_partition(DEAD_LETTER_TOPIC, 0, 2);
    assert_eq!(letters.len(), 2, "dead-letter topic holds exactly the 2 bad messages");
    for (key, payload, (partition, offset)) in &bad {
        let letter = letters
            .iter()
            .find(|m| m.key() == Some(key.as_bytes()))
            .unwrap_or_else(|| panic!("no dead letter with key {key}"));
        assert_eq!(letter.payload(), Some(payload.as_slice()), "payload of {key}");
        let error = header(letter, "rankstream-error").unwrap_or_default();
        assert!(!error.trim().is_empty(), "rankstream-error header of {key}");
        let source = |name: &str| header(letter, &format!("rankstream-source-{name}"));
        assert_eq!(source("topic").as_deref(), Some(EVENTS_TOPIC), "{key}");
        assert_eq!(source("partition"), Some(partition.to_string()), "{key}");
        assert_eq!(source("offset"), Some(offset.to_string()), "{key}");
    }
    // Never applied.
    assert_eq!(server.user_state("bad2"), None);
    assert_eq!(server.get("/v1/events/bad-no-type").0, 404);
}

#[test]
fn event_on_wrong_partition_is_forwarded_not_dropped() {
    let (_broker, server, producer) = setup();
    let right = i32::from(shard_for(b"x", 8));
    let wrong = (right + 3) % 8;
    assert_ne!(right, wrong);
    let body = event(
        "click",
        json!({"id": "fwd-1", "uid": "x", "item_id": "i1", "click_type": "tile"}),
    );
    let position = producer.send(EVENTS_TOPIC, "x", &serde_json::to_vec(&body).unwrap(), Some(wrong));
    assert_eq!(position.0, wrong);

    let state = server.wait_for_count("x", 1);
    assert_eq!(strings(&state, "event_ids"), vec!["fwd-1"], "{state}");
    assert_status(&server.get("/v1/events/fwd-1"), 200, "stored forwarded event");
    assert_stats(&server, json!({"consumed": 1, "applied": 1, "forwarded": 1}));
}

#[test]
fn rest_events_are_produced_before_the_202() {
    let (broker, server, _producer) = setup();
    let body = event(
        "click",
        json!({"id": "rest-1", "uid": "r", "item_id": "i1", "click_type": "tile"}),
    );
    let reply = server.post(EVENTS, &body);
    let accepted = assert_status(&reply, 202, "POST /v1/events");
    assert_eq!(accepted["ids"], json!(["rest-1"]), "{accepted}");

    // Acknowledged by the broker before the 202: already in the topic now.
    let partition = i32::from(shard_for(b"r", 8));
    let messages = broker.read_partition(EVENTS_TOPIC, partition, 0);
    assert!(
        !messages.is_empty(),
        "{EVENTS_TOPIC}/{partition} is empty right after the 202"
    );
    let found = messages.iter().find(|m| {
        m.key() == Some(b"r".as_slice())
            && m.payload()
                .is_some_and(|p| String::from_utf8_lossy(p).contains("rest-1"))
    });
    let message = found.unwrap_or_else(|| panic!("no message keyed r with rest-1 in {EVENTS_TOPIC}/{partition}"));
    // rankstream's own encoding is marked by a prefix, not by a header on every message.
    let payload = message.payload().unwrap_or_default();
    assert!(payload.starts_with(b"\0rs1{"), "{}", String::from_utf8_lossy(payload));
    assert_eq!(header(message, "rankstream-format"), None);

    wait_for("duplicates >= 1", || match server.stat("duplicates") {
        0 => Err(server.stats().to_string()),
        _ => Ok(()),
    });
    let state = server.user_state("r").expect("user r");
    assert_eq!(state["event_count"], 1, "{state}");
    assert_eq!(strings(&state, "event_ids"), vec!["rest-1"], "{state}");
    assert_stats(&server, json!({"applied": 0, "duplicates": 1}));
}

#[test]
fn a_broker_outage_answers_503_with_retry_after_and_loses_nothing_acknowledged() {
    let (broker, server, _producer) = setup();
    let click = |id: &str| {
        event(
            "click",
            json!({"id": id, "uid": "o", "item_id": "i", "click_type": "tile"}),
        )
    };
    assert_status(&server.post(EVENTS, &click("before")), 202, "before the outage");

    broker.pause();
    let started = std::time::Instant::now();
    let reply = server.send(
        common::Method::POST,
        EVENTS,
        common::Auth::Bearer(&server.admin_key),
        common::Payload::Json(click("during")),
        &[],
    );
    assert_eq!(reply.status, 503, "a write the broker cannot take: {}", reply.body);
    assert!(reply.header("retry-after").is_some(), "503 without Retry-After");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "answered within the request deadline, not after it: {:?}",
        started.elapsed()
    );

    broker.resume();
    // The node recovers by itself: a retried write is accepted once the broker is back.
    let retried = wait_for("a write accepted after the broker is back", || {
        let reply = server.post(EVENTS, &click("during"));
        match reply.0.as_u16() {
            202 => Ok(reply.1),
            _ => Err(reply.1.to_string()),
        }
    });
    assert_eq!(retried["ids"], json!(["during"]), "{retried}");
    let state = server.wait_for_count("o", 2);
    let ids = unique_event_ids(&state);
    assert_eq!(
        ids,
        BTreeSet::from(["before".to_owned(), "during".to_owned()]),
        "{state}"
    );
}
