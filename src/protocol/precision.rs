//! Precision: the policy a person chooses (`[eval] precision`) and the kinds of math the
//! harness finds a kernel computing in (`precision.py`), shared by the evaluator, the
//! prompts, the TUI, reports and batch summaries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What precision a kernel must keep, applied to the reference too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionPolicy {
    /// The task's own dtype: TF32 off on both sides (float32 stays float32).
    #[default]
    Strict,
    /// TF32 allowed: the reference runs its float32 matmuls and convolutions in TF32 too,
    /// and float32 outputs get TF32's tolerance.
    Tf32,
    /// PyTorch's defaults for the reference (TF32 off for matmuls, on for cuDNN
    /// convolutions), as KernelBench runs it; tolerances as `strict`.
    Pytorch,
}

impl PrecisionPolicy {
    pub const ALL: [PrecisionPolicy; 3] = [
        PrecisionPolicy::Strict,
        PrecisionPolicy::Tf32,
        PrecisionPolicy::Pytorch,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            PrecisionPolicy::Strict => "strict",
            PrecisionPolicy::Tf32 => "tf32",
            PrecisionPolicy::Pytorch => "pytorch",
        }
    }

    /// The float32 tolerance (atol = rtol) of the harness's table under this policy.
    pub fn float32_tolerance(&self) -> f64 {
        match self {
            PrecisionPolicy::Tf32 => 1e-2,
            PrecisionPolicy::Strict | PrecisionPolicy::Pytorch => 1e-4,
        }
    }

    /// Whether TF32 math on float32 data is accepted.
    pub fn allows_tf32(&self) -> bool {
        matches!(self, PrecisionPolicy::Tf32)
    }

    /// What the two sides compute in, for figures: `fp32 vs fp32`, `TF32 vs TF32`, ...
    pub fn comparison(&self) -> &'static str {
        match self {
            PrecisionPolicy::Strict => "fp32 vs fp32",
            PrecisionPolicy::Tf32 => "TF32 vs TF32",
            PrecisionPolicy::Pytorch => "PyTorch defaults",
        }
    }

    pub fn parse(s: &str) -> Option<PrecisionPolicy> {
        PrecisionPolicy::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for PrecisionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind of math the harness found in a kernel (`precision.py`'s categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MathKind {
    /// `tl.dot` (or `@`) at TF32 on float32 operands: no or `"tf32"` input precision.
    Tf32Dot,
    /// `tl.dot(..., input_precision="tf32x3")`: close to float32.
    Tf32x3Dot,
    /// `tl.dot(..., input_precision="ieee")`: full float32.
    IeeeDot,
    /// An input precision the static scan cannot read.
    DotPrecisionUnknown,
    /// A cast of data to float16, bfloat16 or float8.
    LowPrecisionCast,
    /// A half-precision accumulator (`tl.zeros(dtype=tl.float16)`, `out_dtype`).
    LowPrecisionAccumulator,
    /// TF32 switched on for PyTorch (`allow_tf32 = True`, `set_float32_matmul_precision`).
    Tf32Enabled,
    /// `torch.autocast`.
    Autocast,
    /// A kind from a newer harness.
    #[serde(other)]
    Other,
}

impl MathKind {
    /// Whether this math is below float32 on float32 data.
    pub fn lowers(&self) -> bool {
        matches!(
            self,
            MathKind::Tf32Dot
                | MathKind::LowPrecisionCast
                | MathKind::LowPrecisionAccumulator
                | MathKind::Tf32Enabled
                | MathKind::Autocast
        )
    }

    /// Short words for tables: `TF32 dot`, `half cast`...
    pub fn label(&self) -> &'static str {
        match self {
            MathKind::Tf32Dot => "TF32 dot",
            MathKind::Tf32x3Dot => "TF32x3 dot",
            MathKind::IeeeDot => "fp32 dot",
            MathKind::DotPrecisionUnknown => "dot precision unknown",
            MathKind::LowPrecisionCast => "half cast",
            MathKind::LowPrecisionAccumulator => "half accumulator",
            MathKind::Tf32Enabled => "TF32 switched on",
            MathKind::Autocast => "autocast",
            MathKind::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip_and_default_is_strict() {
        for p in PrecisionPolicy::ALL {
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json, serde_json::Value::String(p.as_str().into()));
            assert_eq!(PrecisionPolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(PrecisionPolicy::default(), PrecisionPolicy::Strict);
        assert_eq!(PrecisionPolicy::Strict.float32_tolerance(), 1e-4);
        assert_eq!(PrecisionPolicy::Tf32.float32_tolerance(), 1e-2);
        assert_eq!(PrecisionPolicy::Tf32.comparison(), "TF32 vs TF32");
        assert!(PrecisionPolicy::parse("bf16").is_none());
    }

    #[test]
    fn math_kinds_are_the_harness_categories() {
        for (name, kind) in [
            ("tf32_dot", MathKind::Tf32Dot),
            ("tf32x3_dot", MathKind::Tf32x3Dot),
            ("ieee_dot", MathKind::IeeeDot),
            ("dot_precision_unknown", MathKind::DotPrecisionUnknown),
            ("low_precision_cast", MathKind::LowPrecisionCast),
            (
                "low_precision_accumulator",
                MathKind::LowPrecisionAccumulator,
            ),
            ("tf32_enabled", MathKind::Tf32Enabled),
            ("autocast", MathKind::Autocast),
        ] {
            let parsed: MathKind = serde_json::from_value(name.into()).unwrap();
            assert_eq!(parsed, kind);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
        let newer: MathKind = serde_json::from_value("fp8_dot".into()).unwrap();
        assert_eq!(newer, MathKind::Other);
        assert!(MathKind::Tf32Dot.lowers() && !MathKind::Tf32x3Dot.lowers());
        assert!(!MathKind::IeeeDot.lowers());
    }
}
