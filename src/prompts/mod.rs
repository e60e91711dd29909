//! Prompt templates (minijinja) and their rendering. See `docs/prompts.md`.
//!
//! The templates in `prompts/` are embedded in the binary as defaults. A user directory
//! (config `[prompts] dir`, else `./prompts` when it exists, else `~/.config/kforge/prompts`)
//! overrides them file by file. A changed, added or removed override is picked up at the
//! next render (its modification time and size are checked at every lookup): no restart.
//! `PromptSet::snapshot_into` writes the effective templates into a session's `prompts/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, TemplateSource, UndefinedBehavior, context};
use regex::Regex;
use serde::{Deserialize, Serialize};

pub mod hints;

use crate::llm::extract::Analysis;
use crate::protocol::CallKind;
use crate::protocol::EvalResult;
use crate::protocol::PrecisionPolicy;
use crate::pysource::{LogicalLine, block, functions, logical_lines};
use hints::{hints_for, precision_hint};

/// Every template file kforge ships, with its embedded default. Names starting with `_`
/// are partials (included or extended by the others).
pub const DEFAULT_TEMPLATES: &[(&str, &str)] = &[
    ("system.j2", include_str!("../../prompts/system.j2")),
    ("seed.j2", include_str!("../../prompts/seed.j2")),
    ("repair.j2", include_str!("../../prompts/repair.j2")),
    ("analysis.j2", include_str!("../../prompts/analysis.j2")),
    (
        "optimize_from_analysis.j2",
        include_str!("../../prompts/optimize_from_analysis.j2"),
    ),
    (
        "stage_grid_and_parallel.j2",
        include_str!("../../prompts/stage_grid_and_parallel.j2"),
    ),
    (
        "stage_block_tiling.j2",
        include_str!("../../prompts/stage_block_tiling.j2"),
    ),
    (
        "stage_memory_and_tuning.j2",
        include_str!("../../prompts/stage_memory_and_tuning.j2"),
    ),
    ("instructed.j2", include_str!("../../prompts/instructed.j2")),
    ("followup.j2", include_str!("../../prompts/followup.j2")),
    ("_rules.j2", include_str!("../../prompts/_rules.j2")),
    ("_output.j2", include_str!("../../prompts/_output.j2")),
    ("_reference.j2", include_str!("../../prompts/_reference.j2")),
    ("_kernel.j2", include_str!("../../prompts/_kernel.j2")),
    (
        "_performance.j2",
        include_str!("../../prompts/_performance.j2"),
    ),
    ("_history.j2", include_str!("../../prompts/_history.j2")),
    ("_stage.j2", include_str!("../../prompts/_stage.j2")),
];

/// The file listing where each snapshot template came from.
pub const SNAPSHOT_SOURCES_FILE: &str = "sources.json";

/// A prompt a call can be rendered from (the system prompt is rendered with every one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateName {
    System,
    Seed,
    Repair,
    Analysis,
    OptimizeFromAnalysis,
    StageGridAndParallel,
    StageBlockTiling,
    StageMemoryAndTuning,
    Instructed,
    /// Asks again, in the same conversation, after an answer kforge could not use.
    Followup,
}

impl TemplateName {
    pub const ALL: [TemplateName; 10] = [
        TemplateName::System,
        TemplateName::Seed,
        TemplateName::Repair,
        TemplateName::Analysis,
        TemplateName::OptimizeFromAnalysis,
        TemplateName::StageGridAndParallel,
        TemplateName::StageBlockTiling,
        TemplateName::StageMemoryAndTuning,
        TemplateName::Instructed,
        TemplateName::Followup,
    ];

    /// The stage names, in pipeline order.
    pub const STAGES: [&'static str; 3] =
        ["grid_and_parallel", "block_tiling", "memory_and_tuning"];

    /// Short name (`repair`, `stage_block_tiling`).
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateName::System => "system",
            TemplateName::Seed => "seed",
            TemplateName::Repair => "repair",
            TemplateName::Analysis => "analysis",
            TemplateName::OptimizeFromAnalysis => "optimize_from_analysis",
            TemplateName::StageGridAndParallel => "stage_grid_and_parallel",
            TemplateName::StageBlockTiling => "stage_block_tiling",
            TemplateName::StageMemoryAndTuning => "stage_memory_and_tuning",
            TemplateName::Instructed => "instructed",
            TemplateName::Followup => "followup",
        }
    }

    /// The template's file name (`repair.j2`).
    pub fn file_name(self) -> String {
        format!("{}.j2", self.as_str())
    }

    /// The template of a tuning stage by its name (`block_tiling`).
    pub fn stage(name: &str) -> Option<TemplateName> {
        match name {
            "grid_and_parallel" => Some(TemplateName::StageGridAndParallel),
            "block_tiling" => Some(TemplateName::StageBlockTiling),
            "memory_and_tuning" => Some(TemplateName::StageMemoryAndTuning),
            _ => None,
        }
    }

    /// The kind of LLM call this template is for (`System` has none of its own).
    pub fn call_kind(self) -> Option<CallKind> {
        Some(match self {
            TemplateName::System | TemplateName::Followup => return None,
            TemplateName::Seed => CallKind::Seed,
            TemplateName::Repair => CallKind::Repair,
            TemplateName::Analysis => CallKind::Analysis,
            TemplateName::OptimizeFromAnalysis => CallKind::Optimize,
            TemplateName::StageGridAndParallel
            | TemplateName::StageBlockTiling
            | TemplateName::StageMemoryAndTuning => CallKind::Stage,
            TemplateName::Instructed => CallKind::Instructed,
        })
    }
}

