//! The wire shapes of the bodies that handlers read field by field from JSON (catalog
//! rows, events, search) rather than through a typed struct, and of the answers they
//! build as JSON. Each is only a schema for the OpenAPI document: its fields, their
//! types and the limits the handler enforces. Bodies that are read or written through
//! a typed struct have their schema derived on that struct, next to its handler.

#![allow(dead_code)] // read by the schema derive only

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::ToSchema;

/// Every error: `code` says what failed, `message` says it for a person.
#[derive(ToSchema)]
pub struct ErrorBody {
    /// `validation_error`, `malformed_json`, `type_mismatch`, `image_too_large`, `unauthorized`,
    /// `forbidden`, `not_found`, `method_not_allowed`, `timeout`, `payload_too_large`,
    /// `unknown_model`, `rate_limited`, `unavailable`, `shard_unavailable`,
    /// `storage_error` or `internal`.
    code: String,
    message: String,
    /// What failed, one object each: a refused row of a bulk request (`{index, code,
    /// message}`), a stored row a remap could not convert (`{id}`).
    details: Option<Vec<BTreeMap<String, Value>>>,
}

/// Why one row (item, user, event) of a bulk request was refused.
#[derive(ToSchema)]
pub struct RowFailure {
    /// The row's position in the request, from 0.
    index: u64,
    code: String,
    message: String,
}

/// `/healthz` and `/readyz`.
#[derive(ToSchema)]
pub struct Probe {
    /// `ok` or `ready`.
    status: String,
}

