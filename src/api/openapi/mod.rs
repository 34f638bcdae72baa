//! `GET /openapi.json`: the OpenAPI 3.1 document of this API, derived from the route
//! table (every endpoint, its paths and methods, the scope each needs, each method's
//! operation) and from the Rust types of the bodies (`utoipa`'s `ToSchema`). A new
//! endpoint cannot be left out: the document lists every record of [`ROUTES`].

pub(super) mod bodies;

use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, PathsBuilder};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ComponentsBuilder, Object, Schema, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Ref, RefOr, Required};
use utoipa::ToSchema;

use self::bodies::ErrorBody;
use super::routes::{MethodRoute, Route, ROUTES};
use super::{ApiError, ApiRequest, AppState, HttpResponse};

/// `GET /openapi.json`.
pub async fn serve(_state: &AppState, _request: ApiRequest) -> Result<HttpResponse, ApiError> {
    Ok(response())
}

/// The document, built once.
pub fn response() -> HttpResponse {
    static DOCUMENT: OnceLock<Bytes> = OnceLock::new();
    let bytes = DOCUMENT.get_or_init(|| Bytes::from(document_json().to_string()));
    let mut response = Response::new(Full::new(bytes.clone()));
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The document as JSON, with the rules the Rust types cannot carry
/// ([`constraints`]) merged into their schemas.
pub fn document_json() -> serde_json::Value {
    let mut document = serde_json::to_value(document()).expect("the document serializes");
    for (name, extra) in constraints() {
        let schema = &mut document["components"]["schemas"][name];
        assert!(schema.is_object(), "constraints name an unknown schema {name}");
        merge(schema, extra);
    }
    document
}

/// Merges `extra` into `target`: objects key by key, arrays of the same length item
/// by item (the variants of a `oneOf`), anything else replaced.
fn merge(target: &mut serde_json::Value, extra: serde_json::Value) {
    use serde_json::Value;
    match (target, extra) {
        (Value::Object(target), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (Value::Array(target), Value::Array(extra)) if target.len() == extra.len() => {
            for (target, extra) in target.iter_mut().zip(extra) {
                merge(target, extra);
            }
        }
        (target, extra) => *target = extra,
    }
}

/// What a handler checks beyond each field's type: which fields go together, formats,
/// enumerations. Written as JSON Schema, merged into the derived schemas by name.
fn constraints() -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    let time = json!({
        "type": ["string", "number"],
        // Unix seconds, or milliseconds above 1e12; up to the end of year 9999.
        "anyOf": [
            {"type": "string", "format": "date-time"},
            {"type": "number", "minimum": 0, "exclusiveMaximum": 253_402_300_800_000_u64},
        ],
    });
    let field_names = json!({"maxLength": 256, "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]+$"});
    // Bulk rows: any JSON values; a row that is not valid is reported in the answer's
    // `failed` (or `rejected`), while the others are stored.
    let bulk = |field: &str| json!({"properties": {field: {"minItems": 1}}});
    // No control characters (Rust's `char::is_control`).
    let no_control = "^[^\\x00-\\x1f\\x7f-\\x9f]+$";
    let printable = json!({"type": "string", "minLength": 1, "pattern": no_control});
    let table_name = json!({"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"});
    // A custom field of a catalog row: never null, never an object.
    let custom_value = json!({"anyOf": [
        {"type": "string"}, {"type": "number"}, {"type": "boolean"},
        {"type": "array", "items": {"type": "string"}},
        {"type": "array", "items": {"type": "number"}, "minItems": 1},
    ]});
    let present = |field: &str, schema: serde_json::Value| json!({"required": [field], "properties": {field: schema}});
    let absent = |field: &str| json!({"properties": {field: {"type": "null"}}});
    vec![
        (
            "RecommendBody",
            json!({
                "allOf": [
                    {"oneOf": [present("model_id", json!({"type": "string"})), present("model_name", json!({"type": "string"}))]},
                    {"anyOf": [present("user_id", json!({"type": "string"})), present("session_id", json!({"type": "string"}))]},
                    {"oneOf": [present("item_ids", json!({"type": "array"})), present("items", json!({"type": "array"}))]},
                ],
            }),
        ),
        (
            "EmbedBody",
            json!({"anyOf": [absent("image_bytes"), absent("image_url")]}),
        ),
        ("EngagementEvent", json!({"properties": {"timestamp": time}})),
        (
            "EngagementEvents",
            json!({"oneOf": [{}, {"minItems": 1}, bulk("events")]}),
        ),
        ("V1Events", json!({"oneOf": [{}, bulk("events"), {"minItems": 1}]})),
        ("ItemRows", json!({"oneOf": [{"minItems": 1}, bulk("items")]})),
        ("UserRows", json!({"oneOf": [{}, {"minItems": 1}, bulk("users")]})),
        ("RowPatch", json!({"propertyNames": field_names})),
        (
            "EmbeddedEvent",
            json!({"properties": {"timestamp": {"format": "date-time"}}}),
        ),
        (
            "V1Event",
            json!({
                "properties": {
                    "original_timestamp": time, "rank": {"format": "uint64"},
                    "uid": {"minLength": 1}, "sid": {"minLength": 1}, "cid": {"minLength": 1},
                    "id": {"minLength": 1}, "rec_id": {"minLength": 1}, "item_id": {"minLength": 1},
                    "item_ids": {"items": {"minLength": 1}},
                },
                "anyOf": [present("uid", printable.clone()), present("sid", printable.clone()), present("cid", printable.clone())],
            }),
        ),
        (
            "ItemRow",
            json!({
                "properties": {
                    "id": printable, "_table": table_name, "created_at": time,
                    "is_deleted": {"type": "boolean"},
                },
                "additionalProperties": custom_value,
                "propertyNames": field_names,
            }),
        ),
        (
            "UserRow",
            json!({
                "properties": {"uid": printable, "is_deleted": {"type": "boolean"}},
                "additionalProperties": custom_value,
                "propertyNames": field_names,
            }),
        ),
        ("PutTableBody", json!({"properties": {"table_name": table_name}})),
        (
            "Relation",
            json!({"properties": {"field": {"minLength": 1}, "relation_table": table_name}}),
        ),
        (
            "RemapBody",
            json!({"properties": {"type": {"enum": crate::domain::catalog::FieldType::ALL.iter().map(|t| t.name()).collect::<Vec<_>>()}}}),
        ),
        (
            "CreateKeyBody",
            json!({"properties": {
                "name": {"minLength": 1},
                "scopes": {"minItems": 1, "items": {"enum": crate::domain::api_key::SCOPES}},
                "expires_at": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}, {"type": "null"}]},
                "rate_per_sec": {"format": "int64", "maximum": u32::MAX},
                "burst": {"format": "int64", "maximum": u32::MAX},
            }}),
        ),
        (
            "SearchBody",
            json!({"properties": {"tables": {"items": {"minLength": 1}}}}),
        ),
        (
            "CreateExperimentBody",
            json!({"properties": {
                "id": {"pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "arms": {"minItems": 2, "maxItems": crate::domain::experiment::MAX_ARMS},
            }}),
        ),
        (
            "ArmBody",
            json!({"properties": {
                "name": {"pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "share": {"exclusiveMinimum": 0, "maximum": 1},
            }}),
        ),
        (
            "ChatBody",
            json!({"properties": {
                "conversation_id": {"pattern": no_control}, "session_id": {"pattern": no_control},
                "user_id": {"pattern": no_control},
            }}),
        ),
    ]
}

