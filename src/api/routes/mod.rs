//! The route table: every endpoint is declared once, as one [`Route`] record in
//! [`ROUTES`] (`table.rs`): its path pattern and aliases, its group, and for each
//! method it takes the scope that method needs, its handler, its forwarding rule and
//! its OpenAPI operation. The rest of the frontend is derived from the table, as
//! axum's `Router` makes cross-cutting concerns layers over one table rather than arms
//! in every `match`: path matching ([`match_path`]), 405 and scope checks
//! (`api::admit`), forwarding to the owner node (`forward::by_rule`), the OpenAPI
//! document (`openapi::document`) and the request-time stats (`request_times`).
//!
//! A new endpoint is its record in `table.rs`, its handler (an `async fn(&AppState,
//! ApiRequest)` in the endpoint's file) and its service method.

use std::sync::OnceLock;

use futures::future::BoxFuture;
use hyper::Method;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

use super::openapi::Schemas;
use super::{ApiError, ApiRequest, AppState, HttpResponse};

/// Turns `async fn(&AppState, ApiRequest) -> Result<HttpResponse, ApiError>` into a
/// [`Handler`]: the future it returns is boxed, so every handler has one type.
macro_rules! handler {
    ($function:path) => {
        |state, request| Box::pin($function(state, request))
    };
}

mod table;

pub use table::{INTERNAL_EVENTS_PATH, ROUTES};

/// Serves one method of one endpoint, once the request is routed, authorized and its
/// body read.
pub type Handler = for<'a> fn(&'a AppState, ApiRequest) -> BoxFuture<'a, Result<HttpResponse, ApiError>>;

/// Adds a body's schema (with those it refers to) to the document's components and
/// refers to it: `Schemas::of::<T>`.
pub type SchemaOf = fn(&mut Schemas) -> RefOr<Schema>;

/// One endpoint: where it is served, and what each of its methods needs, does and is
/// documented as.
pub struct Route {
    /// Its name: the OpenAPI operation ids are `{method}_{name}` (`get_AdminKeys`).
    pub name: &'static str,
    /// Its path pattern, as the SPEC writes it (`{name}` is a path parameter); also its
    /// label in the request-time stats of `/v1/admin/stats` and in the request metrics.
    pub pattern: &'static str,
    /// The other paths it is served at: every route outside `/v1` is served under `/v1`
    /// too, and the other way round where the SPEC's examples use it.
    pub aliases: &'static [&'static str],
    /// The family it belongs to: the tag of its operations in the document.
    pub group: Group,
    /// The methods it takes, in the order the document lists them.
    pub methods: &'static [MethodRoute],
    /// A server-side deadline longer than `server.request_timeout_ms`, for an endpoint
    /// that answers when long work is done (never shorter than the configured one).
    pub timeout_ms: Option<u64>,
    /// The values its path parameters are limited to when they are a fixed set
    /// (documented as an enumeration); any non-empty string otherwise.
    pub parameter_values: Option<fn() -> Vec<&'static str>>,
    /// The error statuses its operations document, each with its description.
    pub errors: &'static [(u16, &'static str)],
}

/// One method of an endpoint.
pub struct MethodRoute {
    pub method: Method,
    /// The scope a key needs; `None`: open to any client, without a key.
    pub scope: Option<&'static str>,
    pub handler: Handler,
    /// Where the request is served in a cluster.
    pub forward: Forward,
    /// How the OpenAPI document describes it.
    pub operation: Operation,
}

/// Where a request is served in a cluster (a single node serves everything itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// By the node that received it.
    Here,
    /// By the node owning the live state the body names (`user_id`, else `session_id`,
    /// else `conversation_id`); a session another node claimed, by that node.
    ByBodyKey,
    /// By the node owning the user whose uid is the path's first parameter.
    ByPathUid,
}

/// The families of endpoints: the document's tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Probes, this document, metrics and the dashboard.
    Meta,
    Admin,
    Catalog,
    Users,
    Events,
    /// What the nodes of a cluster ask each other.
    Internal,
    Recommend,
    /// Search, rerank, chat and embed.
    Search,
}

impl Group {
    /// Its tag in the document.
    pub fn tag(self) -> &'static str {
        match self {
            Group::Meta => "meta",
            Group::Admin => "admin",
            Group::Catalog => "catalog",
            Group::Users => "users",
            Group::Events => "events",
            Group::Internal => "internal",
            Group::Recommend => "recommend",
            Group::Search => "search",
        }
    }
}

