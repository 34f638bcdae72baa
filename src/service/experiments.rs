//! A/B experiments (see [`crate::experiments`]): create, stop and report them for the
//! admin API; and, for the ranking paths, the arm a request naming an experiment as
//! its `model_id` gets and the counting of what that arm served.
//!
//! A ranking path resolves the `model_id` with [`ExperimentService::experiment_arm`] first;
//! when it names an experiment, it ranks with the arm's model, answers the
//! assignment's [`Assignment::rec_id`], and calls [`ExperimentService::count_served`] with the
//! items it returned. Outcome events carrying that `rec_id` are counted for the arm
//! as they are applied (the engine's outcome observer), wherever they arrive.

use super::catalog::Replication;
use super::ServiceError;
use crate::domain::experiment::{ExperimentReport, NewExperiment};
use crate::experiments::Assignment;
use crate::stream::catalog_log::CatalogChange;
use std::sync::Arc;

use crate::experiments::Experiments;
use crate::ranking::ModelRegistry;

/// A/B experiments: create, stop, figures; the arm of a request.
pub struct ExperimentService {
    experiments: Arc<Experiments>,
    /// An experiment's arms must name configured models.
    models: Arc<ModelRegistry>,
    /// In a cluster, experiments reach the other nodes through the catalog log.
    replication: Replication,
}

impl ExperimentService {
    pub fn new(
        experiments: Arc<Experiments>,
        models: Arc<ModelRegistry>,
        replication: Replication,
    ) -> ExperimentService {
        ExperimentService {
            experiments,
            models,
            replication,
        }
    }
}

impl ExperimentService {
    /// Creates an experiment: validated (arms must name configured models), stored,
    /// and handed to the other nodes in a cluster; its report, running.
    pub async fn create_experiment(&self, new: NewExperiment) -> Result<ExperimentReport, ServiceError> {
        let experiments = self.experiments.clone();
        let models: Vec<String> = self.models.ids().into_iter().map(str::to_owned).collect();
        let is_model = move |id: &str| models.iter().any(|model| model == id);
        let (stored, report) = blocking(move || experiments.create(new, is_model)).await??;
        self.replication
            .replicate(vec![CatalogChange::PutExperiment { experiment: stored }])
            .await?;
        Ok(report)
    }

    /// Stops an experiment: from now on every request naming it gets the control arm
    /// and nothing more is counted. Stopping a stopped one changes nothing.
    pub async fn stop_experiment(&self, id: &str) -> Result<ExperimentReport, ServiceError> {
        let (experiments, owned) = (self.experiments.clone(), id.to_owned());
        let (stored, report) = blocking(move || experiments.stop(&owned)).await??;
        let stopped_at = stored.stopped_at.expect("a stopped experiment has its stop time");
        self.replication
            .replicate(vec![CatalogChange::StopExperiment {
                id: id.to_owned(),
                stopped_at,
            }])
            .await?;
        Ok(report)
    }

    /// An experiment with this node's counts.
    pub fn experiment(&self, id: &str) -> Result<ExperimentReport, ServiceError> {
        Ok(self.experiments.report(id)?)
    }

    /// Every experiment with this node's counts, oldest first.
    pub fn list_experiments(&self) -> Vec<ExperimentReport> {
        self.experiments.reports()
    }

    /// Some when `model_id` names an experiment: the arm for this unit (the request's
    /// user, else session, for unit `user`; the other way round for `session`). Once
    /// the experiment stopped, or for a request with neither id: the control arm, not
    /// counted. `None` for any other `model_id` (resolve it with [`RankingService::model`]).
    pub fn experiment_arm(
        &self,
        model_id: &str,
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) -> Option<Assignment> {
        self.experiments.assign(model_id, user_id, session_id)
    }

    /// Counts one request served by the assignment's arm and the items it returned
    /// (nothing when the assignment is not counted, or once the experiment stopped).
    pub fn count_served(&self, assignment: &Assignment, impressions: usize) {
        self.experiments.count_served(assignment, impressions);
    }
}

/// Runs a write that waits for an fsync off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ServiceError::Internal(error.to_string()))
}
