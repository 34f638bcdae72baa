//! API keys: the auth matrix on every route, the admin key API, per-key rate
//! limits and the `rankstream keys` CLI.

use std::thread;

use crate::common::*;

/// Extra request headers, name and value.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// One route of the contract with a request that succeeds when authorized.
struct Route {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    scope: &'static str,
    /// Status of the request with a key that has the scope.
    authorized_status: u16,
}

impl Route {
    fn call(&self, server: &TestServer, auth: Auth, headers: &[(&str, &str)]) -> (StatusCode, Value) {
        let payload = self.body.clone().map_or(Payload::Empty, Payload::Json);
        server
            .send(self.method.clone(), self.path, auth, payload, headers)
            .pair()
    }

    fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Every route of the contract. Expects table `m` with item `m1` (field `f`, a
/// string) and user `m` to exist (see `seed`).
fn all_routes() -> Vec<Route> {
    let route = |method: Method, path, body, scope, authorized_status| Route {
        method,
        path,
        body,
        scope,
        authorized_status,
    };
    vec![
        route(Method::GET, "/v1/catalog/table/m", None, "catalog:read", 200),
        route(
            Method::PUT,
            "/v1/catalog/table",
            Some(json!({"table_name": "m"})),
            "catalog:write",
            200,
        ),
        route(Method::DELETE, "/v1/catalog/table/absent", None, "catalog:write", 404),
        route(
            Method::PUT,
            "/v1/catalog/table/m/fields/f",
            Some(json!({"type": "string"})),
            "catalog:write",
            200,
        ),
        route(
            Method::PUT,
            "/v1/catalog/item",
            Some(json!({"id": "m1", "_table": "m", "f": "y"})),
            "catalog:write",
            200,
        ),
        route(
            Method::PUT,
            "/v1/catalog/items",
            Some(json!([{"id": "m2", "_table": "m"}])),
            "catalog:write",
            200,
        ),
        route(Method::GET, "/v1/catalog/item/m/m1", None, "catalog:read", 200),
        route(Method::DELETE, "/v1/catalog/item/m/absent", None, "catalog:write", 404),
        route(Method::POST, "/v1/users", Some(json!({"uid": "m"})), "users:write", 200),
        route(Method::GET, "/v1/users/m", None, "catalog:read", 200),
        route(Method::DELETE, "/v1/users/absent", None, "users:write", 404),
        route(
            Method::POST,
            "/v1/admin/keys",
            Some(json!({"name": "m", "scopes": ["search"]})),
            "admin",
            201,
        ),
        route(Method::GET, "/v1/admin/keys", None, "admin", 200),
        route(Method::DELETE, "/v1/admin/keys/absent", None, "admin", 404),
        route(Method::GET, "/v1/catalog/table", None, "catalog:read", 200),
        route(Method::GET, "/metrics", None, "metrics", 200),
        route(Method::GET, "/v1/admin/backup", None, "admin", 200),
    ]
}

fn seed(server: &TestServer) {
    assert_status(&server.admin_put(TABLE, json!({"table_name": "m"})), 200, "table m");
    let item = json!({"id": "m1", "_table": "m", "f": "x"});
    assert_status(&server.admin_put(ITEM, item), 200, "item m1");
    assert_status(&server.admin_post("/v1/users", json!({"uid": "m"})), 200, "user m");
}

/// Scopes of a key that lacks `scope`: every other scope except admin.
fn all_scopes_but(scope: &str) -> Vec<&'static str> {
    ALL_SCOPES
        .iter()
        .copied()
        .filter(|s| *s != scope && *s != "admin")
        .collect()
}

/// Room for every refused key the matrix sends (the default throttles at 20 a minute).
const MANY_FAILURES: (&str, &str) = ("RANKSTREAM__AUTH__FAILURES_PER_MINUTE", "1000000");

#[test]
fn auth_matrix_on_every_route() {
    let server = TestServer::start_with_env(&[MANY_FAILURES]);
    seed(&server);
    let routes = all_routes();

    // A short-lived admin key: works now, is refused everywhere once expired.
    let expiry = now() + millis(1500);
    let expiring = server.create_key_record(
        &["admin"],
        json!({"name": "expiring", "expires_at": rfc3339_ms(expiry)}),
    );
    assert_eq!(
        parse_time(&expiring["expires_at"]).timestamp_millis(),
        expiry.timestamp_millis()
    );
    let expiring_key = expiring["key"].as_str().unwrap().to_string();
    assert_status(
        &server.get("/v1/admin/keys", &expiring_key),
        200,
        "expiring key before expiry",
    );

    let revoked = server.create_key_record(&["admin"], json!({"name": "revoked"}));
    let revoked_path = format!("/v1/admin/keys/{}", revoked["id"].as_str().unwrap());
    assert_status(&server.admin_delete(&revoked_path), 200, "revoke");
    let revoked_key = revoked["key"].as_str().unwrap();

    for route in &routes {
        let name = route.name();
        let with_scope = server.create_key(&[route.scope], json!({"name": format!("has {}", route.scope)}));
        let without_scope = server.create_key(&all_scopes_but(route.scope), json!({"name": "lacks scope"}));

        let unauthorized: [(&str, Auth, Headers); 6] = [
            ("no key", Auth::None, &[]),
            ("unknown bearer key", Auth::Bearer("rs_unknown_key_0123456789"), &[]),
            ("unknown x-api-key", Auth::ApiKey("rs_unknown_key_0123456789"), &[]),
            ("basic auth", Auth::None, &[("authorization", "Basic dXNlcjpwYXNz")]),
            ("revoked key", Auth::Bearer(revoked_key), &[]),
            ("revoked x-api-key", Auth::ApiKey(revoked_key), &[]),
        ];
        for (case, auth, headers) in unauthorized {
            assert_error(
                &route.call(&server, auth, headers),
                401,
                "unauthorized",
                &format!("{name}: {case}"),
            );
        }
        for auth in [Auth::Bearer(&without_scope), Auth::ApiKey(&without_scope)] {
            let context = format!("{name}: key without {} ({auth:?})", route.scope);
            assert_error(&route.call(&server, auth, &[]), 403, "forbidden", &context);
        }
        for (case, auth) in [
            ("scoped bearer", Auth::Bearer(&with_scope)),
            ("scoped x-api-key", Auth::ApiKey(&with_scope)),
            ("admin key", Auth::Bearer(&server.admin_key)),
            ("admin x-api-key", Auth::ApiKey(&server.admin_key)),
        ] {
            let reply = route.call(&server, auth, &[]);
            assert_status(&reply, route.authorized_status, &format!("{name}: {case}"));
        }
    }

    // The only sleep of the suite: wait until the short-lived key has expired.
    let remaining = expiry + millis(300) - now();
    if let Ok(remaining) = remaining.to_std() {
        thread::sleep(remaining);
    }
    for route in &routes {
        for auth in [Auth::Bearer(&expiring_key), Auth::ApiKey(&expiring_key)] {
            let context = format!("{}: expired key ({auth:?})", route.name());
            assert_error(&route.call(&server, auth, &[]), 401, "unauthorized", &context);
        }
    }
}

#[test]
fn an_address_that_presents_wrong_keys_is_throttled() {
    let server = TestServer::start();
    let key = server.create_key(&["search"], json!({"name": "valid"}));
    let search = |auth: Auth| {
        server.send(
            Method::POST,
            "/v1/search",
            auth,
            Payload::Json(json!({"query": "x"})),
            &[],
        )
    };
    // The default: 20 refused keys a minute per address, each a 401.
    for attempt in 0..20 {
        let wrong = format!("rsk_wrong_{attempt}");
        let auth = if attempt % 2 == 0 {
            Auth::Bearer(&wrong)
        } else {
            Auth::ApiKey(&wrong)
        };
        assert_error(
            &search(auth).pair(),
            401,
            "unauthorized",
            &format!("wrong key {attempt}"),
        );
    }
    // The next one, and then any request of the address with a key, valid or not.
    for (case, auth) in [
        ("21st wrong key", Auth::Bearer("rsk_wrong_21")),
        ("valid key", Auth::Bearer(&key)),
    ] {
        let reply = search(auth);
        let retry_after: u64 = reply
            .header("retry-after")
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("{case}: Retry-After in whole seconds"));
        assert!((1..=3).contains(&retry_after), "{case}: Retry-After {retry_after}");
        assert_error(&reply.pair(), 429, "rate_limited", case);
    }
    // Without a key there is nothing to guess with: 401, not 429.
    assert_error(&search(Auth::None).pair(), 401, "unauthorized", "no key");
    // The probes need no key.
    let probe = server.send(Method::GET, "/healthz", Auth::None, Payload::Empty, &[]);
    assert_status(&probe.pair(), 200, "healthz");

