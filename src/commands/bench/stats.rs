//! The statistics the benchmarks report: medians, spreads, and the share of an
//! evaluation's wall time that was the kernel's own work.

/// Seconds an evaluation spent on the kernel's own work: its correctness trials (the first
/// includes Triton's compile), its timed runs and the re-check after timing; None for a
/// result that never reached its correctness trials. Everything else in the wall time is
/// overhead: process creation, CUDA initialization, imports, IPC (docs/benchmarks.md).
pub fn kernel_work_seconds(phases: &std::collections::BTreeMap<String, f64>) -> Option<f64> {
    let correctness = phases.get("correctness")?;
    Some(
        correctness
            + KERNEL_WORK_PHASES
                .iter()
                .filter_map(|phase| phases.get(*phase))
                .sum::<f64>(),
    )
}

/// The judge's phases (besides correctness) that run the kernel: its warm-up and the runs
/// that set the forwards per window are part of timing it.
const KERNEL_WORK_PHASES: [&str; 4] = ["timing_warm_up", "timing_widen", "timing", "recheck"];

/// The median (the mean of the middle two of an even count; 0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The range as a percentage of the median: how far apart repeated measurements are.
pub fn spread(values: &[f64]) -> f64 {
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    100.0 * (max - min) / median(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((spread(&[1.0, 1.02, 1.01]) - 1.9801980198).abs() < 1e-6);
    }

    /// The kernel's own work is its correctness trials, timed runs and re-check; a result
    /// without a correctness phase (it failed before) has no overhead figure.
    #[test]
    fn kernel_work_counts_correctness_timing_and_recheck() {
        let phases: std::collections::BTreeMap<String, f64> = [
            ("startup", 0.07),
            ("reference_process", 0.4),
            ("calibration", 0.3),
            ("correctness", 1.5),
            ("timing_warm_up", 0.2),
            ("timing_widen", 0.1),
            ("timing", 0.5),
            ("reference_exit", 0.05),
            ("recheck", 0.01),
            ("audit", 0.02),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert!((kernel_work_seconds(&phases).unwrap() - 2.31).abs() < 1e-9);
        let failed: std::collections::BTreeMap<String, f64> = [("startup".to_string(), 0.1)].into();
        assert_eq!(kernel_work_seconds(&failed), None);
    }
}
