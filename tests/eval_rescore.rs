//! The rescore op on the real harness (issue 38: `kforge eval` measures a torch.compile
//! figure not cached yet after its verdict and has the harness score the verdict against
//! it, with the judge's own `baselines.against_compile`). It runs nothing on a device, so
//! it runs here on the CPU; the deferral itself needs a GPU.

mod eval_common;

use eval_common::evaluator;
use kforge::protocol::{Baseline, BaselineChoice, CompileDeferral, CompileFigures, Timing};

fn deferred_timing() -> Timing {
    Timing {
        meaningful: true,
        score: Some(1.2),
        score_low: Some(1.17),
        score_high: Some(1.23),
        compile_deferred: Some(CompileDeferral::Pending),
        baseline: Some(Baseline::Eager),
        baseline_reason: Some("baseline = best, scored against eager until ...".into()),
        ..Timing::default()
    }
}

fn figures(speedup: f64, low: f64, high: f64) -> CompileFigures {
    CompileFigures {
        mode: "default".into(),
        median_ms: Some(1.6),
        eager_median_ms: Some(2.4),
        speedup_over_eager: Some(speedup),
        speedup_low: Some(low),
        speedup_high: Some(high),
        compile_s: Some(14.0),
        ..CompileFigures::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_rescores_a_deferred_verdict_against_the_figure_measured_after_it() {
    let evaluator = evaluator();
    let faster = figures(1.5, 1.48, 1.52);
    let timing = evaluator
        .rescore(&deferred_timing(), Some(&faster), BaselineChoice::Best)
        .await
        .expect("a rescored timing");
    assert_eq!(timing.compile_deferred, Some(CompileDeferral::AfterVerdict));
    assert_eq!(timing.baseline, Some(Baseline::Compile));
    let vs = timing
        .score_vs_compile
        .expect("a score against torch.compile");
    assert!((vs - 0.8).abs() < 1e-9, "{vs}");
    let (low, high) = timing.score_vs_compile_interval().expect("its interval");
    assert!(low < vs && vs < high, "{low} {vs} {high}");
    assert_eq!(timing.compile.as_ref().and_then(|c| c.median_ms), Some(1.6));
    assert_eq!(timing.score, Some(1.2), "the score against eager stays");

    // A tie stays against eager under `best`; `compile` takes it whatever.
    let tied = figures(1.004, 0.99, 1.01);
    let best = evaluator
        .rescore(&deferred_timing(), Some(&tied), BaselineChoice::Best)
        .await
        .unwrap();
    assert_eq!(best.baseline, Some(Baseline::Eager));
    assert!(best.score_vs_compile.is_some());
    let compile = evaluator
        .rescore(&deferred_timing(), Some(&tied), BaselineChoice::Compile)
        .await
        .unwrap();
    assert_eq!(compile.baseline, Some(Baseline::Compile));

    // A task torch.compile cannot serve: why, no score against it, eager.
    let unavailable = CompileFigures {
        mode: "default".into(),
        error: Some("under torch.compile the task computes another result".into()),
        ..CompileFigures::default()
    };
    let timing = evaluator
        .rescore(&deferred_timing(), Some(&unavailable), BaselineChoice::Best)
        .await
        .unwrap();
    assert_eq!(timing.baseline, Some(Baseline::Eager));
    assert_eq!(timing.score_vs_compile, None);
    assert!(
        timing
            .baseline_reason
            .as_deref()
            .is_some_and(|r| r.contains("computes another result")),
        "{:?}",
        timing.baseline_reason
    );
    evaluator.shutdown().await;
}
