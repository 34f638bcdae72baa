//! `/v1/admin/experiments`: creating (and every way to get it wrong), reading, listing
//! and stopping A/B experiments, and clicks and conversions attributed to the arm their
//! `rec_id` names, counted once and kept across a restart.

use std::time::Duration;

use crate::common::cluster::Cluster;
use crate::common::*;

const EXPERIMENTS: &str = "/v1/admin/experiments";

fn experiment_path(id: &str) -> String {
    format!("{EXPERIMENTS}/{id}")
}

fn half_and_half(id: &str) -> Value {
    json!({
        "id": id,
        "arms": [
            {"name": "control", "model_id": "popularity", "share": 0.5},
            {"name": "b", "model_id": "default", "share": 0.5},
        ],
    })
}

/// The arm named `name` of an experiment's body.
fn arm<'a>(experiment: &'a Value, name: &str) -> &'a Value {
    experiment["arms"]
        .as_array()
        .unwrap_or_else(|| panic!("no arms in {experiment}"))
        .iter()
        .find(|arm| arm["name"] == name)
        .unwrap_or_else(|| panic!("no arm {name} in {experiment}"))
}

/// An arm's `[requests, impressions, clicks, conversions]`.
fn counts(experiment: &Value, name: &str) -> [u64; 4] {
    let arm = arm(experiment, name);
    ["requests", "impressions", "clicks", "conversions"].map(|count| {
        arm[count]
            .as_u64()
            .unwrap_or_else(|| panic!("{count} of {name} in {experiment}"))
    })
}

/// A `rec_id` of a response served by `arm` of `experiment`, as the server writes it.
fn rec_id(experiment: &str, arm: &str) -> String {
    format!("0190f5c8-7f3a-7d2e-9b1c-3f4e5d6c7b8a.{experiment}.{arm}")
}

fn click(id: &str, rec_id: &str) -> Value {
    click_by(id, "u1", rec_id)
}

fn click_by(id: &str, uid: &str, rec_id: &str) -> Value {
    event(
        "click",
        json!({"id": id, "uid": uid, "item_id": "i1", "click_type": "tap", "rec_id": rec_id}),
    )
}

fn conversion(id: &str, rec_id: &str) -> Value {
    conversion_by(id, "u2", rec_id)
}

fn conversion_by(id: &str, uid: &str, rec_id: &str) -> Value {
    event(
        "conversion",
        json!({"id": id, "uid": uid, "item_ids": ["i1"], "conversion_type": "order", "rec_id": rec_id}),
    )
}

