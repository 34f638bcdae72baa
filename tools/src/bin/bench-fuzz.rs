//! Body fuzzing of every endpoint: `--bodies` requests (default 1,000,000) against a
//! spawned release server, each with a body generated from the server's own OpenAPI
//! document (`GET /openapi.json`), and a count of the answers by endpoint and status.
//! The target is that no answer is a 5xx, that no connection is reset mid-request and
//! that no request hangs (a 408 `timeout` or a 429 is an answer, not a failure).
//!
//! It starts `rankstream serve` on a fresh temp dir (the harness's [`SpawnedServer`],
//! durability sync) with the rate quota of keys lifted and
//! `RANKSTREAM__AUTH__FAILURES_PER_MINUTE=1000000`, so that the requests sent with wrong
//! keys on purpose do not get the tool's address throttled (the run would then measure
//! 429s). Before fuzzing it seeds a small catalog through the API (tables with a
//! relation, items, users, events with known ids, a key with the `search` scope only)
//! so that the bodies' ids, tables and models name things that exist and the requests
//! reach the handlers' real logic.
//!
//! Every operation of the document (each path and alias, each method) gets bodies:
//! - ~35% schema-valid: `$ref`, `allOf`/`oneOf`/`anyOf` (a branch picked, the fields of
//!   the other `oneOf` branches left out), enums, formats and bounds followed, ids from
//!   the seeded pools, events with their type's mandatory fields;
//! - ~45% a valid body with 1 to 3 mutations at random places: wrong types, nulls,
//!   huge and odd numbers, NaN-like strings, nesting up to 200 deep, long strings (up to
//!   1 MB), unicode and control characters, empty objects and arrays, extra and missing
//!   fields, arrays blown up to 20,000 entries;
//! - ~20% bytes: not JSON at all, truncated JSON, flipped bytes, duplicate keys,
//!   non-JSON number tokens (NaN, 1e999, 40-digit integers), lone surrogates, nesting
//!   100,000 deep, a BOM, two documents, invalid UTF-8.
//!
//! Path parameters are seeded ids two times in three, otherwise random (unicode, `%FF`,
//! `%00`, `..`, 70 KB long). Some requests carry another content type, a stray query, a
//! wrong, missing or malformed key, the legacy `X-API-Key` header, or the key that
//! lacks the scope (403). What is limited, and why:
//! - `POST /v1/admin/models/retrain` rebuilds every model from the whole event log: 3
//!   real calls spread over the run; its other requests carry a credential that is
//!   refused (401/403), so they reach auth but not the rebuild.
//! - `POST /v1/admin/compact` compacts every shard: 3 real calls; its other bodies are
//!   ones that fail validation (or carry a refused credential).
//! - The SPEC's mock model `test_model_item_503` answers 503 by definition: never named.
//!
//! ```text
//! cargo build --release --bin rankstream --bin bench-fuzz
//! target/release/bench-fuzz --write-markdown BENCHMARKS.md
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use base64::Engine as _;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

use bench::{
    goals_table, own_cpu_seconds, print_goals, process_cpu_seconds, publish_section, section_head, server_binary,
    snippet, thousands, Connection, Goal, IndexEntry, SpawnedServer, Target, RATE_LIMIT_ENV,
};

const MARKDOWN_HEADING: &str = "## Fuzzing: one million bodies";
const INDEX: IndexEntry = IndexEntry {
    tool: "bench-fuzz",
    row: "| Fuzzing: one million bodies | `tools/src/bin/bench-fuzz.rs` (`bench-fuzz`) | 0 responses >= 500, no reset or hung connection, over >= 1,000,000 generated and mutated bodies on every endpoint |",
};
/// Wrong keys are sent on purpose: the per-address throttle of invalid keys must not
/// turn the rest of the run into 429s.
const FAILURES_ENV: (&str, &str) = ("RANKSTREAM__AUTH__FAILURES_PER_MINUTE", "1000000");
/// Real (admin-key, valid-body) calls of each rationed endpoint.
const RATIONED_CALLS: u64 = 3;

#[derive(Parser, Debug)]
#[command(about = "Fuzz every endpoint with generated and mutated bodies; count statuses (target: 0 >= 500)")]
struct Args {
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Request bodies to send, over all endpoints.
    #[arg(long, default_value_t = 1_000_000)]
    bodies: u64,
    /// Concurrent keep-alive connections, one request in flight on each.
    #[arg(long, default_value_t = 48)]
    connections: usize,
    /// Seed of every generated body, path and credential (connection i uses seed + i).
    #[arg(long, default_value_t = 20_261_125)]
    seed: u64,
    /// A request without a whole answer after this many seconds counts as hung (the
    /// server's own deadline is 10 s).
    #[arg(long, default_value_t = 30)]
    hang_after_s: u64,
    /// 5xx answers (and transport failures) kept as examples.
    #[arg(long, default_value_t = 20)]
    examples: usize,
    /// Write (or replace) the `## Fuzzing: one million bodies` section of this Markdown file.
    #[arg(long)]
    write_markdown: Option<PathBuf>,
    /// Exit with an error when a target other than the number of bodies is missed, or
    /// the server logged a panic: for a bounded slice of the run in the tests.
    #[arg(long)]
    check: bool,
}

// ---------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------

/// What an operation's requests are limited to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ration {
    /// Anything.
    None,
    /// Only refused credentials, apart from the scheduled real calls (retrain).
    RefusedCredentials,
    /// Only bodies that fail validation or refused credentials, apart from the
    /// scheduled real calls (compact).
    InvalidBodies,
}

/// One method on one path of the OpenAPI document.
struct Operation {
    method: Method,
    /// As the document writes it, with `{param}`s.
    template: String,
    /// `METHOD template`, for the report.
    name: String,
    /// The request body's schema, when the operation takes one.
    body: Option<Value>,
    /// Query parameters the document lists.
    query: Vec<String>,
    weight: f64,
    ration: Ration,
}

/// The share of bodies an operation gets, relative to 1.0 for most.
fn weight_of(method: &Method, path: &str) -> f64 {
    match (method.as_str(), path) {
        // 117 KB each: a little goes a long way.
        (_, "/openapi.json") => 0.1,
        (_, "/healthz" | "/readyz") => 0.25,
        // The slow ones (a MiniLM-sized embedding, a whole chat turn); two paths each.
        (_, "/chat" | "/v1/chat" | "/embed" | "/v1/embed") => 0.5,
        // Deletions empty the seeded catalog; keep them rarer than the writes that refill it.
        ("DELETE", "/v1/catalog/table/{name}") => 0.2,
        ("DELETE", "/v1/users/{uid}") => 0.3,
        ("DELETE", "/v1/catalog/item/{table}/{id}") => 0.5,
        _ => 1.0,
    }
}

fn operations(document: &Value) -> Result<Vec<Operation>> {
    let paths = document["paths"].as_object().context("the document has no paths")?;
    let mut operations = Vec::new();
    for (path, item) in paths {
        let item = item.as_object().context("a path item is not an object")?;
        for (method, operation) in item {
            let method: Method = method.to_uppercase().parse().context("bad method")?;
            let body = operation["requestBody"]["content"]["application/json"]["schema"].clone();
            let query = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "query")
                .filter_map(|parameter| parameter["name"].as_str().map(str::to_owned))
                .collect();
            let ration = match path.as_str() {
                "/v1/admin/models/retrain" => Ration::RefusedCredentials,
                "/v1/admin/compact" => Ration::InvalidBodies,
                _ => Ration::None,
            };
            operations.push(Operation {
                name: format!("{method} {path}"),
                weight: weight_of(&method, path),
                method,
                template: path.clone(),
                body: (!body.is_null()).then_some(body),
                query,
                ration,
            });
        }
    }
    ensure!(!operations.is_empty(), "the document lists no operations");
    Ok(operations)
}

// ---------------------------------------------------------------------------------
// The seeded world: ids that exist
// ---------------------------------------------------------------------------------

const WORDS: &[&str] = &[
    "red", "shoe", "river", "cruise", "museum", "tour", "wine", "tasting", "family", "kids", "cheap", "under", "50",
    "euros", "boat", "night", "walking", "food", "city", "castle", "hiking", "sunset", "private", "group", "art",
    "history", "not", "without", "with", "cheaper", "than", "100", "best", "new", "and", "or", "1990s", "comedy",
    "drama", "in", "French", "for", "two", "adults", "please", ".5", "€20", "$30",
];
const EVENT_TYPES: &[&str] = &[
    "page_view",
    "module_view",
    "impression",
    "click",
    "conversion",
    "dwell_time",
    "scroll",
    "view",
    "purchase",
    "add_to_cart",
    "search",
    "browse",
    "media_pause",
    "custom_thing",
];
const MODELS: &[&str] = &[
    "default",
    "popularity",
    "covisit",
    "affinity",
    "embedding",
    "blend",
    "ltr",
    "test_model_item_200",
    "test_model_item_400",
    "test_model_item_429",
    "no_such_model",
];
/// The SPEC's mock that answers 503 by definition.
const MOCK_503: &str = "test_model_item_503";
const TABLES: &[&str] = &["products", "articles", "offers", "operators", "items", "no_such_table"];
const FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "price",
    "currency",
    "tags",
    "groups",
    "availability",
    "rating",
    "created_date",
    "embeddings",
    "operator_id",
    "country",
    "language",
    "loyalty_tier",
    "total_orders",
    "gdpr_consent",
    "page_type",
    "query",
    "color",
    "size",
    "year",
];

/// Ids of the seeded catalog, users, sessions and events, and a few things requests
/// need (a small PNG, the bootstrap key's id).
struct Pools {
    items: Vec<String>,
    operators: Vec<String>,
    users: Vec<String>,
    sessions: Vec<String>,
    events: Vec<String>,
    key_ids: Vec<String>,
    conversations: Vec<String>,
    png_base64: String,
}

