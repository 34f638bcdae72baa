//! [`ROUTES`]: every endpoint of the API, one record each, in the order the OpenAPI
//! document and the request-time stats list them. A new endpoint is a record here,
//! its handler and its service method.

use super::{Forward, Group, MethodRoute, Operation, Query, Route};
use crate::api::openapi::bodies::*;
use crate::api::openapi::{Schemas, FILE_ERRORS, NO_ERRORS, PROBE_ERRORS};
use crate::api::{
    admin, catalog, chat, dashboard, embed, events, experiments, openapi, recommend, recommend_module, rerank, search,
    users,
};

/// `/v1/internal/events`, which a node sends events of another node's shards to.
pub const INTERNAL_EVENTS_PATH: &str = "/v1/internal/events";
/// `/v1/internal/sessions/claim`, which a node claims another node's session at.
pub const INTERNAL_SESSION_CLAIM_PATH: &str = crate::service::cluster::claims::SESSION_CLAIM_PATH;

/// How long `POST /v1/admin/models/retrain` may take (a rebuild, tuning included).
const RETRAIN_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// `?scope=node` of the experiment reads.
const NODE_SCOPE: &[Query] = &[Query {
    name: "scope",
    description: "`node`: this node's counts only (by default a cluster's nodes' counts are summed).",
    values: &["node"],
}];

/// The files served under `/dashboard/`.
fn dashboard_files() -> Vec<&'static str> {
    dashboard::names().collect()
}

/// The scopes the records name (see `domain::api_key::SCOPES`).
const ADMIN: Option<&str> = Some("admin");
const CATALOG_READ: Option<&str> = Some("catalog:read");
const CATALOG_WRITE: Option<&str> = Some("catalog:write");
const USERS_WRITE: Option<&str> = Some("users:write");
const EVENTS_WRITE: Option<&str> = Some("events:write");
/// No key needed.
const OPEN: Option<&str> = None;

