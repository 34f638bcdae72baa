//! 95% confidence intervals of a rate and of the difference of two rates, by the
//! normal approximation (Wald). Pure.

/// The two-sided 95% quantile of the standard normal distribution.
pub const Z_95: f64 = 1.959963984540054;

/// `successes / trials`, 0 when there are no trials.
pub fn rate(successes: u64, trials: u64) -> f64 {
    match trials {
        0 => 0.0,
        _ => successes as f64 / trials as f64,
    }
}

/// The rate as a proportion for the variance: clamped to [0, 1] (clicks can outnumber
/// impressions when an item is clicked more than once).
fn proportion(successes: u64, trials: u64) -> f64 {
    rate(successes, trials).clamp(0.0, 1.0)
}

/// The 95% Wald interval of a rate: `p ± z·sqrt(p(1−p)/n)` with `p` the rate (clamped
/// to [0, 1]) and `n` the trials, clamped to [0, 1]; `[0, 1]` when `n` is 0.
pub fn wald(successes: u64, trials: u64) -> [f64; 2] {
    if trials == 0 {
        return [0.0, 1.0];
    }
    let p = proportion(successes, trials);
    let half = Z_95 * (p * (1.0 - p) / trials as f64).sqrt();
    [(p - half).max(0.0), (p + half).min(1.0)]
}

/// The 95% Wald interval of the difference of two rates, arm (1) minus control (0):
/// `(p1 − p0) ± z·sqrt(p1(1−p1)/n1 + p0(1−p0)/n0)`, clamped to [−1, 1] only; `[−1, 1]`
/// when either has no trials.
pub fn wald_difference(successes: u64, trials: u64, control_successes: u64, control_trials: u64) -> [f64; 2] {
    if trials == 0 || control_trials == 0 {
        return [-1.0, 1.0];
    }
    let (p1, p0) = (
        proportion(successes, trials),
        proportion(control_successes, control_trials),
    );
    let variance = p1 * (1.0 - p1) / trials as f64 + p0 * (1.0 - p0) / control_trials as f64;
    let half = Z_95 * variance.sqrt();
    let difference = p1 - p0;
    [(difference - half).max(-1.0), (difference + half).min(1.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_interval(actual: [f64; 2], expected: [f64; 2]) {
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < 1e-9, "{actual:?} != {expected:?}");
        }
    }

    #[test]
    fn a_rate_against_the_textbook() {
        // 50 of 100: p = 0.5, se = sqrt(0.25 / 100) = 0.05, z·se = 0.0979981992...
        assert_interval(wald(50, 100), [0.402_001_800_772_997_3, 0.597_998_199_227_002_7]);
        // 30 of 200: p = 0.15, se = sqrt(0.15·0.85 / 200) = 0.0252487623..., z·se = 0.0494866648...
        assert_interval(wald(30, 200), [0.100_513_335_147_814_77, 0.199_486_664_852_185_22]);
        // 1 of 10: 0.1 ± 0.1859385... is clamped at 0.
        assert_interval(wald(1, 10), [0.0, 0.285_938_509_691_368_47]);
        // 99 of 100: 0.99 ± 0.0195013... is clamped at 1.
        assert_interval(wald(99, 100), [0.970_498_604_582_012_1, 1.0]);
        // The usual rounding, z = 1.96, agrees to the fourth decimal.
        let [lo, hi] = wald(50, 100);
        assert!((lo - 0.402).abs() < 1e-4 && (hi - 0.598).abs() < 1e-4);
    }

    #[test]
    fn a_difference_against_the_textbook() {
        // 120/1000 vs 100/1000: 0.02 ± z·sqrt(0.12·0.88/1000 + 0.1·0.9/1000)
        // = 0.02 ± z·0.0139857... = 0.02 ± 0.0274114819...
        assert_interval(
            wald_difference(120, 1000, 100, 1000),
            [-0.007_411_481_998_019_945_5, 0.047_411_481_998_019_92],
        );
        // 60/400 vs 45/400: 0.0375 ± z·sqrt(0.15·0.85/400 + 0.1125·0.8875/400) = 0.0375 ± 0.0467261...
        assert_interval(
            wald_difference(60, 400, 45, 400),
            [-0.009_226_107_631_793_504, 0.084_226_107_631_793_49],
        );
        // The other way round is the mirror image.
        assert_interval(
            wald_difference(45, 400, 60, 400),
            [-0.084_226_107_631_793_49, 0.009_226_107_631_793_504],
        );
    }

    #[test]
    fn no_trials_know_nothing() {
        assert_eq!(rate(3, 0), 0.0);
        assert_eq!(wald(0, 0), [0.0, 1.0]);
        assert_eq!(wald_difference(1, 10, 0, 0), [-1.0, 1.0]);
        assert_eq!(wald_difference(0, 0, 1, 10), [-1.0, 1.0]);
        // A rate of 0 or 1 has no spread in this approximation.
        assert_eq!(wald(0, 50), [0.0, 0.0]);
        assert_eq!(wald(50, 50), [1.0, 1.0]);
        // More clicks than impressions: the rate is reported, the interval is of 1.
        assert_eq!(rate(12, 10), 1.2);
        assert_eq!(wald(12, 10), [1.0, 1.0]);
    }
}