#[test]
fn an_experiment_is_created_once_and_read_back() {
    let server = TestServer::start();
    let created = server.admin_post(EXPERIMENTS, half_and_half("exp1"));
    let body = assert_status(&created, 201, "create exp1").clone();
    assert_eq!(body["id"], "exp1");
    assert_eq!(body["unit"], "user", "the default unit: {body}");
    assert_eq!(body["status"], "running");
    assert_eq!(body["control"], "control");
    assert_server_time(&body["created_at"]);
    assert_eq!(arm(&body, "b")["model_id"], "default");
    assert_eq!(arm(&body, "b")["share"], 0.5);
    assert_eq!(counts(&body, "b"), [0, 0, 0, 0]);
    assert_eq!(
        arm(&body, "control")["ctr_ci"],
        json!([0.0, 1.0]),
        "no impressions: {body}"
    );
    assert!(arm(&body, "control").get("ctr_diff").is_none(), "{body}");
    assert_eq!(arm(&body, "b")["ctr_diff_ci"], json!([-1.0, 1.0]), "{body}");
    assert_eq!(arm(&body, "b")["conversion_rate_diff_ci"], json!([-1.0, 1.0]), "{body}");

    let read = server.admin_get(&experiment_path("exp1"));
    assert_eq!(assert_status(&read, 200, "get exp1"), &body);
    let by_session = json!({
        "id": "exp2",
        "unit": "session",
        "arms": [
            {"name": "a", "model_id": "default", "share": 0.2},
            {"name": "b", "model_id": "popularity", "share": 0.3},
            {"name": "c", "model_id": "covisit", "share": 0.5},
        ],
    });
    let created = assert_status(&server.admin_post(EXPERIMENTS, by_session), 201, "create exp2").clone();
    assert_eq!(
        (&created["unit"], &created["control"]),
        (&json!("session"), &json!("a"))
    );
    let list = server.admin_get(EXPERIMENTS);
    let ids: Vec<&Value> = assert_status(&list, 200, "list")["experiments"]
        .as_array()
        .expect("experiments")
        .iter()
        .map(|experiment| &experiment["id"])
        .collect();
    assert_eq!(ids, [&json!("exp1"), &json!("exp2")]);

    let again = server.admin_post(EXPERIMENTS, half_and_half("exp1"));
    let message = assert_error(&again, 409, "conflict", "the same id again");
    assert!(message.contains("exp1"), "{message}");
    let model = server.admin_post(EXPERIMENTS, half_and_half("popularity"));
    assert_error(&model, 409, "conflict", "a model's id");
    assert_error(
        &server.admin_get(&experiment_path("nope")),
        404,
        "not_found",
        "unknown id",
    );
    assert_error(
        &server.admin_post(&format!("{}/stop", experiment_path("nope")), json!({})),
        404,
        "not_found",
        "stop an unknown id",
    );
    // Only admin keys manage experiments.
    let ranker = server.create_key(&["recommend", "events:write"], json!({}));
    assert_error(&server.get(EXPERIMENTS, &ranker), 403, "forbidden", "recommend key");
}

