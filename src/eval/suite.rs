//! The evaluator's fixture suite: a manifest of (task, kernel, expected verdict) cases.
//! The CPU run is an integration test; `kforge bench fixtures` runs the same manifest on
//! a GPU so both verdict sets can be compared.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::protocol::{Device, EvalRequest};

use super::{EvalError, Evaluator};
use crate::config::{EvalConfig, Tolerance};
use crate::protocol::EvalResult;

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub task: PathBuf,
    pub kernel: PathBuf,
    /// `correct` or a category name.
    pub expect: String,
    /// Expected verdict under the CPU interpreter when it differs from the GPU one.
    pub expect_cpu: Option<String>,
    /// `cpu`, `cuda`; both when absent.
    pub devices: Option<Vec<String>>,
    /// Substring of the failure summary or message.
    pub message: Option<String>,
    /// Substring of one static warning.
    pub warning: Option<String>,
    /// A flag the result must carry when timing is measured (GPU only).
    pub flag: Option<String>,
    /// Flags the result must carry on every device.
    pub flags: Option<Vec<String>>,
    /// Run without the static filter, so only the dynamic defenses can refuse the kernel.
    pub static_checks: Option<bool>,
    /// The tolerance rule for this case.
    pub tolerance: Option<Tolerance>,
    /// The precision policy for this case (`[eval] precision`).
    pub precision: Option<crate::protocol::PrecisionPolicy>,
    /// The kinds of math the result's `precision.kernel_math` must name (every device).
    pub math: Option<Vec<crate::protocol::MathKind>>,
    /// Whether the result's `precision.reduced` must be non-empty (below the policy).
    pub reduced: Option<bool>,
    /// Where the precision record's findings must come from (`compiled` or `source`).
    pub reading: Option<String>,
    /// Where timing is measured (GPU), the score must not exceed this: a hack that wins
    /// time is refused when its score stays honest.
    pub max_score: Option<f64>,
    pub timeout_s: Option<f64>,
    /// `[eval] input_draw_limit_s` for this case.
    pub input_draw_limit_s: Option<f64>,
    pub why: Option<String>,
}

impl Case {
    pub fn runs_on(&self, device: Device) -> bool {
        let name = if device.is_gpu() { "cuda" } else { "cpu" };
        self.devices
            .as_ref()
            .is_none_or(|d| d.iter().any(|x| x == name))
    }

    pub fn expected(&self, device: Device) -> &str {
        match (&self.expect_cpu, device.is_gpu()) {
            (Some(cpu), false) => cpu,
            _ => &self.expect,
        }
    }
}

impl Manifest {
    /// Reads a manifest; case paths are made relative to its directory.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut manifest: Manifest = toml::from_str(&text)
            .with_context(|| format!("invalid manifest {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for case in &mut manifest.cases {
            case.task = base.join(&case.task);
            case.kernel = base.join(&case.kernel);
        }
        Ok(manifest)
    }
}

/// What one case produced.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    pub name: String,
    pub expected: String,
    /// `correct`, a category, or `error: ...` when no result could be made.
    pub verdict: String,
    pub summary: String,
    /// Why the outcome does not meet the case; `None` when it does.
    pub problem: Option<String>,
    /// Seconds the harness spent on the case (queueing excluded).
    pub seconds: f64,
}

/// The verdict word of a result.
pub fn verdict_of(result: &EvalResult) -> String {
    if result.correct {
        "correct".into()
    } else {
        result
            .category
            .map(|c| c.to_string())
            .unwrap_or_else(|| "failed".into())
    }
}

/// Checks one result against its case.
pub fn judge(case: &Case, device: Device, result: &EvalResult) -> Option<String> {
    let expected = case.expected(device);
    let verdict = verdict_of(result);
    if verdict != expected {
        return Some(format!(
            "expected {expected}, got {verdict}: {}",
            result.summary
        ));
    }
    if let Some(needle) = &case.message
        && !result.summary.contains(needle.as_str())
        && !result.message.contains(needle.as_str())
    {
        return Some(format!("message lacks {needle:?}: {}", result.summary));
    }
    if let Some(flag) = &case.flag
        && device.is_gpu()
        && !result.flags.iter().any(|f| f == flag)
    {
        return Some(format!("not flagged {flag} (flags: {:?})", result.flags));
    }
    for flag in case.flags.iter().flatten() {
        if !result.flags.iter().any(|f| f == flag) {
            return Some(format!("not flagged {flag} (flags: {:?})", result.flags));
        }
    }
    let precision = result.precision.clone().unwrap_or_default();
    for kind in case.math.iter().flatten() {
        if !precision.kernel_math.iter().any(|f| f.category == *kind) {
            return Some(format!(
                "the precision record names no {kind:?} (kernel_math: {:?})",
                precision
                    .kernel_math
                    .iter()
                    .map(|f| f.category)
                    .collect::<Vec<_>>()
            ));
        }
    }
    if let Some(read) = &case.reading {
        let actual = precision.reading.as_ref().map(|r| r.read.as_str());
        if actual != Some(read.as_str()) {
            return Some(format!(
                "the precision record was read from {} (expected {read})",
                actual.unwrap_or("nowhere")
            ));
        }
    }
    if let Some(reduced) = case.reduced
        && precision.is_reduced() != reduced
    {
        return Some(format!(
            "precision reduced {:?}, expected {reduced}: {}",
            precision.reduced, precision.statement
        ));
    }
    if let (Some(limit), Some(score)) = (case.max_score, result.score())
        && score > limit
    {
        return Some(format!(
            "score {score:.2}x above {limit}x: the hack won time"
        ));
    }
    if let Some(needle) = &case.warning
        && !result
            .static_report
            .warnings
            .iter()
            .any(|w| w.message.contains(needle.as_str()))
    {
        return Some(format!("no warning containing {needle:?}"));
    }
    None
}

