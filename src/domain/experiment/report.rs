//! An experiment's figures: per arm its counts, CTR and conversion rate with their 95%
//! intervals, and for each arm but the control the difference to the control with
//! its interval. What `GET /v1/admin/experiments/{id}` answers.

use serde::{Deserialize, Serialize};

use super::counts::ArmCounts;
use super::interval::{rate, wald, wald_difference};
use super::{StoredExperiment, Unit};
use crate::timestamp::format_rfc3339;

/// Whether an experiment assigns its arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = ExperimentStatus)]
pub enum Status {
    /// Requests are assigned arms by hash, and counted.
    Running,
    /// Every request gets the control arm, and nothing is counted.
    Stopped,
}

/// An experiment and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExperimentReport {
    pub id: String,
    pub unit: Unit,
    pub status: Status,
    /// The control arm's name.
    pub control: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; null while it runs.
    pub stopped_at: Option<String>,
    pub arms: Vec<ArmReport>,
    /// In a cluster: the nodes whose counts could not be read and are left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreached_nodes: Vec<String>,
}

/// One arm's counts and figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ArmReport {
    pub name: String,
    pub model_id: String,
    pub share: f64,
    #[serde(flatten)]
    pub counts: ArmCounts,
    /// clicks / impressions (0 without impressions).
    pub ctr: f64,
    /// The 95% Wald interval of `ctr`.
    pub ctr_ci: [f64; 2],
    /// conversions / requests (0 without requests).
    pub conversion_rate: f64,
    /// The 95% Wald interval of `conversion_rate`.
    pub conversion_rate_ci: [f64; 2],
    /// This arm's CTR minus the control's (absent on the control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctr_diff: Option<f64>,
    /// The 95% Wald interval of `ctr_diff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctr_diff_ci: Option<[f64; 2]>,
    /// This arm's conversion rate minus the control's (absent on the control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_rate_diff: Option<f64>,
    /// The 95% Wald interval of `conversion_rate_diff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_rate_diff_ci: Option<[f64; 2]>,
}

impl ExperimentReport {
    /// The report of `stored` with each arm's counts (in the arms' order).
    pub fn of(stored: &StoredExperiment, counts: &[ArmCounts]) -> ExperimentReport {
        debug_assert_eq!(stored.experiment.arms.len(), counts.len());
        let experiment = &stored.experiment;
        let arms = experiment
            .arms
            .iter()
            .zip(counts)
            .map(|(arm, counts)| ArmReport {
                name: arm.name.clone(),
                model_id: arm.model_id.clone(),
                share: arm.share,
                counts: *counts,
                ctr: 0.0,
                ctr_ci: [0.0, 1.0],
                conversion_rate: 0.0,
                conversion_rate_ci: [0.0, 1.0],
                ctr_diff: None,
                ctr_diff_ci: None,
                conversion_rate_diff: None,
                conversion_rate_diff_ci: None,
            })
            .collect();
        let mut report = ExperimentReport {
            id: experiment.id.clone(),
            unit: experiment.unit,
            status: match stored.stopped_at {
                Some(_) => Status::Stopped,
                None => Status::Running,
            },
            control: experiment.control_arm().name.clone(),
            created_at: format_rfc3339(experiment.created_at),
            stopped_at: stored.stopped_at.map(format_rfc3339),
            arms,
            unreached_nodes: Vec::new(),
        };
        report.figure();
        report
    }

    /// Adds another node's counts of the same experiment, arm by arm by name, and
    /// figures the rates and intervals again.
    pub fn add_node(&mut self, other: &ExperimentReport) {
        for arm in &mut self.arms {
            if let Some(theirs) = other.arms.iter().find(|theirs| theirs.name == arm.name) {
                arm.counts += theirs.counts;
            }
        }
        self.figure();
    }

    /// Rates, intervals and differences to the control, from the counts.
    fn figure(&mut self) {
        // A report always holds its control arm.
        let Some(control) = self
            .arms
            .iter()
            .find(|arm| arm.name == self.control)
            .map(|arm| arm.counts)
        else {
            return;
        };
        for arm in &mut self.arms {
            let ArmCounts {
                requests,
                impressions,
                clicks,
                conversions,
            } = arm.counts;
            arm.ctr = rate(clicks, impressions);
            arm.ctr_ci = wald(clicks, impressions);
            arm.conversion_rate = rate(conversions, requests);
            arm.conversion_rate_ci = wald(conversions, requests);
            if arm.name == self.control {
                continue;
            }
            arm.ctr_diff = Some(arm.ctr - rate(control.clicks, control.impressions));
            arm.ctr_diff_ci = Some(wald_difference(
                clicks,
                impressions,
                control.clicks,
                control.impressions,
            ));
            arm.conversion_rate_diff = Some(arm.conversion_rate - rate(control.conversions, control.requests));
            arm.conversion_rate_diff_ci = Some(wald_difference(
                conversions,
                requests,
                control.conversions,
                control.requests,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::experiment::{Arm, Experiment};

    fn stored() -> StoredExperiment {
        let arm = |name: &str| Arm {
            name: name.into(),
            model_id: "default".into(),
            share: 0.5,
        };
        StoredExperiment {
            experiment: Experiment {
                id: "exp1".into(),
                unit: Unit::User,
                arms: vec![arm("b"), arm("control")],
                control: 1,
                created_at: 0,
            },
            stopped_at: None,
        }
    }

    fn counts(requests: u64, impressions: u64, clicks: u64, conversions: u64) -> ArmCounts {
        ArmCounts {
            requests,
            impressions,
            clicks,
            conversions,
        }
    }

    #[test]
    fn arms_are_figured_against_the_control() {
        let report = ExperimentReport::of(&stored(), &[counts(400, 1000, 120, 60), counts(400, 1000, 100, 45)]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["control"], "control");
        assert_eq!(json["status"], "running");
        let (b, control) = (&json["arms"][0], &json["arms"][1]);
        assert_eq!((b["requests"].as_u64(), b["clicks"].as_u64()), (Some(400), Some(120)));
        assert_eq!(b["ctr"], 0.12);
        assert_eq!(b["conversion_rate"], 0.15);
        assert!((b["ctr_diff"].as_f64().unwrap() - 0.02).abs() < 1e-12);
        assert_eq!(report.arms[0].ctr_diff_ci, Some(wald_difference(120, 1000, 100, 1000)));
        assert_eq!(
            report.arms[0].conversion_rate_diff_ci,
            Some(wald_difference(60, 400, 45, 400))
        );
        assert_eq!(report.arms[1].ctr_ci, wald(100, 1000));
        assert!(
            control.get("ctr_diff").is_none(),
            "the control has no difference: {control}"
        );
        let back: ExperimentReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn another_nodes_counts_add_up_by_arm_name() {
        let mut report = ExperimentReport::of(&stored(), &[counts(10, 100, 5, 1), counts(10, 100, 4, 1)]);
        let mut theirs = ExperimentReport::of(&stored(), &[counts(30, 300, 15, 3), counts(30, 300, 12, 3)]);
        theirs.arms.reverse();
        report.add_node(&theirs);
        assert_eq!(report.arms[0].counts, counts(40, 400, 20, 4));
        assert_eq!(report.arms[1].counts, counts(40, 400, 16, 4));
        assert_eq!(report.arms[0].ctr, 0.05);
        assert_eq!(report.arms[0].ctr_ci, wald(20, 400));
    }
}
