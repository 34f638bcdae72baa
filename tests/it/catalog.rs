//! Catalog tables and items: CRUD, reserved fields, bulk upserts, soft delete
//! and purge (types and size limits are in `catalog_types.rs`).

use crate::common::*;

#[test]
fn table_and_item_crud() {
    let server = TestServer::start();
    let relations = json!([{"field": "brand", "relation_table": "brands"}]);
    assert_status(
        &server.admin_put(ITEM, json!({"id": "b1", "_table": "brands"})),
        200,
        "brand b1",
    );
    let before = now();
    let created = server.admin_put(
        TABLE,
        json!({"table_name": "products", "description": "d1", "relations": relations}),
    );
    let after = now();
    let record = assert_status(&created, 200, "create table");
    assert_eq!(record["table_name"], "products");
    assert_eq!(record["description"], "d1");
    assert_eq!(record["relations"], relations);
    assert!(record["fields"].is_object(), "{record}");
    assert_server_time_between(&record["created_at"], before, after);
    assert_server_time_between(&record["updated_at"], before, after);

    let fetched = server.admin_get(&format!("{TABLE}/products"));
    let fetched = assert_status(&fetched, 200, "get table");
    for field in ["table_name", "description", "relations", "created_at"] {
        assert_eq!(fetched[field], record[field], "{field}");
    }
    let updated = server.admin_put(
        TABLE,
        json!({"table_name": "products", "description": "d2", "relations": relations}),
    );
    assert_eq!(assert_status(&updated, 200, "update table")["description"], "d2");
    assert_eq!(server.admin_get(&format!("{TABLE}/products")).1["description"], "d2");
    assert_error(
        &server.admin_get(&format!("{TABLE}/absent")),
        404,
        "not_found",
        "unknown table",
    );
    // Table names: [A-Za-z0-9_.-]{1,128}.
    let long_name = "n".repeat(128);
    for name in ["a.b-c_D9", long_name.as_str()] {
        assert_status(&server.admin_put(TABLE, json!({"table_name": name})), 200, name);
    }

    // Items: upsert into the table, read back with custom fields at top level.
    let item = json!({"id": "p1", "_table": "products", "title": "Kayak tour", "price": 49.5, "brand": "b1"});
    let reply = server.admin_put(ITEM, item.clone());
    let ack = assert_status(&reply, 200, "put item");
    assert_eq!(
        (&ack["id"], &ack["_table"], &ack["is_deleted"]),
        (&json!("p1"), &json!("products"), &json!(false))
    );
    let stored = server.admin_get(&item_path("products", "p1"));
    let stored = assert_status(&stored, 200, "get item");
    assert_custom_fields_stored(&item, stored);
    assert_eq!(stored["_table"], "products");
    assert_eq!(stored["created_at"], ack["created_at"]);
    assert_eq!(stored["updated_at"], ack["updated_at"]);
    assert_error(
        &server.admin_get(&item_path("products", "p2")),
        404,
        "not_found",
        "unknown item",
    );
    assert_error(
        &server.admin_get(&item_path("items", "p1")),
        404,
        "not_found",
        "item in other table",
    );
    assert_error(
        &server.admin_get(&item_path("absent", "p1")),
        404,
        "not_found",
        "unknown table",
    );

    // Deleting a table removes its items, even when a table of that name comes back.
    let deleted = server.admin_delete(&format!("{TABLE}/products"));
    assert_eq!(
        assert_status(&deleted, 200, "delete table"),
        &json!({"table_name": "products", "deleted": true})
    );
    assert_error(
        &server.admin_get(&format!("{TABLE}/products")),
        404,
        "not_found",
        "deleted table",
    );
    assert_error(
        &server.admin_get(&item_path("products", "p1")),
        404,
        "not_found",
        "item of deleted table",
    );
    assert_error(
        &server.admin_delete(&format!("{TABLE}/products")),
        404,
        "not_found",
        "delete twice",
    );
    assert_status(
        &server.admin_put(TABLE, json!({"table_name": "products"})),
        200,
        "recreate",
    );
    assert_error(
        &server.admin_get(&item_path("products", "p1")),
        404,
        "not_found",
        "item after recreate",
    );
    let fields = server.table_fields("products");
    assert!(
        fields.get("title").is_none(),
        "old fields survived the delete: {fields}"
    );

    // The users table cannot be deleted.
    assert_status(&server.admin_post("/v1/users", json!({"uid": "u1"})), 200, "user");
    let reply = server.admin_delete(&format!("{TABLE}/users"));
    assert_status(&reply, 422, "delete users table");
    assert_error_body(&reply.1, "delete users table");
    assert_status(&server.admin_get("/v1/users/u1"), 200, "user survives");
}

