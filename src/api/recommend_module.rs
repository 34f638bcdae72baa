//! `POST /v1/recommend/module`: decodes the body into a [`ModulesRequest`] (422
//! naming a missing or badly typed field by its path, 400 for an empty `modules`),
//! ranks it with [`RankingService::rank_modules`] and answers the ranked modules.

use serde_json::{Map, Value};

use super::decode::{item_id, optional_bool, optional_string, request_context, rules};
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::modules::{ItemSpec, ModuleSpec, ModulesRequest};
use crate::service::recommend::MAX_CANDIDATES;

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let request = parse_request(&body)?;
    ok(&state.services.ranking.rank_modules(request).await?)
}

/// 422 for a missing or badly typed field (naming its path, e.g.
/// `modules[2].items[0].id`), 400 for an empty `modules`.
fn parse_request(body: &Map<String, Value>) -> Result<ModulesRequest, ApiError> {
    let required = |field: &str| {
        optional_string(body, field)?.ok_or_else(|| ApiError::validation(format!("\"{field}\" is required")))
    };
    let user_id = required("user_id")?;
    let session_id = optional_string(body, "session_id")?;
    let item_model_id = required("item_model_id")?;
    let module_model_id = required("module_model_id")?;
    let context = request_context(body)?;
    let include_deleted = optional_bool(body, "include_deleted")?.unwrap_or(false);
    let rules = rules(body)?;
    let modules = match body.get("modules") {
        None | Some(Value::Null) => return Err(ApiError::validation("\"modules\" is required")),
        Some(Value::Array(modules)) => modules,
        Some(_) => return Err(ApiError::validation("\"modules\" must be an array of objects")),
    };
    if modules.is_empty() {
        return Err(ApiError::InvalidCombination("\"modules\" must not be empty".into()));
    }
    if modules.len() > MAX_CANDIDATES {
        return Err(ApiError::validation(format!(
            "at most {MAX_CANDIDATES} modules per request"
        )));
    }
    let modules = modules
        .iter()
        .enumerate()
        .map(|(index, module)| parse_module(module, &format!("modules[{index}]")))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let items: usize = modules.iter().map(|module| module.items.len()).sum();
    if items > MAX_CANDIDATES {
        return Err(ApiError::validation(format!(
            "at most {MAX_CANDIDATES} items per request, over all modules"
        )));
    }
    Ok(ModulesRequest {
        user_id,
        session_id,
        item_model_id,
        module_model_id,
        context,
        modules,
        include_deleted,
        rules,
    })
}

fn parse_module(module: &Value, path: &str) -> Result<ModuleSpec, ApiError> {
    let Value::Object(module) = module else {
        return Err(ApiError::validation(format!("\"{path}\" must be an object")));
    };
    let id = item_id(module.get("id").unwrap_or(&Value::Null), &format!("{path}.id"))?;
    let items = match module.get("items") {
        None | Some(Value::Null) => return Err(ApiError::validation(format!("\"{path}.items\" is required"))),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::validation(format!(
                "\"{path}.items\" must be an array of objects"
            )))
        }
    };
    let items = items
        .iter()
        .enumerate()
        .map(|(index, item)| parse_item(item, &format!("{path}.items[{index}]")))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let is_pre_ranked = match module.get("is_pre_ranked") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(flag)) => Some(*flag),
        Some(_) => {
            return Err(ApiError::validation(format!(
                "\"{path}.is_pre_ranked\" must be a boolean"
            )))
        }
    };
    Ok(ModuleSpec {
        id,
        items,
        is_pre_ranked,
        fixed_position: optional_count(module, "fixed_position", path)?,
        limit: optional_count(module, "limit", path)?,
    })
}

fn parse_item(item: &Value, path: &str) -> Result<ItemSpec, ApiError> {
    let Value::Object(item) = item else {
        return Err(ApiError::validation(format!("\"{path}\" must be an object")));
    };
    Ok(ItemSpec {
        id: item_id(item.get("id").unwrap_or(&Value::Null), &format!("{path}.id"))?,
        fixed_position: optional_count(item, "fixed_position", path)?,
    })
}

/// An optional integer >= 0 (`fixed_position`, `limit`) of the object at `path`.
fn optional_count(object: &Map<String, Value>, field: &str, path: &str) -> Result<Option<usize>, ApiError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => crate::domain::whole_number(value)
            .map(|count| Some(usize::try_from(count).unwrap_or(usize::MAX)))
            .ok_or_else(|| ApiError::validation(format!("\"{path}.{field}\" must be an integer >= 0"))),
    }
}
