//! Business rules (issue 22): `exclude_ids`, `filters`, `boosts` and `diversity` on
//! recommend, modules, search and rerank, as request fields and as a model's defaults
//! in its models.toml entry; `explain` summing to the score.

use crate::common::*;

const RECOMMEND: &str = "/v1/recommend";
const MODULES: &str = "/v1/recommend/module";
const SEARCH: &str = "/v1/search";
const RERANK: &str = "/v1/search/rerank";
const MOCK: &str = "test_model_item_200";

/// A shelf of eight products: brand, price, groups, availability.
fn products() -> Vec<Value> {
    let product = |id: &str, brand: &str, price: f64, groups: &[&str], availability: &str| {
        json!({"_table": "products", "id": id, "title": format!("{brand} lamp {id}"), "brand": brand,
               "price": price, "groups": groups, "availability": availability})
    };
    vec![
        product("p1", "acme", 10.0, &["Sale", "Lamps"], "in stock"),
        product("p2", "acme", 25.0, &["Lamps"], "in stock"),
        product("p3", "bolt", 15.0, &["Sale"], "sold out"),
        product("p4", "bolt", 40.0, &["Lamps"], "in stock"),
        product("p5", "acme", 5.0, &["Lamps"], "in stock"),
        product("p6", "cask", 30.0, &["Sale", "Lamps"], "in stock"),
        product("p7", "cask", 12.0, &[], "in stock"),
        json!({"_table": "products", "id": "p8", "title": "dusk lamp p8", "brand": "dusk"}),
    ]
}

const ALL: [&str; 8] = ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"];

/// A server with the products stored, a models file with a rule-carrying model, and a
/// key for every ranking endpoint.
fn shop() -> (TestServer, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.toml");
    let file = format!(
        "{}\n{}",
        rankstream::ranking::DEFAULT_MODELS_TOML,
        r#"
[models.sale_shelf]
kind = "popularity"
exclude_ids = ["p2"]
filters = [{ field = "available", op = "eq", value = true }]
boosts = [{ field = "groups", op = "in", value = ["Sale"], add = 1.0 }]
"#
    );
    std::fs::write(&models, file).unwrap();
    let server = TestServer::start_with_env(&[("RANKSTREAM__TRAINING__MODELS_FILE", models.to_str().unwrap())]);
    let reply = server.admin_put(ITEMS, Value::Array(products()));
    assert_status(&reply, 200, "products stored");
    let key = server.create_key(&["recommend", "search"], json!({"name": "merchandiser"}));
    (server, key, dir)
}

fn recommend(server: &TestServer, key: &str, rules: Value) -> Value {
    let mut body = json!({"user_id": "u1", "model_id": MOCK, "item_ids": ALL});
    body.as_object_mut().unwrap().extend(rules.as_object().unwrap().clone());
    let reply = server.post(RECOMMEND, key, body.clone());
    assert_status(&reply, 200, &body.to_string()).clone()
}

fn ids(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["id"].as_str().expect("id").to_owned())
        .collect()
}

fn ranked(server: &TestServer, key: &str, rules: Value) -> Vec<String> {
    ids(&recommend(server, key, rules))
}

/// Every item's explanation sums to its score (±0.001) and names the boost when one applied.
fn assert_explained(body: &Value) {
    for item in body["items"].as_array().unwrap() {
        let explanation = item["explanation"]
            .as_object()
            .unwrap_or_else(|| panic!("no explanation: {item}"));
        let sum: f64 = explanation.values().map(|v| v.as_f64().unwrap()).sum();
        let score = item["score"].as_f64().unwrap();
        assert!(
            (sum - score).abs() <= 1e-3,
            "explanation {explanation:?} sums to {sum}, score {score}"
        );
    }
}

