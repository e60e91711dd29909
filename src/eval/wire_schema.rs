//! The shape of what kforge and the harness exchange, for checking the harness's typed
//! records (`kforge_harness/wire.py`) against it (tests/harness_wire.rs): every field of the
//! job, its `[eval]` settings, the result, its timing and the figures inside the timing
//! (each model's, the compile baseline's), with its JSON type.
//!
//! Each shape is read off two serialized values, one with every optional field set and one
//! with every optional field unset. The job, the result and the timing records are built
//! here without `..Default::default()`, so that a field added to `Job`, `EvalResult`,
//! `Timing`, `TimingStats` or `CompileFigures` does not compile until it is listed; the settings are `EvalConfig::default()` (its `Default` lists every
//! field), so that a new `[eval]` setting needs no line here. Either way the test then fails
//! until `wire.py` declares the field too.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::config::EvalConfig;
use crate::eval::protocol::Job;
use crate::protocol::{
    Alignment, Audit, Baseline, Calibration, Category, CompileFigures, DefaultsFigures, DeviceInfo,
    EvalResult, Footprint, KernelBenchTiming, OracleUsed, OutputTolerance, PrecisionRecord,
    ProtocolRound, SandboxInfo, StaticReport, Status, Timing, TimingEnvironment, TimingStats,
    ToleranceUsed, Trial, Versions,
};

/// Field name to JSON type (`string`, `integer`, `number`, `boolean`, `object`, `array`),
/// with `|null` where the field may be null and `|absent` where it may be left out.
pub type Shape = BTreeMap<String, String>;

/// `{"Job": .., "EvalSettings": .., "EvalResult": .., "Timing": .., "TimingStats": ..,
/// "CompileFigures": .., "Tolerance": .., "OutputTolerance": .., "Oracle": ..,
/// "DefaultsFigures": ..}`: the job's own fields, the `[eval]` settings flattened into it,
/// the result's top-level fields, its timing's, one model's figures (the timing's
/// `reference` and `kernel`), the compile baseline's (its `compile`), the result's
/// `tolerance`, one output's entry in it and its `oracle`, and the defaults baseline's (the
/// timing's `defaults`); wire.py's record names. A record's `extra` (fields kforge keeps
/// without reading) is empty here: what the harness writes into it is wire.py's
/// `PASSED_THROUGH`, not compared.
pub fn schema() -> BTreeMap<&'static str, Shape> {
    let full_job = to_object(job(&settings_all_set(), Some("/cache/baselines".into())));
    let bare_job = to_object(job(&settings_all_unset(), None));
    let settings_keys = to_object(settings_all_set().for_job(true, true));
    let (settings, own): (Shape, Shape) = shape(&full_job, &bare_job)
        .into_iter()
        .partition(|(key, _)| settings_keys.contains_key(key));
    BTreeMap::from([
        ("Job", own),
        ("EvalSettings", settings),
        (
            "EvalResult",
            shape(&to_object(result_all_set()), &to_object(result_all_unset())),
        ),
        (
            "Timing",
            shape(&to_object(timing_all_set()), &to_object(timing_all_unset())),
        ),
        (
            "TimingStats",
            shape(&to_object(stats_all_set()), &to_object(stats_all_unset())),
        ),
        (
            "CompileFigures",
            shape(
                &to_object(compile_all_set()),
                &to_object(compile_all_unset()),
            ),
        ),
        (
            "Tolerance",
            shape(
                &to_object(tolerance_all_set()),
                &to_object(ToleranceUsed::default()),
            ),
        ),
        (
            "OutputTolerance",
            shape(
                &to_object(output_tolerance_all_set()),
                &to_object(OutputTolerance::default()),
            ),
        ),
        (
            "Oracle",
            shape(
                &to_object(oracle_all_set()),
                &to_object(OracleUsed::default()),
            ),
        ),
        (
            "DefaultsFigures",
            shape(
                &to_object(defaults_all_set()),
                &to_object(DefaultsFigures::default()),
            ),
        ),
    ])
}

fn defaults_all_set() -> DefaultsFigures {
    DefaultsFigures {
        error: Some("why".into()),
        differs: Some("float32 convolutions".into()),
        median_ms: Some(1.0),
        ci_low_ms: Some(0.9),
        ci_high_ms: Some(1.1),
        reference_median_ms: Some(2.4),
        speedup_over_reference: Some(2.4),
        speedup_low: Some(2.3),
        speedup_high: Some(2.5),
        ..DefaultsFigures::default()
    }
}

fn tolerance_all_set() -> ToleranceUsed {
    ToleranceUsed {
        mode: "oracle".into(),
        precision: Some("strict".into()),
        atol: Some(1e-4),
        rtol: Some(1e-4),
        oracle: Some(oracle_all_set()),
        ..ToleranceUsed::default()
    }
}

