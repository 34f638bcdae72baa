//! Search relevance (issue 24, point 5): NDCG@10 and MRR of `POST /v1/search` on graded
//! queries over two catalogs, for the full search and for BM25 alone on the same queries.
//!
//! 1. The suites, in `tools/relevance/` (its README says how they were made and graded):
//!    MovieLens queries (`movielens_queries.json`) over the latest-small movies, and shop
//!    queries (`shop_queries.json`) over a catalog made for them (`shop_catalog.json`).
//!    Each query has a kind (`title`, `typo`, `franchise`, `category`, ...), a split
//!    (`validation` or `test`) and judgments: grades by id, or rules resolved here
//!    against the data (genres, tags and rating counts; category, tags, audience, price).
//! 2. Two servers, each on a fresh temp dir with the auth rate limit raised: `full` (the
//!    defaults) and `bm25` (`--baseline-env`, by default `RANKSTREAM__SEARCH__BM25_ONLY=true`).
//!    Both get the same data: the movies (table `movies`: title → `name`, genres →
//!    `groups`, the movie's 10 most frequent tags from tags.csv, lowercased → `tags`),
//!    every rating as a `page_view` at its real time (uid, sid = uid-day), and the
//!    products (table `products`). Then the tool waits until both catalogs are
//!    searchable and the learner has taken in every event (`/v1/admin/stats`).
//! 3. Every query as a new visitor (no user, no session) to both servers:
//!    `{"query", "limit": 10, "tables": [the suite's table]}` (the two catalogs share a
//!    server; a shopper searches one of them). Per query NDCG@10 (gain 2^grade - 1,
//!    discount log2(rank + 1), the ideal from every judged item) and MRR (1 / the rank of
//!    the first result with the query's highest grade, 0 outside the top 10); their means
//!    by suite × split and by kind. `--verbose` prints each query's top 10 on both.
//!
//! The acceptance of the issue: the full search's NDCG@10 over all queries at least
//! 0.2 above BM25 alone (`tests/it/search_relevance.rs` asserts it).
//!
//! ```text
//! cargo build --release --bin rankstream --bin eval-search
//! target/release/eval-search --verbose
//! target/release/eval-search --write-markdown BENCHMARKS.md
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use bench::{
    markdown_row, post_events, publish_section, section_head, server_binary, thousands, upsert_items, wait_searchable,
    Connection, IndexEntry, SpawnedServer, Target, RATE_LIMIT_ENV, SEARCH,
};

const MARKDOWN_HEADING: &str = "## Search relevance";
/// This tool's line in the index at the top of BENCHMARKS.md.
const INDEX: IndexEntry = IndexEntry {
    tool: "eval-search",
    row: "| Search relevance | `tools/src/bin/eval-search.rs` (`eval-search`) | NDCG@10 and MRR on graded queries over MovieLens and a shop catalog (`tools/relevance/`), full search beside BM25 alone: full >= BM25 + 0.2 NDCG@10 (issue 24) |",
};
/// The results judged per query.
const DEPTH: usize = 10;
/// The issue's acceptance: full NDCG@10 at least this much above BM25 alone.
const TARGET_GAIN: f64 = 0.2;
const UPSERT_BATCH: usize = 2_000;
const EVENT_BATCH: usize = 1_000;
/// Tags of a movie in its catalog row: its most frequent ones.
const MOVIE_TAGS: usize = 10;
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Parser, Debug)]
#[command(about = "Search relevance: NDCG@10 and MRR of the full search and of BM25 alone on graded queries")]
struct Args {
    /// MovieLens latest-small (movies.csv, ratings.csv, tags.csv).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/movielens_latest_small"))]
    movielens: PathBuf,
    /// The suites: movielens_queries.json, shop_queries.json, shop_catalog.json.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/relevance"))]
    suites: PathBuf,
    /// Which queries run: validation, test or all.
    #[arg(long, default_value = "all", value_parser = ["validation", "test", "all"])]
    split: String,
    /// Environment of the baseline server, KEY=VALUE (repeatable; replaces the default).
    #[arg(
        long = "baseline-env",
        value_name = "KEY=VALUE",
        default_value = "RANKSTREAM__SEARCH__BM25_ONLY=true"
    )]
    baseline_env: Vec<String>,
    /// Print every query's top 10 on both servers, with grades.
    #[arg(long)]
    verbose: bool,
    /// Write every figure, per query too, as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Write (or replace) the `## Search relevance` section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Split {
    Validation,
    Test,
}

