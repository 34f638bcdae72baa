//! The HTTP front end: health probes, routing errors (404/405), body decoding
//! errors (400/422), body limits (413), slow bodies (408) and graceful stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;

/// Every route of the contract that takes a JSON body (method, path).
/// `/v1/catalog/table/t/fields/f` needs table `t`, which the tests create first.
const JSON_BODY_ROUTES: [(&str, &str); 6] = [
    ("PUT", "/v1/catalog/table"),
    ("PUT", "/v1/catalog/table/t/fields/f"),
    ("PUT", "/v1/catalog/item"),
    ("PUT", "/v1/catalog/items"),
    ("POST", "/v1/users"),
    ("POST", "/v1/admin/keys"),
];

fn method(name: &str) -> Method {
    Method::from_bytes(name.as_bytes()).unwrap()
}

#[test]
fn health_routing_errors_and_graceful_stop() {
    let mut server = TestServer::start();

    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let reply = server.send(Method::GET, path, Auth::None, Payload::Empty, &[]).pair();
        assert_eq!(assert_status(&reply, 200, path), &json!({"status": status}));
    }

    // Unknown routes are 404 for a valid key of any scope, and 401 without one (or with
    // a wrong one): a client without a key learns nothing about the routes.
    let reader = server.create_key(&["recommend"], json!({"name": "reader"}));
    for path in [
        "/nope",
        "/v1/nope",
        "/v1/catalog",
        "/v1/catalog/item/a/b/c",
        "/v1/users/a/b",
    ] {
        let without_key = server.send(Method::GET, path, Auth::None, Payload::Empty, &[]);
        assert_error(
            &without_key.pair(),
            401,
            "unauthorized",
            &format!("GET {path} without key"),
        );
        let wrong_key = server.send(Method::GET, path, Auth::Bearer("not-a-key"), Payload::Empty, &[]);
        assert_error(
            &wrong_key.pair(),
            401,
            "unauthorized",
            &format!("GET {path} with a wrong key"),
        );
        assert_error(&server.admin_get(path), 404, "not_found", &format!("GET {path}"));
        assert_error(
            &server.get(path, &reader),
            404,
            "not_found",
            &format!("GET {path} (recommend key)"),
        );
    }

    // Known paths with a wrong method: 405 with an Allow header naming the allowed methods.
    let cases: [(&str, &str, &[&str]); 8] = [
        ("DELETE", "/v1/catalog/table", &["GET", "PUT"]),
        ("POST", "/v1/catalog/item", &["PUT"]),
        ("GET", "/v1/catalog/items", &["PUT"]),
        ("PUT", "/v1/catalog/item/items/x", &["GET", "PATCH", "DELETE"]),
        ("GET", "/v1/users", &["POST"]),
        ("PUT", "/v1/users/u1", &["GET", "PATCH", "DELETE"]),
        ("PUT", "/v1/admin/keys", &["GET", "POST"]),
        ("POST", "/healthz", &["GET"]),
    ];
    for (verb, path, allowed) in cases {
        // Without a key a wrong method is 401, except on the probes, which need none.
        if path != "/healthz" {
            let reply = server.send(method(verb), path, Auth::None, Payload::Empty, &[]);
            assert_error(
                &reply.pair(),
                401,
                "unauthorized",
                &format!("{verb} {path} without key"),
            );
        }
        let auths = if path == "/healthz" {
            vec![Auth::None, Auth::Bearer(&server.admin_key)]
        } else {
            vec![Auth::Bearer(&server.admin_key)]
        };
        for auth in auths {
            let reply = server.send(method(verb), path, auth, Payload::Empty, &[]);
            let context = format!("{verb} {path} ({auth:?})");
            let allow = reply
                .header("allow")
                .unwrap_or_else(|| panic!("{context}: no Allow header"));
            let allow: Vec<String> = allow.split(',').map(|m| m.trim().to_ascii_uppercase()).collect();
            assert_error(&reply.pair(), 405, "method_not_allowed", &context);
            for expected in allowed {
                assert!(
                    allow.iter().any(|m| m == expected),
                    "{context}: Allow {allow:?} lacks {expected}"
                );
            }
            assert!(
                !allow.iter().any(|m| m == verb),
                "{context}: Allow {allow:?} lists {verb}"
            );
        }
    }

    // The server still serves after all that, then stops gracefully with exit code 0.
    assert_status(&server.admin_put(ITEM, json!({"id": "before-stop"})), 200, "put");
    let base_url = server.base_url.clone();
    server.stop();
    let refused = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{base_url}/healthz"))
        .send();
    assert!(
        refused.is_err(),
        "server still answers after graceful stop: {refused:?}"
    );
}

