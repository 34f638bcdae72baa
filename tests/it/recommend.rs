//! `POST /v1/recommend`: the SPEC's request rules, statuses and mock models.

use crate::common::*;

const RECOMMEND: &str = "/v1/recommend";

fn ids(body: &Value) -> Vec<&str> {
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["id"].as_str().expect("id"))
        .collect()
}

#[test]
fn mock_200_ranks_in_input_order_with_limit_and_fresh_rec_ids() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "ranker"}));
    let request = json!({"user_id": "u1", "item_ids": ["a", "b", "c", "d"], "model_id": "test_model_item_200"});
    let first = server.post(RECOMMEND, &key, request.clone());
    let body = assert_status(&first, 200, "mock 200").clone();
    assert_eq!(ids(&body), ["a", "b", "c", "d"]);
    let scores: Vec<f64> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] > pair[1]),
        "strictly decreasing: {scores:?}"
    );
    assert!(
        body["items"][0].get("attributes").is_none(),
        "unique ids carry no echo: {body}"
    );
    let again = server.post(RECOMMEND, &key, request.clone());
    let again = assert_status(&again, 200, "mock 200 again");
    assert_eq!(again["items"], body["items"], "deterministic scores");
    assert_ne!(again["rec_id"], body["rec_id"], "rec_id is unique per response");
    assert!(body["rec_id"].as_str().is_some_and(|id| !id.is_empty()));

    let limited =
        json!({"session_id": "s1", "item_ids": ["a", "b", "c"], "model_name": "test_model_item_200", "limit": 2});
    let limited = server.post(RECOMMEND, &key, limited);
    assert_eq!(ids(assert_status(&limited, 200, "limit")), ["a", "b"]);
}

#[test]
fn duplicate_ids_echo_the_attributes_that_differ() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "ranker"}));
    let request = json!({
        "user_id": "u1",
        "model_id": "test_model_item_200",
        "items": [
            {"id": "hotel-1", "attributes": {"room": "single", "price": 90, "city": "Oslo", "score": 7}},
            {"id": "hotel-2", "attributes": {"room": "double", "city": "Oslo"}},
            {"id": "hotel-1", "attributes": {"room": "double", "price": 90, "city": "Oslo", "score": 8}},
        ]
    });
    let reply = server.post(RECOMMEND, &key, request);
    let body = assert_status(&reply, 200, "duplicates");
    let items = body["items"].as_array().unwrap();
    assert_eq!(ids(body), ["hotel-1", "hotel-2", "hotel-1"]);
    // The echo is fields of the item itself (a client reads `item.room`); an
    // attribute named `score` or `id` is never echoed over the item's own.
    let fields = |item: &Value| {
        let mut names: Vec<String> = item.as_object().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    assert_eq!(items[0]["room"], "single", "{body}");
    assert_eq!(items[2]["room"], "double", "{body}");
    assert_eq!(fields(&items[0]), ["id", "room", "score"], "{body}");
    assert_eq!(fields(&items[1]), ["id", "score"], "{body}");
    assert_eq!(items[0]["score"], 1.0, "the item's own score: {body}");
}

/// The exact response of the mock model, from `tests/golden/recommend_mock_200.json`.
#[test]
fn mock_200_matches_the_golden_response() {
    let golden: Value =
        serde_json::from_str(include_str!("golden/recommend_mock_200.json")).expect("golden file is JSON");
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "ranker"}));
    let reply = server.post(RECOMMEND, &key, golden["request"].clone());
    let mut body = assert_status(&reply, 200, "golden").clone();
    let rec_id = body.as_object_mut().unwrap().remove("rec_id").expect("rec_id");
    assert!(
        rec_id.as_str().is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()),
        "rec_id is a UUID: {rec_id}"
    );
    assert_eq!(body, golden["response"]);
}

