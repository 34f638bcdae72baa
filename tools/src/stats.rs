//! Figures from measurements, and how the tools write them: percentiles and medians,
//! least-squares lines, latencies in milliseconds, counts with thousands separators.

use std::time::Instant;

/// Milliseconds since `since`.
pub fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// Nearest-rank percentile (`fraction` in 0..=1).
pub fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(f64::NAN)
}

/// The middle value, or the mean of the two middle ones.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => (sorted[middle - 1] + sorted[middle]) / 2.0,
        _ => sorted[middle],
    }
}

/// The least-squares line through `points`: (slope, intercept); the slope is 0 when
/// every x is the same.
pub fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len().max(1) as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let covariance: f64 = points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    let slope = if variance > 0.0 { covariance / variance } else { 0.0 };
    (slope, mean_y - slope * mean_x)
}

/// The largest value; NaN when there is none.
pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

/// `123456.7` -> `"123,457"`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{value:.0}");
    let mut out = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position) % 3 == 0 && digit.is_ascii_digit() {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A latency in milliseconds with three significant decimals below 10 ms: `"0.412 ms"`,
/// `"12.34 ms"`, `"123.4 ms"`.
pub fn ms(value: f64) -> String {
    match value {
        v if v < 10.0 => format!("{v:.3} ms"),
        v if v < 100.0 => format!("{v:.2} ms"),
        v => format!("{v:.1} ms"),
    }
}

/// p50, p90, p99 and max of `values`, each written by `format`: the cells of a latency row.
pub fn percentile_cells(values: &[f64], format: fn(f64) -> String) -> [String; 4] {
    [
        format(percentile(values, 0.5)),
        format(percentile(values, 0.9)),
        format(percentile(values, 0.99)),
        format(max(values)),
    ]
}

/// `"p50 …, p90 …, p99 …, max …"`, in [`ms`].
pub fn summary(values: &[f64]) -> String {
    let [p50, p90, p99, max] = percentile_cells(values, ms);
    format!("p50 {p50}, p90 {p90}, p99 {p99}, max {max}")
}

/// `"p50 …, p99 …, max …"`, in [`ms`].
pub fn brief_summary(values: &[f64]) -> String {
    let (p50, p99) = (percentile(values, 0.5), percentile(values, 0.99));
    format!("p50 {}, p99 {}, max {}", ms(p50), ms(p99), ms(max(values)))
}