impl std::fmt::Display for TemplateName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// From an evaluation result; the message is cut to its last lines.
    pub fn from_eval(attempt: u32, result: &EvalResult) -> AttemptFailure {
        AttemptFailure {
            attempt,
            category: category_of(result),
            summary: result.summary.clone(),
            message: excerpt(&result.message, HISTORY_LINES, HISTORY_CHARS),
        }
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
                format!(
                    "{k:.3} ms for this kernel vs {r:.3} ms for the PyTorch reference \
                     (speedup {score:.2}x: {verdict})"
                )
            }
            (Some(k), None) => format!("{k:.3} ms for this kernel (reference not measured)"),
            _ => "not measured".into(),
        }
    }
}

/// One Nsight Compute metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metric {
    /// The Nsight Compute name (`launch__grid_size`).
    pub name: String,
    /// What it means, in words.
    pub label: String,
    /// The value, formatted with its unit.
    pub value: String,
}

/// The metrics of one profiled kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelMetrics {
    pub kernel: String,
    pub values: Vec<Metric>,
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
}

/// The precision rule of `policy` for prompts, with the person's explicit tolerances where
/// set (else the per-dtype table's).
pub fn precision_rule(policy: PrecisionPolicy, atol: Option<f64>, rtol: Option<f64>) -> String {
    let f32_tol = policy.float32_tolerance();
    let within = match (atol, rtol) {
        (None, None) => format!(
            "within atol = rtol = {f32_tol:e} for float32 outputs (1e-2 for float16/bfloat16 outputs)"
        ),
        (a, r) => format!(
            "within atol {:e}, rtol {:e}",
            a.unwrap_or(f32_tol),
            r.unwrap_or(f32_tol)
        ),
    };
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

/// Lines and characters kept of the current failure's message and of each earlier one.
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

    /// The precision rule the prompts state (`precision_rule`).
    pub fn with_precision(
        mut self,
        policy: PrecisionPolicy,
        atol: Option<f64>,
        rtol: Option<f64>,
    ) -> PromptContext {
        self.precision = precision_rule(policy, atol, rtol);
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

    /// Takes what an evaluation says about the candidate: the failure with its hints when
    /// it failed, else its timing; Nsight Compute metrics when it was profiled.
    pub fn with_eval(mut self, result: &EvalResult) -> PromptContext {
        if result.correct {
            self.failure = None;
            self.hints.clear();
        } else {
            let category = category_of(result);
            let message = if result.message.trim().is_empty() {
                result.summary.clone()
            } else {
                excerpt(&result.message, FAILURE_LINES, FAILURE_CHARS)
            };
            self.hints = hints_for(&category, &format!("{}\n{}", result.summary, message));
            // A mismatch of a kernel computing below the policy's precision: that fix first.
            if let (Some(crate::protocol::Category::Mismatch), Some(p)) =
                (result.category, &result.precision)
                && let Some(hint) = precision_hint(p.policy, &p.reduced)
            {
                self.hints.insert(0, hint);
            }
            self.failure = Some(Failure {
                category,
                summary: result.summary.clone(),
                message,
            });
        }
        if let Some(t) = &result.timing {
            self.timing = TimingInfo {
                meaningful: t.meaningful,
                kernel_ms: (t.kernel.median_ms > 0.0).then_some(t.kernel.median_ms),
                reference_ms: (t.reference.median_ms > 0.0).then_some(t.reference.median_ms),
                score: t.score,
            };
        }
        if let Some(profile) = &result.profile {
            self.metrics = metrics_from_profile(profile);
        }
        self.speed_of_light = result.speed_of_light.as_ref().and_then(|s| s.prompt_line());
        self
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

/// What each Nsight Compute metric kforge collects means, and how to show its value.
const METRIC_LABELS: &[(&str, &str, &str)] = &[
    ("gpu__time_duration.sum", "kernel duration", "ns"),
    (
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "SM (compute) throughput",
        "%",
    ),
    (
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "memory throughput",
        "%",
    ),
    ("dram__bytes_read.sum", "DRAM bytes read", "bytes"),
    ("dram__bytes_write.sum", "DRAM bytes written", "bytes"),
    (
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "achieved occupancy",
        "%",
    ),
    ("launch__registers_per_thread", "registers per thread", ""),
    (
        "launch__shared_mem_per_block_dynamic",
        "dynamic shared memory per block",
        "bytes",
    ),
    (
        "launch__shared_mem_per_block_static",
        "static shared memory per block",
        "bytes",
    ),
    ("launch__grid_size", "grid size (blocks)", ""),
    ("launch__block_size", "threads per block", ""),
    ("lts__t_sector_hit_rate.pct", "L2 hit rate", "%"),
    ("l1tex__t_sector_hit_rate.pct", "L1 hit rate", "%"),
];

fn format_metric(value: &serde_json::Value, unit: &str) -> String {
    let Some(x) = value.as_f64() else {
        return value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
    };
    match unit {
        "%" => format!("{x:.1}%"),
        "ns" if x >= 1e6 => format!("{:.3} ms", x / 1e6),
        "ns" => format!("{:.1} us", x / 1e3),
        "bytes" if x >= 1e6 => format!("{:.2} MB", x / 1e6),
        "bytes" if x >= 1e3 => format!("{:.1} KB", x / 1e3),
        "bytes" => format!("{x:.0} B"),
        _ if x.fract() == 0.0 => format!("{x:.0}"),
        _ => format!("{x}"),
    }
}

/// The metrics of an evaluation's `profile` (the harness's Nsight Compute output:
/// `{"available": true, "kernels": [{"name", "metrics": {name: value}}]}`); empty when
/// profiling was unavailable.
pub fn metrics_from_profile(profile: &serde_json::Value) -> Vec<KernelMetrics> {
    if profile.get("available").and_then(|v| v.as_bool()) == Some(false) {
        return Vec::new();
    }
    let Some(kernels) = profile.get("kernels").and_then(|k| k.as_array()) else {
        return Vec::new();
    };
    kernels
        .iter()
        .map(|k| {
            let metrics = k.get("metrics").and_then(|m| m.as_object());
            let mut values = Vec::new();
            if let Some(metrics) = metrics {
                for (name, label, unit) in METRIC_LABELS {
                    if let Some(v) = metrics.get(*name) {
                        values.push(Metric {
                            name: name.to_string(),
                            label: label.to_string(),
                            value: format_metric(v, unit),
                        });
                    }
                }
                for (name, v) in metrics {
                    if !METRIC_LABELS.iter().any(|(n, _, _)| n == name) {
                        values.push(Metric {
                            name: name.clone(),
                            label: name.clone(),
                            value: format_metric(v, ""),
                        });
                    }
                }
            }
            KernelMetrics {
                kernel: k
                    .get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?")
                    .to_string(),
                values,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// What forward returns
// ---------------------------------------------------------------------------

static CLASS_MODEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^class\s+Model\s*[(:]").expect("valid regex"));
static SELF_ATTR_CALL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^self\.(\w+)\s*\(").expect("valid regex"));
static INDEXED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.+?)((?:\[\s*-?\d+\s*\])+)$").expect("valid regex"));
static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("valid regex"));
static MODULE_CLASS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:nn\.)?([A-Z]\w*)\s*\(").expect("valid regex"));
static BATCH_FIRST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"batch_first\s*=\s*(True|False)\b").expect("valid regex"));
static RECURRENT_MODULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:nn\.)?(GRU|LSTM|RNN)\s*\(").expect("valid regex"));

/// Splits `s` at top-level commas (outside brackets), trimmed, empty parts dropped.
fn top_level_items(s: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut current) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

/// `(a, b)` -> `a, b` when the parentheses wrap the whole expression.
fn strip_outer_parens(s: &str) -> &str {
    let s = s.trim();
    if !(s.starts_with('(') && s.ends_with(')')) {
        return s;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 && i + 1 < s.len() {
                    return s;
                }
            }
            _ => {}
        }
    }
    &s[1..s.len() - 1]
}

/// What a recurrent module's output element means (`GRU`, `[1]`).
/// `batch_first` is `None` when the constructor sets it from a variable (unknown here).
fn recurrent_element(module: &str, path: &[usize], batch_first: Option<bool>) -> Option<String> {
    let seq = match batch_first {
        Some(true) => "(batch, seq_len, num_directions * hidden_size)",
        Some(false) => "(seq_len, batch, num_directions * hidden_size)",
        None => {
            "(seq_len, batch, num_directions * hidden_size), or (batch, seq_len, ...) if the \
             module is batch_first"
        }
    };
    let output = format!(
        "the output sequence: the last layer's hidden state at every time step, shape {seq}"
    );
    let h_n = "the final hidden state h_n: the last time step of every layer (and direction), \
               shape (num_layers * num_directions, batch, hidden_size)";
    let c_n = "the final cell state c_n, shape (num_layers * num_directions, batch, hidden_size)";
    Some(match (module, path) {
        (_, [0]) => output,
        ("LSTM", [1]) => format!("the tuple (h_n, c_n): {h_n}; and {c_n}"),
        ("LSTM", [1, 0]) => h_n.to_string(),
        ("LSTM", [1, 1]) => c_n.to_string(),
        (_, [1]) => h_n.to_string(),
        _ => return None,
    })
}

/// The module class of `self.<attr> = nn.X(...)` in `__init__`, and whether it is
/// `batch_first` (`None`: set from a variable, so unknown here).
fn module_of(model_body: &[LogicalLine], attr: &str) -> Option<(String, Option<bool>)> {
    let assign = Regex::new(&format!(r"^self\.{}\s*=\s*(.+)$", regex::escape(attr))).ok()?;
    model_body.iter().find_map(|l| {
        let value = assign.captures(&l.code)?.get(1)?.as_str().to_string();
        let class = RECURRENT_MODULE
            .captures(&value)
            .map(|c| c[1].to_string())
            .or_else(|| MODULE_CLASS.captures(&value).map(|c| c[1].to_string()))?;
        let batch_first = match BATCH_FIRST.captures(&value) {
            Some(m) => Some(&m[1] == "True"),
            None if value.contains("batch_first") => None,
            None => Some(false),
        };
        Some((class, batch_first))
    })
}

/// A name bound by an unpacking assignment and its index path in the unpacked value.
type Unpacked = (String, Vec<usize>);

/// Targets of an unpacking assignment with their index paths: `out, (h, c) = e` gives
/// `out -> [0]`, `h -> [1, 0]`, `c -> [1, 1]`.
fn unpack_targets(lhs: &str, prefix: &[usize], out: &mut Vec<Unpacked>) {
    let items = top_level_items(strip_outer_parens(lhs));
    if items.len() == 1 && prefix.is_empty() && !lhs.trim().starts_with('(') {
        out.push((items[0].clone(), Vec::new()));
        return;
    }
    for (i, item) in items.iter().enumerate() {
        let mut path = prefix.to_vec();
        path.push(i);
        if item.starts_with('(') || item.starts_with('[') {
            let inner = item.trim_start_matches('[').trim_end_matches(']');
            unpack_targets(inner, &path, out);
        } else {
            out.push((item.clone(), path));
        }
    }
}

/// At most `max` characters of an expression, for quoting it.
fn shorten(expr: &str, max: usize) -> String {
    if expr.chars().count() <= max {
        return expr.to_string();
    }
    let mut s: String = expr.chars().take(max).collect();
    s.push_str(" ...");
    s
}

/// Describes one returned expression of `forward`.
fn describe_value(expr: &str, forward: &[LogicalLine], model_body: &[LogicalLine]) -> String {
    let shortened = shorten(expr.trim(), 160);
    let expr = shortened.as_str();
    // The call whose result this is, and the element path taken from it.
    let mut source: Option<(String, Vec<usize>, Vec<Unpacked>)> = None;
    if let Some(m) = INDEXED.captures(expr) {
        let path: Vec<usize> = DIGITS
            .find_iter(&m[2])
            .filter_map(|d| d.as_str().parse().ok())
            .collect();
        if !m[2].contains('-') {
            source = Some((m[1].trim().to_string(), path, Vec::new()));
        }
    } else if expr.chars().all(|c| c.is_alphanumeric() || c == '_') {
        // The last assignment to this name in forward.
        for l in forward.iter().rev() {
            let Some((lhs, rhs)) = split_assignment(&l.text) else {
                continue;
            };
            let mut targets: Vec<Unpacked> = Vec::new();
            unpack_targets(&lhs, &[], &mut targets);
            if let Some((_, path)) = targets.iter().find(|(n, _)| n == expr) {
                if path.is_empty() {
                    return format!("`{expr}`, computed as `{rhs}`");
                }
                let others: Vec<(String, Vec<usize>)> =
                    targets.iter().filter(|(n, _)| n != expr).cloned().collect();
                source = Some((rhs, path.clone(), others));
                break;
            }
        }
    }
    let Some((call, path, others)) = source else {
        return format!("`{expr}`");
    };
    let index: String = path.iter().map(|i| format!("[{i}]")).collect();
    let mut text = format!("`{expr}`: element {index} of what `{call}` returns");
    let module = SELF_ATTR_CALL
        .captures(&call)
        .and_then(|m| module_of(model_body, &m[1]));
    if let Some((class, batch_first)) = &module {
        text.push_str(&format!(" (an nn.{class})"));
        if let Some(meaning) = recurrent_element(class, &path, *batch_first) {
            text.push_str(&format!(", i.e. {meaning}"));
        }
        let dropped: Vec<String> = others
            .iter()
            .map(|(name, p)| {
                let meaning = recurrent_element(class, p, *batch_first)
                    .map(|m| format!(" ({})", m.split(':').next().unwrap_or(&m)))
                    .unwrap_or_default();
                format!("`{name}`{meaning}")
            })
            .collect();
        if !dropped.is_empty() {
            text.push_str(&format!(
                ". The other element(s), {}, are not returned: do not spend time producing \
                 them beyond what the returned value needs",
                dropped.join(", ")
            ));
        } else if RECURRENT_MODULE.is_match(&format!("{class}(")) {
            text.push_str(". Nothing else of the module's output is returned");
        }
    }
    text
}

/// `lhs = rhs` of a plain assignment line (not `==`, not augmented), if it is one.
fn split_assignment(text: &str) -> Option<(String, String)> {
    let a = crate::pysource::assignment(text)?;
    if a.augmented.is_some() {
        return None;
    }
    let cut = text.len() - a.value.len();
    let lhs = text[..cut].trim_end().strip_suffix('=')?.trim().to_string();
    Some((lhs, a.value))
}

/// Describes what `Model.forward` returns, for the prompts: its `return` expression(s),
/// whether it is one tensor or a tuple, which element of a recurrent module's output it
/// is, and the comment on the return line (often the shape).
pub fn forward_returns(task_source: &str) -> String {
    let lines = logical_lines(task_source);
    let Some(class_at) = lines
        .iter()
        .position(|l| l.indent == 0 && CLASS_MODEL.is_match(&l.code))
    else {
        return "could not be determined (no `class Model` found): read the reference".into();
    };
    let model_body = block(&lines, class_at);
    let Some(forward) = functions(model_body)
        .into_iter()
        .find(|f| f.name == "forward")
    else {
        return "could not be determined (`Model` has no `forward`): read the reference".into();
    };
    let returns: Vec<&LogicalLine> = forward
        .body
        .iter()
        .filter(|l| {
            l.code == "return" || l.code.starts_with("return ") || l.code.starts_with("return(")
        })
        .collect();
    if returns.is_empty() {
        return "nothing (`forward` has no return statement): it returns None".into();
    }
    let described: Vec<String> = returns
        .iter()
        .map(|l| {
            let expr = l.text["return".len()..].trim();
            let mut text = if expr.is_empty() || expr == "None" {
                "None".to_string()
            } else {
                let items = top_level_items(strip_outer_parens(expr));
                let is_tuple = items.len() > 1 || expr.trim_end().ends_with(",)");
                if is_tuple {
                    let parts: Vec<String> = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            format!("[{i}] {}", describe_value(item, forward.body, model_body))
                        })
                        .collect();
                    format!(
                        "a tuple of {} values, in this order: {}",
                        items.len(),
                        parts.join("; ")
                    )
                } else {
                    format!(
                        "a single value (one tensor): {}",
                        describe_value(expr, forward.body, model_body)
                    )
                }
            };
            text.push('.');
            if !l.comment.is_empty() {
                text.push_str(&format!(" The task's comment on that line: {}", l.comment));
            }
            text
        })
        .collect();
    if described.len() == 1 {
        described.into_iter().next().unwrap_or_default()
    } else {
        let lines: Vec<String> = returns
            .iter()
            .zip(&described)
            .map(|(l, d)| format!("line {}: {d}", l.line))
            .collect();
        format!(
            "one of {} return statements, depending on the path taken: {}",
            lines.len(),
            lines.join(" | ")
        )
    }
}

/// Whether the task uses a recurrent module (nn.GRU, nn.LSTM, nn.RNN, or their cells).
pub fn is_recurrent(task_source: &str) -> bool {
    static RECURRENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\bnn\.(GRU|LSTM|RNN)(Cell)?\s*\(").expect("valid regex"));
    RECURRENT.is_match(task_source)
}

// ---------------------------------------------------------------------------
// The template set
// ---------------------------------------------------------------------------

/// A rendered prompt: the system text and the user text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedPrompt {
    pub template: TemplateName,
    pub system: String,
    pub user: String,
}

const SYSTEM_MARK: &str = "<!-- kforge:system -->";
const USER_MARK: &str = "<!-- kforge:user -->";

impl RenderedPrompt {
    /// The form written to `llm/<call>.prompt.md` (and edited by a rewrite at a gate).
    pub fn to_markdown(&self) -> String {
        format!(
            "<!-- kforge prompt: {} -->\n{SYSTEM_MARK}\n{}\n{USER_MARK}\n{}\n",
            self.template,
            self.system.trim_end(),
            self.user.trim_end()
        )
    }

    /// Reads back `to_markdown`'s form, e.g. after the person edited it. Text without the
    /// markers is taken as the user text with no system text.
    pub fn from_markdown(template: TemplateName, text: &str) -> RenderedPrompt {
        match (text.find(SYSTEM_MARK), text.find(USER_MARK)) {
            (Some(s), Some(u)) if s < u => RenderedPrompt {
                template,
                system: text[s + SYSTEM_MARK.len()..u].trim().to_string(),
                user: text[u + USER_MARK.len()..].trim().to_string(),
            },
            _ => RenderedPrompt {
                template,
                system: String::new(),
                user: text.trim().to_string(),
            },
        }
    }
}

/// Where the templates come from: `[prompts] dir` of the merged configuration if set,
/// else `./prompts` when it is a directory, else `<config dir>/prompts` when it is one.
/// `None`: the built-in templates only.
pub fn user_dir(config: &crate::config::Config) -> Option<PathBuf> {
    let configured = config
        .table
        .get("prompts")
        .and_then(|p| p.get("dir"))
        .and_then(|d| d.as_str())
        .map(PathBuf::from);
    configured.or_else(|| {
        let local = PathBuf::from("prompts");
        if local.is_dir() {
            return Some(local);
        }
        crate::paths::config_dir()
            .map(|d| d.join("prompts"))
            .filter(|d| d.is_dir())
    })
}

type Stamp = Option<(SystemTime, u64)>;

fn file_stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

fn default_source(name: &str) -> Option<&'static str> {
    DEFAULT_TEMPLATES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
}