#[test]
fn a_bad_definition_is_refused_with_every_problem_named() {
    let server = TestServer::start();
    let refused = |body: Value, code: &str, expected: &[&str]| {
        let reply = server.admin_post(EXPERIMENTS, body.clone());
        let message = assert_error(&reply, 422, code, &body.to_string());
        for part in expected {
            assert!(message.contains(part), "{part:?} is not in {message:?}");
        }
    };
    let arms = |shares: [f64; 2], model: &str| {
        json!([
            {"name": "control", "model_id": "popularity", "share": shares[0]},
            {"name": "b", "model_id": model, "share": shares[1]},
        ])
    };
    refused(
        json!({"id": "e", "arms": arms([0.5, 0.4], "default")}),
        "validation_error",
        &["sum to 1", "0.9"],
    );
    refused(
        json!({"id": "e", "arms": arms([0.5, 0.5], "no-such-model")}),
        "validation_error",
        &["\"no-such-model\"", "no configured model"],
    );
    refused(
        json!({"id": "e", "arms": arms([1.0, 0.0], "default")}),
        "validation_error",
        &["arms[1].share must be > 0"],
    );
    refused(
        json!({"id": "e", "unit": "device", "arms": arms([0.5, 0.5], "default")}),
        "validation_error",
        &["device"],
    );
    refused(
        json!({"id": "e.1", "arms": [{"name": "control", "model_id": "default", "share": 1.0}]}),
        "validation_error",
        &["\"id\" must be", "at least 2 arms"],
    );
    refused(
        json!({"id": "e", "arms": arms([0.5, 0.5], "default"), "owner": "me"}),
        "validation_error",
        &["owner"],
    );
    // An experiment is no model an arm can name.
    assert_status(&server.admin_post(EXPERIMENTS, half_and_half("exp1")), 201, "exp1");
    refused(
        json!({"id": "e", "arms": arms([0.5, 0.5], "exp1")}),
        "validation_error",
        &["\"exp1\""],
    );
    let list = server.admin_get(EXPERIMENTS);
    assert_eq!(
        assert_status(&list, 200, "list")["experiments"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only exp1 was stored"
    );
}

#[test]
fn outcomes_count_for_the_arm_their_rec_id_names_once_and_across_a_restart() {
    let mut server = TestServer::start();
    assert_status(&server.admin_post(EXPERIMENTS, half_and_half("exp1")), 201, "exp1");
    let (to_b, to_control) = (rec_id("exp1", "b"), rec_id("exp1", "control"));
    let events = json!({"events": [
        click("c1", &to_b),
        click("c2", &to_b),
        click("c3", &to_control),
        conversion("v1", &to_b),
        // Not outcomes of this experiment's arms: a plain id, an unknown arm, another
        // experiment, and an event that is no outcome.
        click("c4", "0190f5c8-7f3a-7d2e-9b1c-3f4e5d6c7b8a"),
        click("c5", &rec_id("exp1", "z")),
        click("c6", &rec_id("exp9", "b")),
        event("page_view", json!({"id": "p1", "uid": "u1", "page_type": "home", "rec_id": to_b})),
    ]});
    assert_ingested(&server.ingest(events), 8, 0, "outcomes");
    // The same event again is a duplicate and counts nothing.
    assert_ingested(&server.ingest(click("c1", &to_b)), 1, 1, "duplicate click");

    let read = server.admin_get(&experiment_path("exp1"));
    let body = assert_status(&read, 200, "after outcomes").clone();
    assert_eq!(counts(&body, "b"), [0, 0, 2, 1], "{body}");
    assert_eq!(counts(&body, "control"), [0, 0, 1, 0], "{body}");
    // Without impressions or requests the rates are 0 and know nothing.
    assert_eq!(arm(&body, "b")["ctr"], 0.0);
    assert_eq!(arm(&body, "b")["conversion_rate_ci"], json!([0.0, 1.0]));
    let node_only = server.admin_get(&format!("{}?scope=node", experiment_path("exp1")));
    assert_eq!(assert_status(&node_only, 200, "scope=node"), &body, "one node");
    assert_error(
        &server.admin_get(&format!("{}?scope=cluster", experiment_path("exp1"))),
        422,
        "validation_error",
        "another scope",
    );

    server.restart();
    let read = server.admin_get(&experiment_path("exp1"));
    let body = assert_status(&read, 200, "after a restart").clone();
    assert_eq!(counts(&body, "b"), [0, 0, 2, 1], "kept across a restart: {body}");
    assert_eq!(counts(&body, "control"), [0, 0, 1, 0], "{body}");
    assert_ingested(&server.ingest(click("c7", &to_control)), 1, 0, "click after restart");
    assert_ingested(&server.ingest(click("c1", &to_b)), 1, 1, "still a duplicate");
    let read = server.admin_get(&experiment_path("exp1"));
    assert_eq!(
        counts(assert_status(&read, 200, "counting on"), "control"),
        [0, 0, 2, 0]
    );
    assert_eq!(counts(&read.1, "b"), [0, 0, 2, 1]);

    // Stopped: nothing more is counted, and it stays stopped.
    let stopped = server.admin_post(&format!("{}/stop", experiment_path("exp1")), json!({}));
    let body = assert_status(&stopped, 200, "stop").clone();
    assert_eq!(body["status"], "stopped");
    assert_server_time(&body["stopped_at"]);
    assert_ingested(&server.ingest(click("c8", &to_b)), 1, 0, "click after the stop");
    server.restart();
    let read = server.admin_get(&experiment_path("exp1"));
    let body = assert_status(&read, 200, "stopped, restarted");
    assert_eq!(body["status"], "stopped");
    assert_eq!(counts(body, "b"), [0, 0, 2, 1], "{body}");
    assert_eq!(counts(body, "control"), [0, 0, 2, 0], "{body}");
}

/// Two nodes over a broker: an experiment created on one reaches the other through the
/// catalog log, each node counts the outcomes of its own shards, a read on either sums
/// both (`?scope=node`: the node's own), and a stop on either reaches the other.
#[test]
fn in_a_cluster_experiments_replicate_and_a_read_sums_every_nodes_counts() {
    let cluster = Cluster::start(&[("a", "0-11"), ("b", "12-23")]);
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    assert_status(&a.admin_post(EXPERIMENTS, half_and_half("exp1")), 201, "exp1 on a");
    let node_only = format!("{}?scope=node", experiment_path("exp1"));
    poll_until(Duration::from_secs(30), "exp1 replicated to b", || {
        match b.admin_get(&node_only) {
            (StatusCode::OK, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    let user_of = |node: usize| {
        (0..)
            .map(|n| format!("user-{n}"))
            .find(|uid| cluster.owner(uid) == node)
            .unwrap()
    };
    let (on_a, on_b) = (user_of(0), user_of(1));
    let (to_b, to_control) = (rec_id("exp1", "b"), rec_id("exp1", "control"));
    // All through node a: the events of b's user are counted on b, which owns them.
    let events = json!({"events": [
        click_by("c1", &on_a, &to_b),
        click_by("c2", &on_b, &to_b),
        conversion_by("v1", &on_b, &to_control),
    ]});
    assert_ingested(&a.ingest(events), 3, 0, "outcomes through a");

    let own = |node: &TestServer| {
        let body = assert_status(&node.admin_get(&node_only), 200, "scope=node").clone();
        (counts(&body, "b"), counts(&body, "control"))
    };
    assert_eq!(own(a), ([0, 0, 1, 0], [0, 0, 0, 0]), "a counts its own user's");
    assert_eq!(own(b), ([0, 0, 1, 0], [0, 0, 0, 1]), "b counts its own user's");
    for node in [a, b] {
        let summed = assert_status(&node.admin_get(&experiment_path("exp1")), 200, "summed").clone();
        assert_eq!(counts(&summed, "b"), [0, 0, 2, 0], "{summed}");
        assert_eq!(counts(&summed, "control"), [0, 0, 0, 1], "{summed}");
        assert!(summed.get("unreached_nodes").is_none(), "{summed}");
        let listed = assert_status(&node.admin_get(EXPERIMENTS), 200, "list").clone();
        assert_eq!(listed["experiments"][0], summed, "the list sums the same");
    }

    let stop = format!("{}/stop", experiment_path("exp1"));
    assert_status(&b.admin_post(&stop, json!({})), 200, "stop on b");
    poll_until(Duration::from_secs(30), "the stop replicated to a", || {
        let (_, body) = a.admin_get(&node_only);
        match body["status"] == "stopped" {
            true => Ok(()),
            false => Err(body.to_string()),
        }
    });
    assert_ingested(&b.ingest(click_by("c3", &on_a, &to_b)), 1, 0, "click after the stop");
    assert_eq!(own(a), ([0, 0, 1, 0], [0, 0, 0, 0]), "nothing counted after the stop");
}

/// An experiment's id as `model_id`: each user keeps its arm, the arms split the users
/// by their shares, the response names the arm and its `rec_id` records it, outcomes
/// carrying that `rec_id` count for the arm, and a stop sends everyone to the control.
#[test]
fn recommend_through_an_experiment_assigns_sticky_arms_and_attributes_outcomes() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend", "events:write"], json!({"name": "shop"}));
    let definition = json!({"id": "shelf", "unit": "user", "arms": [
        {"name": "control", "model_id": "test_model_item_200", "share": 0.25},
        {"name": "b", "model_id": "popularity", "share": 0.75},
    ]});
    assert_status(&server.admin_post(EXPERIMENTS, definition), 201, "shelf");
    let recommend = |uid: &str| {
        let body = json!({"user_id": uid, "model_id": "shelf", "item_ids": ["i1", "i2", "i3"], "limit": 2});
        let reply = server.post("/v1/recommend", &key, body);
        assert_status(&reply, 200, uid).clone()
    };
    let users = 400;
    let mut arms = std::collections::HashMap::new();
    let (mut clicks, mut conversions) = ([0u64; 2], [0u64; 2]);
    let mut events = Vec::new();
    for index in 0..users {
        let uid = format!("user-{index}");
        let first = recommend(&uid);
        let arm = first["experiment"]["arm"]
            .as_str()
            .unwrap_or_else(|| panic!("{first}"))
            .to_owned();
        assert_eq!(first["experiment"]["id"], "shelf", "{first}");
        assert_eq!(first["items"].as_array().unwrap().len(), 2);
        let rec_id = first["rec_id"].as_str().unwrap();
        assert!(rec_id.ends_with(&format!(".shelf.{arm}")), "{rec_id}");
        assert_eq!(recommend(&uid)["experiment"]["arm"], arm.as_str(), "sticky for {uid}");
        let side = usize::from(arm == "b");
        // Every user in b clicks; every second one in control; every fourth buys.
        if side == 1 || index % 2 == 0 {
            events.push(click_by(&format!("c-{index}"), &uid, rec_id));
            clicks[side] += 1;
        }
        if index % 4 == 0 {
            events.push(conversion_by(&format!("v-{index}"), &uid, rec_id));
            conversions[side] += 1;
        }
        *arms.entry(arm).or_insert(0u64) += 1;
    }
    let in_b = arms["b"];
    assert_eq!(in_b + arms["control"], users);
    // 75% of 400 with a binomial sd of ~8.7: 4 sd either way.
    assert!((265..=335).contains(&in_b), "{arms:?}");
    for chunk in events.chunks(200) {
        assert_ingested(&server.ingest(json!({ "events": chunk })), chunk.len(), 0, "outcomes");
    }

    let report = server.admin_get(&experiment_path("shelf"));
    let report = assert_status(&report, 200, "report").clone();
    for (name, side, members) in [("control", 0, arms["control"]), ("b", 1, in_b)] {
        let [requests, impressions, clicked, converted] = counts(&report, name);
        assert_eq!(requests, 2 * members, "{report}");
        assert_eq!(impressions, 4 * members, "two requests of two items each: {report}");
        assert_eq!([clicked, converted], [clicks[side], conversions[side]], "{report}");
        let ctr = clicks[side] as f64 / impressions as f64;
        assert!(
            (arm(&report, name)["ctr"].as_f64().unwrap() - ctr).abs() < 1e-9,
            "{report}"
        );
    }
    assert!(arm(&report, "b")["ctr_diff"].as_f64().unwrap() > 0.0, "{report}");

    // Modules: the item model may be the experiment too.
    let modules = json!({"user_id": "user-1", "item_model_id": "shelf", "module_model_id": "test_model_item_200",
        "modules": [{"id": "m", "items": [{"id": "i1"}, {"id": "i2"}]}]});
    let reply = server.post("/v1/recommend/module", &key, modules);
    let body = assert_status(&reply, 200, "modules");
    assert_eq!(body["experiment"]["id"], "shelf", "{body}");

    // Stopped: everyone gets the control, and nothing more is counted.
    assert_status(
        &server.admin_post(&format!("{}/stop", experiment_path("shelf")), json!({})),
        200,
        "stop",
    );
    let before = counts(
        &assert_status(&server.admin_get(&experiment_path("shelf")), 200, "before").clone(),
        "control",
    );
    for index in 0..20 {
        let body = recommend(&format!("user-{index}"));
        assert_eq!(body["experiment"]["arm"], "control", "{body}");
        assert!(!body["rec_id"].as_str().unwrap().contains(".shelf."), "{body}");
    }
    let after = counts(
        &assert_status(&server.admin_get(&experiment_path("shelf")), 200, "after").clone(),
        "control",
    );
    assert_eq!(before, after);
}
