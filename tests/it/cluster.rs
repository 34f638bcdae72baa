//! Cluster mode (README "Cluster"): three nodes on 127.0.0.1 share 24 shards over a
//! tansu broker whose topics `rankstream cluster init` made. Any node answers any
//! request; each user's state is the one a single node builds from the same events;
//! a node killed with SIGKILL makes only its own keys unavailable, and loses nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common;
use crate::common::cluster::Cluster;
use crate::common::kafka::*;
use crate::common::{assert_same_state, assert_status, event, json, poll_until, StatusCode, TestServer, Value};

const NODES: [&str; 3] = ["a", "b", "c"];
const USERS: usize = 2_000;
const EVENTS_PER_USER: usize = 3;
const ITEMS: usize = 30;
const RECOMMEND: &str = "/v1/recommend";
const STATS: &str = "/v1/admin/stats";
const LAYOUT: [(&str, &str); 3] = [("a", "0-7"), ("b", "8-15"), ("c", "16-23")];

fn item(n: usize) -> String {
    format!("p{n}")
}

/// The `n`-th event of user `u`: views and clicks of items by group, each with its own id.
fn user_event(u: usize, n: usize) -> Value {
    let item = item((u * 7 + n * 3) % ITEMS);
    let fields = json!({"id": format!("ev-{u}-{n}"), "uid": format!("u{u}"), "sid": format!("s{u}"), "item_id": item});
    let mut body = if n.is_multiple_of(2) {
        event("page_view", json!({"page_type": "product"}))
    } else {
        event("click", json!({"click_type": "tile"}))
    };
    body.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    body
}

/// The user state without what differs between two correct nodes: time-decayed
/// affinities are compared within 5 % by `assert_same_state`.
fn state(server: &TestServer, uid: &str) -> Value {
    server.user_state(uid)
}

/// Waits until every node's learner has learned `events` events.
fn wait_learned(cluster: &Cluster, events: u64) {
    for (index, node) in cluster.nodes.iter().enumerate() {
        poll_until(Duration::from_secs(60), "every node to learn every event", || {
            let (status, stats) = node.admin_get(STATS);
            let learned = stats["models"]["events_learned"].as_u64().unwrap_or(0);
            if status == 200 && learned >= events {
                Ok(())
            } else {
                Err(format!(
                    "node {}: {learned} of {events} learned; {}",
                    NODES[index], stats["kafka"]
                ))
            }
        });
    }
}

