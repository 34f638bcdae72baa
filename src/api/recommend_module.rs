//! `POST /v1/recommend/module`: rank modules (shelves, carousels, banners) and the
//! items inside them in one request. Items are scored by the item model, modules by
//! the module model plus their best item scores ([`module_score`]); pinned modules
//! and items are placed by [`place`], and every pin that could not land where it
//! asked comes back as a warning (DESIGN.md §7), never as an error.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::recommend::{
    attach_features, item_id, model_error, optional_string, rank_context, record_shown, request_context, MAX_CANDIDATES,
};
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::ranking::modules::{module_score, place, Adjustment, Displacement, Pinned};
use crate::ranking::{rank, Candidate, Model, RankContext, Ranked};

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let request = ModuleRequest::parse(&body)?;
    let item_model = model(state, &request.item_model_id)?;
    let module_model = model(state, &request.module_model_id)?;
    let context = rank_context(
        state,
        Some(request.user_id.clone()),
        request.session_id.clone(),
        request.context.clone(),
    )
    .await;
    let item_scores = score_items(state, item_model.as_ref(), &context, &request.modules)?;
    let module_scores = score_modules(module_model.as_ref(), &context, &request.modules, &item_scores)?;

    let mut warnings = Vec::new();
    let mut ranked_modules: Vec<usize> = (0..request.modules.len())
        .filter(|&index| request.modules[index].fixed_position.is_none())
        .collect();
    ranked_modules.sort_by(|&a, &b| module_scores[b].total_cmp(&module_scores[a]).then(a.cmp(&b)));
    let pinned_modules = pins(request.modules.iter().map(|module| module.fixed_position));
    let placement = place(ranked_modules, pinned_modules);
    for adjustment in &placement.adjustments {
        let module = &request.modules[placement.entries[adjustment.applied]];
        let subject = format!("module {:?}", module.id);
        warnings.push(Warning::new(adjustment, subject, placement.entries.len()));
    }

    let mut shown: Vec<Ranked> = Vec::new();
    let mut modules = Vec::with_capacity(request.modules.len());
    for index in placement.entries {
        let module = &request.modules[index];
        let items = arrange_items(module, &item_scores[index], &mut warnings);
        shown.extend(items.iter().filter_map(|&item| item_scores[index][item].clone()));
        modules.push(ModuleOut {
            id: module.id.clone(),
            score: module.fixed_position.is_none().then_some(module_scores[index]),
            fixed_position: module.fixed_position,
            is_pre_ranked: module.is_pre_ranked,
            items: items
                .into_iter()
                .map(|item| ItemOut {
                    id: module.items[item].id.clone(),
                    score: match (module.pre_ranked(), &item_scores[index][item]) {
                        (false, Some(ranked)) => Some(ranked.score),
                        _ => None,
                    },
                    fixed_position: module.items[item].fixed_position,
                })
                .collect(),
        });
    }
    let rec_id = uuid::Uuid::now_v7().to_string();
    record_shown(state, &rec_id, &request.item_model_id, &context, &shown);
    ok(&ModuleResponse {
        rec_id,
        modules,
        warnings,
    })
}

/// A configured model, or 422 `unknown_model`.
fn model(state: &AppState, model_id: &str) -> Result<Arc<dyn Model>, ApiError> {
    state
        .models
        .get(model_id)
        .ok_or_else(|| ApiError::UnknownModel(format!("no model {model_id:?} is configured")))
}

/// The item model's verdict on every unpinned item of every module, in one call so
/// that scores are comparable across modules: `[module][item]`, `None` for pinned
/// items. Items of pre-ranked modules are scored too: their order stays the
/// caller's, but their scores rank the module.
fn score_items(
    state: &AppState,
    model: &dyn Model,
    context: &RankContext,
    modules: &[ModuleSpec],
) -> Result<Vec<Vec<Option<Ranked>>>, ApiError> {
    let mut owners = Vec::new();
    let mut candidates = Vec::new();
    for (module_index, module) in modules.iter().enumerate() {
        for (item_index, item) in module.items.iter().enumerate() {
            if item.fixed_position.is_none() {
                owners.push((module_index, item_index));
                candidates.push(Candidate::new(item.id.clone(), Map::new()));
            }
        }
    }
    attach_features(state, &mut candidates);
    let ranked = rank(model, context, &candidates, None).map_err(model_error)?;
    let mut scores: Vec<Vec<Option<Ranked>>> = modules.iter().map(|module| vec![None; module.items.len()]).collect();
    for item in ranked {
        let (module_index, item_index) = owners[item.index];
        scores[module_index][item_index] = Some(item);
    }
    Ok(scores)
}

