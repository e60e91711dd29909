//! Speed of light (issue 25): the least time a task's forward can take on the device, from
//! the work the judge counted on the reference (FLOPs by dtype, bytes moved) against the
//! device's measured peaks; each side's share of it, and the `faster_than_light` flag of a
//! kernel whose timing beats it. The harness decides (`kforge_harness/sol.py`,
//! `peaks.py`); this module holds the result's types and their words. Field by field in
//! docs/eval-result.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The flag of a kernel whose median beats the bound (above 100% of the speed of light): not
/// taken as the session's best unless the person marks it final.
pub const FASTER_THAN_LIGHT: &str = "faster_than_light";

/// `speed_of_light` in an evaluation's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SpeedOfLight {
    /// The reference forward's work (None: it could not be counted; `reason` says why).
    pub counts: Option<WorkCounts>,
    /// The device's measured peaks (None on the CPU; `error` inside when the measurement failed).
    pub peaks: Option<DevicePeaks>,
    /// The lower bound on the forward's time at the precision the policy accepts:
    /// max(compute time, memory time). None on the CPU, without peaks, or untimed (`reason`).
    pub bound_ms: Option<f64>,
    /// The larger of the GEMMs' time (each at its fastest accepted math) and the elementwise
    /// work's on the CUDA cores (`gemm_ms`, `elementwise_ms` in `extra`).
    pub compute_ms: Option<f64>,
    /// The bytes certain to cross DRAM, at the measured bandwidth.
    pub memory_ms: Option<f64>,
    /// The bound the flag was decided against: `bound_ms` (results before issue 35 had a
    /// separate strict bound here).
    pub strict_bound_ms: Option<f64>,
    /// Which of the two times is the bound.
    pub limit: Option<Limit>,
    /// bound / median, in percent: how close each side runs to the speed of light.
    pub reference_pct: Option<f64>,
    pub kernel_pct: Option<f64>,
    /// The kernel's median beats the bound.
    pub faster_than_light: bool,
    /// Dtypes whose FLOPs have no measured peak (left out of the compute time).
    pub unbounded_dtypes: Vec<String>,
    /// Why there is no bound.
    pub reason: Option<String>,
    /// Fields this version does not know, passed through.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The bytes at the DRAM bandwidth take longer than the FLOPs at the peaks.
    Memory,
    Compute,
}

impl Limit {
    pub fn word(self) -> &'static str {
        match self {
            Limit::Memory => "memory-bound",
            Limit::Compute => "compute-bound",
        }
    }
}

/// The reference forward's work, device-independent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WorkCounts {
    pub flops: Vec<FlopCount>,
    pub total_flops: u64,
    pub bytes: BytesMoved,
    pub total_bytes: u64,
    pub method: Option<String>,
    /// Operators whose FLOP formula failed (their FLOPs are not counted).
    pub uncounted: Vec<String>,
}

/// FLOPs of one dtype and family (`matmul`, `convolution`: they run under different TF32
/// switches).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FlopCount {
    pub dtype: String,
    pub family: String,
    pub flops: u64,
}

/// The least bytes the forward moves: what it reads of its inputs and of the parameters and
/// buffers, and the outputs it writes, each storage once.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BytesMoved {
    pub inputs: u64,
    pub parameters: u64,
    pub outputs: u64,
}

/// The device's peaks, measured by the harness's micro-benchmark and cached per device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DevicePeaks {
    pub dram_bytes_per_s: Option<f64>,
    /// FLOP/s per math: `fp32` (TF32 off), `tf32`, `fp16`, `bf16`.
    pub matmul_flops_per_s: BTreeMap<String, f64>,
    pub method: Option<String>,
    /// Read from the cache instead of measured for this evaluation.
    pub cached: Option<bool>,
    pub gpu: Option<String>,
    pub driver: Option<String>,
    pub torch: Option<String>,
    /// Seconds the measurement took.
    pub measure_s: Option<f64>,
    /// Why there are no peaks (the measurement failed).
    pub error: Option<String>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl DevicePeaks {
    /// `DRAM 3.02 TB/s · fp32 51 · tf32 378 · fp16 702 · bf16 712 TFLOP/s`, or the error.
    pub fn describe(&self) -> String {
        if let Some(error) = &self.error {
            return error.clone();
        }
        let mut parts = Vec::new();
        if let Some(bw) = self.dram_bytes_per_s {
            parts.push(format!("DRAM {:.2} TB/s", bw / 1e12));
        }
        let maths: Vec<String> = ["fp32", "tf32", "fp16", "bf16"]
            .iter()
            .filter_map(|m| {
                self.matmul_flops_per_s
                    .get(*m)
                    .map(|v| format!("{m} {:.0}", v / 1e12))
            })
            .collect();
        if !maths.is_empty() {
            parts.push(format!("{} TFLOP/s", maths.join(" · ")));
        }
        parts.join(" · ")
    }
}

