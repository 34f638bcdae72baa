//! A/B experiments: an experiment splits the requests that name it as their
//! `model_id` between its arms (each a configured model) by a sticky hash of the
//! request's user or session, records the arm in the response's `rec_id`, and counts
//! per arm what was served and the clicks and conversions that come back.
//!
//! - [`definition`]: what an experiment is and the rules a new one follows.
//! - [`assignment`]: the hash that picks an arm, and the `rec_id` that records it.
//! - [`counts`]: an arm's counters.
//! - [`interval`]: 95% intervals of a rate and of a difference of rates (pure).
//! - [`report`]: the figures `GET /v1/admin/experiments/{id}` answers.
//!
//! This module owns the node's experiments ([`Experiments`]): their definitions and
//! status are stored in `meta` when they change (and replicated by the catalog log in
//! a cluster). The counts live in atomics, are written to `meta` every second by a
//! thread of their own and at a clean stop, and are read back at start: a crash loses
//! at most the last second of counts. Counts are per node; each outcome event is
//! counted once, by the node owning its shard, the first time it is applied (never
//! for a duplicate).
//!
//! - requests: responses served by the arm (through [`Experiments::count_served`]);
//! - impressions: the items those responses returned;
//! - clicks, conversions: new events of type `click` / `conversion` whose `rec_id`
//!   names the arm;
//! - ctr = clicks / impressions, conversion_rate = conversions / requests (0 when the
//!   denominator is 0).
//!
//! A stopped experiment serves every request with its control arm, under a plain
//! `rec_id`, and counts nothing more: its figures are those of the moment it stopped
//! (outcomes arriving later, even for responses served before, are not counted).

pub mod assignment;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::clock::SharedClock;
use crate::domain::experiment::counts::{ArmCounters, ArmCounts};
use crate::domain::experiment::{Experiment, ExperimentReport, NewExperiment, StoredExperiment};
use crate::domain::outcome::{Outcome, OutcomeObserver};
use crate::storage::{layout, Cf, Storage, StorageError};
use assignment::{arm_at, encode_rec_id, parse_rec_id, unit_point};

/// How often the counts are written.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Why an experiment could not be created, read or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The request breaks rules of its own (every problem, each a sentence).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// The id is taken (by a model or another experiment).
    #[error("{0}")]
    Conflict(String),
    /// No experiment has this id.
    #[error("experiment {0:?}")]
    NotFound(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The experiments of the node.
pub struct Experiments {
    storage: Storage,
    clock: SharedClock,
    /// Every experiment by id: read without a lock on every ranking request, replaced
    /// whole when one is created (rare).
    by_id: ArcSwap<HashMap<String, Arc<LiveExperiment>>>,
    /// Creates and stops one at a time: each reads `by_id`, stores, then publishes.
    writes: Mutex<()>,
    /// The counts last written, per experiment: the flusher writes only what changed.
    written: Mutex<HashMap<String, Vec<ArmCounts>>>,
    /// The thread writing the counts, while it runs.
    flusher: Mutex<Option<Flusher>>,
}

/// An experiment as requests use it: its definition, whether it stopped, its counters.
#[derive(Debug)]
struct LiveExperiment {
    experiment: Experiment,
    /// Unix ms; set once, when it stops.
    stopped_at: OnceLock<i64>,
    /// One per arm, in the arms' order.
    counters: Vec<ArmCounters>,
}

impl LiveExperiment {
    fn new(stored: StoredExperiment, counts: &BTreeMap<String, ArmCounts>) -> LiveExperiment {
        let counters = stored
            .experiment
            .arms
            .iter()
            .map(|arm| ArmCounters::starting_at(counts.get(&arm.name).copied().unwrap_or_default()))
            .collect();
        LiveExperiment {
            stopped_at: stored.stopped_at.map_or_else(OnceLock::new, OnceLock::from),
            experiment: stored.experiment,
            counters,
        }
    }

    fn is_stopped(&self) -> bool {
        self.stopped_at.get().is_some()
    }

    fn stored(&self) -> StoredExperiment {
        StoredExperiment {
            experiment: self.experiment.clone(),
            stopped_at: self.stopped_at.get().copied(),
        }
    }

    fn counts(&self) -> Vec<ArmCounts> {
        self.counters.iter().map(ArmCounters::snapshot).collect()
    }

    fn report(&self) -> ExperimentReport {
        ExperimentReport::of(&self.stored(), &self.counts())
    }
}

/// The arm a request was given by the experiment its `model_id` names.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The experiment's id.
    pub experiment: String,
    /// The arm's name.
    pub arm: String,
    /// The model that ranks for the arm.
    pub model_id: String,
    /// Whether the request is in the experiment's figures (its `rec_id` then records
    /// the arm): false once the experiment stopped, and for a request with neither a
    /// user nor a session id, which can be assigned nothing sticky (both get the control).
    pub counted: bool,
    /// The experiment, to count without a lookup.
    live: Arc<LiveExperiment>,
    /// The arm's index in it.
    arm_index: usize,
}

