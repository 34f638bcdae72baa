//! The learned models behind `/v1/recommend`: a click changes the very next call,
//! models survive restarts and forget deleted users, catalog attributes (groups,
//! embeddings, availability, request overrides) reach the ranking, and outcomes
//! linked by `rec_id` train the learned ranker.

mod common;

use std::time::Duration;

use common::*;

const RECOMMEND: &str = "/v1/recommend";
const STATS: &str = "/v1/admin/stats";
const RETRAIN: &str = "/v1/admin/models/retrain";

fn view(sid: &str, uid: Option<&str>, item: &str) -> Value {
    event(
        "page_view",
        json!({"sid": sid, "uid": uid, "item_id": item, "page_type": "product"}),
    )
}

fn click(sid: &str, uid: Option<&str>, item: &str) -> Value {
    event(
        "click",
        json!({"sid": sid, "uid": uid, "item_id": item, "click_type": "tile"}),
    )
}

/// Sessions that each visit `items` in order.
fn sessions(prefix: &str, count: usize, uid: Option<&str>, items: &[&str]) -> Vec<Value> {
    (0..count)
        .flat_map(|n| {
            let sid = format!("{prefix}-{n}");
            items.iter().map(move |item| view(&sid, uid, item)).collect::<Vec<_>>()
        })
        .collect()
}

/// Waits until the learner has learned at least `events` events; returns the stats.
fn learned(server: &TestServer, events: u64) -> Value {
    poll_until(Duration::from_secs(30), "the learner to catch up", || {
        let (status, stats) = server.admin_get(STATS);
        let seen = stats["models"]["events_learned"].as_u64().unwrap_or(0);
        if status == 200 && seen >= events {
            Ok(stats)
        } else {
            Err(format!("{status} {stats}"))
        }
    })
}

/// The ranked `(id, score)` pairs of a 200 recommend reply.
#[track_caller]
fn ranked(reply: &(StatusCode, Value), context: &str) -> Vec<(String, f64)> {
    assert_status(reply, 200, context)["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no items in {}", reply.1))
        .iter()
        .map(|item| (item["id"].as_str().unwrap().to_owned(), item["score"].as_f64().unwrap()))
        .collect()
}

fn ids(ranking: &[(String, f64)]) -> Vec<&str> {
    ranking.iter().map(|(id, _)| id.as_str()).collect()
}

fn position(ranking: &[(String, f64)], id: &str) -> usize {
    ranking.iter().position(|(item, _)| item == id).expect("ranked")
}

fn score(ranking: &[(String, f64)], id: &str) -> f64 {
    ranking[position(ranking, id)].1
}

#[test]
fn a_click_lifts_its_co_visited_neighbours_in_the_very_next_call() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend", "events:write"], json!({"name": "shop"}));
    let mut history = sessions("ab", 20, None, &["A", "B"]);
    history.extend(sessions("cd", 10, None, &["C", "D"]));
    history.extend(sessions("pop", 40, None, &["P"]));
    let count = history.len() as u64;
    server.ingest_ok(json!({ "events": history }));
    learned(&server, count);

    let (sid, uid) = ("s-fresh", Some("u-fresh"));
    server.ingest_ok(click(sid, uid, "C"));
    let request = json!({"user_id": "u-fresh", "session_id": sid, "model_id": "default",
                         "item_ids": ["P", "B", "D", "E"]});
    let before = ranked(&server.post(RECOMMEND, &key, request.clone()), "after C");
    assert_eq!(before[0].0, "D", "C's neighbour leads: {before:?}");

    let reply = server.post("/v1/events", &key, click(sid, uid, "A"));
    assert_status(&reply, 202, "click on A");
    let after = ranked(&server.post(RECOMMEND, &key, request), "right after A");
    assert_eq!(after[0].0, "B", "A's neighbour leads the very next call: {after:?}");
    assert!(
        position(&after, "B") < position(&before, "B"),
        "B rose: {before:?} → {after:?}"
    );
    assert!(
        score(&after, "P") > score(&after, "E"),
        "popularity still orders the rest: {after:?}"
    );
}

