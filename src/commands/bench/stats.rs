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

/// Each phase's median over the evaluations, judge phases then the server's (prefixed
/// `server:`), in the order the judge runs them where known: where the overhead goes.
pub fn phase_medians(results: &[&crate::protocol::EvalResult]) -> Vec<(String, f64)> {
    let order = |name: &str| {
        PHASE_ORDER
            .iter()
            .position(|p| *p == name)
            .unwrap_or(PHASE_ORDER.len())
    };
    let mut rows = medians_by_name(results, |r| &r.phases_s);
    rows.sort_by_key(|(name, _)| order(name));
    rows.extend(
        medians_by_name(results, |r| &r.server_phases_s)
            .into_iter()
            .map(|(name, s)| (format!("server:{name}"), s)),
    );
    rows
}

/// For every name in any result's map (`pick`), the median over the results (a result
/// without it counts 0), in name order.
fn medians_by_name(
    results: &[&crate::protocol::EvalResult],
    pick: impl Fn(&crate::protocol::EvalResult) -> &std::collections::BTreeMap<String, f64>,
) -> Vec<(String, f64)> {
    let names: std::collections::BTreeSet<&String> =
        results.iter().flat_map(|r| pick(r).keys()).collect();
    names
        .into_iter()
        .map(|name| {
            let values: Vec<f64> = results
                .iter()
                .map(|r| pick(r).get(name).copied().unwrap_or(0.0))
                .collect();
            (name.clone(), median(&values))
        })
        .collect()
}

/// The order in which the judge (the harness's `judge/` package) runs its phases (its PhaseClock marks).
const PHASE_ORDER: [&str; 18] = [
    "cuda_init",
    "task",
    "peaks",
    "startup",
    "reference_process",
    "buffers",
    "rehearsal",
    "calibration",
    "load",
    "build",
    "correctness",
    "audit",
    "audit_gpu_time",
    "timing_warm_up",
    "timing_widen",
    "timing",
    "reference_exit",
    "recheck",
];

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

    /// Phase medians come in the judge's order (unknown names after), then the server's.
    #[test]
    fn phase_medians_follow_the_judges_order_then_the_servers() {
        let result = |timing: f64, custom: f64, judge: f64| {
            let mut r: crate::protocol::EvalResult = serde_json::from_value(serde_json::json!({
                "status": "correct", "correct": true, "summary": "ok"
            }))
            .unwrap();
            r.phases_s = [
                ("timing".to_string(), timing),
                ("later_phase".to_string(), custom),
                ("startup".to_string(), 0.1),
            ]
            .into();
            r.server_phases_s = [("judge".to_string(), judge)].into();
            r
        };
        let (a, b, c) = (
            result(1.0, 5.0, 3.0),
            result(2.0, 6.0, 4.0),
            result(9.0, 7.0, 5.0),
        );
        let rows = phase_medians(&[&a, &b, &c]);
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["startup", "timing", "later_phase", "server:judge"]);
        assert_eq!(rows[1].1, 2.0);
        assert_eq!(rows[2].1, 6.0);
        assert_eq!(rows[3].1, 4.0);
    }
}