impl Split {
    fn name(self) -> &'static str {
        if self == Split::Validation {
            "validation"
        } else {
            "test"
        }
    }
}

/// A suite: its name, the table its catalog goes into (and its queries search), its file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Suite {
    name: &'static str,
    table: &'static str,
    queries_file: &'static str,
}

const MOVIELENS: Suite = Suite {
    name: "movielens",
    table: "movies",
    queries_file: "movielens_queries.json",
};
const SHOP: Suite = Suite {
    name: "shop",
    table: "products",
    queries_file: "shop_queries.json",
};

/// An item as the judgments see it; fields its catalog does not have stay empty. A
/// product deserializes into it (its other fields ignored).
#[derive(Default, Deserialize)]
#[serde(default)]
struct JudgedItem {
    id: String,
    title: String,
    /// MovieLens genres.
    genres: Vec<String>,
    /// Lowercased: every tag users gave a movie, or a product's tags.
    tags: Vec<String>,
    category: Option<String>,
    audience: Option<String>,
    color: Option<String>,
    price: Option<f64>,
    /// Ratings in ratings.csv: what `well_known` ranks by.
    ratings: usize,
}

/// A catalog: the rows to upsert and the items to judge, in the same order.
struct Catalog {
    rows: Vec<Value>,
    items: Vec<JudgedItem>,
    by_id: HashMap<String, usize>,
}

impl Catalog {
    fn new(rows: Vec<Value>, items: Vec<JudgedItem>) -> Result<Catalog> {
        let mut by_id = HashMap::new();
        for (index, item) in items.iter().enumerate() {
            ensure!(by_id.insert(item.id.clone(), index).is_none(), "item {} twice", item.id);
        }
        Ok(Catalog { rows, items, by_id })
    }

    fn title(&self, id: &str) -> &str {
        self.by_id
            .get(id)
            .map_or("?", |&index| self.items[index].title.as_str())
    }
}