#[test]
fn every_rule_and_status() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "ranker"}));
    let base = json!({"user_id": "u", "item_ids": ["a"], "model_id": "test_model_item_200"});
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
    let cases = [
        (
            with(json!({"items": [{"id": "a"}]})),
            400,
            "validation_error",
            "item_ids and items",
        ),
        (
            with(json!({"item_ids": null})),
            400,
            "validation_error",
            "neither item_ids nor items",
        ),
        (
            with(json!({"model_name": "other"})),
            400,
            "validation_error",
            "model_id differs from model_name",
        ),
        (
            with(json!({"user_id": null})),
            422,
            "validation_error",
            "neither user_id nor session_id",
        ),
        (with(json!({"model_id": null})), 422, "validation_error", "no model"),
        (with(json!({"limit": -1})), 422, "validation_error", "negative limit"),
        (
            with(json!({"item_ids": ["a", ""]})),
            422,
            "validation_error",
            "empty id",
        ),
        (
            with(json!({"item_ids": "a"})),
            422,
            "validation_error",
            "item_ids not an array",
        ),
        (
            with(json!({"item_ids": null, "items": [{"id": "a", "attributes": {"x": {"nested": 1}}}]})),
            422,
            "validation_error",
            "object attribute",
        ),
        (
            with(json!({"context": 5})),
            422,
            "validation_error",
            "context not an object",
        ),
        (
            with(json!({"model_id": "no_such_model"})),
            422,
            "unknown_model",
            "unknown model",
        ),
        (
            with(json!({"model_id": "test_model_item_400"})),
            400,
            "validation_error",
            "mock 400",
        ),
        (
            with(json!({"model_id": "test_model_item_503"})),
            503,
            "unavailable",
            "mock 503",
        ),
    ];
    for (request, status, code, context) in cases {
        assert_error(&server.post(RECOMMEND, &key, request), status, code, context);
    }
    let too_many: Vec<String> = (0..10_001).map(|i| format!("i{i}")).collect();
    assert_error(
        &server.post(RECOMMEND, &key, with(json!({"item_ids": too_many}))),
        422,
        "validation_error",
        "10,001 candidates",
    );

    let limited = server.send(
        Method::POST,
        RECOMMEND,
        Auth::Bearer(&key),
        Payload::Json(with(json!({"model_id": "test_model_item_429"}))),
        &[],
    );
    assert_eq!(
        limited.header("retry-after").as_deref(),
        Some("1"),
        "mock 429 sets Retry-After"
    );
    assert_error(&limited.pair(), 429, "rate_limited", "mock 429");

    let reply = server.raw(Method::POST, RECOMMEND, &key, b"{not json", "application/json");
    assert_error(&reply, 400, "malformed_json", "malformed body");
    let reader = server.create_key(&["catalog:read"], json!({"name": "reader"}));
    assert_error(
        &server.post(RECOMMEND, &reader, base.clone()),
        403,
        "forbidden",
        "scope",
    );
}

