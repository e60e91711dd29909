//! The batch's kernels in KernelBench's own run layout, so its scripts can check them
//! again: `kernelbench/level_<L>/level_<L>_problem_<P>_sample_0_kernel.py` (each task's
//! best kernel, else its last evaluated one) and `kernelbench/level_<L>/eval_results.json`
//! with the fields `scripts/eval_from_generations.py` writes (`compiled`, `correctness`,
//! `metadata`, `runtime`, `runtime_stats`), keyed by problem id. Re-check with
//! `python scripts/eval_from_generations.py runs_dir=<batch>/kernelbench run_name=level_<L>
//! level=<L> ...`. Tasks outside KernelBench's layout (no level or problem number) are not
//! exported; summary.md says how many.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::manifest::Manifest;
use super::results::TaskResult;
use super::summary::BatchSummary;
use crate::protocol::{Baseline, Category, EvalResult, PrecisionPolicy, PrecisionRecord, Timing};
use crate::session::state::{CandidateStatus, SessionState};
use crate::session::store::SessionDir;

pub const EXPORT_DIR: &str = "kernelbench";

/// KernelBench counts a kernel that failed to build or load as not compiled.
fn compiled(category: Option<Category>) -> bool {
    !matches!(
        category,
        Some(
            Category::StaticCheck
                | Category::Syntax
                | Category::Import
                | Category::Compile
                | Category::OutOfResources
        )
    )
}

/// The candidate to export: the session's best, else the last one evaluated.
fn exported_candidate(state: &SessionState) -> Option<&crate::session::state::Candidate> {
    state
        .best_candidate()
        .and_then(|id| state.candidates.get(&id))
        .or_else(|| {
            state
                .candidates
                .values()
                .rev()
                .find(|c| matches!(c.status, CandidateStatus::Correct | CandidateStatus::Failed))
        })
}

/// One task's `eval_results.json` entry and its kernel, if it has one.
fn entry(batch: &Path, task: &TaskResult) -> (Value, Option<String>) {
    let session_dir = batch
        .join(super::manifest::TASKS_DIR)
        .join(task.key.as_str());
    let state = SessionDir::open(&session_dir)
        .and_then(|s| s.read_events())
        .map(|r| SessionState::from_records(&r.records))
        .unwrap_or_default();
    let Some(candidate) = exported_candidate(&state) else {
        return (
            json!({
                "sample_id": 0,
                "compiled": false,
                "correctness": false,
                "metadata": {"kforge_task": task.key, "kforge_status": task.status.word(),
                             "error": task.refused.clone().unwrap_or_else(|| "no kernel was evaluated".into())},
                "runtime": -1.0,
                "runtime_stats": {},
            }),
            None,
        );
    };
    let kernel = std::fs::read_to_string(session_dir.join(&candidate.file)).ok();
    let result: Option<EvalResult> = candidate
        .eval_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(session_dir.join(f)).ok())
        .and_then(|t| serde_json::from_str(&t).ok());
    let eval = candidate.eval.clone().unwrap_or_default();
    let timing = result
        .as_ref()
        .and_then(|r| r.timing.as_ref())
        .filter(|t| t.meaningful);
    let hardware = result.as_ref().and_then(|r| r.device.name.clone());
    let runtime_stats = timing.map_or(json!({}), |t| {
        json!({
            "mean": t.kernel.mean_ms,
            "std": t.kernel.std_ms,
            "min": t.kernel.min_ms,
            "max": t.kernel.max_ms,
            "num_trials": t.kernel.runs,
            "hardware": hardware,
            "device": eval.device,
        })
    });
    let mut metadata = json!({
        "kforge_task": task.key,
        "kforge_status": task.status.word(),
        "kforge_candidate": candidate.id,
        "kforge_kernel_median_ms": eval.kernel_ms,
        "kforge_reference_median_ms": eval.reference_ms,
        // KernelBench's speedup is against eager PyTorch, whatever kforge's headline is.
        "kforge_speedup": result.as_ref().map_or(eval.score, |r| r.score_vs(Baseline::Eager).0),
        "hardware": hardware,
        "device": eval.device,
    });
    if let (Value::Object(m), Some(t)) = (&mut metadata, timing) {
        m.extend(timing_metadata(t));
    }
    if let Value::Object(m) = &mut metadata {
        m.extend(precision_metadata(
            result.as_ref().and_then(|r| r.precision.as_ref()),
            task.precision,
        ));
    }
    if let Some(category) = eval.category {
        metadata["error_category"] = json!(category.as_str());
        metadata["error"] = json!(eval.summary);
    }
    if let Value::Object(m) = &mut metadata {
        m.extend(shapes_metadata(task.shapes.as_ref(), task.generalizes()));
    }
    (
        json!({
            "sample_id": 0,
            "compiled": eval.correct || compiled(eval.category),
            "correctness": eval.correct,
            "metadata": metadata,
            // KernelBench's runtime is the mean of its timed runs, in ms; -1 when untimed.
            "runtime": timing.map_or(-1.0, |t| t.kernel.mean_ms),
            "runtime_stats": runtime_stats,
        }),
        kernel,
    )
}

