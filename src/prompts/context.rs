//! What a template can use (`PromptContext`), built from the task, the candidate and its
//! evaluation, with the text pieces it needs (precision rule, failure excerpts).

use serde::{Deserialize, Serialize};

use super::designs::SiblingDesign;
use super::directions::SeedDirection;
use super::hints::{hints_for, precision_hint};
use super::metrics::{KernelMetrics, metrics_from_profile};
use super::mismatch::mismatch_hint;
use super::sizes::UnseenSizes;
use crate::config::Tolerance;
use crate::llm::extract::Analysis;
use crate::protocol::PrecisionPolicy;
use crate::protocol::{Category, EvalResult, OutputCheck, ToleranceUsed};
use crate::pysource::task_reader::forward_returns;
use crate::pysource::traceback::{scrub_paths, shorten};

/// One earlier attempt's own failure, for the repair history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttemptFailure {
    pub attempt: u32,
    pub category: String,
    pub summary: String,
    /// The tail of its cleaned error message (a few lines).
    pub message: String,
}

impl AttemptFailure {
    /// From an evaluation result: its message in the same short form as the repair prompt
    /// showed it (`error_text`), a plain message cut to its last lines.
    pub fn from_eval(attempt: u32, result: &EvalResult) -> AttemptFailure {
        AttemptFailure {
            attempt,
            category: category_of(result),
            summary: scrub_paths(&result.summary),
            message: error_text(&result.message, HISTORY_LINES, HISTORY_CHARS),
        }
    }
}

/// An error's text for a prompt: a traceback in its short form (`pysource::traceback`: the
/// kernel's frames with their lines, the library frame that raised, the exception, no host
/// path); any other message with host paths stripped, its last `lines` lines and `chars`
/// characters kept.
pub fn error_text(message: &str, lines: usize, chars: usize) -> String {
    let short = shorten(message);
    if short.traceback {
        short.text()
    } else {
        excerpt(&short.text(), lines, chars)
    }
}

/// The failure a repair prompt is about.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Failure {
    pub category: String,
    pub summary: String,
    /// The cleaned error text (its tail when long).
    pub message: String,
}

/// Latency of the kernel and of the PyTorch reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimingInfo {
    /// False on the CPU interpreter: no latency is measured there.
    pub meaningful: bool,
    pub kernel_ms: Option<f64>,
    pub reference_ms: Option<f64>,
    /// Reference median / kernel median.
    pub score: Option<f64>,
    /// The score's 95% interval, when measured.
    pub score_interval: Option<(f64, f64)>,
}

impl TimingInfo {
    /// One line for prompts: `2.100 ms for this kernel vs 3.030 ms for the PyTorch reference
    /// (speedup 1.44x: faster than PyTorch)`, or `not measured (...)`.
    pub fn describe(&self) -> String {
        if !self.meaningful {
            return "not measured (no GPU timing in this run: on the CPU, Triton's interpreter \
                    checks correctness only)"
                .into();
        }
        match (self.kernel_ms, self.reference_ms) {
            (Some(k), Some(r)) => {
                let score = self.score.unwrap_or(if k > 0.0 { r / k } else { 0.0 });
                let verdict = if score >= 1.0 {
                    "faster than PyTorch"
                } else {
                    "slower than PyTorch"
                };
                let interval = self
                    .score_interval
                    .map(|(low, high)| format!(", 95% interval {low:.2}-{high:.2}x"))
                    .unwrap_or_default();
                format!(
                    "{k:.3} ms for this kernel vs {r:.3} ms for the PyTorch reference \
                     (speedup {score:.2}x{interval}: {verdict})"
                )
            }
            (Some(k), None) => format!("{k:.3} ms for this kernel (reference not measured)"),
            _ => "not measured".into(),
        }
    }
}

