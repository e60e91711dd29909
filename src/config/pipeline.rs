//! `[pipeline]`: every count, threshold and stage list of the hybrid pipeline, with the
//! defaults of docs/architecture.md, Pipeline.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::protocol::Mode;

/// Which runnable seeds get an algorithm analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum AnalyzeWhen {
    /// Every correct seed.
    #[default]
    All,
    /// Only seeds slower than the reference (score < 1.0; every seed without timing).
    Slow,
}

/// Whether a stage's kernel replaces the base it was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Accept {
    /// Only when it is correct and faster (regression protection).
    #[default]
    Improve,
    /// Whenever it is correct (greedy chaining, as the original pipeline did).
    Any,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    pub mode: Mode,
    /// Independent first generations, run concurrently.
    pub seeds: u32,
    /// Repair attempts for a failing seed.
    pub seed_repairs: u32,
    /// Repair attempts for a failing algorithm-optimized kernel.
    pub algorithm_repairs: u32,
    /// Repair attempts for a failing stage kernel.
    pub stage_repairs: u32,
    /// Repair attempts for a best (or final) kernel that is correct on the task's sizes and
    /// wrong on unseen ones (`[eval] shape_check`); each repaired kernel is checked again.
    pub shape_repairs: u32,
    /// Run the calls that only chase speed (algorithm analysis, optimization from it, the
    /// tuning stages) on the CPU too. Off by default: on the CPU nothing is timed, so they
    /// cannot beat the first correct kernel and are skipped, with a console line saying so.
    pub speed_calls_on_cpu: bool,
    pub analyze: AnalyzeWhen,
    /// Tuning stages, in order, applied to the best kernel.
    pub stages: Vec<String>,
    pub accept: Accept,
    /// LLM calls in flight at once.
    pub max_concurrent_calls: u32,
    /// Output token limit per LLM call (the provider's own default when absent).
    pub max_output_tokens: Option<u32>,
    /// Budgets: the run stops cleanly, everything saved, when one is reached.
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_wall_s: Option<f64>,
    /// How often a failed LLM call (after the client's own retries) is asked again by
    /// the pipeline before its step gives up.
    pub call_reasks: u32,
    /// Seconds to wait before asking a failed call again.
    pub reask_delay_s: f64,
    /// Collect Nsight Compute metrics for correct kernels (GPU only); they feed the
    /// analysis and stage prompts.
    pub profile: bool,
    /// Where sessions are created (default `./sessions`).
    pub sessions_dir: Option<PathBuf>,
}

pub const DEFAULT_STAGES: [&str; 3] = ["grid_and_parallel", "block_tiling", "memory_and_tuning"];

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            mode: Mode::Auto,
            seeds: 2,
            seed_repairs: 4,
            algorithm_repairs: 3,
            stage_repairs: 1,
            shape_repairs: 2,
            speed_calls_on_cpu: false,
            analyze: AnalyzeWhen::All,
            stages: DEFAULT_STAGES.iter().map(|s| s.to_string()).collect(),
            accept: Accept::Improve,
            max_concurrent_calls: 4,
            max_output_tokens: None,
            max_tokens: None,
            max_cost_usd: None,
            max_wall_s: None,
            call_reasks: 1,
            reask_delay_s: 10.0,
            profile: false,
            sessions_dir: None,
        }
    }
}

impl PipelineConfig {
    pub fn sessions_dir(&self) -> PathBuf {
        self.sessions_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("sessions"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_design_numbers() {
        let p = PipelineConfig::default();
        assert_eq!(
            (
                p.seeds,
                p.seed_repairs,
                p.algorithm_repairs,
                p.stage_repairs
            ),
            (2, 4, 3, 1)
        );
        assert_eq!(
            p.stages,
            vec!["grid_and_parallel", "block_tiling", "memory_and_tuning"]
        );
        assert_eq!(p.accept, Accept::Improve);
    }

    #[test]
    fn parses_from_toml() {
        let p: PipelineConfig = toml::from_str(
            "seeds = 3\naccept = \"any\"\nstages = [\"block_tiling\"]\nmode = \"review\"\n",
        )
        .unwrap();
        assert_eq!(p.seeds, 3);
        assert_eq!(p.accept, Accept::Any);
        assert_eq!(p.mode, Mode::Review);
        assert_eq!(p.stages, vec!["block_tiling"]);
        assert!(toml::from_str::<PipelineConfig>("seedz = 3").is_err());
    }
}