/// MovieLens: the movies and every rating as a view with its real time.
fn load_movielens(dir: &Path) -> Result<(Catalog, Vec<Value>)> {
    let open = |name: &str| {
        let path = dir.join(name);
        csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))
    };
    let mut tags: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    for record in open("tags.csv")?.records() {
        let record = record?;
        *tags
            .entry(record[1].to_owned())
            .or_default()
            .entry(record[2].trim().to_lowercase())
            .or_default() += 1;
    }
    let mut ratings: HashMap<String, usize> = HashMap::new();
    let mut events = Vec::new();
    for record in open("ratings.csv")?.records() {
        let record = record?;
        let (uid, movie) = (&record[0], &record[1]);
        let seconds: i64 = record[3]
            .parse()
            .with_context(|| format!("timestamp {:?}", &record[3]))?;
        let at = chrono::DateTime::from_timestamp(seconds, 0).context("a timestamp out of range")?;
        events.push(json!({
            "type": "page_view", "page_type": "product", "uid": uid, "sid": format!("{uid}-{}", seconds / 86_400),
            "item_id": movie, "original_timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }));
        *ratings.entry(movie.to_owned()).or_default() += 1;
    }
    let (mut rows, mut items) = (Vec::new(), Vec::new());
    for record in open("movies.csv")?.records() {
        let record = record?;
        let id = record[0].to_owned();
        let genres: Vec<String> = record[2]
            .split('|')
            .filter(|genre| *genre != "(no genres listed)")
            .map(str::to_owned)
            .collect();
        let movie_tags = tags.remove(&id).unwrap_or_default();
        let mut frequent: Vec<(&String, &usize)> = movie_tags.iter().collect();
        frequent.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let mut row = json!({"id": id, "_table": MOVIELENS.table, "name": &record[1]});
        if !genres.is_empty() {
            row["groups"] = json!(genres);
        }
        if !frequent.is_empty() {
            row["tags"] = json!(frequent.iter().take(MOVIE_TAGS).map(|(tag, _)| tag).collect::<Vec<_>>());
        }
        rows.push(row);
        items.push(JudgedItem {
            ratings: ratings.get(&id).copied().unwrap_or(0),
            id,
            title: record[1].to_owned(),
            genres,
            tags: movie_tags.into_keys().collect(),
            ..JudgedItem::default()
        });
    }
    Ok((Catalog::new(rows, items)?, events))
}

/// The shop catalog: every field of a product goes into its row, in table `products`.
fn load_shop(path: &Path) -> Result<Catalog> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut rows: Vec<Value> = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut items = Vec::new();
    for row in &mut rows {
        let mut item: JudgedItem = serde_json::from_value(row.clone()).with_context(|| format!("product {row}"))?;
        ensure!(
            item.category.is_some() && item.price.is_some(),
            "a product without a category or price: {row}"
        );
        item.tags.iter_mut().for_each(|tag| *tag = tag.to_lowercase());
        row["_table"] = json!(SHOP.table);
        items.push(item);
    }
    Catalog::new(rows, items)
}

/// A rule of a query's judgments: every item it matches gets `grade` (1 when absent);
/// with `well_known`, the N most rated of them get one more. Lists match case-blind.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields, default)]
struct Rule {
    grade: Option<u8>,
    /// MovieLens: the movie has every one of these genres ...
    genres_all: Vec<String>,
    /// ... at least one of these (when given) ...
    genres_any: Vec<String>,
    /// ... and none of these.
    genres_none: Vec<String>,
    /// MovieLens: the most rated N of the matches get `grade + 1`.
    well_known: Option<usize>,
    /// Tags, as for genres (a movie's tags: all that users gave it in tags.csv).
    tags_all: Vec<String>,
    tags_any: Vec<String>,
    tags_none: Vec<String>,
    /// Shop: the product's category, audience and colour are these / not these.
    category: Option<String>,
    audience: Option<String>,
    audience_none: Vec<String>,
    color: Option<String>,
    color_none: Vec<String>,
    /// Shop: price < price_below, price > price_above.
    price_below: Option<f64>,
    price_above: Option<f64>,
}

impl Rule {
    /// A rule names only fields its suite's catalog has, and grades from 0 to 3.
    fn check(&self, suite: Suite) -> Result<()> {
        let movie_fields = [&self.genres_all, &self.genres_any, &self.genres_none]
            .iter()
            .any(|list| !list.is_empty())
            || self.well_known.is_some();
        let shop_fields = [&self.category, &self.audience, &self.color]
            .iter()
            .any(|value| value.is_some())
            || [&self.audience_none, &self.color_none]
                .iter()
                .any(|list| !list.is_empty())
            || self.price_below.or(self.price_above).is_some();
        match suite == MOVIELENS {
            true => ensure!(!shop_fields, "a MovieLens rule with shop fields: {self:?}"),
            false => ensure!(!movie_fields, "a shop rule with MovieLens fields: {self:?}"),
        }
        ensure!(self.grade.unwrap_or(1) <= 3, "grades are 0 to 3: {self:?}");
        Ok(())
    }

    fn matches(&self, item: &JudgedItem) -> bool {
        let has = |values: &[String], wanted: &String| values.iter().any(|value| value.eq_ignore_ascii_case(wanted));
        let all = |values: &[String], wanted: &[String]| wanted.iter().all(|w| has(values, w));
        let any = |values: &[String], wanted: &[String]| wanted.is_empty() || wanted.iter().any(|w| has(values, w));
        let none = |values: &[String], unwanted: &[String]| !unwanted.iter().any(|u| has(values, u));
        let equal = |value: &Option<String>, wanted: &Option<String>| match wanted {
            None => true,
            Some(wanted) => value.as_ref().is_some_and(|value| value.eq_ignore_ascii_case(wanted)),
        };
        let not_in = |value: &Option<String>, unwanted: &[String]| value.as_ref().is_none_or(|v| !has(unwanted, v));
        let price = item.price.unwrap_or(f64::NAN);
        all(&item.genres, &self.genres_all)
            && any(&item.genres, &self.genres_any)
            && none(&item.genres, &self.genres_none)
            && all(&item.tags, &self.tags_all)
            && any(&item.tags, &self.tags_any)
            && none(&item.tags, &self.tags_none)
            && equal(&item.category, &self.category)
            && equal(&item.audience, &self.audience)
            && not_in(&item.audience, &self.audience_none)
            && equal(&item.color, &self.color)
            && not_in(&item.color, &self.color_none)
            && self.price_below.is_none_or(|below| price < below)
            && self.price_above.is_none_or(|above| price > above)
    }
}

/// Grades (1 to 3) of the relevant items of a query's judgments: the best grade any rule
/// gives an item, then `ids` set grades outright (0 removes an item a rule matched).
/// Rules sit either at the top level (one rule) or in `rules`.
fn resolve(judgments: &Value, suite: Suite, catalog: &Catalog) -> Result<BTreeMap<String, u8>> {
    let mut fields = judgments.as_object().context("judgments must be an object")?.clone();
    let explicit: BTreeMap<String, u8> = match fields.remove("ids") {
        Some(ids) => serde_json::from_value(ids).context("ids: {\"<id>\": grade}")?,
        None => BTreeMap::new(),
    };
    let mut rules: Vec<Value> = match fields.remove("rules") {
        Some(Value::Array(rules)) => rules,
        Some(other) => bail!("rules must be a list, not {other}"),
        None => Vec::new(),
    };
    if !fields.is_empty() {
        rules.push(Value::Object(fields));
    }
    let mut grades: BTreeMap<String, u8> = BTreeMap::new();
    for rule in rules {
        let rule: Rule = serde_json::from_value(rule).context("rule")?;
        rule.check(suite)?;
        let mut matched: Vec<&JudgedItem> = catalog.items.iter().filter(|item| rule.matches(item)).collect();
        // Most rated first; ties keep the catalog's order.
        matched.sort_by_key(|item| std::cmp::Reverse(item.ratings));
        for (rank, item) in matched.iter().enumerate() {
            let bonus = u8::from(rule.well_known.is_some_and(|known| rank < known));
            let grade = grades.entry(item.id.clone()).or_default();
            *grade = (*grade).max(rule.grade.unwrap_or(1) + bonus);
        }
    }
    for (id, grade) in explicit {
        ensure!(catalog.by_id.contains_key(&id), "no item {id} in the catalog");
        ensure!(grade <= 3, "grade {grade} of {id}: grades are 0 to 3");
        grades.insert(id, grade);
    }
    grades.retain(|_, grade| *grade > 0);
    ensure!(!grades.is_empty(), "no relevant item");
    Ok(grades)
}

/// A query as its suite file writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryEntry {
    query: String,
    kind: String,
    split: Split,
    judgments: Value,
    /// The explicit grades in words, for the people who read the file.
    #[allow(dead_code)]
    note: Option<String>,
}

