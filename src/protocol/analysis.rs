//! The algorithm analysis of a candidate, as the engine records it and every view reads it.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The analysis an LLM returns for a kernel (DESIGN.md section 1, step 4). Keys are
/// matched loosely: case, spaces, hyphens and British spellings do not matter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
///
/// The fields are in alphabetical order on purpose: sessions written before this type was
/// in the events stored it through `serde_json::Value`, whose keys come out sorted, and
/// `events.jsonl` stays byte-compatible with them (`tests/session_golden.rs`).
pub struct Analysis {
    pub bottleneck: Option<String>,
    pub expected_speedup: Option<String>,
    pub modification_plan: Option<String>,
    pub optimization_method: Option<String>,
    pub output_requirement: Option<String>,
    /// The object as the model wrote it.
    pub raw: Value,
    pub reason: Option<String>,
    pub worth_optimizing: Option<bool>,
}

impl Analysis {
    /// `yes`, `no` or `not given`.
    pub fn worth_text(&self) -> &'static str {
        match self.worth_optimizing {
            Some(true) => "yes",
            Some(false) => "no",
            None => "not given",
        }
    }

    /// The fields the model gave, in a fixed order, as (key, text) rows for views.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let mut rows = Vec::new();
        if self.worth_optimizing.is_some() {
            rows.push(("worth_optimizing", self.worth_text().to_string()));
        }
        for (key, value) in [
            ("reason", &self.reason),
            ("bottleneck", &self.bottleneck),
            ("optimization_method", &self.optimization_method),
            ("modification_plan", &self.modification_plan),
            ("expected_speedup", &self.expected_speedup),
            ("output_requirement", &self.output_requirement),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.trim().is_empty()) {
                rows.push((key, v.to_string()));
            }
        }
        rows
    }

    /// The first number in `expected_speedup` (`"~1.5x"` -> 1.5).
    pub fn expected_speedup_factor(&self) -> Option<f64> {
        static NUM: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"\d+(\.\d+)?").expect("valid regex"));
        NUM.find(self.expected_speedup.as_deref()?)?
            .as_str()
            .parse()
            .ok()
    }
}