/// The ranked ids of a 200 recommend reply.
#[track_caller]
fn ranked_ids(reply: &(StatusCode, Value), context: &str) -> Vec<String> {
    assert_status(reply, 200, context)["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no items in {}", reply.1))
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn three_nodes_serve_every_key_as_one_node_would_and_survive_a_kill() {
    let _heavy = crate::common::heavy_test();
    let mut cluster = Cluster::start(&LAYOUT);
    let single = TestServer::start_with_env(&[
        ("RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC", "1000000"),
        ("RANKSTREAM__AUTH__DEFAULT_BURST", "1000000"),
    ]);
    let items: Vec<Value> = (0..ITEMS)
        .map(|n| json!({"id": item(n), "title": format!("Item {n}"), "price": n as f64 + 0.5, "groups": [format!("g{}", n % 4)]}))
        .collect();
    // The catalog goes in through node a; every node serves it.
    let reply = cluster.nodes[0].admin_put("/v1/catalog/items", json!(items));
    assert_eq!(assert_status(&reply, 200, "catalog through a")["upserted"], ITEMS);
    assert_status(
        &single.admin_put("/v1/catalog/items", json!(items)),
        200,
        "catalog on the single node",
    );
    for node in &cluster.nodes {
        poll_until(Duration::from_secs(20), "the catalog on every node", || {
            let reply = node.admin_get(&format!("/v1/catalog/item/items/{}", item(ITEMS - 1)));
            match reply.0 {
                StatusCode::OK => Ok(()),
                status => Err(format!("{status} {}", reply.1)),
            }
        });
        assert_eq!(
            node.table_fields("items"),
            cluster.nodes[0].table_fields("items"),
            "the same inferred types on every node"
        );
    }

    // Events of 2,000 users: each user's events through one way in, in order, so
    // that every way (REST to each node, a producer straight to Kafka) is used.
    let producer = cluster.broker.producer();
    let mut rest: Vec<Vec<Value>> = vec![Vec::new(); NODES.len()];
    let mut everything = Vec::new();
    for u in 0..USERS {
        for n in 0..EVENTS_PER_USER {
            let body = user_event(u, n);
            everything.push(body.clone());
            match u % 4 {
                3 => {
                    producer.send_json(EVENTS_TOPIC, &format!("u{u}"), &body);
                }
                way => rest[way].push(body),
            }
        }
    }
    for (index, events) in rest.iter().enumerate() {
        for batch in events.chunks(250) {
            let reply = cluster.nodes[index].ingest(json!({ "events": batch }));
            let body = assert_status(&reply, 202, "events through a node");
            assert_eq!(body["accepted"], batch.len(), "{body}");
        }
    }
    for batch in everything.chunks(500) {
        assert_status(
            &single.ingest(json!({ "events": batch })),
            202,
            "events on the single node",
        );
    }
    let total = (USERS * EVENTS_PER_USER) as u64;
    wait_learned(&cluster, total);

    for u in 0..USERS {
        let uid = format!("u{u}");
        let expected = state(&single, &uid);
        for (index, node) in cluster.nodes.iter().enumerate() {
            let got = poll_until(Duration::from_secs(20), "the user's events applied", || {
                let got = state(node, &uid);
                match got["event_count"] == expected["event_count"] {
                    true => Ok(got),
                    false => Err(got.to_string()),
                }
            });
            assert_same_state(&expected, &got, &format!("{uid} read on node {}", NODES[index]));
        }
    }

    // The same request on every node ranks the same items in the same order.
    for u in (0..USERS).step_by(97) {
        let request = json!({"model_id": "default", "user_id": format!("u{u}"),
                             "item_ids": (0..ITEMS).map(item).collect::<Vec<_>>()});
        let rankings: Vec<Vec<String>> = cluster
            .nodes
            .iter()
            .map(|node| ranked_ids(&node.admin_post(RECOMMEND, request.clone()), "recommend"))
            .collect();
        assert!(rankings.windows(2).all(|pair| pair[0] == pair[1]), "u{u}: {rankings:?}");
    }

    // Sessions that visit A then B teach every node that B follows A; a click on A
    // posted to node b lifts B in the very next recommend on node c.
    let history: Vec<Value> = (0..20)
        .flat_map(|n| {
            ["A", "B"].map(|item| {
                event(
                    "page_view",
                    json!({"sid": format!("ab-{n}"), "item_id": item, "page_type": "product"}),
                )
            })
        })
        .chain((0..10).flat_map(|n| {
            ["C", "D"].map(|item| {
                event(
                    "page_view",
                    json!({"sid": format!("cd-{n}"), "item_id": item, "page_type": "product"}),
                )
            })
        }))
        .collect();
    assert_status(&cluster.nodes[0].ingest(json!({ "events": history })), 202, "history");
    wait_learned(&cluster, total + 60);
    let fresh = |item: &str| {
        event(
            "click",
            json!({"uid": "u-fresh", "sid": "s-fresh", "item_id": item, "click_type": "tile"}),
        )
    };
    assert_status(&cluster.nodes[1].ingest(fresh("C")), 202, "click on C through b");
    let request =
        json!({"model_id": "default", "user_id": "u-fresh", "session_id": "s-fresh", "item_ids": ["B", "D", "E"]});
    let before = ranked_ids(&cluster.nodes[2].admin_post(RECOMMEND, request.clone()), "after C");
    assert_eq!(before[0], "D", "C's neighbour leads on node c: {before:?}");
    assert_status(&cluster.nodes[1].ingest(fresh("A")), 202, "click on A through b");
    let after = ranked_ids(&cluster.nodes[2].admin_post(RECOMMEND, request.clone()), "after A");
    assert_eq!(
        after[0], "B",
        "A's neighbour leads the very next call on node c: {after:?}"
    );

    // Sessions that start anonymous on the node owning their sid and then carry a uid
    // another node owns: the user absorbs the anonymous part and the session keeps it,
    // as on one node, whichever way the events came in; a request naming only the sid
    // is served with the whole session.
    let pairs: Vec<(String, String)> = (0..)
        .map(|n| (format!("anon-{n}"), format!("who-{n}")))
        .filter(|(sid, uid)| cluster.owner(sid) != cluster.owner(uid))
        .take(6)
        .collect();
    for (k, (sid, uid)) in pairs.iter().enumerate() {
        let anonymous: Vec<Value> = (0..2)
            .map(|i| {
                event(
                    "page_view",
                    json!({"id": format!("{sid}-{i}"), "sid": sid, "item_id": item(k + i), "page_type": "product"}),
                )
            })
            .collect();
        let identified = event(
            "click",
            json!({"id": format!("{sid}-id"), "sid": sid, "uid": uid, "item_id": item(10 + k), "click_type": "tile"}),
        );
        assert_status(
            &cluster.nodes[k % 3].ingest(json!({ "events": anonymous })),
            202,
            "anonymous",
        );
        assert_status(
            &single.ingest(json!({ "events": anonymous })),
            202,
            "anonymous on one node",
        );
        if k % 2 == 0 {
            assert_status(
                &cluster.nodes[(k + 1) % 3].ingest(identified.clone()),
                202,
                "identified",
            );
        } else {
            producer.send_json(EVENTS_TOPIC, uid, &identified);
        }
        assert_status(&single.ingest(identified), 202, "identified on one node");
    }
    // Every node ranks below with models that learned every event so far (the two
    // fresh clicks too): a node whose learner is an event behind ranks differently.
    let learned = total + 60 + 2 + 3 * pairs.len() as u64;
    wait_learned(&cluster, learned);
    for (sid, uid) in &pairs {
        let expected_user = state(&single, uid);
        let expected_session = single.session_state(sid);
        assert_eq!(expected_user["event_count"], 3, "{expected_user}");
        for (index, node) in cluster.nodes.iter().enumerate() {
            let user = poll_until(Duration::from_secs(20), "the identified event applied", || {
                let reply = node.admin_get(&common::user_state_path(uid));
                match reply.1["event_count"] == expected_user["event_count"] {
                    true => Ok(reply.1),
                    false => Err(reply.1.to_string()),
                }
            });
            let context = format!("{uid} (after anonymous {sid}) on node {}", NODES[index]);
            assert_same_state(&expected_user, &user, &context);
            let context = format!("{sid} on node {}", NODES[index]);
            assert_same_state(&expected_session, &node.session_state(sid), &context);
        }
        let request =
            json!({"model_id": "default", "session_id": sid, "item_ids": (0..ITEMS).map(item).collect::<Vec<_>>()});
        let rankings: Vec<Vec<String>> = cluster
            .nodes
            .iter()
            .map(|node| ranked_ids(&node.admin_post(RECOMMEND, request.clone()), "recommend by sid"))
            .collect();
        assert!(
            rankings.windows(2).all(|pair| pair[0] == pair[1]),
            "{sid}: {rankings:?}"
        );
    }
    let claims: u64 = cluster
        .nodes
        .iter()
        .map(|node| {
            node.admin_get(STATS).1["cluster"]["session_claims"]["adopted"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(claims, pairs.len() as u64, "one adopted claim per identified session");

    // A rebuild from the log learns node a's own log; the other nodes' partitions are
    // then learned again, so node a's models still cover every event.
    let reply = cluster.nodes[0].admin_post("/v1/admin/models/retrain", json!({}));
    let rebuilt = assert_status(&reply, 200, "retrain on node a")["events"]
        .as_u64()
        .unwrap();
    assert!(rebuilt < total, "the rebuild read node a's log only: {}", reply.1);
    wait_learned(&cluster, learned);

    // A user deleted through one node is forgotten on every node: a conversation held
    // in one of their sessions, on the node owning the session (not the user's), starts
    // over there.
    let (sid, uid) = &pairs[0];
    let ask = |message: &str| {
        let body = json!({"message": message, "session_id": sid, "conversation_id": "cluster-chat"});
        assert_status(&cluster.nodes[0].admin_post("/chat", body), 200, message)["constraints"].clone()
    };
    let first = ask("something under 10 dollars");
    assert!(first["max_price"].is_object(), "the price is read: {first}");
    let through = (0..3).find(|n| *n != cluster.owner(sid)).expect("another node");
    let reply = cluster.nodes[through].admin_delete(&format!("/v1/users/{uid}"));
    assert_status(&reply, 200, "delete the user");
    poll_until(
        Duration::from_secs(20),
        "the conversation forgotten on the session's node",
        || {
            let constraints = ask("more");
            match constraints.get("max_price").is_none_or(Value::is_null) {
                true => Ok(()),
                false => Err(constraints.to_string()),
            }
        },
    );
    for node in &cluster.nodes {
        let reply = node.admin_get(&common::user_state_path(uid));
        assert_eq!(reply.0, StatusCode::NOT_FOUND, "{uid} after the deletion: {}", reply.1);
        let reply = node.admin_get(&common::session_path(sid));
        assert_eq!(reply.0, StatusCode::NOT_FOUND, "{sid} after the deletion: {}", reply.1);
    }

    // Every node hears every node's heartbeats.
    let members = |node: &TestServer| node.admin_get(STATS).1["cluster"]["members"].clone();
    for node in &cluster.nodes {
        let view = members(node);
        let health: Vec<&str> = view
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["health"].as_str().unwrap())
            .collect();
        assert_eq!(health, ["up", "up", "up"], "{view}");
    }

    // Node c dies: its keys answer 503 with Retry-After on every other node, all
    // others keep working.
    cluster.nodes[2].kill();
    let killed = std::time::Instant::now();
    let (mut down, mut up) = (0, 0);
    for u in (0..USERS).step_by(41) {
        let uid = format!("u{u}");
        for index in [0, 1] {
            let reply = cluster.nodes[index].send(
                common::Method::GET,
                &common::user_state_path(&uid),
                common::Auth::Bearer(&cluster.admin_key),
                common::Payload::Empty,
                &[],
            );
            if cluster.owner(&uid) == 2 {
                assert_eq!(reply.status, 503, "{uid}: {}", reply.body);
                assert_eq!(reply.body["code"], "shard_unavailable", "{}", reply.body);
                assert!(reply.header("retry-after").is_some(), "503 without Retry-After");
                down += 1;
            } else {
                assert_eq!(reply.status, 200, "{uid} on a live node: {}", reply.body);
                up += 1;
            }
        }
    }
    assert!(
        down > 0 && up > 0,
        "both kinds of keys were tried: {down} down, {up} up"
    );
    // Events for c's keys are refused, not lost: accepted ones are applied.
    let mut retried: BTreeMap<String, Value> = BTreeMap::new();
    for u in (0..USERS).step_by(13) {
        let body = event(
            "click",
            json!({"id": format!("late-{u}"), "uid": format!("u{u}"), "item_id": item(u % ITEMS), "click_type": "tile"}),
        );
        let reply = cluster.nodes[0].ingest(body.clone());
        match cluster.owner(&format!("u{u}")) {
            2 => {
                assert_eq!(reply.0, 503, "{}", reply.1);
                retried.insert(format!("u{u}"), body);
            }
            _ => assert_eq!(reply.0, 202, "{}", reply.1),
        }
    }

    // The others declare c down once they have not heard of it for the failure
    // timeout (10 s by default; heartbeats every 2 s), not before.
    let verdict = loop {
        let view = members(&cluster.nodes[0]);
        if view[2]["health"] == "down" {
            break killed.elapsed();
        }
        assert_eq!(view[2]["health"], "up", "{view}");
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "c still up 15 s after its kill: {view}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        verdict >= Duration::from_secs(7),
        "c declared down {verdict:?} after its kill"
    );
    assert_eq!(members(&cluster.nodes[1])[2]["health"], "down");

    // Restarted, c has every acknowledged event once, and takes the retried ones.
    cluster.nodes[2].restart();
    for (uid, body) in &retried {
        assert_status(&cluster.nodes[1].ingest(body.clone()), 202, "retry after the restart");
        let got = state(&cluster.nodes[0], uid);
        let ids: Vec<&str> = got["event_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), EVENTS_PER_USER + 1, "{uid}: {ids:?}");
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "{uid}: an event applied twice: {ids:?}");
    }
    for u in (0..USERS).filter(|u| cluster.owner(&format!("u{u}")) == 2) {
        let uid = format!("u{u}");
        let got = state(&cluster.nodes[1], &uid);
        let late = usize::from(retried.contains_key(&uid));
        assert_eq!(
            got["event_count"],
            EVENTS_PER_USER + late,
            "{uid} after the restart: {got}"
        );
    }
    let status = cluster.cli(&["status"], cluster.topology_file.path());
    assert!(status.contains("16-23") && !status.contains("down"), "{status}");
}

/// A node back on an empty data directory under its old id applies every catalog write
/// of the log, those it took itself before included: it skips only the writes of its
/// data directory, not of its id (it used to skip them and miss its own items).
#[test]
fn a_node_back_on_an_empty_disk_has_the_catalog_it_took_before() {
    let mut cluster = Cluster::start(&[("a", "0-11"), ("b", "12-23")]);
    let items: Vec<Value> = (0..ITEMS)
        .map(|n| json!({"id": item(n), "title": format!("Item {n}"), "groups": ["g1"]}))
        .collect();
    let reply = cluster.nodes[0].admin_put("/v1/catalog/items", json!(items));
    assert_eq!(assert_status(&reply, 200, "catalog through a")["upserted"], ITEMS);
    let last = format!("/v1/catalog/item/items/{}", item(ITEMS - 1));
    poll_until(Duration::from_secs(20), "the catalog on b", || {
        match cluster.nodes[1].admin_get(&last).0.as_u16() {
            200 => Ok(()),
            status => Err(status.to_string()),
        }
    });
    cluster.nodes[0].kill();
    cluster.wipe_data(0);
    cluster.nodes[0].restart();
    let node = &cluster.nodes[0];
    let title = poll_until(Duration::from_secs(30), "a's own catalog writes applied again", || {
        let (status, body) = node.admin_get(&last);
        match status.as_u16() {
            200 => Ok(body["title"].clone()),
            status => Err(format!("{status}: {body}")),
        }
    });
    assert_eq!(title, format!("Item {}", ITEMS - 1));
    for n in 0..ITEMS {
        let (status, body) = node.admin_get(&format!("/v1/catalog/item/items/{}", item(n)));
        assert_eq!(status, 200, "item {n} on a after its empty restart: {body}");
    }
}