impl Pools {
    fn new() -> Pools {
        let numbered = |prefix: &str, count: usize| (0..count).map(|n| format!("{prefix}-{n:03}")).collect();
        let png = {
            let image = image::RgbImage::from_fn(8, 8, |x, y| image::Rgb([(x * 30) as u8, (y * 30) as u8, 128]));
            let mut bytes = Vec::new();
            image
                .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
                .expect("an 8x8 PNG encodes");
            base64::engine::general_purpose::STANDARD.encode(bytes)
        };
        Pools {
            items: numbered("item", 200),
            operators: numbered("op", 20),
            users: numbered("user", 50),
            sessions: numbered("sess", 100),
            events: (0..600).map(|n| format!("evt-{n:05}")).collect(),
            key_ids: Vec::new(),
            conversations: numbered("conv", 20),
            png_base64: png,
        }
    }
}

fn pick<'a, T>(rng: &mut StdRng, choices: &'a [T]) -> &'a T {
    choices.choose(rng).expect("non-empty choices")
}

fn phrase(rng: &mut StdRng, words: std::ops::RangeInclusive<usize>) -> String {
    let count = rng.random_range(words);
    (0..count).map(|_| *pick(rng, WORDS)).collect::<Vec<_>>().join(" ")
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Fills the spawned server: tables (products relate to operators), items, users,
/// events with known ids, a key with the `search` scope only. Returns that key's secret.
async fn seed_world(target: &Target, pools: &mut Pools, seed: u64) -> Result<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sender = target.connect().await?;
    let mut send = async |method: Method, path: &str, body: Value| -> Result<Value> {
        let (status, response) = target
            .send(
                &mut sender,
                method,
                path,
                Some("application/json"),
                body.to_string().into(),
            )
            .await?;
        ensure!(status.is_success(), "seeding {path}: {status}: {}", snippet(&response));
        Ok(serde_json::from_slice(&response).unwrap_or(Value::Null))
    };
    for (table, relations) in [
        ("operators", json!([])),
        (
            "products",
            json!([{"field": "operator_id", "relation_table": "operators"}]),
        ),
        ("articles", json!([])),
        ("offers", json!([])),
    ] {
        let body = json!({"table_name": table, "description": format!("bench-fuzz {table}"), "relations": relations});
        send(Method::PUT, "/v1/catalog/table", body).await?;
    }
    let operators: Vec<Value> = pools
        .operators
        .iter()
        .map(|id| json!({"id": id, "_table": "operators", "name": phrase(&mut rng, 1..=3)}))
        .collect();
    send(Method::PUT, "/v1/catalog/items", Value::Array(operators)).await?;
    let start = now_ms() - 30 * 86_400_000;
    let mut items = Vec::new();
    for (index, id) in pools.items.iter().enumerate() {
        let table = match index % 4 {
            0 | 1 => "products",
            2 => "articles",
            _ => "offers",
        };
        let mut item = json!({
            "id": id, "_table": table, "name": phrase(&mut rng, 2..=5), "description": phrase(&mut rng, 8..=20),
            "price": (rng.random_range(1.0..500.0f64) * 100.0).round() / 100.0, "currency": *pick(&mut rng, &["EUR", "USD"]),
            "tags": [*pick(&mut rng, WORDS), *pick(&mut rng, WORDS)], "groups": [*pick(&mut rng, WORDS)],
            "availability": rng.random_bool(0.8), "rating": rng.random_range(1.0..5.0f64),
            "created_date": rfc3339(start + rng.random_range(0..30 * 86_400_000)),
            "embeddings": (0..8).map(|_| rng.random_range(-1.0..1.0f64)).collect::<Vec<_>>(),
        });
        if table == "products" {
            item["operator_id"] = json!(pick(&mut rng, &pools.operators));
        }
        items.push(item);
    }
    send(Method::PUT, "/v1/catalog/items", Value::Array(items)).await?;
    let users: Vec<Value> = pools
        .users
        .iter()
        .map(|uid| {
            json!({"uid": uid, "country": *pick(&mut rng, &["FR", "DE", "US"]), "language": "en",
                   "total_orders": rng.random_range(0..40), "gdpr_consent": true,
                   "preferred_categories": [*pick(&mut rng, WORDS)]})
        })
        .collect();
    send(Method::POST, "/v1/users", json!({ "users": users })).await?;
    let mut events = Vec::new();
    for (index, id) in pools.events.iter().enumerate() {
        let kind = ["impression", "click", "conversion", "page_view"][index % 4];
        let item = pick(&mut rng, &pools.items).clone();
        let mut event = json!({
            "id": id, "type": kind, "uid": pick(&mut rng, &pools.users), "sid": pick(&mut rng, &pools.sessions),
            "original_timestamp": rfc3339(now_ms() - rng.random_range(0..86_400_000)),
        });
        match kind {
            "impression" => (event["item_id"], event["rank"]) = (json!(item), json!(index % 10)),
            "click" => (event["item_id"], event["click_type"]) = (json!(item), json!("tap")),
            "conversion" => (event["item_ids"], event["conversion_type"]) = (json!([item]), json!("order")),
            _ => event["page_type"] = json!("product"),
        }
        events.push(event);
    }
    for chunk in events.chunks(200) {
        send(Method::POST, "/v1/events", json!({ "events": chunk })).await?;
    }
    let limited = send(
        Method::POST,
        "/v1/admin/keys",
        json!({"name": "bench-fuzz search only", "scopes": ["search"]}),
    )
    .await?;
    let limited = limited["key"].as_str().context("no key in the answer")?.to_owned();
    let keys = send(Method::GET, "/v1/admin/keys", Value::Null).await?;
    for key in keys["keys"].as_array().into_iter().flatten() {
        if let Some(id) = key["id"].as_str() {
            pools.key_ids.push(id.to_owned());
        }
    }
    // Ready: the search index has read the catalog and sees the items.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _) = target.get(&mut sender, "/readyz").await?;
        let (_, found) = target
            .send(
                &mut sender,
                Method::POST,
                "/v1/search",
                Some("application/json"),
                json!({"query": "red shoe river tour", "limit": 5}).to_string().into(),
            )
            .await?;
        let found: Value = serde_json::from_slice(&found).unwrap_or(Value::Null);
        if status == StatusCode::OK && found["items"].as_array().is_some_and(|items| !items.is_empty()) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the server is not ready with a searchable catalog after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(limited)
}

// ---------------------------------------------------------------------------------
// Generating values from schemas
// ---------------------------------------------------------------------------------

/// What the generators read: the document's schemas and the seeded ids.
struct Gen {
    schemas: Map<String, Value>,
    pools: Pools,
    admin_key: String,
    limited_key: String,
    now_ms: i64,
}

/// Merges `extra` into `target`: objects key by key, `required` lists joined, anything
/// else replaced.
fn merge(target: &mut Value, extra: Value) {
    match (target, extra) {
        (Value::Object(target), Value::Object(extra)) => {
            for (key, value) in extra {
                if key == "required" {
                    let list = target.entry("required").or_insert_with(|| json!([]));
                    if let (Value::Array(list), Value::Array(more)) = (list, value) {
                        for name in more {
                            if !list.contains(&name) {
                                list.push(name);
                            }
                        }
                    }
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, extra) => *target = extra,
    }
}

fn required_of(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_owned))
        .collect()
}

/// A schema with its `$ref` followed and its `allOf`/`anyOf`/`oneOf` resolved by
/// picking one branch of each, the schema's name (for the per-shape fix-ups) and the
/// fields to leave out (required by the `oneOf` branches not picked).
struct Effective {
    schema: Value,
    name: Option<String>,
    excluded: Vec<String>,
}

