//! The route table: path → endpoint, the methods each endpoint takes, and the
//! scope each method needs.

use hyper::Method;

/// Every endpoint the frontend serves (a new one goes into [`Endpoint::ALL`] too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Healthz,
    Readyz,
    /// `/v1/admin/keys`
    AdminKeys,
    /// `/v1/admin/keys/{id}`
    AdminKey,
    /// `/v1/admin/stats`
    AdminStats,
    /// `/v1/catalog/table`
    CatalogTable,
    /// `/v1/catalog/table/{name}`
    CatalogTableNamed,
    /// `/v1/catalog/table/{name}/fields/{field}`
    CatalogTableField,
    /// `/v1/catalog/item`
    CatalogItem,
    /// `/v1/catalog/items`
    CatalogItems,
    /// `/v1/catalog/item/{table}/{id}`
    CatalogItemNamed,
    /// `/v1/users`
    Users,
    /// `/v1/users/{uid}`
    User,
    /// `/v1/users/{uid}/state`
    UserState,
    /// `/v1/sessions/{sid}`
    Session,
    /// `/v1/events`
    Events,
    /// `/v1/events/{id}`
    Event,
    /// `/v1/internal/events`: events another node of the cluster accepted for a shard of this one
    InternalEvents,
    /// `/v1/internal/sessions/claim`: another node claims a session of this node's shards for a user it owns
    InternalSessionClaim,
    /// `/catalog/engagement`, also served at `/cds/engagement`
    Engagement,
    /// `/v1/recommend`
    Recommend,
    /// `/v1/recommend/module`
    RecommendModule,
    /// `/v1/admin/models/retrain`
    AdminRetrain,
    /// `/v1/admin/compact`: purge deleted users' records from the files now
    AdminCompact,
    /// `/v1/admin/backup`: take a backup of the running node, or list backups
    AdminBackup,
    /// `/v1/admin/experiments`: create an A/B experiment, or list them
    AdminExperiments,
    /// `/v1/admin/experiments/{id}`: an experiment and its figures
    AdminExperiment,
    /// `/v1/admin/experiments/{id}/stop`: route every later request to the control arm
    AdminExperimentStop,
    /// `/chat` (also `/v1/chat`)
    Chat,
    /// `/v1/search`
    Search,
    /// `/v1/search/rerank`, also served at `/search/rerank`
    SearchRerank,
    /// `/embed`
    Embed,
    /// `/openapi.json`: this API's OpenAPI document
    OpenApi,
    /// `/metrics`: the node's Prometheus metrics
    Metrics,
    /// `/dashboard`: the operator's dashboard page
    Dashboard,
    /// `/dashboard/{asset}`: its script and style sheet
    DashboardAsset,
}

const GET: &[Method] = &[Method::GET];
const PUT: &[Method] = &[Method::PUT];
const POST: &[Method] = &[Method::POST];
const GET_POST: &[Method] = &[Method::GET, Method::POST];
const GET_PUT: &[Method] = &[Method::GET, Method::PUT];
const GET_DELETE: &[Method] = &[Method::GET, Method::DELETE];
const GET_PATCH_DELETE: &[Method] = &[Method::GET, Method::PATCH, Method::DELETE];
const DELETE: &[Method] = &[Method::DELETE];

impl Endpoint {
    /// Every endpoint, in [`Endpoint::index`] order.
    pub const ALL: [Endpoint; 36] = [
        Endpoint::Healthz,
        Endpoint::Readyz,
        Endpoint::AdminKeys,
        Endpoint::AdminKey,
        Endpoint::AdminStats,
        Endpoint::CatalogTable,
        Endpoint::CatalogTableNamed,
        Endpoint::CatalogTableField,
        Endpoint::CatalogItem,
        Endpoint::CatalogItems,
        Endpoint::CatalogItemNamed,
        Endpoint::Users,
        Endpoint::User,
        Endpoint::UserState,
        Endpoint::Session,
        Endpoint::Events,
        Endpoint::Event,
        Endpoint::InternalEvents,
        Endpoint::InternalSessionClaim,
        Endpoint::Engagement,
        Endpoint::Recommend,
        Endpoint::RecommendModule,
        Endpoint::AdminRetrain,
        Endpoint::AdminCompact,
        Endpoint::AdminBackup,
        Endpoint::AdminExperiments,
        Endpoint::AdminExperiment,
        Endpoint::AdminExperimentStop,
        Endpoint::Chat,
        Endpoint::Search,
        Endpoint::SearchRerank,
        Endpoint::Embed,
        Endpoint::OpenApi,
        Endpoint::Metrics,
        Endpoint::Dashboard,
        Endpoint::DashboardAsset,
    ];

