//! The evaluation result schema: what one evaluation found, as the harness writes it and
//! `eval/<id>.json` keeps it (documented in docs/eval-result.md; `kforge eval --json`
//! prints `EvalResult`). Every layer that shows or stores a result reads these types; the
//! evaluator that produces them is `crate::eval`.

use serde::{Deserialize, Serialize};

use super::sol::SpeedOfLight;
use super::{Baseline, Category, MathKind, PrecisionPolicy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Correct,
    #[default]
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceInfo {
    pub kind: String,
    /// `cuda:1`, as torch names it (results from before device sets have none).
    pub torch_name: Option<String>,
    /// The GPU's UUID: cached reference timings are per physical device.
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub capability: Option<String>,
    pub memory_bytes: Option<u64>,
    pub multiprocessors: Option<u32>,
    pub l2_bytes: Option<u64>,
    pub interpreter: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Versions {
    pub python: Option<String>,
    pub torch: Option<String>,
    pub triton: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Finding {
    pub rule: String,
    pub message: String,
    pub line: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StaticReport {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
    pub jit_kernels: Vec<String>,
    pub launches: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Alignment {
    pub by_name: Vec<String>,
    pub by_shape: Vec<(String, String)>,
    pub unmatched_reference: Vec<String>,
    pub unmatched_kernel: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OutputCheck {
    pub output: String,
    pub passed: bool,
    pub reason: Option<String>,
    pub shape: Option<Vec<i64>>,
    pub dtype: Option<String>,
    pub max_abs_err: Option<f64>,
    pub max_rel_err: Option<f64>,
    pub max_abs_ref: Option<f64>,
    pub bad_elements: Option<u64>,
    pub numel: Option<u64>,
    /// The configured atol and the one applied to this output (the `dtype` rule).
    pub atol: Option<f64>,
    pub atol_effective: Option<f64>,
    /// `oracle` (against the float64 oracle, within `limit` times the honest error),
    /// `dtype`, `kernelbench` or `scaled` (None: a result from before the oracle rule).
    pub rule: Option<String>,
    /// The `oracle` rule: the worst element's error over the honest error there.
    pub error_ratio: Option<f64>,
    /// The `oracle` rule: the multiple of the honest error allowed (the output dtype's factor).
    pub limit: Option<f64>,
    /// The `oracle` rule: the output's RMS honest error.
    pub honest_rms: Option<f64>,
    /// The `oracle` rule: the largest deviation allowed at any element.
    pub max_allowed: Option<f64>,
    /// What the kernel was compared with: `float64 oracle`, or the float32 reference under
    /// the honest error measured on an earlier comparison.
    pub oracle: Option<String>,
    /// The worst element's index.
    pub worst_at: Option<Vec<i64>>,
    /// Why an output of the `oracle` rule fell back to `dtype`.
    pub fallback: Option<String>,
}

/// `random` (seeded inputs), `signed` (standard-normal inputs), `post_timing` (fresh values
/// written into the buffers used for timing).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Trial {
    pub kind: String,
    pub index: u32,
    pub passed: bool,
    pub outputs: Vec<OutputCheck>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TimingStats {
    /// The judge's own measurement per timed run (its window less `null_ms`): the median is
    /// the figure, the rest describes the runs.
    pub median_ms: f64,
    pub mean_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub std_ms: f64,
    pub runs: u32,
    pub requested_runs: u32,
    pub budget_limited: bool,
    /// The 95% interval of the median (None: a result from before intervals).
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    /// The median's interval is wider than +-5%.
    pub noisy: bool,
    /// The median raw judge window, the exchange with the process included.
    pub window_median_ms: Option<f64>,
    /// This side's calibrated null window, subtracted from each run.
    pub null_ms: Option<f64>,
    /// The median of the CUDA-event times the timed process reported itself: information
    /// only, never the score.
    pub reported_median_ms: Option<f64>,
    /// Timed runs whose start the judge had to wait for past its limit.
    pub gate_timeouts: u32,
    /// Whether the interval reached `timing_precision` before the run cap or the budget
    /// (None: a result from before intervals).
    pub precision_reached: Option<bool>,
    /// Kernel only: the timed runs whose outputs the judge checked against the reference.
    pub checked_runs: Vec<u32>,
    /// Reference only: read from the baseline cache instead of measured now.
    pub cached: bool,
    /// Fields this version does not know (a newer harness's, an older one's), kept so that
    /// `kforge eval --json` and `eval/<id>.json` pass them through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl TimingStats {
    /// The median's 95% interval, when the harness gave one.
    pub fn interval(&self) -> Option<(f64, f64)> {
        Some((self.ci_low_ms?, self.ci_high_ms?))
    }
}

/// The judge's measurement of a null run (the exchange without a forward) in the kernel's
/// process, before the kernel was imported.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Calibration {
    /// Median wall time of a null run.
    pub overhead_ms: f64,
    /// Its 10th percentile, and the noise just above it (30th - 10th percentile).
    pub floor_ms: f64,
    pub spread_ms: f64,
    pub runs: u32,
    /// Fields this version does not know (a newer harness's, an older one's), kept so that
    /// `kforge eval --json` and `eval/<id>.json` pass them through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What shaped the timed numbers: math modes, clocks, driver and library versions.
/// Every field may be missing (older harnesses, a driver query that failed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimingEnvironment {
    /// The precision policy the reference's settings below came from.
    pub precision: Option<PrecisionPolicy>,
    /// `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32`, in
    /// the reference's timing process when it was timed.
    pub tf32_matmul: Option<bool>,
    pub tf32_cudnn: Option<bool>,
    /// `torch.get_float32_matmul_precision()`: `highest`, `high`, `medium`.
    pub float32_matmul_precision: Option<String>,
    /// SM and memory clocks in MHz, before and after the timed runs.
    pub sm_clock_mhz: Option<Vec<f64>>,
    pub mem_clock_mhz: Option<Vec<f64>>,
    pub max_sm_clock_mhz: Option<f64>,
    pub max_mem_clock_mhz: Option<f64>,
    /// Whether application clocks were locked (None: unknown).
    pub clocks_locked: Option<bool>,
    /// The driver's clock throttle reasons at the end of timing (`idle`, `sw_thermal`...).
    pub throttle_reasons: Vec<String>,
    pub driver: Option<String>,
    pub cuda_driver: Option<String>,
    pub cuda_runtime: Option<String>,
    pub torch: Option<String>,
    pub triton: Option<String>,
    /// How both sides were timed, in words.
    pub timing_method: Option<String>,
    /// How every timed run got never-seen input values.
    pub input_refresh: Option<String>,
    /// How each timing process's CUDA context was drawn before it was used (the harness's
    /// launchpath.py); None where nothing was drawn (the CPU, an older harness).
    pub launch_path: Option<LaunchPath>,
    /// Fields this version does not know (a newer harness's, an older one's), kept so that
    /// `kforge eval --json` and `eval/<id>.json` pass them through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The launch-path draws of one evaluation: every timing process's CUDA context is probed
/// (`launches` tiny launches queued behind a spin) and created again until its probe is
/// within `tolerance` of the device's floor, at most `max_draws` contexts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LaunchPath {
    pub tolerance: Option<f64>,
    pub max_draws: Option<u32>,
    pub launches: Option<u32>,
    /// The device's floor after this evaluation's draws (ms).
    pub floor_ms: Option<f64>,
    pub processes: LaunchPathProcesses,
}

/// Each timing process's draws (one field per process kind, so that a newer harness's
/// other kinds land in `extra` instead of failing the result).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LaunchPathProcesses {
    pub kernel: Option<LaunchDraws>,
    pub reference: Option<LaunchDraws>,
    pub compiled: Option<LaunchDraws>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One process's draws: every probe in order (the last is the context it kept), whether the
/// kept one was within the tolerance, or why nothing was drawn.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LaunchDraws {
    /// The floor the process was compared with (None: none known yet).
    pub floor_ms: Option<f64>,
    pub probes_ms: Vec<f64>,
    pub accepted: Option<bool>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Timing {
    pub meaningful: bool,
    /// How both sides were timed (`judge_window`: the judge's own CUDA events around each
    /// process's whole GPU work); None in results from before it was recorded.
    pub method: Option<String>,
    /// Forwards each timed window held (short forwards run several to a window, each on
    /// its own inputs; the figures are per forward); None in results from before it was
    /// recorded.
    pub forwards_per_window: Option<u32>,
    pub reference: TimingStats,
    pub kernel: TimingStats,
    /// Reference median / kernel median.
    pub score: Option<f64>,
    /// The score's 95% interval: the bootstrap over both sides' runs combined with the
    /// between-evaluations term (`interval_method` says which; the bootstrap alone is
    /// `runs_score_low`/`runs_score_high` among the extra fields).
    pub score_low: Option<f64>,
    pub score_high: Option<f64>,
    /// How `score_low`/`score_high` were computed, in words.
    pub interval_method: Option<String>,
    /// Either side's median has a 95% interval wider than +-5%.
    pub noisy: bool,
    /// The ratio of the medians of the CUDA-event times the processes reported themselves:
    /// information only.
    pub reported_score: Option<f64>,
    pub baseline_key: Option<String>,
    pub flush_l2_bytes: u64,
    pub calibration: Option<Calibration>,
    pub environment: Option<TimingEnvironment>,
    /// A task check asked for KernelBench's protocol: the reference timed that way too.
    pub kernelbench: Option<KernelBenchTiming>,
    /// A task check asked for rounds: both protocols' medians per round, round one first
    /// (its figures are `reference` and `kernelbench`).
    pub rounds: Vec<ProtocolRound>,
    /// The reference under `torch.compile` (GPU, `[eval] compile_baseline`): its figures,
    /// or why there are none.
    pub compile: Option<CompileFigures>,
    /// The score against the compiled reference: `score` x compiled / eager median, with
    /// its interval (both intervals combined on the log scale).
    pub score_vs_compile: Option<f64>,
    pub score_vs_compile_low: Option<f64>,
    pub score_vs_compile_high: Option<f64>,
    /// What the headline score (`EvalResult::score`) is against; None: eager (results
    /// from before the compile baseline).
    pub baseline: Option<Baseline>,
    /// Why that baseline: the choice in force and, for `best`, which was faster.
    pub baseline_reason: Option<String>,
    /// The torch.compile figure left out of this evaluation for after its verdict (a
    /// one-shot `kforge eval` on a GPU where it was not cached), or measured after it and
    /// scored against since; None: not deferred (absent from the JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_deferred: Option<super::CompileDeferral>,
    /// The reference under PyTorch's default precision settings, where the policy's differ
    /// for the task's work (GPU): its figures, or why there are none. None: not measured
    /// (the settings agree, the CPU, results from before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defaults: Option<DefaultsFigures>,
    /// The score against it: `score` x defaults median / the policy reference's median,
    /// with its interval. Shown beside the headline; fast_p and selection use the headline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_vs_defaults: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_vs_defaults_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_vs_defaults_high: Option<f64>,
    /// Fields this version does not know (a newer harness's, an older one's), kept so that
    /// `kforge eval --json` and `eval/<id>.json` pass them through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Timing {
    /// The score against the reference under PyTorch's defaults, for the session's
    /// summary (None where it was not measured or has no figure).
    pub fn defaults_score(&self) -> Option<super::events::DefaultsScore> {
        let d = self.defaults.as_ref().filter(|d| d.error.is_none())?;
        Some(super::events::DefaultsScore {
            score: super::events::ScoreFigure::new(
                self.score_vs_defaults,
                self.score_vs_defaults_interval(),
            ),
            reference_speedup: d.speedup_over_reference,
            differs: d.differs.clone(),
        })
    }

    /// The interval of the score against the reference under PyTorch's defaults.
    pub fn score_vs_defaults_interval(&self) -> Option<(f64, f64)> {
        Some((self.score_vs_defaults_low?, self.score_vs_defaults_high?))
    }

    /// `vs PyTorch defaults 0.43x [0.42-0.44] (cuDNN TF32 on there: the reference runs
    /// 2.41x faster; the headline, fast_p and selection use the policy's reference)`, or
    /// why there is no such figure; None where it was not measured.
    pub fn defaults_line(&self) -> Option<String> {
        let d = self.defaults.as_ref()?;
        if let Some(error) = &d.error {
            return Some(format!("no figure under PyTorch's defaults: {error}"));
        }
        let score = self.score_vs_defaults.map(|s| {
            format!(
                "{} ",
                super::figures::score_with_interval(s, self.score_vs_defaults_interval())
            )
        });
        let speed = d
            .speedup_over_reference
            .map(|r| {
                format!(
                    "the reference runs {} as fast under them",
                    super::figures::score_with_interval(r, d.speedup_low.zip(d.speedup_high))
                )
            })
            .unwrap_or_default();
        let differs = d.differs.clone().unwrap_or_default();
        Some(format!(
            "{}({differs}: {speed}; the headline, fast_p and selection use the policy's reference)",
            score.unwrap_or_default()
        ))
    }

    /// The score's 95% interval, when the harness gave one.
    pub fn score_interval(&self) -> Option<(f64, f64)> {
        Some((self.score_low?, self.score_high?))
    }

    /// The interval of the score against the compiled reference.
    pub fn score_vs_compile_interval(&self) -> Option<(f64, f64)> {
        Some((self.score_vs_compile_low?, self.score_vs_compile_high?))
    }

    /// The baseline of the headline score (eager when none is recorded).
    pub fn headline_baseline(&self) -> Baseline {
        self.baseline.unwrap_or(Baseline::Eager)
    }

    /// The score against `baseline`, with its interval.
    pub fn score_against(&self, baseline: Baseline) -> (Option<f64>, Option<(f64, f64)>) {
        match baseline {
            Baseline::Eager => (self.score, self.score_interval()),
            Baseline::Compile => (self.score_vs_compile, self.score_vs_compile_interval()),
        }
    }
}

/// The reference under PyTorch's default precision settings, timed against the policy's
/// reference in one interleaved measurement (once per task and device; cached).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DefaultsFigures {
    /// Why there is no figure (its process failed); None when measured.
    pub error: Option<String>,
    /// The defaults' settings and the policy's (`TorchPrecision`).
    pub pytorch_settings: TorchPrecision,
    pub policy_settings: TorchPrecision,
    /// What differs for the task's work, in words.
    pub differs: Option<String>,
    pub median_ms: Option<f64>,
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub noisy: bool,
    /// The policy's reference median in the same measurement.
    pub reference_median_ms: Option<f64>,
    /// The policy reference's median / the defaults' (how much faster the defaults run),
    /// with its 95% bootstrap interval.
    pub speedup_over_reference: Option<f64>,
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    /// Read from the cache rather than measured in this evaluation.
    pub cached: bool,
    /// Which figure the headline, fast_p and selection use, in words.
    pub used_for: String,
}

/// The reference under `torch.compile`, timed against the eager reference in one
/// interleaved measurement (once per task, device and mode; cached).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CompileFigures {
    /// `torch.compile`'s mode.
    pub mode: String,
    /// Why there is no compile baseline (it failed to compile or run, or computes another
    /// result); None when measured.
    pub error: Option<String>,
    /// Seconds of the first forward, the compile (not part of any timed run).
    pub compile_s: Option<f64>,
    pub median_ms: Option<f64>,
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub noisy: bool,
    /// The eager reference's median in the same measurement.
    pub eager_median_ms: Option<f64>,
    /// Eager median / compiled median, with its 95% bootstrap interval.
    pub speedup_over_eager: Option<f64>,
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    /// Read from the cache rather than measured in this evaluation.
    pub cached: bool,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl CompileFigures {
    /// One line: `torch.compile (default) 0.412 ms, 1.31x eager [1.29-1.33], compiled in 23.1 s`
    /// or why there is none.
    pub fn describe(&self) -> String {
        if let Some(error) = &self.error {
            return format!("no torch.compile baseline ({}): {error}", self.mode);
        }
        let mut line = format!("torch.compile ({})", self.mode);
        if let Some(ms) = self.median_ms {
            line.push_str(&format!(" {ms:.4} ms"));
        }
        if let Some(speedup) = self.speedup_over_eager {
            let interval = self.speedup_low.zip(self.speedup_high);
            line.push_str(&format!(
                ", {} eager",
                super::figures::score_with_interval(speedup, interval)
            ));
        }
        if let Some(s) = self.compile_s {
            line.push_str(&format!(", compiled in {s:.1} s"));
        }
        if self.cached {
            line.push_str(" (cached)");
        }
        line
    }
}

/// Which protocol timed the reference first in a round.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RoundOrder {
    #[default]
    KforgeFirst,
    KernelbenchFirst,
}

/// One round of `kforge bench kernelbench --rounds N`: the reference's median under each
/// protocol, timed back to back in the same judge.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ProtocolRound {
    pub order: RoundOrder,
    pub kforge_ms: f64,
    pub kernelbench_ms: f64,
}

/// The reference timed with KernelBench's published protocol (kbprotocol.py): CUDA events,
/// `warmup` warm-up calls, a 256 MB L2 thrash before every trial, the same inputs every
/// trial, the first `discarded` trials dropped; population std, unrounded figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct KernelBenchTiming {
    pub median_ms: f64,
    pub mean_ms: f64,
    pub std_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Trials kept.
    pub runs: u32,
    pub warmup: u32,
    pub discarded: u32,
    pub l2_thrash_bytes: u64,
}

/// The memory plan of an evaluation (docs/eval-result.md, "Memory"), in bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Footprint {
    /// One draw of `get_inputs()`.
    pub inputs_bytes: u64,
    /// The reference's outputs.
    pub outputs_bytes: u64,
    /// The reference's forward beyond its inputs and outputs (GPU only).
    pub reference_scratch_bytes: u64,
    /// One L2 flush buffer (the judge and the kernel's process each hold one).
    pub flush_bytes: u64,
    /// The reference model's parameters and buffers: the estimate of the model the
    /// kernel's process builds after the plan is checked. 0 in older results.
    pub weights_bytes: u64,
    /// Timed: the old weight copies and spacers both timing processes keep after moving
    /// their models between rounds. 0 untimed and in older results.
    pub relocation_bytes: u64,
    /// The evaluation's expected peak (docs/eval-result.md, "Memory").
    pub planned_peak_bytes: u64,
    /// Device (host, on the CPU) memory free and in all when the evaluation began.
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// Which sandbox held the kernel's process, and the task's (`task`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SandboxInfo {
    /// `bwrap`, `namespaces` or `none`.
    pub kind: String,
    pub detail: String,
    /// Why the sandbox is weaker than bubblewrap, or absent.
    pub reason: String,
    pub enforced: bool,
    /// Where the task's code (its module, `Model`, `get_inputs`) ran: a sandbox of the same
    /// kind, apart from the kernel's. None in results from before tasks were sandboxed.
    pub task: Option<TaskSandbox>,
}