#[test]
fn malformed_json_and_wrong_reserved_types() {
    let server = TestServer::start();
    let admin = server.admin_key.clone();
    assert_status(&server.admin_put(TABLE, json!({"table_name": "t"})), 200, "create t");
    assert_status(
        &server.admin_put(ITEM, json!({"id": "i1", "_table": "t", "f": "x"})),
        200,
        "seed",
    );

    // Not JSON at all -> 400 malformed_json on every JSON-body route (for the bulk
    // route a body that starts with `[` is taken as JSON, not NDJSON).
    for (verb, path) in JSON_BODY_ROUTES {
        for body in ["{\"id\": ", "[{\"id\": \"a\"", "{id: 'a'}", "{\"a\":1}}"] {
            if path == "/v1/catalog/items" && !body.starts_with('[') {
                continue;
            }
            let reply = server.raw(method(verb), path, &admin, body.as_bytes(), "application/json");
            assert_error(&reply, 400, "malformed_json", &format!("{verb} {path} body {body:?}"));
        }
    }

    // Valid JSON with wrong types in reserved/required positions -> 422 validation_error.
    let cases: Vec<(&str, &str, Value)> = vec![
        ("PUT", "/v1/catalog/item", json!({"id": 5})),
        ("PUT", "/v1/catalog/item", json!({"id": ""})),
        ("PUT", "/v1/catalog/item", json!({"name": "no id"})),
        ("PUT", "/v1/catalog/item", json!({"id": null})),
        ("PUT", "/v1/catalog/item", json!({"id": ["a"]})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "_table": []})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "_table": 7})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "is_deleted": "yes"})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "is_deleted": 1})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "created_at": "yesterday"})),
        ("PUT", "/v1/catalog/item", json!({"id": "a", "created_at": true})),
        ("PUT", "/v1/catalog/item", json!([{"id": "a"}])),
        ("PUT", "/v1/catalog/item", json!("a")),
        ("PUT", "/v1/catalog/item", json!(42)),
        ("PUT", "/v1/catalog/table", json!({"table_name": 5})),
        ("PUT", "/v1/catalog/table", json!({"description": "no name"})),
        ("PUT", "/v1/catalog/table", json!({"table_name": "has space"})),
        ("PUT", "/v1/catalog/table", json!({"table_name": ""})),
        ("PUT", "/v1/catalog/table", json!({"table_name": "x".repeat(129)})),
        (
            "PUT",
            "/v1/catalog/table",
            json!({"table_name": "ok", "description": 5}),
        ),
        (
            "PUT",
            "/v1/catalog/table",
            json!({"table_name": "ok", "relations": "brand"}),
        ),
        (
            "PUT",
            "/v1/catalog/table",
            json!({"table_name": "ok", "relations": [{"field": 1}]}),
        ),
        ("PUT", "/v1/catalog/table", json!([{"table_name": "ok"}])),
        ("PUT", "/v1/catalog/table/t/fields/f", json!({"type": 5})),
        ("PUT", "/v1/catalog/table/t/fields/f", json!({})),
        ("PUT", "/v1/catalog/table/t/fields/f", json!(["string"])),
        ("POST", "/v1/users", json!({"uid": 5})),
        ("POST", "/v1/users", json!({"uid": ""})),
        ("POST", "/v1/users", json!({"name": "no uid"})),
        ("POST", "/v1/users", json!({"uid": "u", "is_deleted": "yes"})),
        ("POST", "/v1/users", json!({"uid": "u", "_table": []})),
        ("POST", "/v1/users", json!({"users": "u"})),
        ("POST", "/v1/users", json!("u")),
        ("POST", "/v1/admin/keys", json!({"name": 5, "scopes": ["search"]})),
        ("POST", "/v1/admin/keys", json!({"name": "k", "scopes": "search"})),
        ("POST", "/v1/admin/keys", json!({"name": "k", "scopes": [1]})),
        (
            "POST",
            "/v1/admin/keys",
            json!({"name": "k", "scopes": ["search"], "rate_per_sec": "fast"}),
        ),
        (
            "POST",
            "/v1/admin/keys",
            json!({"name": "k", "scopes": ["search"], "burst": 1.5}),
        ),
        (
            "POST",
            "/v1/admin/keys",
            json!({"name": "k", "scopes": ["search"], "expires_at": true}),
        ),
        ("POST", "/v1/admin/keys", json!([{"name": "k", "scopes": ["search"]}])),
    ];
    for (verb, path, body) in cases {
        let reply = server.send(
            method(verb),
            path,
            Auth::Bearer(&admin),
            Payload::Json(body.clone()),
            &[],
        );
        assert_error(&reply.pair(), 422, "validation_error", &format!("{verb} {path} {body}"));
    }

    // `_table: "users"` is refused on the item route (422 with an error body), and
    // none of the refused items above was stored.
    let reply = server.admin_put(ITEM, json!({"id": "a", "_table": "users"}));
    assert_status(&reply, 422, "_table users");
    assert_error_body(&reply.1, "_table users");
    assert_error(
        &server.admin_get("/v1/catalog/item/items/a"),
        404,
        "not_found",
        "refused item a",
    );
    assert_error(&server.admin_get("/v1/users/u"), 404, "not_found", "refused user u");
}