#[test]
fn every_rule_type_on_recommend() {
    let (server, key, _dir) = shop();
    let filter = |filter: Value| ranked(&server, &key, json!({ "filters": [filter] }));
    assert_eq!(
        filter(json!({"field": "price", "op": "lte", "value": 15})),
        ["p1", "p3", "p5", "p7"]
    );
    assert_eq!(filter(json!({"field": "price", "op": "gt", "value": 25})), ["p4", "p6"]);
    assert_eq!(
        filter(json!({"field": "price", "op": "gte", "value": 25})),
        ["p2", "p4", "p6"]
    );
    assert_eq!(filter(json!({"field": "price", "op": "lt", "value": 10})), ["p5"]);
    assert_eq!(
        filter(json!({"field": "brand", "op": "eq", "value": "bolt"})),
        ["p3", "p4"]
    );
    assert_eq!(
        filter(json!({"field": "brand", "op": "ne", "value": "acme"})),
        ["p3", "p4", "p6", "p7", "p8"]
    );
    assert_eq!(
        filter(json!({"field": "groups", "op": "eq", "value": "Sale"})),
        ["p1", "p3", "p6"]
    );
    assert_eq!(
        filter(json!({"field": "groups", "op": "in", "value": ["Sale", "Nope"]})),
        ["p1", "p3", "p6"]
    );
    assert_eq!(
        filter(json!({"field": "groups", "op": "nin", "value": ["Lamps"]})),
        ["p3", "p7", "p8"]
    );
    assert_eq!(
        filter(json!({"field": "price", "op": "exists", "value": false})),
        ["p8"]
    );
    assert_eq!(
        filter(json!({"field": "available", "op": "eq", "value": false})),
        ["p3"]
    );
    assert_eq!(
        filter(json!({"field": "price", "op": "range", "value": [12, 25]})),
        ["p2", "p3", "p7"]
    );

    // The list means all of them; any/not compose.
    let both = json!({"filters": [
        {"field": "groups", "op": "eq", "value": "Lamps"},
        {"any": [{"field": "brand", "op": "eq", "value": "cask"}, {"not": {"field": "price", "op": "gt", "value": 9}}]}
    ]});
    assert_eq!(ranked(&server, &key, both), ["p5", "p6"]);

    // Excluded ids never come back, whatever the limit.
    let excluded = ranked(&server, &key, json!({"exclude_ids": ["p1", "p4", "nope"], "limit": 3}));
    assert_eq!(excluded, ["p2", "p3", "p5"]);

    // Boosts: the mock scores fall in request order; a multiply and an add lift p6 and p8.
    let plain = recommend(&server, &key, json!({}));
    let score = |body: &Value, id: &str| {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["id"] == id)
            .unwrap()["score"]
            .as_f64()
            .unwrap()
    };
    let boosts = json!({"boosts": [
        {"field": "brand", "op": "eq", "value": "cask", "multiply": 3.0},
        {"field": "id", "op": "eq", "value": "p8", "add": 10.0}
    ], "explain": true});
    let boosted = recommend(&server, &key, boosts);
    assert_eq!(ids(&boosted)[0], "p8", "{boosted}");
    assert!(
        (score(&boosted, "p6") - 3.0 * score(&plain, "p6")).abs() < 1e-4,
        "{boosted}"
    );
    assert!(
        (score(&boosted, "p7") - 3.0 * score(&plain, "p7")).abs() < 1e-4,
        "{boosted}"
    );
    assert!((score(&boosted, "p1") - score(&plain, "p1")).abs() < 1e-6);
    assert_explained(&boosted);
    let p8 = boosted["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["id"] == "p8")
        .unwrap();
    assert!(
        (p8["explanation"]["boost"].as_f64().unwrap() - 10.0).abs() < 1e-4,
        "{p8}"
    );

    // Diversity: at most one per brand in the top 3; the passed-over follow.
    let diverse = ranked(
        &server,
        &key,
        json!({"diversity": {"field": "brand", "max_per_value": 1, "top_k": 3}}),
    );
    assert_eq!(diverse, ["p1", "p3", "p6", "p2", "p4", "p5", "p7", "p8"]);
    let by_group = ranked(
        &server,
        &key,
        json!({"diversity": {"field": "groups", "max_per_value": 2, "top_k": 4}, "limit": 4}),
    );
    assert_eq!(by_group, ["p1", "p2", "p3", "p7"], "array fields count each value");
}