/// Everything a template can use. Unset parts are empty (`None`, `[]`, `""`) and the
/// templates leave their sections out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptContext {
    pub task_name: String,
    /// The task file (KernelBench format).
    pub task_source: String,
    /// What `Model.forward` returns, in words (`forward_returns`).
    pub forward_returns: String,
    /// The candidate's kernel source (repair, analysis, optimize, stages, instructed).
    pub kernel_source: Option<String>,
    /// Earlier attempts of this repair loop and their own failures, oldest first.
    pub attempts: Vec<AttemptFailure>,
    /// The current failure (repair, instructed repair).
    pub failure: Option<Failure>,
    /// Targeted repair hints (`prompts::hints::hints_for`).
    pub hints: Vec<String>,
    pub timing: TimingInfo,
    /// Nsight Compute metrics of the candidate, when profiled.
    pub metrics: Vec<KernelMetrics>,
    /// The analysis of the candidate (optimize from analysis, instructed).
    pub analysis: Option<Analysis>,
    /// The tuning stage (`grid_and_parallel`, ...).
    pub stage: Option<String>,
    /// The person's free-text instruction.
    pub instruction: Option<String>,
    /// The GPU, in words (`NVIDIA H200`), when known.
    pub device: Option<String>,
    /// Why the previous answer could not be used (the follow-up prompt).
    pub unusable_answer: Option<UnusableAnswer>,
    /// The precision the kernel must keep, in words (`precision_rule`): the `_rules.j2`
    /// partial states it in every code-writing prompt.
    pub precision: String,
    /// How close the reference and the kernel run to the speed of light, in words
    /// (`SpeedOfLight::prompt_line`): where the headroom is.
    pub speed_of_light: Option<String>,
    /// The policy and the comparison rule `precision` was stated from (not rendered).
    #[serde(skip)]
    pub precision_policy: Option<PrecisionPolicy>,
    #[serde(skip)]
    pub tolerance_rule: ToleranceRule,
    /// The seed's own direction (seed prompts): its strategy and the other seeds'.
    pub direction: Option<SeedDirection>,
    /// The session's other designs, which this call must not write again (optimize).
    pub siblings: Vec<SiblingDesign>,
    /// What the reference returns for the task's inputs, one line per output:
    /// `` `out`: shape (512, 32768), float32 `` (from the task check, else from a result).
    pub output_shapes: Vec<String>,
    /// What the earlier tuning stages tried and what became of it (stage prompts).
    pub stage_history: Vec<EarlierStage>,
    /// The current kernel's verdict in words (`correct on all 3 trials`), when correct.
    pub verdict: Option<String>,
    /// The sizes on which a kernel right on the task's own was wrong (its repair).
    pub unseen_sizes: Option<UnseenSizes>,
}

/// What one earlier tuning stage tried and what became of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EarlierStage {
    pub stage: String,
    /// What its answer said it changed (the prose before its code).
    pub tried: String,
    /// The verdict in words (`StageVerdict::word`: `accepted`, `not accepted`, `not
    /// compared`, `not correct`, `the base stays`).
    pub verdict: String,
    /// Why, as the stage's record says (`1.41x -> 1.30x is no improvement: keeping the base`).
    pub reason: String,
    /// What became of it, in one phrase: the verdict and its reason, the verdict said once
    /// (`not correct: the base stays (compile: ...)`, not `not correct: not correct: ...`).
    pub outcome: String,
}

impl EarlierStage {
    pub fn new(stage: String, tried: String, verdict: &str, reason: String) -> EarlierStage {
        let outcome = if reason.contains(verdict) {
            reason.clone()
        } else {
            format!("{verdict}: {reason}")
        };
        EarlierStage {
            stage,
            tried,
            verdict: verdict.to_string(),
            reason,
            outcome,
        }
    }
}

/// What the judge holds a kernel's outputs to, as the prompts state it (issue 36): the
/// `[eval] tolerance` mode, the person's explicit atol/rtol, and under the `oracle` rule the
/// figures the task check measured on the task's own inputs (`ToleranceUsed`), so that the
/// numbers a prompt gives are the judge's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToleranceRule {
    pub mode: Tolerance,
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    pub applied: Option<ToleranceUsed>,
}

