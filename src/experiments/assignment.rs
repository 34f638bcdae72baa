//! Which arm a unit gets, and the `rec_id` that records it.
//!
//! Assignment is sticky by hash, with nothing stored: the unit's point in [0, 1) is
//! `xxh3_64("{experiment id}\0{unit value}") / 2^64`, and the unit gets the first arm
//! whose cumulative share (in the arms' order) exceeds it. The same unit gets the same
//! arm on every node, after every restart, for as long as the arms stay as created.
//!
//! A response served through an experiment has the `rec_id`
//! `"{uuid v7}.{experiment id}.{arm name}"`: ids and arm names never hold a `.`, so an
//! outcome event carrying it is attributed to its arm by parsing it, on any node.

use xxhash_rust::xxh3::xxh3_64;

use crate::domain::experiment::Arm;

/// 2^64, as a float.
const TWO_TO_THE_64: f64 = 18_446_744_073_709_551_616.0;

/// The unit's point in [0, 1): its hash over 2^64 (the 1,024 largest hashes round to
/// 1.0, which [`arm_at`] gives the last arm like any point past the shares' sum).
pub fn unit_point(experiment_id: &str, unit_value: &str) -> f64 {
    xxh3_64(format!("{experiment_id}\0{unit_value}").as_bytes()) as f64 / TWO_TO_THE_64
}

/// The index of the arm a unit's point falls in, walking the arms by cumulative share;
/// the last arm takes what rounding leaves at or above the sum.
pub fn arm_at(arms: &[Arm], point: f64) -> usize {
    debug_assert!(!arms.is_empty(), "an experiment has arms");
    let mut cumulative = 0.0;
    for (index, arm) in arms.iter().enumerate() {
        cumulative += arm.share;
        if point < cumulative {
            return index;
        }
    }
    arms.len() - 1
}

/// The `rec_id` of a response served by `arm` of `experiment`: a new UUIDv7, the
/// experiment id and the arm name, joined by dots.
pub fn encode_rec_id(experiment: &str, arm: &str) -> String {
    format!("{}.{experiment}.{arm}", uuid::Uuid::now_v7())
}

/// The experiment id and arm name a `rec_id` records; `None` for one without exactly
/// two dots (a plain UUID, any other client's id), at once.
pub fn parse_rec_id(rec_id: &str) -> Option<(&str, &str)> {
    let (_, rest) = rec_id.split_once('.')?;
    let (experiment, arm) = rest.split_once('.')?;
    if experiment.is_empty() || arm.is_empty() || arm.contains('.') {
        return None;
    }
    Some((experiment, arm))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arms(shares: &[f64]) -> Vec<Arm> {
        shares
            .iter()
            .enumerate()
            .map(|(index, share)| Arm {
                name: format!("arm{index}"),
                model_id: "default".into(),
                share: *share,
            })
            .collect()
    }

    /// Over 100,000 simulated users, each arm gets its share within ±2% (absolute).
    fn assert_shares_hold(shares: &[f64]) {
        let arms = arms(shares);
        let users = 100_000;
        let mut counts = vec![0u32; arms.len()];
        for user in 0..users {
            counts[arm_at(&arms, unit_point("exp1", &format!("user-{user}")))] += 1;
        }
        for (arm, count) in arms.iter().zip(&counts) {
            let observed = f64::from(*count) / f64::from(users);
            assert!(
                (observed - arm.share).abs() <= 0.02,
                "{}: share {} observed {observed} ({counts:?})",
                arm.name,
                arm.share
            );
        }
    }

    #[test]
    fn assignment_follows_the_shares_over_100k_users() {
        assert_shares_hold(&[0.5, 0.5]);
        assert_shares_hold(&[0.2, 0.3, 0.5]);
    }

    #[test]
    fn assignment_is_sticky_and_differs_between_experiments() {
        let arms = arms(&[0.5, 0.5]);
        for user in 0..1000 {
            let unit = format!("user-{user}");
            let first = arm_at(&arms, unit_point("exp1", &unit));
            assert_eq!(arm_at(&arms, unit_point("exp1", &unit)), first);
        }
        // The experiment id is part of the hash: another experiment splits differently.
        let differing = (0..1000)
            .filter(|user| {
                let unit = format!("user-{user}");
                arm_at(&arms, unit_point("exp1", &unit)) != arm_at(&arms, unit_point("exp2", &unit))
            })
            .count();
        assert!((400..600).contains(&differing), "{differing} of 1000 differ");
    }

    #[test]
    fn the_point_is_the_documented_hash() {
        let expected = xxh3_64(b"exp1\0u42") as f64 / 2f64.powi(64);
        assert_eq!(unit_point("exp1", "u42"), expected);
        assert!((0.0..1.0).contains(&unit_point("exp1", "u42")));
    }

    #[test]
    fn the_walk_by_cumulative_share() {
        let arms = arms(&[0.2, 0.3, 0.5]);
        assert_eq!(arm_at(&arms, 0.0), 0);
        assert_eq!(arm_at(&arms, 0.199), 0);
        assert_eq!(arm_at(&arms, 0.2), 1);
        assert_eq!(arm_at(&arms, 0.4999), 1);
        assert_eq!(arm_at(&arms, 0.5), 2);
        assert_eq!(arm_at(&arms, 0.999_999_999), 2);
    }

    #[test]
    fn rec_ids_parse_back() {
        let rec_id = encode_rec_id("exp_1", "arm-b");
        assert_eq!(parse_rec_id(&rec_id), Some(("exp_1", "arm-b")));
        let uuid = rec_id.split('.').next().unwrap();
        assert!(
            uuid::Uuid::parse_str(uuid).is_ok_and(|id| id.get_version_num() == 7),
            "{rec_id}"
        );
        for foreign in [uuid, "", "a.b", "a..b", "a.b.", "a.b.c.d", "..", "x.exp."] {
            assert_eq!(parse_rec_id(foreign), None, "{foreign:?}");
        }
    }
}