#[test]
fn models_survive_a_restart_and_forget_deleted_users() {
    let mut server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "shop"}));
    let mut history = sessions("private", 5, Some("u-private"), &["X", "Y"]);
    history.extend(sessions("public", 2, None, &["X", "Z"]));
    history.push(click("s-probe", None, "X"));
    let count = history.len() as u64;
    server.ingest_ok(json!({ "events": history }));
    learned(&server, count);
    let request = json!({"session_id": "s-probe", "model_id": "covisit", "item_ids": ["W", "Z", "Y"]});
    let before = ranked(&server.post(RECOMMEND, &key, request.clone()), "before restart");
    assert_eq!(ids(&before), ["Y", "Z", "W"], "{before:?}");
    assert!(score(&before, "Y") > score(&before, "Z") && score(&before, "W") == 0.0);

    server.restart();
    let stats = learned(&server, count);
    assert_eq!(
        stats["models"]["events_learned"], count,
        "nothing learned twice: {stats}"
    );
    let after = ranked(&server.post(RECOMMEND, &key, request.clone()), "after restart");
    assert_eq!(after, before, "the persisted models rank the same");

    assert_status(&server.admin_delete("/v1/users/u-private"), 200, "delete user");
    let report = server.admin_post(RETRAIN, json!({}));
    let report = assert_status(&report, 200, "retrain");
    assert_eq!(report["events"], count - 10, "the user's 10 events are gone: {report}");
    let forgotten = ranked(&server.post(RECOMMEND, &key, request), "after deletion");
    assert_eq!(forgotten[0].0, "Z", "{forgotten:?}");
    assert_eq!(
        score(&forgotten, "Y"),
        0.0,
        "no trace of the user's co-visits: {forgotten:?}"
    );
}

#[test]
fn catalog_attributes_shape_affinity_embedding_and_availability() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend"], json!({"name": "shop"}));
    let items: Vec<Value> = [
        ("museum-1", "museum", [1.0, 0.0], "available"),
        ("museum-2", "museum", [0.9, 0.1], "available"),
        ("museum-3", "museum", [0.8, 0.2], "available"),
        ("museum-sold", "museum", [1.0, 0.0], "sold_out"),
        ("beach-1", "beach", [0.0, 1.0], "available"),
        ("beach-2", "beach", [0.1, 0.9], "available"),
    ]
    .iter()
    .map(|(id, group, embedding, availability)| {
        json!({"id": id, "name": id, "groups": [group], "price": 20,
               "embeddings": embedding, "availability": availability})
    })
    .collect();
    let reply = server.admin_put(ITEMS, json!(items));
    assert_eq!(assert_status(&reply, 200, "catalog")["upserted"], 6);
    server.ingest_ok(json!({"events": [click("s-art", None, "museum-1"), click("s-art", None, "museum-2")]}));

    let candidates = json!(["beach-1", "museum-3", "beach-2"]);
    for model in ["affinity", "embedding", "default"] {
        let request = json!({"session_id": "s-art", "model_id": model, "item_ids": candidates});
        let ranking = ranked(&server.post(RECOMMEND, &key, request), model);
        assert_eq!(ranking[0].0, "museum-3", "{model}: {ranking:?}");
        assert!(
            score(&ranking, "museum-3") > score(&ranking, "beach-1"),
            "{model}: {ranking:?}"
        );
    }

    let request = json!({"session_id": "s-art", "model_id": "default",
                         "item_ids": ["museum-sold", "museum-3", "beach-1"]});
    let ranking = ranked(&server.post(RECOMMEND, &key, request), "availability");
    assert_eq!(
        ranking.last().unwrap().0,
        "museum-sold",
        "unavailable is demoted: {ranking:?}"
    );

    let with = |attributes: Value| {
        json!({"session_id": "s-art", "model_id": "default", "items": [
            {"id": "museum-3", "attributes": attributes}, {"id": "beach-1"}]})
    };
    let overridden = ranked(
        &server.post(RECOMMEND, &key, with(json!({"availability": "sold_out"}))),
        "override",
    );
    assert_eq!(
        ids(&overridden),
        ["beach-1", "museum-3"],
        "a catalog field overrides: {overridden:?}"
    );
    let ignored = ranked(&server.post(RECOMMEND, &key, with(json!({"slot": "hero"}))), "ignored");
    let plain = ranked(&server.post(RECOMMEND, &key, with(json!({}))), "plain");
    assert_eq!(ignored, plain, "an attribute the catalog does not have is ignored");
    assert_eq!(plain[0].0, "museum-3", "the override lasted one request: {plain:?}");
}

