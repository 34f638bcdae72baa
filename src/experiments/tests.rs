//! The experiments store on a real RocksDB in a temp dir: stickiness across a reload,
//! counting and attribution, stopping, conflicts, the counts written at stop.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::ManualClock;
use crate::config::Durability;
use crate::domain::experiment::{Arm, Status, Unit};

fn open(dir: &tempfile::TempDir) -> Arc<Experiments> {
    let storage = Storage::open(dir.path(), Durability::Sync).unwrap();
    Experiments::load(storage, Arc::new(ManualClock::new(1_000))).unwrap()
}

fn is_model(id: &str) -> bool {
    ["popularity", "default"].contains(&id)
}

fn new_experiment(id: &str, unit: Option<Unit>, arms: &[(&str, &str, f64)]) -> NewExperiment {
    NewExperiment {
        id: id.into(),
        unit,
        arms: arms
            .iter()
            .map(|(name, model_id, share)| Arm {
                name: (*name).into(),
                model_id: (*model_id).into(),
                share: *share,
            })
            .collect(),
    }
}

fn half_and_half(id: &str) -> NewExperiment {
    new_experiment(id, None, &[("control", "popularity", 0.5), ("b", "default", 0.5)])
}

fn arm_of(experiments: &Experiments, id: &str, user: &str) -> String {
    experiments.assign(id, Some(user), None).unwrap().arm
}

#[test]
fn assignment_is_sticky_across_calls_and_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    let (_, report) = experiments.create(half_and_half("exp1"), is_model).unwrap();
    assert_eq!((report.status, report.control.as_str()), (Status::Running, "control"));
    let users: Vec<String> = (0..200).map(|user| format!("u{user}")).collect();
    let before: Vec<String> = users.iter().map(|user| arm_of(&experiments, "exp1", user)).collect();
    let again: Vec<String> = users.iter().map(|user| arm_of(&experiments, "exp1", user)).collect();
    assert_eq!(before, again);
    assert!(before.iter().any(|arm| arm == "b") && before.iter().any(|arm| arm == "control"));
    drop(experiments);
    let reloaded = open(&dir);
    let after: Vec<String> = users.iter().map(|user| arm_of(&reloaded, "exp1", user)).collect();
    assert_eq!(before, after, "the same arms after a reload from storage");
    let assignment = reloaded.assign("exp1", Some("u1"), None).unwrap();
    let model = if assignment.arm == "b" { "default" } else { "popularity" };
    assert_eq!(assignment.model_id, model);
    assert!(
        reloaded.assign("popularity", Some("u1"), None).is_none(),
        "a model is no experiment"
    );
}

#[test]
fn the_unit_decides_what_is_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    let by_session = new_experiment(
        "by_session",
        Some(Unit::Session),
        &[("control", "popularity", 0.5), ("b", "default", 0.5)],
    );
    experiments.create(by_session, is_model).unwrap();
    // One session, many users: always the session's arm.
    let arm = experiments.assign("by_session", Some("u0"), Some("s1")).unwrap().arm;
    for user in 1..50 {
        let user = format!("u{user}");
        assert_eq!(
            experiments.assign("by_session", Some(&user), Some("s1")).unwrap().arm,
            arm
        );
    }
    // Without a session, the user is hashed: the same arm as a session of that name.
    assert_eq!(
        experiments.assign("by_session", Some("x7"), None).unwrap().arm,
        experiments.assign("by_session", None, Some("x7")).unwrap().arm
    );
    // Neither id: the control, not counted, under a plain rec_id.
    let anonymous = experiments.assign("by_session", None, None).unwrap();
    assert_eq!((anonymous.arm.as_str(), anonymous.counted), ("control", false));
    assert!(uuid::Uuid::parse_str(&anonymous.rec_id()).is_ok());
}

#[test]
fn outcomes_and_served_responses_count_for_their_arm_and_survive_a_flush_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    experiments.create(half_and_half("exp1"), is_model).unwrap();
    let assignment = experiments.assign("exp1", Some("u1"), None).unwrap();
    let rec_id = assignment.rec_id();
    assert_eq!(
        parse_rec_id(&rec_id),
        Some(("exp1", assignment.arm.as_str())),
        "{rec_id}"
    );
    experiments.count_served(&assignment, 10);
    experiments.count_served(&assignment, 5);
    experiments.observe(&rec_id, Outcome::Click);
    experiments.observe(&rec_id, Outcome::Click);
    experiments.observe(&rec_id, Outcome::Conversion);
    // Not this experiment's, or no arm of it: nothing.
    experiments.observe(&rec_id.replace(".exp1.", ".exp2."), Outcome::Click);
    experiments.observe(&format!("{}.exp1.zzz", uuid::Uuid::now_v7()), Outcome::Click);
    experiments.observe(&uuid::Uuid::now_v7().to_string(), Outcome::Click);
    let expected = ArmCounts {
        requests: 2,
        impressions: 15,
        clicks: 2,
        conversions: 1,
    };
    let counts_of = |experiments: &Experiments| {
        let report = experiments.report("exp1").unwrap();
        let arm = report
            .arms
            .iter()
            .find(|arm| arm.name == assignment.arm)
            .unwrap()
            .clone();
        let other = report
            .arms
            .iter()
            .find(|arm| arm.name != assignment.arm)
            .unwrap()
            .counts;
        (arm, other)
    };
    let (arm, other) = counts_of(&experiments);
    assert_eq!((arm.counts, other), (expected, ArmCounts::default()));
    assert!((arm.ctr - 2.0 / 15.0).abs() < 1e-12 && arm.conversion_rate == 0.5);

    experiments.flush_counts().unwrap();
    // Counted after the last write and never written: what a crash loses.
    experiments.observe(&rec_id, Outcome::Click);
    drop(experiments);
    let reloaded = open(&dir);
    assert_eq!(counts_of(&reloaded).0.counts, expected);
    // Reloaded counters go on from the stored counts.
    reloaded.observe(&rec_id, Outcome::Click);
    assert_eq!(counts_of(&reloaded).0.counts.clicks, 3);
}