/// A query to run, its judgments resolved.
struct Query {
    suite: Suite,
    text: String,
    kind: String,
    split: Split,
    grades: BTreeMap<String, u8>,
}

fn read_suite(dir: &Path, suite: Suite, catalog: &Catalog) -> Result<Vec<Query>> {
    let path = dir.join(suite.queries_file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let entries: Vec<QueryEntry> =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut seen = HashSet::new();
    entries
        .into_iter()
        .map(|entry| {
            ensure!(
                seen.insert(entry.query.clone()),
                "{}: {:?} twice",
                path.display(),
                entry.query
            );
            let grades = resolve(&entry.judgments, suite, catalog)
                .with_context(|| format!("{}: judgments of {:?}", path.display(), entry.query))?;
            Ok(Query {
                suite,
                text: entry.query,
                kind: entry.kind,
                split: entry.split,
                grades,
            })
        })
        .collect()
}

/// NDCG@10 and MRR of one ranking.
#[derive(Clone, Copy, Default, Serialize)]
struct Scores {
    ndcg10: f64,
    mrr: f64,
}

fn gain(grade: u8) -> f64 {
    f64::from((1u32 << grade) - 1)
}

fn discount(rank: usize) -> f64 {
    (rank as f64 + 1.0).log2()
}

fn score(ranked: &[String], grades: &BTreeMap<String, u8>) -> Scores {
    let grade_of = |id: &String| grades.get(id).copied().unwrap_or(0);
    // A fold from +0.0: an empty `sum()` of floats is -0.0.
    let dcg = ranked
        .iter()
        .take(DEPTH)
        .enumerate()
        .fold(0.0, |dcg, (i, id)| dcg + gain(grade_of(id)) / discount(i + 1));
    let mut ideal: Vec<u8> = grades.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let ideal_dcg: f64 = ideal
        .iter()
        .take(DEPTH)
        .enumerate()
        .map(|(i, &g)| gain(g) / discount(i + 1))
        .sum();
    let best = ideal.first().copied().unwrap_or(0);
    let first_best = ranked.iter().take(DEPTH).position(|id| grade_of(id) == best);
    Scores {
        ndcg10: if ideal_dcg > 0.0 { dcg / ideal_dcg } else { 0.0 },
        mrr: first_best.map_or(0.0, |index| 1.0 / (index + 1) as f64),
    }
}

/// One of the two servers compared.
struct Variant {
    /// `full` or `bm25`.
    name: &'static str,
    /// Its environment beyond the rate limit.
    env: Vec<(String, String)>,
}

fn parse_env(pairs: &[String]) -> Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
            _ => bail!("--baseline-env takes KEY=VALUE, not {pair:?}"),
        })
        .collect()
}