/// The task's sandbox (docs/security.md, "The task sandbox").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TaskSandbox {
    pub enforced: bool,
    /// What it guarantees in a sentence, or why there is none.
    pub detail: String,
}

/// What did the work in one audited forward of `ModelNew`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Audit {
    /// `ok`, `torch_fallback` or `malformed`.
    pub verdict: String,
    pub summary: String,
    pub triton_share: Option<f64>,
    pub library_share: Option<f64>,
    pub aten_share: Option<f64>,
    pub details: serde_json::Value,
}

/// The tolerance the comparison used.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ToleranceUsed {
    /// `oracle`, `dtype`, `kernelbench` or `scaled`.
    pub mode: String,
    /// The precision policy the table's float32 entry follows.
    pub precision: Option<String>,
    /// The person's explicit tolerances (None: each output's dtype's).
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// Per output: the absolute tolerance after scaling to the output's own magnitude.
    pub effective_atol: std::collections::BTreeMap<String, f64>,
    /// Per floating output: its dtype and the rule it was held to (the `oracle` rule's
    /// entry is the comparison where its error ratio was worst).
    pub outputs: std::collections::BTreeMap<String, OutputTolerance>,
    /// The `oracle` rule's float64 oracle (None: another rule, or no oracle could run).
    pub oracle: Option<OracleUsed>,
}