/// What one method of one endpoint takes and answers, for the document.
pub struct Operation {
    pub summary: &'static str,
    /// The request body, when the method reads one.
    pub request_body: Option<RequestBody>,
    /// The status of success.
    pub success_status: u16,
    /// The schema of the success body.
    pub success_body: SchemaOf,
    /// The media types of the success body.
    pub success_media_types: &'static [&'static str],
    /// Optional query parameters.
    pub query: &'static [Query],
}

/// A request body, for the document.
pub struct RequestBody {
    pub schema: SchemaOf,
    /// False when an empty body stands for the defaults.
    pub required: bool,
}

/// An optional query parameter, for the document.
pub struct Query {
    pub name: &'static str,
    pub description: &'static str,
    /// The values it takes; none: a boolean flag.
    pub values: &'static [&'static str],
}

impl Route {
    /// What the table's records leave unsaid: no alias, no longer deadline, path
    /// parameters of any value, every error status.
    pub const DEFAULT: Route = Route {
        name: "",
        pattern: "",
        aliases: &[],
        group: Group::Meta,
        methods: &[],
        timeout_ms: None,
        parameter_values: None,
        errors: super::openapi::EVERY_ERROR,
    };

    /// Every path it is served at: its pattern, then its aliases.
    pub fn paths(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.pattern).chain(self.aliases.iter().copied())
    }

    /// Its method `method`, if it takes it.
    pub fn method(&self, method: &Method) -> Option<&MethodRoute> {
        self.methods.iter().find(|route| route.method == *method)
    }

    /// The methods it takes, for a 405's `Allow`.
    pub fn allowed_methods(&self) -> Vec<Method> {
        self.methods.iter().map(|route| route.method.clone()).collect()
    }

    /// Whether a method of it needs a key (then a request without one learns nothing
    /// about its methods).
    pub fn needs_a_key(&self) -> bool {
        self.methods.iter().any(|route| route.scope.is_some())
    }

    /// Its label in the request-time stats: its pattern.
    pub fn stats_label(&self) -> &'static str {
        self.pattern
    }
}

impl MethodRoute {
    const fn new(method: Method, scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute {
            method,
            scope,
            handler,
            forward: Forward::Here,
            operation,
        }
    }

    pub const fn get(scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute::new(Method::GET, scope, handler, operation)
    }

    pub const fn post(scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute::new(Method::POST, scope, handler, operation)
    }

    pub const fn put(scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute::new(Method::PUT, scope, handler, operation)
    }

    pub const fn patch(scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute::new(Method::PATCH, scope, handler, operation)
    }

    pub const fn delete(scope: Option<&'static str>, handler: Handler, operation: Operation) -> MethodRoute {
        MethodRoute::new(Method::DELETE, scope, handler, operation)
    }

    /// Served where `forward` says in a cluster.
    pub const fn forwarded(mut self, forward: Forward) -> MethodRoute {
        self.forward = forward;
        self
    }
}

impl Operation {
    /// Answers `status` with a JSON body of schema `body`, reads no body, takes no query.
    pub const fn answers(summary: &'static str, status: u16, body: SchemaOf) -> Operation {
        Operation {
            summary,
            request_body: None,
            success_status: status,
            success_body: body,
            success_media_types: &["application/json"],
            query: &[],
        }
    }

    /// Reads a JSON body of schema `body`.
    pub const fn reads(mut self, body: SchemaOf) -> Operation {
        self.request_body = Some(RequestBody {
            schema: body,
            required: true,
        });
        self
    }

    /// Reads a JSON body of schema `body`, or none for the defaults.
    pub const fn reads_optionally(mut self, body: SchemaOf) -> Operation {
        self.request_body = Some(RequestBody {
            schema: body,
            required: false,
        });
        self
    }

    /// Answers in `media_types` rather than JSON.
    pub const fn in_media_types(mut self, media_types: &'static [&'static str]) -> Operation {
        self.success_media_types = media_types;
        self
    }

    /// Takes the query parameters `query`.
    pub const fn with_query(mut self, query: &'static [Query]) -> Operation {
        self.query = query;
        self
    }
}

/// A routed request path.
#[derive(Debug)]
pub struct Matched {
    /// The route's position in [`ROUTES`] (the request-time stats are kept by it).
    pub index: usize,
    pub route: &'static Route,
    /// The percent-decoded path parameters, in path order.
    pub params: Vec<String>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name)
    }
}

