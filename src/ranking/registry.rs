//! The model registry file (`config/models.toml`): model ids, their kinds and
//! their default business rules.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;

use super::learned::{ConsumedPolicy, Learned, Weights};
use super::trained::TrainedSnapshots;
use super::{mock, Feature, Model, ModelRegistry, FEATURES};
use crate::domain::rules::{Rules, RULE_FIELDS};

/// The embedded registry, used when `training.models_file` is empty.
pub const DEFAULT_MODELS_TOML: &str = include_str!("../../config/models.toml");

#[derive(Debug, thiserror::Error)]
#[error("model registry: {0}")]
pub struct RegistryError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    models: BTreeMap<String, Entry>,
}

/// A model of one feature; `consumed` says what happens to items already bought.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Entry {
    Popularity {
        #[serde(default)]
        consumed: ConsumedPolicy,
    },
    Covisit {
        #[serde(default)]
        consumed: ConsumedPolicy,
    },
    Affinity {
        #[serde(default)]
        consumed: ConsumedPolicy,
    },
    Embedding {
        #[serde(default)]
        consumed: ConsumedPolicy,
    },
    /// Blends weigh bought items with the `consumed` feature (negative demotes).
    Blend {
        weights: BTreeMap<String, f64>,
    },
    Ltr {
        fallback: BTreeMap<String, f64>,
    },
    /// A blend whose popularity, affinity, embedding and bought-item weights the
    /// self-tuner chooses.
    Tuned {
        fallback: BTreeMap<String, f64>,
    },
}

fn weights(model_id: &str, named: &BTreeMap<String, f64>) -> Result<[f64; FEATURES], RegistryError> {
    let mut weights = [0.0; FEATURES];
    for (name, weight) in named {
        let feature = Feature::named(name).ok_or_else(|| {
            let known: Vec<&str> = Feature::ALL.iter().map(|f| f.name()).collect();
            RegistryError(format!(
                "{model_id}: unknown feature {name:?} (known: {})",
                known.join(", ")
            ))
        })?;
        if !weight.is_finite() {
            return Err(RegistryError(format!("{model_id}: weight of {name:?} must be finite")));
        }
        weights[feature as usize] = *weight;
    }
    if weights.iter().all(|weight| *weight == 0.0) {
        return Err(RegistryError(format!("{model_id}: every weight is 0")));
    }
    Ok(weights)
}

impl ModelRegistry {
    /// The models of a registry file, plus the SPEC's mock models.
    pub fn load(text: &str, trained: &TrainedSnapshots) -> Result<ModelRegistry, RegistryError> {
        let mut file: toml::Table = toml::from_str(text).map_err(|error| RegistryError(error.to_string()))?;
        let rules = take_rules(&mut file)?;
        let file: ModelsFile = toml::Value::Table(file)
            .try_into()
            .map_err(|error| RegistryError(error.to_string()))?;
        let mocks = mock::all();
        let mut models: HashMap<String, Arc<dyn Model>> = HashMap::new();
        for (id, entry) in file.models {
            if mocks.iter().any(|(mock, _)| *mock == id) {
                return Err(RegistryError(format!("{id} is a reserved mock model id")));
            }
            let weights = match entry {
                Entry::Popularity { consumed } => Weights::Single(Feature::Popularity, consumed),
                Entry::Covisit { consumed } => Weights::Single(Feature::Covisit, consumed),
                Entry::Affinity { consumed } => Weights::Single(Feature::Affinity, consumed),
                Entry::Embedding { consumed } => Weights::Single(Feature::Embedding, consumed),
                Entry::Blend { weights: named } => Weights::Blend(weights(&id, &named)?),
                Entry::Ltr { fallback } => Weights::Learned {
                    fallback: weights(&id, &fallback)?,
                },
                Entry::Tuned { fallback } => Weights::Tuned {
                    fallback: weights(&id, &fallback)?,
                },
            };
            let model = Learned {
                weights,
                trained: trained.clone(),
            };
            models.insert(id, Arc::new(model));
        }
        for (id, model) in mocks {
            models.insert(id.to_owned(), model);
        }
        Ok(ModelRegistry { models, rules })
    }
}

/// Takes each model's business rules (`exclude_ids`, `filters`, `boosts`,
/// `diversity`: the request fields of the same names) out of its entry.
fn take_rules(file: &mut toml::Table) -> Result<HashMap<String, Arc<Rules>>, RegistryError> {
    let mut rules = HashMap::new();
    let Some(toml::Value::Table(models)) = file.get_mut("models") else {
        return Ok(rules);
    };
    for (id, entry) in models.iter_mut() {
        let toml::Value::Table(entry) = entry else { continue };
        let fields: serde_json::Map<String, serde_json::Value> = RULE_FIELDS
            .iter()
            .filter_map(|name| Some((name.to_string(), entry.remove(*name)?)))
            .map(|(name, value)| {
                let value =
                    serde_json::to_value(value).map_err(|error| RegistryError(format!("{id}.{name}: {error}")))?;
                Ok((name, value))
            })
            .collect::<Result<_, RegistryError>>()?;
        if let Some(parsed) = Rules::from_fields(&fields).map_err(|error| RegistryError(format!("{id}: {error}")))? {
            rules.insert(id.clone(), Arc::new(parsed));
        }
    }
    Ok(rules)
}