impl ToleranceRule {
    /// `within ...`: the comparison the judge makes, in the prompt's words and numbers.
    pub fn within(&self, policy: PrecisionPolicy) -> String {
        let f32_tol = policy.float32_tolerance();
        match (self.mode, self.atol, self.rtol) {
            (Tolerance::Oracle, None, None) => {
                let (full, half) = self
                    .applied
                    .as_ref()
                    .map(ToleranceUsed::oracle_factors)
                    .unwrap_or((
                        crate::protocol::ORACLE_FACTOR_FLOAT32,
                        crate::protocol::ORACLE_FACTOR_HALF,
                    ));
                let mut text = format!(
                    "within {full}x (float16/bfloat16 outputs: {half}x) the error honest arithmetic makes at each \
                     element: the judge evaluates the reference in float64 on the same inputs and measures how far \
                     honest float32 evaluations land from it there (any float32 summation order, split-K, blocked \
                     or tree reductions and `tf32x3` stay far inside; TF32, float16 or bfloat16 math lands hundreds \
                     of times outside)"
                );
                if let Some(numbers) = self
                    .applied
                    .as_ref()
                    .and_then(ToleranceUsed::prompt_statement)
                {
                    text.push_str(&format!(". On this task's inputs: {numbers}"));
                }
                text
            }
            (Tolerance::Scaled, None, None) => {
                "within atol = rtol = 1e-2 for every dtype (atol shrunk to 2% of \
                 an output's largest magnitude where smaller)"
                    .to_string()
            }
            (Tolerance::Kernelbench, None, None) => format!(
                "within torch.allclose(atol = rtol = {f32_tol:e}) for float32 outputs (1e-2 for \
                 float16/bfloat16 outputs)"
            ),
            (_, None, None) => format!(
                "within atol = rtol = {f32_tol:e} for float32 outputs (1e-2 for float16/bfloat16 outputs; atol \
                 shrunk to 2% of an output's largest magnitude where smaller)"
            ),
            (_, a, r) => format!(
                "within atol {:e}, rtol {:e}",
                a.unwrap_or(f32_tol),
                r.unwrap_or(f32_tol)
            ),
        }
    }
}

/// The precision rule of `policy` for prompts, with the comparison the judge makes
/// (`ToleranceRule::within`).
pub fn precision_rule(policy: PrecisionPolicy, tolerance: &ToleranceRule) -> String {
    let within = tolerance.within(policy);
    match policy {
        PrecisionPolicy::Strict | PrecisionPolicy::Pytorch => {
            let reference = if policy == PrecisionPolicy::Strict {
                "the reference runs in the task's dtype with TF32 off"
            } else {
                "the reference runs under PyTorch's defaults (float32 matmuls without TF32)"
            };
            format!(
                "`precision = \"{policy}\"`: keep the task's dtype; {reference}, and the outputs must match it \
                 {within}. `tl.dot` on float32 operands defaults to TF32, which misses that: pass \
                 `input_precision=\"ieee\"` (exact float32) or `input_precision=\"tf32x3\"` (near-float32, faster) \
                 to every `tl.dot` on float32 data, accumulate in float32, and never cast float32 data to \
                 float16/bfloat16."
            )
        }
        PrecisionPolicy::Tf32 => format!(
            "`precision = \"tf32\"`: TF32 is allowed, and the reference also runs its float32 matmuls and \
             convolutions in TF32 (TF32 vs TF32); the outputs must match it {within}. `tl.dot` at its default \
             (TF32) precision is fine; do not go below TF32 (no float16/bfloat16 casts of float32 data) and \
             accumulate in float32."
        ),
    }
}

/// An answer kforge could not use, for the follow-up prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnusableAnswer {
    /// What extraction said (`no code block found ...`).
    pub error: String,
    /// `code` or `analysis`.
    pub expected: String,
}