/// The tolerance of one output.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct OutputTolerance {
    pub dtype: String,
    /// `oracle`, `dtype`, `kernelbench` or `scaled` (None: a result from before the oracle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The `dtype`-like rules: atol and rtol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// The `oracle` rule: the allowed multiple of the honest error, the worst error ratio
    /// met (the margin: below `limit` passes), the RMS honest error, the largest allowed
    /// deviation, what the kernel was compared with and the worst element.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub honest_rms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_allowed: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_at: Option<Vec<i64>>,
    /// Why an output under the `oracle` mode was held to the `dtype` rule instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl OutputTolerance {
    /// Whether the output was judged against the float64 oracle.
    pub fn is_oracle(&self) -> bool {
        self.rule.as_deref() == Some("oracle")
    }

    /// `float32: error 4.62x the honest error (limit 128x; float64 oracle)`, or `float32
    /// atol=rtol 1e-4`.
    pub fn describe(&self) -> String {
        if self.is_oracle() {
            let ratio = self
                .error_ratio
                .map_or("?".to_string(), |r| format!("{}x", ratio_text(r)));
            let limit = self.limit.map_or("?".to_string(), |l| format!("{l}x"));
            return format!(
                "{}: error {ratio} the honest error (limit {limit}; float64 oracle)",
                self.dtype
            );
        }
        match (self.atol, self.rtol) {
            (Some(a), Some(r)) if a == r => format!("{} atol=rtol {a:e}", self.dtype),
            (Some(a), Some(r)) => format!("{} atol {a:e}, rtol {r:e}", self.dtype),
            _ => format!("{} exact", self.dtype),
        }
    }
}