/// A segment of a path of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Literal(&'static str),
    Parameter,
}

/// One path of the table (a pattern or an alias) in segments, with its route's position.
struct TablePath {
    route: usize,
    segments: Vec<Segment>,
}

/// Every path of the table in segments, split once.
fn table_paths() -> &'static [TablePath] {
    static PATHS: OnceLock<Vec<TablePath>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let mut paths = Vec::new();
        for (route, record) in ROUTES.iter().enumerate() {
            for path in record.paths() {
                paths.push(TablePath {
                    route,
                    segments: segments(path).map(segment).collect(),
                });
            }
        }
        paths
    })
}

/// The segments of a path after its leading `/`, trailing slashes aside.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.trim_end_matches('/').split('/').skip(1)
}

fn segment(text: &'static str) -> Segment {
    match text.starts_with('{') && text.ends_with('}') {
        true => Segment::Parameter,
        false => Segment::Literal(text),
    }
}

impl TablePath {
    /// The raw path parameters of `segments` when they are a request for this path.
    fn parameters<'a>(&self, segments: &[&'a str]) -> Option<Vec<&'a str>> {
        if segments.len() != self.segments.len() {
            return None;
        }
        let mut parameters = Vec::new();
        for (expected, actual) in self.segments.iter().zip(segments) {
            match expected {
                Segment::Literal(literal) if literal != actual => return None,
                Segment::Literal(_) => {}
                Segment::Parameter => parameters.push(*actual),
            }
        }
        Some(parameters)
    }
}