/// Lines and characters kept of the current failure's message and of each earlier one when
/// it is not a traceback (a traceback is always shown in its short form).
const FAILURE_LINES: usize = 150;
const FAILURE_CHARS: usize = 12_000;
const HISTORY_LINES: usize = 8;
const HISTORY_CHARS: usize = 1_200;

fn category_of(result: &EvalResult) -> String {
    result
        .category
        .map(|c| c.as_str().to_string())
        .unwrap_or_else(|| "unknown".into())
}

impl PromptContext {
    /// A context for a task: name, source and what its `forward` returns.
    pub fn for_task(task_name: &str, task_source: &str) -> PromptContext {
        PromptContext {
            task_name: task_name.to_string(),
            task_source: task_source.to_string(),
            forward_returns: forward_returns(task_source),
            ..Default::default()
        }
    }

    /// The candidate's kernel source.
    pub fn with_kernel(mut self, source: Option<String>) -> PromptContext {
        self.kernel_source = source;
        self
    }

    /// The precision rule the prompts state (`precision_rule`), with the person's explicit
    /// tolerances where set (the comparison mode: `with_tolerance`).
    pub fn with_precision(
        mut self,
        policy: PrecisionPolicy,
        atol: Option<f64>,
        rtol: Option<f64>,
    ) -> PromptContext {
        self.tolerance_rule.atol = atol;
        self.tolerance_rule.rtol = rtol;
        self.precision_policy = Some(policy);
        self.precision = precision_rule(policy, &self.tolerance_rule);
        self
    }

    /// The comparison mode (`[eval] tolerance`) and, under the `oracle` rule, the figures
    /// the task check measured: the precision rule then states the judge's numbers.
    pub fn with_tolerance(
        mut self,
        mode: Tolerance,
        applied: Option<ToleranceUsed>,
    ) -> PromptContext {
        self.tolerance_rule.mode = mode;
        self.tolerance_rule.applied = applied;
        if let Some(policy) = self.precision_policy {
            self.precision = precision_rule(policy, &self.tolerance_rule);
        }
        self
    }

    /// Whether latencies are measured in this run (GPU); `with_eval` refines it per result.
    pub fn with_timing_meaningful(mut self, meaningful: bool) -> PromptContext {
        self.timing.meaningful = meaningful;
        self
    }

    /// Earlier attempts of the repair loop, oldest first.
    pub fn with_attempts(mut self, attempts: Vec<AttemptFailure>) -> PromptContext {
        self.attempts = attempts;
        self
    }

    /// What the reference returns for the task's inputs (the task check's or a result's
    /// output records: shape and dtype per output).
    pub fn with_reference_outputs(mut self, outputs: &[OutputCheck]) -> PromptContext {
        let lines: Vec<String> = outputs
            .iter()
            .filter_map(|o| {
                let shape = o.shape.as_ref()?;
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let dims = match dims.as_slice() {
                    [one] => format!("({one},)"),
                    _ => format!("({})", dims.join(", ")),
                };
                Some(format!(
                    "`{}`: shape {dims}, {}",
                    o.output,
                    o.dtype.as_deref().unwrap_or("dtype unknown")
                ))
            })
            .collect();
        if !lines.is_empty() {
            self.output_shapes = lines;
        }
        self
    }

