//! `POST /v1/recommend/module`: SPEC rules 1-6 and DESIGN.md §7's placement of
//! colliding or out-of-range `fixed_position`s, statuses and mock models.
//!
//! `test_model_item_200` serves as both item and module model: it scores n candidates
//! in input order as n/n, (n-1)/n, ..., 1/n. The items of all modules (pinned ones
//! excepted) are one call, in request order; the unpinned modules another. A module
//! scores its module-model score plus the mean of its best three item scores.

use crate::common::*;

const MODULE: &str = "/v1/recommend/module";
const MOCK: &str = "test_model_item_200";

fn server_and_key() -> (TestServer, String) {
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "ranker"}));
    (server, key)
}

/// A request for `modules` with the 200 mock as both models.
fn request(modules: Value) -> Value {
    json!({"user_id": "u1", "item_model_id": MOCK, "module_model_id": MOCK, "modules": modules})
}

/// The ids of a list of modules or items.
fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|entry| entry["id"].as_str().expect("string id"))
        .collect()
}

/// The module with `id` in a response body.
fn module<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|module| module["id"] == id)
        .unwrap_or_else(|| panic!("no module {id} in {body}"))
}

#[test]
fn modules_and_items_come_in_ranked_order_with_scores() {
    let (server, key) = server_and_key();
    // Module model: empty 1.0, shelf 0.5. Items: a 1.0, b 0.5, so shelf scores
    // 0.5 + 0.75 and passes the empty module, which still gets its own score.
    let body = request(json!([
        {"id": "empty", "items": []},
        {"id": "shelf", "items": [{"id": "a"}, {"id": "b"}]},
    ]));
    let reply = server.post(MODULE, &key, body.clone());
    let first = assert_status(&reply, 200, "ranked modules").clone();
    assert_eq!(ids(&first["modules"]), ["shelf", "empty"]);
    assert_eq!(first["modules"][0]["score"], json!(1.25));
    assert_eq!(first["modules"][1]["score"], json!(1.0));
    assert_eq!(
        first["modules"][1]["items"],
        json!([]),
        "an empty module keeps its items array"
    );
    assert_eq!(
        first["modules"][0]["items"],
        json!([{"id": "a", "score": 1.0}, {"id": "b", "score": 0.5}])
    );
    assert!(
        first.get("warnings").is_none(),
        "no warnings without adjustments: {first}"
    );
    for module in first["modules"].as_array().unwrap() {
        assert!(module.get("fixed_position").is_none() && module.get("is_pre_ranked").is_none());
    }

    let again = server.post(MODULE, &key, body);
    let again = assert_status(&again, 200, "again");
    assert_eq!(again["modules"], first["modules"], "deterministic");
    assert!(first["rec_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_ne!(again["rec_id"], first["rec_id"], "rec_id is unique per response");
}

#[test]
fn pinned_modules_sit_at_their_index_without_score() {
    let (server, key) = server_and_key();
    let reply = server.post(
        MODULE,
        &key,
        request(json!([
            {"id": "a", "items": [{"id": "x"}]},
            {"id": "pinned-1", "fixed_position": 1, "items": [{"id": "y"}]},
            {"id": "c", "items": [{"id": "z"}]},
            {"id": "pinned-0", "fixed_position": 0, "items": []},
        ])),
    );
    let body = assert_status(&reply, 200, "pinned modules");
    assert_eq!(ids(&body["modules"]), ["pinned-0", "pinned-1", "a", "c"]);
    for (id, position) in [("pinned-0", 0), ("pinned-1", 1)] {
        let pinned = module(body, id);
        assert!(pinned.get("score").is_none(), "a pinned module has no score: {pinned}");
        assert_eq!(pinned["fixed_position"], position, "{pinned}");
    }
    // The items of a pinned module are still ranked and scored.
    assert!(module(body, "pinned-1")["items"][0]["score"].is_number(), "{body}");
    assert!(
        module(body, "a")["score"].as_f64() > module(body, "c")["score"].as_f64(),
        "{body}"
    );
    assert!(body.get("warnings").is_none(), "{body}");
}

#[test]
fn pinned_items_sit_at_their_index_without_score() {
    let (server, key) = server_and_key();
    let reply = server.post(
        MODULE,
        &key,
        request(json!([{"id": "m", "items": [
            {"id": "a"}, {"id": "b"}, {"id": "c", "fixed_position": 0}, {"id": "d", "fixed_position": 2},
        ]}])),
    );
    let body = assert_status(&reply, 200, "pinned items");
    assert_eq!(
        body["modules"][0]["items"],
        json!([
            {"id": "c", "fixed_position": 0},
            {"id": "a", "score": 1.0},
            {"id": "d", "fixed_position": 2},
            {"id": "b", "score": 0.5},
        ])
    );
}

#[test]
fn pre_ranked_modules_keep_request_order_without_item_scores() {
    let (server, key) = server_and_key();
    let reply = server.post(
        MODULE,
        &key,
        request(json!([
            {"id": "editorial", "is_pre_ranked": true, "items": [
                {"id": "p1"}, {"id": "p2"}, {"id": "p3", "fixed_position": 0}, {"id": "p4"},
            ]},
            {"id": "ranked", "is_pre_ranked": false, "items": [{"id": "r1"}]},
        ])),
    );
    let body = assert_status(&reply, 200, "pre-ranked");
    let editorial = module(body, "editorial");
    assert_eq!(editorial["is_pre_ranked"], true);
    assert!(
        editorial["score"].is_number(),
        "a pre-ranked module is still scored: {editorial}"
    );
    assert_eq!(
        editorial["items"],
        json!([{"id": "p3", "fixed_position": 0}, {"id": "p1"}, {"id": "p2"}, {"id": "p4"}])
    );
    let ranked = module(body, "ranked");
    assert_eq!(ranked["is_pre_ranked"], false, "echoed as sent");
    assert!(ranked["items"][0]["score"].is_number(), "{ranked}");
}

#[test]
fn limit_caps_each_module_after_placement() {
    let (server, key) = server_and_key();
    let reply = server.post(
        MODULE,
        &key,
        request(json!([
            {"id": "two", "limit": 2, "items": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
            {"id": "pinned-counts", "limit": 2, "items": [{"id": "d"}, {"id": "e"}, {"id": "f", "fixed_position": 0}]},
            {"id": "none", "limit": 0, "items": [{"id": "g"}]},
            {"id": "above", "limit": 9, "items": [{"id": "h"}]},
        ])),
    );
    let body = assert_status(&reply, 200, "limit");
    assert_eq!(ids(&module(body, "two")["items"]), ["a", "b"]);
    assert_eq!(ids(&module(body, "pinned-counts")["items"]), ["f", "d"]);
    assert_eq!(module(body, "none")["items"], json!([]));
    assert_eq!(ids(&module(body, "above")["items"]), ["h"]);
    assert!(module(body, "two").get("limit").is_none(), "limit is not echoed");
}

#[test]
fn colliding_and_out_of_range_pins_are_placed_and_warned() {
    let (server, key) = server_and_key();
    let reply = server.post(
        MODULE,
        &key,
        request(json!([
            {"id": "x", "items": [
                {"id": "i"}, {"id": "j", "fixed_position": 0}, {"id": "k", "fixed_position": 0},
                {"id": "l", "fixed_position": 7},
            ]},
            {"id": "a", "fixed_position": 1, "items": []},
            {"id": "b", "fixed_position": 1, "items": []},
            {"id": "c", "fixed_position": 0, "items": []},
            {"id": "d", "fixed_position": 9, "items": []},
        ])),
    );
    let body = assert_status(&reply, 200, "collisions");
    // Applied in ascending position, ties in request order: c at 0, a at 1, b finds
    // 1 taken and goes to 2; d asks past the end and goes to the end.
    assert_eq!(ids(&body["modules"]), ["c", "a", "b", "x", "d"]);
    assert_eq!(module(body, "b")["fixed_position"], 1, "the requested value is echoed");
    assert_eq!(module(body, "d")["fixed_position"], 9);
    assert_eq!(ids(&module(body, "x")["items"]), ["j", "k", "i", "l"]);
    let warnings = body["warnings"].as_array().expect("warnings");
    let codes: Vec<&str> = warnings.iter().map(|w| w["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "fixed_position_taken",
            "fixed_position_out_of_range",
            "fixed_position_taken",
            "fixed_position_out_of_range"
        ]
    );
    let messages: Vec<&str> = warnings.iter().map(|w| w["message"].as_str().unwrap()).collect();
    let expected = [
        vec!["\"b\"", "fixed_position 1", "placed at 2"],
        vec!["\"d\"", "fixed_position 9", "placed at 4"],
        vec!["\"k\"", "\"x\"", "fixed_position 0", "placed at 1"],
        vec!["\"l\"", "\"x\"", "fixed_position 7", "placed at 3"],
    ];
    for (message, parts) in messages.iter().zip(expected) {
        for part in parts {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
}

#[test]
fn golden_response() {
    let (server, key) = server_and_key();
    // Items scored in one call (h1, d1, d3, e1): 1, 0.75, 0.5, 0.25. Unpinned
    // modules (deals, empty, editorial, recent): 1, 0.75, 0.5, 0.25, plus the mean
    // of their best three item scores. empty and editorial tie at 0.75: request order.
    let reply = server.post(
        MODULE,
        &key,
        json!({
            "user_id": "u1",
            "session_id": "s1",
            "item_model_id": MOCK,
            "module_model_id": MOCK,
            "context": {"device_type": "mobile"},
            "modules": [
                {"id": "hero", "fixed_position": 0, "items": [{"id": "h1"}]},
                {"id": "deals", "limit": 2, "items": [{"id": "d1"}, {"id": "d2", "fixed_position": 0}, {"id": "d3"}]},
                {"id": "empty", "items": []},
                {"id": "editorial", "is_pre_ranked": true, "items": [{"id": "e1"}]},
                {"id": "recent", "items": [{"id": "r1", "fixed_position": 5}]},
                {"id": "banner", "fixed_position": 0, "items": []},
            ]
        }),
    );
    let mut body = assert_status(&reply, 200, "golden").clone();
    let rec_id = body.as_object_mut().unwrap().remove("rec_id").expect("rec_id");
    assert!(
        rec_id.as_str().is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()),
        "{rec_id}"
    );
    assert_eq!(
        body,
        json!({
            "modules": [
                {"id": "hero", "fixed_position": 0, "items": [{"id": "h1", "score": 1.0}]},
                {"id": "banner", "fixed_position": 0, "items": []},
                {"id": "deals", "score": 1.625, "items": [
                    {"id": "d2", "fixed_position": 0},
                    {"id": "d1", "score": 0.75},
                ]},
                {"id": "empty", "score": 0.75, "items": []},
                {"id": "editorial", "score": 0.75, "is_pre_ranked": true, "items": [{"id": "e1"}]},
                {"id": "recent", "score": 0.25, "items": [{"id": "r1", "fixed_position": 5}]},
            ],
            "warnings": [
                {
                    "code": "fixed_position_taken",
                    "message": "module \"banner\" asked for fixed_position 0, which is taken; placed at 1",
                },
                {
                    "code": "fixed_position_out_of_range",
                    "message": "item \"r1\" of module \"recent\" asked for fixed_position 5, past the last position (0); placed at 0",
                },
            ],
        })
    );
}

#[test]
fn validation_errors_name_the_field() {
    let (server, key) = server_and_key();
    let base = request(json!([{"id": "m", "items": [{"id": "a"}]}]));
    let with = |changes: Value| {
        let mut request = base.clone();
        for (field, value) in changes.as_object().unwrap() {
            if value.is_null() {
                request.as_object_mut().unwrap().remove(field);
            } else {
                request[field] = value.clone();
            }
        }
        request
    };
    let modules = |modules: Value| with(json!({ "modules": modules }));
    assert_error(
        &server.post(MODULE, &key, modules(json!([]))),
        400,
        "validation_error",
        "empty modules",
    );
    let cases = [
        (with(json!({"user_id": null})), "user_id", "missing user_id"),
        (with(json!({"user_id": 7})), "user_id", "user_id not a string"),
        (with(json!({"session_id": 7})), "session_id", "session_id not a string"),
        (
            with(json!({"item_model_id": null})),
            "item_model_id",
            "missing item_model_id",
        ),
        (
            with(json!({"module_model_id": null})),
            "module_model_id",
            "missing module_model_id",
        ),
        (with(json!({"modules": null})), "modules", "missing modules"),
        (modules(json!({"id": "m"})), "modules", "modules not an array"),
        (with(json!({"context": 5})), "context", "context not an object"),
        (modules(json!(["m"])), "modules[0]", "module not an object"),
        (modules(json!([{"items": []}])), "modules[0].id", "module without id"),
        (
            modules(json!([{"id": "", "items": []}])),
            "modules[0].id",
            "empty module id",
        ),
        (
            modules(json!([{"id": "m"}])),
            "modules[0].items",
            "module without items",
        ),
        (
            modules(json!([{"id": "m", "items": "a"}])),
            "modules[0].items",
            "items not an array",
        ),
        (
            modules(json!([{"id": "m", "items": [], "fixed_position": -1}])),
            "modules[0].fixed_position",
            "negative module fixed_position",
        ),
        (
            modules(json!([{"id": "m", "items": [], "fixed_position": "2"}])),
            "modules[0].fixed_position",
            "string module fixed_position",
        ),
        (
            modules(json!([{"id": "m", "items": [], "fixed_position": 1.5}])),
            "modules[0].fixed_position",
            "fractional module fixed_position",
        ),
        (
            modules(json!([{"id": "m", "items": [], "limit": -1}])),
            "modules[0].limit",
            "negative limit",
        ),
        (
            modules(json!([{"id": "m", "items": [], "is_pre_ranked": "yes"}])),
            "modules[0].is_pre_ranked",
            "is_pre_ranked not a boolean",
        ),
        (
            modules(json!([{"id": "m", "items": []}, {"id": "n", "items": ["a"]}])),
            "modules[1].items[0]",
            "item not an object",
        ),
        (
            modules(json!([{"id": "m", "items": []}, {"id": "n", "items": []}, {"id": "o", "items": [{"id": 5}]}])),
            "modules[2].items[0].id",
            "item id not a string",
        ),
        (
            modules(json!([{"id": "m", "items": [{"id": "a"}, {"id": "b", "fixed_position": -1}]}])),
            "modules[0].items[1].fixed_position",
            "negative item fixed_position",
        ),
        (
            modules(json!([{"id": "m", "items": [{"id": "a", "fixed_position": "2"}]}])),
            "modules[0].items[0].fixed_position",
            "string item fixed_position",
        ),
    ];
    for (request, field, context) in cases {
        let message = assert_error(&server.post(MODULE, &key, request), 422, "validation_error", context);
        assert!(
            message.contains(field),
            "{context}: {message:?} does not name {field:?}"
        );
    }
    let too_many: Vec<Value> = (0..10_001).map(|i| json!({"id": format!("i{i}")})).collect();
    assert_error(
        &server.post(MODULE, &key, modules(json!([{"id": "m", "items": too_many}]))),
        422,
        "validation_error",
        "10,001 items",
    );
    let reply = server.raw(Method::POST, MODULE, &key, b"{not json", "application/json");
    assert_error(&reply, 400, "malformed_json", "malformed body");
    assert_error(
        &server.post(MODULE, &key, json!([base.clone()])),
        422,
        "validation_error",
        "body not an object",
    );
}

#[test]
fn models_statuses_and_scope() {
    let (server, key) = server_and_key();
    let base = request(json!([{"id": "m", "items": [{"id": "a"}]}]));
    let with_model = |field: &str, model: &str| {
        let mut request = base.clone();
        request[field] = json!(model);
        request
    };
    for field in ["item_model_id", "module_model_id"] {
        let message = assert_error(
            &server.post(MODULE, &key, with_model(field, "no_such_model")),
            422,
            "unknown_model",
            &format!("unknown {field}"),
        );
        assert!(message.contains("no_such_model"), "{message}");
        assert_error(
            &server.post(MODULE, &key, with_model(field, "test_model_item_400")),
            400,
            "validation_error",
            &format!("mock 400 as {field}"),
        );
        assert_error(
            &server.post(MODULE, &key, with_model(field, "test_model_item_503")),
            503,
            "unavailable",
            &format!("mock 503 as {field}"),
        );
        let limited = server.send(
            Method::POST,
            MODULE,
            Auth::Bearer(&key),
            Payload::Json(with_model(field, "test_model_item_429")),
            &[],
        );
        assert_eq!(
            limited.header("retry-after").as_deref(),
            Some("1"),
            "mock 429 as {field} sets Retry-After"
        );
        assert_error(&limited.pair(), 429, "rate_limited", &format!("mock 429 as {field}"));
    }

    let reader = server.create_key(&["catalog:read", "search"], json!({"name": "reader"}));
    assert_error(&server.post(MODULE, &reader, base.clone()), 403, "forbidden", "scope");
    let reply = server
        .send(Method::POST, MODULE, Auth::None, Payload::Json(base.clone()), &[])
        .pair();
    assert_error(&reply, 401, "unauthorized", "no key");
    assert_status(&server.post(MODULE, &server.admin_key, base), 200, "admin key");
    let reply = server
        .send(Method::GET, MODULE, Auth::Bearer(&key), Payload::Empty, &[])
        .pair();
    assert_status(&reply, 405, "GET");
}
