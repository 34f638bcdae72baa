//! The dashboard in a real browser: Debian's headless Chromium, driven over WebDriver
//! (chromedriver), against the real server. Sign in; create a key and use it, revoke it
//! and see 401; remap a field; watch the events/s chart move while events are posted;
//! run a search in Try it; start an experiment, see it count, stop it; the pages at a
//! phone's width. A screenshot of each page is
//! written under `target/dashboard/`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common::webdriver::Browser;
use crate::common::*;
use reqwest::blocking::Client;

fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/dashboard")
}

/// Opens a page of the dashboard and waits for its section to be shown.
fn open(browser: &Browser, page: &str) {
    browser.click(&format!("#nav-{page}"));
    browser.find(&format!("#page-{page}"));
}

#[test]
fn an_operator_signs_in_manages_keys_and_the_catalog_watches_live_figures_and_tries_a_search() {
    let server = TestServer::start_unthrottled();
    let items: Vec<Value> = (0..30)
        .map(|n| json!({"id": format!("t{n}"), "title": format!("Harbour cruise {n}"), "price": n as f64 + 0.5}))
        .collect();
    assert_status(&server.admin_put("/v1/catalog/items", json!(items)), 200, "catalog");
    let client = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let shots = screenshots();
    let browser = Browser::start(1280, 800);

    // Sign in: a wrong key gets the API's own words; the admin key gets in.
    browser.goto(&format!("{}/dashboard", server.base_url));
    browser.find("#signin-key");
    browser.screenshot(&shots.join("signin.png"));
    browser.type_into("#signin-key", "not-a-key");
    browser.click("#signin-button");
    let refused = browser.wait_for("the sign-in error", |b| {
        Some(b.text("#error")).filter(|t| !t.is_empty())
    });
    assert!(refused.starts_with("unauthorized: "), "{refused}");
    browser.type_into("#signin-key", &server.admin_key);
    browser.click("#signin-button");
    browser.find("#app");

    // Settings > API Keys: create a key, use it, revoke it.
    open(&browser, "keys");
    browser.type_into("#key-name", "from-the-browser");
    browser.click(".key-scope[value='search']");
    browser.click("#key-create");
    let secret = browser.wait_for("the new key's secret", |b| {
        Some(b.text("#key-secret")).filter(|t| !t.is_empty())
    });
    browser.screenshot(&shots.join("keys.png"));
    let search = |key: &str| {
        client
            .post(format!("{}/v1/search", server.base_url))
            .bearer_auth(key)
            .json(&json!({"query": "harbour"}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(search(&secret), 200, "the key the dashboard created works");
    let (_, keys) = server.admin_get("/v1/admin/keys");
    let id = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["name"] == "from-the-browser")
        .map(|key| key["id"].as_str().unwrap().to_owned())
        .expect("the key is listed");
    browser.click(&format!("#keys-table tr[data-key-id='{id}'] .key-revoke"));
    browser.accept_dialog();
    browser.wait_for("the key to leave the list", |b| {
        let gone = b.script(
            "return document.querySelector(`#keys-table tr[data-key-id='${arguments[0]}']`) === null;",
            json!([id]),
        );
        (gone == json!(true)).then_some(())
    });
    assert_eq!(search(&secret), 401, "a revoked key is refused");

    // Catalog: the table with its rows and types; remap price to a string.
    open(&browser, "catalog");
    let rows = browser.wait_for("the items table's rows", |b| {
        let text = b.text("#tables");
        text.contains("items").then(|| b.text("#tables .table-rows"))
    });
    assert!(rows.contains("30"), "{rows}");
    browser.select("#remap-table", "items");
    browser.select("#remap-field", "price");
    browser.select("#remap-type", "string");
    browser.click("#remap-submit");
    let result = browser.wait_for("the remap's result", |b| {
        Some(b.text("#remap-result")).filter(|t| !t.is_empty())
    });
    assert!(result.contains("converted 30"), "{result}");
    let (_, table) = server.admin_get("/v1/catalog/table/items");
    assert_eq!(table["fields"]["price"], "string", "{table}");
    browser.screenshot(&shots.join("catalog.png"));

    // Live: events/s moves while events are posted.
    open(&browser, "live");
    let stop = Arc::new(AtomicBool::new(false));
    let poster = {
        let (url, key, stop) = (server.base_url.clone(), server.admin_key.clone(), stop.clone());
        thread::spawn(move || {
            let client = Client::builder().no_proxy().build().unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let events: Vec<Value> = (0..20)
                    .map(|k| {
                        event("click", json!({"uid": format!("u{k}"), "item_id": format!("t{}", (n + k) % 30), "click_type": "tile"}))
                    })
                    .collect();
                let status = client
                    .post(format!("{url}/v1/events"))
                    .bearer_auth(&key)
                    .json(&json!({ "events": events }))
                    .send()
                    .unwrap()
                    .status();
                assert_eq!(status.as_u16(), 202);
                n += 1;
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let rate = browser.wait_for("events/s above 0", |b| {
        let rate: f64 = b.text("#live-events-rate").trim().parse().ok()?;
        (rate > 0.0).then_some(rate)
    });
    browser.screenshot(&shots.join("live.png"));
    stop.store(true, Ordering::Relaxed);
    poster.join().unwrap();
    assert!(rate > 0.0);
    let latency = browser.text("#latency-table");
    assert!(latency.contains("/v1/events"), "{latency}");
    let bars = browser.script(
        "return document.querySelectorAll('#chart-latency rect').length;",
        json!([]),
    );
    assert!(
        bars.as_u64().unwrap() >= 2,
        "p50 and p99 bars of at least one endpoint: {bars}"
    );

    // Try it: a search shows the items with their titles.
    open(&browser, "try");
    browser.select("#try-kind", "search");
    browser.type_into("#try-input", "harbour cruise 7");
    browser.click("#try-run");
    let titles = browser.wait_for("search results", |b| {
        Some(b.text("#try-results")).filter(|t| t.contains("Harbour cruise"))
    });
    assert!(titles.contains("Harbour cruise 7"), "{titles}");
    browser.screenshot(&shots.join("try.png"));

    // Experiments: start one in the form, see a request served by it counted, stop it.
    open(&browser, "experiments");
    browser.type_into("#experiment-id", "browser-exp");
    browser.type_into("#experiment-arms", "control popularity 0.5\nb default 0.5");
    browser.click("#experiment-create");
    browser.find("table.experiment-arms[data-experiment='browser-exp']");
    let key = server.create_key(&["recommend"], json!({"name": "experimenter"}));
    let body = json!({"user_id": "u-exp", "model_id": "browser-exp", "item_ids": ["t1", "t2", "t3"]});
    let served = server.post("/v1/recommend", &key, body);
    let arm = assert_status(&served, 200, "through the experiment")["experiment"]["arm"]
        .as_str()
        .unwrap()
        .to_owned();
    // Arm, model, share, requests, impressions, ...
    let cells = |b: &Browser| {
        let script = "return [...document.querySelectorAll(\
                      `table[data-experiment='browser-exp'] tr[data-arm='${arguments[0]}'] td`)].map(td => td.textContent);";
        b.script(script, json!([arm]))
    };
    let counted = browser.wait_for("the request counted on its arm", |b| {
        let cells = cells(b);
        (cells[3] == "1").then_some(cells)
    });
    assert_eq!(counted[4], "3", "three impressions: {counted}");
    browser.screenshot(&shots.join("experiments.png"));
    browser.click(".experiment-stop[data-experiment='browser-exp']");
    browser.accept_dialog();
    browser.wait_for("the experiment stopped", |b| {
        Some(b.text(".experiment[data-experiment='browser-exp']")).filter(|t| t.contains("stopped"))
    });
    let (_, report) = server.admin_get("/v1/admin/experiments/browser-exp");
    assert_eq!(report["status"], "stopped", "{report}");

    // A phone's width: every page fits without scrolling sideways.
    browser.set_size(390, 844);
    for page in ["live", "keys", "catalog", "experiments", "try"] {
        browser.goto(&format!("{}/dashboard#{page}", server.base_url));
        browser.find(&format!("#page-{page}"));
        let overflow = browser.script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            json!([]),
        );
        assert!(
            overflow.as_i64().unwrap() <= 0,
            "{page} scrolls sideways by {overflow} px at 390 px"
        );
        browser.screenshot(&shots.join(format!("{page}-phone.png")));
    }
}
