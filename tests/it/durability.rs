//! Durability: a graceful restart keeps every acknowledged write, and so does a
//! crash (SIGKILL) right after the acknowledgements.

use std::thread;

use crate::common::*;

#[track_caller]
fn get_ok(server: &TestServer, path: &str) -> Value {
    let reply = server.admin_get(path);
    assert_status(&reply, 200, path).clone()
}

#[test]
fn graceful_restart_keeps_acknowledged_writes() {
    let mut server = TestServer::start();
    let relations = json!([{"field": "brand", "relation_table": "brands"}]);
    assert_status(
        &server.admin_put(ITEM, json!({"id": "b1", "_table": "brands"})),
        200,
        "brand b1",
    );
    let table = json!({"table_name": "shop", "description": "all products", "relations": relations});
    assert_status(&server.admin_put(TABLE, table), 200, "table");
    let items = [
        json!({"id": "p1", "_table": "shop", "title": "Kayak", "price": 49.5, "in_stock": true,
               "tags": ["water"], "released": "2024-05-01T10:00:00Z", "vector": [0.5, 0.25],
               "brand": "b1", "meta": ["k", "v"], "score": 1_700_000_000}),
        json!({"id": "p2", "_table": "shop", "title": "Canoe", "price": 30}),
        json!({"id": "p3", "_table": "shop", "title": "Raft", "price": 20}),
    ];
    for item in &items {
        assert_status(&server.admin_put(ITEM, item.clone()), 200, "item");
    }
    assert_status(&server.admin_delete(&item_path("shop", "p2")), 200, "soft delete p2");
    assert_status(
        &server.admin_delete(&format!("{}?purge=true", item_path("shop", "p3"))),
        200,
        "purge p3",
    );
    let remap = server.admin_put("/v1/catalog/table/shop/fields/score", json!({"type": "time"}));
    assert_status(&remap, 200, "remap score");
    assert_status(&server.admin_put(TABLE, json!({"table_name": "doomed"})), 200, "doomed");
    assert_status(
        &server.admin_put(ITEM, json!({"id": "x", "_table": "doomed"})),
        200,
        "x",
    );
    assert_status(&server.admin_delete("/v1/catalog/table/doomed"), 200, "delete doomed");

    let user = json!({"uid": "u1", "country": "NO", "total_orders": 2, "tags": ["a"]});
    assert_status(&server.admin_post("/v1/users", user), 200, "user u1");
    assert_status(&server.admin_post("/v1/users", json!({"uid": "u2"})), 200, "user u2");
    assert_status(&server.admin_delete("/v1/users/u2"), 200, "delete u2");

    let reader = server.create_key_record(
        &["catalog:read"],
        json!({"name": "reader", "rate_per_sec": 50, "burst": 60}),
    );
    let reader_key = reader["key"].as_str().unwrap().to_string();
    let revoked = server.create_key_record(&["catalog:read"], json!({"name": "revoked"}));
    let revoked_key = revoked["key"].as_str().unwrap().to_string();
    let revoke_path = format!("/v1/admin/keys/{}", revoked["id"].as_str().unwrap());
    assert_status(&server.admin_delete(&revoke_path), 200, "revoke");

    let snapshot_paths = [
        "/v1/catalog/table/shop".to_string(),
        item_path("shop", "p1"),
        item_path("shop", "p2"),
        "/v1/users/u1".to_string(),
    ];
    let snapshots: Vec<Value> = snapshot_paths.iter().map(|path| get_ok(&server, path)).collect();
    assert_eq!(snapshots[2]["is_deleted"], true);
    let listed_reader = |server: &TestServer| {
        let (_, list) = server.admin_get("/v1/admin/keys");
        let keys = list["keys"].as_array().expect("keys").clone();
        keys.into_iter().find(|key| key["id"] == reader["id"])
    };
    let reader_entry = listed_reader(&server).expect("reader listed");

    server.stop();
    server.restart();

    for (path, before) in snapshot_paths.iter().zip(&snapshots) {
        assert_eq!(&get_ok(&server, path), before, "{path} changed across the restart");
    }
    // `score` was remapped to time after it was written; its stored form may change.
    let mut p1_sent = items[0].clone();
    p1_sent.as_object_mut().unwrap().remove("score");
    assert_custom_fields_stored(&p1_sent, &snapshots[1]);
    assert_error(
        &server.admin_get(&item_path("shop", "p3")),
        404,
        "not_found",
        "purged p3",
    );
    assert_error(
        &server.admin_get("/v1/catalog/table/doomed"),
        404,
        "not_found",
        "deleted table",
    );
    assert_error(
        &server.admin_get(&item_path("doomed", "x")),
        404,
        "not_found",
        "item of deleted table",
    );
    assert_error(&server.admin_get("/v1/users/u2"), 404, "not_found", "deleted user");

    // Keys: the created key works with its scope, the revoked one stays refused.
    assert_eq!(listed_reader(&server), Some(reader_entry));
    let reply = server.get(&item_path("shop", "p1"), &reader_key);
    assert_eq!(assert_status(&reply, 200, "reader key after restart"), &snapshots[1]);
    let write = server.put(ITEM, &reader_key, json!({"id": "p9", "_table": "shop"}));
    assert_error(&write, 403, "forbidden", "reader key write");
    let reply = server.get(&item_path("shop", "p1"), &revoked_key);
    assert_error(&reply, 401, "unauthorized", "revoked key after restart");

    // Inferred and remapped types are enforced after the restart.
    let wrong = json!({"id": "p9", "_table": "shop", "price": "free"});
    assert_error(&server.admin_put(ITEM, wrong), 422, "type_mismatch", "price");
    let time = json!({"id": "p9", "_table": "shop", "score": "2024-01-01T00:00:00Z"});
    assert_status(&server.admin_put(ITEM, time), 200, "remapped score");
    let wrong_user = json!({"uid": "u3", "total_orders": "many"});
    assert_error(
        &server.admin_post("/v1/users", wrong_user),
        422,
        "type_mismatch",
        "user field",
    );
    server.stop();
}

