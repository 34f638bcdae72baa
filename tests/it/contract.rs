//! Contract points the OpenAPI document and schema fuzzing settled: the bootstrap key
//! cannot be revoked over the API, bulk writes refuse an empty list and answer 400
//! when no row was stored, and whole-number floats count as integers.

use crate::common::*;

#[test]
fn the_bootstrap_admin_key_cannot_be_revoked_over_the_api() {
    let server = TestServer::start();
    let (status, body) = server.admin_get("/v1/admin/keys");
    assert_eq!(status, 200, "{body}");
    let bootstrap = body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["name"] == "bootstrap admin")
        .unwrap_or_else(|| panic!("no bootstrap key listed: {body}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = server.admin_delete(&format!("/v1/admin/keys/{bootstrap}"));
    assert_error(&reply, 409, "conflict", "revoke the bootstrap key");
    // The key still works, and other keys can still be revoked.
    assert_status(
        &server.admin_get("/v1/admin/keys"),
        200,
        "bootstrap key after the refusal",
    );
    let other = server.create_key_record(&["search"], json!({"name": "other"}));
    let path = format!("/v1/admin/keys/{}", other["id"].as_str().unwrap());
    assert_status(&server.admin_delete(&path), 200, "revoke another key");
}

#[test]
fn bulk_writes_refuse_empty_lists_and_answer_400_when_no_row_was_stored() {
    let server = TestServer::start();
    for (path, body) in [
        (ITEMS, json!([])),
        (ITEMS, json!({"items": []})),
        ("/v1/users", json!([])),
        ("/v1/users", json!({"users": []})),
    ] {
        let reply = if path == ITEMS {
            server.admin_put(path, body.clone())
        } else {
            server.admin_post(path, body.clone())
        };
        assert_error(&reply, 422, "validation_error", &format!("{path} {body}"));
    }
    let reply = server.admin_put(ITEMS, json!([{"title": "no id"}, 5]));
    let body = assert_status(&reply, 400, "no item stored");
    assert_eq!(body["code"], "validation_error", "{body}");
    assert_eq!(row_indexes(&body["details"]), [0, 1], "{body}");
    let reply = server.admin_post("/v1/users", json!({"users": [{"name": "no uid"}]}));
    let body = assert_status(&reply, 400, "no user stored");
    assert_eq!(
        (&body["code"], &body["details"][0]["index"]),
        (&json!("validation_error"), &json!(0)),
        "{body}"
    );
    // One good row is enough for a 200 with the others reported.
    let reply = server.admin_put(ITEMS, json!([{"id": "ok1"}, {"title": "no id"}]));
    let body = assert_status(&reply, 200, "partly stored");
    assert_eq!(
        (&body["upserted"], &body["failed"][0]["index"]),
        (&json!(1), &json!(1)),
        "{body}"
    );
}

#[test]
fn whole_number_floats_count_as_integers() {
    let server = TestServer::start();
    assert_status(
        &server.admin_put(
            ITEMS,
            json!([{"id": "a", "title": "red shoe"}, {"id": "b", "title": "red hat"}]),
        ),
        200,
        "items",
    );
    let recommend = server.admin_post(
        "/v1/recommend",
        json!({"model_id": "test_model_item_200", "user_id": "u", "item_ids": ["a", "b"], "limit": 1.0}),
    );
    assert_eq!(
        assert_status(&recommend, 200, "recommend")["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let search = server.admin_post("/v1/search", json!({"query": "red", "limit": 1.0}));
    // The index may not have caught up yet: the point is that 1.0 is a valid limit.
    assert!(assert_status(&search, 200, "search")["items"].as_array().unwrap().len() <= 1);
    let key = server.admin_post(
        "/v1/admin/keys",
        json!({"name": "floats", "scopes": ["search"], "rate_per_sec": 5.0, "burst": 10.0}),
    );
    let key = assert_status(&key, 201, "key with float rates");
    assert_eq!((&key["rate_per_sec"], &key["burst"]), (&json!(5), &json!(10)), "{key}");
    let event = json!({"type": "impression", "uid": "u", "item_id": "a", "rank": 2.0,
                       "original_timestamp": "2026-11-23T10:00:00Z"});
    assert_status(&server.admin_post("/v1/events", event), 202, "event with a float rank");
    // A fraction is not an integer.
    let reply = server.admin_post("/v1/search", json!({"query": "red", "limit": 1.5}));
    assert_error(&reply, 422, "validation_error", "limit 1.5");
}

/// Schema fuzzing found this: a number written with a leading point stopped the chat
/// tokenizer from advancing, and the request spun a runtime thread forever.
#[test]
fn a_chat_message_with_a_leading_point_is_answered() {
    let server = TestServer::start();
    for message in [".5", "something under .75 please"] {
        let reply = server.admin_post("/chat", json!({"message": message}));
        let body = assert_status(&reply, 200, message);
        assert!(body["message"].is_string(), "{body}");
    }
}

/// Body fuzzing (bench-fuzz) found this: a request refused before its body is read
/// (no key, unknown route, too large) whose body announces more than the server drains
/// (1 MiB) got its answer without `Connection: close`, and then the connection closed;
/// a keep-alive client sent its next request on it and lost that request.
#[test]
fn a_refused_body_the_server_will_not_read_is_answered_with_connection_close() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    let server = TestServer::start();
    let address = server.base_url.trim_start_matches("http://").to_string();
    let key = format!("Authorization: Bearer {}\r\n", server.admin_key);
    for (case, auth, length, status) in [
        ("no key, 2 MiB announced", String::new(), 2 << 20, 401),
        ("over the body limit", key.clone(), 17 << 20, 413),
        (
            "no key, 1 KiB announced (drained: stays open)",
            String::new(),
            1024,
            401,
        ),
    ] {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /v1/search HTTP/1.1\r\nHost: {address}\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n{{\"query\": \""
        );
        stream.write_all(head.as_bytes()).unwrap();
        // The answer comes from the head alone.
        let mut response = Vec::new();
        let mut buffer = [0u8; 4096];
        while !response.windows(4).any(|window| window == b"\r\n\r\n") {
            let read = stream.read(&mut buffer).expect("an answer");
            assert!(read > 0, "{case}: closed without an answer");
            response.extend_from_slice(&buffer[..read]);
        }
        let text = String::from_utf8_lossy(&response).to_ascii_lowercase();
        assert!(text.starts_with(&format!("http/1.1 {status}")), "{case}: {text}");
        let closes = text.contains("\r\nconnection: close\r\n");
        assert_eq!(closes, length > 1 << 20, "{case}: {text}");
    }
}

/// Body fuzzing found this: an event nesting 127 levels (serde_json reads 128) was
/// accepted, and stored one level deeper: it could not be read back, so
/// `GET /v1/events/{id}` and every retrain answered 500. Bodies nesting more than 64
/// levels are refused; what is accepted reads back.
#[test]
fn a_body_nested_too_deep_to_read_back_is_refused() {
    let server = TestServer::start();
    let nested = |levels: usize| -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        value
    };
    let deep = |id: &str, levels: usize| {
        event(
            "page_view",
            json!({"id": id, "sid": "s-deep", "item_id": "p1", "page_type": "product",
                   "properties": {"x": nested(levels)}}),
        )
    };
    let reply = server.ingest(deep("deep-125", 125));
    assert_eq!(reply.0, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.1);
    assert_eq!(reply.1["code"], "validation_error", "{}", reply.1);
    assert!(
        reply.1["message"].as_str().unwrap_or("").contains("64 levels"),
        "{}",
        reply.1
    );

    assert_status(&server.ingest(deep("deep-60", 60)), 202, "60 levels");
    assert_status(&server.admin_get("/v1/events/deep-60"), 200, "reads back");
    let retrained = server.admin_post("/v1/admin/models/retrain", json!({}));
    assert_eq!(
        assert_status(&retrained, 200, "retrain")["events"],
        1,
        "{}",
        retrained.1
    );
}