/// The oracle rule's allowed multiple of the honest error for float32 outputs, and for
/// float16/bfloat16 ones (`oracle.py`'s FACTOR; a result's `tolerance.oracle.factor` is the
/// harness's own word).
pub const ORACLE_FACTOR_FLOAT32: f64 = 128.0;
pub const ORACLE_FACTOR_HALF: f64 = 16.0;

impl ToleranceUsed {
    /// The oracle rule in numbers for this task's outputs, as the prompts state it: per
    /// output judged against the float64 oracle, the typical and the largest deviation the
    /// judge allows on the measured inputs; per output that fell back, its atol and rtol.
    /// None outside the `oracle` mode or without figures.
    pub fn prompt_statement(&self) -> Option<String> {
        if self.mode != "oracle" {
            return None;
        }
        let parts: Vec<String> = self
            .outputs
            .iter()
            .filter_map(|(path, o)| {
                if o.is_oracle() {
                    let (limit, rms) = (o.limit?, o.honest_rms?);
                    let most = o
                        .max_allowed
                        .map(|m| format!(", at most +-{m:.2e} at any element"))
                        .unwrap_or_default();
                    Some(format!(
                        "`{path}` ({}) may differ from the exact result by about +-{:.2e} ({limit}x its RMS \
                         honest error {rms:.2e}){most}",
                        o.dtype,
                        limit * rms
                    ))
                } else {
                    let why = o
                        .fallback
                        .as_ref()
                        .map(|f| format!(" ({f})"))
                        .unwrap_or_default();
                    Some(format!("`{path}` is held to {}{why}", o.describe()))
                }
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The oracle's allowed multiple for float32 and for half outputs (the record's, else
    /// the constants).
    pub fn oracle_factors(&self) -> (f64, f64) {
        let factor = |dtype: &str, default: f64| {
            self.oracle
                .as_ref()
                .and_then(|o| o.factor.get(dtype).copied())
                .unwrap_or(default)
        };
        (
            factor("float32", ORACLE_FACTOR_FLOAT32),
            factor("float16", ORACLE_FACTOR_HALF),
        )
    }
}

/// An error ratio in three significant figures: `0.617`, `4.62`, `13.9`, `3640`, `2.93e4`.
pub fn ratio_text(r: f64) -> String {
    if !r.is_finite() || r >= 1e5 {
        format!("{r:.2e}")
    } else if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else if r >= 1.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.3}")
    }
}

/// The `oracle` rule's oracle (`tolerance.oracle`; compare.py, oracle.py).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct OracleUsed {
    /// `float64`.
    pub kind: String,
    /// The rule in words.
    pub rule: String,
    /// The allowed multiple of the honest error per output dtype.
    pub factor: std::collections::BTreeMap<String, f64>,
    /// The sequential twin in words (None: it did not run, `twin_error` says why).
    pub twin: Option<String>,
    pub twin_error: Option<String>,
    /// Why there is no oracle (outputs then fall back to `dtype`).
    pub reason: Option<String>,
    /// Seconds the float64 and twin forwards took in this evaluation.
    pub seconds: Option<f64>,
}

