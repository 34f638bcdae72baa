//! Module ranking: rank modules (shelves, carousels, banners) and the items inside
//! them in one request. Items are scored by the item model, modules by the module
//! model plus their best item scores ([`module_score`]); pinned modules and items
//! are placed by [`place`], and every pin that could not land where it asked comes
//! back as a warning (DESIGN.md §7), never as an error.

use serde::Serialize;
use serde_json::{Map, Value};

use super::recommend::RankingService;
use super::recommend::{leaves_out_deleted, rule_stack, ExperimentArm, Profile};
use super::ServiceError;
use crate::domain::candidate::Candidate;
use crate::domain::rules::{Diversity, Rules};
use crate::ranking::modules::{module_score, place, Adjustment, Displacement, Pinned};
use crate::ranking::rules;
use crate::ranking::{rank, Model, Placed, RankContext, Ranked};

/// A module request, valid by the SPEC's rules.
#[derive(Debug, Clone)]
pub struct ModulesRequest {
    pub user_id: String,
    pub session_id: Option<String>,
    pub item_model_id: String,
    pub module_model_id: String,
    /// Free request context (region, device, ...).
    pub context: Map<String, Value>,
    /// At least one.
    pub modules: Vec<ModuleSpec>,
    /// Rank soft-deleted items too (by default they are left out of every module).
    pub include_deleted: bool,
    /// Business rules for the items of every module (with the item model's defaults).
    pub rules: Option<Rules>,
}

/// One module of the request.
#[derive(Debug, Clone)]
pub struct ModuleSpec {
    pub id: String,
    pub items: Vec<ItemSpec>,
    /// As sent: the response echoes it only when the request set it.
    pub is_pre_ranked: Option<bool>,
    pub fixed_position: Option<usize>,
    /// Most items returned, pinned ones included.
    pub limit: Option<usize>,
}

impl ModuleSpec {
    fn pre_ranked(&self) -> bool {
        self.is_pre_ranked == Some(true)
    }
}

/// One item of a module.
#[derive(Debug, Clone)]
pub struct ItemSpec {
    pub id: String,
    pub fixed_position: Option<usize>,
}

impl RankingService {
    /// Ranks the modules and the items inside them, places the pins, and records
    /// the items shown under a new `rec_id`.
    /// An `item_model_id` naming an experiment ranks the items with the arm's model.
    pub async fn rank_modules(&self, mut request: ModulesRequest) -> Result<RankedModules, ServiceError> {
        let user_id = Some(request.user_id.clone());
        let (item_model_id, assignment) = self.arm(request.item_model_id.clone(), &user_id, &request.session_id);
        request.item_model_id = item_model_id;
        let item_model = self.model(&request.item_model_id)?;
        let module_model = self.model(&request.module_model_id)?;
        let model_rules = self.rules(&request.item_model_id, request.rules.as_ref(), &[])?;
        let stack = rule_stack(&model_rules, request.rules.as_ref());
        let drop_deleted = leaves_out_deleted(item_model.as_ref(), request.include_deleted);
        if drop_deleted || !stack.is_empty() {
            // Pinned items too: a soft-deleted or excluded item is not shown anywhere.
            let items = self.engine.items();
            for module in &mut request.modules {
                let mut kept = Vec::with_capacity(module.items.len());
                for item in module.items.drain(..) {
                    let candidate = Candidate {
                        features: items.features(&item.id)?,
                        ..Candidate::new(item.id.clone(), Map::new())
                    };
                    if !(drop_deleted && candidate.is_deleted()) && rules::admits(&stack, &candidate) {
                        kept.push(item);
                    }
                }
                module.items = kept;
            }
        }
        let context = self
            .rank_context(
                Some(request.user_id.clone()),
                request.session_id.clone(),
                request.context.clone(),
                Profile::Made,
            )
            .await;
        // Every item left passes the filters: the items' ranking applies the boosts, and
        // each module its own diversity.
        let boosts: Vec<Rules> = stack
            .iter()
            .map(|rules| Rules {
                boosts: rules.boosts.clone(),
                ..Rules::default()
            })
            .collect();
        let boosts: Vec<&Rules> = boosts.iter().collect();
        let (item_scores, candidates) = self.score_items(item_model.as_ref(), &context, &request.modules, &boosts)?;
        let diversity = rules::diversity(&stack);
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
            warnings.push(PinWarning::new(adjustment, subject, placement.entries.len()));
        }