/// The route of a request path, with its percent-decoded parameters. `None` for no
/// route, and for a parameter that is empty or not UTF-8 (it names nothing that can
/// exist).
pub fn match_path(path: &str) -> Option<Matched> {
    let segments: Vec<&str> = segments(path).collect();
    let (index, parameters) = table_paths()
        .iter()
        .find_map(|table_path| Some((table_path.route, table_path.parameters(&segments)?)))?;
    let params = parameters
        .into_iter()
        .map(|parameter| {
            let decoded = percent_encoding::percent_decode_str(parameter).decode_utf8().ok()?;
            (!decoded.is_empty()).then(|| decoded.into_owned())
        })
        .collect::<Option<Vec<String>>>()?;
    Some(Matched {
        index,
        route: &ROUTES[index],
        params,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A request path for `path`, each parameter `x`.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|segment| if segment.starts_with('{') { "x" } else { segment })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn every_pattern_and_alias_routes_to_its_record() {
        for (index, route) in ROUTES.iter().enumerate() {
            for path in route.paths() {
                let matched = match_path(&concrete(path)).unwrap_or_else(|| panic!("{path} routes nowhere"));
                assert_eq!(matched.index, index, "{path} routes to {:?}", matched.route);
                assert!(std::ptr::eq(matched.route, route), "{path}");
                let parameters = path.split('/').filter(|segment| segment.starts_with('{')).count();
                assert_eq!(matched.params, vec!["x"; parameters], "{path}");
            }
        }
    }

    #[test]
    fn no_request_path_can_match_two_paths_of_the_table() {
        let paths = table_paths();
        for (at, first) in paths.iter().enumerate() {
            for second in &paths[at + 1..] {
                let overlap = first.segments.len() == second.segments.len()
                    && first.segments.iter().zip(&second.segments).all(|pair| match pair {
                        (Segment::Literal(a), Segment::Literal(b)) => a == b,
                        _ => true,
                    });
                assert!(
                    !overlap,
                    "{:?} and {:?} can match the same path",
                    ROUTES[first.route], ROUTES[second.route]
                );
            }
        }
    }

    #[test]
    fn names_patterns_and_stats_labels_are_unique_and_methods_each_once() {
        let mut names = BTreeSet::new();
        let mut paths = BTreeSet::new();
        let mut labels = BTreeSet::new();
        for route in ROUTES {
            assert!(!route.name.is_empty() && route.pattern.starts_with('/'), "{route:?}");
            assert!(names.insert(route.name), "{} twice", route.name);
            assert!(labels.insert(route.stats_label()), "{} twice", route.stats_label());
            for path in route.paths() {
                assert!(paths.insert(path), "{path} twice");
            }
            assert!(!route.methods.is_empty(), "{route:?} takes no method");
            let methods: BTreeSet<&str> = route.methods.iter().map(|method| method.method.as_str()).collect();
            assert_eq!(methods.len(), route.methods.len(), "{route:?} lists a method twice");
            assert!(
                methods.is_subset(&BTreeSet::from(["GET", "POST", "PUT", "PATCH", "DELETE"])),
                "{route:?}: {methods:?}"
            );
            for method in route.methods {
                assert!(!method.operation.summary.is_empty(), "{route:?} {}", method.method);
            }
        }
    }

    #[test]
    fn matches_paths_and_decodes_parameters() {
        let routed = |path: &str| match_path(path).map(|matched| (matched.route.name, matched.params));
        assert_eq!(
            routed("/v1/catalog/item/products/a%2Fb"),
            Some(("CatalogItemNamed", vec!["products".into(), "a/b".into()]))
        );
        assert_eq!(routed("/v1/users/u1"), Some(("User", vec!["u1".into()])));
        assert_eq!(routed("/v1/users/u1/state"), Some(("UserState", vec!["u1".into()])));
        assert_eq!(
            routed("/v1/catalog/table/t/fields/price"),
            Some(("CatalogTableField", vec!["t".into(), "price".into()]))
        );
        assert_eq!(routed("/v1/admin/keys/"), Some(("AdminKeys", vec![])));
        assert_eq!(
            routed("/v1/admin/experiments/exp1/stop"),
            Some(("AdminExperimentStop", vec!["exp1".into()]))
        );
        assert_eq!(routed("/cds/engagement"), Some(("Engagement", vec![])));
        assert_eq!(routed("/v1/nothing"), None);
        assert_eq!(routed("/"), None);
        assert_eq!(routed("/v1/users/%FF"), None);
        assert_eq!(routed("/v1/users//state"), None, "an empty parameter");
    }

    /// The scope each method needs, as the table declares it.
    fn scope(name: &str, method: Method) -> Option<&'static str> {
        let route = ROUTES
            .iter()
            .find(|route| route.name == name)
            .expect("a route of that name");
        route.method(&method).expect("a method of the route").scope
    }

    #[test]
    fn scopes_follow_methods_and_are_known_scopes() {
        assert_eq!(scope("User", Method::GET), Some("catalog:read"));
        assert_eq!(scope("User", Method::PATCH), Some("users:write"));
        assert_eq!(scope("User", Method::DELETE), Some("users:write"));
        assert_eq!(scope("CatalogTable", Method::GET), Some("catalog:read"));
        assert_eq!(scope("CatalogTable", Method::PUT), Some("catalog:write"));
        assert_eq!(scope("CatalogItemNamed", Method::DELETE), Some("catalog:write"));
        assert_eq!(scope("Metrics", Method::GET), Some("metrics"));
        assert_eq!(scope("Session", Method::GET), Some("admin"));
        let open: BTreeSet<&str> = ROUTES
            .iter()
            .filter(|route| !route.needs_a_key())
            .map(|route| route.name)
            .collect();
        assert_eq!(
            open,
            BTreeSet::from(["Healthz", "Readyz", "OpenApi", "Dashboard", "DashboardAsset"])
        );
        for route in ROUTES {
            for method in route.methods {
                if let Some(scope) = method.scope {
                    assert!(crate::domain::api_key::SCOPES.contains(&scope), "{route:?}: {scope}");
                }
            }
        }
    }

    #[test]
    fn forwarding_rules_are_declared_for_the_routes_that_need_another_nodes_state() {
        let mut forwarded = Vec::new();
        for route in ROUTES {
            for method in route.methods {
                if method.forward != Forward::Here {
                    forwarded.push((route.name, method.method.as_str(), method.forward));
                }
            }
        }
        assert_eq!(
            forwarded,
            [
                ("User", "DELETE", Forward::ByPathUid),
                ("UserState", "GET", Forward::ByPathUid),
                ("Recommend", "POST", Forward::ByBodyKey),
                ("RecommendModule", "POST", Forward::ByBodyKey),
                ("Chat", "POST", Forward::ByBodyKey),
                ("Search", "POST", Forward::ByBodyKey),
                ("SearchRerank", "POST", Forward::ByBodyKey),
            ]
        );
    }

    #[test]
    fn only_the_retrain_has_a_longer_deadline() {
        let longer: Vec<&str> = ROUTES
            .iter()
            .filter(|route| route.timeout_ms.is_some())
            .map(|route| route.name)
            .collect();
        assert_eq!(longer, ["AdminRetrain"]);
    }
}