impl Gen {
    fn effective(&self, schema: &Value, rng: &mut StdRng) -> Effective {
        let (schema, mut name) = match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference.rsplit('/').next().unwrap_or_default();
                (self.schemas.get(name).unwrap_or(&Value::Null), Some(name.to_owned()))
            }
            None => (schema, None),
        };
        let mut out = match schema {
            Value::Object(map) => {
                let mut map = map.clone();
                for key in ["allOf", "anyOf", "oneOf", "$ref"] {
                    map.remove(key);
                }
                Value::Object(map)
            }
            _ => json!({}),
        };
        let shaped = ["type", "properties", "items"].iter().any(|key| out.get(key).is_some());
        let mut excluded = Vec::new();
        for sub in schema["allOf"].as_array().into_iter().flatten() {
            let effective = self.effective(sub, rng);
            excluded.extend(effective.excluded);
            merge(&mut out, effective.schema);
        }
        for key in ["anyOf", "oneOf"] {
            let Some(branches) = schema[key].as_array().filter(|branches| !branches.is_empty()) else {
                continue;
            };
            let chosen = rng.random_range(0..branches.len());
            let picked = self.effective(&branches[chosen], rng);
            if key == "oneOf" {
                let kept = required_of(&picked.schema);
                for (index, branch) in branches.iter().enumerate() {
                    if index != chosen {
                        excluded.extend(required_of(branch).into_iter().filter(|name| !kept.contains(name)));
                    }
                }
            }
            if !shaped && picked.name.is_some() {
                name = picked.name;
            }
            excluded.extend(picked.excluded);
            merge(&mut out, picked.schema);
        }
        Effective {
            schema: out,
            name,
            excluded,
        }
    }

    /// A value of `schema`, valid as far as the schema says (and `hint`, the field's
    /// name, picks seeded ids and sensible words).
    fn generate(&self, schema: &Value, hint: &str, rng: &mut StdRng, depth: usize) -> Value {
        if depth > 8 {
            return json!("deep");
        }
        let Effective { schema, name, excluded } = self.effective(schema, rng);
        if let Some(constant) = schema.get("const") {
            return constant.clone();
        }
        if let Some(choices) = schema["enum"].as_array().filter(|choices| !choices.is_empty()) {
            return pick(rng, choices).clone();
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ if schema.get("properties").is_some() || schema.get("additionalProperties").is_some() => {
                vec!["object"]
            }
            _ if schema.get("items").is_some() => vec!["array"],
            _ => vec!["any"],
        };
        let concrete: Vec<&str> = types.iter().copied().filter(|kind| *kind != "null").collect();
        let kind = match concrete.is_empty() || (types.contains(&"null") && rng.random_bool(0.05)) {
            true => types.first().copied().unwrap_or("null"),
            false => *pick(rng, &concrete),
        };
        match kind {
            "object" => self.object(&schema, name.as_deref(), &excluded, hint, rng, depth),
            "array" => self.array(&schema, hint, rng, depth),
            "string" => json!(self.string(&schema, hint, rng)),
            "integer" => json!(self.integer(&schema, hint, rng)),
            "number" => self.number(&schema, hint, rng),
            "boolean" => json!(rng.random_bool(0.5)),
            "null" => Value::Null,
            _ => self.any(hint, rng),
        }
    }

    fn object(
        &self,
        schema: &Value,
        name: Option<&str>,
        excluded: &[String],
        hint: &str,
        rng: &mut StdRng,
        depth: usize,
    ) -> Value {
        let required = required_of(schema);
        let mut map = Map::new();
        if let Some(properties) = schema["properties"].as_object() {
            for (field, property) in properties {
                if excluded.contains(field) {
                    continue;
                }
                if required.contains(field) || rng.random_bool(0.5) {
                    map.insert(field.clone(), self.generate(property, field, rng, depth + 1));
                }
            }
        }
        let extra = &schema["additionalProperties"];
        if extra.is_object() && rng.random_bool(0.3) {
            for _ in 0..rng.random_range(1..=3) {
                let field = *pick(rng, FIELDS);
                map.insert(field.to_owned(), self.generate(extra, field, rng, depth + 1));
            }
        }
        if schema.get("properties").is_none() && !extra.is_object() {
            // A free object (`context`, `attributes`, `search_context`, ...).
            for _ in 0..rng.random_range(0..=3) {
                let field = *pick(rng, FIELDS);
                map.insert(field.to_owned(), self.any(field, rng));
            }
        }
        self.fix_up(name.unwrap_or(hint), &mut map, rng);
        Value::Object(map)
    }

    /// What a schema cannot say: an event type's mandatory fields, the catalog's own
    /// field types, engagement properties.
    fn fix_up(&self, shape: &str, map: &mut Map<String, Value>, rng: &mut StdRng) {
        let pools = &self.pools;
        match shape {
            "V1Event" => {
                let kind = *pick(rng, EVENT_TYPES);
                map.insert("type".into(), json!(kind));
                let item = json!(pick(rng, &pools.items));
                match kind {
                    "page_view" => drop(map.insert("page_type".into(), json!("product"))),
                    "module_view" => drop(map.insert("rank".into(), json!(rng.random_range(0..10)))),
                    "impression" => {
                        map.insert("item_id".into(), item);
                        map.insert("rank".into(), json!(rng.random_range(0..10)));
                    }
                    "click" => {
                        map.insert("item_id".into(), item);
                        map.insert("click_type".into(), json!("tap"));
                    }
                    "conversion" => {
                        map.insert("item_ids".into(), json!([item]));
                        map.insert("conversion_type".into(), json!("order"));
                    }
                    "dwell_time" => drop(map.insert("dwell_ms".into(), json!(rng.random_range(0..60_000)))),
                    _ => {}
                }
                if rng.random_bool(0.3) {
                    map.insert("id".into(), json!(pick(rng, &pools.events)));
                } else if rng.random_bool(0.5) {
                    map.remove("id");
                }
            }
            "EngagementEvent" => {
                map.insert(
                    "type".into(),
                    json!(pick(
                        rng,
                        &["view", "click", "purchase", "add_to_cart", "search", "impression"]
                    )),
                );
                let mut properties = Map::new();
                properties.insert("item_id".into(), json!(pick(rng, &pools.items)));
                if rng.random_bool(0.3) {
                    properties.insert("query".into(), json!(phrase(rng, 1..=3)));
                    properties.insert("total_value".into(), json!(rng.random_range(0.0..300.0f64)));
                }
                map.insert("properties".into(), Value::Object(properties));
            }
            "ItemRow" if rng.random_bool(0.7) => {
                map.insert("name".into(), json!(phrase(rng, 1..=4)));
                map.insert("description".into(), json!(phrase(rng, 3..=12)));
                map.insert("price".into(), json!(rng.random_range(0.0..900.0f64)));
                map.insert("tags".into(), json!([pick(rng, WORDS)]));
                map.insert("availability".into(), json!(rng.random_bool(0.8)));
                if rng.random_bool(0.5) {
                    map.insert("operator_id".into(), json!(pick(rng, &pools.operators)));
                }
            }
            "UserRow" if rng.random_bool(0.7) => {
                map.insert("country".into(), json!(pick(rng, &["FR", "DE", "US", "JP"])));
                map.insert("total_orders".into(), json!(rng.random_range(0..100)));
            }
            "attributes" => {
                map.insert("price".into(), json!(rng.random_range(0.0..900.0f64)));
                map.insert("tags".into(), json!([pick(rng, WORDS)]));
            }
            _ => {}
        }
    }

    fn array(&self, schema: &Value, hint: &str, rng: &mut StdRng, depth: usize) -> Value {
        let min = schema["minItems"].as_u64().unwrap_or(0) as usize;
        let max = schema["maxItems"].as_u64().map_or(usize::MAX, |max| max as usize);
        let wanted = match hint {
            "item_ids" | "items" => rng.random_range(1..=8),
            "modules" => rng.random_range(1..=4),
            "events" => rng.random_range(0..=4),
            _ => rng.random_range(0..=3),
        };
        let length = wanted.max(min).min(max);
        let items = schema.get("items").cloned().unwrap_or(json!({}));
        // The elements of `item_ids` are item ids, of `tables` tables: the array's name
        // is the better hint.
        let element_hint = match hint {
            "item_ids" | "tables" => hint,
            "embeddings" | "embedding" => "number",
            _ => "",
        };
        let element_hint = if element_hint.is_empty() { hint } else { element_hint };
        Value::Array(
            (0..length)
                .map(|_| self.generate(&items, element_hint, rng, depth + 1))
                .collect(),
        )
    }

    fn string(&self, schema: &Value, hint: &str, rng: &mut StdRng) -> String {
        let pools = &self.pools;
        if schema["format"] == "date-time" {
            let ms = self.now_ms - rng.random_range(0..30 * 86_400_000i64);
            return match rng.random_range(0..10) {
                0 => rfc3339(ms)[..10].to_owned(),
                _ => rfc3339(ms),
            };
        }
        if schema["pattern"] == "^[A-Za-z0-9_.-]{1,128}$" {
            return pick(rng, TABLES).to_string();
        }
        let string = match hint {
            "id" | "item_id" | "item_ids" => pick(rng, &pools.items).clone(),
            "uid" | "user_id" | "userId" => pick(rng, &pools.users).clone(),
            "sid" | "session_id" | "sessionId" => pick(rng, &pools.sessions).clone(),
            "cid" => format!("device-{}", rng.random_range(0..20)),
            "model_id" | "model_name" | "item_model_id" | "module_model_id" => pick(rng, MODELS).to_string(),
            "_table" | "table_name" | "relation_table" | "tables" => pick(rng, TABLES).to_string(),
            "field" => pick(rng, FIELDS).to_string(),
            "type" => pick(rng, EVENT_TYPES).to_string(),
            "conversation_id" => pick(rng, &pools.conversations).clone(),
            "image_bytes" if rng.random_bool(0.8) => pools.png_base64.clone(),
            "image_bytes" => base64::engine::general_purpose::STANDARD.encode(random_bytes(rng, 0..64)),
            "image_url" => "http://127.0.0.1:9/image.png".into(),
            "currency" => pick(rng, &["EUR", "USD", "GBP"]).to_string(),
            "page_type" => pick(rng, &["product", "search", "home", "checkout"]).to_string(),
            "click_type" => "tap".into(),
            "conversion_type" => "order".into(),
            "message" | "query" | "text" | "description" | "title" => phrase(rng, 1..=8),
            _ => phrase(rng, 1..=2),
        };
        let min = schema["minLength"].as_u64().unwrap_or(0) as usize;
        match string.chars().count() < min {
            true => format!("{string}{}", "x".repeat(min)),
            false => string,
        }
    }

    fn integer(&self, schema: &Value, hint: &str, rng: &mut StdRng) -> i64 {
        let min = schema["minimum"].as_i64().unwrap_or(0);
        let max = schema["maximum"].as_i64().unwrap_or(i64::MAX);
        let value = match hint {
            "limit" => rng.random_range(0..=20),
            "rank" | "fixed_position" => rng.random_range(0..=6),
            "rate_per_sec" | "burst" => rng.random_range(1..=1000),
            "dwell_ms" => rng.random_range(0..=60_000),
            _ => rng.random_range(0..=100),
        };
        value.clamp(min, max.max(min))
    }

    fn number(&self, schema: &Value, hint: &str, rng: &mut StdRng) -> Value {
        if schema.get("exclusiveMaximum").is_some() {
            // A time: unix seconds or milliseconds, the last 30 days.
            let ms = self.now_ms - rng.random_range(0..30 * 86_400_000i64);
            return match rng.random_bool(0.5) {
                true => json!(ms),
                false => json!(ms / 1000),
            };
        }
        match hint {
            "price" | "total_value" | "retrieval_score" => json!(rng.random_range(0.0..500.0f64)),
            _ => json!(rng.random_range(-10.0..100.0f64)),
        }
    }

    /// A value for a field the schema leaves open.
    fn any(&self, hint: &str, rng: &mut StdRng) -> Value {
        let pools = &self.pools;
        match hint {
            "item_id" => json!(pick(rng, &pools.items)),
            "price" | "total_value" | "rating" | "total_orders" | "year" => json!(rng.random_range(0.0..500.0f64)),
            "tags" | "groups" => json!([pick(rng, WORDS), pick(rng, WORDS)]),
            "availability" | "gdpr_consent" => json!(rng.random_bool(0.5)),
            "embeddings" => json!((0..8).map(|_| rng.random_range(-1.0..1.0f64)).collect::<Vec<_>>()),
            "created_date" => json!(rfc3339(self.now_ms - rng.random_range(0..86_400_000))),
            "operator_id" => json!(pick(rng, &pools.operators)),
            _ => match rng.random_range(0..6) {
                0 => json!(rng.random_range(0..1000)),
                1 => json!(rng.random_bool(0.5)),
                2 => json!([phrase(rng, 1..=1)]),
                3 => json!(rng.random_range(-5.0..5.0f64)),
                _ => json!(phrase(rng, 1..=3)),
            },
        }
    }
}

