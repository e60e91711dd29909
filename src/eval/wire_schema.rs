//! The shape of what kforge and the harness exchange, for checking the harness's typed
//! records (`kforge_harness/wire.py`) against it (tests/harness_wire.rs): every field of the
//! job, its `[eval]` settings and the result, with its JSON type.
//!
//! Each shape is read off two serialized values, one with every optional field set and one
//! with every optional field unset. The job and the result are built here without
//! `..Default::default()`, so that a field added to `Job` or `EvalResult` does not compile
//! until it is listed; the settings are `EvalConfig::default()` (its `Default` lists every
//! field), so that a new `[eval]` setting needs no line here. Either way the test then fails
//! until `wire.py` declares the field too.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::config::EvalConfig;
use crate::eval::protocol::Job;
use crate::protocol::{
    Alignment, Audit, Category, DeviceInfo, EvalResult, Footprint, PrecisionRecord, SandboxInfo,
    StaticReport, Status, Timing, ToleranceUsed, Trial, Versions,
};

/// Field name to JSON type (`string`, `integer`, `number`, `boolean`, `object`, `array`),
/// with `|null` where the field may be null and `|absent` where it may be left out.
pub type Shape = BTreeMap<String, String>;

/// `{"Job": .., "EvalSettings": .., "EvalResult": ..}`: the job's own fields, the `[eval]`
/// settings flattened into it, and the result's top-level fields (wire.py's record names).
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
    ])
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
        timing: Some(Timing::default()),
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
    }
}

fn to_object(value: impl serde::Serialize) -> serde_json::Map<String, Value> {
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

fn json_type(value: &Value) -> &'static str {
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
    }
}