/// `torch.backends` precision settings in one process.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TorchPrecision {
    /// `torch.backends.cuda.matmul.allow_tf32`.
    pub matmul: Option<bool>,
    /// `torch.backends.cudnn.allow_tf32`.
    pub cudnn: Option<bool>,
    /// `torch.get_float32_matmul_precision()`.
    pub float32_matmul_precision: Option<String>,
}

impl TorchPrecision {
    /// `TF32 matmul off, TF32 cuDNN off, float32 matmul precision highest`.
    pub fn describe(&self) -> String {
        let on_off = |v: Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        let mut text = format!(
            "TF32 matmul {}, TF32 cuDNN {}",
            on_off(self.matmul),
            on_off(self.cudnn)
        );
        if let Some(p) = &self.float32_matmul_precision {
            text.push_str(&format!(", float32 matmul precision {p}"));
        }
        text
    }
}

/// One thing the harness found about a kernel's math (`precision.py`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MathFinding {
    pub category: MathKind,
    /// Source line (None: found in the running process).
    #[serde(default)]
    pub line: Option<u32>,
    /// In words, with the line.
    #[serde(default)]
    pub text: String,
    /// `kernel NAME`, `module` or `process`.
    #[serde(default, rename = "where")]
    pub place: String,
    /// Below float32 on float32 data.
    #[serde(default)]
    pub lowers: bool,
    /// Seen in the kernel's process (its torch settings), not in its source.
    #[serde(default)]
    pub dynamic: bool,
    /// Read from the launched kernel's compiled code (its TTIR or PTX), not its source.
    #[serde(default)]
    pub compiled: bool,
}

/// Where the precision record's findings about Triton code come from (`precision.py`,
/// `with_compiled`): the launched kernels' compiled code, or their source and why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PrecisionReading {
    /// `compiled` or `source`.
    pub read: String,
    /// Why the source was read (a kernel that did not compile alone, no launch read).
    pub why: Option<String>,
    /// What the code was compiled for (`CUDA sm_90 (compiled on the CPU up to TTIR)`).
    #[serde(rename = "for")]
    pub compiled_for: Option<String>,
    /// The kernels read.
    pub kernels: Vec<String>,
}

/// The result's `precision` record (docs/eval-result.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PrecisionRecord {
    pub policy: PrecisionPolicy,
    /// The floating dtypes of the task's inputs and outputs.
    pub task_dtypes: Vec<String>,
    /// Per task dtype: [atol, rtol] held to (under the `oracle` rule: an output without
    /// an oracle).
    pub tolerance: std::collections::BTreeMap<String, Vec<f64>>,
    /// `oracle` where outputs are held to the float64 oracle (None: the `dtype`-like rules).
    pub rule: Option<String>,
    /// The `oracle` rule: per task dtype, the allowed multiple of the honest error.
    pub factor: std::collections::BTreeMap<String, f64>,
    /// What the kernel computes in: its source's findings, then its process's.
    pub kernel_math: Vec<MathFinding>,
    /// The kinds of `kernel_math` below the task's precision under the policy.
    pub reduced: Vec<MathKind>,
    /// One sentence on it ("" when there is nothing to say).
    pub statement: String,
    /// The settings of the judge's reference (correctness), and of the kernel's process
    /// once its module was imported and its model built.
    pub reference_settings: Option<TorchPrecision>,
    pub kernel_settings: Option<TorchPrecision>,
    /// Where the findings about Triton code come from (absent in older results).
    pub reading: Option<PrecisionReading>,
}

impl PrecisionRecord {
    /// Whether the kernel computes below what the policy accepts.
    pub fn is_reduced(&self) -> bool {
        !self.reduced.is_empty()
    }

    /// How float32 outputs are held, for a hint: `within 128x the error honest float32
    /// arithmetic makes (against a float64 oracle)` under the `oracle` rule, else `within
    /// 1e-4` (the float32 entry of the table, or the policy's).
    pub fn float32_within(&self) -> String {
        if self.rule.as_deref() == Some("oracle") {
            let factor = self
                .factor
                .get("float32")
                .copied()
                .unwrap_or(ORACLE_FACTOR_FLOAT32);
            return format!(
                "within {factor}x the error honest float32 arithmetic makes (measured against a float64 oracle)"
            );
        }
        let tolerance = self
            .tolerance
            .get("float32")
            .and_then(|t| t.first().copied())
            .unwrap_or_else(|| self.policy.float32_tolerance());
        format!("within {tolerance:e}")
    }