fn env_text(env: &[(String, String)]) -> String {
    match env.is_empty() {
        true => "the defaults".to_owned(),
        false => env
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Starts a variant's server; a server that stops at start-up is explained with its log.
async fn start(binary: &Path, variant: &Variant) -> Result<SpawnedServer> {
    let mut env: Vec<(&str, &str)> = RATE_LIMIT_ENV.to_vec();
    env.extend(variant.env.iter().map(|(key, value)| (key.as_str(), value.as_str())));
    let error = match SpawnedServer::start(binary, &[], &env).await {
        Ok(server) => {
            server.announce();
            return Ok(server);
        }
        Err(error) => error,
    };
    // The start error names the log: "... see /tmp/rankstream-bench-*/server.log".
    let log = error
        .chain()
        .find_map(|cause| Some(cause.to_string().split_once("see ")?.1.trim().to_owned()))
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let last_lines = &lines[lines.len().saturating_sub(5)..];
    let unknown_key = log.contains("unknown field") || log.contains("unknown key");
    let hint = match (unknown_key, variant.env.is_empty()) {
        (true, false) => {
            "\nthis rankstream does not know a key of that environment (search.bm25_only is new: \
                          is the binary older than it?); choose the baseline with --baseline-env KEY=VALUE"
        }
        _ => "",
    };
    Err(error.context(format!(
        "the {} server ({}) did not start; the end of its log:\n{}{hint}",
        variant.name,
        env_text(&variant.env),
        last_lines.join("\n")
    )))
}

/// Upserts both catalogs and the events, then waits until the last item of each catalog
/// is searchable and the learner has learned every event.
async fn load(target: &Target, catalogs: &[(Suite, &Catalog)], events: &[Value]) -> Result<()> {
    let mut sender = target.connect().await?;
    for (_, catalog) in catalogs {
        upsert_items(target, &mut sender, &catalog.rows, UPSERT_BATCH).await?;
    }
    post_events(target, &mut sender, events, EVENT_BATCH).await?;
    for (suite, catalog) in catalogs {
        let last = catalog.items.last().context("an empty catalog")?;
        wait_searchable(target, &mut sender, &last.title, &last.id, LOAD_TIMEOUT)
            .await
            .with_context(|| format!("the {} catalog", suite.name))?;
    }
    let deadline = Instant::now() + LOAD_TIMEOUT;
    loop {
        let (status, body) = target.get(&mut sender, "/v1/admin/stats").await?;
        ensure!(status == StatusCode::OK, "stats: {status}");
        let stats: Value = serde_json::from_slice(&body)?;
        let learned = stats["models"]["events_learned"]
            .as_u64()
            .context("no models.events_learned in the stats")?;
        if learned >= events.len() as u64 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{learned} of {} events learned after 600 s",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ids of the top 10 for a query, as a new visitor, within its suite's table.
async fn search(target: &Target, sender: &mut Connection, query: &Query) -> Result<Vec<String>> {
    let body = json!({"query": query.text, "limit": DEPTH, "tables": [query.suite.table]});
    let (status, response) = target.call(sender, &SEARCH, serde_json::to_vec(&body)?.into()).await?;
    ensure!(
        status == StatusCode::OK,
        "{:?}: {status}: {}",
        query.text,
        String::from_utf8_lossy(&response)
    );
    let found: Value = serde_json::from_slice(&response)?;
    let items = found["items"]
        .as_array()
        .with_context(|| format!("{:?}: no items", query.text))?;
    items
        .iter()
        .map(|item| item["id"].as_str().map(str::to_owned).context("an item without an id"))
        .collect()
}

/// A query's outcome on both servers.
#[derive(Serialize)]
struct Outcome {
    suite: &'static str,
    query: String,
    kind: String,
    split: Split,
    /// Items graded 1 or more.
    relevant: usize,
    full: Scores,
    bm25: Scores,
    /// The top 10 ids of each server.
    full_top: Vec<String>,
    bm25_top: Vec<String>,
}

/// Means over a group of outcomes.
#[derive(Serialize)]
struct Summary {
    /// `movielens`, `shop` or `all`.
    suite: &'static str,
    /// A split (`validation`, `test`, `all`) or a kind.
    group: String,
    queries: usize,
    full: Scores,
    bm25: Scores,
}

impl Summary {
    fn of(suite: &'static str, group: &str, outcomes: &[&Outcome]) -> Option<Summary> {
        let count = outcomes.len() as f64;
        let mean = |pick: fn(&Outcome) -> Scores| Scores {
            ndcg10: outcomes.iter().map(|o| pick(o).ndcg10).sum::<f64>() / count,
            mrr: outcomes.iter().map(|o| pick(o).mrr).sum::<f64>() / count,
        };
        let summary = Summary {
            suite,
            group: group.to_owned(),
            queries: outcomes.len(),
            full: mean(|o| o.full),
            bm25: mean(|o| o.bm25),
        };
        (!outcomes.is_empty()).then_some(summary)
    }

    /// NDCG@10 full, BM25 alone and their difference, then the same for MRR.
    fn cells(&self) -> Vec<String> {
        let (full, bm25) = (self.full, self.bm25);
        let mut cells = vec![self.suite.to_owned(), self.group.clone(), self.queries.to_string()];
        for (full, bm25) in [(full.ndcg10, bm25.ndcg10), (full.mrr, bm25.mrr)] {
            cells.extend([
                format!("{full:.3}"),
                format!("{bm25:.3}"),
                format!("{:+.3}", full - bm25),
            ]);
        }
        cells
    }
}

/// By suite (each, then both) × split (each, then all), and by suite × kind.
fn summaries(outcomes: &[Outcome]) -> (Vec<Summary>, Vec<Summary>) {
    let (mut by_split, mut by_kind) = (Vec::new(), Vec::new());
    for suite in [MOVIELENS.name, SHOP.name, "all"] {
        let in_suite: Vec<&Outcome> = outcomes.iter().filter(|o| suite == "all" || o.suite == suite).collect();
        for split in ["validation", "test", "all"] {
            let chosen: Vec<&Outcome> = in_suite
                .iter()
                .copied()
                .filter(|o| split == "all" || o.split.name() == split)
                .collect();
            by_split.extend(Summary::of(suite, split, &chosen));
        }
        let kinds: BTreeSet<&str> = in_suite.iter().map(|o| o.kind.as_str()).collect();
        for kind in kinds {
            let chosen: Vec<&Outcome> = in_suite.iter().copied().filter(|o| o.kind == kind).collect();
            by_kind.extend(Summary::of(suite, kind, &chosen));
        }
    }
    (by_split, by_kind)
}

/// The summaries as a Markdown table (also what the tool prints).
fn table(group: &str, summaries: &[Summary]) -> String {
    let mut out = format!(
        "| suite | {group} | queries | NDCG@10 full | NDCG@10 BM25 | diff | MRR full | MRR BM25 | diff |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for summary in summaries {
        out.push_str(&markdown_row(&summary.cells()));
        out.push('\n');
    }
    out
}

/// Full NDCG@10 over every query run minus BM25 alone's.
fn gain_over_bm25(by_split: &[Summary]) -> f64 {
    let all = by_split.iter().find(|s| s.suite == "all" && s.group == "all");
    all.map_or(0.0, |all| all.full.ndcg10 - all.bm25.ndcg10)
}

/// Prints a query's top 10 on both servers, `grade title` each, side by side.
fn print_query(outcome: &Outcome, query: &Query, catalog: &Catalog) {
    let ([full, bm25], split) = ([outcome.full, outcome.bm25], outcome.split.name());
    println!(
        "\n[{} {} {split}] {:?}: NDCG@10 full {:.3} bm25 {:.3}, MRR full {:.3} bm25 {:.3} ({} relevant)",
        outcome.suite, outcome.kind, outcome.query, full.ndcg10, bm25.ndcg10, full.mrr, bm25.mrr, outcome.relevant
    );
    let line = |top: &[String], rank: usize| match top.get(rank) {
        Some(id) => format!("{} {}", query.grades.get(id).copied().unwrap_or(0), catalog.title(id)),
        None => "-".to_owned(),
    };
    for rank in 0..DEPTH {
        let (full, bm25) = (line(&outcome.full_top, rank), line(&outcome.bm25_top, rank));
        println!("  {:>2}. {full:<58.58} | {bm25:.58}", rank + 1);
    }
}

/// What a run measured, for the JSON file and the Markdown section.
struct Run {
    outcomes: Vec<Outcome>,
    by_split: Vec<Summary>,
    by_kind: Vec<Summary>,
    /// Queries in each suite file, whatever `--split` chose.
    suite_sizes: BTreeMap<&'static str, usize>,
    movies: usize,
    products: usize,
    events: usize,
    load_seconds: f64,
    query_seconds: f64,
    variants: [Variant; 2],
}

fn markdown_section(run: &Run) -> String {
    let gain = gain_over_bm25(&run.by_split);
    let met = if gain >= TARGET_GAIN { "met" } else { "**not met**" };
    let mut out = section_head(MARKDOWN_HEADING, "eval-search");
    let _ = write!(
        out,
        "- Suites (`tools/relevance/`, its README says how they were built and graded): {} MovieLens queries over \
         the {} latest-small movies and {} shop queries over a {}-product catalog made for the suite; graded 0-3 \
         by hand or by rules (genres, tags, rating counts; category, tags, audience, price), never from search \
         output. Ran: {} queries.\n\
         - Servers: `full` ({}) and `bm25` ({}), each on a fresh data dir with the same data: the movies (genres → \
         `groups`, 10 most frequent tags → `tags`), {} ratings as page views at their real times, the products; \
         loaded in {:.1} s; queries took {:.1} s.\n\
         - Requests: `POST /v1/search` `{{\"query\", \"limit\": 10, \"tables\": [the suite's table]}}`, no user or \
         session. NDCG@10: gain 2^grade - 1, discount log2(rank + 1), ideal from every judged item. MRR: 1 / rank \
         of the first result with the query's highest grade (0 outside the top 10).\n\
         - Target (issue 24): full NDCG@10 over all queries >= BM25 alone + {TARGET_GAIN}: {met} ({gain:+.3}).\n\n\
         {}\nBy kind:\n\n{}",
        run.suite_sizes.get(MOVIELENS.name).copied().unwrap_or(0),
        thousands(run.movies as f64),
        run.suite_sizes.get(SHOP.name).copied().unwrap_or(0),
        run.products,
        run.outcomes.len(),
        env_text(&run.variants[0].env),
        env_text(&run.variants[1].env),
        thousands(run.events as f64),
        run.load_seconds,
        run.query_seconds,
        table("split", &run.by_split),
        table("kind", &run.by_kind),
    );
    out
}

fn write_json(path: &Path, run: &Run) -> Result<()> {
    let servers: serde_json::Map<String, Value> = (run.variants.iter())
        .map(|variant| (variant.name.to_owned(), json!({"env": env_text(&variant.env)})))
        .collect();
    let document = json!({
        "depth": DEPTH, "servers": servers, "suite_sizes": run.suite_sizes,
        "load_seconds": run.load_seconds, "query_seconds": run.query_seconds,
        "by_split": run.by_split, "by_kind": run.by_kind, "queries": run.outcomes,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&document)?).with_context(|| format!("writing {}", path.display()))
}

/// Both servers loaded, then every query on each: the outcomes, load and query seconds.
async fn measure(
    servers: [&SpawnedServer; 2],
    catalogs: &[(Suite, &Catalog)],
    events: &[Value],
    queries: &[Query],
) -> Result<(Vec<Outcome>, f64, f64)> {
    let started = Instant::now();
    let [full, bm25] = [servers[0].target()?, servers[1].target()?];
    let (full_load, bm25_load) = tokio::join!(load(&full, catalogs, events), load(&bm25, catalogs, events));
    full_load.context("loading the full server")?;
    bm25_load.context("loading the bm25 server")?;
    let load_seconds = started.elapsed().as_secs_f64();
    eprintln!("both servers loaded and learned in {load_seconds:.1} s");
    let started = Instant::now();
    let (mut full_sender, mut bm25_sender) = (full.connect().await?, bm25.connect().await?);
    let mut outcomes = Vec::new();
    for query in queries {
        let full_top = search(&full, &mut full_sender, query).await.context("full")?;
        let bm25_top = search(&bm25, &mut bm25_sender, query).await.context("bm25")?;
        outcomes.push(Outcome {
            suite: query.suite.name,
            query: query.text.clone(),
            kind: query.kind.clone(),
            split: query.split,
            relevant: query.grades.len(),
            full: score(&full_top, &query.grades),
            bm25: score(&bm25_top, &query.grades),
            full_top,
            bm25_top,
        });
    }
    Ok((outcomes, load_seconds, started.elapsed().as_secs_f64()))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let binary = server_binary(args.server_bin.as_ref())?;
    let baseline_env = parse_env(&args.baseline_env)?;
    let variants = [
        Variant {
            name: "full",
            env: Vec::new(),
        },
        Variant {
            name: "bm25",
            env: baseline_env,
        },
    ];
    let (movies, events) = load_movielens(&args.movielens)?;
    let shop = load_shop(&args.suites.join("shop_catalog.json"))?;
    let catalogs = [(MOVIELENS, &movies), (SHOP, &shop)];
    let (mut queries, mut suite_sizes) = (Vec::new(), BTreeMap::new());
    for (suite, catalog) in catalogs {
        let suite_queries = read_suite(&args.suites, suite, catalog)?;
        suite_sizes.insert(suite.name, suite_queries.len());
        queries.extend(suite_queries);
    }
    queries.retain(|query| args.split == "all" || query.split.name() == args.split);
    let (movie_count, event_count) = (thousands(movies.items.len() as f64), thousands(events.len() as f64));
    eprintln!(
        "{} queries; {movie_count} movies, {event_count} ratings, {} products",
        queries.len(),
        shop.items.len()
    );

    let full = start(&binary, &variants[0]).await?;
    let bm25 = match start(&binary, &variants[1]).await {
        Ok(server) => server,
        Err(error) => {
            full.stop().await?;
            return Err(error);
        }
    };
    let measured = measure([&full, &bm25], &catalogs, &events, &queries).await;
    let stopped = [full.stop().await, bm25.stop().await];
    let (outcomes, load_seconds, query_seconds) = measured?;
    for stop in stopped {
        stop?;
    }

    if args.verbose {
        for (outcome, query) in outcomes.iter().zip(&queries) {
            print_query(outcome, query, if query.suite == MOVIELENS { &movies } else { &shop });
        }
    }
    let (by_split, by_kind) = summaries(&outcomes);
    println!(
        "\nNDCG@10 and MRR of the full search and of BM25 alone:\n\n{}",
        table("split", &by_split)
    );
    println!("by kind:\n\n{}", table("kind", &by_kind));
    let gain = gain_over_bm25(&by_split);
    let verdict = if gain >= TARGET_GAIN { "met" } else { "NOT met" };
    println!("target full NDCG@10 >= BM25 alone + {TARGET_GAIN}: {verdict} ({gain:+.3})");
    println!(
        "setup {load_seconds:.1} s, {} queries on 2 servers in {query_seconds:.1} s",
        outcomes.len()
    );
    let run = Run {
        outcomes,
        by_split,
        by_kind,
        suite_sizes,
        movies: movies.items.len(),
        products: shop.items.len(),
        events: events.len(),
        load_seconds,
        query_seconds,
        variants,
    };
    if let Some(path) = &args.json {
        write_json(path, &run)?;
    }
    if let Some(path) = &args.write_markdown {
        publish_section(path, MARKDOWN_HEADING, &markdown_section(&run), Some(&INDEX))?;
    }
    Ok(())
}