#[test]
fn bad_rules_are_422_naming_what_is_wrong() {
    let (server, key, _dir) = shop();
    let base = json!({"user_id": "u1", "model_id": MOCK, "item_ids": ALL});
    let with = |rules: Value| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(rules.as_object().unwrap().clone());
        body
    };
    let cases = [
        (
            json!({"filters": [{"field": "colour", "op": "eq", "value": "red"}]}),
            "colour",
        ),
        (json!({"boosts": [{"field": "sale", "op": "exists", "add": 1}]}), "sale"),
        (json!({"diversity": {"field": "maker", "max_per_value": 1}}), "maker"),
        (
            json!({"filters": [{"field": "price", "op": "about", "value": 1}]}),
            "about",
        ),
        (
            json!({"filters": [{"field": "price", "op": "in", "value": 3}]}),
            "filters[0].value",
        ),
        (json!({"boosts": [{"field": "price", "op": "exists"}]}), "multiply"),
        (json!({"exclude_ids": "p1"}), "exclude_ids"),
        (
            json!({"diversity": {"field": "brand", "max_per_value": 0}}),
            "max_per_value",
        ),
    ];
    for (rules, named) in cases {
        for path in [RECOMMEND] {
            let reply = server.post(path, &key, with(rules.clone()));
            let body = assert_status(&reply, 422, &rules.to_string());
            assert!(body["code"].is_string(), "{body}");
            let message = body["message"].as_str().unwrap();
            assert!(message.contains(named), "{rules}: {message}");
        }
    }
    // A field the request gives as an attribute is known.
    let attributed = json!({"user_id": "u1", "model_id": MOCK,
        "items": [{"id": "p1", "attributes": {"slot": "top"}}, {"id": "p2", "attributes": {"slot": "side"}}],
        "filters": [{"field": "slot", "op": "eq", "value": "side"}]});
    let reply = server.post(RECOMMEND, &key, attributed);
    assert_eq!(ids(assert_status(&reply, 200, "attribute filter")), ["p2"]);
    // Unknown fields are named on the other endpoints too.
    let unknown = json!([{"field": "colour", "op": "eq", "value": "red"}]);
    let search = server.post(SEARCH, &key, json!({"query": "lamp", "filters": unknown}));
    assert!(assert_status(&search, 422, "search")["message"]
        .as_str()
        .unwrap()
        .contains("colour"));
    let rerank = server.post(
        RERANK,
        &key,
        json!({"query": "lamp", "item_ids": ["p1"], "filters": unknown}),
    );
    assert!(assert_status(&rerank, 422, "rerank")["message"]
        .as_str()
        .unwrap()
        .contains("colour"));
    let modules = json!({"user_id": "u1", "item_model_id": MOCK, "module_model_id": MOCK,
        "modules": [{"id": "m", "items": [{"id": "p1"}]}], "filters": unknown});
    assert!(
        assert_status(&server.post(MODULES, &key, modules), 422, "modules")["message"]
            .as_str()
            .unwrap()
            .contains("colour")
    );
}

/// Rules with duplicate ids: each occurrence is tested with its own attributes, and
/// the echo stays.
#[test]
fn rules_and_the_duplicate_echo() {
    let (server, key, _dir) = shop();
    let body = json!({"user_id": "u1", "model_id": MOCK, "items": [
        {"id": "p1", "attributes": {"slot": "top", "price": 50}},
        {"id": "p2"},
        {"id": "p1", "attributes": {"slot": "side"}},
    ], "filters": [{"field": "price", "op": "lt", "value": 30}]});
    let reply = server.post(RECOMMEND, &key, body);
    let body = assert_status(&reply, 200, "duplicates");
    assert_eq!(
        ids(body),
        ["p2", "p1"],
        "the p1 priced 50 by the request is filtered: {body}"
    );
    assert_eq!(body["items"][1]["slot"], "side", "{body}");
}