    // The bucket refills one failure per 3 s: the valid key works again.
    thread::sleep(std::time::Duration::from_millis(3100));
    assert_status(&search(Auth::Bearer(&key)).pair(), 200, "valid key after the wait");

    // Counted in the node's statistics.
    let stats = server.admin_get("/v1/admin/stats");
    let auth = &assert_status(&stats, 200, "stats")["auth"];
    assert_eq!(auth["failures"], 21, "{auth}");
    assert_eq!(auth["throttled"], 2, "{auth}");
}

#[test]
fn admin_key_api_create_list_revoke_and_validation() {
    let server = TestServer::start();

    let before = now();
    let reader = server.create_key_record(&["catalog:read"], json!({"name": "reader"}));
    let after = now();
    let reader_id = reader["id"].as_str().expect("id").to_string();
    let reader_key = reader["key"].as_str().expect("key").to_string();
    assert!(!reader_id.is_empty() && !reader_key.is_empty(), "{reader}");
    assert_ne!(reader_key, reader_id);
    assert_eq!(reader["name"], "reader");
    assert_eq!(reader["scopes"], json!(["catalog:read"]));
    assert_eq!(reader["expires_at"], Value::Null);
    // null: the key follows the server's configured default quota.
    assert_eq!(reader["rate_per_sec"], Value::Null, "default rate: {reader}");
    assert_eq!(reader["burst"], Value::Null, "default burst: {reader}");
    let created = parse_time(&reader["created_at"]);
    assert!(
        created >= before - millis(1000) && created <= after + millis(1000),
        "{reader}"
    );

    // Expiry as unix seconds and as unix milliseconds; explicit rate and burst.
    let in_an_hour = now().timestamp() + 3600;
    let limited = server.create_key_record(
        &["users:write", "catalog:write"],
        json!({"name": "limited", "expires_at": in_an_hour, "rate_per_sec": 5, "burst": 7}),
    );
    assert_eq!(parse_time(&limited["expires_at"]).timestamp(), in_an_hour, "{limited}");
    assert_eq!(
        (limited["rate_per_sec"].as_i64(), limited["burst"].as_i64()),
        (Some(5), Some(7))
    );
    assert_eq!(sorted_scopes(&limited), ["catalog:write", "users:write"]);
    let in_two_hours_ms = now().timestamp_millis() + 7_200_000;
    let millis_key = server.create_key_record(&["search"], json!({"expires_at": in_two_hours_ms}));
    assert_eq!(
        parse_time(&millis_key["expires_at"]).timestamp_millis(),
        in_two_hours_ms,
        "{millis_key}"
    );
    let every_scope = server.create_key_record(&ALL_SCOPES, json!({"name": "every scope"}));
    assert_eq!(every_scope["scopes"].as_array().unwrap().len(), ALL_SCOPES.len());

    // The new key works for its scope only.
    assert_error(
        &server.get("/v1/catalog/table/absent", &reader_key),
        404,
        "not_found",
        "reader read",
    );
    let write = server.put("/v1/catalog/table", &reader_key, json!({"table_name": "x"}));
    assert_error(&write, 403, "forbidden", "reader write");

    // The list shows every key without any secret.
    let reply = server.admin_get("/v1/admin/keys");
    let listed = assert_status(&reply, 200, "list keys")["keys"]
        .as_array()
        .expect("keys array")
        .clone();
    let listed_text = reply.1.to_string();
    for secret in [&reader_key, &server.admin_key] {
        assert!(
            !listed_text.contains(secret.as_str()),
            "list shows a secret: {listed_text}"
        );
    }
    for entry in &listed {
        assert!(entry.get("key").is_none(), "listed entry has a key field: {entry}");
    }
    let find = |id: &Value| listed.iter().find(|entry| entry["id"] == *id).cloned();
    let listed_reader = find(&reader["id"]).expect("reader listed");
    for field in ["name", "scopes", "expires_at", "rate_per_sec", "burst", "created_at"] {
        assert_eq!(listed_reader[field], reader[field], "listed field {field}");
    }
    let listed_limited = find(&limited["id"]).expect("limited listed");
    assert_eq!(listed_limited["expires_at"], limited["expires_at"]);
    assert_eq!(listed_limited["rate_per_sec"], 5);

    // Revoke: 200, then the key is refused; unknown ids are 404.
    let revoke = server.admin_delete(&format!("/v1/admin/keys/{reader_id}"));
    assert_eq!(
        assert_status(&revoke, 200, "revoke"),
        &json!({"id": reader_id, "revoked": true})
    );
    assert_error(
        &server.get("/v1/catalog/table/absent", &reader_key),
        401,
        "unauthorized",
        "revoked",
    );
    assert_error(
        &server.admin_delete("/v1/admin/keys/no-such-id"),
        404,
        "not_found",
        "revoke unknown",
    );
    // The other keys are untouched.
    let limited_key = limited["key"].as_str().unwrap();
    assert_status(
        &server.post("/v1/users", limited_key, json!({"uid": "u1"})),
        200,
        "limited key works",
    );

    // Invalid key requests: 422 validation_error, nothing created.
    let past_unix = now().timestamp() - 3600;
    let invalid = [
        json!({"name": "k", "scopes": ["nope"]}),
        json!({"name": "k", "scopes": ["catalog:read", "catalog:delete"]}),
        json!({"name": "k", "scopes": []}),
        json!({"name": "k"}),
        json!({"scopes": ["search"]}),
        json!({"name": "k", "scopes": ["search"], "expires_at": "2001-01-01T00:00:00Z"}),
        json!({"name": "k", "scopes": ["search"], "expires_at": past_unix}),
        json!({"name": "k", "scopes": ["search"], "expires_at": "next tuesday"}),
        json!({"name": "k", "scopes": ["search"], "rate_per_sec": 0}),
        json!({"name": "k", "scopes": ["search"], "rate_per_sec": -1}),
        json!({"name": "k", "scopes": ["search"], "burst": 0}),
    ];
    for body in invalid {
        assert_error(
            &server.admin_post("/v1/admin/keys", body.clone()),
            422,
            "validation_error",
            &body.to_string(),
        );
    }
    let (_, list) = server.admin_get("/v1/admin/keys");
    let count = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["name"] == "k")
        .count();
    assert_eq!(count, 0, "a refused key was created: {list}");
}