// ---------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------

fn random_bytes(rng: &mut StdRng, length: std::ops::Range<usize>) -> Vec<u8> {
    let mut bytes = vec![0u8; rng.random_range(length)];
    rng.fill(&mut bytes[..]);
    bytes
}

const UNICODE: &[&str] = &[
    "é",
    "ß",
    "中文",
    "日本語",
    "한국어",
    "العربية",
    "עברית",
    "🦀",
    "👩‍👩‍👧‍👦",
    "🇫🇷",
    "e\u{301}",
    "\u{200b}",
    "\u{200f}",
    "\u{feff}",
    "\u{fffd}",
    "\u{10ffff}",
    "Ω",
    "ﬁ",
    "İ",
    "ǅ",
    "\u{202e}abc",
    "𝕏",
    "\u{0}",
    "\u{7f}",
    "\u{85}",
    "\u{9f}",
    "\t",
    "\n",
    "\r\n",
];

fn unicode_string(rng: &mut StdRng, pieces: usize) -> String {
    (0..pieces).map(|_| *pick(rng, UNICODE)).collect()
}

/// 256 B to 4 KB mostly, up to 64 KB sometimes, 1 MB rarely.
fn long_string(rng: &mut StdRng) -> String {
    let length = match rng.random_range(0..100) {
        0..80 => rng.random_range(256..4096),
        80..98 => rng.random_range(4096..65_536),
        _ => rng.random_range(65_536..1_048_576),
    };
    match rng.random_range(0..3) {
        0 => "a".repeat(length),
        1 => {
            let mut text = String::with_capacity(length + 16);
            while text.len() < length {
                text.push_str(*pick(rng, WORDS));
                text.push(' ');
            }
            text
        }
        _ => {
            let mut text = String::with_capacity(length + 16);
            while text.len() < length {
                text.push_str(*pick(rng, UNICODE));
                text.push_str(*pick(rng, WORDS));
            }
            text
        }
    }
}

fn odd_number(rng: &mut StdRng) -> Value {
    match rng.random_range(0..14) {
        0 => json!(1e308),
        1 => json!(-1e308),
        2 => json!(u64::MAX),
        3 => json!(i64::MIN),
        4 => json!(f64::MIN_POSITIVE),
        5 => json!(5e-324),
        6 => json!(-0.0),
        7 => json!(-1),
        8 => json!(0.5),
        9 => json!(4_294_967_296u64),
        10 => json!(9_007_199_254_740_993u64),
        11 => json!(253_402_300_800_000u64),
        12 => json!(-253_402_300_800_000i64),
        _ => json!(0),
    }
}

fn odd_string(rng: &mut StdRng) -> Value {
    json!(pick(
        rng,
        &[
            "",
            " ",
            "NaN",
            "nan",
            "Infinity",
            "-Infinity",
            "1e999",
            "-0",
            "0x10",
            "true",
            "null",
            "undefined",
            "../../etc/passwd",
            "%FF",
            "%00",
            "<script>alert(1)</script>",
            "'; DROP TABLE items; --",
            "{}",
            "[]",
            "9999-12-31T23:59:59Z",
            "10000-01-01T00:00:00Z",
            "0000-00-00",
            "2026-13-45T25:61:61Z",
            "1970-01-01",
            "-1",
            "１２３",
            "\\u0000",
            "default",
            "test_model_item_200",
            "admin",
            "*",
            "%s%s%n",
        ]
    ))
}

fn nested(rng: &mut StdRng, depth: usize) -> Value {
    let mut value = json!(phrase(rng, 1..=1));
    for _ in 0..depth {
        value = match rng.random_bool(0.5) {
            true => json!([value]),
            false => json!({ "a": value }),
        };
    }
    value
}

/// A value unlike the one it replaces.
fn mutant(context: &Gen, rng: &mut StdRng, old: &Value) -> Value {
    let pools = &context.pools;
    match rng.random_range(0..100) {
        // Another type.
        0..14 => match old {
            Value::String(_) => json!(rng.random_range(-5..100)),
            Value::Number(_) => json!(old.to_string()),
            Value::Bool(flag) => json!(if *flag { "true" } else { "false" }),
            Value::Array(items) => items.first().cloned().unwrap_or(json!({})),
            Value::Object(_) => json!([old]),
            Value::Null => json!(false),
        },
        14..24 => Value::Null,
        24..34 => odd_number(rng),
        34..44 => odd_string(rng),
        44..50 => {
            let depth = *pick(rng, &[2usize, 10, 32, 64, 100, 126, 127, 128, 200]);
            nested(rng, depth)
        }
        50..56 => json!(long_string(rng)),
        56..64 => {
            let pieces = rng.random_range(1..12);
            json!(unicode_string(rng, pieces))
        }
        64..70 => match rng.random_bool(0.5) {
            true => json!({}),
            false => json!([]),
        },
        70..76 => {
            // An id of another kind, or a deleted-looking one.
            json!(match rng.random_range(0..5) {
                0 => pick(rng, &pools.users).clone(),
                1 => pick(rng, &pools.items).clone(),
                2 => pick(rng, &pools.events).clone(),
                3 => pick(rng, TABLES).to_string(),
                _ => pick(rng, MODELS).to_string(),
            })
        }
        76..80 => {
            let count = *pick(rng, &[50usize, 500, 2_000, 10_001, 20_000]);
            match old {
                Value::Array(items) if !items.is_empty() => {
                    // Repeating an element that an earlier mutation made big (a 1 MB
                    // string, a repeated array) 20,000 times built trees of GBs before
                    // the size check threw them away: no more than a body's worth.
                    let element_bytes = (old.to_string().len() / items.len()).max(1);
                    let count = count.min((2 * MAX_BODY_BYTES / element_bytes).max(1));
                    Value::Array((0..count).map(|index| items[index % items.len()].clone()).collect())
                }
                _ => Value::Array(
                    (0..count)
                        .map(|index| json!(format!("item-{:03}", index % 250)))
                        .collect(),
                ),
            }
        }
        80..86 => json!([1, "two", null, {"three": 3}, [4], true, 5.5]),
        86..92 => json!(rng.random_bool(0.5)),
        _ => context.any(*pick(rng, FIELDS), rng),
    }
}

/// Applies one mutation at a random place of `value`.
fn mutate(context: &Gen, rng: &mut StdRng, value: &mut Value) {
    let mut node = value;
    loop {
        let descend = match &*node {
            Value::Object(map) => !map.is_empty() && rng.random_bool(0.65),
            Value::Array(items) => !items.is_empty() && rng.random_bool(0.65),
            _ => false,
        };
        if !descend {
            break;
        }
        node = match node {
            Value::Object(map) => {
                let index = rng.random_range(0..map.len());
                map.values_mut().nth(index).expect("index in range")
            }
            Value::Array(items) => {
                let index = rng.random_range(0..items.len());
                &mut items[index]
            }
            _ => unreachable!("only containers are descended into"),
        };
    }
    match node {
        // Containers also lose or gain fields.
        Value::Object(map) if rng.random_bool(0.4) => {
            if !map.is_empty() && rng.random_bool(0.5) {
                let index = rng.random_range(0..map.len());
                let key = map.keys().nth(index).expect("index in range").clone();
                map.remove(&key);
            } else {
                let key = match rng.random_range(0..8) {
                    0 => String::new(),
                    1 => unicode_string(rng, 3),
                    2 => "x".repeat(rng.random_range(200..400)),
                    3 => pick(rng, &["_table", "is_deleted", "created_at", "updated_at", "id", "uid"]).to_string(),
                    4 => "__proto__".into(),
                    5 => "a.b[0]".into(),
                    _ => pick(rng, FIELDS).to_string(),
                };
                let value = mutant(context, rng, &Value::Null);
                map.insert(key, value);
            }
        }
        _ => {
            let replacement = mutant(context, rng, node);
            *node = replacement;
        }
    }
}