#[test]
fn reserved_fields() {
    let server = TestServer::start();

    // First ingest without created_at: server time; default table and is_deleted.
    let before = now();
    let first = server.admin_put(ITEM, json!({"id": "a1", "name": "x"}));
    let after = now();
    let first = assert_status(&first, 200, "first upsert").clone();
    assert_eq!(first["id"], "a1");
    assert_eq!(first["_table"], "items");
    assert_eq!(first["is_deleted"], false);
    let created_at = assert_server_time_between(&first["created_at"], before, after);
    let updated_at = assert_server_time_between(&first["updated_at"], before, after);
    let stored = server.admin_get(&item_path("items", "a1")).1;
    assert_eq!(
        (&stored["id"], &stored["name"], &stored["is_deleted"]),
        (&json!("a1"), &json!("x"), &json!(false))
    );
    assert_eq!(stored["_table"], "items");
    assert_eq!(stored["created_at"], first["created_at"]);
    assert_status(&server.admin_get(&format!("{TABLE}/items")), 200, "items table created");

    // A later upsert keeps created_at (even if the client sends another one) and
    // overwrites updated_at with a later server time (a client value is ignored).
    wait_for_clock_past(updated_at);
    let before = now();
    let body =
        json!({"id": "a1", "name": "y", "created_at": "2001-01-01T00:00:00Z", "updated_at": "2002-02-02T00:00:00Z"});
    let second = server.admin_put(ITEM, body);
    let after = now();
    let second = assert_status(&second, 200, "second upsert").clone();
    assert_eq!(second["created_at"], first["created_at"]);
    let second_updated = assert_server_time_between(&second["updated_at"], before, after);
    assert!(
        second_updated > updated_at,
        "updated_at did not change: {updated_at} -> {second_updated}"
    );
    let stored = server.admin_get(&item_path("items", "a1")).1;
    assert_eq!(parse_time(&stored["created_at"]), created_at);
    assert_eq!(stored["updated_at"], second["updated_at"]);
    assert_eq!(stored["name"], "y");

    // A client created_at on first ingest is kept, normalized to RFC 3339 UTC ms.
    let cases = [
        ("a2", json!("2020-05-06T07:08:09+02:00"), "2020-05-06T05:08:09.000Z"),
        ("a3", json!("2021-01-02T03:04:05.678Z"), "2021-01-02T03:04:05.678Z"),
        ("a4", json!(1_600_000_000), "2020-09-13T12:26:40.000Z"),
        ("a5", json!(1_600_000_000_123i64), "2020-09-13T12:26:40.123Z"),
    ];
    for (id, sent, normalized) in cases {
        let ack = server.admin_put(ITEM, json!({"id": id, "created_at": sent}));
        assert_eq!(assert_status(&ack, 200, id)["created_at"], normalized, "ack of {id}");
        let stored = server.admin_get(&item_path("items", id)).1;
        assert_eq!(stored["created_at"], normalized, "stored {id}");
        assert_server_time(&stored["updated_at"]);
    }

    // is_deleted may be given explicitly; _table names the target table (created on first item).
    let ack = server.admin_put(ITEM, json!({"id": "a6", "is_deleted": true, "_table": "gadgets"}));
    let ack = assert_status(&ack, 200, "explicit is_deleted");
    assert_eq!((&ack["is_deleted"], &ack["_table"]), (&json!(true), &json!("gadgets")));
    assert_eq!(server.admin_get(&item_path("gadgets", "a6")).1["is_deleted"], true);
    assert_status(
        &server.admin_get(&format!("{TABLE}/gadgets")),
        200,
        "table created by first item",
    );
    assert_error(
        &server.admin_get(&item_path("items", "a6")),
        404,
        "not_found",
        "a6 not in items",
    );

    // `_table: "users"` is refused.
    let reply = server.admin_put(ITEM, json!({"id": "a7", "_table": "users"}));
    assert_status(&reply, 422, "_table users");
    assert_error_body(&reply.1, "_table users");
    assert_error(&server.admin_get("/v1/users/a7"), 404, "not_found", "a7 not a user");
}

