//! Catalog field types: inference at first ingest, enforcement (type_mismatch),
//! remapping through the fields route, and size limits.

use crate::common::*;

#[test]
fn type_inference_and_mismatch() {
    let server = TestServer::start();
    let relations = json!([{"field": "maker", "relation_table": "makers"}]);
    for maker in ["m1", "m2"] {
        assert_status(
            &server.admin_put(ITEM, json!({"id": maker, "_table": "makers"})),
            200,
            maker,
        );
    }
    assert_status(
        &server.admin_put(TABLE, json!({"table_name": "things", "relations": relations})),
        200,
        "table",
    );
    let first = json!({
        "id": "t1", "_table": "things",
        "title": "hello", "price": 3.5, "in_stock": true, "tags": ["a", "b"], "labels": [],
        "released": "2024-01-02T03:04:05Z", "vector": [0.5, 1.0, -2.0], "maker": "m1",
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

    // Stored values that do not convert to the new type: 422 naming the field and the
    // rows (details), type unchanged.
    for (field, kind) in [("count", "boolean"), ("label", "number"), ("label", "embedding")] {
        let reply = remap(field, json!(kind));
        let message = assert_error(&reply, 422, "validation_error", &format!("{field} -> {kind}"));
        assert!(message.contains(field) && message.contains("force"), "{message}");
        assert_eq!(reply.1["details"], json!([{"id": "r1"}]), "{}", reply.1);
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
        assert_eq!(row_indexes(&result["failed"]), [1], "{field}: {result}");
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

/// A null value on an item or user upsert is a 422 naming the field (PUT and POST
/// store the whole row: a field to drop is left out); PATCH keeps null = remove.
#[test]
fn null_values_are_refused_on_upserts() {
    let server = TestServer::start();
    assert_status(
        &server.admin_put(ITEM, json!({"id": "n1", "_table": "nulls", "title": "x", "price": 1})),
        200,
        "seed",
    );
    let cases = [
        (
            ITEM,
            json!({"id": "n2", "_table": "nulls", "title": "y", "price": null}),
            "price",
        ),
        (ITEM, json!({"id": "n2", "_table": "nulls", "fresh": null}), "fresh"),
        (
            ITEM,
            json!({"id": "n2", "_table": "nulls", "is_deleted": null}),
            "is_deleted",
        ),
        (ITEM, json!({"id": "n2", "_table": null}), "_table"),
        (
            ITEM,
            json!({"id": "n2", "_table": "nulls", "created_at": null}),
            "created_at",
        ),
    ];
    for (path, body, field) in cases {
        let message = assert_error(
            &server.admin_put(path, body.clone()),
            422,
            "validation_error",
            &body.to_string(),
        );
        assert!(message.contains(field), "{body}: {message}");
    }
    assert_error(&server.admin_get(&item_path("nulls", "n2")), 404, "not_found", "n2");
    assert!(
        server.table_fields("nulls").get("fresh").is_none(),
        "a refused row types nothing"
    );

    // Bulk: the row with a null fails alone, by index.
    let body = json!([{"id": "n3", "_table": "nulls", "price": 3}, {"id": "n4", "_table": "nulls", "title": null}]);
    let result = assert_status(&server.admin_put(ITEMS, body), 200, "bulk").clone();
    assert_eq!(result["upserted"], 1, "{result}");
    assert_eq!(result["failed"][0]["index"], 1, "{result}");
    assert_eq!(result["failed"][0]["code"], "validation_error", "{result}");
    assert!(
        result["failed"][0]["message"].as_str().unwrap().contains("title"),
        "{result}"
    );

    // Users, one and several; a user's created_at is system-set and ignored, null or not.
    let message = assert_error(
        &server.admin_post("/v1/users", json!({"uid": "u1", "tier": null})),
        422,
        "validation_error",
        "user null",
    );
    assert!(message.contains("tier"), "{message}");
    assert_error(&server.admin_get("/v1/users/u1"), 404, "not_found", "u1");
    let body = json!({"users": [{"uid": "u2", "tier": "gold", "created_at": null}, {"uid": "u3", "tier": null}]});
    let result = assert_status(&server.admin_post("/v1/users", body), 200, "bulk users").clone();
    assert_eq!(row_indexes(&result["failed"]), [1], "{result}");

    // PATCH: null still removes a field.
    let patched = server.admin_patch(&item_path("nulls", "n1"), json!({"title": null}));
    assert_status(&patched, 200, "patch null");
    let stored = server.admin_get(&item_path("nulls", "n1")).1;
    assert!(stored.get("title").is_none() && stored["price"] == 1, "{stored}");
}

/// Every value of an embedding field has the length of the table's first one.
#[test]
fn embedding_lengths_are_checked_across_a_table() {
    let server = TestServer::start();
    assert_status(
        &server.admin_put(ITEM, json!({"id": "e1", "_table": "vecs", "vec": [0.1, 0.2, 0.3]})),
        200,
        "first",
    );
    let table = server.admin_get(&format!("{TABLE}/vecs")).1;
    assert_eq!(table["embedding_lengths"]["vec"], 3, "{table}");
    assert_status(
        &server.admin_put(ITEM, json!({"id": "e2", "_table": "vecs", "vec": [1, 2, 3]})),
        200,
        "same length",
    );
    for (id, value) in [
        ("e3", json!([0.1, 0.2])),
        ("e4", json!([0.1, 0.2, 0.3, 0.4])),
        ("e5", json!([])),
    ] {
        let given = value.as_array().unwrap().len();
        let body = json!({"id": id, "_table": "vecs", "vec": value});
        let message = assert_error(&server.admin_put(ITEM, body), 422, "validation_error", id);
        assert!(
            message.contains("vec") && message.contains('3') && message.contains(&given.to_string()),
            "names field, expected and given length: {message}"
        );
        assert_error(&server.admin_get(&item_path("vecs", id)), 404, "not_found", id);
    }
    // In a bulk request the first row in request order sets the length; PATCH is checked too.
    let body = json!([
        {"id": "f1", "_table": "fresh", "vec": [0.5, 0.5]},
        {"id": "f2", "_table": "fresh", "vec": [0.5, 0.5, 0.5]},
        {"id": "f3", "_table": "fresh", "vec": [1, 0]},
    ]);
    let result = assert_status(&server.admin_put(ITEMS, body), 200, "bulk").clone();
    assert_eq!(result["upserted"], 2, "{result}");
    assert_eq!(result["failed"][0]["index"], 1, "{result}");
    assert_eq!(
        server.admin_get(&format!("{TABLE}/fresh")).1["embedding_lengths"]["vec"],
        2
    );
    let patch = server.admin_patch(&item_path("vecs", "e1"), json!({"vec": [1, 2]}));
    assert_error(&patch, 422, "validation_error", "patch length");
    // Users' embedding fields too.
    assert_status(
        &server.admin_post("/v1/users", json!({"uid": "u1", "emb": [1, 2]})),
        200,
        "user",
    );
    let reply = server.admin_post("/v1/users", json!({"uid": "u2", "emb": [1, 2, 3]}));
    let message = assert_error(&reply, 422, "validation_error", "user length");
    assert!(message.contains("emb"), "{message}");
}

/// A relation field names stored rows of its related table; a relation to a table
/// that does not exist is refused when the table is declared.
#[test]
fn relations_are_checked() {
    let server = TestServer::start();
    let declare = |table: &str, related: &str| {
        server.admin_put(
            TABLE,
            json!({"table_name": table, "relations": [{"field": "brand", "relation_table": related}]}),
        )
    };
    let message = assert_error(
        &declare("products", "brands"),
        422,
        "validation_error",
        "no brands table",
    );
    assert!(message.contains("brands"), "{message}");
    assert_error(
        &server.admin_get(&format!("{TABLE}/products")),
        404,
        "not_found",
        "not created",
    );

    for brand in ["acme", "globex"] {
        assert_status(
            &server.admin_put(ITEM, json!({"id": brand, "_table": "brands"})),
            200,
            brand,
        );
    }
    assert_status(&declare("products", "brands"), 200, "declared");
    let put = |id: &str, brand: Value| server.admin_put(ITEM, json!({"id": id, "_table": "products", "brand": brand}));
    assert_status(&put("p1", json!("acme")), 200, "one brand");
    assert_status(&put("p2", json!(["acme", "globex"])), 200, "1-to-many");
    for (id, brand, missing) in [
        ("p3", json!("initech"), "initech"),
        ("p4", json!(["acme", "hooli"]), "hooli"),
    ] {
        let message = assert_error(&put(id, brand), 422, "validation_error", id);
        assert!(message.contains("brand") && message.contains(missing), "{message}");
        assert_error(&server.admin_get(&item_path("products", id)), 404, "not_found", id);
    }
    // A soft-deleted brand still exists; a purged one does not.
    assert_status(&server.admin_delete(&item_path("brands", "globex")), 200, "soft delete");
    assert_status(&put("p5", json!("globex")), 200, "soft-deleted brand");
    let purge = format!("{}?purge=true", item_path("brands", "globex"));
    assert_status(&server.admin_delete(&purge), 200, "purge");
    assert_error(&put("p6", json!("globex")), 422, "validation_error", "purged brand");
    // Bulk rows fail alone; PATCH is checked; relations to users and to the table itself.
    let body = json!([{"id": "p7", "_table": "products", "brand": "acme"}, {"id": "p8", "_table": "products", "brand": "nope"}]);
    let result = assert_status(&server.admin_put(ITEMS, body), 200, "bulk").clone();
    assert_eq!(
        (result["upserted"].clone(), result["failed"][0]["index"].clone()),
        (json!(1), json!(1)),
        "{result}"
    );
    assert_error(
        &server.admin_patch(&item_path("products", "p1"), json!({"brand": "nope"})),
        422,
        "validation_error",
        "patch",
    );
    let owners = json!({"table_name": "pets", "relations": [{"field": "owner", "relation_table": "users"},
                                                            {"field": "parent", "relation_table": "pets"}]});
    assert_status(&server.admin_put(TABLE, owners), 200, "users and self relations");
    assert_status(&server.admin_post("/v1/users", json!({"uid": "ann"})), 200, "user");
    let pet = |id: &str, owner: &str, parent: &str| {
        server.admin_put(
            ITEM,
            json!({"id": id, "_table": "pets", "owner": owner, "parent": parent}),
        )
    };
    assert_status(&pet("rex", "ann", "rex"), 200, "names itself");
    assert_status(&pet("pup", "ann", "rex"), 200, "parent stored");
    assert_error(&pet("cat", "bob", "rex"), 422, "validation_error", "no such user");
    assert_error(&pet("kit", "ann", "tom"), 422, "validation_error", "no such pet");
}

/// A remap converts the stored values that convert and reports the others: without
/// `force` it refuses and changes nothing; with it, it clears them and remaps.
#[test]
fn remap_converts_what_converts_and_force_clears_the_rest() {
    let server = TestServer::start();
    let rows = json!([
        {"id": "a", "_table": "conv", "size": "3"},
        {"id": "b", "_table": "conv", "size": "4.5"},
        {"id": "c", "_table": "conv", "size": "large"},
        {"id": "d", "_table": "conv", "size": "huge"},
        {"id": "e", "_table": "conv", "other": 1},
    ]);
    assert_eq!(
        assert_status(&server.admin_put(ITEMS, rows), 200, "rows")["upserted"],
        5
    );
    let path = format!("{TABLE}/conv/fields/size");

    let reply = server.admin_put(&path, json!({"type": "number"}));
    let message = assert_error(&reply, 422, "validation_error", "unconvertible");
    assert!(message.contains("size") && message.contains('2'), "{message}");
    assert_eq!(reply.1["details"], json!([{"id": "c"}, {"id": "d"}]), "{}", reply.1);
    assert_eq!(server.table_fields("conv")["size"], "string", "nothing changed");
    assert_eq!(
        server.admin_get(&item_path("conv", "a")).1["size"],
        "3",
        "nothing changed"
    );
    assert_error(
        &server.admin_put(&path, json!({"type": "number", "force": "yes"})),
        422,
        "validation_error",
        "force must be a boolean",
    );
    let reply = server.admin_put(&path, json!({"type": "number", "force": false}));
    assert_error(&reply, 422, "validation_error", "force false");

    let reply = server.admin_put(&path, json!({"type": "number", "force": true}));
    let answer = assert_status(&reply, 200, "forced").clone();
    assert_eq!(answer["table_name"], "conv", "{answer}");
    assert_eq!(answer["fields"]["size"], "number", "{answer}");
    assert_eq!(answer["converted"], 2, "{answer}");
    assert_eq!(answer["failed"], json!(["c", "d"]), "{answer}");
    assert_eq!(answer["failed_count"], 2, "{answer}");
    assert_eq!(server.table_fields("conv")["size"], "number");
    assert_eq!(server.admin_get(&item_path("conv", "a")).1["size"], 3);
    assert_eq!(server.admin_get(&item_path("conv", "b")).1["size"], 4.5);
    for id in ["c", "d"] {
        let row = server.admin_get(&item_path("conv", id)).1;
        assert!(row.get("size").is_none(), "cleared: {row}");
    }
    assert_eq!(server.admin_get(&item_path("conv", "e")).1["other"], 1);
    assert_error(
        &server.admin_put(ITEM, json!({"id": "f", "_table": "conv", "size": "x"})),
        422,
        "type_mismatch",
        "new type enforced",
    );

    // Everything converts: no force needed; back to string.
    let reply = server.admin_put(&path, json!({"type": "string"}));
    let answer = assert_status(&reply, 200, "to string").clone();
    assert_eq!(
        (answer["converted"].clone(), answer["failed"].clone()),
        (json!(2), json!([])),
        "{answer}"
    );
    assert_eq!(server.admin_get(&item_path("conv", "a")).1["size"], "3");

    // To an embedding: the length most values have; the others do not convert.
    let rows = json!([
        {"id": "v1", "_table": "vecs", "v": ["1", "2"]},
        {"id": "v2", "_table": "vecs", "v": ["3", "4"]},
        {"id": "v3", "_table": "vecs", "v": ["5", "6", "7"]},
    ]);
    assert_status(&server.admin_put(ITEMS, rows), 200, "vector rows");
    let vpath = format!("{TABLE}/vecs/fields/v");
    let reply = server.admin_put(&vpath, json!({"type": "embedding"}));
    assert_error(&reply, 422, "validation_error", "length");
    assert_eq!(reply.1["details"], json!([{"id": "v3"}]), "{}", reply.1);
    let answer = assert_status(
        &server.admin_put(&vpath, json!({"type": "embedding", "force": true})),
        200,
        "v",
    )
    .clone();
    assert_eq!(answer["embedding_lengths"]["v"], 2, "{answer}");
    assert_eq!(server.admin_get(&item_path("vecs", "v1")).1["v"], json!([1, 2]));

    // Reserved fields and objects cannot be remapped to.
    assert_error(
        &server.admin_put(&format!("{TABLE}/conv/fields/is_deleted"), json!({"type": "string"})),
        422,
        "validation_error",
        "reserved",
    );
    assert_error(
        &server.admin_put(&path, json!({"type": "object"})),
        422,
        "validation_error",
        "object",
    );
}