impl Assignment {
    /// The response's `rec_id`: `"{uuid v7}.{experiment id}.{arm name}"` when counted,
    /// else a plain UUIDv7.
    pub fn rec_id(&self) -> String {
        match self.counted {
            true => encode_rec_id(&self.experiment, &self.arm),
            false => uuid::Uuid::now_v7().to_string(),
        }
    }
}

impl Experiments {
    /// The stored experiments with their stored counts.
    pub fn load(storage: Storage, clock: SharedClock) -> Result<Arc<Experiments>, StorageError> {
        let mut by_id = HashMap::new();
        let mut written = HashMap::new();
        for entry in storage.scan_prefix(Cf::Meta, layout::EXPERIMENT_PREFIX) {
            let (key, value) = entry?;
            let stored: StoredExperiment = decode(&key, &value)?;
            let counts_key = layout::experiment_counts(&stored.experiment.id);
            let counts: BTreeMap<String, ArmCounts> = match storage.get(Cf::Meta, &counts_key)? {
                Some(value) => decode(&counts_key, &value)?,
                None => BTreeMap::new(),
            };
            let live = LiveExperiment::new(stored, &counts);
            written.insert(live.experiment.id.clone(), live.counts());
            by_id.insert(live.experiment.id.clone(), Arc::new(live));
        }
        Ok(Arc::new(Experiments {
            storage,
            clock,
            by_id: ArcSwap::from_pointee(by_id),
            writes: Mutex::new(()),
            written: Mutex::new(written),
            flusher: Mutex::new(None),
        }))
    }

    /// Whether an experiment has this id.
    pub fn contains(&self, id: &str) -> bool {
        self.by_id.load().contains_key(id)
    }

    /// Checks and stores a new experiment, running from now; `is_model` tells the
    /// configured model ids (which arms must name, and which the id must not be).
    /// Blocks on an fsync.
    pub fn create(
        &self,
        new: NewExperiment,
        is_model: impl Fn(&str) -> bool,
    ) -> Result<(StoredExperiment, ExperimentReport), ExperimentError> {
        let experiment = new
            .validate(&is_model, self.clock.now_millis())
            .map_err(ExperimentError::Invalid)?;
        if is_model(&experiment.id) {
            return Err(ExperimentError::Conflict(format!(
                "{:?} is the id of a configured model; an experiment needs an id of its own",
                experiment.id
            )));
        }
        let _writing = self.writes.lock();
        if self.contains(&experiment.id) {
            return Err(ExperimentError::Conflict(format!(
                "an experiment {:?} exists already",
                experiment.id
            )));
        }
        let stored = StoredExperiment {
            experiment,
            stopped_at: None,
        };
        self.store(&stored)?;
        let live = self.publish(stored.clone());
        Ok((stored, live.report()))
    }

    /// Stores an experiment another node of the cluster created. One with its id
    /// already here is left as it is (the write applied again after a restart); a
    /// different one is refused.
    pub fn put_replicated(&self, stored: StoredExperiment) -> Result<(), ExperimentError> {
        let _writing = self.writes.lock();
        if let Some(live) = self.by_id.load().get(&stored.experiment.id) {
            return match live.experiment == stored.experiment {
                true => Ok(()),
                false => Err(ExperimentError::Conflict(format!(
                    "experiment {:?} was created differently on this node",
                    stored.experiment.id
                ))),
            };
        }
        self.store(&stored)?;
        self.publish(stored);
        Ok(())
    }

    /// Stops an experiment now (one stopped already stays as it was); its report.
    /// Blocks on an fsync.
    pub fn stop(&self, id: &str) -> Result<(StoredExperiment, ExperimentReport), ExperimentError> {
        self.stop_at(id, self.clock.now_millis())
    }

    /// Stops an experiment at the time the node that stopped it gave.
    pub fn stop_at(&self, id: &str, at: i64) -> Result<(StoredExperiment, ExperimentReport), ExperimentError> {
        let _writing = self.writes.lock();
        let live = self.live(id)?;
        if !live.is_stopped() {
            let mut stored = live.stored();
            stored.stopped_at = Some(at);
            self.store(&stored)?;
            live.stopped_at.get_or_init(|| at);
        }
        Ok((live.stored(), live.report()))
    }

    /// An experiment's figures on this node.
    pub fn report(&self, id: &str) -> Result<ExperimentReport, ExperimentError> {
        Ok(self.live(id)?.report())
    }

    /// Every experiment's figures on this node, oldest first.
    pub fn reports(&self) -> Vec<ExperimentReport> {
        let by_id = self.by_id.load();
        let mut all: Vec<&Arc<LiveExperiment>> = by_id.values().collect();
        all.sort_by(|a, b| {
            (a.experiment.created_at, &a.experiment.id).cmp(&(b.experiment.created_at, &b.experiment.id))
        });
        all.into_iter().map(|live| live.report()).collect()
    }