#[test]
fn bulk_upserts_json_array_and_ndjson() {
    let server = TestServer::start();
    assert_status(
        &server.admin_put(ITEM, json!({"id": "seed", "_table": "bulk", "price": 1})),
        200,
        "seed",
    );

    let body = json!([
        {"id": "b0", "_table": "bulk", "price": 10, "title": "zero"},
        {"id": "b1", "_table": "bulk", "price": "x"},
        {"_table": "bulk", "price": 2},
        42,
        {"id": "b4", "_table": "bulk", "price": 4},
        "b5",
        {"id": 6, "_table": "bulk"},
        {"id": "b7", "_table": "users"},
        {"id": "b8", "_table": "bulk", "is_deleted": "no"},
        {"id": "b9", "price": 9},
    ]);
    let reply = server.admin_put(ITEMS, body);
    let result = assert_status(&reply, 200, "bulk array");
    assert_eq!(result["upserted"], 3, "{result}");
    let failed = result["failed"].as_array().expect("failed array");
    let indices: Vec<u64> = failed.iter().map(|f| f["index"].as_u64().expect("index")).collect();
    assert_eq!(indices, [1, 2, 3, 5, 6, 7, 8], "{result}");
    for failure in failed {
        assert_error_body(failure, "bulk failure");
        let expected = if failure["index"] == 1 {
            "type_mismatch"
        } else {
            "validation_error"
        };
        if failure["index"] != 7 {
            assert_eq!(failure["code"], expected, "{failure}");
        }
    }
    let b0 = server.admin_get(&item_path("bulk", "b0"));
    assert_eq!(
        (&assert_status(&b0, 200, "b0")["price"], &b0.1["title"]),
        (&json!(10), &json!("zero"))
    );
    assert_eq!(server.admin_get(&item_path("bulk", "b4")).1["price"], 4);
    assert_eq!(server.admin_get(&item_path("items", "b9")).1["price"], 9);
    for id in ["b1", "b7", "b8"] {
        assert_error(&server.admin_get(&item_path("bulk", id)), 404, "not_found", id);
    }

    // NDJSON: one object per line; a malformed line fails alone.
    let ndjson = "{\"id\":\"n0\",\"_table\":\"bulk\",\"price\":7}\n\
                  {not json\n\
                  {\"id\":\"n2\",\"_table\":\"bulk\",\"price\":8}\n\
                  {\"id\":\"n3\",\"_table\":\"bulk\",\"price\":\"eight\"}\n";
    let reply = server.raw(
        Method::PUT,
        ITEMS,
        &server.admin_key,
        ndjson.as_bytes(),
        "application/x-ndjson",
    );
    let result = assert_status(&reply, 200, "bulk ndjson");
    assert_eq!(result["upserted"], 2, "{result}");
    let failed = result["failed"].as_array().expect("failed array");
    let summary: Vec<(u64, &str)> = failed
        .iter()
        .map(|f| (f["index"].as_u64().unwrap(), f["code"].as_str().unwrap()))
        .collect();
    assert_eq!(summary, [(1, "malformed_json"), (3, "type_mismatch")], "{result}");
    assert_eq!(server.admin_get(&item_path("bulk", "n0")).1["price"], 7);
    assert_eq!(server.admin_get(&item_path("bulk", "n2")).1["price"], 8);
    assert_error(&server.admin_get(&item_path("bulk", "n3")), 404, "not_found", "n3");

    // A body that starts with `[` but is not JSON is refused as a whole.
    let reply = server.raw(
        Method::PUT,
        ITEMS,
        &server.admin_key,
        b"[{\"id\":\"z\"},",
        "application/json",
    );
    assert_error(&reply, 400, "malformed_json", "broken array");
    assert_error(&server.admin_get(&item_path("items", "z")), 404, "not_found", "z");
}

#[test]
fn soft_delete_and_purge() {
    let server = TestServer::start();
    let item = json!({"id": "d1", "title": "gone soon", "price": 5});
    assert_status(&server.admin_put(ITEM, item.clone()), 200, "put");

    let reply = server.admin_delete(&item_path("items", "d1"));
    let expected = json!({"id": "d1", "_table": "items", "is_deleted": true, "purged": false});
    assert_eq!(assert_status(&reply, 200, "soft delete"), &expected);
    let stored = server.admin_get(&item_path("items", "d1"));
    let stored = assert_status(&stored, 200, "soft-deleted item is readable");
    assert_eq!(stored["is_deleted"], true);
    assert_custom_fields_stored(&item, stored);

    let purge_path = format!("{}?purge=true", item_path("items", "d1"));
    let reply = server.admin_delete(&purge_path);
    let expected = json!({"id": "d1", "_table": "items", "is_deleted": true, "purged": true});
    assert_eq!(assert_status(&reply, 200, "purge"), &expected);
    assert_error(
        &server.admin_get(&item_path("items", "d1")),
        404,
        "not_found",
        "purged item",
    );
    assert_error(
        &server.admin_delete(&item_path("items", "d1")),
        404,
        "not_found",
        "delete purged",
    );
    assert_error(&server.admin_delete(&purge_path), 404, "not_found", "purge twice");

    // Purge without a prior soft delete; unknown items and tables are 404.
    assert_status(&server.admin_put(ITEM, json!({"id": "d2"})), 200, "put d2");
    assert_eq!(
        server
            .admin_delete(&format!("{}?purge=true", item_path("items", "d2")))
            .1["purged"],
        true
    );
    assert_error(
        &server.admin_get(&item_path("items", "d2")),
        404,
        "not_found",
        "purged d2",
    );
    assert_error(
        &server.admin_delete(&item_path("items", "never")),
        404,
        "not_found",
        "unknown item",
    );
    assert_error(
        &server.admin_delete(&item_path("nowhere", "d1")),
        404,
        "not_found",
        "unknown table",
    );
}