/// Each module's [`module_score`]; pinned modules are not scored (their entry is 0).
fn score_modules(
    model: &dyn Model,
    context: &RankContext,
    modules: &[ModuleSpec],
    item_scores: &[Vec<Option<Ranked>>],
) -> Result<Vec<f32>, ApiError> {
    let unpinned: Vec<usize> = (0..modules.len())
        .filter(|&index| modules[index].fixed_position.is_none())
        .collect();
    let candidates: Vec<Candidate> = unpinned
        .iter()
        .map(|&index| Candidate::new(modules[index].id.clone(), Map::new()))
        .collect();
    let ranked = rank(model, context, &candidates, None).map_err(model_error)?;
    let mut scores = vec![0.0; modules.len()];
    for module in ranked {
        let index = unpinned[module.index];
        let items = item_scores[index].iter().flatten().map(|item| item.score);
        scores[index] = module_score(module.score, items);
    }
    Ok(scores)
}

/// The items of one module in response order (indexes into `module.items`): by score
/// (ties in request order) or, pre-ranked, in request order; pins placed; `limit`
/// applied last, so pinned items count toward it.
fn arrange_items(module: &ModuleSpec, scores: &[Option<Ranked>], warnings: &mut Vec<Warning>) -> Vec<usize> {
    let mut ranked: Vec<usize> = (0..module.items.len())
        .filter(|&index| module.items[index].fixed_position.is_none())
        .collect();
    if !module.pre_ranked() {
        let score = |index: usize| scores[index].as_ref().map_or(f32::MIN, |ranked| ranked.score);
        ranked.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    }
    let placement = place(ranked, pins(module.items.iter().map(|item| item.fixed_position)));
    for adjustment in &placement.adjustments {
        let item = &module.items[placement.entries[adjustment.applied]];
        let subject = format!("item {:?} of module {:?}", item.id, module.id);
        warnings.push(Warning::new(adjustment, subject, placement.entries.len()));
    }
    let mut items = placement.entries;
    items.truncate(module.limit.unwrap_or(usize::MAX));
    items
}

/// The pinned entries of a list, as indexes into it, in request order.
fn pins(positions: impl Iterator<Item = Option<usize>>) -> Vec<Pinned<usize>> {
    positions
        .enumerate()
        .filter_map(|(entry, position)| {
            Some(Pinned {
                entry,
                position: position?,
            })
        })
        .collect()
}

// ---- request ------------------------------------------------------------

/// The request body, validated.
struct ModuleRequest {
    user_id: String,
    session_id: Option<String>,
    item_model_id: String,
    module_model_id: String,
    /// Free request context (region, device, ...).
    context: Map<String, Value>,
    /// At least one.
    modules: Vec<ModuleSpec>,
}

/// One module of the request.
struct ModuleSpec {
    id: String,
    items: Vec<ItemSpec>,
    /// As sent: the response echoes it only when the request set it.
    is_pre_ranked: Option<bool>,
    fixed_position: Option<usize>,
    /// Most items returned, pinned ones included.
    limit: Option<usize>,
}

impl ModuleSpec {
    fn pre_ranked(&self) -> bool {
        self.is_pre_ranked == Some(true)
    }
}

/// One item of a module.
struct ItemSpec {
    id: String,
    fixed_position: Option<usize>,
}

impl ModuleRequest {
    /// 422 for a missing or badly typed field (naming its path, e.g.
    /// `modules[2].items[0].id`), 400 for an empty `modules`.
    fn parse(body: &Map<String, Value>) -> Result<ModuleRequest, ApiError> {
        let required = |field: &str| {
            optional_string(body, field)?.ok_or_else(|| ApiError::validation(format!("\"{field}\" is required")))
        };
        let user_id = required("user_id")?;
        let session_id = optional_string(body, "session_id")?;
        let item_model_id = required("item_model_id")?;
        let module_model_id = required("module_model_id")?;
        let context = request_context(body)?;
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
            .map(|(index, module)| ModuleSpec::parse(module, &format!("modules[{index}]")))
            .collect::<Result<Vec<_>, ApiError>>()?;
        let items: usize = modules.iter().map(|module| module.items.len()).sum();
        if items > MAX_CANDIDATES {
            return Err(ApiError::validation(format!(
                "at most {MAX_CANDIDATES} items per request, over all modules"
            )));
        }
        Ok(ModuleRequest {
            user_id,
            session_id,
            item_model_id,
            module_model_id,
            context,
            modules,
        })
    }
}

