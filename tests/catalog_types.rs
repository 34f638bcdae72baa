//! Catalog field types: inference at first ingest, enforcement (type_mismatch),
//! remapping through the fields route, and size limits.

mod common;

use common::*;

#[test]
fn type_inference_and_mismatch() {
    let server = TestServer::start();
    let relations = json!([{"field": "maker", "relation_table": "makers"}]);
    assert_status(
        &server.admin_put(TABLE, json!({"table_name": "things", "relations": relations})),
        200,
        "table",
    );
    let first = json!({
        "id": "t1", "_table": "things",
        "title": "hello", "price": 3.5, "in_stock": true, "tags": ["a", "b"], "labels": [],
        "released": "2024-01-02T03:04:05Z", "vector": [0.5, 1.0, -2.0], "maker": "m1",
        "missing": null,
    });
    assert_status(&server.admin_put(ITEM, first.clone()), 200, "first item");
    assert_custom_fields_stored(&first, &server.admin_get(&item_path("things", "t1")).1);

    let expected_types = [
        ("title", "string"),
        ("price", "number"),
        ("in_stock", "boolean"),
        ("tags", "array<string>"),
        ("labels", "array<string>"),
        ("released", "time"),
        ("vector", "embedding"),
        ("maker", "relation"),
    ];
    let fields = server.table_fields("things");
    for (field, kind) in expected_types {
        assert_eq!(fields[field], kind, "inferred type of {field} in {fields}");
    }
    assert!(fields.get("missing").is_none(), "null creates no field: {fields}");

    // An object is a field type of events only: 422 naming the field, nothing stored.
    let nested = json!({"id": "t0", "_table": "things", "title": "x", "meta": {"k": "v"}});
    let message = assert_error(&server.admin_put(ITEM, nested), 422, "validation_error", "object field");
    assert!(message.contains("meta"), "{message}");
    assert_error(&server.admin_get(&item_path("things", "t0")), 404, "not_found", "t0");
    assert!(server.table_fields("things").get("meta").is_none());

    // Values of the same type (in every accepted form) are stored.
    let fitting = json!({
        "id": "t2", "_table": "things", "title": "", "price": -7, "in_stock": false, "tags": [],
        "labels": ["x"], "released": 1_700_000_000, "vector": [1, 2, 3], "maker": ["m1", "m2"],
        "missing": "now a string",
    });
    assert_status(&server.admin_put(ITEM, fitting), 200, "fitting values");
    let stored = server.admin_get(&item_path("things", "t2")).1;
    assert_eq!((&stored["maker"], &stored["title"]), (&json!(["m1", "m2"]), &json!("")));
    assert_eq!(server.table_fields("things")["missing"], "string");

    // Another type -> 422 type_mismatch naming field, expected and got; nothing stored.
    let mismatches = [
        ("title", json!(5), "string", Some("number")),
        ("price", json!("cheap"), "number", Some("string")),
        ("in_stock", json!("yes"), "boolean", Some("string")),
        ("tags", json!([1, 2]), "array<string>", None),
        ("labels", json!("x"), "array<string>", Some("string")),
        ("released", json!("not a time"), "time", Some("string")),
        ("released", json!(true), "time", Some("boolean")),
        ("vector", json!(["a"]), "embedding", None),
        ("maker", json!(7), "relation", Some("number")),
    ];
    for (index, (field, value, expected, got)) in mismatches.into_iter().enumerate() {
        let id = format!("bad{index}");
        let body = json!({"id": id, "_table": "things", field: value});
        let message = assert_error(
            &server.admin_put(ITEM, body.clone()),
            422,
            "type_mismatch",
            &body.to_string(),
        );
        assert!(message.contains(field), "message does not name {field}: {message}");
        assert!(
            message.contains(expected),
            "message does not name expected {expected}: {message}"
        );
        if let Some(got) = got {
            assert!(message.contains(got), "message does not name got {got}: {message}");
        }
        assert_error(&server.admin_get(&item_path("things", &id)), 404, "not_found", &id);
    }
    // A mismatch on an existing item leaves it unchanged, and types stay as inferred.
    let body = json!({"id": "t1", "_table": "things", "title": "changed", "price": "free"});
    assert_error(&server.admin_put(ITEM, body), 422, "type_mismatch", "mismatch on t1");
    assert_eq!(server.admin_get(&item_path("things", "t1")).1["title"], "hello");
    let fields = server.table_fields("things");
    for (field, kind) in expected_types {
        assert_eq!(fields[field], kind, "type of {field} after mismatches");
    }
}