/// The body as bytes that are not (or not quite) JSON.
fn raw_mutation(rng: &mut StdRng, valid: &Value) -> Vec<u8> {
    let text = valid.to_string().into_bytes();
    // `{"key": <value>, ...rest of the object` for the objects, else the value alone.
    let spliced = |rng: &mut StdRng, value: &[u8]| -> Vec<u8> {
        match valid.as_object() {
            Some(map) => {
                let key = match map.keys().nth(rng.random_range(0..map.len().max(1))) {
                    Some(key) => key.clone(),
                    None => "x".into(),
                };
                let mut out = format!("{{{}:", Value::String(key)).into_bytes();
                out.extend_from_slice(value);
                match map.is_empty() {
                    true => out.push(b'}'),
                    false => {
                        out.push(b',');
                        out.extend_from_slice(&text[1..]);
                    }
                }
                out
            }
            None => value.to_vec(),
        }
    };
    match rng.random_range(0..11) {
        0 => {
            let cut = rng.random_range(0..text.len().max(1));
            text[..cut].to_vec()
        }
        1 => random_bytes(rng, 0..512),
        2 => {
            let mut out = text.clone();
            for _ in 0..rng.random_range(1..=5) {
                if out.is_empty() {
                    break;
                }
                let at = rng.random_range(0..out.len());
                out[at] = rng.random();
            }
            out
        }
        // A duplicate key (the existing key again, another value first).
        3 => {
            let value = match rng.random_range(0..4) {
                0 => "null".to_string(),
                1 => "12".to_string(),
                2 => "\"dup\"".to_string(),
                _ => "[{}]".to_string(),
            };
            spliced(rng, value.as_bytes())
        }
        // Nesting past any recursion limit, as text.
        4 => {
            let depth = *pick(rng, &[127usize, 128, 129, 1_000, 10_000, 100_000]);
            let mut deep = "[".repeat(depth).into_bytes();
            deep.extend_from_slice("]".repeat(depth).as_bytes());
            spliced(rng, &deep)
        }
        5 => {
            let token = *pick(
                rng,
                &[
                    "NaN",
                    "Infinity",
                    "-Infinity",
                    "1e999",
                    "-1e999",
                    "123456789012345678901234567890123456789",
                    "-123456789012345678901234567890123456789",
                    "0x1F",
                    "01",
                    ".5",
                    "+1",
                    "1.",
                    "1e",
                    "tru",
                    "nul",
                    "'single'",
                    "\"\\ud800\"",
                    "\"\\udc00\\ud800\"",
                    "\"\\u0000\"",
                    "\"\\x41\"",
                    "\"\t\"",
                    "1.7976931348623157e309",
                    "4.9e-325",
                    "-0",
                    "[,]",
                    "{,}",
                    "[1,]",
                    "{\"a\":1,}",
                    "\"\\uZZZZ\"",
                ],
            );
            spliced(rng, token.as_bytes())
        }
        6 => {
            let mut out = text.clone();
            out.extend_from_slice(*pick(rng, &[&b", }"[..], b"\0", b" trailing", b"\n{}", b"]", b"}"]));
            if rng.random_bool(0.3) {
                out.extend_from_slice(&text);
            }
            out
        }
        7 => {
            let mut out = pick(rng, &[&b"\xef\xbb\xbf"[..], b"\xff\xfe", b"  \n\t", b"\x00"]).to_vec();
            out.extend_from_slice(&text);
            out
        }
        8 => pick(
            rng,
            &[
                &b""[..],
                b" ",
                b"null",
                b"[]",
                b"{}",
                b"0",
                b"\"text\"",
                b"true",
                b"[null]",
                b"[{}]",
                b"{\"\":\"\"}",
            ],
        )
        .to_vec(),
        9 => {
            let mut out = text.clone();
            let at = rng.random_range(0..=out.len());
            let bad: &[u8] = *pick(
                rng,
                &[&b"\xff"[..], b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"],
            );
            out.splice(at..at, bad.iter().copied());
            out
        }
        // UTF-16 of the body.
        _ => String::from_utf8_lossy(&text)
            .encode_utf16()
            .flat_map(|unit| unit.to_le_bytes())
            .collect(),
    }
}

// ---------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------

/// Which credential a request carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Credential {
    /// `Authorization: Bearer <admin key>`.
    Admin,
    /// `X-API-Key: <admin key>` (the legacy header).
    AdminLegacy,
    /// The seeded key with the `search` scope only.
    Limited,
    /// A well-formed key that does not exist.
    Wrong,
    /// No key.
    Missing,
    /// An Authorization header that is not a bearer key.
    Malformed,
}

impl Credential {
    const ALL: [Credential; 6] = [
        Credential::Admin,
        Credential::AdminLegacy,
        Credential::Limited,
        Credential::Wrong,
        Credential::Missing,
        Credential::Malformed,
    ];

    fn label(self) -> &'static str {
        match self {
            Credential::Admin => "admin key (Bearer)",
            Credential::AdminLegacy => "admin key (X-API-Key)",
            Credential::Limited => "key without the scope (search only)",
            Credential::Wrong => "unknown key",
            Credential::Missing => "no key",
            Credential::Malformed => "malformed Authorization",
        }
    }

    fn random(rng: &mut StdRng) -> Credential {
        match rng.random_range(0..1000) {
            0..930 => Credential::Admin,
            930..950 => Credential::AdminLegacy,
            950..965 => Credential::Limited,
            965..980 => Credential::Wrong,
            980..990 => Credential::Missing,
            _ => Credential::Malformed,
        }
    }

    /// A credential the server refuses (for the rationed retrain).
    fn refused(rng: &mut StdRng) -> Credential {
        // Not `Malformed`: some of its forms (`bearer  <key>`) are accepted.
        *pick(rng, &[Credential::Limited, Credential::Wrong, Credential::Missing])
    }
}

/// How a body was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Shape {
    Valid,
    Mutated,
    Bytes,
    /// An operation without a request body: none, or stray bytes.
    NoSchema,
}

impl Shape {
    const ALL: [Shape; 4] = [Shape::Valid, Shape::Mutated, Shape::Bytes, Shape::NoSchema];

    fn label(self) -> &'static str {
        match self {
            Shape::Valid => "schema-valid",
            Shape::Mutated => "mutated JSON",
            Shape::Bytes => "bytes (not or not quite JSON)",
            Shape::NoSchema => "operation without a body schema",
        }
    }
}

/// One request to send.
struct FuzzRequest {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    credential: Credential,
    /// The header that carries the credential, if any.
    authorization: Option<(HeaderName, HeaderValue)>,
    shape: Shape,
    body: Bytes,
}

fn random_segment(rng: &mut StdRng) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    match rng.random_range(0..12) {
        0 => "%FF".into(),
        1 => "%C3%28".into(),
        2 => "%00".into(),
        3 => "%2F".into(),
        4 => pick(rng, &["..", ".", "%2E%2E", "~", "-", "_"]).to_string(),
        5 => "a".repeat(*pick(rng, &[300usize, 5_000, 30_000])),
        6 => "%25".into(),
        7 => "!$&'()*+,;=:@".into(),
        8 => {
            let pieces = rng.random_range(1..6);
            utf8_percent_encode(&unicode_string(rng, pieces), NON_ALPHANUMERIC).to_string()
        }
        9 => format!("{:x}", rng.random::<u128>()),
        10 => utf8_percent_encode(&phrase(rng, 1..=3), NON_ALPHANUMERIC).to_string(),
        _ => utf8_percent_encode(odd_string(rng).as_str().unwrap_or(""), NON_ALPHANUMERIC).to_string(),
    }
}

/// The header a credential goes in.
fn authorization(context: &Gen, rng: &mut StdRng, credential: Credential) -> Option<(HeaderName, HeaderValue)> {
    let bearer = |key: &str| HeaderValue::from_str(&format!("Bearer {key}")).expect("keys are ascii");
    Some(match credential {
        Credential::Admin => (AUTHORIZATION, bearer(&context.admin_key)),
        Credential::AdminLegacy => (
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_str(&context.admin_key).expect("keys are ascii"),
        ),
        Credential::Limited => (AUTHORIZATION, bearer(&context.limited_key)),
        Credential::Wrong => match rng.random_bool(0.8) {
            true => (
                AUTHORIZATION,
                bearer(&format!("{:032x}{:016x}", rng.random::<u128>(), rng.random::<u64>())),
            ),
            false => (
                HeaderName::from_static("x-api-key"),
                HeaderValue::from_str(&format!("{:x}", rng.random::<u64>())).expect("hex"),
            ),
        },
        Credential::Missing => return None,
        Credential::Malformed => {
            let value = match rng.random_range(0..7) {
                0 => HeaderValue::from_static("Bearer"),
                1 => HeaderValue::from_static("Bearer "),
                2 => HeaderValue::from_static("Basic dXNlcjpwYXNzd29yZA=="),
                3 => HeaderValue::from_bytes(b"Bearer \xff\xfe\xfd").expect("obs-text is a valid header value"),
                4 => HeaderValue::from_str(&format!("Bearer {} extra", context.admin_key)).expect("ascii"),
                5 => HeaderValue::from_str(&format!("bearer  {}", context.admin_key)).expect("ascii"),
                _ => bearer(&"k".repeat(4096)),
            };
            (AUTHORIZATION, value)
        }
    })
}

fn path_parameter(context: &Gen, rng: &mut StdRng, template: &str, name: &str) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    if rng.random_bool(0.35) {
        return random_segment(rng);
    }
    let pools = &context.pools;
    let value = match name {
        "id" if template.starts_with("/v1/admin/keys") => match pools.key_ids.is_empty() || rng.random_bool(0.5) {
            true => format!("{:x}", rng.random::<u64>()),
            false => pick(rng, &pools.key_ids).clone(),
        },
        "id" if template.starts_with("/v1/events") => pick(rng, &pools.events).clone(),
        "id" => pick(rng, &pools.items).clone(),
        "table" | "name" => pick(rng, TABLES).to_string(),
        "field" => pick(rng, FIELDS).to_string(),
        "uid" => pick(rng, &pools.users).clone(),
        "sid" => pick(rng, &pools.sessions).clone(),
        _ => phrase(rng, 1..=1),
    };
    utf8_percent_encode(&value, NON_ALPHANUMERIC).to_string()
}

/// Whether `POST /v1/admin/compact` would act on this body (empty, or `{}` / `{"all": bool}`).
fn compact_would_run(body: &[u8]) -> bool {
    if body.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => map.iter().all(|(key, value)| key == "all" && value.is_boolean()),
        _ => false,
    }
}

/// Largest body sent: the server's limit is 16 MiB, and a body past it is refused
/// (413) before it is read, which shows as a broken pipe to a client still writing.
const MAX_BODY_BYTES: usize = 8 << 20;
/// The most of a refused body the server reads before it closes the connection.
const SERVER_DRAIN_BYTES: u64 = 1 << 20;
/// A connection idle this long is replaced before its next request.
const IDLE_RECONNECT: Duration = Duration::from_secs(5);

/// A body for `operation`, and how it was made.
fn body_for(context: &Gen, rng: &mut StdRng, operation: &Operation, scheduled: bool) -> (Shape, Vec<u8>) {
    match &operation.body {
        None => match rng.random_bool(0.15) && !scheduled {
            true => {
                let junk = context.any("", rng);
                (Shape::NoSchema, raw_mutation(rng, &junk))
            }
            false => (Shape::NoSchema, Vec::new()),
        },
        Some(schema) => {
            let mut value = context.generate(schema, "", rng, 0);
            let roll = rng.random_range(0..100);
            if scheduled || roll < 35 {
                (Shape::Valid, value.to_string().into_bytes())
            } else if roll < 80 {
                for _ in 0..rng.random_range(1..=3) {
                    mutate(context, rng, &mut value);
                }
                (Shape::Mutated, value.to_string().into_bytes())
            } else {
                (Shape::Bytes, raw_mutation(rng, &value))
            }
        }
    }
}