fn output_tolerance_all_set() -> OutputTolerance {
    OutputTolerance {
        dtype: "float32".into(),
        rule: Some("oracle".into()),
        atol: Some(1e-4),
        rtol: Some(1e-4),
        limit: Some(128.0),
        error_ratio: Some(4.5),
        honest_rms: Some(1e-5),
        max_allowed: Some(1e-3),
        oracle: Some("float64 oracle".into()),
        worst_at: Some(vec![1, 2]),
        fallback: Some("why".into()),
    }
}

fn oracle_all_set() -> OracleUsed {
    OracleUsed {
        kind: "float64".into(),
        rule: "r".into(),
        twin: Some("t".into()),
        twin_error: Some("e".into()),
        reason: Some("why".into()),
        seconds: Some(0.5),
        ..OracleUsed::default()
    }
}

fn job(settings: &EvalConfig, baseline_cache_dir: Option<PathBuf>) -> Job {
    Job {
        task_path: "/task.py".into(),
        kernel_path: "/kernel.py".into(),
        device: "cuda:0".into(),
        timing: true,
        settings: settings.for_job(true, baseline_cache_dir.is_some()),
        baseline_cache_dir,
        profile: true,
        reference_only: false,
        kernelbench_protocol: true,
        kernelbench_rounds: 2,
        compile_source: crate::protocol::CompileSource::CacheOnly,
    }
}

/// `EvalConfig::default()` (whose `Default` lists every field) with every optional setting
/// set: an optional setting added to `EvalConfig` belongs here, or the harness's declaration
/// of it is reported as a field kforge does not send.
fn settings_all_set() -> EvalConfig {
    EvalConfig {
        atol: Some(0.01),
        rtol: Some(0.01),
        host_time_ratio: Some(1.5),
        host_slack_ms: Some(0.5),
        ..settings_all_unset()
    }
}

fn settings_all_unset() -> EvalConfig {
    EvalConfig::default()
}

fn result_all_set() -> EvalResult {
    EvalResult {
        id: Some("1".into()),
        category: Some(Category::Mismatch),
        alignment: Some(Alignment::default()),
        timing: Some(timing_all_set()),
        profile: Some(serde_json::json!({})),
        phase: Some("timing".into()),
        sandbox: Some(SandboxInfo::default()),
        audit: Some(Audit::default()),
        tolerance: Some(ToleranceUsed::default()),
        precision: Some(PrecisionRecord::default()),
        footprint: Some(Footprint::default()),
        inputs_drawn_on: Some("device".into()),
        input_refresh: Some("rotation".into()),
        speed_of_light: Some(crate::protocol::sol::SpeedOfLight::default()),
        ..result_all_unset()
    }
}

fn result_all_unset() -> EvalResult {
    EvalResult {
        schema: 2,
        id: None,
        status: Status::Failed,
        correct: false,
        category: None,
        summary: String::new(),
        message: String::new(),
        details: serde_json::json!({}),
        log: String::new(),
        device: DeviceInfo::default(),
        versions: Versions::default(),
        static_report: StaticReport::default(),
        alignment: None,
        trials: vec![Trial::default()],
        timing: None,
        flags: vec![],
        notes: vec![],
        profile: None,
        phase: None,
        duration_s: 0.5,
        child_s: 0.5,
        phases_s: BTreeMap::new(),
        server_phases_s: BTreeMap::new(),
        sandbox: None,
        audit: None,
        tolerance: None,
        precision: None,
        memory: BTreeMap::new(),
        footprint: None,
        inputs_drawn_on: None,
        input_refresh: None,
        speed_of_light: None,
        // kforge's own (set after the harness answers, never by it): left unset, so it is
        // not part of the exchange's shape.
        interpreter_sizes: None,
    }
}

fn timing_all_set() -> Timing {
    Timing {
        method: Some("judge_window".into()),
        forwards_per_window: Some(2),
        score: Some(1.5),
        score_low: Some(1.25),
        score_high: Some(1.75),
        interval_method: Some("bootstrap".into()),
        reported_score: Some(1.5),
        baseline_key: Some("key".into()),
        calibration: Some(Calibration::default()),
        environment: Some(TimingEnvironment::default()),
        kernelbench: Some(KernelBenchTiming::default()),
        compile: Some(compile_all_set()),
        score_vs_compile: Some(1.25),
        score_vs_compile_low: Some(1.125),
        score_vs_compile_high: Some(1.375),
        baseline: Some(Baseline::Compile),
        baseline_reason: Some("best: compile was faster".into()),
        compile_deferred: Some(crate::protocol::CompileDeferral::Pending),
        defaults: Some(defaults_all_set()),
        score_vs_defaults: Some(0.5),
        score_vs_defaults_low: Some(0.45),
        score_vs_defaults_high: Some(0.55),
        ..timing_all_unset()
    }
}