impl ModuleSpec {
    fn parse(module: &Value, path: &str) -> Result<ModuleSpec, ApiError> {
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
            .map(|(index, item)| ItemSpec::parse(item, &format!("{path}.items[{index}]")))
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
}

impl ItemSpec {
    fn parse(item: &Value, path: &str) -> Result<ItemSpec, ApiError> {
        let Value::Object(item) = item else {
            return Err(ApiError::validation(format!("\"{path}\" must be an object")));
        };
        Ok(ItemSpec {
            id: item_id(item.get("id").unwrap_or(&Value::Null), &format!("{path}.id"))?,
            fixed_position: optional_count(item, "fixed_position", path)?,
        })
    }
}

/// An optional integer >= 0 (`fixed_position`, `limit`) of the object at `path`.
fn optional_count(object: &Map<String, Value>, field: &str, path: &str) -> Result<Option<usize>, ApiError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(|count| Some(usize::try_from(count).unwrap_or(usize::MAX)))
            .ok_or_else(|| ApiError::validation(format!("\"{path}.{field}\" must be an integer >= 0"))),
    }
}

// ---- response -----------------------------------------------------------

#[derive(Serialize)]
struct ModuleResponse {
    rec_id: String,
    modules: Vec<ModuleOut>,
    /// Pins placed elsewhere than they asked; omitted when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Warning>,
}

#[derive(Serialize)]
struct ModuleOut {
    id: String,
    /// Omitted for a pinned module.
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f32>,
    /// The requested value, when the request set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    fixed_position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_pre_ranked: Option<bool>,
    /// Always present, possibly empty.
    items: Vec<ItemOut>,
}

#[derive(Serialize)]
struct ItemOut {
    id: String,
    /// Omitted for a pinned item and in a pre-ranked module.
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f32>,
    /// The requested value, when the request set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    fixed_position: Option<usize>,
}

/// A pin that did not land where it asked: `{code, message}`.
#[derive(Serialize)]
struct Warning {
    code: &'static str,
    message: String,
}

impl Warning {
    /// `subject` names the pinned entry (`module "m"`, `item "i" of module "m"`);
    /// `len` is the length of its list before any `limit`.
    fn new(adjustment: &Adjustment, subject: String, len: usize) -> Warning {
        let Adjustment { requested, applied, .. } = adjustment;
        match adjustment.reason {
            Displacement::Taken => Warning {
                code: "fixed_position_taken",
                message: format!("{subject} asked for fixed_position {requested}, which is taken; placed at {applied}"),
            },
            Displacement::OutOfRange => Warning {
                code: "fixed_position_out_of_range",
                message: format!(
                    "{subject} asked for fixed_position {requested}, past the last position ({}); placed at {applied}",
                    len - 1
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(is_pre_ranked: Option<bool>, limit: Option<usize>) -> ModuleSpec {
        let item = |id: &str, fixed_position| ItemSpec {
            id: id.into(),
            fixed_position,
        };
        ModuleSpec {
            id: "m".into(),
            items: vec![item("a", None), item("b", None), item("pin", Some(0)), item("c", None)],
            is_pre_ranked,
            fixed_position: None,
            limit,
        }
    }

    /// Scores rising in request order, so that score order reverses request order.
    fn rising_scores(module: &ModuleSpec) -> Vec<Option<Ranked>> {
        module
            .items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                item.fixed_position.is_none().then(|| Ranked {
                    index,
                    id: item.id.clone(),
                    score: index as f32,
                    echoed: Map::new(),
                    features: None,
                })
            })
            .collect()
    }

    fn arranged(module: &ModuleSpec) -> Vec<&str> {
        let mut warnings = Vec::new();
        let order = arrange_items(module, &rising_scores(module), &mut warnings);
        assert!(warnings.is_empty());
        order.into_iter().map(|index| module.items[index].id.as_str()).collect()
    }

    #[test]
    fn items_go_by_score_unless_pre_ranked() {
        assert_eq!(arranged(&module(None, None)), ["pin", "c", "b", "a"]);
        assert_eq!(arranged(&module(Some(false), None)), ["pin", "c", "b", "a"]);
        assert_eq!(arranged(&module(Some(true), None)), ["pin", "a", "b", "c"]);
    }

    #[test]
    fn limit_applies_after_placement() {
        assert_eq!(arranged(&module(None, Some(2))), ["pin", "c"]);
        assert_eq!(arranged(&module(Some(true), Some(0))), Vec::<&str>::new());
    }
}
