//! The search relevance suite (issue 24, point 5): `eval-search` runs every graded query
//! of `tools/relevance/` (MovieLens and the shop catalog) against two servers of the
//! release binary the other tests use, the full search and BM25 alone, and reports
//! NDCG@10 and MRR as JSON. The suites must hold at least 150 queries (110 MovieLens,
//! 40 shop) with the issue's examples among them, every query must run on both
//! servers, and the full search must be at least 0.2 NDCG@10 above BM25 alone over all
//! queries (the issue's acceptance).

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::tool_binary;
use std::sync::OnceLock;

use serde_json::Value;

const SUITES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/relevance");
/// The issue's acceptance: full NDCG@10 at least this much above BM25 alone.
const TARGET_GAIN: f64 = 0.2;

/// The queries of a suite file, as `(query, kind)`.
fn suite(file: &str) -> Vec<(String, String)> {
    let path = format!("{SUITES}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|error| panic!("{path}: {error}"));
    entries
        .iter()
        .map(|entry| {
            let field = |name: &str| {
                entry[name]
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: no {name} in {entry}"))
            };
            (field("query").to_owned(), field("kind").to_owned())
        })
        .collect()
}

/// `eval-search --json` once for all the tests of this file: its report.
fn report() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let json = dir.path().join("relevance.json");
        let output = Command::new(tool_binary("eval-search"))
            .arg("--json")
            .arg(&json)
            .arg("--server-bin")
            .arg(env!("CARGO_BIN_EXE_rankstream"))
            .output()
            .expect("eval-search runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "eval-search failed:\n{stdout}\n{stderr}");
        println!("{stdout}");
        let text = std::fs::read_to_string(&json).expect("eval-search wrote its JSON");
        serde_json::from_str(&text).expect("the report is JSON")
    })
}

#[test]
fn the_suites_hold_150_graded_queries_with_the_issues_examples() {
    let movielens = suite("movielens_queries.json");
    let shop = suite("shop_queries.json");
    assert!(movielens.len() >= 110, "{} MovieLens queries", movielens.len());
    assert!(shop.len() >= 40, "{} shop queries", shop.len());
    assert!(movielens.len() + shop.len() >= 150);
    let has = |queries: &[(String, String)], wanted: &str| queries.iter().any(|(query, _)| query == wanted);
    for example in ["toy", "animation", "comedy", "comedies", "the matrix", "jurasic park"] {
        assert!(has(&movielens, example), "MovieLens lacks {example:?}");
    }
    assert!(has(&shop, "comedies under 5"), "the shop lacks \"comedies under 5\"");
    for (name, queries) in [("MovieLens", &movielens), ("shop", &shop)] {
        assert!(
            queries
                .iter()
                .any(|(query, kind)| kind == "negation" && query.contains(" not ")),
            "{name} has no \"... not ...\" negation"
        );
    }
}

#[test]
fn every_query_of_both_suites_runs_on_both_servers() {
    let report = report();
    let ran: Vec<(String, String)> = report["queries"]
        .as_array()
        .expect("queries")
        .iter()
        .map(|outcome| {
            for server in ["full", "bm25"] {
                for measure in ["ndcg10", "mrr"] {
                    let value = outcome[server][measure].as_f64();
                    assert!(
                        value.is_some_and(|v| (0.0..=1.0).contains(&v)),
                        "{server} {measure}: {outcome}"
                    );
                }
                let top = outcome[format!("{server}_top")].as_array();
                assert!(top.is_some_and(|top| top.len() <= 10), "{server}: {outcome}");
            }
            let text = |name: &str| outcome[name].as_str().expect("a string").to_owned();
            (text("suite"), text("query"))
        })
        .collect();
    let ran_set: BTreeSet<&(String, String)> = ran.iter().collect();
    assert_eq!(ran_set.len(), ran.len(), "a query ran twice");
    let mut expected = 0;
    for (name, file) in [("movielens", "movielens_queries.json"), ("shop", "shop_queries.json")] {
        let queries = suite(file);
        assert_eq!(report["suite_sizes"][name], queries.len(), "{name}");
        for (query, _) in queries {
            assert!(
                ran_set.contains(&(name.to_owned(), query.clone())),
                "{name}: {query:?} did not run"
            );
            expected += 1;
        }
    }
    assert_eq!(ran.len(), expected);
}

#[test]
fn the_full_search_is_at_least_point_two_ndcg_above_bm25_alone() {
    let report = report();
    let all = report["by_split"]
        .as_array()
        .expect("by_split")
        .iter()
        .find(|summary| summary["suite"] == "all" && summary["group"] == "all")
        .expect("the summary over all queries");
    let full = all["full"]["ndcg10"].as_f64().expect("full NDCG@10");
    let bm25 = all["bm25"]["ndcg10"].as_f64().expect("BM25 NDCG@10");
    assert!(
        full >= bm25 + TARGET_GAIN,
        "full NDCG@10 {full:.3} is not {TARGET_GAIN} above BM25 alone {bm25:.3} ({:+.3})",
        full - bm25
    );
}