    /// Takes what an evaluation says about the candidate: the failure with its hints when
    /// it failed, else its verdict and timing; Nsight Compute metrics when it was profiled;
    /// the reference's output shapes when the context has none yet.
    pub fn with_eval(mut self, result: &EvalResult) -> PromptContext {
        if result.correct {
            self.failure = None;
            self.hints.clear();
            let trials = result.trials.len();
            self.verdict = Some(match trials {
                0 => "correct".to_string(),
                1 => "correct on its 1 trial".to_string(),
                n => format!("correct on all {n} trials"),
            });
        } else {
            let category = category_of(result);
            let message = if result.message.trim().is_empty() {
                scrub_paths(&result.summary)
            } else {
                error_text(&result.message, FAILURE_LINES, FAILURE_CHARS)
            };
            let summary = scrub_paths(&result.summary);
            // Hints answer the error's own words, not the code its frames quote as call sites.
            let cause = shorten(&result.message).cause();
            self.hints = hints_for(&category, &format!("{summary}\n{cause}"));
            if result.category == Some(Category::Mismatch) {
                // What the result's records say of this mismatch comes before the general
                // advice for mismatches.
                if let Some(hint) = mismatch_hint(result) {
                    self.hints.insert(0, hint);
                }
                // A kernel computing below the policy's precision: that fix first.
                if let Some(p) = &result.precision
                    && let Some(hint) = precision_hint(p.policy, &p.reduced, &p.float32_within())
                {
                    self.hints.insert(0, hint);
                }
            }
            self.failure = Some(Failure {
                category,
                summary,
                message,
            });
        }
        if let Some(t) = &result.timing {
            self.timing = TimingInfo {
                meaningful: t.meaningful,
                kernel_ms: (t.kernel.median_ms > 0.0).then_some(t.kernel.median_ms),
                reference_ms: (t.reference.median_ms > 0.0).then_some(t.reference.median_ms),
                score: t.score,
                score_interval: result.score_interval(),
            };
        }
        if self.output_shapes.is_empty()
            && let Some(first) = result.trials.first()
        {
            self = self.with_reference_outputs(&first.outputs);
        }
        if let Some(profile) = &result.profile {
            self.metrics = metrics_from_profile(profile);
        }
        self.speed_of_light = result.speed_of_light.as_ref().and_then(|s| s.prompt_line());
        self
    }
}

impl PromptContext {
    /// The repair of a kernel correct on the task's sizes and wrong on unseen ones: the
    /// failing sizes, a failure named after the first of them, and the hints for its
    /// category after the sizes hint. A check that did not fail changes nothing.
    pub fn with_unseen_sizes(
        mut self,
        check: &crate::protocol::shapes::ShapeCheck,
    ) -> PromptContext {
        let Some(unseen) = UnseenSizes::from_check(check) else {
            return self;
        };
        let category = UnseenSizes::category(check)
            .map(|c| c.as_str().to_string())
            .unwrap_or_else(|| "mismatch".into());
        let summary = format!(
            "correct on the task's sizes ({}) but wrong on {} of the {} unseen sizes checked; the first: {}",
            unseen.task_sizes,
            unseen.failing.len(),
            unseen.failing.len() + unseen.passing.len(),
            unseen.failing.first().map(String::as_str).unwrap_or("?")
        );
        let mut hints = vec![UNSEEN_SIZES_HINT.to_string()];
        for h in hints_for(
            &category,
            &format!("{summary}\n{}", unseen.failing.join("\n")),
        ) {
            if !hints.contains(&h) {
                hints.push(h);
            }
        }
        self.hints = hints;
        self.failure = Some(Failure {
            category,
            summary,
            message: String::new(),
        });
        self.unseen_sizes = Some(unseen);
        self
    }
}

/// The first hint of a failure on unseen sizes.
const UNSEEN_SIZES_HINT: &str = "A kernel right at the task's sizes and wrong at others usually hard-codes a size or assumes one: a grid or loop bound from a constant, a BLOCK that must divide the size, a missing mask on the last partial tile, a row length taken as a power of two, or a stride computed from the task's shape instead of the tensor's.";

