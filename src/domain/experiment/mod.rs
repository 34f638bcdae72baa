//! What an A/B experiment is: its id, the unit it hashes, its arms (each a model and a
//! share of the traffic) and which arm is the control; and the rules a new one must
//! follow, every broken one reported at once. Also what is counted per arm
//! ([`counts`]), the figures reported with their 95% intervals ([`report`],
//! [`interval`]). The experiments themselves (stored, assigned, counted) live in
//! `crate::experiments`; these are the types the layers above it name.

use serde::{Deserialize, Serialize};

pub mod counts;
pub mod interval;
pub mod report;

pub use report::{ArmReport, ExperimentReport, Status};

/// Longest experiment id and arm name.
pub const MAX_NAME_LEN: usize = 64;
/// Most arms an experiment has (assignment walks them for every request).
pub const MAX_ARMS: usize = 100;
/// How far the shares' sum may be from 1.
pub const SHARE_SUM_TOLERANCE: f64 = 1e-6;
/// The arm that is the control when one has this name (else the first arm is).
pub const CONTROL_NAME: &str = "control";

/// What the traffic is split by: every request with the same value of it gets the same arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = ExperimentUnit)]
pub enum Unit {
    /// The request's `user_id` (its `session_id` when it has none).
    #[default]
    User,
    /// The request's `session_id` (its `user_id` when it has none).
    Session,
}

impl Unit {
    /// The value a request is hashed by: the unit's own id, else the other one.
    pub fn value<'a>(self, user_id: Option<&'a str>, session_id: Option<&'a str>) -> Option<&'a str> {
        match self {
            Unit::User => user_id.or(session_id),
            Unit::Session => session_id.or(user_id),
        }
    }
}

/// One arm: the model that serves its share of the traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    /// Unique in its experiment; `[A-Za-z0-9_-]{1,64}`, so a `rec_id` can carry it.
    pub name: String,
    /// A configured model (never an experiment).
    pub model_id: String,
    /// The part of the units assigned to this arm, in (0, 1]; the arms' shares sum to 1.
    pub share: f64,
}

/// An experiment as stored and replicated; whether it runs is kept beside it
/// (`stopped_at` in [`StoredExperiment`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// Used as a `model_id` in ranking requests; `[A-Za-z0-9_-]{1,64}`.
    pub id: String,
    pub unit: Unit,
    /// At least two, in the order they were given (assignment walks them in it).
    pub arms: Vec<Arm>,
    /// Index into `arms` of the control: the arm named `control`, else the first.
    pub control: usize,
    /// Unix ms.
    pub created_at: i64,
}

impl Experiment {
    /// The control arm.
    pub fn control_arm(&self) -> &Arm {
        &self.arms[self.control]
    }

    /// The index of the arm named `name`.
    pub fn arm_index(&self, name: &str) -> Option<usize> {
        self.arms.iter().position(|arm| arm.name == name)
    }
}

/// The stored record of an experiment: its definition and when it was stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredExperiment {
    #[serde(flatten)]
    pub experiment: Experiment,
    /// Unix ms; `None` while it runs.
    #[serde(default)]
    pub stopped_at: Option<i64>,
}

/// A new experiment as asked for, not yet checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExperiment {
    pub id: String,
    /// `user` when the request names none.
    pub unit: Option<Unit>,
    pub arms: Vec<Arm>,
}

/// Whether `name` is 1 to 64 of `[A-Za-z0-9_-]`: never a `.`, so a `rec_id` that
/// carries it parses back.
pub fn is_valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

