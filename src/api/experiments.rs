//! `/v1/admin/experiments`: create, list, read and stop A/B experiments (admin scope).
//! Counts are kept per node (each node counts the outcome events of its own shards):
//! in a cluster a read sums every node's, asking each other node for its own with
//! `?scope=node`, which also makes any node answer only its own.

use bytes::Bytes;
use futures::future::join_all;
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};

use super::{forward, json_response, ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::domain::experiment::{Arm, ExperimentReport, NewExperiment, Unit};

/// Body of `POST /v1/admin/experiments`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateExperimentBody {
    /// 1 to 64 of `[A-Za-z0-9_-]`, not a configured model's id: requests name it as
    /// their `model_id`.
    id: String,
    /// What assignment hashes: the request's `user_id` (else `session_id`), or its
    /// `session_id` (else `user_id`). `user` when absent.
    #[serde(default)]
    unit: Option<Unit>,
    /// At least 2. The arm named `control` is the control, else the first.
    arms: Vec<ArmBody>,
}

/// An arm of a new experiment.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ArmBody {
    /// 1 to 64 of `[A-Za-z0-9_-]`, unique in the experiment.
    name: String,
    /// A configured model.
    model_id: String,
    /// The part of the units this arm gets, > 0; the arms' shares sum to 1 (within 1e-6).
    share: f64,
}

/// `GET /v1/admin/experiments`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct ExperimentList {
    /// Oldest first.
    experiments: Vec<ExperimentReport>,
}

/// `POST /v1/admin/experiments`: 201 with the new experiment's report.
pub async fn create_experiment(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let body: CreateExperimentBody = request.json()?;
    let arms = body
        .arms
        .into_iter()
        .map(|arm| Arm {
            name: arm.name,
            model_id: arm.model_id,
            share: arm.share,
        })
        .collect();
    let new = NewExperiment {
        id: body.id,
        unit: body.unit,
        arms,
    };
    let report = state.services.experiments.create_experiment(new).await?;
    Ok(json_response(StatusCode::CREATED, &report))
}

/// `GET /v1/admin/experiments`: every experiment, the cluster's counts summed unless
/// `?scope=node`.
pub async fn list_experiments(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let node_only = node_scope(&request)?;
    let mut experiments = state.services.experiments.list_experiments();
    if !node_only {
        add_peer_counts(state, &request, &mut experiments).await;
    }
    ok(&ExperimentList { experiments })
}

/// `GET /v1/admin/experiments/{id}`: the cluster's counts summed unless `?scope=node`.
pub async fn experiment(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let node_only = node_scope(&request)?;
    let mut reports = [state.services.experiments.experiment(&request.params[0])?];
    if !node_only {
        add_peer_counts(state, &request, &mut reports).await;
    }
    ok(&reports[0])
}

/// `POST /v1/admin/experiments/{id}/stop`.
pub async fn stop_experiment(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    ok(&state.services.experiments.stop_experiment(&request.params[0]).await?)
}

/// Whether `?scope=node` asks for this node's counts only (as a forwarded request
/// does); 422 for any other scope.
fn node_scope(request: &ApiRequest) -> Result<bool, ApiError> {
    let scope = request
        .query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(name, _)| *name == "scope");
    match scope {
        None => Ok(forward::was_forwarded(request)),
        Some((_, "node")) => Ok(true),
        Some((_, other)) => Err(ApiError::validation(format!(
            "\"scope\" can only be \"node\" (this node's counts); it is {other:?}"
        ))),
    }
}

/// In a cluster: adds every other node's counts (asked with `?scope=node`) to
/// `reports`, by experiment id and arm name. A node that does not answer in time is
/// named in each report's `unreached_nodes`; one that does not know an experiment yet
/// (the catalog log has not brought it) has counted nothing for it.
async fn add_peer_counts(state: &AppState, request: &ApiRequest, reports: &mut [ExperimentReport]) {
    /// A node's answer: one experiment or the list.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Answer {
        One(ExperimentReport),
        List(ExperimentList),
    }
    let cluster = &state.services.cluster;
    if !cluster.is_multi_node() {
        return;
    }
    let (key, path) = (forward::presented_key(request), format!("{}?scope=node", request.path));
    let asks = cluster.peers().into_iter().map(|node| {
        let (key, path) = (key.as_ref(), path.as_str());
        async move {
            let answer = (state.peers)
                .send(
                    cluster,
                    &node,
                    Method::GET,
                    path,
                    key,
                    Bytes::new(),
                    request.deadline,
                    None,
                )
                .await;
            (node, answer)
        }
    });
    for (node, answer) in join_all(asks).await {
        let theirs = match answer.map(|(status, body)| (status, serde_json::from_slice::<Answer>(&body))) {
            Some((StatusCode::OK, Ok(Answer::One(report)))) => vec![report],
            Some((StatusCode::OK, Ok(Answer::List(list)))) => list.experiments,
            Some((StatusCode::NOT_FOUND, _)) => continue,
            _ => {
                reports
                    .iter_mut()
                    .for_each(|report| report.unreached_nodes.push(node.id.clone()));
                continue;
            }
        };
        for report in reports.iter_mut() {
            if let Some(their) = theirs.iter().find(|their| their.id == report.id) {
                report.add_node(their);
            }
        }
    }
}
