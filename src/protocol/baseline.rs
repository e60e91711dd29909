//! Baselines: what a kernel's speedup is measured against. The eager reference is always
//! timed; on a GPU the reference under `torch.compile` is timed too (`[eval]
//! compile_baseline`), and `[eval] baseline` says which of the two the headline score
//! (selection, the pipeline's gates, budgets, fast_p) is against. Shared by the evaluator,
//! the engine, the TUI, reports and batch summaries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What `[eval] baseline` asks the headline score to be against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaselineChoice {
    /// Eager PyTorch, as KernelBench scores.
    Eager,
    /// The reference under `torch.compile` (eager where it cannot compile).
    Compile,
    /// The faster of the two, per task (torch.compile only where its speedup's interval
    /// clears 1: a tie stays eager): a win must beat what PyTorch already offers.
    #[default]
    Best,
}

impl BaselineChoice {
    pub fn as_str(&self) -> &'static str {
        match self {
            BaselineChoice::Eager => "eager",
            BaselineChoice::Compile => "compile",
            BaselineChoice::Best => "best",
        }
    }
}

impl fmt::Display for BaselineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The baseline an evaluation's headline score is against (what `BaselineChoice` resolved
/// to for the task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Baseline {
    Eager,
    Compile,
}

impl Baseline {
    pub fn as_str(&self) -> &'static str {
        match self {
            Baseline::Eager => "eager",
            Baseline::Compile => "compile",
        }
    }

    /// How a figure names it: `vs eager`, `vs torch.compile`.
    pub fn label(&self) -> &'static str {
        match self {
            Baseline::Eager => "vs eager",
            Baseline::Compile => "vs torch.compile",
        }
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an evaluation's torch.compile figure may come from (the job's `compile_source`;
/// baselines.py's `COMPILE_SOURCES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompileSource {
    /// The cache, else measured now (every evaluation but one-shot `kforge eval`'s first).
    #[default]
    CacheOrMeasure,
    /// The cache only: without a cached figure the evaluation leaves it out and says so
    /// (`Timing::compile_deferred`); `kforge eval` on a GPU measures it after the verdict.
    CacheOnly,
}

/// A torch.compile figure left out of an evaluation for after its verdict (the timing's
/// `compile_deferred`; baselines.py's `DEFERRALS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompileDeferral {
    /// Not cached, so left out: measured after the verdict, the headline against eager
    /// until then (what the judge writes).
    Pending,
    /// Measured after the verdict, and the timing scored against it since (`compile`,
    /// `score_vs_compile*`, `baseline` are the figure's).
    AfterVerdict,
    /// The measurement after the verdict failed or was interrupted: the verdict stands
    /// against eager (kforge writes it; the reason is said beside the result).
    Failed,
}

impl CompileDeferral {
    pub fn as_str(&self) -> &'static str {
        match self {
            CompileDeferral::Pending => "pending",
            CompileDeferral::AfterVerdict => "after_verdict",
            CompileDeferral::Failed => "failed",
        }
    }
}

/// What `kforge eval --json` adds to its document (as `compile_after_verdict`) where the
/// verdict deferred its torch.compile figure: whether it came after, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileAfterVerdict {
    /// `after_verdict` (the document's timing is re-scored against it) or `failed`.
    pub outcome: CompileDeferral,
    /// Seconds from the verdict in hand to the end of the measurement after it: a wall to
    /// the verdict is the command's wall less these.
    pub after_verdict_s: f64,
    /// Why there is no figure (`failed`: the measurement's error, or it was interrupted).
    pub why: Option<String>,
}

/// `torch.compile`'s `mode` for the compile baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompileMode {
    #[default]
    Default,
    ReduceOverhead,
    MaxAutotune,
    MaxAutotuneNoCudagraphs,
}

impl CompileMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            CompileMode::Default => "default",
            CompileMode::ReduceOverhead => "reduce-overhead",
            CompileMode::MaxAutotune => "max-autotune",
            CompileMode::MaxAutotuneNoCudagraphs => "max-autotune-no-cudagraphs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_harness_and_the_config() {
        // baselines.py's CHOICES and MODES spell them so.
        let choices: Vec<String> = [
            BaselineChoice::Eager,
            BaselineChoice::Compile,
            BaselineChoice::Best,
        ]
        .iter()
        .map(|c| {
            serde_json::to_value(c)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
        assert_eq!(choices, ["eager", "compile", "best"]);
        for mode in [
            CompileMode::Default,
            CompileMode::ReduceOverhead,
            CompileMode::MaxAutotune,
            CompileMode::MaxAutotuneNoCudagraphs,
        ] {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
        }
        let harness = include_str!("../eval/harness/kforge_harness/baselines.py");
        assert!(harness.contains(
            "MODES = (\"default\", \"reduce-overhead\", \"max-autotune\", \"max-autotune-no-cudagraphs\")"
        ));
        assert!(harness.contains("CHOICES = (\"eager\", \"compile\", \"best\")"));
        let sources: Vec<_> = [CompileSource::CacheOrMeasure, CompileSource::CacheOnly]
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        assert_eq!(sources, ["cache_or_measure", "cache_only"]);
        assert!(harness.contains(
            "CACHE_OR_MEASURE, CACHE_ONLY = COMPILE_SOURCES = (\"cache_or_measure\", \"cache_only\")"
        ));
        let deferrals = [
            CompileDeferral::Pending,
            CompileDeferral::AfterVerdict,
            CompileDeferral::Failed,
        ];
        for d in deferrals {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
        assert!(harness.contains(
            "PENDING, AFTER_VERDICT, FAILED = DEFERRALS = (\"pending\", \"after_verdict\", \"failed\")"
        ));
        assert_eq!(BaselineChoice::default(), BaselineChoice::Best);
    }
}