    /// `strict (float32 atol=rtol 1e-4)`: the policy and the tolerance per task dtype; under
    /// the `oracle` rule `strict (float32 within 128x the honest error, float64 oracle)`.
    pub fn headline(&self) -> String {
        if self.rule.as_deref() == Some("oracle") && !self.factor.is_empty() {
            let factors: Vec<String> = self
                .factor
                .iter()
                .map(|(dtype, f)| format!("{dtype} within {f}x the honest error"))
                .collect();
            return format!("{} ({}, float64 oracle)", self.policy, factors.join(", "));
        }
        let tolerances: Vec<String> = self
            .tolerance
            .iter()
            .map(|(dtype, t)| match t.as_slice() {
                [a, r] if a == r => format!("{dtype} atol=rtol {a:e}"),
                [a, r] => format!("{dtype} atol {a:e} rtol {r:e}"),
                _ => dtype.clone(),
            })
            .collect();
        if tolerances.is_empty() {
            self.policy.to_string()
        } else {
            format!("{} ({})", self.policy, tolerances.join(", "))
        }
    }
}

/// The full outcome of one evaluation. Unknown fields from newer harnesses are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalResult {
    pub schema: u32,
    pub id: Option<String>,
    pub status: Status,
    pub correct: bool,
    pub category: Option<Category>,
    /// One line, for lists and the console.
    pub summary: String,
    /// Cleaned error text (last ~150 lines, argument dumps removed): what a repair prompt gets.
    pub message: String,
    /// Category-specific facts: source location, resource limits, mismatching output...
    pub details: serde_json::Value,
    /// Everything the evaluation printed, plus the error (capped at 1 MiB).
    pub log: String,
    pub device: DeviceInfo,
    pub versions: Versions,
    #[serde(rename = "static")]
    pub static_report: StaticReport,
    pub alignment: Option<Alignment>,
    pub trials: Vec<Trial>,
    pub timing: Option<Timing>,
    /// `suspicious_speedup`, `reported_time_disagrees`, `noisy_timing`, `weak_reference`,
    /// `stray_processes`, `zygote_restarted`.
    pub flags: Vec<String>,
    pub notes: Vec<String>,
    pub profile: Option<serde_json::Value>,
    /// Last phase the evaluation reached.
    pub phase: Option<String>,
    /// Seconds from the server receiving the job to its result.
    pub duration_s: f64,
    /// Seconds the evaluation process spent inside the evaluation itself (imports of the
    /// task and kernel, compilation, trials, timing): `duration_s` minus this is overhead.
    pub child_s: f64,
    /// Seconds per phase inside the evaluation process: `startup` (device and CUDA
    /// initialization), `load` (importing task and kernel), `build`, `correctness` (trials,
    /// including the first compile), `timing`, `recheck`.
    pub phases_s: std::collections::BTreeMap<String, f64>,
    /// Seconds of the server around the judge: `worker_start` (waiting for the sandboxed
    /// zygote and forking the kernel's process), `judge` (the judge process, start to
    /// result), `teardown` (ending the judge, the kernel's process and what it started).
    pub server_phases_s: std::collections::BTreeMap<String, f64>,
    /// The sandbox the kernel ran in (None: a result from before sandboxing, or a static
    /// check that ran nothing).
    pub sandbox: Option<SandboxInfo>,
    pub audit: Option<Audit>,
    pub tolerance: Option<ToleranceUsed>,
    /// The precision policy, what the kernel computes in and the reference's settings.
    pub precision: Option<PrecisionRecord>,
    /// Peak device memory in use per phase (bytes, device-wide: the judge, the kernel's
    /// process, lent buffers and CUDA contexts), sampled at the judge's steps. GPU only.
    pub memory: std::collections::BTreeMap<String, u64>,
    /// The evaluation's memory plan: input and output sizes, the planned peak and the
    /// memory free when it began (None: the task never produced inputs).
    pub footprint: Option<Footprint>,
    /// `device` (factories directed to the GPU), `host` (drawn on the CPU and copied) or `cpu`.
    pub inputs_drawn_on: Option<String>,
    /// How timed runs got never-seen input values.
    pub input_refresh: Option<String>,
    /// The task's work, the speed-of-light bound and each side's share of it (issue 25).
    pub speed_of_light: Option<SpeedOfLight>,
    /// On the CPU: the task's sizes shrunk for Triton's interpreter, and to what (None: the
    /// task's own sizes ran). kforge's own, set after the harness answers (issue 38).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_sizes: Option<super::shapes::InterpreterSizes>,
}

impl EvalResult {
    /// The highest device memory in use in any phase (GPU results only).
    pub fn peak_memory_bytes(&self) -> Option<u64> {
        self.memory.values().copied().max()
    }

    /// Whether the failure is the task's, not the kernel's: a broken task file, or a task
    /// whose memory plan does not fit (an `oom` from the judge before any kernel ran).
    pub fn is_task_fault(&self) -> bool {
        match self.category {
            Some(Category::Task) => true,
            Some(Category::Oom) => {
                self.details.get("kernel_loaded") == Some(&serde_json::Value::Bool(false))
            }
            _ => false,
        }
    }

    /// The headline speedup, against the baseline the evaluation chose (`[eval]
    /// baseline`, `timing.baseline`), when timing was measured.
    pub fn score(&self) -> Option<f64> {
        let timing = self.scored_timing()?;
        timing.score_against(timing.headline_baseline()).0
    }

    /// The 95% interval of `score()`: None where `score()` is None, and for results from
    /// before intervals.
    pub fn score_interval(&self) -> Option<(f64, f64)> {
        self.score()?;
        let timing = self.scored_timing()?;
        timing.score_against(timing.headline_baseline()).1
    }

    /// The speedup against `baseline` (eager: KernelBench's figure) with its interval.
    pub fn score_vs(&self, baseline: Baseline) -> (Option<f64>, Option<(f64, f64)>) {
        match self.scored_timing() {
            Some(timing) => timing.score_against(baseline),
            None => (None, None),
        }
    }

    /// What `score()` is against.
    pub fn baseline(&self) -> Baseline {
        self.timing
            .as_ref()
            .map_or(Baseline::Eager, Timing::headline_baseline)
    }