impl SpeedOfLight {
    /// Whether the kernel is shown beyond the speed of light: flagged, or (a result from
    /// before every percentage above 100 was flagged) above 100%.
    pub fn beyond_light(&self) -> bool {
        self.faster_than_light || self.kernel_pct.is_some_and(|p| p > 100.0)
    }

    /// Whether no arithmetic was counted, so that the bound is the memory time alone.
    pub fn memory_only(&self) -> bool {
        self.extra
            .get("memory_only")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or_else(|| self.counts.as_ref().is_some_and(|c| c.flops.is_empty()))
    }

    /// The eval tab's and the gate's line: `speed of light 0.0123 ms (memory-bound): the
    /// reference at 12%, this kernel at 40%`; or why there is none.
    pub fn describe(&self) -> String {
        let Some(bound) = self.bound_ms else {
            let work = self.counts.as_ref().map(WorkCounts::describe);
            return match (work, &self.reason) {
                (Some(w), Some(r)) => format!("work {w}; no bound: {r}"),
                (Some(w), None) => format!("work {w}; no bound"),
                (None, Some(r)) => format!("not counted: {r}"),
                (None, None) => "not counted".into(),
            };
        };
        let limit = match self.limit {
            Some(l) if self.memory_only() => format!(" ({}; no arithmetic counted)", l.word()),
            Some(l) => format!(" ({})", l.word()),
            None => String::new(),
        };
        let mut text = format!("speed of light {bound:.4} ms{limit}");
        let sides: Vec<String> = [
            ("the reference", self.reference_pct),
            ("this kernel", self.kernel_pct),
        ]
        .iter()
        .filter_map(|(who, pct)| pct.map(|p| format!("{who} at {p:.0}%")))
        .collect();
        if !sides.is_empty() {
            text.push_str(": ");
            text.push_str(&sides.join(", "));
        }
        if self.beyond_light() {
            text.push_str(" — FASTER THAN LIGHT: it skips work the reference does, or its timing is not what it runs");
        }
        text
    }

    /// For the analysis prompt: `the reference is at 12% of the memory-bound limit; this
    /// kernel is at 40%` (None without a bound).
    pub fn prompt_line(&self) -> Option<String> {
        self.bound_ms?;
        let limit = self.limit.map_or("speed-of-light", |l| l.word());
        let mut parts = Vec::new();
        if let Some(r) = self.reference_pct {
            parts.push(format!("the reference is at {r:.0}% of the {limit} limit"));
        }
        if let Some(k) = self.kernel_pct {
            parts.push(if parts.is_empty() {
                format!("this kernel is at {k:.0}% of the {limit} limit")
            } else {
                format!("this kernel is at {k:.0}%")
            });
        }
        if parts.is_empty() {
            return None;
        }
        Some(format!(
            "{} (100% = {:.4} ms, the least time the device's measured peaks allow for the task's FLOPs and bytes)",
            parts.join("; "),
            self.bound_ms?
        ))
    }
}