#[test]
fn a_clean_stop_writes_the_last_counts() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    experiments.create(half_and_half("exp1"), is_model).unwrap();
    experiments.start_flushing(Duration::from_secs(3600)).unwrap();
    let assignment = experiments.assign("exp1", Some("u1"), None).unwrap();
    experiments.count_served(&assignment, 3);
    experiments.stop_flushing();
    drop(experiments);
    let reloaded = open(&dir);
    let report = reloaded.report("exp1").unwrap();
    let arm = report.arms.iter().find(|arm| arm.name == assignment.arm).unwrap();
    assert_eq!((arm.counts.requests, arm.counts.impressions), (1, 3));
}

#[test]
fn a_stopped_experiment_serves_the_control_and_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    let new = new_experiment("exp1", None, &[("a", "default", 0.5), ("control", "popularity", 0.5)]);
    experiments.create(new, is_model).unwrap();
    let running = (0..100)
        .map(|user| experiments.assign("exp1", Some(&format!("u{user}")), None).unwrap())
        .find(|assignment| assignment.arm == "a")
        .expect("some user gets arm a");
    let rec_id = running.rec_id();
    let (stored, report) = experiments.stop("exp1").unwrap();
    assert_eq!((stored.stopped_at, report.status), (Some(1_000), Status::Stopped));
    // Stopping again changes nothing.
    assert_eq!(experiments.stop("exp1").unwrap().0, stored);
    for user in 0..100 {
        let assignment = experiments.assign("exp1", Some(&format!("u{user}")), None).unwrap();
        assert_eq!(
            (
                assignment.arm.as_str(),
                assignment.model_id.as_str(),
                assignment.counted
            ),
            ("control", "popularity", false)
        );
        assert_eq!(parse_rec_id(&assignment.rec_id()), None);
        experiments.count_served(&assignment, 4);
    }
    // An assignment made before the stop, and outcomes of responses served before it.
    experiments.count_served(&running, 4);
    experiments.observe(&rec_id, Outcome::Click);
    let report = experiments.report("exp1").unwrap();
    assert!(
        report.arms.iter().all(|arm| arm.counts == ArmCounts::default()),
        "{report:?}"
    );
    drop(experiments);
    assert_eq!(open(&dir).report("exp1").unwrap().status, Status::Stopped);
}

#[test]
fn ids_of_models_and_experiments_conflict_and_bad_definitions_are_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let experiments = open(&dir);
    experiments.create(half_and_half("exp1"), is_model).unwrap();
    assert!(matches!(
        experiments.create(half_and_half("exp1"), is_model),
        Err(ExperimentError::Conflict(_))
    ));
    assert!(matches!(
        experiments.create(half_and_half("default"), is_model),
        Err(ExperimentError::Conflict(_))
    ));
    // An arm naming an experiment names no model.
    let nested = new_experiment("exp2", None, &[("control", "popularity", 0.5), ("b", "exp1", 0.5)]);
    match experiments.create(nested, is_model) {
        Err(ExperimentError::Invalid(problems)) => assert!(problems[0].contains("\"exp1\""), "{problems:?}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(experiments.report("nope"), Err(ExperimentError::NotFound(_))));
    assert!(matches!(experiments.stop("nope"), Err(ExperimentError::NotFound(_))));
    assert_eq!(experiments.reports().len(), 1);
}

#[test]
fn replicated_experiments_are_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let origin_dir = tempfile::tempdir().unwrap();
    let (stored, _) = open(&origin_dir).create(half_and_half("exp1"), is_model).unwrap();
    let experiments = open(&dir);
    experiments.put_replicated(stored.clone()).unwrap();
    experiments.put_replicated(stored.clone()).unwrap();
    let mut different = stored.clone();
    different.experiment.arms.reverse();
    assert!(matches!(
        experiments.put_replicated(different),
        Err(ExperimentError::Conflict(_))
    ));
    experiments.stop_at("exp1", 5_000).unwrap();
    drop(experiments);
    let reloaded = open(&dir);
    let report = reloaded.report("exp1").unwrap();
    assert_eq!(report.stopped_at.as_deref(), Some("1970-01-01T00:00:05.000Z"));
    assert_eq!(
        arm_of(&reloaded, "exp1", "u1"),
        "control",
        "stopped where it was replicated"
    );
}