#[test]
fn admin_stats_show_request_times_per_endpoint() {
    let server = TestServer::start();
    for _ in 0..5 {
        let reply = server.send(Method::GET, "/healthz", Auth::None, Payload::Empty, &[]);
        assert_status(&reply.pair(), 200, "healthz");
    }
    assert_error(&server.admin_get("/nope"), 404, "not_found", "unrouted");
    assert_error(&server.admin_get("/v1/users/nobody"), 404, "not_found", "unknown user");
    let recommend = json!({"model_id": "test_model_item_200", "user_id": "u", "item_ids": ["a", "b"]});
    assert_status(&server.admin_post("/v1/recommend", recommend), 200, "recommend");

    let (_, stats) = server.admin_get("/v1/admin/stats");
    let requests = stats["requests"]
        .as_object()
        .unwrap_or_else(|| panic!("no requests in {stats}"));
    assert_eq!(requests["/healthz"]["requests"], 5, "{stats}");
    assert_eq!(requests["/v1/users/{uid}"]["requests"], 1, "{stats}");
    assert_eq!(requests["/v1/recommend"]["requests"], 1, "{stats}");
    let times = &requests["/v1/recommend"];
    for field in ["p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
        let ms = times[field].as_f64().unwrap_or_else(|| panic!("{field} in {times}"));
        assert!(ms > 0.0 && ms < 10_000.0, "{field} in {times}");
    }
    // Only routed endpoints that served are listed; this request is counted after its answer.
    assert_eq!(requests.len(), 3, "{stats}");
    let (_, again) = server.admin_get("/v1/admin/stats");
    assert_eq!(again["requests"]["/v1/admin/stats"]["requests"], 1, "{again}");
}