/// A template name that is a plain file name (no directories, no `..`).
fn safe_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != ".."
}

/// The prompt templates: built-in defaults overridden per file by a user directory,
/// re-read when an override changes. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct PromptSet {
    inner: Arc<Inner>,
}

struct Inner {
    user_dir: Option<PathBuf>,
    env: Environment<'static>,
}

impl std::fmt::Debug for PromptSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptSet")
            .field("user_dir", &self.inner.user_dir)
            .finish()
    }
}

impl PromptSet {
    /// A set reading overrides from `user_dir` (which must be a directory when given).
    pub fn new(user_dir: Option<PathBuf>) -> Result<PromptSet> {
        if let Some(dir) = &user_dir
            && !dir.is_dir()
        {
            bail!(
                "the prompt template directory {} does not exist (config `[prompts] dir`)",
                dir.display()
            );
        }
        let mut env = Environment::new();
        env.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .keep_trailing_newline(true)
                .build()
                .context("prompt template syntax")?,
        );
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_reload(true);
        let dir = user_dir.clone();
        env.set_loader(move |name| load(dir.as_deref(), name));
        Ok(PromptSet {
            inner: Arc::new(Inner { user_dir, env }),
        })
    }

    /// The set for a configuration (`user_dir`).
    pub fn from_config(config: &crate::config::Config) -> Result<PromptSet> {
        PromptSet::new(user_dir(config))
    }

    pub fn user_dir(&self) -> Option<&Path> {
        self.inner.user_dir.as_deref()
    }

    /// Where a template's text comes from now: the override's path, or `None` (built in).
    pub fn origin(&self, file: &str) -> Option<PathBuf> {
        self.inner
            .user_dir
            .as_ref()
            .map(|d| d.join(file))
            .filter(|p| safe_name(file) && p.is_file())
    }

    fn describe_origin(&self, file: &str) -> String {
        match self.origin(file) {
            Some(p) => format!("`{file}` ({})", p.display()),
            None => format!("`{file}` (built in)"),
        }
    }

    /// Renders `name`'s user text and the system text with `ctx`. Errors name the
    /// template file, where it comes from and the line.
    pub fn render(&self, name: TemplateName, ctx: &PromptContext) -> Result<RenderedPrompt> {
        let value = context! {
            latency => ctx.timing.describe(),
            recurrent => is_recurrent(&ctx.task_source),
            template => name.as_str(),
            ..minijinja::Value::from(minijinja::value::Serde(ctx))
        };
        let render = |file: &str| -> Result<String> {
            let result = self
                .inner
                .env
                .get_template(file)
                .and_then(|t| t.render(&value));
            result.map_err(|e| self.template_error(file, &e))
        };
        let system = render(&TemplateName::System.file_name())?;
        let user = if name == TemplateName::System {
            String::new()
        } else {
            render(&name.file_name())?
        };
        Ok(RenderedPrompt {
            template: name,
            system: tidy(&system),
            user: tidy(&user),
        })
    }

    fn template_error(&self, file: &str, e: &minijinja::Error) -> anyhow::Error {
        // An error inside an included or extended template is wrapped: report the innermost.
        let mut e = e;
        while let Some(inner) =
            std::error::Error::source(e).and_then(|s| s.downcast_ref::<minijinja::Error>())
        {
            e = inner;
        }
        let at = e.name().unwrap_or(file);
        let line = e.line().map(|l| format!(", line {l}")).unwrap_or_default();
        let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
        let via = if at == file {
            String::new()
        } else {
            format!(" (while rendering `{file}`)")
        };
        anyhow::anyhow!(
            "prompt template {}{line}{via}: {}{detail}",
            self.describe_origin(at),
            e.kind()
        )
    }

    /// Renders every template with `ctx`, to find errors in overrides early.
    pub fn check(&self, ctx: &PromptContext) -> Result<()> {
        for name in TemplateName::ALL {
            self.render(name, ctx)?;
        }
        Ok(())
    }

    /// Writes the templates in effect now (built-in or overridden, partials included, and
    /// any other `*.j2` of the user directory) into `dir`, with `sources.json` saying where
    /// each came from. The directory can later serve as a user directory to reproduce the
    /// prompts exactly.
    pub fn snapshot_into(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut names: Vec<String> = DEFAULT_TEMPLATES
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        if let Some(user) = &self.inner.user_dir
            && let Ok(entries) = std::fs::read_dir(user)
        {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".j2") && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut sources = BTreeMap::new();
        for name in names {
            let (text, origin) = match self.origin(&name) {
                Some(path) => (
                    std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                    path.display().to_string(),
                ),
                None => match default_source(&name) {
                    Some(text) => (text.to_string(), "built-in".to_string()),
                    None => continue,
                },
            };
            let target = dir.join(&name);
            std::fs::write(&target, text)
                .with_context(|| format!("cannot write {}", target.display()))?;
            sources.insert(name, origin);
        }
        std::fs::write(
            dir.join(SNAPSHOT_SOURCES_FILE),
            serde_json::to_string_pretty(&sources)? + "\n",
        )
        .with_context(|| format!("cannot write {}", dir.display()))?;
        Ok(())
    }
}