impl AttemptFailure {
    /// An earlier attempt that was right on the task's sizes and wrong on unseen ones.
    pub fn from_unseen_sizes(
        attempt: u32,
        check: &crate::protocol::shapes::ShapeCheck,
    ) -> Option<AttemptFailure> {
        let unseen = UnseenSizes::from_check(check)?;
        Some(AttemptFailure {
            attempt,
            category: UnseenSizes::category(check)
                .map(|c| c.as_str().to_string())
                .unwrap_or_else(|| "mismatch".into()),
            summary: format!(
                "correct on the task's sizes, wrong on unseen sizes: {}",
                unseen.failing.first().map(String::as_str).unwrap_or("?")
            ),
            message: unseen
                .failing
                .iter()
                .skip(1)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        })
    }
}

/// The last `max_lines` lines of `text`, at most `max_chars` characters (cut at a line
/// start), with a note of what was left out. Errors say what matters at their end.
pub fn excerpt(text: &str, max_lines: usize, max_chars: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut start = lines.len().saturating_sub(max_lines);
    let mut size: usize = lines[start..].iter().map(|l| l.len() + 1).sum();
    while size > max_chars && start + 1 < lines.len() {
        size -= lines[start].len() + 1;
        start += 1;
    }
    let mut kept = lines[start..].join("\n");
    if kept.len() > max_chars {
        let cut = kept.len() - max_chars;
        let cut = (cut..kept.len())
            .find(|i| kept.is_char_boundary(*i))
            .unwrap_or(kept.len());
        kept = kept[cut..].to_string();
    }
    if start > 0 {
        format!("[... {start} earlier lines left out ...]\n{kept}")
    } else {
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_keeps_the_tail() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let e = excerpt(&text, 3, 1000);
        assert_eq!(
            e,
            "[... 17 earlier lines left out ...]\nline 18\nline 19\nline 20"
        );
        assert_eq!(excerpt("short", 3, 1000), "short");
        let e = excerpt(&text, 100, 16);
        assert!(
            e.ends_with("line 19\nline 20") && !e.contains("line 18"),
            "{e}"
        );
    }

    #[test]
    fn timing_is_described_or_marked_not_measured() {
        let t = TimingInfo {
            meaningful: true,
            kernel_ms: Some(2.0),
            reference_ms: Some(3.0),
            score: Some(1.5),
            score_interval: None,
        };
        assert_eq!(
            t.describe(),
            "2.000 ms for this kernel vs 3.000 ms for the PyTorch reference (speedup 1.50x: faster than PyTorch)"
        );
        let t = TimingInfo {
            score_interval: Some((1.45, 1.55)),
            ..t
        };
        assert!(
            t.describe()
                .ends_with("(speedup 1.50x, 95% interval 1.45-1.55x: faster than PyTorch)"),
            "{}",
            t.describe()
        );
        assert!(TimingInfo::default().describe().starts_with("not measured"));
    }

    /// Every stage verdict's record reads as one phrase that says the verdict once.
    #[test]
    fn an_earlier_stage_says_its_verdict_once() {
        use crate::protocol::StageVerdict;
        let outcome = |verdict: StageVerdict, reason: &str| {
            EarlierStage::new("s".into(), String::new(), verdict.word(), reason.into()).outcome
        };
        assert_eq!(
            outcome(StageVerdict::Replaced, "1.410x -> 1.520x"),
            "accepted: 1.410x -> 1.520x"
        );
        assert_eq!(
            outcome(
                StageVerdict::Kept,
                "1.410x -> 1.300x is no improvement: keeping the base"
            ),
            "not accepted: 1.410x -> 1.300x is no improvement: keeping the base"
        );
        assert_eq!(
            outcome(
                StageVerdict::NotCorrect,
                "not correct: the base stays (compile: tl.tanh)"
            ),
            "not correct: the base stays (compile: tl.tanh)"
        );
        assert_eq!(
            outcome(
                StageVerdict::NotCompared,
                "correct, not compared: no timing to compare with (the base stays)"
            ),
            "correct, not compared: no timing to compare with (the base stays)"
        );
        assert_eq!(
            outcome(StageVerdict::NoKernel, "no kernel: the base stays"),
            "no kernel: the base stays"
        );
    }
}