/// PUT replaces a whole item or user; PATCH merges fields into the stored one (a
/// null removes a field) and keeps its created_at; a soft delete keeps the fields.
#[test]
fn patch_merges_and_put_replaces() {
    let server = TestServer::start();
    let first = json!({"id": "m1", "_table": "merge", "title": "Kayak", "price": 40, "tags": ["water"]});
    assert_status(&server.admin_put(ITEM, first), 200, "put");
    let before = server.admin_get(&item_path("merge", "m1")).1;
    wait_for_clock_past(parse_time(&before["updated_at"]));
    let reply = server.admin_patch(
        &item_path("merge", "m1"),
        json!({"price": 35, "tags": null, "color": "red", "id": "other", "_table": "elsewhere"}),
    );
    let ack = assert_status(&reply, 200, "patch");
    assert_eq!((&ack["id"], &ack["_table"]), (&json!("m1"), &json!("merge")), "{ack}");
    let after = server.admin_get(&item_path("merge", "m1")).1;
    assert_eq!(after["title"], "Kayak", "{after}");
    assert_eq!(after["price"], 35, "{after}");
    assert_eq!(after["color"], "red", "{after}");
    assert!(after.get("tags").is_none(), "null removes a field: {after}");
    assert_eq!(after["created_at"], before["created_at"]);
    assert!(parse_time(&after["updated_at"]) > parse_time(&before["updated_at"]));
    assert_error(
        &server.admin_get(&item_path("elsewhere", "m1")),
        404,
        "not_found",
        "the path names the row",
    );

    // A patch is checked like an upsert; nothing changes when it fails.
    let bad = server.admin_patch(&item_path("merge", "m1"), json!({"price": "cheap", "title": "x"}));
    assert_error(&bad, 422, "type_mismatch", "patch mismatch");
    assert_eq!(server.admin_get(&item_path("merge", "m1")).1["title"], "Kayak");
    assert_error(
        &server.admin_patch(&item_path("merge", "absent"), json!({"price": 1})),
        404,
        "not_found",
        "absent",
    );
    assert_error(
        &server.admin_patch(&item_path("merge", "m1"), json!([1])),
        422,
        "validation_error",
        "array body",
    );

    // PUT replaces: fields it does not name are gone.
    assert_status(
        &server.admin_put(ITEM, json!({"id": "m1", "_table": "merge", "price": 30})),
        200,
        "replace",
    );
    let replaced = server.admin_get(&item_path("merge", "m1")).1;
    assert!(
        replaced.get("title").is_none() && replaced.get("color").is_none(),
        "{replaced}"
    );

    // A soft delete keeps the fields; a patch can restore the item.
    assert_status(&server.admin_delete(&item_path("merge", "m1")), 200, "soft delete");
    let deleted = server.admin_get(&item_path("merge", "m1")).1;
    assert_eq!(
        (&deleted["is_deleted"], &deleted["price"]),
        (&json!(true), &json!(30)),
        "{deleted}"
    );
    assert_status(
        &server.admin_patch(&item_path("merge", "m1"), json!({"is_deleted": false})),
        200,
        "restore",
    );
    assert_eq!(server.admin_get(&item_path("merge", "m1")).1["is_deleted"], false);

    // Users merge the same way; their created_at is system-set.
    let user = assert_status(
        &server.admin_post("/v1/users", json!({"uid": "pu1", "age": 30, "status": "new"})),
        200,
        "user",
    )
    .clone();
    let patched = server.admin_patch(
        "/v1/users/pu1",
        json!({"status": "gold", "age": null, "created_at": "2001-01-01"}),
    );
    let patched = assert_status(&patched, 200, "patch user");
    assert_eq!(
        (&patched["status"], patched.get("age")),
        (&json!("gold"), None),
        "{patched}"
    );
    assert_eq!(patched["created_at"], user["created_at"]);
    assert_error(
        &server.admin_patch("/v1/users/nobody", json!({"a": 1})),
        404,
        "not_found",
        "absent user",
    );
}