/// Every endpoint.
pub static ROUTES: &[Route] = &[
    Route {
        name: "Healthz",
        pattern: "/healthz",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            OPEN,
            handler!(crate::api::healthz),
            Operation::answers("Liveness probe.", 200, Schemas::of::<Probe>),
        )],
        errors: NO_ERRORS,
        ..Route::DEFAULT
    },
    Route {
        name: "Readyz",
        pattern: "/readyz",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            OPEN,
            handler!(crate::api::readiness),
            Operation::answers("Readiness probe: 503 once shutdown begins.", 200, Schemas::of::<Probe>),
        )],
        errors: PROBE_ERRORS,
        ..Route::DEFAULT
    },
    Route {
        name: "AdminKeys",
        pattern: "/v1/admin/keys",
        group: Group::Admin,
        methods: &[
            MethodRoute::get(
                ADMIN,
                handler!(admin::list_keys),
                Operation::answers("List API keys.", 200, Schemas::of::<KeyList>),
            ),
            MethodRoute::post(
                ADMIN,
                handler!(admin::create_key),
                Operation::answers("Create an API key.", 201, Schemas::of::<KeyCreated>)
                    .reads(Schemas::of::<admin::CreateKeyBody>),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminKey",
        pattern: "/v1/admin/keys/{id}",
        group: Group::Admin,
        methods: &[MethodRoute::delete(
            ADMIN,
            handler!(admin::revoke_key),
            Operation::answers("Revoke an API key.", 200, Schemas::of::<KeyRevoked>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminStats",
        pattern: "/v1/admin/stats",
        group: Group::Admin,
        methods: &[MethodRoute::get(
            ADMIN,
            handler!(admin::stats),
            Operation::answers("Node statistics.", 200, Schemas::of::<AnyObject>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogTable",
        pattern: "/v1/catalog/table",
        group: Group::Catalog,
        methods: &[
            MethodRoute::get(
                CATALOG_READ,
                handler!(catalog::list_tables),
                Operation::answers(
                    "Every table with its inferred field types and its rows (items searchable now; for users, stored users).",
                    200,
                    Schemas::of::<AnyObject>,
                ),
            ),
            MethodRoute::put(
                CATALOG_WRITE,
                handler!(catalog::put_table),
                Operation::answers(
                    "Create or update a table.",
                    200,
                    Schemas::of::<crate::domain::catalog::TableRecord>,
                )
                .reads(Schemas::of::<catalog::PutTableBody>),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogTableNamed",
        pattern: "/v1/catalog/table/{name}",
        group: Group::Catalog,
        methods: &[
            MethodRoute::get(
                CATALOG_READ,
                handler!(catalog::get_table),
                Operation::answers(
                    "A table, with its fields' types.",
                    200,
                    Schemas::of::<crate::domain::catalog::TableRecord>,
                ),
            ),
            MethodRoute::delete(
                CATALOG_WRITE,
                handler!(catalog::delete_table),
                Operation::answers("Delete a table and its items.", 200, Schemas::of::<TableDeleted>),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogTableField",
        pattern: "/v1/catalog/table/{name}/fields/{field}",
        group: Group::Catalog,
        methods: &[MethodRoute::put(
            CATALOG_WRITE,
            handler!(catalog::remap_field),
            Operation::answers(
                "Remap a field's type: convert what converts; with `force`, clear the rest.",
                200,
                Schemas::of::<catalog::RemapAnswer>,
            )
            .reads(Schemas::of::<catalog::RemapBody>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogItem",
        pattern: "/v1/catalog/item",
        group: Group::Catalog,
        methods: &[MethodRoute::put(
            CATALOG_WRITE,
            handler!(catalog::put_item),
            Operation::answers("Upsert one item (replaces the whole record).", 200, Schemas::of::<ItemAck>)
                .reads(Schemas::of::<ItemRow>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogItems",
        pattern: "/v1/catalog/items",
        group: Group::Catalog,
        methods: &[MethodRoute::put(
            CATALOG_WRITE,
            handler!(catalog::put_items),
            Operation::answers("Upsert many items.", 200, Schemas::of::<ItemsUpserted>).reads(Schemas::of::<ItemRows>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "CatalogItemNamed",
        pattern: "/v1/catalog/item/{table}/{id}",
        group: Group::Catalog,
        methods: &[
            MethodRoute::get(
                CATALOG_READ,
                handler!(catalog::get_item),
                Operation::answers("An item.", 200, Schemas::of::<StoredRow>),
            ),
            MethodRoute::patch(
                CATALOG_WRITE,
                handler!(catalog::patch_item),
                Operation::answers(
                    "Change some fields of an item (merge; null removes a field).",
                    200,
                    Schemas::of::<ItemAck>,
                )
                .reads(Schemas::of::<RowPatch>),
            ),
            MethodRoute::delete(
                CATALOG_WRITE,
                handler!(catalog::delete_item),
                Operation::answers(
                    "Soft-delete an item (`?purge=true` removes it).",
                    200,
                    Schemas::of::<ItemDeleted>,
                )
                .with_query(&[Query {
                    name: "purge",
                    description: "Remove the item for good instead of marking it deleted.",
                    values: &[],
                }]),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "Users",
        pattern: "/v1/users",
        group: Group::Users,
        methods: &[MethodRoute::post(
            USERS_WRITE,
            handler!(users::put_users),
            Operation::answers(
                "Upsert one user or many (replaces each whole record).",
                200,
                Schemas::of::<UsersUpserted>,
            )
            .reads(Schemas::of::<UserRows>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "User",
        pattern: "/v1/users/{uid}",
        group: Group::Users,
        methods: &[
            MethodRoute::get(
                CATALOG_READ,
                handler!(users::get_user),
                Operation::answers("A user.", 200, Schemas::of::<StoredRow>),
            ),
            MethodRoute::patch(
                USERS_WRITE,
                handler!(users::patch_user),
                Operation::answers(
                    "Change some fields of a user (merge; null removes a field).",
                    200,
                    Schemas::of::<StoredRow>,
                )
                .reads(Schemas::of::<RowPatch>),
            ),
            // The user's live state and events go with them: on the node that owns them.
            MethodRoute::delete(
                USERS_WRITE,
                handler!(users::delete_user),
                Operation::answers(
                    "Delete a user for good, with their events.",
                    200,
                    Schemas::of::<UserDeleted>,
                ),
            )
            .forwarded(Forward::ByPathUid),
        ],
        ..Route::DEFAULT
    },
    // Live state and the raw log expose every user's behaviour: operators only.
    Route {
        name: "UserState",
        pattern: "/v1/users/{uid}/state",
        group: Group::Users,
        methods: &[MethodRoute::get(
            ADMIN,
            handler!(events::user_state),
            Operation::answers("A user's live state.", 200, Schemas::of::<LiveState>),
        )
        .forwarded(Forward::ByPathUid)],
        ..Route::DEFAULT
    },
    Route {
        name: "Session",
        pattern: "/v1/sessions/{sid}",
        group: Group::Users,
        methods: &[MethodRoute::get(
            ADMIN,
            handler!(events::session),
            Operation::answers("A session's live state.", 200, Schemas::of::<LiveState>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "Events",
        pattern: "/v1/events",
        group: Group::Events,
        methods: &[MethodRoute::post(
            EVENTS_WRITE,
            handler!(events::post_events),
            Operation::answers("Ingest events in the /v1 format.", 202, Schemas::of::<EventsAccepted>)
                .reads(Schemas::of::<V1Events>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "Event",
        pattern: "/v1/events/{id}",
        group: Group::Events,
        methods: &[MethodRoute::get(
            ADMIN,
            handler!(events::get_event),
            Operation::answers("A stored event.", 200, Schemas::of::<StoredEvent>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "InternalEvents",
        pattern: INTERNAL_EVENTS_PATH,
        group: Group::Internal,
        methods: &[MethodRoute::post(
            EVENTS_WRITE,
            handler!(events::ingest_internal),
            Operation::answers(
                "Cluster-internal: events forwarded to the node owning their shard.",
                200,
                Schemas::of::<InternalResults>,
            )
            .reads(Schemas::of::<InternalEvents>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "InternalSessionClaim",
        pattern: INTERNAL_SESSION_CLAIM_PATH,
        group: Group::Internal,
        methods: &[MethodRoute::post(
            EVENTS_WRITE,
            handler!(events::grant_claim),
            Operation::answers(
                "Cluster-internal: claim a session for the node owning its user.",
                200,
                Schemas::of::<ClaimGranted>,
            )
            .reads(Schemas::of::<SessionClaim>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "Engagement",
        pattern: "/catalog/engagement",
        aliases: &["/cds/engagement", "/v1/catalog/engagement", "/v1/cds/engagement"],
        group: Group::Events,
        methods: &[MethodRoute::post(
            EVENTS_WRITE,
            handler!(events::post_engagement),
            Operation::answers(
                "Ingest events in the engagement format.",
                202,
                Schemas::of::<EventsAccepted>,
            )
            .reads(Schemas::of::<EngagementEvents>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "Recommend",
        pattern: "/v1/recommend",
        group: Group::Recommend,
        methods: &[MethodRoute::post(
            Some("recommend"),
            handler!(recommend::handle),
            Operation::answers(
                "Rank candidate items for a user or session.",
                200,
                Schemas::of::<recommend::RecommendResponse>,
            )
            .reads(Schemas::of::<recommend::TypedBody>),
        )
        .forwarded(Forward::ByBodyKey)],
        ..Route::DEFAULT
    },
    Route {
        name: "RecommendModule",
        pattern: "/v1/recommend/module",
        group: Group::Recommend,
        methods: &[MethodRoute::post(
            Some("recommend"),
            handler!(recommend_module::handle),
            Operation::answers(
                "Rank modules and the items inside them.",
                200,
                Schemas::of::<crate::service::modules::RankedModules>,
            )
            .reads(Schemas::of::<ModulesBody>),
        )
        .forwarded(Forward::ByBodyKey)],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminRetrain",
        pattern: "/v1/admin/models/retrain",
        group: Group::Admin,
        methods: &[MethodRoute::post(
            ADMIN,
            handler!(admin::retrain),
            Operation::answers("Rebuild the models from the event log.", 200, Schemas::of::<AnyObject>),
        )],
        // A rebuild of the models answers when it is done: minutes on a large log.
        timeout_ms: Some(RETRAIN_TIMEOUT_MS),
        ..Route::DEFAULT
    },
    Route {
        name: "AdminCompact",
        pattern: "/v1/admin/compact",
        group: Group::Admin,
        methods: &[MethodRoute::post(
            ADMIN,
            handler!(admin::compact),
            Operation::answers(
                "Purge deleted users' records from the database files now (the purge a deletion schedules).",
                200,
                Schemas::of::<AnyObject>,
            )
            // Compacting needs no options: an empty body is the default.
            .reads_optionally(Schemas::of::<admin::CompactBody>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminBackup",
        pattern: "/v1/admin/backup",
        group: Group::Admin,
        methods: &[
            MethodRoute::get(
                ADMIN,
                handler!(admin::backup_status),
                Operation::answers(
                    "The backups in the configured directory, or the backup running with the bytes it copied.",
                    200,
                    Schemas::of::<AnyObject>,
                ),
            ),
            MethodRoute::post(
                ADMIN,
                handler!(admin::backup),
                Operation::answers(
                    "Take a backup of the running node into `storage.backup_dir` (RocksDB's backup engine) and answer when it is complete.",
                    200,
                    Schemas::of::<AnyObject>,
                ),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminExperiments",
        pattern: "/v1/admin/experiments",
        group: Group::Admin,
        methods: &[
            MethodRoute::get(
                ADMIN,
                handler!(experiments::list_experiments),
                Operation::answers(
                    "Every A/B experiment with its figures, oldest first.",
                    200,
                    Schemas::of::<experiments::ExperimentList>,
                )
                .with_query(NODE_SCOPE),
            ),
            MethodRoute::post(
                ADMIN,
                handler!(experiments::create_experiment),
                Operation::answers(
                    "Create an A/B experiment: its id can then be used as a `model_id`.",
                    201,
                    Schemas::of::<crate::domain::experiment::ExperimentReport>,
                )
                .reads(Schemas::of::<experiments::CreateExperimentBody>),
            ),
        ],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminExperiment",
        pattern: "/v1/admin/experiments/{id}",
        group: Group::Admin,
        methods: &[MethodRoute::get(
            ADMIN,
            handler!(experiments::experiment),
            Operation::answers(
                "An A/B experiment and, per arm, its counts, CTR and conversion rate with 95% intervals, and the difference to the control.",
                200,
                Schemas::of::<crate::domain::experiment::ExperimentReport>,
            )
            .with_query(NODE_SCOPE),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "AdminExperimentStop",
        pattern: "/v1/admin/experiments/{id}/stop",
        group: Group::Admin,
        methods: &[MethodRoute::post(
            ADMIN,
            handler!(experiments::stop_experiment),
            Operation::answers(
                "Stop an A/B experiment: every later request gets the control arm, and nothing more is counted.",
                200,
                Schemas::of::<crate::domain::experiment::ExperimentReport>,
            ),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "Chat",
        pattern: "/chat",
        aliases: &["/v1/chat"],
        group: Group::Search,
        methods: &[MethodRoute::post(
            Some("chat"),
            handler!(chat::handle),
            Operation::answers(
                "One turn of a conversation: a reply and related items.",
                200,
                Schemas::of::<crate::service::chat::ChatAnswer>,
            )
            .reads(Schemas::of::<ChatBody>),
        )
        .forwarded(Forward::ByBodyKey)],
        ..Route::DEFAULT
    },
    Route {
        name: "Search",
        pattern: "/v1/search",
        group: Group::Search,
        methods: &[MethodRoute::post(
            Some("search"),
            handler!(search::handle),
            Operation::answers("Search items by text.", 200, Schemas::of::<search::FoundItems>)
                .reads(Schemas::of::<SearchBody>),
        )
        .forwarded(Forward::ByBodyKey)],
        ..Route::DEFAULT
    },
    Route {
        name: "SearchRerank",
        pattern: "/v1/search/rerank",
        aliases: &["/search/rerank"],
        group: Group::Search,
        methods: &[MethodRoute::post(
            Some("search"),
            handler!(rerank::handle),
            Operation::answers(
                "Rerank candidate items for a query.",
                200,
                Schemas::of::<search::FoundItems>,
            )
            .reads(Schemas::of::<RerankBody>),
        )
        .forwarded(Forward::ByBodyKey)],
        ..Route::DEFAULT
    },
    Route {
        name: "Embed",
        pattern: "/embed",
        aliases: &["/v1/embed"],
        group: Group::Search,
        methods: &[MethodRoute::post(
            Some("embed"),
            handler!(embed::handle),
            Operation::answers(
                "Embed a text (and an image).",
                200,
                Schemas::of::<crate::service::embed::Embedding>,
            )
            .reads(Schemas::of::<EmbedBody>),
        )],
        ..Route::DEFAULT
    },
    Route {
        name: "OpenApi",
        pattern: "/openapi.json",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            OPEN,
            handler!(openapi::serve),
            Operation::answers("This document.", 200, Schemas::of::<AnyObject>),
        )],
        errors: NO_ERRORS,
        ..Route::DEFAULT
    },
    Route {
        name: "Metrics",
        pattern: "/metrics",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            // Read-only, for a Prometheus scraper's key (`admin` implies it).
            Some("metrics"),
            handler!(crate::api::metrics),
            Operation::answers(
                "Prometheus metrics, in the text exposition format (`text/plain; version=0.0.4`).",
                200,
                Schemas::text,
            )
            .in_media_types(&["text/plain"]),
        )],
        ..Route::DEFAULT
    },
    // The dashboard's files are public; what the page shows needs its key.
    Route {
        name: "Dashboard",
        pattern: "/dashboard",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            OPEN,
            handler!(dashboard::page),
            Operation::answers(
                "The operator's dashboard (HTML; it signs in with an admin key).",
                200,
                Schemas::text,
            )
            .in_media_types(&["text/html"]),
        )],
        errors: NO_ERRORS,
        ..Route::DEFAULT
    },
    Route {
        name: "DashboardAsset",
        pattern: "/dashboard/{asset}",
        group: Group::Meta,
        methods: &[MethodRoute::get(
            OPEN,
            handler!(dashboard::file),
            Operation::answers(
                "A file of the dashboard: index.html, app.js or style.css.",
                200,
                Schemas::text,
            )
            .in_media_types(&["text/javascript", "text/css", "text/html"]),
        )],
        // The dashboard's files are a fixed set.
        parameter_values: Some(dashboard_files),
        errors: FILE_ERRORS,
        ..Route::DEFAULT
    },
];