/// Soft-deleted items (a DELETE without purge, or an upsert with `"is_deleted": true`)
/// are left out of recommend, module ranking and rerank unless the request sets
/// `include_deleted`; the mock models, pure functions of the request, keep every item.
#[test]
fn soft_deleted_items_are_left_out_unless_asked_for() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend", "search"], json!({"name": "ranker"}));
    for id in ["p1", "p2", "p3"] {
        let item = json!({"id": id, "_table": "shop", "name": format!("item {id}"), "price": 10});
        assert_status(&server.admin_put(ITEM, item), 200, id);
    }
    let gone = json!({"id": "p4", "_table": "shop", "name": "item p4", "price": 10, "is_deleted": true});
    assert_status(&server.admin_put(ITEM, gone), 200, "p4 upserted deleted");
    assert_status(&server.admin_delete(&item_path("shop", "p2")), 200, "soft delete p2");
    let candidates = json!(["p1", "p2", "p3", "p4", "unknown"]);
    let sorted = |body: &Value| {
        let mut ids: Vec<String> = ids(body).into_iter().map(str::to_owned).collect();
        ids.sort();
        ids
    };

    for model in ["default", "popularity"] {
        let request = json!({"user_id": "u1", "item_ids": candidates, "model_id": model});
        let body = assert_status(&server.post(RECOMMEND, &key, request.clone()), 200, model).clone();
        assert_eq!(sorted(&body), ["p1", "p3", "unknown"], "{model}: {body}");
        let mut asked = request;
        asked["include_deleted"] = json!(true);
        let body = assert_status(&server.post(RECOMMEND, &key, asked), 200, model).clone();
        assert_eq!(sorted(&body), ["p1", "p2", "p3", "p4", "unknown"], "{model}: {body}");
    }
    // The limit counts what is left; `items` with attributes too.
    let request = json!({"user_id": "u1", "model_id": "default", "limit": 2,
                         "items": [{"id": "p2", "attributes": {"price": 5}}, {"id": "p4"}, {"id": "p1"}, {"id": "p3"}]});
    let body = assert_status(&server.post(RECOMMEND, &key, request), 200, "limit").clone();
    assert_eq!(sorted(&body), ["p1", "p3"], "{body}");
    // The mock model scores every request item, deleted or not.
    let request = json!({"user_id": "u1", "item_ids": candidates, "model_id": "test_model_item_200"});
    let body = assert_status(&server.post(RECOMMEND, &key, request), 200, "mock").clone();
    assert_eq!(ids(&body), ["p1", "p2", "p3", "p4", "unknown"], "{body}");
    for bad in [json!("yes"), json!(1), json!([])] {
        let request = json!({"user_id": "u1", "item_ids": ["p1"], "model_id": "default", "include_deleted": bad});
        let message = assert_error(
            &server.post(RECOMMEND, &key, request),
            422,
            "validation_error",
            "bad flag",
        );
        assert!(message.contains("include_deleted"), "{message}");
    }

    // Module ranking: deleted items leave every module, pinned ones too.
    let modules = json!([
        {"id": "deals", "items": [{"id": "p1"}, {"id": "p2", "fixed_position": 0}, {"id": "p4"}, {"id": "p3"}]},
        {"id": "gone", "items": [{"id": "p2"}]},
    ]);
    let module_items = |body: &Value, module: &str| -> Vec<String> {
        let found = body["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == module)
            .unwrap();
        let mut ids: Vec<String> = found["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let request = json!({"user_id": "u1", "item_model_id": "default", "module_model_id": "test_model_item_200",
                         "modules": modules});
    let body = assert_status(
        &server.post("/v1/recommend/module", &key, request.clone()),
        200,
        "modules",
    )
    .clone();
    assert_eq!(module_items(&body, "deals"), ["p1", "p3"], "{body}");
    assert!(module_items(&body, "gone").is_empty(), "{body}");
    let mut asked = request;
    asked["include_deleted"] = json!(true);
    let body = assert_status(&server.post("/v1/recommend/module", &key, asked), 200, "modules").clone();
    assert_eq!(module_items(&body, "deals"), ["p1", "p2", "p3", "p4"], "{body}");
    assert_eq!(module_items(&body, "gone"), ["p2"], "{body}");

    // Rerank.
    let request = json!({"query": "item", "item_ids": candidates});
    let body = assert_status(&server.post("/v1/search/rerank", &key, request.clone()), 200, "rerank").clone();
    assert_eq!(sorted(&body), ["p1", "p3", "unknown"], "{body}");
    let mut asked = request;
    asked["include_deleted"] = json!(true);
    let body = assert_status(&server.post("/v1/search/rerank", &key, asked), 200, "rerank").clone();
    assert_eq!(sorted(&body), ["p1", "p2", "p3", "p4", "unknown"], "{body}");

    // A restored item is ranked again.
    assert_status(
        &server.admin_patch(&item_path("shop", "p2"), json!({"is_deleted": false})),
        200,
        "restore",
    );
    let request = json!({"user_id": "u1", "item_ids": candidates, "model_id": "default"});
    let body = assert_status(&server.post(RECOMMEND, &key, request), 200, "restored").clone();
    assert_eq!(sorted(&body), ["p1", "p2", "p3", "unknown"], "{body}");
}