fn build_request(context: &Gen, rng: &mut StdRng, operation: &Operation, scheduled: bool) -> FuzzRequest {
    let mut path = String::with_capacity(operation.template.len() + 32);
    for segment in operation.template.split('/').skip(1) {
        path.push('/');
        match segment.strip_prefix('{').and_then(|segment| segment.strip_suffix('}')) {
            Some(name) => path.push_str(&path_parameter(context, rng, &operation.template, name)),
            None => path.push_str(segment),
        }
    }
    if rng.random_bool(0.02) {
        path.push('/');
    }
    if !operation.query.is_empty() && rng.random_bool(0.4) {
        let value = *pick(rng, &["true", "false", "1", "", "yes", "%FF"]);
        path.push_str(&format!("?{}={value}", operation.query[0]));
    } else if rng.random_bool(0.03) {
        path.push_str(*pick(rng, &["?", "?a=1&&b", "?purge", "?%FF=%00", "?x=1&x=2&limit=5"]));
    }
    let mut credential = Credential::random(rng);
    if operation.ration == Ration::RefusedCredentials && !scheduled {
        credential = Credential::refused(rng);
    }
    if scheduled {
        credential = Credential::Admin;
    }
    let (shape, mut body) = loop {
        let (shape, body) = body_for(context, rng, operation, scheduled);
        if body.len() <= MAX_BODY_BYTES {
            break (shape, body);
        }
    };
    if operation.ration == Ration::InvalidBodies && !scheduled {
        while compact_would_run(&body) {
            let junk = mutant(context, rng, &Value::Null);
            body = json!({ "all": junk }).to_string().into_bytes();
        }
    }
    // The model that answers 503 by definition (SPEC) is never named.
    if body.windows(MOCK_503.len()).any(|window| window == MOCK_503.as_bytes()) {
        body = String::from_utf8_lossy(&body)
            .replace(MOCK_503, "test_model_item_200")
            .into_bytes();
    }
    let content_type = match &operation.body {
        None if body.is_empty() => None,
        _ if operation.template == "/v1/catalog/items" && rng.random_bool(0.2) => {
            // One item per line, from the valid shape's rows where there are rows.
            if let Ok(value) = serde_json::from_slice::<Value>(&body) {
                let rows = match &value {
                    Value::Array(rows) => rows.clone(),
                    Value::Object(map) => map.get("items").and_then(Value::as_array).cloned().unwrap_or_default(),
                    _ => Vec::new(),
                };
                if !rows.is_empty() {
                    let mut lines = Vec::new();
                    for row in rows {
                        lines.extend_from_slice(row.to_string().as_bytes());
                        lines.extend_from_slice(*pick(rng, &[&b"\n"[..], b"\r\n", b"\n\n"]));
                    }
                    body = lines;
                }
            }
            Some("application/x-ndjson")
        }
        _ => match rng.random_range(0..100) {
            0 => None,
            1 => Some("text/plain"),
            2 => Some("application/x-www-form-urlencoded"),
            3 => Some("application/json; charset=utf-16"),
            4 => Some("multipart/form-data; boundary=x"),
            _ => Some("application/json"),
        },
    };
    FuzzRequest {
        method: operation.method.clone(),
        path,
        content_type,
        credential,
        authorization: authorization(context, rng, credential),
        shape,
        body: body.into(),
    }
}

/// What came back.
enum Outcome {
    Answer {
        status: StatusCode,
        body: Bytes,
        close: bool,
    },
    /// The client could not make an HTTP request of it (never sent).
    Unsendable(String),
    /// The connection failed before the request went out (closed by the server
    /// between requests).
    ClosedBetween(String),
    /// The connection failed during the request or its answer (a reset).
    Reset(String),
}