    /// The timing a score may be read from: a correct kernel's meaningful timing. A kernel
    /// that failed any check has no speedup, even when its timed runs finished before the
    /// re-check caught it.
    fn scored_timing(&self) -> Option<&Timing> {
        if !self.correct {
            return None;
        }
        self.timing.as_ref().filter(|t| t.meaningful)
    }

    /// A failed result made on the Rust side (the harness could not produce one).
    pub fn harness_failure(
        id: &str,
        summary: impl Into<String>,
        log: impl Into<String>,
    ) -> EvalResult {
        let summary = summary.into();
        EvalResult {
            schema: 2,
            id: Some(id.to_string()),
            status: Status::Failed,
            category: Some(Category::Harness),
            message: summary.clone(),
            summary,
            log: log.into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_that_does_not_fit_is_the_tasks_fault_and_a_kernel_oom_is_not() {
        let mut r = EvalResult {
            category: Some(Category::Oom),
            details: serde_json::json!({"kernel_loaded": false}),
            ..Default::default()
        };
        assert!(r.is_task_fault());
        r.details = serde_json::json!({"kernel_loaded": true});
        assert!(!r.is_task_fault());
        r.details = serde_json::json!({"requested": 1});
        assert!(!r.is_task_fault(), "the kernel's own oom");
        r.category = Some(Category::Task);
        assert!(r.is_task_fault());
        r.category = Some(Category::Mismatch);
        assert!(!r.is_task_fault());
    }

    #[test]
    fn result_parses_with_missing_and_unknown_fields() {
        let r: EvalResult = serde_json::from_str(
            r#"{"status":"correct","correct":true,"static":{"warnings":[{"rule":"torch_op","message":"m","line":3}]},
                "timing":{"meaningful":true,"reference":{"median_ms":2.0},"kernel":{"median_ms":1.0},"score":2.0},
                "future_field":1}"#,
        )
        .unwrap();
        assert!(r.correct);
        assert_eq!(r.score(), Some(2.0));
        let failed = EvalResult {
            correct: false,
            ..r.clone()
        };
        assert_eq!(failed.score(), None, "no score for a failed kernel");
        assert_eq!(r.static_report.warnings[0].line, Some(3));
    }

    /// The judge-window schema: both sides' intervals, the score's, the environment.
    #[test]
    fn judge_window_timing_parses_with_its_intervals_and_environment() {
        let r: EvalResult = serde_json::from_str(
            r#"{"status":"correct","correct":true,"flags":["noisy_timing"],
                "timing":{"meaningful":true,"method":"judge_window",
                  "reference":{"median_ms":2.46,"ci_low_ms":2.45,"ci_high_ms":2.47,"noisy":false,
                               "window_median_ms":2.76,"null_ms":0.30,"reported_median_ms":2.44,
                               "gate_timeouts":0,"precision_reached":true,"runs":120},
                  "kernel":{"median_ms":2.0,"ci_low_ms":1.9,"ci_high_ms":2.2,"noisy":true,
                            "gate_timeouts":2,"precision_reached":false,"runs":300},
                  "score":1.23,"score_low":1.20,"score_high":1.26,
                  "interval_method":"bootstrap, 2000 resamples of both sides' timed runs, 95% percentile interval",
                  "noisy":true,"reported_score":1.25,
                  "calibration":{"overhead_ms":0.30,"floor_ms":0.299,"spread_ms":0.001,"runs":40},
                  "environment":{"tf32_matmul":false,"tf32_cudnn":true,"float32_matmul_precision":"highest",
                     "sm_clock_mhz":[1980,1755],"mem_clock_mhz":[3201,3201],"max_sm_clock_mhz":1980,
                     "max_mem_clock_mhz":3201,"clocks_locked":null,"throttle_reasons":["sw_thermal"],
                     "driver":"580.159.04","cuda_driver":"13.0","cuda_runtime":"13.0",
                     "torch":"2.11.0","triton":"3.6.0","timing_method":"t","input_refresh":"fresh"}}}"#,
        )
        .unwrap();
        assert_eq!(r.score(), Some(1.23));
        assert_eq!(r.score_interval(), Some((1.20, 1.26)));
        let t = r.timing.as_ref().unwrap();
        assert_eq!(t.method.as_deref(), Some("judge_window"));
        assert!(t.noisy);
        assert_eq!(t.reported_score, Some(1.25));
        assert_eq!(t.reference.interval(), Some((2.45, 2.47)));
        assert_eq!(t.reference.precision_reached, Some(true));
        assert_eq!(t.kernel.gate_timeouts, 2);
        assert!(t.kernel.noisy);
        let env = t.environment.as_ref().unwrap();
        assert_eq!(env.sm_clock_mhz.as_deref(), Some(&[1980.0, 1755.0][..]));
        assert_eq!(env.clocks_locked, None);
        assert_eq!(env.throttle_reasons, ["sw_thermal"]);
        assert_eq!(env.tf32_cudnn, Some(true));
        let failed = EvalResult {
            correct: false,
            ..r.clone()
        };
        assert_eq!(
            failed.score_interval(),
            None,
            "no interval for a failed kernel"
        );
    }