/// Runs every case that applies to `device`, all queued at once on the evaluator.
pub async fn run(
    evaluator: &Evaluator,
    manifest: &Manifest,
    device: Device,
    settings: &EvalConfig,
) -> Vec<CaseOutcome> {
    let cases: Vec<&Case> = manifest
        .cases
        .iter()
        .filter(|c| c.runs_on(device))
        .collect();
    let runs = cases.iter().map(|case| {
        let mut s = settings.clone();
        if let Some(t) = case.timeout_s {
            s.timeout_s = t;
        }
        if let Some(on) = case.static_checks {
            s.static_checks = on;
        }
        if let Some(t) = case.tolerance {
            s.tolerance = t;
        }
        if let Some(p) = case.precision {
            s.precision = p;
        }
        if let Some(limit) = case.input_draw_limit_s {
            s.input_draw_limit_s = limit;
        }
        let request = EvalRequest::new(&case.task, &case.kernel, device, s);
        async move {
            let started = std::time::Instant::now();
            let outcome = evaluator
                .evaluate(request, CancellationToken::new(), None)
                .await;
            (outcome, started.elapsed().as_secs_f64())
        }
    });
    let results = futures::future::join_all(runs).await;
    cases
        .into_iter()
        .zip(results)
        .map(|(case, (outcome, seconds))| {
            let expected = case.expected(device).to_string();
            match outcome {
                Ok(result) => CaseOutcome {
                    name: case.name.clone(),
                    expected,
                    verdict: verdict_of(&result),
                    summary: result.summary.clone(),
                    problem: judge(case, device, &result),
                    seconds: result.duration_s,
                },
                Err(e) => CaseOutcome {
                    name: case.name.clone(),
                    expected,
                    verdict: format!("error: {e}"),
                    summary: String::new(),
                    problem: Some(match e {
                        EvalError::Cancelled => "cancelled".into(),
                        other => other.to_string(),
                    }),
                    seconds,
                },
            }
        })
        .collect()
}

/// A fixed-width table of outcomes.
pub fn table(outcomes: &[CaseOutcome]) -> String {
    let mut out = format!(
        "{:<34} {:<17} {:<17} {:>7}  {}\n",
        "case", "expected", "verdict", "seconds", "ok"
    );
    for o in outcomes {
        out.push_str(&format!(
            "{:<34} {:<17} {:<17} {:>7.2}  {}\n",
            o.name,
            o.expected,
            o.verdict.chars().take(17).collect::<String>(),
            o.seconds,
            if o.problem.is_none() {
                "yes".to_string()
            } else {
                format!("NO: {}", o.problem.as_deref().unwrap_or(""))
            }
        ));
    }
    let passed = outcomes.iter().filter(|o| o.problem.is_none()).count();
    out.push_str(&format!(
        "{} passed, {} failed\n",
        passed,
        outcomes.len() - passed
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Category, Finding};

    fn case(expect: &str) -> Case {
        Case {
            name: "c".into(),
            task: "t.py".into(),
            kernel: "k.py".into(),
            expect: expect.into(),
            expect_cpu: None,
            devices: None,
            message: None,
            warning: None,
            flag: None,
            flags: None,
            static_checks: None,
            tolerance: None,
            precision: None,
            math: None,
            reading: None,
            reduced: None,
            max_score: None,
            timeout_s: None,
            input_draw_limit_s: None,
            why: None,
        }
    }

    #[test]
    fn judge_checks_verdict_message_and_warning() {
        let mut c = case("mismatch");
        c.message = Some("signed".into());
        let mut r = EvalResult {
            category: Some(Category::Mismatch),
            summary: "signed-input trial: ...".into(),
            ..Default::default()
        };
        assert_eq!(judge(&c, Device::Cpu, &r), None);
        r.summary = "trial 1: ...".into();
        assert!(judge(&c, Device::Cpu, &r).unwrap().contains("lacks"));
        r.category = Some(Category::Crash);
        assert!(
            judge(&c, Device::Cpu, &r)
                .unwrap()
                .contains("expected mismatch, got crash")
        );

        let mut c = case("correct");
        c.warning = Some("PyTorch".into());
        let mut r = EvalResult {
            correct: true,
            ..Default::default()
        };
        assert!(judge(&c, Device::Cpu, &r).is_some());
        r.static_report.warnings.push(Finding {
            message: "PyTorch compute op".into(),
            ..Default::default()
        });
        assert_eq!(judge(&c, Device::Cpu, &r), None);
    }

    #[test]
    fn flags_are_required_only_where_timing_is_measured() {
        let mut c = case("correct");
        c.flag = Some("reported_time_disagrees".into());
        let mut r = EvalResult {
            correct: true,
            ..Default::default()
        };
        assert_eq!(
            judge(&c, Device::Cpu, &r),
            None,
            "no timing on the CPU, no flag to check"
        );
        assert!(
            judge(&c, Device::Cuda(0), &r)
                .unwrap()
                .contains("not flagged reported_time_disagrees")
        );
        r.flags.push("reported_time_disagrees".into());
        assert_eq!(judge(&c, Device::Cuda(0), &r), None);
    }

    #[test]
    fn cpu_expectation_and_device_filter() {
        let mut c = case("out_of_resources");
        c.expect_cpu = Some("correct".into());
        assert_eq!(c.expected(Device::Cpu), "correct");
        assert_eq!(c.expected(Device::Cuda(0)), "out_of_resources");
        c.devices = Some(vec!["cuda".into()]);
        assert!(!c.runs_on(Device::Cpu));
        assert!(c.runs_on(Device::Cuda(0)));
    }
}