impl NewExperiment {
    /// The experiment, when it follows every rule of its own (the id's and names'
    /// forms, two arms at least, unique names, shares > 0 summing to 1 within 1e-6)
    /// and each arm names a model `is_model` knows; else every problem, each a
    /// sentence. Conflicts with what exists are the caller's to check.
    pub fn validate(self, is_model: impl Fn(&str) -> bool, now: i64) -> Result<Experiment, Vec<String>> {
        let mut problems = Vec::new();
        if !is_valid_name(&self.id) {
            problems.push(format!(
                "\"id\" must be 1 to {MAX_NAME_LEN} of A-Z, a-z, 0-9, '_' and '-' (it is {:?})",
                self.id
            ));
        }
        if self.arms.len() < 2 {
            problems.push(format!(
                "\"arms\" must hold at least 2 arms (it holds {})",
                self.arms.len()
            ));
        }
        if self.arms.len() > MAX_ARMS {
            problems.push(format!(
                "\"arms\" holds {} arms; at most {MAX_ARMS} are allowed",
                self.arms.len()
            ));
        }
        for (index, arm) in self.arms.iter().enumerate() {
            if !is_valid_name(&arm.name) {
                problems.push(format!(
                    "arms[{index}].name must be 1 to {MAX_NAME_LEN} of A-Z, a-z, 0-9, '_' and '-' (it is {:?})",
                    arm.name
                ));
            }
            if self.arms[..index].iter().any(|earlier| earlier.name == arm.name) {
                problems.push(format!("arms[{index}].name {:?} is used by an earlier arm", arm.name));
            }
            if !is_model(&arm.model_id) {
                problems.push(format!(
                    "arms[{index}].model_id {:?} names no configured model",
                    arm.model_id
                ));
            }
            if !(arm.share.is_finite() && arm.share > 0.0) {
                problems.push(format!("arms[{index}].share must be > 0 (it is {})", arm.share));
            }
        }
        let sum: f64 = self.arms.iter().map(|arm| arm.share).sum();
        if !self.arms.is_empty() && !((sum - 1.0).abs() <= SHARE_SUM_TOLERANCE) {
            problems.push(format!(
                "the arms' shares must sum to 1 (within {SHARE_SUM_TOLERANCE}); they sum to {sum}"
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let control = self.arms.iter().position(|arm| arm.name == CONTROL_NAME).unwrap_or(0);
        Ok(Experiment {
            id: self.id,
            unit: self.unit.unwrap_or_default(),
            arms: self.arms,
            control,
            created_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str, model_id: &str, share: f64) -> Arm {
        Arm {
            name: name.into(),
            model_id: model_id.into(),
            share,
        }
    }

    fn known(model_id: &str) -> bool {
        ["popularity", "default"].contains(&model_id)
    }

    #[test]
    fn the_control_is_the_arm_named_control_else_the_first() {
        let new = NewExperiment {
            id: "exp1".into(),
            unit: None,
            arms: vec![arm("b", "default", 0.5), arm("control", "popularity", 0.5)],
        };
        let experiment = new.validate(known, 7).unwrap();
        assert_eq!(
            (experiment.control, experiment.unit, experiment.created_at),
            (1, Unit::User, 7)
        );
        let new = NewExperiment {
            id: "exp1".into(),
            unit: Some(Unit::Session),
            arms: vec![arm("a", "default", 0.25), arm("b", "popularity", 0.75)],
        };
        assert_eq!(new.validate(known, 7).unwrap().control, 0);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let new = NewExperiment {
            id: "exp.1".into(),
            unit: None,
            arms: vec![
                arm("a", "nope", 0.5),
                arm("a", "default", 0.0),
                arm("c.d", "default", 0.2),
            ],
        };
        let problems = new.validate(known, 0).unwrap_err();
        let text = problems.join("\n");
        assert_eq!(problems.len(), 6, "{text}");
        for expected in [
            "\"id\" must be",
            "arms[1].name \"a\" is used",
            "\"nope\" names no configured model",
            "arms[1].share must be > 0",
            "arms[2].name must be",
            "sum to 0.7",
        ] {
            assert!(text.contains(expected), "{expected:?} missing in:\n{text}");
        }
    }

    #[test]
    fn shares_must_sum_to_one_within_the_tolerance() {
        let with = |shares: &[f64]| NewExperiment {
            id: "e".into(),
            unit: None,
            arms: shares
                .iter()
                .enumerate()
                .map(|(index, share)| arm(&format!("arm{index}"), "default", *share))
                .collect(),
        };
        assert!(with(&[0.2, 0.3, 0.5]).validate(known, 0).is_ok());
        assert!(with(&[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]).validate(known, 0).is_ok());
        assert!(with(&[0.5, 0.5 + 2e-6]).validate(known, 0).is_err());
        assert!(with(&[0.5, f64::NAN]).validate(known, 0).is_err());
        assert!(with(&[1.0]).validate(known, 0).is_err(), "one arm");
    }

    #[test]
    fn names_are_limited_to_what_a_rec_id_can_carry() {
        assert!(is_valid_name("exp_1-B"));
        assert!(is_valid_name(&"x".repeat(64)));
        assert!(!is_valid_name(&"x".repeat(65)));
        for bad in ["", "a.b", "a b", "é", "a/b", "a\0"] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_unit_falls_back_to_the_other_id() {
        assert_eq!(Unit::User.value(Some("u"), Some("s")), Some("u"));
        assert_eq!(Unit::User.value(None, Some("s")), Some("s"));
        assert_eq!(Unit::Session.value(Some("u"), Some("s")), Some("s"));
        assert_eq!(Unit::Session.value(Some("u"), None), Some("u"));
        assert_eq!(Unit::Session.value(None, None), None);
    }
}