/// The loader: the override in `dir` when present, else the built-in default. Either way
/// the source carries an up-to-date check, so an override that appears, changes or goes
/// away is seen at the next lookup.
fn load(dir: Option<&Path>, name: &str) -> Result<Option<TemplateSource>, minijinja::Error> {
    if !safe_name(name) {
        return Ok(None);
    }
    let path = dir.map(|d| d.join(name));
    if let Some(path) = path {
        let stamp = file_stamp(&path);
        if stamp.is_some() {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            return Ok(Some(
                TemplateSource::new(text).with_uptodate_check(move || file_stamp(&path) == stamp),
            ));
        }
        return Ok(default_source(name)
            .map(|text| TemplateSource::new(text).with_uptodate_check(move || !path.exists())));
    }
    Ok(default_source(name).map(TemplateSource::new))
}

/// Collapses runs of blank lines left by optional sections; one trailing newline.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = 0;
    let mut in_fence = false;
    for line in text.trim().lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if line.trim().is_empty() && !in_fence {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRU_HIDDEN: &str = include_str!("../../examples/tasks/gru_hidden.py");
    const RELU: &str = include_str!("../../examples/tasks/relu.py");

    #[test]
    fn forward_returns_describes_single_values() {
        let text = forward_returns(RELU);
        assert!(text.starts_with("a single value (one tensor): `"), "{text}");
    }

    #[test]
    fn forward_returns_names_the_recurrent_element_and_what_is_dropped() {
        let text = forward_returns(GRU_HIDDEN);
        assert!(
            text.contains("`h_n`: element [1] of what `self.gru(x)` returns"),
            "{text}"
        );
        assert!(text.contains("nn.GRU"), "{text}");
        assert!(text.contains("final hidden state h_n"), "{text}");
        assert!(text.contains("`_` (the output sequence)"), "{text}");
        assert!(
            text.ends_with(
                ". The task's comment on that line: (num_layers, batch_size, hidden_size)"
            ),
            "{text}"
        );
    }

    #[test]
    fn forward_returns_tuples_indexing_lstm_and_branches() {
        let lstm = r#"
class Model(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.lstm = nn.LSTM(i, h, batch_first=True)
        self.fc = nn.Linear(h, 10)

    def forward(self, x):
        out, (h_n, c_n) = self.lstm(x)
        return c_n
"#;
        let text = forward_returns(lstm);
        assert!(text.contains("element [1][1]"), "{text}");
        assert!(text.contains("final cell state c_n"), "{text}");
        assert!(text.contains("`out` (the output sequence)"), "{text}");

        let tuple = "class Model(nn.Module):\n    def forward(self, a, b):\n        return (a + b, a * b)\n";
        let text = forward_returns(tuple);
        assert!(text.starts_with("a tuple of 2 values"), "{text}");
        assert!(text.contains("[0] `a + b`; [1] `a * b`"), "{text}");

        let indexed = "class Model(nn.Module):\n    def __init__(self):\n        self.rnn = nn.RNN(4, 8, batch_first=True)\n    def forward(self, x):\n        return self.rnn(x)[0]\n";
        let text = forward_returns(indexed);
        assert!(
            text.contains("element [0] of what `self.rnn(x)` returns"),
            "{text}"
        );
        assert!(text.contains("shape (batch, seq_len,"), "{text}");

        // KernelBench level 3: batch_first passed positionally from a variable.
        let kb = "class Model(nn.Module):\n    def __init__(self, i, h, n=3, bias=True, batch_first=False):\n        super(Model, self).__init__()\n        self.gru = nn.GRU(i, h, n, bias, batch_first, dropout=0, bidirectional=True)\n        self.h0 = torch.randn((n * 2, 10, h))\n\n    def forward(self, x):\n        self.h0 = self.h0.to(x.device)\n        output, h_n = self.gru(x, self.h0)\n        return output\n";
        let text = forward_returns(kb);
        assert!(
            text.contains(
                "`output`: element [0] of what `self.gru(x, self.h0)` returns (an nn.GRU)"
            ),
            "{text}"
        );
        assert!(
            text.contains("or (batch, seq_len, ...) if the module is batch_first"),
            "{text}"
        );
        assert!(
            text.contains("`h_n` (the final hidden state h_n), are not returned"),
            "{text}"
        );
        let long = format!(
            "class Model(nn.Module):\n    def forward(self, x):\n        return x + {}\n",
            "x + ".repeat(100)
        );
        assert!(forward_returns(&long).len() < 300);

        let branches = "class Model(nn.Module):\n    def forward(self, x):\n        if x.dim() > 2:\n            return x.sum(0)\n        return x\n";
        let text = forward_returns(branches);
        assert!(text.starts_with("one of 2 return statements"), "{text}");
        assert!(forward_returns("x = 1\n").contains("no `class Model`"));
    }

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
        };
        assert_eq!(
            t.describe(),
            "2.000 ms for this kernel vs 3.000 ms for the PyTorch reference (speedup 1.50x: faster than PyTorch)"
        );
        assert!(TimingInfo::default().describe().starts_with("not measured"));
    }

    #[test]
    fn metrics_are_labelled_and_formatted() {
        let profile = serde_json::json!({"available": true, "tool": "ncu", "kernels": [
            {"name": "relu_kernel", "metrics": {"launch__grid_size": 4096.0,
             "sm__throughput.avg.pct_of_peak_sustained_elapsed": 12.345,
             "dram__bytes_read.sum": 6442450944.0, "gpu__time_duration.sum": 2500000.0,
             "custom.metric": "n/a"}}]});
        let m = metrics_from_profile(&profile);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].kernel, "relu_kernel");
        let shown: Vec<(&str, &str)> = m[0]
            .values
            .iter()
            .map(|v| (v.label.as_str(), v.value.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("kernel duration", "2.500 ms"),
                ("SM (compute) throughput", "12.3%"),
                ("DRAM bytes read", "6442.45 MB"),
                ("grid size (blocks)", "4096"),
                ("custom.metric", "n/a"),
            ]
        );
        assert!(metrics_from_profile(&serde_json::json!({"available": false})).is_empty());
    }

    #[test]
    fn markdown_round_trips() {
        let p = RenderedPrompt {
            template: TemplateName::Repair,
            system: "sys".into(),
            user: "# user\nfix it".into(),
        };
        let back = RenderedPrompt::from_markdown(TemplateName::Repair, &p.to_markdown());
        assert_eq!(back, p);
        let plain = RenderedPrompt::from_markdown(TemplateName::Seed, "just text\n");
        assert_eq!(
            (plain.system.as_str(), plain.user.as_str()),
            ("", "just text")
        );
    }

    #[test]
    fn names_map_to_files_stages_and_calls() {
        for name in TemplateName::ALL {
            assert!(default_source(&name.file_name()).is_some(), "{name}");
        }
        for stage in TemplateName::STAGES {
            let t = TemplateName::stage(stage).unwrap();
            assert_eq!(t.file_name(), format!("stage_{stage}.j2"));
            assert_eq!(t.call_kind(), Some(CallKind::Stage));
        }
        assert_eq!(
            TemplateName::OptimizeFromAnalysis.call_kind(),
            Some(CallKind::Optimize)
        );
        assert!(!safe_name("../x.j2") && safe_name("seed.j2"));
    }
}