/// KernelBench's `correctness` is on the task's own sizes; beside it, the unseen-shapes
/// check's verdict and whether the kernel was shown right on unseen sizes (`generalizes`: a
/// check that did not run never was). Nothing where the kernel was not checked.
fn shapes_metadata(
    verdict: Option<&crate::protocol::shapes::ShapeVerdict>,
    generalizes: bool,
) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    if let Some(verdict) = verdict {
        let word = serde_json::to_value(verdict)
            .ok()
            .and_then(|v| v.get("verdict").cloned())
            .unwrap_or(Value::Null);
        m.insert("kforge_unseen_shapes".into(), word);
        m.insert("kforge_generalizes".into(), json!(generalizes));
    }
    m
}

/// The precision the kernel was held to (the result's policy, else the session's) and, where
/// the result has it, the whole precision record: what the kernel computes in, the
/// tolerances, the reference's settings (issue 22).
fn precision_metadata(
    record: Option<&PrecisionRecord>,
    session: Option<PrecisionPolicy>,
) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(
        "kforge_precision_policy".into(),
        json!(record.map(|p| p.policy).or(session)),
    );
    if let Some(p) = record {
        m.insert("kforge_precision".into(), json!(p));
    }
    m
}

/// What kforge's timing adds to an exported entry's metadata: the speedup's 95% interval,
/// each median's, the method, whether it was noisy, and the environment that shaped it
/// (absent fields: a result from before intervals).
fn timing_metadata(t: &Timing) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            m.insert(key.to_string(), value);
        }
    };
    put("kforge_speedup_low", json!(t.score_low));
    put("kforge_speedup_high", json!(t.score_high));
    put("kforge_kernel_ci_ms", json!(t.kernel.interval()));
    put("kforge_reference_ci_ms", json!(t.reference.interval()));
    put("kforge_timing_method", json!(t.method));
    put("kforge_interval_method", json!(t.interval_method));
    if t.score_interval().is_some() {
        put("kforge_timing_noisy", json!(t.noisy));
    }
    put("kforge_timing_environment", json!(t.environment));
    put("kforge_compile", json!(t.compile));
    put("kforge_speedup_vs_compile", json!(t.score_vs_compile));
    put(
        "kforge_speedup_vs_compile_low",
        json!(t.score_vs_compile_low),
    );
    put(
        "kforge_speedup_vs_compile_high",
        json!(t.score_vs_compile_high),
    );
    put("kforge_baseline", json!(t.baseline));
    put("kforge_defaults", json!(t.defaults));
    put("kforge_speedup_vs_defaults", json!(t.score_vs_defaults));
    put(
        "kforge_speedup_vs_defaults_low",
        json!(t.score_vs_defaults_low),
    );
    put(
        "kforge_speedup_vs_defaults_high",
        json!(t.score_vs_defaults_high),
    );
    m
}

