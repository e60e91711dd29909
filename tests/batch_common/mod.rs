//! Reading a batch directory in tests: its JSON files as they are on disk (not through
//! kforge's own types), and each task's status word from summary.json.

#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each task's `status` in `BATCH/summary.json`, in the batch's order.
pub fn task_statuses(batch: &Path) -> Vec<String> {
    read_json(&batch.join("summary.json"))["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_string())
        .collect()
}