    /// A result written before the judge timed both sides (sessions/ keeps such results):
    /// the old host/event fields are ignored, and there is no interval.
    #[test]
    fn results_from_before_intervals_still_load() {
        let r: EvalResult = serde_json::from_str(
            r#"{"schema":2,"status":"correct","correct":true,"flags":["host_time_disagrees"],
                "timing":{"meaningful":true,
                  "reference":{"median_ms":2.0,"host_median_ms":2.1,"runs":100},
                  "kernel":{"median_ms":1.0,"host_median_ms":1.4,"wall_median_ms":1.7,"checked_runs":[3,50]},
                  "score":1.43,"event_score":2.0,"allowed_gap_ms":0.2,"host_floor_ms":1.3,"event_floor_ms":0.9,
                  "calibration":{"overhead_ms":0.3,"spread_ms":0.01,"runs":40}}}"#,
        )
        .unwrap();
        assert_eq!(r.score(), Some(1.43));
        assert_eq!(r.score_interval(), None);
        let t = r.timing.unwrap();
        assert_eq!(t.kernel.checked_runs, [3, 50]);
        assert_eq!(t.kernel.interval(), None);
        assert_eq!(t.kernel.precision_reached, None);
        assert!(t.environment.is_none() && t.method.is_none());
        // Kept as written: `--json` and a re-saved result pass them through.
        assert_eq!(t.extra["event_score"], 2.0);
        assert_eq!(t.kernel.extra["wall_median_ms"], 1.7);
    }

    /// Timing fields this version does not model survive a round trip through the typed
    /// result: `kforge eval --json` passes the harness's timing through.
    #[test]
    fn unknown_timing_fields_pass_through() {
        let written = serde_json::json!({
            "meaningful": true, "method": "judge_window", "score": 1.2, "future": {"a": 1},
            "reference": {"median_ms": 2.0, "future_ms": 0.5},
            "kernel": {"median_ms": 1.0},
            "calibration": {"overhead_ms": 0.3, "future": true},
            "environment": {"driver": "580", "future": [1, 2]}
        });
        let t: Timing = serde_json::from_value(written).unwrap();
        let back = serde_json::to_value(&t).unwrap();
        assert_eq!(back["future"], serde_json::json!({"a": 1}));
        assert_eq!(back["reference"]["future_ms"], 0.5);
        assert_eq!(back["calibration"]["future"], true);
        assert_eq!(back["environment"]["future"], serde_json::json!([1, 2]));
        assert_eq!(back["method"], "judge_window");
        assert!(back["kernel"].get("future_ms").is_none());
    }

    /// The judge's `timing.rounds` (kbprotocol.round_orders' names) parse into the typed rounds.
    #[test]
    fn timing_rounds_parse_with_their_order() {
        let t: Timing = serde_json::from_str(
            r#"{"meaningful":true,"rounds":[
                {"order":"kforge_first","kforge_ms":2.0,"kernelbench_ms":2.1},
                {"order":"kernelbench_first","kforge_ms":2.2,"kernelbench_ms":2.05}]}"#,
        )
        .unwrap();
        assert_eq!(t.rounds.len(), 2);
        assert_eq!(t.rounds[1].order, RoundOrder::KernelbenchFirst);
        assert_eq!(t.rounds[1].kforge_ms, 2.2);
        let python = crate::eval::harness::PACKAGE
            .iter()
            .find(|(name, _)| *name == "kbprotocol.py")
            .map(|(_, source)| *source)
            .expect("kbprotocol.py is embedded");
        assert!(python.contains(r#"KFORGE_FIRST = "kforge_first""#));
        assert!(python.contains(r#"KERNELBENCH_FIRST = "kernelbench_first""#));
    }

    #[test]
    fn timing_with_and_without_kernelbench_figures_parses() {
        let old: Timing =
            serde_json::from_str(r#"{"meaningful":true,"reference":{"median_ms":2.0}}"#).unwrap();
        assert_eq!(old.kernelbench, None);
        let new: Timing = serde_json::from_str(
            r#"{"meaningful":true,"reference":{"median_ms":2.0},
                "kernelbench":{"median_ms":2.1,"mean_ms":2.2,"std_ms":0.1,"min_ms":2.0,"max_ms":2.9,
                               "runs":100,"warmup":5,"discarded":1,"l2_thrash_bytes":268435456}}"#,
        )
        .unwrap();
        let kb = new.kernelbench.unwrap();
        assert_eq!((kb.median_ms, kb.runs, kb.warmup), (2.1, 100, 5));
        assert_eq!(kb.l2_thrash_bytes, 256 << 20);
    }

    /// What the compiled kernels compute in survives `kforge eval --json` and eval/<id>.json:
    /// the findings' `compiled` and the record's `reading` (issue 34, item 8).
    #[test]
    fn precision_read_from_compiled_code_round_trips() {
        let written = serde_json::json!({
            "policy": "strict", "reduced": ["tf32_dot"],
            "kernel_math": [{"category": "tf32_dot", "line": 24, "text": "tl.dot at line 24 (compiled)",
                             "where": "kernel k", "lowers": true, "dynamic": false, "compiled": true}],
            "reading": {"read": "compiled", "for": "CUDA sm_90", "kernels": ["k"]}
        });
        let p: PrecisionRecord = serde_json::from_value(written).unwrap();
        assert!(p.kernel_math[0].compiled);
        let reading = p.reading.clone().unwrap();
        assert_eq!(
            (reading.read.as_str(), reading.kernels.len()),
            ("compiled", 1)
        );
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["reading"]["for"], "CUDA sm_90");
        assert_eq!(back["kernel_math"][0]["compiled"], true);
        let older: PrecisionRecord =
            serde_json::from_value(serde_json::json!({"policy": "strict"})).unwrap();
        assert!(older.reading.is_none());
    }

    #[test]
    fn interpreter_sizes_round_trip_and_are_absent_when_the_task_sizes_ran() {
        let written = serde_json::json!({
            "status": "correct", "correct": true, "summary": "ok",
            "interpreter_sizes": {"task": {"batch_size": 4096, "dim": 5120},
                                  "evaluated": {"batch_size": 512, "dim": 1024},
                                  "budget": 1048576}
        });
        let r: EvalResult = serde_json::from_value(written).unwrap();
        let sizes = r.interpreter_sizes.clone().expect("read");
        assert_eq!(sizes.evaluated["dim"], 1024);
        assert_eq!(
            sizes.changes_text(),
            "batch_size 4096 -> 512, dim 5120 -> 1024"
        );
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["interpreter_sizes"]["task"]["batch_size"], 4096);
        assert_eq!(back["interpreter_sizes"]["budget"], 1048576);
        let older: EvalResult =
            serde_json::from_value(serde_json::json!({"status": "correct"})).unwrap();
        assert!(older.interpreter_sizes.is_none());
        let json = serde_json::to_value(&older).unwrap();
        assert!(json.get("interpreter_sizes").is_none(), "{json}");
    }
}