#[test]
fn body_limit_is_enforced_with_content_length_and_chunked() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__SERVER__BODY_LIMIT_BYTES", "1024")]);
    let admin = server.admin_key.clone();
    let big_item = serde_json::to_vec(&json!({"id": "big", "pad": "x".repeat(4000)})).unwrap();
    let big_user = serde_json::to_vec(&json!({"uid": "big", "pad": "x".repeat(4000)})).unwrap();
    let json_type = [("content-type", "application/json")];

    // A body under the limit passes.
    assert_status(
        &server.admin_put(ITEM, json!({"id": "small", "pad": "x"})),
        200,
        "small",
    );

    let cases = [
        (Method::PUT, "/v1/catalog/item", &big_item),
        (Method::PUT, "/v1/catalog/items", &big_item),
        (Method::POST, "/v1/users", &big_user),
    ];
    for (verb, path, body) in cases {
        for chunked in [false, true] {
            let payload = if chunked {
                Payload::Chunked(body.to_vec())
            } else {
                Payload::Bytes(body.to_vec())
            };
            let reply = server.send(verb.clone(), path, Auth::Bearer(&admin), payload, &json_type);
            let context = format!("{verb} {path} chunked={chunked}");
            assert_error(&reply.pair(), 413, "payload_too_large", &context);
        }
    }

    // Auth is checked before the body: an oversized body without a key is 401.
    let reply = server.send(
        Method::PUT,
        "/v1/catalog/item",
        Auth::None,
        Payload::Bytes(big_item.clone()),
        &json_type,
    );
    assert_error(&reply.pair(), 401, "unauthorized", "oversized body without key");

    // Nothing of the refused bodies was stored, the server keeps serving.
    assert_error(
        &server.admin_get("/v1/catalog/item/items/big"),
        404,
        "not_found",
        "big item",
    );
    assert_error(&server.admin_get("/v1/users/big"), 404, "not_found", "big user");
    let (_, small) = server.admin_get("/v1/catalog/item/items/small");
    assert_eq!(small["pad"], "x");
}

/// A refused body that is still arriving when the server answers: the client must
/// be able to finish sending, read the error, and go on using the connection.
/// (A server that closes with unread input resets the connection, and the reset
/// can destroy the error response before the client reads it.)
#[test]
fn refused_bodies_are_read_to_their_end_before_the_connection_goes_on() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__SERVER__BODY_LIMIT_BYTES", "1024")]);
    let address = server.base_url.trim_start_matches("http://").to_string();
    let padding = "x".repeat(8000);
    let big_item = format!("{{\"id\": \"big\", \"pad\": \"{padding}\"}}");
    let (first_half, second_half) = big_item.split_at(big_item.len() / 2);

    let key = format!("Authorization: Bearer {}\r\n", server.admin_key);
    let announced = format!("Content-Length: {}\r\n", big_item.len());
    let chunked = "Transfer-Encoding: chunked\r\n".to_string();
    let chunk = |part: &str| format!("{:x}\r\n{part}\r\n", part.len());
    let plain_parts = (first_half.to_string(), second_half.to_string());
    let chunked_parts = (chunk(first_half), format!("{}0\r\n\r\n", chunk(second_half)));
    let cases = [
        (
            "announced too large",
            &key,
            &announced,
            &plain_parts,
            413,
            "payload_too_large",
        ),
        (
            "streamed too large",
            &key,
            &chunked,
            &chunked_parts,
            413,
            "payload_too_large",
        ),
        (
            "without a key",
            &String::new(),
            &announced,
            &plain_parts,
            401,
            "unauthorized",
        ),
    ];
    for (case, auth, framing, (first, second), status, code) in cases {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "PUT /v1/catalog/item HTTP/1.1\r\nHost: {address}\r\n{auth}\
             Content-Type: application/json\r\n{framing}\r\n"
        );
        stream.write_all(format!("{head}{first}").as_bytes()).unwrap();
        // The server can answer from what it has; the rest of the body comes later.
        std::thread::sleep(Duration::from_millis(300));
        stream.write_all(second.as_bytes()).unwrap();

        let response = read_one_response(&mut stream);
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}")),
            "{case}: expected {status}, got:\n{response}"
        );
        let body = response_json(&response).unwrap_or_else(|| panic!("{case}: no JSON body in:\n{response}"));
        assert_eq!(body["code"], code, "{case}: {body}");

        // The same connection serves the next request.
        let next = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n");
        stream.write_all(next.as_bytes()).unwrap();
        let response = read_one_response(&mut stream);
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "{case}: the connection did not go on after the refusal, got:\n{response}"
        );
    }
    assert_error(
        &server.admin_get("/v1/catalog/item/items/big"),
        404,
        "not_found",
        "big item",
    );
}