    /// When `model_id` names an experiment: the arm for the request's unit (see
    /// [`assignment`]); the control, not counted, once it stopped or when the request
    /// has neither id.
    pub fn assign(&self, model_id: &str, user_id: Option<&str>, session_id: Option<&str>) -> Option<Assignment> {
        let live = self.by_id.load().get(model_id)?.clone();
        let experiment = &live.experiment;
        let unit = experiment
            .unit
            .value(user_id, session_id)
            .filter(|_| !live.is_stopped());
        let arm_index = match unit {
            Some(unit) => arm_at(&experiment.arms, unit_point(&experiment.id, unit)),
            None => experiment.control,
        };
        let arm = &experiment.arms[arm_index];
        Some(Assignment {
            experiment: experiment.id.clone(),
            arm: arm.name.clone(),
            model_id: arm.model_id.clone(),
            counted: unit.is_some(),
            arm_index,
            live,
        })
    }

    /// Counts one response served by the assignment's arm and the items it returned;
    /// nothing when it is not counted or the experiment has stopped since.
    pub fn count_served(&self, assignment: &Assignment, impressions: usize) {
        if assignment.counted && !assignment.live.is_stopped() {
            assignment.live.counters[assignment.arm_index].served(impressions);
        }
    }

    /// Writes the counts that changed since they were last written. Blocks on a write.
    pub fn flush_counts(&self) -> Result<(), StorageError> {
        let mut written = self.written.lock();
        let by_id = self.by_id.load();
        let mut batch = self.storage.batch();
        let mut changed = Vec::new();
        for (id, live) in by_id.iter() {
            let counts = live.counts();
            if written.get(id) == Some(&counts) {
                continue;
            }
            let by_arm: BTreeMap<&str, ArmCounts> = live
                .experiment
                .arms
                .iter()
                .map(|arm| arm.name.as_str())
                .zip(counts.iter().copied())
                .collect();
            let value = serde_json::to_vec(&by_arm).expect("counts serialize");
            batch.put(Cf::Meta, &layout::experiment_counts(id), &value);
            changed.push((id.clone(), counts));
        }
        batch.commit()?;
        written.extend(changed);
        Ok(())
    }

    /// Starts the thread that writes the counts every `every`.
    pub fn start_flushing(self: &Arc<Self>, every: Duration) -> std::io::Result<()> {
        let (stop, stopped) = crossbeam::channel::bounded::<()>(0);
        let experiments: Weak<Experiments> = Arc::downgrade(self);
        let thread = std::thread::Builder::new()
            .name("experiment-counts".into())
            .spawn(move || {
                while let Err(crossbeam::channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    // Gone with the node: nothing left to write.
                    let Some(alive) = experiments.upgrade() else { return };
                    if let Err(error) = alive.flush_counts() {
                        tracing::warn!(%error, "writing the experiments' counts failed; retrying in a second");
                    }
                }
            })?;
        *self.flusher.lock() = Some(Flusher { stop, thread });
        Ok(())
    }

    /// Stops the flushing thread and writes the counts a last time (a clean stop
    /// loses none). Blocks.
    pub fn stop_flushing(&self) {
        if let Some(Flusher { stop, thread }) = self.flusher.lock().take() {
            drop(stop);
            let _ = thread.join();
        }
        if let Err(error) = self.flush_counts() {
            tracing::error!(%error, "writing the experiments' counts at stop failed; the last second of counts is lost");
        }
    }

    fn live(&self, id: &str) -> Result<Arc<LiveExperiment>, ExperimentError> {
        self.by_id
            .load()
            .get(id)
            .cloned()
            .ok_or_else(|| ExperimentError::NotFound(id.to_owned()))
    }

    /// Writes an experiment's record durably.
    fn store(&self, stored: &StoredExperiment) -> Result<(), StorageError> {
        let mut batch = self.storage.batch();
        let value = serde_json::to_vec(stored).expect("experiments serialize");
        batch.put(Cf::Meta, &layout::experiment(&stored.experiment.id), &value);
        batch.commit()
    }

    /// Makes a stored experiment visible to requests (callers hold `writes`).
    fn publish(&self, stored: StoredExperiment) -> Arc<LiveExperiment> {
        let live = Arc::new(LiveExperiment::new(stored, &BTreeMap::new()));
        let mut by_id = HashMap::clone(&self.by_id.load());
        by_id.insert(live.experiment.id.clone(), live.clone());
        self.by_id.store(Arc::new(by_id));
        live
    }
}

/// Counts outcome events for the arm their `rec_id` records.
impl OutcomeObserver for Experiments {
    fn observe(&self, rec_id: &str, outcome: Outcome) {
        let Some((experiment, arm)) = parse_rec_id(rec_id) else {
            return;
        };
        let by_id = self.by_id.load();
        let Some(live) = by_id.get(experiment).filter(|live| !live.is_stopped()) else {
            return;
        };
        let Some(index) = live.experiment.arm_index(arm) else {
            return;
        };
        match outcome {
            Outcome::Click => live.counters[index].clicked(),
            Outcome::Conversion => live.counters[index].converted(),
        }
    }
}

/// The thread writing the counts, and the channel whose closing stops it.
struct Flusher {
    stop: crossbeam::channel::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

fn decode<T: serde::de::DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, StorageError> {
    serde_json::from_slice(value).map_err(|error| StorageError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests;