async fn send(target: &Target, sender: &mut Connection, request: &FuzzRequest) -> Outcome {
    let mut builder = Request::builder()
        .method(request.method.clone())
        .uri(&request.path)
        .header(HOST, &target.authority);
    if let Some((name, value)) = &request.authorization {
        builder = builder.header(name, value);
    }
    if let Some(content_type) = request.content_type {
        builder = builder.header(CONTENT_TYPE, content_type);
    }
    let http_request = match builder.body(Full::new(request.body.clone())) {
        Ok(http_request) => http_request,
        Err(error) => return Outcome::Unsendable(error.to_string()),
    };
    if let Err(error) = sender.ready().await {
        return Outcome::ClosedBetween(error.to_string());
    }
    let response = match sender.send_request(http_request).await {
        Ok(response) => response,
        Err(error) => return Outcome::Reset(format!("{error} ({:?})", std::error::Error::source(&error))),
    };
    let status = response.status();
    let close = response
        .headers()
        .get(CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"));
    match response.into_body().collect().await {
        Ok(collected) => Outcome::Answer {
            status,
            body: collected.to_bytes(),
            close,
        },
        Err(error) => Outcome::Reset(format!("reading the answer: {error}")),
    }
}

// ---------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------

/// What one operation got back.
#[derive(Default, Clone)]
struct OperationTally {
    sent: u64,
    statuses: BTreeMap<u16, u64>,
    closed_between: u64,
    resets: u64,
    /// Bodies over the server's drain limit refused from their head: the connection
    /// closed while the client was still writing the body.
    refused_unread: u64,
    hangs: u64,
    /// Requests the client could not make (never sent, not counted in `sent`).
    unsendable: u64,
    /// Sum and maximum of the answer times, ms.
    total_ms: f64,
    max_ms: f64,
}

impl OperationTally {
    fn merge(&mut self, other: &OperationTally) {
        self.sent += other.sent;
        for (status, count) in &other.statuses {
            *self.statuses.entry(*status).or_default() += count;
        }
        self.closed_between += other.closed_between;
        self.resets += other.resets;
        self.refused_unread += other.refused_unread;
        self.hangs += other.hangs;
        self.unsendable += other.unsendable;
        self.total_ms += other.total_ms;
        self.max_ms = self.max_ms.max(other.max_ms);
    }

    fn count(&self, range: std::ops::Range<u16>) -> u64 {
        self.statuses.range(range).map(|(_, count)| count).sum()
    }
}

/// What one connection's loop counted.
struct WorkerTally {
    operations: Vec<OperationTally>,
    by_credential: BTreeMap<(Credential, u16), u64>,
    by_shape: BTreeMap<(Shape, u16), u64>,
    bytes_sent: u64,
}

/// A 5xx or a failed connection, kept to show.
struct Example {
    operation: String,
    what: String,
    credential: Credential,
    sent: String,
    received: String,
}

struct Shared {
    context: Gen,
    target: Target,
    operations: Vec<Operation>,
    /// Cumulative weights, for picking an operation.
    cumulative: Vec<f64>,
    /// Body number -> the rationed operation it is a real call of.
    schedule: HashMap<u64, usize>,
    bodies: u64,
    next: AtomicU64,
    done: AtomicU64,
    server_errors: AtomicU64,
    failures: AtomicU64,
    examples: parking_lot::Mutex<Vec<Example>>,
    max_examples: usize,
    hang_after: Duration,
    /// Bodies being generated at once: one per CPU. A huge draw builds a tree of
    /// hundreds of MB before it is rejected; unbounded, 64 of them filled 21 GB.
    generating: tokio::sync::Semaphore,
}

impl Shared {
    fn pick_operation(&self, rng: &mut StdRng) -> usize {
        let total = *self.cumulative.last().expect("operations");
        let roll = rng.random_range(0.0..total);
        self.cumulative
            .partition_point(|&weight| weight <= roll)
            .min(self.operations.len() - 1)
    }

    fn keep_example(&self, operation: &Operation, request: &FuzzRequest, what: String, received: &[u8]) {
        let mut examples = self.examples.lock();
        if examples.len() < self.max_examples {
            let body: String = String::from_utf8_lossy(&request.body).chars().take(300).collect();
            examples.push(Example {
                operation: operation.name.clone(),
                what,
                credential: request.credential,
                sent: format!(
                    "{} {} ({} bytes) {body}",
                    request.method,
                    request.path.chars().take(200).collect::<String>(),
                    request.body.len()
                ),
                received: snippet(received),
            });
        }
    }
}

async fn connect(target: &Target) -> Result<Connection> {
    let mut last = None;
    for _ in 0..20 {
        match target.connect().await {
            Ok(connection) => return Ok(connection),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(last.expect("at least one attempt")).context("the server no longer accepts connections")
}

async fn worker(shared: Arc<Shared>, seed: u64) -> Result<WorkerTally> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = WorkerTally {
        operations: vec![OperationTally::default(); shared.operations.len()],
        by_credential: BTreeMap::new(),
        by_shape: BTreeMap::new(),
        bytes_sent: 0,
    };
    let mut connection: Option<Connection> = None;
    let mut last_on_connection = String::from("none (a fresh connection)");
    let mut idle_since: Option<Instant> = None;
    loop {
        let number = shared.next.fetch_add(1, Ordering::Relaxed);
        if number >= shared.bodies {
            break;
        }
        let (index, scheduled) = match shared.schedule.get(&number) {
            Some(&index) => (index, true),
            None => loop {
                let index = shared.pick_operation(&mut rng);
                if shared.operations[index].weight > 0.0 {
                    break (index, false);
                }
            },
        };
        let operation = &shared.operations[index];
        // Generating a body can take seconds of CPU (a rejected huge draw is drawn
        // again): off the async workers, so that no other connection waits for it,
        // and only as many at once as there are CPUs.
        let request = {
            let _permit = shared.generating.acquire().await?;
            tokio::task::block_in_place(|| build_request(&shared.context, &mut rng, operation, scheduled))
        };
        // A pooled client retires a connection idle for longer than the server keeps
        // idle connections (the server's header-read timeout, 10 s), as hyper-util's
        // pool and browsers do; this one does so well before.
        if idle_since.is_some_and(|since| since.elapsed() > IDLE_RECONNECT) {
            connection = None;
        }
        if connection.is_none() {
            connection = Some(connect(&shared.target).await?);
            last_on_connection = String::from("none (a fresh connection)");
        }
        let sender = connection.as_mut().expect("connected above");
        let started = Instant::now();
        let outcome = tokio::time::timeout(shared.hang_after, send(&shared.target, sender, &request)).await;
        // What the connection carried last, to tell why it may have closed.
        let previous = std::mem::replace(
            &mut last_on_connection,
            format!(
                "{} ({} bytes, {:?}) -> {}",
                operation.name,
                request.body.len(),
                request.credential,
                match &outcome {
                    Ok(Outcome::Answer { status, close, .. }) =>
                        format!("{status}{}", if *close { ", Connection: close" } else { "" }),
                    Ok(_) => "no answer".to_string(),
                    Err(_) => "hung".to_string(),
                }
            ),
        );
        idle_since = Some(Instant::now());
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let entry = &mut tally.operations[index];
        entry.sent += 1;
        tally.bytes_sent += request.body.len() as u64;
        match outcome {
            Ok(Outcome::Answer { status, body, close }) => {
                let code = status.as_u16();
                *entry.statuses.entry(code).or_default() += 1;
                entry.total_ms += elapsed_ms;
                entry.max_ms = entry.max_ms.max(elapsed_ms);
                *tally.by_credential.entry((request.credential, code)).or_default() += 1;
                *tally.by_shape.entry((request.shape, code)).or_default() += 1;
                if status.is_server_error() {
                    shared.server_errors.fetch_add(1, Ordering::Relaxed);
                    shared.keep_example(operation, &request, status.to_string(), &body);
                }
                if close {
                    connection = None;
                }
            }
            Ok(Outcome::Unsendable(error)) => {
                entry.sent -= 1;
                entry.unsendable += 1;
                shared.keep_example(operation, &request, format!("not sendable: {error}"), b"");
                // Does not count as a body: another one is drawn.
                shared.next.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            Ok(Outcome::ClosedBetween(error)) => {
                entry.closed_between += 1;
                shared.failures.fetch_add(1, Ordering::Relaxed);
                let what = format!(
                    "connection closed between requests: {error}; the connection's previous request: {previous}"
                );
                shared.keep_example(operation, &request, what, b"");
                connection = None;
            }
            Ok(Outcome::Reset(error))
                if request.body.len() as u64 > SERVER_DRAIN_BYTES && error.contains("writing a body") =>
            {
                // Refused from its head (no or a wrong key, an unknown route, over the
                // limit): the server answers at once with `Connection: close` and does
                // not read more than 1 MiB of the body; the client, still writing it,
                // sees the connection close under it. By design, not a failure.
                entry.refused_unread += 1;
                connection = None;
            }
            Ok(Outcome::Reset(error)) => {
                entry.resets += 1;
                shared.failures.fetch_add(1, Ordering::Relaxed);
                let what =
                    format!("connection failed mid-request: {error}; the connection's previous request: {previous}");
                shared.keep_example(operation, &request, what, b"");
                connection = None;
            }
            Err(_) => {
                entry.hangs += 1;
                shared.failures.fetch_add(1, Ordering::Relaxed);
                let what = format!("no answer within {} s", shared.hang_after.as_secs());
                shared.keep_example(operation, &request, what, b"");
                connection = None;
            }
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(tally)
}

/// Everything the run found.
struct Report {
    seconds: f64,
    operations: Vec<(String, OperationTally)>,
    by_credential: BTreeMap<(Credential, u16), u64>,
    by_shape: BTreeMap<(Shape, u16), u64>,
    bytes_sent: u64,
    examples: Vec<Example>,
    /// Lines of the server's log with a panic message, and with ERROR.
    log_panics: usize,
    log_errors: usize,
    /// `GET /healthz` after the run.
    alive_after: bool,
    /// CPU seconds during the fuzzing: the server's, this tool's.
    server_cpu_s: f64,
    tool_cpu_s: f64,
    scheduled: Vec<(u64, String)>,
}

impl Report {
    fn total(&self) -> OperationTally {
        let mut total = OperationTally::default();
        for (_, tally) in &self.operations {
            total.merge(tally);
        }
        total
    }
}

async fn fuzz(args: &Args, server: &SpawnedServer) -> Result<Report> {
    let target = server.target()?;
    let mut sender = target.connect().await?;
    let (status, document) = target.get(&mut sender, "/openapi.json").await?;
    ensure!(status == StatusCode::OK, "GET /openapi.json: {status}");
    let document: Value = serde_json::from_slice(&document).context("the OpenAPI document is not JSON")?;
    let operations = operations(&document)?;
    eprintln!("{} operations in the OpenAPI document", operations.len());
    let mut pools = Pools::new();
    let limited_key = seed_world(&target, &mut pools, args.seed).await?;
    eprintln!(
        "seeded: {} items, {} users, {} events, {} keys",
        pools.items.len() + pools.operators.len(),
        pools.users.len(),
        pools.events.len(),
        pools.key_ids.len() + 1
    );
    let schemas = document["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let context = Gen {
        schemas,
        pools,
        admin_key: server.admin_key.clone(),
        limited_key,
        now_ms: now_ms(),
    };
    // The real calls of the rationed operations, spread over the run.
    let mut schedule = HashMap::new();
    let mut scheduled = Vec::new();
    let rationed: Vec<usize> = (0..operations.len())
        .filter(|&index| operations[index].ration != Ration::None && operations[index].template.starts_with("/v1/"))
        .collect();
    for (position, &index) in rationed.iter().enumerate() {
        for call in 0..RATIONED_CALLS {
            let fraction = (call as f64 + 0.5 + position as f64 * 0.25) / RATIONED_CALLS as f64;
            let number = ((args.bodies as f64 * fraction) as u64).min(args.bodies.saturating_sub(1));
            schedule.insert(number, index);
            scheduled.push((number, operations[index].name.clone()));
        }
    }
    let mut cumulative = Vec::with_capacity(operations.len());
    let mut sum = 0.0;
    for operation in &operations {
        sum += operation.weight;
        cumulative.push(sum);
    }
    let shared = Arc::new(Shared {
        context,
        target: server.target()?,
        operations,
        cumulative,
        schedule,
        bodies: args.bodies,
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        server_errors: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        examples: parking_lot::Mutex::new(Vec::new()),
        max_examples: args.examples,
        hang_after: Duration::from_secs(args.hang_after_s),
        generating: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |cpus| cpus.get())),
    });
    eprintln!(
        "fuzzing: {} bodies over {} connections, seed {}",
        thousands(args.bodies as f64),
        args.connections,
        args.seed
    );
    let cpu = || {
        let server = server.pid().and_then(process_cpu_seconds).unwrap_or(0.0);
        let tool = own_cpu_seconds("").map_or(0.0, |(all, _)| all);
        (server, tool)
    };
    let cpu_before = cpu();
    let started = Instant::now();
    let progress = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut last = (0u64, Instant::now());
            loop {
                tokio::time::sleep(Duration::from_secs(15)).await;
                let done = shared.done.load(Ordering::Relaxed);
                let rate = (done - last.0) as f64 / last.1.elapsed().as_secs_f64();
                last = (done, Instant::now());
                eprintln!(
                    "  {:>9} bodies ({:.1}%), {} /s now, {} 5xx, {} connection failures or hangs, {:.0} s",
                    thousands(done as f64),
                    done as f64 * 100.0 / shared.bodies as f64,
                    thousands(rate),
                    shared.server_errors.load(Ordering::Relaxed),
                    shared.failures.load(Ordering::Relaxed),
                    started.elapsed().as_secs_f64()
                );
            }
        })
    };
    let mut tasks = tokio::task::JoinSet::new();
    for connection in 0..args.connections {
        tasks.spawn(worker(shared.clone(), args.seed.wrapping_add(1 + connection as u64)));
    }
    let mut tallies = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        tallies.push(joined.context("a connection's loop panicked")??);
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.abort();
    let cpu_after = cpu();

    let (status, _) = target.get(&mut target.connect().await?, "/healthz").await?;
    let alive_after = status == StatusCode::OK;
    let log = std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
    let log_panics = log.lines().filter(|line| line.contains("panicked")).count();
    let log_errors = log.lines().filter(|line| line.contains("ERROR")).count();

    let mut merged = vec![OperationTally::default(); shared.operations.len()];
    let (mut by_credential, mut by_shape, mut bytes_sent) = (BTreeMap::new(), BTreeMap::new(), 0);
    for tally in tallies {
        for (total, part) in merged.iter_mut().zip(&tally.operations) {
            total.merge(part);
        }
        for (key, count) in tally.by_credential {
            *by_credential.entry(key).or_default() += count;
        }
        for (key, count) in tally.by_shape {
            *by_shape.entry(key).or_default() += count;
        }
        bytes_sent += tally.bytes_sent;
    }
    let examples = std::mem::take(&mut *shared.examples.lock());
    scheduled.sort();
    Ok(Report {
        seconds,
        operations: shared
            .operations
            .iter()
            .map(|operation| operation.name.clone())
            .zip(merged)
            .collect(),
        by_credential,
        by_shape,
        bytes_sent,
        examples,
        log_panics,
        log_errors,
        alive_after,
        server_cpu_s: cpu_after.0 - cpu_before.0,
        tool_cpu_s: cpu_after.1 - cpu_before.1,
        scheduled,
    })
}