#[test]
fn crash_after_acknowledged_writes_loses_nothing() {
    const WRITER_THREADS: usize = 4;
    const ITEMS_PER_THREAD: usize = 50;
    const USERS: usize = 50;
    let mut server = TestServer::start();
    let seed = json!({"id": "seed", "_table": "crash", "n": 0, "title": "seed", "tags": [], "vector": [0.0, 0.5, -0.25], "on": true});
    assert_status(&server.admin_put(ITEM, seed), 200, "seed");

    // Concurrent writers; every write must be acknowledged with 200.
    let acknowledged: Vec<(String, Value, Value)> = thread::scope(|scope| {
        let server = &server;
        let mut writers = Vec::new();
        for thread_index in 0..WRITER_THREADS {
            writers.push(scope.spawn(move || {
                (0..ITEMS_PER_THREAD)
                    .map(|i| {
                        let id = format!("c{thread_index}-{i}");
                        let item = json!({
                            "id": id, "_table": "crash", "n": i, "title": format!("item {thread_index}/{i}"),
                            "tags": [format!("t{thread_index}"), format!("i{i}")],
                            "vector": [i as f64, 0.5, -0.25], "on": i % 2 == 0,
                        });
                        let reply = server.admin_put(ITEM, item.clone());
                        let ack = assert_status(&reply, 200, &id).clone();
                        (item_path("crash", &id), item, ack)
                    })
                    .collect::<Vec<_>>()
            }));
        }
        writers.push(scope.spawn(move || {
            (0..USERS)
                .map(|i| {
                    let uid = format!("cu{i}");
                    let user = json!({"uid": uid, "visits": i, "segment": format!("s{}", i % 3)});
                    let reply = server.admin_post("/v1/users", user.clone());
                    let ack = assert_status(&reply, 200, &uid).clone();
                    (format!("/v1/users/{uid}"), user, ack)
                })
                .collect::<Vec<_>>()
        }));
        writers
            .into_iter()
            .flat_map(|writer| writer.join().expect("writer thread"))
            .collect()
    });
    assert_eq!(acknowledged.len(), WRITER_THREADS * ITEMS_PER_THREAD + USERS);

    server.kill();
    server.restart();

    for (path, sent, ack) in &acknowledged {
        let reply = server.admin_get(path);
        let stored = assert_status(&reply, 200, &format!("{path} after the crash"));
        assert_custom_fields_stored(sent, stored);
        for reserved in ["created_at", "updated_at"] {
            assert_eq!(
                stored[reserved], ack[reserved],
                "{path}: {reserved} differs from the acknowledgement"
            );
        }
        assert_eq!(stored["is_deleted"], false, "{path}");
        let table = if path.starts_with("/v1/users/") {
            "users"
        } else {
            "crash"
        };
        assert_eq!(stored["_table"], table, "{path}");
    }
    let reply = server.admin_get("/v1/catalog/table/crash");
    let fields = &assert_status(&reply, 200, "crash table")["fields"];
    for (field, kind) in [
        ("n", "number"),
        ("title", "string"),
        ("tags", "array<string>"),
        ("vector", "embedding"),
    ] {
        assert_eq!(fields[field], kind, "{fields}");
    }
    assert_eq!(fields["on"], "boolean", "{fields}");
}
