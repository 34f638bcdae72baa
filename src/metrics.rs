//! Prometheus metrics (`GET /metrics`): every metric's name, help and buckets in one
//! place, the recorder a node installs once, and the functions the layers call where
//! things happen. Counters and histograms are recorded as they occur; gauges of
//! state that lives elsewhere (consumer lag, models, the search index, the process)
//! are set by the service layer just before a scrape renders.
//!
//! Names follow Prometheus' conventions: a `rankstream_` prefix, base units in the
//! name (`_seconds`, `_bytes`), `_total` on counters, and the standard
//! `process_resident_memory_bytes` and `process_open_fds`.

use std::sync::OnceLock;
use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// The text exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const HTTP_REQUESTS: &str = "rankstream_http_requests_total";
const HTTP_DURATION: &str = "rankstream_http_request_duration_seconds";
const EVENTS_INGESTED: &str = "rankstream_events_ingested_total";
const EVENTS_DUPLICATED: &str = "rankstream_events_duplicated_total";
const EVENTS_REJECTED: &str = "rankstream_events_rejected_total";
const LIVE_ACTORS: &str = "rankstream_live_actors";
const PASSIVATIONS: &str = "rankstream_passivations_total";
const CHECKPOINT_DURATION: &str = "rankstream_checkpoint_duration_seconds";
const COMMIT_BATCH: &str = "rankstream_commit_batch_writes";
const COMMIT_DURATION: &str = "rankstream_commit_duration_seconds";
const KAFKA_LAG: &str = "rankstream_kafka_consumer_lag_messages";
const TRAINING_DURATION: &str = "rankstream_model_training_duration_seconds";
const MODEL_EVENTS: &str = "rankstream_model_events_learned";
const MODEL_ITEMS: &str = "rankstream_model_items";
const MODEL_MEMORY: &str = "rankstream_model_memory_bytes";
const MODEL_PUBLISHED: &str = "rankstream_model_last_published_timestamp_seconds";
const SEARCH_LAG: &str = "rankstream_search_index_lag_seconds";
const SEARCH_DOCUMENTS: &str = "rankstream_search_index_documents";
const EMBED_WAIT: &str = "rankstream_embedder_queue_wait_seconds";
const RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
const OPEN_FDS: &str = "process_open_fds";

/// Request and stage times: 100 µs to 30 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Writes in one group commit: powers of four up to the writer's largest batch.
const COMMIT_BUCKETS: &[f64] = &[1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0];
/// How often recorded histogram samples are folded into their buckets.
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The node's recorder: installed as the process' recorder on first use (a second
/// node in the same process, as in tests, shares it).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|builder| builder.set_buckets_for_metric(Matcher::Full(COMMIT_BATCH.into()), COMMIT_BUCKETS))
            .expect("the bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if ::metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics shows only what it does not take");
        }
        describe();
        handle
    })
}

/// The HELP line of every metric.
fn describe() {
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by endpoint pattern, method and status."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time from a request's head to its response, by endpoint pattern, method and status."
    );
    describe_counter!(
        EVENTS_INGESTED,
        "Events accepted and applied for the first time, by source."
    );
    describe_counter!(
        EVENTS_DUPLICATED,
        "Events accepted again under an id already applied, by source."
    );
    describe_counter!(
        EVENTS_REJECTED,
        "Events refused (invalid, or a part of the node unavailable; Kafka: dead-lettered), by source."
    );
    describe_gauge!(
        LIVE_ACTORS,
        "Live sessions and users, by shard and kind (session, user)."
    );
    describe_counter!(
        PASSIVATIONS,
        "Live sessions and users passivated (state persisted, dropped from memory), by kind."
    );
    describe_histogram!(
        CHECKPOINT_DURATION,
        Unit::Seconds,
        "Time of a checkpoint of every shard."
    );
    describe_histogram!(COMMIT_BATCH, "Writes (key puts and deletes) in one group commit.");
    describe_histogram!(
        COMMIT_DURATION,
        Unit::Seconds,
        "Time of one group commit, its fsync included."
    );
    describe_gauge!(
        KAFKA_LAG,
        "Messages between the next offset to apply and the partition's end, by topic and partition."
    );
    describe_histogram!(
        TRAINING_DURATION,
        Unit::Seconds,
        "Time of the learner's work, by stage (learn: a batch of events; publish; persist; rebuild)."
    );
    describe_gauge!(MODEL_EVENTS, "Events the published models have learned.");
    describe_gauge!(MODEL_ITEMS, "Items the published models know.");
    describe_gauge!(MODEL_MEMORY, Unit::Bytes, "Estimated heap of the published models.");
    describe_gauge!(
        MODEL_PUBLISHED,
        Unit::Seconds,
        "Unix time of the last published models."
    );
    describe_gauge!(
        SEARCH_LAG,
        Unit::Seconds,
        "Age of the oldest catalog change not yet searchable (0 when none is waiting)."
    );
    describe_gauge!(SEARCH_DOCUMENTS, "Documents in the search index.");
    describe_histogram!(
        EMBED_WAIT,
        Unit::Seconds,
        "Time a call waited for a free run of the embedder, by lane (request, ingest)."
    );
    describe_gauge!(RESIDENT_MEMORY, Unit::Bytes, "Resident memory of the process.");
    describe_gauge!(OPEN_FDS, "Open file descriptors of the process.");
}