/// The whole document: one path per endpoint pattern and alias, one operation per method.
pub fn document() -> OpenApi {
    let mut schemas = Schemas::default();
    let mut paths = PathsBuilder::new();
    for route in ROUTES {
        for method_route in route.methods {
            let operation = operation(route, method_route, &mut schemas);
            for path in route.paths() {
                paths = paths.path(
                    path,
                    PathItem::new(http_method(&method_route.method), operation.clone()),
                );
            }
        }
    }
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas.0)
        .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)))
        .security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "The legacy way to send a key.",
            ))),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("rankstream")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Real-time ranking: recommend, rank modules, search, rerank, chat and embed; \
                     catalog tables, items and users; behavioural events. Every error is \
                     `{code, message}`.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components))
        .build()
}

/// Every schema the document refers to, by name.
#[derive(Default)]
pub(super) struct Schemas(Vec<(String, RefOr<Schema>)>);

impl Schemas {
    /// A reference to `T`'s schema, which (with the ones it refers to) joins the components.
    pub fn of<T: ToSchema>(&mut self) -> RefOr<Schema> {
        let name = T::name().into_owned();
        if !self.0.iter().any(|(known, _)| *known == name) {
            self.0.push((name.clone(), T::schema()));
            T::schemas(&mut self.0);
        }
        RefOr::Ref(Ref::from_schema_name(name))
    }

    /// A string (a body that is not JSON: a page, a script, metrics).
    pub fn text(&mut self) -> RefOr<Schema> {
        RefOr::T(Schema::Object(Object::with_type(Type::String)))
    }
}