    /// Its position in [`Endpoint::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its path pattern, as the SPEC writes it.
    pub fn pattern(self) -> &'static str {
        match self {
            Endpoint::Healthz => "/healthz",
            Endpoint::Readyz => "/readyz",
            Endpoint::AdminKeys => "/v1/admin/keys",
            Endpoint::AdminKey => "/v1/admin/keys/{id}",
            Endpoint::AdminStats => "/v1/admin/stats",
            Endpoint::CatalogTable => "/v1/catalog/table",
            Endpoint::CatalogTableNamed => "/v1/catalog/table/{name}",
            Endpoint::CatalogTableField => "/v1/catalog/table/{name}/fields/{field}",
            Endpoint::CatalogItem => "/v1/catalog/item",
            Endpoint::CatalogItems => "/v1/catalog/items",
            Endpoint::CatalogItemNamed => "/v1/catalog/item/{table}/{id}",
            Endpoint::Users => "/v1/users",
            Endpoint::User => "/v1/users/{uid}",
            Endpoint::UserState => "/v1/users/{uid}/state",
            Endpoint::Session => "/v1/sessions/{sid}",
            Endpoint::Events => "/v1/events",
            Endpoint::Event => "/v1/events/{id}",
            Endpoint::InternalEvents => "/v1/internal/events",
            Endpoint::InternalSessionClaim => "/v1/internal/sessions/claim",
            Endpoint::Engagement => "/catalog/engagement",
            Endpoint::Recommend => "/v1/recommend",
            Endpoint::RecommendModule => "/v1/recommend/module",
            Endpoint::AdminRetrain => "/v1/admin/models/retrain",
            Endpoint::AdminCompact => "/v1/admin/compact",
            Endpoint::AdminBackup => "/v1/admin/backup",
            Endpoint::AdminExperiments => "/v1/admin/experiments",
            Endpoint::AdminExperiment => "/v1/admin/experiments/{id}",
            Endpoint::AdminExperimentStop => "/v1/admin/experiments/{id}/stop",
            Endpoint::Chat => "/chat",
            Endpoint::Search => "/v1/search",
            Endpoint::SearchRerank => "/v1/search/rerank",
            Endpoint::Embed => "/embed",
            Endpoint::OpenApi => "/openapi.json",
            Endpoint::Metrics => "/metrics",
            Endpoint::Dashboard => "/dashboard",
            Endpoint::DashboardAsset => "/dashboard/{asset}",
        }
    }

    /// The other paths this endpoint is served at: every route outside `/v1` is served
    /// under `/v1` too, and the other way round where the SPEC's examples use it.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Endpoint::Engagement => &["/cds/engagement", "/v1/catalog/engagement", "/v1/cds/engagement"],
            Endpoint::Chat => &["/v1/chat"],
            Endpoint::SearchRerank => &["/search/rerank"],
            Endpoint::Embed => &["/v1/embed"],
            _ => &[],
        }
    }

    /// Matches a path; the returned strings are the percent-decoded path parameters.
    pub fn match_path(path: &str) -> Option<(Endpoint, Vec<String>)> {
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        let endpoint = match segments.as_slice() {
            ["healthz"] => Endpoint::Healthz,
            ["readyz"] => Endpoint::Readyz,
            ["v1", "admin", "keys"] => Endpoint::AdminKeys,
            ["v1", "admin", "keys", _] => Endpoint::AdminKey,
            ["v1", "admin", "stats"] => Endpoint::AdminStats,
            ["v1", "admin", "models", "retrain"] => Endpoint::AdminRetrain,
            ["v1", "admin", "compact"] => Endpoint::AdminCompact,
            ["v1", "admin", "backup"] => Endpoint::AdminBackup,
            ["v1", "admin", "experiments"] => Endpoint::AdminExperiments,
            ["v1", "admin", "experiments", _] => Endpoint::AdminExperiment,
            ["v1", "admin", "experiments", _, "stop"] => Endpoint::AdminExperimentStop,
            ["v1", "catalog", "table"] => Endpoint::CatalogTable,
            ["v1", "catalog", "table", _] => Endpoint::CatalogTableNamed,
            ["v1", "catalog", "table", _, "fields", _] => Endpoint::CatalogTableField,
            ["v1", "catalog", "item"] => Endpoint::CatalogItem,
            ["v1", "catalog", "items"] => Endpoint::CatalogItems,
            ["v1", "catalog", "item", _, _] => Endpoint::CatalogItemNamed,
            ["v1", "users"] => Endpoint::Users,
            ["v1", "users", _] => Endpoint::User,
            ["v1", "users", _, "state"] => Endpoint::UserState,
            ["v1", "sessions", _] => Endpoint::Session,
            ["v1", "events"] => Endpoint::Events,
            ["v1", "events", _] => Endpoint::Event,
            ["v1", "internal", "events"] => Endpoint::InternalEvents,
            ["v1", "internal", "sessions", "claim"] => Endpoint::InternalSessionClaim,
            // The SPEC's routes outside /v1 are served under /v1 too, and the other way round.
            ["catalog" | "cds", "engagement"] | ["v1", "catalog" | "cds", "engagement"] => Endpoint::Engagement,
            ["v1", "recommend"] => Endpoint::Recommend,
            ["v1", "recommend", "module"] => Endpoint::RecommendModule,
            ["chat"] | ["v1", "chat"] => Endpoint::Chat,
            ["v1", "search"] => Endpoint::Search,
            ["v1", "search", "rerank"] | ["search", "rerank"] => Endpoint::SearchRerank,
            ["embed"] | ["v1", "embed"] => Endpoint::Embed,
            ["openapi.json"] => Endpoint::OpenApi,
            ["metrics"] => Endpoint::Metrics,
            ["dashboard"] => Endpoint::Dashboard,
            ["dashboard", _] => Endpoint::DashboardAsset,
            _ => return None,
        };
        let params = match endpoint {
            Endpoint::AdminKey
            | Endpoint::CatalogTableNamed
            | Endpoint::User
            | Endpoint::Session
            | Endpoint::Event
            | Endpoint::AdminExperiment
            | Endpoint::DashboardAsset => {
                vec![segments[segments.len() - 1]]
            }
            Endpoint::UserState => vec![segments[2]],
            Endpoint::AdminExperimentStop => vec![segments[3]],
            Endpoint::CatalogTableField => vec![segments[3], segments[5]],
            Endpoint::CatalogItemNamed => vec![segments[3], segments[4]],
            _ => Vec::new(),
        };
        let decoded: Option<Vec<String>> = params
            .into_iter()
            .map(|p| {
                percent_encoding::percent_decode_str(p)
                    .decode_utf8()
                    .ok()
                    .map(|s| s.into_owned())
            })
            .collect();
        // A parameter that is empty or not UTF-8 names nothing that can exist.
        decoded
            .filter(|params| params.iter().all(|p| !p.is_empty()))
            .map(|params| (endpoint, params))
    }

    /// The methods this endpoint takes.
    pub fn methods(self) -> &'static [Method] {
        match self {
            Endpoint::Healthz
            | Endpoint::Readyz
            | Endpoint::OpenApi
            | Endpoint::Metrics
            | Endpoint::Dashboard
            | Endpoint::DashboardAsset => GET,
            Endpoint::AdminKeys | Endpoint::AdminBackup | Endpoint::AdminExperiments => GET_POST,
            Endpoint::AdminKey => DELETE,
            Endpoint::CatalogTable => GET_PUT,
            Endpoint::CatalogTableField | Endpoint::CatalogItem | Endpoint::CatalogItems => PUT,
            Endpoint::CatalogTableNamed => GET_DELETE,
            Endpoint::CatalogItemNamed | Endpoint::User => GET_PATCH_DELETE,
            Endpoint::Users
            | Endpoint::Events
            | Endpoint::InternalEvents
            | Endpoint::InternalSessionClaim
            | Endpoint::Engagement
            | Endpoint::Recommend
            | Endpoint::RecommendModule
            | Endpoint::Search
            | Endpoint::SearchRerank
            | Endpoint::AdminRetrain
            | Endpoint::AdminCompact
            | Endpoint::AdminExperimentStop
            | Endpoint::Embed
            | Endpoint::Chat => POST,
            Endpoint::UserState
            | Endpoint::Session
            | Endpoint::Event
            | Endpoint::AdminStats
            | Endpoint::AdminExperiment => GET,
        }
    }

    /// The scope a method on this endpoint needs; `None` for the open probes and the
    /// API document.
    pub fn scope(self, method: &Method) -> Option<&'static str> {
        Some(match self {
            // The dashboard's files are public; what the page shows needs its key.
            Endpoint::Healthz
            | Endpoint::Readyz
            | Endpoint::OpenApi
            | Endpoint::Dashboard
            | Endpoint::DashboardAsset => return None,
            Endpoint::AdminKeys
            | Endpoint::AdminKey
            | Endpoint::AdminStats
            | Endpoint::AdminRetrain
            | Endpoint::AdminCompact
            | Endpoint::AdminBackup
            | Endpoint::AdminExperiments
            | Endpoint::AdminExperiment
            | Endpoint::AdminExperimentStop => "admin",
            Endpoint::CatalogTable | Endpoint::CatalogTableNamed | Endpoint::CatalogItemNamed
                if method == Method::GET =>
            {
                "catalog:read"
            }
            Endpoint::CatalogTable | Endpoint::CatalogTableField | Endpoint::CatalogItem | Endpoint::CatalogItems => {
                "catalog:write"
            }
            Endpoint::CatalogTableNamed | Endpoint::CatalogItemNamed => "catalog:write",
            Endpoint::User if method == Method::GET => "catalog:read",
            Endpoint::User | Endpoint::Users => "users:write",
            Endpoint::Events | Endpoint::Engagement | Endpoint::InternalEvents | Endpoint::InternalSessionClaim => {
                "events:write"
            }
            Endpoint::Recommend | Endpoint::RecommendModule => "recommend",
            Endpoint::Chat => "chat",
            Endpoint::Search | Endpoint::SearchRerank => "search",
            Endpoint::Embed => "embed",
            // Read-only, for a Prometheus scraper's key (`admin` implies it).
            Endpoint::Metrics => "metrics",
            // Live state and the raw log expose every user's behaviour: operators only.
            Endpoint::UserState | Endpoint::Session | Endpoint::Event => "admin",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_listed_once_and_its_pattern_routes_to_it() {
        for (position, endpoint) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(endpoint.index(), position, "{endpoint:?}");
            let path = endpoint
                .pattern()
                .split('/')
                .map(|segment| if segment.starts_with('{') { "x" } else { segment })
                .collect::<Vec<_>>()
                .join("/");
            let routed = Endpoint::match_path(&path).map(|(routed, _)| routed);
            assert_eq!(routed, Some(endpoint), "{path}");
            for alias in endpoint.aliases() {
                assert_eq!(
                    Endpoint::match_path(alias).map(|(routed, _)| routed),
                    Some(endpoint),
                    "{alias}"
                );
            }
        }
    }

    #[test]
    fn matches_paths_and_decodes_parameters() {
        assert_eq!(
            Endpoint::match_path("/v1/catalog/item/products/a%2Fb"),
            Some((Endpoint::CatalogItemNamed, vec!["products".into(), "a/b".into()]))
        );
        assert_eq!(
            Endpoint::match_path("/v1/users/u1"),
            Some((Endpoint::User, vec!["u1".into()]))
        );
        assert_eq!(
            Endpoint::match_path("/v1/catalog/table/t/fields/price"),
            Some((Endpoint::CatalogTableField, vec!["t".into(), "price".into()]))
        );
        assert_eq!(
            Endpoint::match_path("/v1/admin/keys/"),
            Some((Endpoint::AdminKeys, vec![]))
        );
        assert_eq!(
            Endpoint::match_path("/v1/admin/experiments/exp1/stop"),
            Some((Endpoint::AdminExperimentStop, vec!["exp1".into()]))
        );
        assert_eq!(Endpoint::match_path("/v1/nothing"), None);
        assert_eq!(Endpoint::match_path("/v1/users/%FF"), None);
    }

    #[test]
    fn scopes_follow_methods() {
        assert_eq!(Endpoint::User.scope(&Method::GET), Some("catalog:read"));
        assert_eq!(Endpoint::User.scope(&Method::DELETE), Some("users:write"));
        assert_eq!(Endpoint::Healthz.scope(&Method::GET), None);
    }
}