/// Folds recorded samples into their buckets; call it every [`UPKEEP_INTERVAL`].
pub fn upkeep() {
    handle().run_upkeep();
}

/// The exposition text of every metric; process gauges are read now.
pub fn render() -> String {
    let handle = handle();
    if let Some(bytes) = resident_memory_bytes() {
        gauge!(RESIDENT_MEMORY).set(bytes as f64);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge!(OPEN_FDS).set(fds.count() as f64);
    }
    handle.render()
}

/// `VmRSS` of `/proc/self/status` (Linux); `None` elsewhere.
fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One HTTP request answered (`endpoint`: its pattern, or `unmatched`).
pub fn http_request(endpoint: &'static str, method: &'static str, status: u16, took: Duration) {
    let labels = [
        ("endpoint", SharedString::const_str(endpoint)),
        ("method", SharedString::const_str(method)),
        ("status", SharedString::from(status.to_string())),
    ];
    counter!(HTTP_REQUESTS, &labels).increment(1);
    histogram!(HTTP_DURATION, &labels).record(took.as_secs_f64());
}

/// What became of the events of one batch from `source` (`rest`, `kafka`).
pub fn events(source: &'static str, ingested: usize, duplicated: usize, rejected: usize) {
    let labels = [("source", source)];
    for (name, count) in [
        (EVENTS_INGESTED, ingested),
        (EVENTS_DUPLICATED, duplicated),
        (EVENTS_REJECTED, rejected),
    ] {
        // Touched even at 0, so that every series exists from the first batch on.
        counter!(name, &labels).increment(count as u64);
    }
}

pub fn live_actors(shard: u16, kind: &'static str, count: usize) {
    gauge!(LIVE_ACTORS, "shard" => shard.to_string(), "kind" => kind).set(count as f64);
}

pub fn passivated(kind: &'static str) {
    counter!(PASSIVATIONS, "kind" => kind).increment(1);
}

pub fn checkpoint(took: Duration) {
    histogram!(CHECKPOINT_DURATION).record(took.as_secs_f64());
}

pub fn group_commit(writes: usize, took: Duration) {
    histogram!(COMMIT_BATCH).record(writes as f64);
    histogram!(COMMIT_DURATION).record(took.as_secs_f64());
}

pub fn kafka_lag(topic: &str, partition: i32, lag: i64) {
    gauge!(KAFKA_LAG, "topic" => topic.to_owned(), "partition" => partition.to_string()).set(lag as f64);
}

/// One stage of the learner's work (`learn`, `publish`, `persist`, `rebuild`).
pub fn training(stage: &'static str, took: Duration) {
    histogram!(TRAINING_DURATION, "stage" => stage).record(took.as_secs_f64());
}

/// The learner published a snapshot of its models now.
pub fn models_published() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    gauge!(MODEL_PUBLISHED).set(now.as_secs_f64());
}

/// The published models, as a scrape sees them.
pub fn models(events_learned: u64, items: usize, memory_bytes: usize) {
    gauge!(MODEL_EVENTS).set(events_learned as f64);
    gauge!(MODEL_ITEMS).set(items as f64);
    gauge!(MODEL_MEMORY).set(memory_bytes as f64);
}

pub fn search_index(lag: Duration, documents: u64) {
    gauge!(SEARCH_LAG).set(lag.as_secs_f64());
    gauge!(SEARCH_DOCUMENTS).set(documents as f64);
}

pub fn embed_wait(lane: &'static str, waited: Duration) {
    histogram!(EMBED_WAIT, "lane" => lane).record(waited.as_secs_f64());
}