impl WorkCounts {
    /// `2.15 GFLOP (float32 matmul) + 4.2 MFLOP (float32 elementwise), 12.6 MB`; `no
    /// arithmetic counted (memory only)` where there is none.
    pub fn describe(&self) -> String {
        let flops = if self.flops.is_empty() {
            "no arithmetic counted (memory only)".to_string()
        } else {
            self.flops
                .iter()
                .map(|f| format!("{} ({} {})", si(f.flops as f64, "FLOP"), f.dtype, f.family))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        format!("{flops}, {}", si(self.total_bytes as f64, "B"))
    }
}

fn si(value: f64, unit: &str) -> String {
    let (v, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(scale, _)| value >= *scale)
        .map_or((value, ""), |(scale, p)| (value / scale, *p));
    format!("{v:.3} {prefix}{unit}")
}

/// The tree's and the summaries' suffix beside a score: ` 40%SoL`, ` FTL` for a kernel
/// flagged faster than light or above 100% (never a percentage above 100 unflagged), or
/// nothing.
pub fn pct_suffix(pct: Option<f64>, faster_than_light: bool) -> String {
    if faster_than_light || pct.is_some_and(|p| p > 100.0) {
        " FTL".into()
    } else {
        pct.map(|p| format!(" {p:.0}%SoL")).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = r#"{"counts": {"flops": [{"dtype": "float32", "family": "matmul", "flops": 2147483648}],
        "total_flops": 2147483648, "bytes": {"inputs": 8388608, "parameters": 0, "outputs": 4194304},
        "total_bytes": 12582912, "method": "m"},
      "peaks": {"dram_bytes_per_s": 3.0e12, "matmul_flops_per_s": {"fp32": 5.1e13, "tf32": 3.78e14,
        "fp16": 7.02e14, "bf16": 7.12e14}, "cached": true, "key": "abc"},
      "bound_ms": 0.0421, "compute_ms": 0.0421, "memory_ms": 0.0042, "strict_bound_ms": 0.0057,
      "limit": "compute", "reference_pct": 12.3, "kernel_pct": 40.4, "faster_than_light": false,
      "unbounded_dtypes": [], "reason": null}"#;

    #[test]
    fn a_gpu_record_reads_with_its_peaks_and_words() {
        let s: SpeedOfLight = serde_json::from_str(GPU).unwrap();
        assert_eq!(s.limit, Some(Limit::Compute));
        assert_eq!(s.counts.as_ref().unwrap().bytes.outputs, 4194304);
        let peaks = s.peaks.as_ref().unwrap();
        assert_eq!(peaks.extra.get("key"), Some(&serde_json::json!("abc")));
        assert_eq!(
            peaks.describe(),
            "DRAM 3.00 TB/s · fp32 51 · tf32 378 · fp16 702 · bf16 712 TFLOP/s"
        );
        assert_eq!(
            s.describe(),
            "speed of light 0.0421 ms (compute-bound): the reference at 12%, this kernel at 40%"
        );
        assert_eq!(
            s.prompt_line().unwrap(),
            "the reference is at 12% of the compute-bound limit; this kernel is at 40% (100% = 0.0421 ms, \
             the least time the device's measured peaks allow for the task's FLOPs and bytes)"
        );
    }

    #[test]
    fn a_cpu_record_has_the_counts_and_says_why_there_is_no_bound() {
        let s: SpeedOfLight = serde_json::from_str(
            r#"{"counts": {"flops": [], "total_flops": 0, "bytes": {"inputs": 65536, "parameters": 0,
                "outputs": 65536}, "total_bytes": 131072}, "peaks": null, "bound_ms": null,
                "faster_than_light": false, "reason": "no GPU: the work is counted"}"#,
        )
        .unwrap();
        assert_eq!(s.bound_ms, None);
        assert_eq!(s.prompt_line(), None);
        assert_eq!(
            s.describe(),
            "work no arithmetic counted (memory only), 131.072 kB; no bound: no GPU: the work is counted"
        );
        let missing: SpeedOfLight = serde_json::from_str("{}").unwrap();
        assert_eq!(missing.describe(), "not counted");
    }

    #[test]
    fn the_suffix_beside_a_score() {
        assert_eq!(pct_suffix(Some(40.4), false), " 40%SoL");
        assert_eq!(pct_suffix(Some(140.0), true), " FTL");
        assert_eq!(pct_suffix(None, false), "");
        // Issue 35: 128-145% were shown unflagged; above 100 is never a plain percentage.
        assert_eq!(pct_suffix(Some(128.0), false), " FTL");
        assert_eq!(pct_suffix(Some(100.0), false), " 100%SoL");
    }

    #[test]
    fn a_percentage_above_100_reads_as_faster_than_light_even_unflagged() {
        let mut s: SpeedOfLight = serde_json::from_str(GPU).unwrap();
        s.kernel_pct = Some(145.0);
        assert!(s.beyond_light());
        assert!(
            s.describe().contains("FASTER THAN LIGHT"),
            "{}",
            s.describe()
        );
    }

    #[test]
    fn a_faster_than_light_kernel_says_so() {
        let mut s: SpeedOfLight = serde_json::from_str(GPU).unwrap();
        s.faster_than_light = true;
        assert!(s.describe().ends_with(
            "FASTER THAN LIGHT: it skips work the reference does, or its timing is not what it runs"
        ));
    }
}