#[test]
fn rate_limit_per_key_on_every_route_group() {
    let server = TestServer::start();
    seed(&server);
    // (group scope, method, path, valid body); the third request carries a
    // malformed body where there is one: the rate limit is checked before the body.
    let groups: [(&str, Method, &str, Option<Value>); 4] = [
        ("catalog:read", Method::GET, "/v1/catalog/item/m/m1", None),
        (
            "catalog:write",
            Method::PUT,
            "/v1/catalog/item",
            Some(json!({"id": "r1", "_table": "m"})),
        ),
        ("users:write", Method::POST, "/v1/users", Some(json!({"uid": "r1"}))),
        ("admin", Method::GET, "/v1/admin/keys", None),
    ];
    for (scope, method, path, body) in groups {
        let key = server.create_key(&[scope], json!({"name": "limited", "rate_per_sec": 1, "burst": 2}));
        for attempt in 1..=2 {
            let payload = body.clone().map_or(Payload::Empty, Payload::Json);
            let reply = server
                .send(method.clone(), path, Auth::Bearer(&key), payload, &[])
                .pair();
            assert_status(&reply, 200, &format!("{scope} #{attempt}"));
        }
        let payload = match body {
            Some(_) => Payload::Bytes(b"{\"id\": ".to_vec()),
            None => Payload::Empty,
        };
        let json_type = [("content-type", "application/json")];
        let reply = server.send(method.clone(), path, Auth::Bearer(&key), payload, &json_type);
        let retry_after = reply.header("retry-after");
        assert_error(&reply.pair(), 429, "rate_limited", &format!("{scope} #3"));
        let retry_after = retry_after.unwrap_or_else(|| panic!("{scope}: 429 without Retry-After"));
        let seconds: u64 = retry_after
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{scope}: Retry-After {retry_after:?} is not integer seconds"));
        assert!((1..=60).contains(&seconds), "{scope}: Retry-After {seconds}");

        // The limit is per key: the admin key is not affected.
        assert_status(&server.admin_get("/v1/catalog/item/m/m1"), 200, "admin after 429");
    }
}