fn timing_all_unset() -> Timing {
    Timing {
        meaningful: true,
        method: None,
        forwards_per_window: None,
        reference: stats_all_unset(),
        kernel: stats_all_unset(),
        score: None,
        score_low: None,
        score_high: None,
        interval_method: None,
        noisy: false,
        reported_score: None,
        baseline_key: None,
        flush_l2_bytes: 1 << 20,
        calibration: None,
        environment: None,
        kernelbench: None,
        rounds: vec![ProtocolRound::default()],
        compile: None,
        score_vs_compile: None,
        score_vs_compile_low: None,
        score_vs_compile_high: None,
        baseline: None,
        baseline_reason: None,
        compile_deferred: None,
        defaults: None,
        score_vs_defaults: None,
        score_vs_defaults_low: None,
        score_vs_defaults_high: None,
        extra: serde_json::Map::new(),
    }
}

fn stats_all_set() -> TimingStats {
    TimingStats {
        ci_low_ms: Some(0.25),
        ci_high_ms: Some(0.75),
        window_median_ms: Some(0.625),
        null_ms: Some(0.125),
        reported_median_ms: Some(0.5),
        precision_reached: Some(true),
        ..stats_all_unset()
    }
}

fn stats_all_unset() -> TimingStats {
    TimingStats {
        median_ms: 0.5,
        mean_ms: 0.5,
        min_ms: 0.25,
        max_ms: 0.75,
        std_ms: 0.125,
        runs: 30,
        requested_runs: 30,
        budget_limited: false,
        ci_low_ms: None,
        ci_high_ms: None,
        noisy: false,
        window_median_ms: None,
        null_ms: None,
        reported_median_ms: None,
        gate_timeouts: 0,
        precision_reached: None,
        checked_runs: vec![3],
        cached: false,
        extra: serde_json::Map::new(),
    }
}

fn compile_all_set() -> CompileFigures {
    CompileFigures {
        error: Some("did not compile".into()),
        compile_s: Some(12.5),
        median_ms: Some(0.5),
        ci_low_ms: Some(0.25),
        ci_high_ms: Some(0.75),
        eager_median_ms: Some(0.625),
        speedup_over_eager: Some(1.25),
        speedup_low: Some(1.125),
        speedup_high: Some(1.375),
        ..compile_all_unset()
    }
}

fn compile_all_unset() -> CompileFigures {
    CompileFigures {
        mode: "default".into(),
        error: None,
        compile_s: None,
        median_ms: None,
        ci_low_ms: None,
        ci_high_ms: None,
        noisy: false,
        eager_median_ms: None,
        speedup_over_eager: None,
        speedup_low: None,
        speedup_high: None,
        cached: false,
        extra: serde_json::Map::new(),
    }
}

pub(crate) fn to_object(value: impl serde::Serialize) -> serde_json::Map<String, Value> {
    match serde_json::to_value(value).expect("wire values serialize") {
        Value::Object(map) => map,
        other => panic!("a wire record serializes to an object, not {other}"),
    }
}

/// The fields of `full` (every optional field set) with their types, marked where `bare`
/// (every optional field unset) has null or nothing.
fn shape(full: &serde_json::Map<String, Value>, bare: &serde_json::Map<String, Value>) -> Shape {
    full.iter()
        .map(|(key, value)| {
            let unset = match bare.get(key) {
                None => "|absent",
                Some(Value::Null) => "|null",
                Some(_) => "",
            };
            (key.clone(), format!("{}{unset}", json_type(value)))
        })
        .collect()
}

/// A value's JSON type as the schemas name it.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes read what the judge relies on: an unset atol is left out, a missing cache
    /// dir is null, the obsolete host keys never reach the harness.
    #[test]
    fn schema_marks_optional_fields_and_leaves_obsolete_keys_out() {
        let schema = schema();
        assert_eq!(schema["EvalSettings"]["atol"], "number|absent");
        assert_eq!(schema["EvalSettings"]["trials"], "integer");
        assert_eq!(schema["EvalSettings"]["timeout_s"], "number");
        assert_eq!(schema["EvalSettings"]["tolerance"], "string");
        assert!(!schema["EvalSettings"].contains_key("host_time_ratio"));
        assert_eq!(schema["Job"]["baseline_cache_dir"], "string|null");
        assert!(!schema["Job"].contains_key("trials"), "settings are apart");
        assert_eq!(schema["EvalResult"]["static"], "object");
        assert_eq!(schema["EvalResult"]["timing"], "object|null");
        assert_eq!(schema["EvalResult"]["category"], "string|null");
        assert_eq!(schema["Timing"]["score"], "number|null");
        assert_eq!(schema["Timing"]["flush_l2_bytes"], "integer");
        assert_eq!(schema["Timing"]["baseline"], "string|null");
        assert_eq!(schema["TimingStats"]["checked_runs"], "array");
        assert_eq!(schema["TimingStats"]["ci_low_ms"], "number|null");
        assert_eq!(schema["CompileFigures"]["error"], "string|null");
        assert!(
            !schema["TimingStats"].contains_key("extra"),
            "kept fields are flattened"
        );
    }
}