/// A catalog item as sent: `id`, the table it goes to, and custom fields of any
/// allowed type (string, number, boolean, array of strings, time, embedding,
/// relation). A custom field's type is fixed by its first value in the table.
#[derive(ToSchema)]
pub struct ItemRow {
    /// The item's id: 1 to 512 bytes, no control characters.
    #[schema(min_length = 1)]
    id: String,
    /// The table (created on first use); `items` when absent.
    _table: Option<String>,
    /// RFC 3339 or any ISO 8601 form with a date; set on first ingest when absent.
    created_at: Option<String>,
    /// Soft-delete marker.
    is_deleted: Option<bool>,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// A stored catalog item or user: the fields as sent (times normalised to RFC 3339)
/// and the system fields.
#[derive(ToSchema)]
pub struct StoredRow {
    _table: String,
    created_at: String,
    updated_at: String,
    is_deleted: bool,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// The answer to one item upsert or patch: the item's system fields.
#[derive(ToSchema)]
pub struct ItemAck {
    id: String,
    _table: String,
    created_at: String,
    updated_at: String,
    is_deleted: bool,
}

/// Many items (each an `ItemRow`): a bare array, `{"items": [...]}`, or one item object
/// per line (NDJSON). A row that is not a valid item is reported in `failed`; the
/// others are stored (400 when none is).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum ItemRows {
    Rows(Vec<ItemRow>),
    Wrapped { items: Vec<ItemRow> },
}

/// The answer to a bulk item upsert: 200 even when some rows were refused.
#[derive(ToSchema)]
pub struct ItemsUpserted {
    upserted: u64,
    failed: Vec<RowFailure>,
}

/// A field change of a stored item or user: the fields to set; `null` removes one.
#[derive(ToSchema)]
pub struct RowPatch {
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// An item soft-deleted, or purged with `?purge=true`.
#[derive(ToSchema)]
pub struct ItemDeleted {
    id: String,
    _table: String,
    is_deleted: bool,
    purged: bool,
}

/// A deleted table.
#[derive(ToSchema)]
pub struct TableDeleted {
    table_name: String,
    deleted: bool,
}

/// A user as sent: `uid` and custom fields (objects are refused). `created_at` is
/// system-set.
#[derive(ToSchema)]
pub struct UserRow {
    /// 1 to 512 bytes, no control characters.
    #[schema(min_length = 1)]
    uid: String,
    is_deleted: Option<bool>,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// One user, a bare array of users, or `{"users": [...]}` (each a `UserRow`; a row
/// that is not a valid user is reported in `failed`, the others are stored; 400 when
/// none is).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum UserRows {
    One(UserRow),
    Many(Vec<UserRow>),
    Wrapped { users: Vec<UserRow> },
}

/// The answer to an upsert of one user (the stored user) or of many.
#[derive(ToSchema)]
#[serde(untagged)]
pub enum UsersUpserted {
    One(StoredRow),
    Many {
        users: Vec<StoredRow>,
        failed: Vec<RowFailure>,
    },
}

/// A user deleted for good, with their events and their sessions'.
#[derive(ToSchema)]
pub struct UserDeleted {
    uid: String,
    deleted: bool,
    /// Every event removed: `removed.events + removed.anonymous_events`.
    events_removed: u64,
    removed: UserRemoved,
    /// Unix ms when the removed records are purged from the files (`POST /v1/admin/compact` does it now).
    purge_due_at: i64,
}

/// What a user's deletion removed.
#[derive(ToSchema)]
pub struct UserRemoved {
    /// Events that carried the uid.
    events: u64,
    /// Events of the user's sessions sent before the uid was known (sid only).
    anonymous_events: u64,
    /// The user's sessions, whose state and events went.
    sessions: Vec<String>,
    /// Chat conversations held with the user or in their sessions.
    conversations: u64,
}

/// A user's or session's live state.
#[derive(ToSchema)]
pub struct LiveState {
    uid: Option<String>,
    sid: Option<String>,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// An event in the `/v1/events` format: `type`, `original_timestamp` and at least one
/// of `uid`, `sid`, `cid`; any key not listed is a custom field (objects allowed).
#[derive(ToSchema)]
pub struct V1Event {
    /// Unique per event (the dedupe key); generated when absent.
    id: Option<String>,
    /// `page_view` (needs `page_type`), `module_view` (`rank`), `impression`
    /// (`item_id`, `rank`), `click` (`item_id`, `click_type`), `conversion`
    /// (`conversion_type`, `item_ids`), `dwell_time` (`dwell_ms`), `scroll`, or a
    /// custom type.
    #[schema(min_length = 1)]
    r#type: String,
    /// ISO 8601 (RFC 3339 or a date alone), or unix seconds or milliseconds.
    #[schema(value_type = Object)]
    original_timestamp: Value,
    uid: Option<String>,
    sid: Option<String>,
    cid: Option<String>,
    rec_id: Option<String>,
    item_id: Option<String>,
    item_ids: Option<Vec<String>>,
    rank: Option<u64>,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// One event, `{"events": [...]}` or a bare array of events (each a `V1Event`; one
/// that is not valid is reported in `rejected`, the others are accepted; 400 when none
/// is).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum V1Events {
    One(Box<V1Event>),
    Wrapped { events: Vec<V1Event> },
    Many(Vec<V1Event>),
}

/// An event in the engagement format.
#[derive(ToSchema)]
pub struct EngagementEvent {
    /// view, click, purchase, add_to_cart, search, or a `/v1/events` type (whose
    /// mandatory fields then come from `properties`).
    #[schema(min_length = 1)]
    r#type: String,
    #[serde(rename = "userId")]
    #[schema(min_length = 1)]
    user_id: String,
    #[serde(rename = "sessionId")]
    #[schema(min_length = 1)]
    session_id: String,
    /// ISO 8601.
    timestamp: String,
    /// Free context: item_id, item_list_id, page_type, query, order_id, total_value,
    /// currency and custom attributes.
    properties: BTreeMap<String, Value>,
}

/// One engagement event, a bare array of them, or `{"events": [...]}` (each an
/// `EngagementEvent`; one that is not valid is reported in `rejected`; 400 when none
/// is accepted).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum EngagementEvents {
    One(EngagementEvent),
    Many(Vec<EngagementEvent>),
    Wrapped { events: Vec<EngagementEvent> },
}

/// Events received and queued: 202 when at least one was accepted.
#[derive(ToSchema)]
pub struct EventsAccepted {
    accepted: u64,
    /// The accepted events' ids, in request order.
    ids: Vec<String>,
    /// How many of the accepted events had been received before (applied once).
    duplicates: u64,
    rejected: Vec<RowFailure>,
}

/// A stored event, as accepted (with its `ingest_timestamp`).
#[derive(ToSchema)]
pub struct StoredEvent {
    id: String,
    r#type: String,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// Cluster-internal: events another node accepted for this node's shards, in
/// rankstream's own encoding.
#[derive(ToSchema)]
pub struct InternalEvents(Vec<BTreeMap<String, Value>>);

/// Cluster-internal: one answer per forwarded event, in order.
#[derive(ToSchema)]
pub struct InternalResults {
    results: Vec<BTreeMap<String, Value>>,
}

/// Cluster-internal: a node claims a session of this node's shards for a user it owns.
#[derive(ToSchema)]
pub struct SessionClaim {
    #[schema(min_length = 1)]
    sid: String,
    #[schema(min_length = 1)]
    uid: String,
}

/// The claimed session's state, `null` when it has none.
#[derive(ToSchema)]
pub struct ClaimGranted {
    #[schema(value_type = Option<Object>)]
    state: Value,
}

/// An event embedded in a search, rerank or chat request.
#[derive(ToSchema)]
pub struct EmbeddedEvent {
    /// ISO 8601.
    timestamp: String,
    #[schema(min_length = 1, pattern = r"\S")]
    r#type: String,
    #[schema(min_length = 1)]
    item_id: Option<String>,
    description: Option<String>,
}

/// `POST /v1/search`.
#[derive(ToSchema)]
pub struct SearchBody {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    query: String,
    #[schema(min_length = 1)]
    user_id: Option<String>,
    #[schema(min_length = 1)]
    session_id: Option<String>,
    #[schema(max_items = 1000)]
    events: Option<Vec<EmbeddedEvent>>,
    /// Default 50.
    #[schema(maximum = 1000)]
    limit: Option<u64>,
    /// Only these tables (every table when absent).
    #[schema(min_items = 1)]
    tables: Option<Vec<String>>,
    /// Give each item an `explanation`: each part's contribution to its score.
    explain: Option<bool>,
    #[serde(flatten)]
    rules: RuleFields,
}

/// The business rules a ranking request may carry (README "Business rules").
#[derive(ToSchema)]
pub struct RuleFields {
    /// Ids never returned, whatever their score.
    #[schema(max_items = 10000)]
    exclude_ids: Option<Vec<String>>,
    /// Predicates every returned item passes: `{"field", "op", "value"}` (op `eq ne in
    /// nin lt lte gt gte range exists`), `{"all": [...]}`, `{"any": [...]}`, `{"not": {...}}`.
    #[schema(value_type = Option<Vec<Object>>)]
    filters: Option<Value>,
    /// A predicate with `multiply` and/or `add`: the score change of the items it matches.
    #[schema(value_type = Option<Vec<Object>>)]
    boosts: Option<Value>,
    /// At most `max_per_value` items per value of `field` in the first `top_k` places.
    diversity: Option<DiversityBody>,
}

/// A diversity rule.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiversityBody {
    #[schema(min_length = 1)]
    field: String,
    #[schema(minimum = 1)]
    max_per_value: u64,
    /// Every place when absent.
    #[schema(minimum = 1)]
    top_k: Option<u64>,
}

/// `POST /v1/search/rerank`.
#[derive(ToSchema)]
pub struct RerankBody {
    #[schema(min_length = 1, pattern = r"\S")]
    query: String,
    /// Ranked once per occurrence.
    #[schema(max_items = 10000)]
    item_ids: Vec<String>,
    /// Default `default`.
    #[schema(min_length = 1)]
    model_id: Option<String>,
    #[schema(min_length = 1)]
    user_id: Option<String>,
    #[schema(min_length = 1)]
    session_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    search_context: Option<Value>,
    /// Rank soft-deleted items too (they are left out by default).
    include_deleted: Option<bool>,
    item_retrieval_metadata: Option<Vec<RetrievalMetadata>>,
    #[schema(max_items = 1000)]
    events: Option<Vec<EmbeddedEvent>>,
    /// Default 50.
    #[schema(maximum = 10000)]
    limit: Option<u64>,
    /// Give each item an `explanation`: each part's contribution to its score.
    explain: Option<bool>,
    #[serde(flatten)]
    rules: RuleFields,
}

/// What the caller's retrieval knew of an item.
#[derive(ToSchema)]
pub struct RetrievalMetadata {
    #[schema(min_length = 1)]
    item_id: String,
    retrieval_score: Option<f64>,
    rank: Option<u64>,
    /// Custom fields.
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}

/// `POST /chat`.
#[derive(ToSchema)]
pub struct ChatBody {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    message: String,
    /// Continues a conversation; a new one when absent.
    #[schema(min_length = 1, max_length = 256)]
    conversation_id: Option<String>,
    #[schema(min_length = 1)]
    session_id: Option<String>,
    #[schema(min_length = 1)]
    user_id: Option<String>,
    #[schema(max_items = 1000)]
    events: Option<Vec<EmbeddedEvent>>,
    /// Default 4.
    #[schema(minimum = 1, maximum = 50)]
    limit: Option<u64>,
}

/// `POST /embed`: a text and at most one image.
#[derive(ToSchema)]
pub struct EmbedBody {
    /// Not blank.
    #[schema(min_length = 1, pattern = r"\S")]
    text: String,
    /// The image, base64.
    image_bytes: Option<String>,
    /// Fetched only when the server allows it (`embed.image_url_fetch`).
    image_url: Option<String>,
}

/// `POST /v1/recommend/module`.
#[derive(ToSchema)]
pub struct ModulesBody {
    #[schema(min_length = 1)]
    user_id: String,
    #[schema(min_length = 1)]
    session_id: Option<String>,
    #[schema(min_length = 1)]
    item_model_id: String,
    #[schema(min_length = 1)]
    module_model_id: String,
    #[schema(value_type = Option<Object>)]
    context: Option<Value>,
    /// Rank soft-deleted items too (they are left out by default).
    include_deleted: Option<bool>,
    /// Not empty (400 when it is).
    #[schema(min_items = 1, max_items = 10000)]
    modules: Vec<ModuleBody>,
    /// For the items of every module, pinned ones included.
    #[serde(flatten)]
    rules: RuleFields,
}

/// A module to rank.
#[derive(ToSchema)]
pub struct ModuleBody {
    #[schema(min_length = 1)]
    id: String,
    /// May be empty.
    items: Vec<ModuleItemBody>,
    is_pre_ranked: Option<bool>,
    /// 0-indexed.
    fixed_position: Option<u64>,
    limit: Option<u64>,
}

/// An item of a module.
#[derive(ToSchema)]
pub struct ModuleItemBody {
    #[schema(min_length = 1)]
    id: String,
    /// 0-indexed.
    fixed_position: Option<u64>,
}

/// `GET /v1/admin/keys`.
#[derive(ToSchema)]
pub struct KeyList {
    keys: Vec<KeyView>,
}

/// A key as listed (never its secret).
#[derive(ToSchema)]
pub struct KeyView {
    id: String,
    name: String,
    scopes: Vec<String>,
    expires_at: Option<String>,
    created_at: String,
    rate_per_sec: Option<u32>,
    burst: Option<u32>,
}

/// A new key, with its secret (shown only here).
#[derive(ToSchema)]
pub struct KeyCreated {
    #[serde(flatten)]
    view: KeyView,
    /// The secret to send as `Authorization: Bearer ...`.
    key: String,
}

/// A revoked key.
#[derive(ToSchema)]
pub struct KeyRevoked {
    id: String,
    revoked: bool,
}

/// A free-form JSON object (stats, retrain report, this document).
#[derive(ToSchema)]
pub struct AnyObject {
    #[serde(flatten)]
    custom: BTreeMap<String, Value>,
}
