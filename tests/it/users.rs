//! Users: upsert one or many, reserved fields, type inference and enforcement,
//! permanent deletion.

use crate::common::*;

const USERS: &str = "/v1/users";

fn user_path(uid: &str) -> String {
    format!("{USERS}/{uid}")
}

#[test]
fn upsert_get_and_reserved_fields() {
    let server = TestServer::start();

    let sent = json!({"uid": "u1", "country": "NO", "total_orders": 3, "gdpr_consent": true});
    let before = now();
    let reply = server.admin_post(USERS, sent.clone());
    let after = now();
    let first = assert_status(&reply, 200, "first upsert").clone();
    assert_eq!(first["uid"], "u1");
    assert_eq!(first["_table"], "users");
    assert_eq!(first["is_deleted"], false);
    assert_custom_fields_stored(&sent, &first);
    assert_server_time_between(&first["created_at"], before, after);
    let updated_at = assert_server_time_between(&first["updated_at"], before, after);
    let fetched = server.admin_get(&user_path("u1"));
    assert_eq!(
        assert_status(&fetched, 200, "get u1"),
        &first,
        "GET returns the stored object"
    );

    // created_at kept, updated_at overwritten with a later server time, fields replaced.
    wait_for_clock_past(updated_at);
    let again = json!({
        "uid": "u1", "country": "SE", "total_orders": 4, "gdpr_consent": false,
        "created_at": "2001-01-01T00:00:00Z", "updated_at": "2002-01-01T00:00:00Z",
    });
    let before = now();
    let reply = server.admin_post(USERS, again.clone());
    let after = now();
    let second = assert_status(&reply, 200, "second upsert").clone();
    assert_eq!(second["created_at"], first["created_at"]);
    let second_updated = assert_server_time_between(&second["updated_at"], before, after);
    assert!(
        second_updated > updated_at,
        "updated_at did not change: {updated_at} -> {second_updated}"
    );
    assert_custom_fields_stored(&again, &second);
    assert_eq!(server.admin_get(&user_path("u1")).1, second);

    // A user's created_at is system-set (SPEC "User": auto): one the client sends on
    // first ingest is ignored.
    let before = now();
    let reply = server.admin_post(USERS, json!({"uid": "u2", "created_at": "2019-12-31T23:00:00-01:00"}));
    let after = now();
    assert_server_time_between(&assert_status(&reply, 200, "u2")["created_at"], before, after);
    assert_server_time_between(&server.admin_get(&user_path("u2")).1["created_at"], before, after);

    // Missing or invalid uid: 422 validation_error, nothing stored.
    for body in [
        json!({"country": "NO"}),
        json!({"uid": ""}),
        json!({"uid": 7}),
        json!({"uid": null}),
    ] {
        assert_error(
            &server.admin_post(USERS, body.clone()),
            422,
            "validation_error",
            &body.to_string(),
        );
    }
    assert_error(&server.admin_get(&user_path("7")), 404, "not_found", "uid 7");
    assert_error(
        &server.admin_get(&user_path("nobody")),
        404,
        "not_found",
        "unknown user",
    );
}

