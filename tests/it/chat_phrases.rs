//! The chat phrase suite (issue 18): over 200 messages and multi-turn scripts asked
//! of two catalogs, MovieLens (the rows `tests/chat.rs` loads) and 120 generated city
//! tours, each checked for the constraints chat understood (`constraints` of the
//! answer), the items it returned (computed from the catalog the test loaded) and,
//! for questions, the reply. Every case runs, the failures are printed as a table
//! with the pass rate, and then the test asserts that all passed.
//!
//! `CHAT_SUITE_REPORT=FILE` also writes the pass rate and the suite's size as a
//! markdown section for BENCHMARKS.md. The cases are in `phrases/movies.rs` and
//! `phrases/tours.rs`; `phrases/mod.rs` gives the layout.

use crate::common;
use crate::common::{rfc3339_ms, TestServer};
use crate::phrases::case::Case;
use crate::phrases::catalog::{self, Catalog};
use crate::phrases::movies::{movie_cases, personalized_comedies};
use crate::phrases::run::{run_cases, CatalogRun, Report};
use crate::phrases::tours::{tour_cases, tours};

/// Where to write the BENCHMARKS.md section, when set.
const REPORT_ENV: &str = "CHAT_SUITE_REPORT";

/// A server with only this catalog, and the outcome of its cases.
fn run_catalog(rows: &[serde_json::Value], catalog: &Catalog, cases: &[Case]) -> (TestServer, CatalogRun) {
    let server = TestServer::start();
    catalog::load(&server, rows, catalog);
    let outcomes = run_cases(&server, catalog, cases);
    let run = CatalogRun {
        catalog: catalog.name.to_owned(),
        items: catalog.items.len(),
        outcomes,
    };
    (server, run)
}

#[test]
fn chat_understands_the_phrase_suite() {
    let (tour_rows, tour_catalog) = tours();
    let (_, tour_run) = run_catalog(&tour_rows, &tour_catalog, &tour_cases());

    let (movie_rows, movie_catalog) = catalog::movielens();
    let (server, mut movie_run) = run_catalog(&movie_rows, &movie_catalog, &movie_cases());
    movie_run.outcomes.push(personalized_comedies(&server, &movie_catalog));

    let report = Report {
        runs: vec![movie_run, tour_run],
    };
    if !report.all_passed() {
        println!("{}", report.failure_table());
    }
    println!("{}", report.summary());
    if let Ok(path) = std::env::var(REPORT_ENV) {
        let section = report.markdown(&rfc3339_ms(common::now()));
        std::fs::write(&path, section).unwrap_or_else(|error| panic!("{REPORT_ENV}={path}: {error}"));
    }
    assert!(report.all_passed(), "{}", report.summary());
}