#[test]
fn stalled_body_gets_408() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__SERVER__REQUEST_TIMEOUT_MS", "300")]);
    let address = server.base_url.trim_start_matches("http://").to_string();

    // Headers announce 100 bytes, only part of the body follows, then the client stalls.
    let mut stream = TcpStream::connect(&address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let partial_body = "{\"id\": \"slow\", \"pad\": \"";
    let request = format!(
        "PUT /v1/catalog/item HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{partial_body}",
        server.admin_key
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.flush().unwrap();

    let response = read_one_response(&mut stream);
    assert!(
        response.starts_with("HTTP/1.1 408"),
        "expected a 408 response, got:\n{response}"
    );
    let body = response_json(&response).unwrap_or_else(|| panic!("no JSON body in:\n{response}"));
    assert_error_body(&body, "408 body");
    assert_eq!(body["code"], "timeout", "{body}");

    // The item was not stored; ordinary requests still work under the short deadline.
    assert_error(
        &server.admin_get("/v1/catalog/item/items/slow"),
        404,
        "not_found",
        "slow item",
    );
    assert_status(&server.admin_put(ITEM, json!({"id": "fast"})), 200, "fast item");
}

/// Reads from a raw connection until one complete HTTP response (with a JSON
/// body) has arrived, the peer closes, or the read times out.
fn read_one_response(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => received.extend_from_slice(&chunk[..read]),
        }
        if response_json(&String::from_utf8_lossy(&received)).is_some() {
            break;
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The JSON object in the body of a raw HTTP response (plain or single-chunk framing).
fn response_json(response: &str) -> Option<Value> {
    let (_, body) = response.split_once("\r\n\r\n")?;
    let start = body.find('{')?;
    let end = body.rfind('}')?;
    serde_json::from_str(body.get(start..=end)?).ok()
}

/// What hyper refuses before any handler runs gets the `{code, message}` body too.
#[test]
fn protocol_errors_have_the_error_body() {
    let server = TestServer::start();
    let address = server.base_url.trim_start_matches("http://").to_string();
    let many_headers: String = (0..150).map(|n| format!("X-Filler-{n}: {n}\r\n")).collect();
    let cases: [(&str, String, u16, &str); 5] = [
        (
            "garbage request line",
            "NOT HTTP AT ALL\r\n\r\n".into(),
            400,
            "malformed_request",
        ),
        (
            "a header without a colon",
            format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nbroken header\r\n\r\n"),
            400,
            "malformed_request",
        ),
        (
            "a URI over 64 KiB",
            format!(
                "GET /v1/search?q={} HTTP/1.1\r\nHost: {address}\r\n\r\n",
                "a".repeat(70_000)
            ),
            414,
            "uri_too_long",
        ),
        (
            "150 headers",
            format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n{many_headers}\r\n"),
            431,
            "headers_too_large",
        ),
        (
            "a 1 MB header",
            format!(
                "GET /healthz HTTP/1.1\r\nHost: {address}\r\nX-Big: {}\r\n\r\n",
                "b".repeat(1_000_000)
            ),
            431,
            "headers_too_large",
        ),
    ];
    for (case, request, status, code) in cases {
        let mut stream = TcpStream::connect(&address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // A server that answers early may close before it read everything: that is fine.
        let _ = stream.write_all(request.as_bytes());
        let response = read_one_response(&mut stream);
        assert!(
            response.starts_with(&format!("HTTP/1.1 {status}")),
            "{case}: expected {status}, got:\n{}",
            &response[..response.len().min(300)]
        );
        assert!(
            response.to_ascii_lowercase().contains("content-type: application/json"),
            "{case}:\n{response}"
        );
        let body = response_json(&response).unwrap_or_else(|| panic!("{case}: no JSON body in:\n{response}"));
        assert_error_body(&body, case);
        assert_eq!(body["code"], code, "{case}: {body}");
    }
    // The node goes on serving.
    assert_status(&server.admin_get("/v1/admin/stats"), 200, "stats after");
}
