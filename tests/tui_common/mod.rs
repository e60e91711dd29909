//! What the TUI tests share: the recorded softmax session they open
//! (tests/fixtures/sessions/softmax, written by make_softmax.py), and a batch directory
//! for the batch view (`batch`).

#![allow(dead_code)]

use std::path::PathBuf;

use kforge::protocol::EventRecord;
use kforge::session::store::SessionDir;

pub mod batch;

pub fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/softmax")
}

/// All of the recorded session's events.
pub fn records() -> Vec<EventRecord> {
    SessionDir::open(&fixture())
        .unwrap()
        .read_events()
        .unwrap()
        .records
}

/// The recorded session as the judge-window harness would have written it: every timed
/// score with a 95% interval (#7's wide and noisy, overlapping the best's, #9; #4's wide
/// and noisy, clear of it), and #9's
/// result with both sides' intervals, the method and the environment. A copy in a
/// temporary directory; the fixture itself stays as recorded.
pub fn timed_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    let intervals = |id: u64| match id {
        2 => Some((0.91, 0.93, false)),
        4 => Some((1.08, 1.34, true)),
        6 => Some((1.62, 1.66, false)),
        7 => Some((1.60, 1.80, true)),
        8 => Some((1.50, 1.54, false)),
        9 => Some((1.79, 1.87, false)),
        _ => None,
    };
    let events = dir.path().join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["type"] == "eval_finished"
            && let Some((low, high, noisy)) = v["candidate"].as_u64().and_then(intervals)
        {
            v["score_low"] = low.into();
            v["score_high"] = high.into();
            if noisy {
                v["noisy"] = true.into();
            }
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(&events, out).unwrap();
    let result = dir.path().join("eval/9.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let t = &mut r["timing"];
    t["method"] = "judge_window".into();
    t["score_low"] = 1.79.into();
    t["score_high"] = 1.87.into();
    t["interval_method"] =
        "bootstrap, 2000 resamples of both sides' timed runs, 95% percentile interval".into();
    t["reported_score"] = 1.85.into();
    t["calibration"] =
        serde_json::json!({"overhead_ms": 0.30, "floor_ms": 0.299, "spread_ms": 0.001, "runs": 40});
    for (side, low, high, window, reported) in [
        ("reference", 0.0410, 0.0414, 0.3412, 0.0409),
        ("kernel", 0.02240, 0.02262, 0.32251, 0.02220),
    ] {
        let s = &mut t[side];
        s["ci_low_ms"] = low.into();
        s["ci_high_ms"] = high.into();
        s["window_median_ms"] = window.into();
        s["null_ms"] = 0.30.into();
        s["reported_median_ms"] = reported.into();
        s["precision_reached"] = true.into();
    }
    t["environment"] = serde_json::json!({
        "precision": "strict",
        "tf32_matmul": false, "tf32_cudnn": true, "float32_matmul_precision": "highest",
        "sm_clock_mhz": [1980, 1980], "mem_clock_mhz": [2619, 2619],
        "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 2619,
        "clocks_locked": false, "throttle_reasons": ["idle"],
        "driver": "580.159.04", "cuda_driver": "13.0", "cuda_runtime": "13.0",
        "torch": "2.9.1", "triton": "3.5.1"
    });
    r["precision"] = serde_json::json!({
        "policy": "strict", "task_dtypes": ["float32"], "tolerance": {"float32": [1e-4, 1e-4]},
        "kernel_math": [], "reduced": [], "statement": "",
        "reference_settings": {"matmul": false, "cudnn": false, "float32_matmul_precision": "highest"}
    });
    std::fs::write(&result, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `timed_fixture` with the reference of #9's evaluation timed under torch.compile too
/// (1.5x eager), its headline score against the compiled reference (`baseline = best`).
pub fn compiled_fixture() -> tempfile::TempDir {
    let dir = timed_fixture();
    let events = dir.path().join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["type"] == "eval_finished" && v["candidate"] == 9 {
            v["score"] = 1.22.into();
            v["score_low"] = 1.18.into();
            v["score_high"] = 1.26.into();
            v["baselines"] = serde_json::json!({
                "headline": "compile",
                "vs_eager": {"score": 1.83, "low": 1.79, "high": 1.87},
                "vs_compile": {"score": 1.22, "low": 1.18, "high": 1.26},
                "compile_speedup": 1.5
            });
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(&events, out).unwrap();
    let result = dir.path().join("eval/9.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let t = &mut r["timing"];
    t["compile"] = serde_json::json!({
        "mode": "default", "compile_s": 18.2, "median_ms": 0.0275, "eager_median_ms": 0.0412,
        "speedup_over_eager": 1.5, "speedup_low": 1.47, "speedup_high": 1.53, "cached": true
    });
    t["score_vs_compile"] = 1.22.into();
    t["score_vs_compile_low"] = 1.18.into();
    t["score_vs_compile_high"] = 1.26.into();
    t["baseline"] = "compile".into();
    t["baseline_reason"] = "baseline = best: torch.compile is 1.50x as fast as eager".into();
    std::fs::write(&result, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    dir
}