#[test]
fn user_field_types_and_bulk_upsert() {
    let server = TestServer::start();
    let profile = json!({
        "uid": "t1", "country": "DE", "total_orders": 12, "avg_order_value": 31.5,
        "gdpr_consent": true, "preferred_categories": ["tours", "museums"],
        "last_login": "2025-03-04T05:06:07Z", "profile_embedding_v1": [0.25, -0.5, 1.0],
        "address": "Unter den Linden 1, Berlin",
    });
    let reply = server.admin_post(USERS, profile.clone());
    assert_custom_fields_stored(&profile, assert_status(&reply, 200, "typed user"));
    let reply = server.admin_get("/v1/catalog/table/users");
    let fields = &assert_status(&reply, 200, "users table")["fields"];
    let expected_types = [
        ("country", "string"),
        ("total_orders", "number"),
        ("avg_order_value", "number"),
        ("gdpr_consent", "boolean"),
        ("preferred_categories", "array<string>"),
        ("last_login", "time"),
        ("profile_embedding_v1", "embedding"),
        ("address", "string"),
    ];
    for (field, kind) in expected_types {
        assert_eq!(fields[field], kind, "inferred type of {field} in {fields}");
    }
    // Objects are a field type of events only (SPEC "User" has no object type).
    let nested = json!({"uid": "t-obj", "address": {"city": "Berlin"}});
    let message = assert_error(
        &server.admin_post(USERS, nested),
        422,
        "validation_error",
        "object field",
    );
    assert!(message.contains("address"), "{message}");

    let mismatches = [
        ("total_orders", json!("many"), "number"),
        ("gdpr_consent", json!(1), "boolean"),
        ("preferred_categories", json!("tours"), "array<string>"),
        ("last_login", json!("yesterday"), "time"),
        ("profile_embedding_v1", json!(["a"]), "embedding"),
    ];
    for (index, (field, value, expected)) in mismatches.into_iter().enumerate() {
        let uid = format!("bad{index}");
        let body = json!({"uid": uid, field: value});
        let message = assert_error(
            &server.admin_post(USERS, body.clone()),
            422,
            "type_mismatch",
            &body.to_string(),
        );
        assert!(
            message.contains(field) && message.contains(expected),
            "message {message:?} for {body}"
        );
        assert_error(&server.admin_get(&user_path(&uid)), 404, "not_found", &uid);
    }

    // Bulk: stored users come back in order, failures carry their index.
    let bulk = json!({"users": [
        {"uid": "b0", "total_orders": 1, "country": "FR"},
        {"uid": "b1", "total_orders": "x"},
        {"total_orders": 2},
        {"uid": "b3"},
        7,
        {"uid": "b5", "is_deleted": "maybe"},
        {"uid": "b6", "gdpr_consent": false},
    ]});
    let reply = server.admin_post(USERS, bulk);
    let result = assert_status(&reply, 200, "bulk users");
    let stored = result["users"].as_array().expect("users array");
    let uids: Vec<&str> = stored.iter().map(|u| u["uid"].as_str().unwrap()).collect();
    assert_eq!(uids, ["b0", "b3", "b6"], "{result}");
    for user in stored {
        assert_eq!(user["_table"], "users");
        assert_eq!(user["is_deleted"], false);
        assert_server_time(&user["created_at"]);
        assert_server_time(&user["updated_at"]);
    }
    assert_eq!(stored[0]["country"], "FR");
    let failed = result["failed"].as_array().expect("failed array");
    let summary: Vec<(u64, &str)> = failed
        .iter()
        .map(|f| {
            assert_error_body(f, "bulk user failure");
            (f["index"].as_u64().unwrap(), f["code"].as_str().unwrap())
        })
        .collect();
    let expected = [
        (1, "type_mismatch"),
        (2, "validation_error"),
        (4, "validation_error"),
        (5, "validation_error"),
    ];
    assert_eq!(summary, expected, "{result}");
    for (uid, status) in [("b0", 200), ("b1", 404), ("b3", 200), ("b5", 404), ("b6", 200)] {
        assert_status(&server.admin_get(&user_path(uid)), status, uid);
    }
    assert_eq!(
        server.admin_get(&user_path("b0")).1,
        stored[0],
        "GET equals the bulk response"
    );
}

#[test]
fn delete_user() {
    let server = TestServer::start();
    assert_status(
        &server.admin_post(USERS, json!({"uid": "gone", "country": "NO"})),
        200,
        "create",
    );
    assert_status(&server.admin_post(USERS, json!({"uid": "stays"})), 200, "create other");

    let reply = server.admin_delete(&user_path("gone"));
    let body = assert_status(&reply, 200, "delete");
    assert_eq!(
        (&body["uid"], &body["deleted"], &body["events_removed"]),
        (&json!("gone"), &json!(true), &json!(0)),
        "{body}"
    );
    assert_error(&server.admin_get(&user_path("gone")), 404, "not_found", "deleted user");
    assert_error(
        &server.admin_delete(&user_path("gone")),
        404,
        "not_found",
        "delete again",
    );
    assert_error(
        &server.admin_delete(&user_path("never")),
        404,
        "not_found",
        "unknown user",
    );
    assert_status(&server.admin_get(&user_path("stays")), 200, "other user untouched");

    // The uid can be used again: a new record with a fresh created_at.
    let before = now();
    let reply = server.admin_post(USERS, json!({"uid": "gone"}));
    let after = now();
    let user = assert_status(&reply, 200, "recreate");
    assert_server_time_between(&user["created_at"], before, after);
    assert!(
        user.get("country").is_none_or(Value::is_null),
        "old fields came back: {user}"
    );
}