/// The document's operation for one method of one route.
fn operation(route: &Route, method_route: &MethodRoute, schemas: &mut Schemas) -> utoipa::openapi::path::Operation {
    let spec = &method_route.operation;
    let request = spec
        .request_body
        .as_ref()
        .map(|body| ((body.schema)(schemas), body.required));
    let body = (spec.success_body)(schemas);
    let error = schemas.of::<ErrorBody>();
    let mut builder = OperationBuilder::new()
        .summary(Some(spec.summary))
        .operation_id(Some(format!(
            "{}_{}",
            method_route.method.as_str().to_lowercase(),
            route.name
        )))
        .tag(route.group.tag());
    for name in path_parameters(route.pattern) {
        let schema = match route.parameter_values {
            Some(values) => utoipa::openapi::schema::ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(values()))
                .build(),
            None => non_empty_string(),
        };
        builder = builder.parameter(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema)),
        );
    }
    for query in spec.query {
        let schema = match query.values {
            [] => Object::with_type(Type::Boolean),
            values => utoipa::openapi::schema::ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(values.iter().copied()))
                .build(),
        };
        builder = builder.parameter(
            ParameterBuilder::new()
                .name(query.name)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(query.description))
                .schema(Some(schema)),
        );
    }
    if let Some((request, required)) = request {
        builder = builder.request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", Content::new(Some(request)))
                .required(Some(match required {
                    true => Required::True,
                    false => Required::False,
                }))
                .build(),
        ));
    }
    let mut success = ResponseBuilder::new().description("Success.");
    for media_type in spec.success_media_types {
        success = success.content(*media_type, Content::new(Some(body.clone())));
    }
    builder = builder.response(spec.success_status.to_string(), success.build());
    for (status, description) in route.errors {
        let mut response = ResponseBuilder::new()
            .description(*description)
            .content("application/json", Content::new(Some(error.clone())));
        if matches!(status, 429 | 503) {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(Object::with_type(Type::Integer))
                    .description(Some("Seconds to wait before retrying."))
                    .build(),
            );
        }
        builder = builder.response(status.to_string(), response.build());
    }
    if method_route.scope.is_some() {
        builder = builder
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
            .security(SecurityRequirement::new("api_key", Vec::<String>::new()));
    }
    builder.build()
}

/// The error statuses of a probe that answers while the node can serve.
pub(super) const PROBE_ERRORS: &[(u16, &str)] = &[(503, "Shutting down.")];
/// None: an open endpoint that always answers.
pub(super) const NO_ERRORS: &[(u16, &str)] = &[];
/// The error statuses of a file of a fixed set.
pub(super) const FILE_ERRORS: &[(u16, &str)] = &[(404, "No such file.")];
/// The error statuses of an endpoint that needs a key and reads a request.
pub(super) const EVERY_ERROR: &[(u16, &str)] = &[
    (400, "Malformed JSON, or invalid parameters."),
    (401, "Missing, invalid or expired key."),
    (403, "The key lacks the scope."),
    (404, "Nothing of that name."),
    (
        409,
        "Conflicts with what is stored (the bootstrap admin key cannot be revoked).",
    ),
    (408, "The request did not complete in time; retry with backoff."),
    (413, "The body is too large."),
    (422, "Input failed validation."),
    (429, "Rate quota exceeded; retry after `Retry-After`."),
    (500, "Storage or internal failure; retry with backoff."),
    (503, "A part of the service is unavailable; retry after `Retry-After`."),
];

/// The names of a pattern's `{parameters}`, in order.
fn path_parameters(pattern: &'static str) -> impl Iterator<Item = &'static str> {
    pattern
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
}

fn non_empty_string() -> Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .build()
}

fn http_method(method: &Method) -> HttpMethod {
    match *method {
        Method::GET => HttpMethod::Get,
        Method::POST => HttpMethod::Post,
        Method::PUT => HttpMethod::Put,
        Method::PATCH => HttpMethod::Patch,
        Method::DELETE => HttpMethod::Delete,
        _ => unreachable!("the route table uses GET, POST, PUT, PATCH and DELETE only"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every record of the route table, with every method, is in the document, tagged
    /// with its group and secured when its method needs a scope; and nothing else is.
    #[test]
    fn lists_every_record_of_the_route_table() {
        let document = document_json();
        assert_eq!(document["openapi"], "3.1.0");
        let paths = document["paths"].as_object().unwrap();
        let mut expected = 0;
        let mut operation_ids = BTreeSet::new();
        for route in ROUTES {
            for path in route.paths() {
                expected += 1;
                let item = paths.get(path).unwrap_or_else(|| panic!("{path} is missing"));
                let methods: Vec<&String> = item.as_object().unwrap().keys().collect();
                assert_eq!(methods.len(), route.methods.len(), "{path}: {methods:?}");
                for method_route in route.methods {
                    let method = &method_route.method;
                    let operation = &item[method.as_str().to_lowercase()];
                    assert!(operation["responses"].is_object(), "{method} {path}");
                    assert!(
                        operation["responses"][method_route.operation.success_status.to_string()].is_object(),
                        "{method} {path}"
                    );
                    assert_eq!(
                        operation["security"].is_array(),
                        method_route.scope.is_some(),
                        "{method} {path}"
                    );
                    assert_eq!(
                        operation["tags"],
                        serde_json::json!([route.group.tag()]),
                        "{method} {path}"
                    );
                    assert_eq!(
                        operation["requestBody"].is_object(),
                        method_route.operation.request_body.is_some(),
                        "{method} {path}"
                    );
                    operation_ids.insert(operation["operationId"].as_str().unwrap().to_owned());
                }
            }
        }
        assert_eq!(paths.len(), expected);
        let methods: usize = ROUTES.iter().map(|route| route.methods.len()).sum();
        assert_eq!(operation_ids.len(), methods, "one operation id per method of a route");
        // Every reference resolves.
        let text = document.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(document["components"]["schemas"][name].is_object(), "{name}");
        }
    }
}