        let mut shown: Vec<Ranked> = Vec::new();
        let mut modules = Vec::with_capacity(request.modules.len());
        for index in placement.entries {
            let module = &request.modules[index];
            let items = arrange_items(module, &item_scores[index], &mut warnings, diversity, &candidates);
            shown.extend(items.iter().filter_map(|&item| item_scores[index][item].clone()));
            modules.push(RankedModule {
                id: module.id.clone(),
                score: module.fixed_position.is_none().then_some(module_scores[index]),
                fixed_position: module.fixed_position,
                is_pre_ranked: module.is_pre_ranked,
                items: items
                    .into_iter()
                    .map(|item| RankedModuleItem {
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
        let shown_items = modules.iter().map(|module| module.items.len()).sum();
        let rec_id = self.served(assignment.as_ref(), shown_items);
        self.record_shown(&rec_id, &request.item_model_id, &context, &shown);
        Ok(RankedModules {
            rec_id,
            modules,
            warnings,
            experiment: assignment.map(ExperimentArm::from),
        })
    }

    /// The item model's verdict on every unpinned item of every module, in one call so
    /// that scores are comparable across modules: `[module][item]`, `None` for pinned
    /// items. Items of pre-ranked modules are scored too: their order stays the
    /// caller's, but their scores rank the module. With the candidates scored, which
    /// the rankings' `index` points into.
    fn score_items(
        &self,
        model: &dyn Model,
        context: &RankContext,
        modules: &[ModuleSpec],
        boosts: &[&Rules],
    ) -> Result<(Vec<Vec<Option<Ranked>>>, Vec<Candidate>), ServiceError> {
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
        self.attach_features(&mut candidates)?;
        let ranked = rank(model, context, &candidates, None, boosts)?;
        let mut scores: Vec<Vec<Option<Ranked>>> =
            modules.iter().map(|module| vec![None; module.items.len()]).collect();
        for item in ranked {
            let (module_index, item_index) = owners[item.index];
            scores[module_index][item_index] = Some(item);
        }
        Ok((scores, candidates))
    }
}

/// Each module's [`module_score`]; pinned modules are not scored (their entry is 0).
fn score_modules(
    model: &dyn Model,
    context: &RankContext,
    modules: &[ModuleSpec],
    item_scores: &[Vec<Option<Ranked>>],
) -> Result<Vec<f32>, ServiceError> {
    let unpinned: Vec<usize> = (0..modules.len())
        .filter(|&index| modules[index].fixed_position.is_none())
        .collect();
    let candidates: Vec<Candidate> = unpinned
        .iter()
        .map(|&index| Candidate::new(modules[index].id.clone(), Map::new()))
        .collect();
    let ranked = rank(model, context, &candidates, None, &[])?;
    let mut scores = vec![0.0; modules.len()];
    for module in ranked {
        let index = unpinned[module.index];
        let items = item_scores[index].iter().flatten().map(|item| item.score);
        scores[index] = module_score(module.score, items);
    }
    Ok(scores)
}

/// The items of one module in response order (indexes into `module.items`): by score
/// (ties in request order) with the `diversity` rule, or, pre-ranked, in request
/// order; pins placed; `limit` applied last, so pinned items count toward it.
/// `candidates`: what the scores' `index` points into.
fn arrange_items(
    module: &ModuleSpec,
    scores: &[Option<Ranked>],
    warnings: &mut Vec<PinWarning>,
    diversity: Option<&Diversity>,
    candidates: &[Candidate],
) -> Vec<usize> {
    let mut ranked: Vec<usize> = (0..module.items.len())
        .filter(|&index| module.items[index].fixed_position.is_none())
        .collect();
    if !module.pre_ranked() {
        let score = |index: usize| scores[index].as_ref().map_or(f32::MIN, |ranked| ranked.score);
        ranked.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
        if let Some(diversity) = diversity {
            ranked = diversified(ranked, scores, diversity, candidates);
        }
    }
    let placement = place(ranked, pins(module.items.iter().map(|item| item.fixed_position)));
    for adjustment in &placement.adjustments {
        let item = &module.items[placement.entries[adjustment.applied]];
        let subject = format!("item {:?} of module {:?}", item.id, module.id);
        warnings.push(PinWarning::new(adjustment, subject, placement.entries.len()));
    }
    let mut items = placement.entries;
    items.truncate(module.limit.unwrap_or(usize::MAX));
    items
}

/// A module's ranked items (indexes into its items, best first) with the diversity
/// rule applied over them.
fn diversified(
    ranked: Vec<usize>,
    scores: &[Option<Ranked>],
    diversity: &Diversity,
    candidates: &[Candidate],
) -> Vec<usize> {
    let mut item_of = rustc_hash::FxHashMap::default();
    let placed = ranked
        .iter()
        .filter_map(|&item| {
            let scored = scores[item].as_ref()?;
            item_of.insert(scored.index, item);
            Some(Placed {
                index: scored.index,
                score: scored.score,
                boost: scored.boost,
            })
        })
        .collect();
    diversity
        .arrange(placed, candidates, usize::MAX)
        .into_iter()
        .filter_map(|placed| item_of.get(&placed.index).copied())
        .collect()
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

/// The modules in response order, the items in each, the pins that moved.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RankedModules {
    pub rec_id: String,
    pub modules: Vec<RankedModule>,
    /// Pins placed elsewhere than they asked; omitted when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PinWarning>,
    /// When `item_model_id` names an experiment: its id and the arm that ranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentArm>,
}

/// One module of the answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RankedModule {
    pub id: String,
    /// Omitted for a pinned module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The requested value, when the request set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_pre_ranked: Option<bool>,
    /// Always present, possibly empty.
    pub items: Vec<RankedModuleItem>,
}

/// One item of a module of the answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RankedModuleItem {
    pub id: String,
    /// Omitted for a pinned item and in a pre-ranked module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The requested value, when the request set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_position: Option<usize>,
}

/// A pin that did not land where it asked: `{code, message}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PinWarning {
    pub code: &'static str,
    pub message: String,
}

impl PinWarning {
    /// `subject` names the pinned entry (`module "m"`, `item "i" of module "m"`);
    /// `len` is the length of its list before any `limit`.
    fn new(adjustment: &Adjustment, subject: String, len: usize) -> PinWarning {
        let Adjustment { requested, applied, .. } = adjustment;
        match adjustment.reason {
            Displacement::Taken => PinWarning {
                code: "fixed_position_taken",
                message: format!("{subject} asked for fixed_position {requested}, which is taken; placed at {applied}"),
            },
            Displacement::OutOfRange => PinWarning {
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
                    id: item.id.as_str().into(),
                    score: index as f32,
                    echoed: Map::new(),
                    features: None,
                    weights: None,
                    boost: 0.0,
                })
            })
            .collect()
    }

    fn arranged(module: &ModuleSpec) -> Vec<&str> {
        let mut warnings: Vec<PinWarning> = Vec::new();
        let order = arrange_items(module, &rising_scores(module), &mut warnings, None, &[]);
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
