//! The algorithm analysis of a candidate, as the engine records it and every view reads it.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The analysis an LLM returns for a kernel (docs/architecture.md, Pipeline, step 4). Keys are
/// matched loosely: case, spaces, hyphens and British spellings do not matter.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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

/// `Optimisation Method` -> `optimization_method`, with a few aliases.
fn normalize_key(key: &str) -> String {
    let lower = key.trim().to_lowercase().replace("optimis", "optimiz");
    let mut out = String::new();
    for c in lower.chars() {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    match out.as_str() {
        "worth_optimization" | "worth_to_optimize" | "should_optimize" => "worth_optimizing".into(),
        "method" | "optimization" => "optimization_method".into(),
        "plan" | "modifications" => "modification_plan".into(),
        "speedup" | "expected_speed_up" => "expected_speedup".into(),
        "output_requirements" => "output_requirement".into(),
        "bottlenecks" => "bottleneck".into(),
        _ => out,
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.trim().to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        other => Some(other.to_string()),
    }
}

fn yes_no(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            let word = s.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("");
            match word {
                "yes" | "y" | "true" => Some(true),
                "no" | "n" | "false" => Some(false),
                _ => None,
            }
        }
        _ => None,
    }
}

const KNOWN_KEYS: &[&str] = &[
    "worth_optimizing",
    "reason",
    "bottleneck",
    "optimization_method",
    "modification_plan",
    "expected_speedup",
    "output_requirement",
];

impl Analysis {
    /// The analysis in a JSON object as a model wrote it: keys matched loosely (case,
    /// spaces, hyphens, British spellings), `yes`/`no` read as booleans, lists joined.
    pub fn from_object(raw: Value) -> Analysis {
        let mut a = Analysis::default();
        if let Value::Object(map) = &raw {
            for (key, value) in map {
                match normalize_key(key).as_str() {
                    "worth_optimizing" => a.worth_optimizing = yes_no(value),
                    "reason" => a.reason = value_text(value),
                    "bottleneck" => a.bottleneck = value_text(value),
                    "optimization_method" => a.optimization_method = value_text(value),
                    "modification_plan" => a.modification_plan = value_text(value),
                    "expected_speedup" => a.expected_speedup = value_text(value),
                    "output_requirement" => a.output_requirement = value_text(value),
                    _ => {}
                }
            }
        }
        a.raw = raw;
        a
    }

    /// Whether `key` names one of the analysis fields (loosely matched).
    pub fn is_known_key(key: &str) -> bool {
        KNOWN_KEYS.contains(&normalize_key(key).as_str())
    }
}

/// An analysis as recorded in `events.jsonl`: the normalized fields and `raw`. An object
/// without `raw` (a hand-written or older session) is read as the model's own object.
impl<'de> Deserialize<'de> for Analysis {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Analysis, D::Error> {
        let mut value = Value::deserialize(deserializer)?;
        let raw = value.as_object_mut().and_then(|m| m.remove("raw"));
        let mut analysis = Analysis::from_object(value.clone());
        analysis.raw = raw.unwrap_or(value);
        Ok(analysis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_analyses_read_back_in_either_form() {
        // As the engine records it: normalized fields plus the model's object.
        let recorded = Analysis::from_object(serde_json::json!({
            "Worth Optimising": "Yes, clearly", "bottleneck": "DRAM", "plan": ["a", "b"]
        }));
        let line = serde_json::to_string(&recorded).unwrap();
        let back: Analysis = serde_json::from_str(&line).unwrap();
        assert_eq!(back, recorded);
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
        assert_eq!(back.worth_optimizing, Some(true));
        assert_eq!(back.modification_plan.as_deref(), Some("a\nb"));
        // A bare object as a model writes it (hand-made or older sessions).
        let bare: Analysis =
            serde_json::from_str(r#"{"worth_optimizing": "no", "optimisation_method": "tile"}"#)
                .unwrap();
        assert_eq!(bare.worth_optimizing, Some(false));
        assert_eq!(bare.optimization_method.as_deref(), Some("tile"));
        assert_eq!(bare.raw["optimisation_method"], "tile");
    }
}