/// Writes the export; returns the files written.
pub fn write_kernelbench(batch: &Path, summary: &BatchSummary) -> Result<Vec<PathBuf>> {
    let mut by_level: BTreeMap<u32, BTreeMap<u32, Value>> = BTreeMap::new();
    let mut written = Vec::new();
    for task in &summary.tasks {
        let (Some(level), Some(problem)) = (task.level, task.problem) else {
            continue;
        };
        let dir = batch.join(EXPORT_DIR).join(format!("level_{level}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let (value, kernel) = entry(batch, task);
        if let Some(kernel) = kernel {
            let file = dir.join(format!(
                "level_{level}_problem_{problem}_sample_0_kernel.py"
            ));
            std::fs::write(&file, kernel)
                .with_context(|| format!("cannot write {}", file.display()))?;
            written.push(file);
        }
        by_level.entry(level).or_default().insert(problem, value);
    }
    for (level, problems) in by_level {
        // KernelBench keys by problem id (a string) and holds a list of samples.
        let results: serde_json::Map<String, Value> = problems
            .into_iter()
            .map(|(p, v)| (p.to_string(), Value::Array(vec![v])))
            .collect();
        let file = batch
            .join(EXPORT_DIR)
            .join(format!("level_{level}"))
            .join("eval_results.json");
        std::fs::write(&file, serde_json::to_string_pretty(&results)? + "\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// Recomputes the summary from the sessions and writes every output of the batch: the
/// summary's files (`summary::write_summary`) and the KernelBench export.
pub fn write_all(dir: &Path, manifest: &Manifest) -> Result<BatchSummary> {
    let summary = super::summary::write_summary(dir, manifest)?;
    write_kernelbench(dir, &summary)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_says_the_precision_policy_and_what_the_kernel_computes_in() {
        let record: PrecisionRecord = serde_json::from_value(json!({
            "policy": "tf32", "reduced": [], "statement": "the kernel's GEMMs compute in TF32",
            "kernel_math": [{"category": "tf32_dot", "line": 9, "text": "tl.dot at line 9", "where": "kernel k",
                             "lowers": true, "dynamic": false}]
        }))
        .unwrap();
        let m = Value::Object(precision_metadata(
            Some(&record),
            Some(PrecisionPolicy::Strict),
        ));
        assert_eq!(m["kforge_precision_policy"], "tf32", "the result's own");
        assert_eq!(
            m["kforge_precision"]["kernel_math"][0]["category"],
            "tf32_dot"
        );
        assert_eq!(
            m["kforge_precision"]["statement"],
            "the kernel's GEMMs compute in TF32"
        );
        let m = Value::Object(precision_metadata(None, Some(PrecisionPolicy::Strict)));
        assert_eq!(m["kforge_precision_policy"], "strict");
        assert!(m.get("kforge_precision").is_none());
        let m = Value::Object(precision_metadata(None, None));
        assert_eq!(m["kforge_precision_policy"], Value::Null);
    }

    #[test]
    fn the_export_keeps_the_interval_and_the_environment() {
        let t: Timing = serde_json::from_value(json!({
            "meaningful": true, "method": "judge_window", "score": 1.23,
            "score_low": 1.2, "score_high": 1.26, "noisy": false,
            "interval_method": "bootstrap",
            "kernel": {"median_ms": 2.0, "ci_low_ms": 1.98, "ci_high_ms": 2.02},
            "reference": {"median_ms": 2.46},
            "environment": {"tf32_matmul": false, "driver": "580.159.04"}
        }))
        .unwrap();
        let m = Value::Object(timing_metadata(&t));
        assert_eq!(m["kforge_speedup_low"], 1.2);
        assert_eq!(m["kforge_speedup_high"], 1.26);
        assert_eq!(m["kforge_kernel_ci_ms"], json!([1.98, 2.02]));
        assert!(
            m.get("kforge_reference_ci_ms").is_none(),
            "none given: left out"
        );
        assert_eq!(m["kforge_timing_method"], "judge_window");
        assert_eq!(m["kforge_timing_noisy"], false);
        assert_eq!(m["kforge_timing_environment"]["driver"], "580.159.04");
        assert_eq!(m["kforge_timing_environment"]["tf32_matmul"], false);
        // A result from before intervals adds nothing.
        let old: Timing =
            serde_json::from_value(json!({"meaningful": true, "score": 1.5})).unwrap();
        assert!(timing_metadata(&old).is_empty());
    }

    #[test]
    fn the_export_says_whether_the_kernel_was_shown_right_on_unseen_shapes() {
        use crate::protocol::shapes::ShapeVerdict;
        let not_run = ShapeVerdict::NotRun {
            why: "every variant was skipped".into(),
        };
        let m = shapes_metadata(Some(&not_run), false);
        assert_eq!(m["kforge_unseen_shapes"], "not_run");
        assert_eq!(m["kforge_generalizes"], false);
        let passed = ShapeVerdict::Generalizes {
            passed: 5,
            checked: 5,
        };
        assert_eq!(
            shapes_metadata(Some(&passed), true)["kforge_unseen_shapes"],
            "generalizes"
        );
        assert!(shapes_metadata(None, false).is_empty());
    }

    #[test]
    fn build_failures_are_not_compiled_and_the_rest_are() {
        assert!(!compiled(Some(Category::Compile)));
        assert!(!compiled(Some(Category::Syntax)));
        assert!(compiled(Some(Category::Mismatch)));
        assert!(compiled(Some(Category::Timeout)));
        assert!(compiled(None));
    }
}