#[test]
fn field_type_remap() {
    let server = TestServer::start();
    let item = json!({"id": "r1", "_table": "remap", "score": 1_700_000_000, "label": "abc", "count": 3});
    assert_status(&server.admin_put(ITEM, item), 200, "seed");
    assert_eq!(server.table_fields("remap")["score"], "number");
    let remap =
        |field: &str, kind: Value| server.admin_put(&format!("{TABLE}/remap/fields/{field}"), json!({"type": kind}));

    // number -> time: stored numbers fit (unix seconds).
    let reply = remap("score", json!("time"));
    let record = assert_status(&reply, 200, "remap score");
    assert_eq!(
        (&record["table_name"], &record["fields"]["score"]),
        (&json!("remap"), &json!("time"))
    );
    assert_eq!(server.table_fields("remap")["score"], "time");
    let as_time = json!({"id": "r2", "_table": "remap", "score": "2024-01-01T00:00:00Z"});
    assert_status(&server.admin_put(ITEM, as_time), 200, "RFC 3339 into time field");
    let not_time = json!({"id": "r3", "_table": "remap", "score": "not a time"});
    let message = assert_error(
        &server.admin_put(ITEM, not_time),
        422,
        "type_mismatch",
        "string into time field",
    );
    assert!(message.contains("score"), "{message}");

    // Stored values that do not fit the new type: type_mismatch, type unchanged.
    for (field, kind) in [("count", "boolean"), ("label", "number"), ("label", "embedding")] {
        let message = assert_error(
            &remap(field, json!(kind)),
            422,
            "type_mismatch",
            &format!("{field} -> {kind}"),
        );
        assert!(message.contains(field), "{message}");
    }
    let fields = server.table_fields("remap");
    assert_eq!(
        (&fields["count"], &fields["label"]),
        (&json!("number"), &json!("string"))
    );
    assert_status(
        &server.admin_put(ITEM, json!({"id": "r4", "_table": "remap", "count": 4})),
        200,
        "count still number",
    );

    // Unknown type names and unknown tables.
    for kind in [json!("float"), json!("array<number>"), json!("")] {
        assert_error(
            &remap("count", kind.clone()),
            422,
            "validation_error",
            &format!("type {kind}"),
        );
    }
    let reply = server.admin_put(&format!("{TABLE}/absent/fields/x"), json!({"type": "string"}));
    assert_error(&reply, 404, "not_found", "remap on unknown table");
}

#[test]
fn size_limits() {
    let server = TestServer::start();
    let accepted = [
        ("ok-string", json!("s".repeat(16_000))),
        ("ok-embedding", json!(vec![0.5; 1024])),
    ];
    let refused = [
        ("big-string", json!("s".repeat(16_385))),
        ("big-embedding", json!(vec![0.5; 1025])),
    ];
    for (field, (id, value)) in ["text", "vector"].iter().zip(accepted) {
        let item = json!({"id": id, "_table": "sizes", *field: value});
        assert_status(&server.admin_put(ITEM, item.clone()), 200, id);
        assert_custom_fields_stored(&item, &server.admin_get(&item_path("sizes", id)).1);
    }
    for (field, (id, value)) in ["text", "vector"].iter().zip(refused) {
        let item = json!({"id": id, "_table": "sizes", *field: value});
        assert_error(&server.admin_put(ITEM, item), 422, "validation_error", id);
        assert_error(&server.admin_get(&item_path("sizes", id)), 404, "not_found", id);
    }
}

/// In a bulk request the first row in request order types a new field, however the
/// rows' ids spread over the catalog's shards (the ids below hash apart).
#[test]
fn the_first_row_in_request_order_types_a_new_field() {
    let server = TestServer::start();
    for (table, ids) in [
        ("t1", ["b1", "b2"]),
        ("t2", ["zz1", "zz2"]),
        ("t3", ["zz2", "zz1"]),
        ("t4", ["b2", "b1"]),
    ] {
        let body = json!([
            {"id": ids[0], "_table": table, "q": 1},
            {"id": ids[1], "_table": table, "q": "x"},
        ]);
        let result = assert_status(&server.admin_put(ITEMS, body), 200, table).clone();
        let failed: Vec<(u64, &str)> = result["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["index"].as_u64().unwrap(), f["code"].as_str().unwrap()))
            .collect();
        assert_eq!(failed, [(1, "type_mismatch")], "{table}: {result}");
        assert_eq!(server.table_fields(table)["q"], "number", "{table}");
    }
    for (n, uids) in [["ub1", "ub2"], ["uzz2", "uzz1"], ["uzz1", "uzz2"]]
        .into_iter()
        .enumerate()
    {
        let field = format!("tier{n}");
        let body = json!({"users": [{"uid": uids[0], field.clone(): "gold"}, {"uid": uids[1], field.clone(): 3}]});
        let result = assert_status(&server.admin_post("/v1/users", body), 200, "users").clone();
        let failed: Vec<u64> = result["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["index"].as_u64().unwrap())
            .collect();
        assert_eq!(failed, [1], "{field}: {result}");
    }
}

/// A time field takes every ISO 8601 form with a date and stores it as RFC 3339.
#[test]
fn iso8601_times_are_typed_and_normalised() {
    let server = TestServer::start();
    let first = json!({"id": "d1", "_table": "dated", "released": "2024-01-02"});
    assert_status(&server.admin_put(ITEM, first), 200, "a date alone");
    assert_eq!(server.table_fields("dated")["released"], "time");
    for (id, sent, stored) in [
        ("d1", "2024-01-02", "2024-01-02T00:00:00.000Z"),
        ("d2", "2024-W01-2", "2024-01-02T00:00:00.000Z"),
        ("d3", "20240102T101500+0100", "2024-01-02T09:15:00.000Z"),
        ("d4", "2024-01-02T10:15:00Z", "2024-01-02T10:15:00Z"),
    ] {
        let row = json!({"id": id, "_table": "dated", "released": sent});
        assert_status(&server.admin_put(ITEM, row), 200, sent);
        assert_eq!(
            server.admin_get(&item_path("dated", id)).1["released"],
            stored,
            "{sent}"
        );
    }
    let bad = json!({"id": "d9", "_table": "dated", "released": "2024-13-45"});
    assert_error(&server.admin_put(ITEM, bad), 422, "type_mismatch", "not a date");
}