/// The ranking reads a live actor's published signals; once the actor passivated,
/// the persisted state; once the user is deleted, nothing.
#[test]
fn ranking_signals_follow_the_actor_through_passivation_and_deletion() {
    let server = TestServer::start_with_env(&[
        ("RANKSTREAM__ENGINE__SESSION_IDLE_TTL_MS", "300"),
        ("RANKSTREAM__ENGINE__USER_IDLE_TTL_MS", "300"),
    ]);
    let key = server.create_key(&["recommend"], json!({"name": "shop"}));
    let items: Vec<Value> = [("museum-1", "museum"), ("museum-2", "museum"), ("beach-1", "beach")]
        .iter()
        .map(|(id, group)| json!({"id": id, "name": id, "groups": [group]}))
        .collect();
    assert_status(&server.admin_put(ITEMS, json!(items)), 200, "catalog");
    let recommend = |uid: &str| {
        let request = json!({"user_id": uid, "model_id": "affinity", "item_ids": ["beach-1", "museum-2"]});
        ranked(&server.post(RECOMMEND, &key, request), uid)
    };
    let leans_to_museums = |ranking: &[(String, f64)]| {
        ranking[0].0 == "museum-2" && score(ranking, "museum-2") > score(ranking, "beach-1")
    };

    server.ingest_ok(click("s-live", Some("u-live"), "museum-1"));
    server.ingest_ok(click("s-idle", Some("u-idle"), "museum-1"));
    assert!(
        leans_to_museums(&recommend("u-live")),
        "live: {:?}",
        recommend("u-live")
    );

    poll_every(
        Duration::from_secs(1),
        Duration::from_secs(10),
        "passivation",
        || match server.user_state("u-idle") {
            state if state["live"] == false => Ok(()),
            state => Err(state.to_string()),
        },
    );
    let passivated = recommend("u-idle");
    assert!(leans_to_museums(&passivated), "passivated: {passivated:?}");

    server.ingest_ok(click("s-live", Some("u-live"), "museum-2"));
    assert_status(&server.admin_delete("/v1/users/u-live"), 200, "delete user");
    let deleted = recommend("u-live");
    assert!(
        deleted.iter().all(|(_, score)| *score == 0.0),
        "no signals after deletion: {deleted:?}"
    );
}

#[test]
fn outcomes_linked_by_rec_id_train_the_learned_ranker() {
    let server = TestServer::start();
    let key = server.create_key(&["recommend", "events:write"], json!({"name": "shop"}));
    let mut history = sessions("seed", 3, None, &["A", "B", "C", "D", "E"]);
    history.extend(sessions("hot", 30, None, &["E"]));
    let count = history.len() as u64;
    server.ingest_ok(json!({ "events": history }));
    learned(&server, count);

    let stranger = event(
        "click",
        json!({"sid": "s-x", "item_id": "A", "rec_id": "not-a-ranking", "click_type": "tile"}),
    );
    server.ingest_ok(stranger);
    let stats = learned(&server, count + 1);
    assert_eq!(
        stats["models"]["ltr_examples"], 0,
        "an unknown rec_id teaches nothing: {stats}"
    );

    // Users keep choosing the most popular item, wherever the ranker put it.
    let rounds = 80;
    let mut outcomes = Vec::new();
    for round in 0..rounds {
        let sid = format!("s-ltr-{round}");
        let request = json!({"session_id": sid, "model_id": "ltr", "item_ids": ["A", "B", "C", "D", "E"]});
        let reply = server.post(RECOMMEND, &key, request);
        let rec_id = assert_status(&reply, 200, "ltr")["rec_id"].as_str().unwrap().to_owned();
        outcomes.push(event(
            "click",
            json!({"sid": sid, "item_id": "E", "rec_id": rec_id, "click_type": "tile"}),
        ));
    }
    server.ingest_ok(json!({ "events": outcomes }));
    let stats = learned(&server, count + 1 + rounds);
    let examples = stats["models"]["ltr_examples"].as_u64().unwrap();
    assert!(
        examples >= 2 * rounds,
        "each click teaches the shown items around it: {stats}"
    );
    assert_eq!(stats["models"]["ltr_trained"], true, "{stats}");
    let request = json!({"session_id": "s-new", "model_id": "ltr", "item_ids": ["A", "B", "C", "D", "E"]});
    let ranking = ranked(&server.post(RECOMMEND, &key, request), "trained ltr");
    assert_eq!(
        ranking[0].0, "E",
        "the learned ranker puts the chosen item first: {ranking:?}"
    );
}