fn statuses_cell(statuses: &BTreeMap<u16, u64>) -> String {
    statuses
        .iter()
        .map(|(status, count)| format!("{status}: {}", thousands(*count as f64)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn goals(report: &Report) -> Vec<Goal> {
    let total = report.total();
    let server_errors = total.count(500..600);
    vec![
        Goal::new(
            "bodies sent",
            thousands(total.sent as f64),
            ">= 1,000,000",
            total.sent >= 1_000_000,
        ),
        Goal::new(
            "responses >= 500",
            thousands(server_errors as f64),
            "0",
            server_errors == 0,
        ),
        Goal::new(
            "connections reset mid-request",
            thousands(total.resets as f64),
            "0",
            total.resets == 0,
        ),
        Goal::new(
            "requests without an answer (hung)",
            thousands(total.hangs as f64),
            "0",
            total.hangs == 0,
        ),
        Goal::new(
            "server alive after the run (GET /healthz 200)",
            report.alive_after.to_string(),
            "true",
            report.alive_after,
        ),
    ]
}

fn markdown_section(args: &Args, report: &Report) -> String {
    let total = report.total();
    let answered: u64 = total.statuses.values().sum();
    let mut out = section_head(MARKDOWN_HEADING, "bench-fuzz");
    out.push_str(&format!(
        "- Seed: {seed} (`--seed`); bodies: {bodies} (`--bodies`); {connections} concurrent HTTP/1.1 \
         keep-alive connections (`--connections`), one request in flight on each; a request without \
         an answer after {hang} s counts as hung\n\
         - Server: the release `rankstream serve` spawned on a fresh temp dir (durability sync, every \
         other setting at its default) with `RANKSTREAM__AUTH__FAILURES_PER_MINUTE=1000000` (requests \
         with wrong keys are sent on purpose; the default 20 per minute and address would turn the rest \
         of the run into 429s) and the keys' rate quota lifted (`RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC`, \
         `..._BURST` = 1000000); seeded through the API first (4 tables, one relation, 220 items, 50 users, \
         600 events, a key with the `search` scope only)\n\
         - Bodies: generated from the server's own `GET /openapi.json` for each of its {operations} \
         operations (every path and alias, every method): schema-valid, mutated JSON (wrong types, nulls, \
         odd numbers, NaN-like strings, nesting to 200, strings to 1 MB, unicode and control characters, \
         empty containers, extra and missing fields, arrays to 20,000), or bytes (random, truncated, \
         flipped, duplicate keys, NaN/1e999/40-digit tokens, lone surrogates, nesting to 100,000, BOM, \
         UTF-16, invalid UTF-8); path parameters seeded ids or random (`%FF`, `%00`, `..`, unicode, 70 KB); \
         some requests with another content type, a stray query, or another credential (below)\n\
         - Limited, and why: `POST /v1/admin/models/retrain` (rebuilds every model from the whole event \
         log) and `POST /v1/admin/compact` (compacts every shard) each got {rationed} real calls spread \
         over the run; their other requests carried a refused credential (retrain) or a body that fails \
         validation (compact). The SPEC's mock model `{mock}` answers 503 by definition and is never named. \
         Nothing else is left out: the bootstrap key's own `DELETE` is sent (409), and no route shuts the \
         node down\n\
         - Run time: {seconds:.1} s for {sent} bodies ({rate} bodies/s, {megabytes:.0} MB of bodies) on 2 \
         cores shared by the server ({server_cpu:.0} CPU s), this tool ({tool_cpu:.0} CPU s){others}\n\
         - Server log after the run: {panics} lines with a panic message, {errors} ERROR lines\n\n",
        seed = args.seed,
        bodies = thousands(args.bodies as f64),
        connections = args.connections,
        hang = args.hang_after_s,
        operations = report.operations.len(),
        rationed = RATIONED_CALLS,
        mock = MOCK_503,
        seconds = report.seconds,
        sent = thousands(total.sent as f64),
        rate = thousands(total.sent as f64 / report.seconds),
        megabytes = report.bytes_sent as f64 / 1e6,
        server_cpu = report.server_cpu_s,
        tool_cpu = report.tool_cpu_s,
        others = " and other work on the machine (the rest)",
        panics = report.log_panics,
        errors = report.log_errors,
    ));
    out.push_str(&goals_table(&goals(report)));
    out.push_str("\n### Statuses, all endpoints\n\n| status | responses | share |\n|---:|---:|---:|\n");
    for (status, count) in &total.statuses {
        out.push_str(&format!(
            "| {status} | {} | {:.2}% |\n",
            thousands(*count as f64),
            *count as f64 * 100.0 / answered.max(1) as f64
        ));
    }
    out.push_str(&format!(
        "\nConnections closed by the server between requests (the client reconnects): {}; reset \
         mid-request: {}; hung: {}. Bodies over 1 MiB refused from their head, the connection \
         closed while the client still wrote them (by design: the server reads at most 1 MiB of \
         a refused body): {}.\n",
        thousands(total.closed_between as f64),
        thousands(total.resets as f64),
        thousands(total.hangs as f64),
        thousands(total.refused_unread as f64)
    ));
    out.push_str("\n### Bodies per endpoint\n\n| operation | bodies | 2xx | 4xx | 5xx | mean ms | max ms | statuses |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (name, tally) in &report.operations {
        let answered: u64 = tally.statuses.values().sum();
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} | {} | {:.1} | {:.0} | {} |\n",
            thousands(tally.sent as f64),
            thousands(tally.count(200..300) as f64),
            thousands(tally.count(400..500) as f64),
            thousands(tally.count(500..600) as f64),
            tally.total_ms / answered.max(1) as f64,
            tally.max_ms,
            statuses_cell(&tally.statuses),
        ));
    }
    out.push_str("\n### By body kind and by credential\n\n| body kind | bodies | statuses |\n|---|---:|---|\n");
    for shape in Shape::ALL {
        let statuses: BTreeMap<u16, u64> = report
            .by_shape
            .iter()
            .filter(|((kind, _), _)| *kind == shape)
            .map(|((_, status), count)| (*status, *count))
            .collect();
        let count: u64 = statuses.values().sum();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            shape.label(),
            thousands(count as f64),
            statuses_cell(&statuses)
        ));
    }
    out.push_str("\n| credential | requests | statuses |\n|---|---:|---|\n");
    for credential in Credential::ALL {
        let statuses: BTreeMap<u16, u64> = report
            .by_credential
            .iter()
            .filter(|((kind, _), _)| *kind == credential)
            .map(|((_, status), count)| (*status, *count))
            .collect();
        let count: u64 = statuses.values().sum();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            credential.label(),
            thousands(count as f64),
            statuses_cell(&statuses)
        ));
    }
    out.push_str(&format!(
        "\nReal calls of the rationed operations (body number: operation): {}.\n",
        report
            .scheduled
            .iter()
            .map(|(number, name)| format!("{}: `{name}`", thousands(*number as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if !report.examples.is_empty() {
        out.push_str("\n### First 5xx answers and connection failures\n\n");
        for example in &report.examples {
            out.push_str(&format!(
                "- `{}` ({}), {}: sent `{}`; received `{}`\n",
                example.operation,
                example.credential.label(),
                example.what,
                example.sent.replace('`', "'").replace('\n', "\\n"),
                example.received.replace('`', "'").replace('\n', "\\n"),
            ));
        }
    }
    out
}

fn print_report(report: &Report) {
    let total = report.total();
    println!(
        "\n{} bodies in {:.1} s ({} /s)",
        thousands(total.sent as f64),
        report.seconds,
        thousands(total.sent as f64 / report.seconds)
    );
    println!("statuses: {}", statuses_cell(&total.statuses));
    println!(
        "connections closed between requests: {}, reset mid-request: {}, hung: {}, refused over 1 MiB unread: {}",
        total.closed_between, total.resets, total.hangs, total.refused_unread
    );
    println!(
        "server log: {} panic lines, {} ERROR lines",
        report.log_panics, report.log_errors
    );
    println!(
        "CPU: server {:.0} s, tool {:.0} s over {:.0} s of wall time",
        report.server_cpu_s, report.tool_cpu_s, report.seconds
    );
    println!("\nper operation:");
    for (name, tally) in &report.operations {
        let answered: u64 = tally.statuses.values().sum();
        println!(
            "  {name:<46} {:>8} {:>7.1} ms  {}",
            thousands(tally.sent as f64),
            tally.total_ms / answered.max(1) as f64,
            statuses_cell(&tally.statuses)
        );
    }
    if !report.examples.is_empty() {
        println!("\nexamples:");
        for example in &report.examples {
            println!(
                "  {} [{}] {}\n    sent: {}\n    received: {}",
                example.operation,
                example.credential.label(),
                example.what,
                example.sent,
                example.received
            );
        }
    }
    print_goals(&goals(report));
}

/// The server's allocator. With glibc's, the trees of rejected huge draws, freed in
/// up to 16 arenas, kept the tool at 21 GB after 250,000 bodies.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.bodies > 0 && args.connections > 0,
        "--bodies and --connections must be > 0"
    );
    let binary = server_binary(args.server_bin.as_ref())?;
    let mut env: Vec<(&str, &str)> = RATE_LIMIT_ENV.to_vec();
    env.push(FAILURES_ENV);
    let no_args: [OsString; 0] = [];
    let server = SpawnedServer::start(&binary, &no_args, &env).await?;
    server.announce();
    let report = match fuzz(&args, &server).await {
        Ok(report) => {
            server.stop().await?;
            report
        }
        Err(error) => {
            eprintln!("server log kept in {}", server.dir.display());
            server.stop().await.ok();
            bail!(error);
        }
    };
    print_report(&report);
    if let Some(path) = &args.write_markdown {
        publish_section(path, MARKDOWN_HEADING, &markdown_section(&args, &report), Some(&INDEX))?;
    }
    if args.check {
        // The first goal is the number of bodies: a slice sends fewer.
        let missed: Vec<String> = goals(&report)
            .into_iter()
            .skip(1)
            .filter(|goal| !goal.met)
            .map(|goal| format!("{}: {}", goal.measurement, goal.result))
            .collect();
        ensure!(missed.is_empty(), "targets missed: {}", missed.join("; "));
        ensure!(
            report.log_panics == 0,
            "the server logged {} panic lines",
            report.log_panics
        );
    }
    Ok(())
}