#[test]
fn keys_cli_create_list_revoke_on_stopped_server() {
    let mut server = TestServer::start();
    assert_status(&server.admin_put(TABLE, json!({"table_name": "cli_t"})), 200, "table");
    server.stop();

    let created = server.keys_cli(
        "create",
        &["--name", "cli", "--scopes", "catalog:read", "--expires", "30d"],
    );
    let id = created["id"].as_str().expect("id").to_string();
    let secret = created["key"].as_str().expect("key").to_string();
    assert_eq!(created["name"], "cli");
    assert_eq!(created["scopes"], json!(["catalog:read"]));
    let expected_expiry = now() + chrono::TimeDelta::days(30);
    let expires = parse_time(&created["expires_at"]);
    assert!(
        (expires - expected_expiry).num_minutes().abs() <= 60,
        "expires_at {expires} not ~30 days ahead"
    );

    let args = [
        "--name",
        "cli2",
        "--scopes",
        "catalog:read,users:write",
        "--rate-per-sec",
        "1",
        "--burst",
        "2",
    ];
    let second = server.keys_cli("create", &args);
    let second_secret = second["key"].as_str().expect("key").to_string();
    assert_eq!(second["expires_at"], Value::Null, "{second}");

    let listed = server.keys_cli("list", &[]);
    let listed_text = listed.to_string();
    let keys = listed["keys"].as_array().expect("keys array");
    for wanted in [&created["id"], &second["id"]] {
        assert!(keys.iter().any(|k| k["id"] == *wanted), "{wanted} not in {listed_text}");
    }
    assert!(
        keys.iter().all(|k| k.get("key").is_none()),
        "secret field listed: {listed_text}"
    );
    assert!(
        !listed_text.contains(&secret) && !listed_text.contains(&second_secret),
        "{listed_text}"
    );

    // The server accepts the CLI keys with their scopes and quotas.
    server.restart();
    let table = server.get("/v1/catalog/table/cli_t", &secret);
    assert_eq!(assert_status(&table, 200, "cli key read")["table_name"], "cli_t");
    let write = server.put("/v1/catalog/table", &secret, json!({"table_name": "nope"}));
    assert_error(&write, 403, "forbidden", "cli key write");
    let (_, list) = server.admin_get("/v1/admin/keys");
    let second_listed = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == second["id"])
        .cloned();
    let second_listed = second_listed.unwrap_or_else(|| panic!("cli2 not listed by the API: {list}"));
    assert_eq!(
        (second_listed["rate_per_sec"].as_i64(), second_listed["burst"].as_i64()),
        (Some(1), Some(2))
    );
    assert_eq!(sorted_scopes(&second_listed), ["catalog:read", "users:write"]);

    // Revoke with the CLI while stopped: refused after the restart, the other key still works.
    server.stop();
    let revoked = server.keys_cli("revoke", &[&id]);
    assert_eq!(revoked, json!({"id": id, "revoked": true}));
    server.restart();
    assert_error(
        &server.get("/v1/catalog/table/cli_t", &secret),
        401,
        "unauthorized",
        "revoked cli key",
    );
    assert_status(
        &server.get("/v1/catalog/table/cli_t", &second_secret),
        200,
        "other cli key",
    );
}