#[test]
fn a_models_default_rules_stack_with_the_request() {
    let (server, key, _dir) = shop();
    let shelf = |rules: Value| {
        let mut body = json!({"user_id": "u1", "model_id": "sale_shelf", "item_ids": ALL, "explain": true});
        body.as_object_mut().unwrap().extend(rules.as_object().unwrap().clone());
        let reply = server.post(RECOMMEND, &key, body);
        let body = assert_status(&reply, 200, "sale_shelf").clone();
        assert_explained(&body);
        ids(&body)
    };
    // p2 excluded, p3 sold out; the Sale items lifted by 1 (popularity is 0 for all).
    assert_eq!(shelf(json!({})), ["p1", "p6", "p4", "p5", "p7", "p8"]);
    assert_eq!(
        shelf(json!({"filters": [{"field": "brand", "op": "ne", "value": "acme"}], "exclude_ids": ["p7"]})),
        ["p6", "p4", "p8"]
    );
    assert_eq!(
        shelf(json!({"boosts": [{"field": "id", "op": "eq", "value": "p8", "add": 5}]})),
        ["p8", "p1", "p6", "p4", "p5", "p7"]
    );
}

#[test]
fn rules_in_modules_keep_pins_and_diversify_each_module() {
    let (server, key, _dir) = shop();
    let request = json!({
        "user_id": "u1", "item_model_id": MOCK, "module_model_id": MOCK,
        "modules": [
            {"id": "deals", "items": [{"id": "p3", "fixed_position": 0}, {"id": "p1"}, {"id": "p2"}, {"id": "p5"}, {"id": "p6"}, {"id": "p4", "fixed_position": 1}]},
            {"id": "more", "items": [{"id": "p7"}, {"id": "p2"}, {"id": "p8"}]}
        ],
        "exclude_ids": ["p2"],
        "filters": [{"field": "available", "op": "eq", "value": true}],
        "diversity": {"field": "brand", "max_per_value": 1, "top_k": 2}
    });
    let reply = server.post(MODULES, &key, request);
    let body = assert_status(&reply, 200, "modules with rules");
    let module = |id: &str| -> Vec<&str> {
        let module = body["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap();
        module["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect()
    };
    // p3 (sold out) is gone though pinned; p4 keeps its pin at 1; p2 is excluded everywhere;
    // among the ranked, one acme (p1) then cask (p6) before the second acme (p5).
    assert_eq!(module("deals"), ["p1", "p4", "p6", "p5"], "{body}");
    assert_eq!(module("more"), ["p7", "p8"], "{body}");
}

#[test]
fn rules_and_explanations_on_search_and_rerank() {
    let (server, key, _dir) = shop();
    poll_until(std::time::Duration::from_secs(30), "the products indexed", || {
        let reply = server.post(SEARCH, &key, json!({"query": "lamp", "limit": 20}));
        match reply.1["items"].as_array().map(Vec::len) {
            Some(8) => Ok(()),
            _ => Err(format!("{reply:?}")),
        }
    });
    let search = |body: Value| {
        let reply = server.post(SEARCH, &key, body.clone());
        assert_status(&reply, 200, &body.to_string()).clone()
    };
    let found = search(json!({"query": "lamp", "limit": 20, "explain": true,
        "filters": [{"field": "price", "op": "lte", "value": 15}], "exclude_ids": ["p5"],
        "boosts": [{"field": "brand", "op": "eq", "value": "cask", "add": 5}]}));
    let mut got = ids(&found);
    assert_eq!(got[0], "p7", "the boosted cask first: {found}");
    got.sort();
    assert_eq!(got, ["p1", "p3", "p7"], "{found}");
    assert_explained(&found);
    assert!(
        found["items"][0]["explanation"]["text"].as_f64().unwrap() > 0.0,
        "{found}"
    );
    assert!(
        search(json!({"query": "lamp"}))["items"][0]
            .get("explanation")
            .is_none(),
        "off by default"
    );

    let reranked = server.post(
        RERANK,
        &key,
        json!({"query": "lamp", "item_ids": ALL, "explain": true,
        "filters": [{"field": "groups", "op": "eq", "value": "Sale"}],
        "boosts": [{"field": "id", "op": "eq", "value": "p6", "multiply": 10, "add": 1}]}),
    );
    let reranked = assert_status(&reranked, 200, "rerank").clone();
    let got = ids(&reranked);
    assert_eq!(got.len(), 3, "{reranked}");
    assert_eq!(got[0], "p6", "{reranked}");
    assert_explained(&reranked);
}
