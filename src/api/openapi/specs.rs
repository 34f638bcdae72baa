//! What each endpoint does, takes and answers: its summary, request body, success
//! status and body, and query parameters, by endpoint (the table the document's
//! operations are built from).

use super::*;

pub(super) fn spec(endpoint: Endpoint, method: &Method, schemas: &mut Schemas) -> Spec {
    let get = *method == Method::GET;
    let (summary, request, success) = match endpoint {
        Endpoint::Healthz => ("Liveness probe.", None, (200, schemas.of::<Probe>())),
        Endpoint::Readyz => (
            "Readiness probe: 503 once shutdown begins.",
            None,
            (200, schemas.of::<Probe>()),
        ),
        Endpoint::OpenApi => ("This document.", None, (200, schemas.of::<AnyObject>())),
        Endpoint::Dashboard => (
            "The operator's dashboard (HTML; it signs in with an admin key).",
            None,
            (200, RefOr::T(Schema::Object(Object::with_type(Type::String)))),
        ),
        Endpoint::DashboardAsset => (
            "A file of the dashboard: index.html, app.js or style.css.",
            None,
            (200, RefOr::T(Schema::Object(Object::with_type(Type::String)))),
        ),
        Endpoint::Metrics => (
            "Prometheus metrics, in the text exposition format (`text/plain; version=0.0.4`).",
            None,
            (200, RefOr::T(Schema::Object(Object::with_type(Type::String)))),
        ),
        Endpoint::AdminKeys if get => ("List API keys.", None, (200, schemas.of::<KeyList>())),
        Endpoint::AdminKeys => (
            "Create an API key.",
            Some(schemas.of::<crate::api::admin::CreateKeyBody>()),
            (201, schemas.of::<KeyCreated>()),
        ),
        Endpoint::AdminKey => ("Revoke an API key.", None, (200, schemas.of::<KeyRevoked>())),
        Endpoint::AdminStats => ("Node statistics.", None, (200, schemas.of::<AnyObject>())),
        Endpoint::AdminRetrain => (
            "Rebuild the models from the event log.",
            None,
            (200, schemas.of::<AnyObject>()),
        ),
        Endpoint::AdminCompact => (
            "Purge deleted users' records from the database files now (the purge a deletion schedules).",
            Some(schemas.of::<crate::api::admin::CompactBody>()),
            (200, schemas.of::<AnyObject>()),
        ),
        Endpoint::AdminBackup if get => (
            "The backups in the configured directory, or the backup running with the bytes it copied.",
            None,
            (200, schemas.of::<AnyObject>()),
        ),
        Endpoint::AdminBackup => (
            "Take a backup of the running node into `storage.backup_dir` (RocksDB's backup engine) and answer when it is complete.",
            None,
            (200, schemas.of::<AnyObject>()),
        ),
        Endpoint::AdminExperiments if get => (
            "Every A/B experiment with its figures, oldest first.",
            None,
            (200, schemas.of::<crate::api::experiments::ExperimentList>()),
        ),
        Endpoint::AdminExperiments => (
            "Create an A/B experiment: its id can then be used as a `model_id`.",
            Some(schemas.of::<crate::api::experiments::CreateExperimentBody>()),
            (201, schemas.of::<crate::domain::experiment::ExperimentReport>()),
        ),
        Endpoint::AdminExperiment => (
            "An A/B experiment and, per arm, its counts, CTR and conversion rate with 95% intervals, and the difference to the control.",
            None,
            (200, schemas.of::<crate::domain::experiment::ExperimentReport>()),
        ),
        Endpoint::AdminExperimentStop => (
            "Stop an A/B experiment: every later request gets the control arm, and nothing more is counted.",
            None,
            (200, schemas.of::<crate::domain::experiment::ExperimentReport>()),
        ),
        Endpoint::CatalogTable if get => (
            "Every table with its inferred field types and its rows (items searchable now; for users, stored users).",
            None,
            (200, schemas.of::<AnyObject>()),
        ),
        Endpoint::CatalogTable => (
            "Create or update a table.",
            Some(schemas.of::<crate::api::catalog::PutTableBody>()),
            (200, schemas.of::<crate::domain::catalog::TableRecord>()),
        ),
        Endpoint::CatalogTableNamed if get => (
            "A table, with its fields' types.",
            None,
            (200, schemas.of::<crate::domain::catalog::TableRecord>()),
        ),
        Endpoint::CatalogTableNamed => (
            "Delete a table and its items.",
            None,
            (200, schemas.of::<TableDeleted>()),
        ),
        Endpoint::CatalogTableField => (
            "Remap a field's type: convert what converts; with `force`, clear the rest.",
            Some(schemas.of::<crate::api::catalog::RemapBody>()),
            (200, schemas.of::<crate::api::catalog::RemapAnswer>()),
        ),
        Endpoint::CatalogItem => (
            "Upsert one item (replaces the whole record).",
            Some(schemas.of::<ItemRow>()),
            (200, schemas.of::<ItemAck>()),
        ),
        Endpoint::CatalogItems => (
            "Upsert many items.",
            Some(schemas.of::<ItemRows>()),
            (200, schemas.of::<ItemsUpserted>()),
        ),
        Endpoint::CatalogItemNamed if get => ("An item.", None, (200, schemas.of::<StoredRow>())),
        Endpoint::CatalogItemNamed if *method == Method::PATCH => (
            "Change some fields of an item (merge; null removes a field).",
            Some(schemas.of::<RowPatch>()),
            (200, schemas.of::<ItemAck>()),
        ),
        Endpoint::CatalogItemNamed => (
            "Soft-delete an item (`?purge=true` removes it).",
            None,
            (200, schemas.of::<ItemDeleted>()),
        ),
        Endpoint::Users => (
            "Upsert one user or many (replaces each whole record).",
            Some(schemas.of::<UserRows>()),
            (200, schemas.of::<UsersUpserted>()),
        ),
        Endpoint::User if get => ("A user.", None, (200, schemas.of::<StoredRow>())),
        Endpoint::User if *method == Method::PATCH => (
            "Change some fields of a user (merge; null removes a field).",
            Some(schemas.of::<RowPatch>()),
            (200, schemas.of::<StoredRow>()),
        ),
        Endpoint::User => (
            "Delete a user for good, with their events.",
            None,
            (200, schemas.of::<UserDeleted>()),
        ),
        Endpoint::UserState => ("A user's live state.", None, (200, schemas.of::<LiveState>())),
        Endpoint::Session => ("A session's live state.", None, (200, schemas.of::<LiveState>())),
        Endpoint::Events => (
            "Ingest events in the /v1 format.",
            Some(schemas.of::<V1Events>()),
            (202, schemas.of::<EventsAccepted>()),
        ),
        Endpoint::Event => ("A stored event.", None, (200, schemas.of::<StoredEvent>())),
        Endpoint::InternalEvents => (
            "Cluster-internal: events forwarded to the node owning their shard.",
            Some(schemas.of::<InternalEvents>()),
            (200, schemas.of::<InternalResults>()),
        ),
        Endpoint::InternalSessionClaim => (
            "Cluster-internal: claim a session for the node owning its user.",
            Some(schemas.of::<SessionClaim>()),
            (200, schemas.of::<ClaimGranted>()),
        ),
        Endpoint::Engagement => (
            "Ingest events in the engagement format.",
            Some(schemas.of::<EngagementEvents>()),
            (202, schemas.of::<EventsAccepted>()),
        ),
        Endpoint::Recommend => (
            "Rank candidate items for a user or session.",
            Some(schemas.of::<crate::api::recommend::TypedBody>()),
            (200, schemas.of::<crate::api::recommend::RecommendResponse>()),
        ),
        Endpoint::RecommendModule => (
            "Rank modules and the items inside them.",
            Some(schemas.of::<ModulesBody>()),
            (200, schemas.of::<crate::service::modules::RankedModules>()),
        ),
        Endpoint::Chat => (
            "One turn of a conversation: a reply and related items.",
            Some(schemas.of::<ChatBody>()),
            (200, schemas.of::<crate::service::chat::ChatAnswer>()),
        ),
        Endpoint::Search => (
            "Search items by text.",
            Some(schemas.of::<SearchBody>()),
            (200, schemas.of::<crate::api::search::FoundItems>()),
        ),
        Endpoint::SearchRerank => (
            "Rerank candidate items for a query.",
            Some(schemas.of::<RerankBody>()),
            (200, schemas.of::<crate::api::search::FoundItems>()),
        ),
        Endpoint::Embed => (
            "Embed a text (and an image).",
            Some(schemas.of::<EmbedBody>()),
            (200, schemas.of::<crate::service::embed::Embedding>()),
        ),
    };
    let query: &[Query] = match endpoint {
        Endpoint::CatalogItemNamed if *method == Method::DELETE => &[Query {
            name: "purge",
            description: "Remove the item for good instead of marking it deleted.",
            values: &[],
        }],
        Endpoint::AdminExperiments | Endpoint::AdminExperiment if get => &[Query {
            name: "scope",
            description: "`node`: this node's counts only (by default a cluster's nodes' counts are summed).",
            values: &["node"],
        }],
        _ => &[],
    };
    Spec {
        summary,
        request,
        success,
        query,
    }
}
