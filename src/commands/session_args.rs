//! The session options `run` and `batch` share: who answers and what the pipeline does
//! (`PlanArgs`), the budgets (`BudgetArgs`), the evaluator's options (`EvalFlags`), and the
//! check that every stage has its template.

use anyhow::{Result, bail};

use crate::config::EvalConfig;
use crate::config::pipeline::{Accept, AnalyzeWhen, PipelineConfig};
use crate::launch::options::{CheckArgs, DeviceSetArgs};
use crate::protocol::Mode;

/// Who answers and what the pipeline does: `run` and `batch` share these.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct PlanArgs {
    /// LLM provider (a preset, a configured name, or `manual` to answer prompts yourself).
    #[arg(long)]
    pub provider: Option<String>,
    /// Model name (default: the provider's configured model).
    #[arg(long)]
    pub model: Option<String>,
    /// auto: never stops; review: stops before algorithm optimization, stages and the
    /// final best; step: stops before every LLM call and evaluation.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Number of independent seed kernels.
    #[arg(long)]
    pub seeds: Option<u32>,
    /// Tuning stages, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',')]
    pub stages: Option<Vec<String>>,
    /// When a stage's kernel replaces its base.
    #[arg(long, value_enum)]
    pub accept: Option<Accept>,
    /// Which correct seeds get an algorithm analysis.
    #[arg(long, value_enum)]
    pub analyze: Option<AnalyzeWhen>,
    /// On the CPU, run the calls that only chase speed (analysis, optimization, stages)
    /// anyway; by default they are skipped there, where nothing is timed.
    #[arg(long)]
    pub speed_calls_on_cpu: bool,
}

/// The session's budgets, for `run` and for `resume` (where they replace those the session
/// was started with: a run stopped by its budget goes on with a larger one).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct BudgetArgs {
    /// Session budget: stop cleanly after this many tokens, input + output, over all calls
    /// of the session (earlier runs included).
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Session budget: stop cleanly after this cost in USD (the whole session).
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// Stop cleanly after this many seconds (counted from the start of this process).
    #[arg(long, value_name = "SECONDS")]
    pub max_wall: Option<f64>,
}

impl BudgetArgs {
    /// Puts the budgets given over `pipeline`'s; whether any was given.
    pub fn apply(&self, pipeline: &mut PipelineConfig) -> bool {
        pipeline.max_tokens = self.max_tokens.or(pipeline.max_tokens);
        pipeline.max_cost_usd = self.max_cost.or(pipeline.max_cost_usd);
        pipeline.max_wall_s = self.max_wall.or(pipeline.max_wall_s);
        self.max_tokens.is_some() || self.max_cost.is_some() || self.max_wall.is_some()
    }
}

/// The evaluator's options for a session.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct EvalFlags {
    #[command(flatten)]
    pub devices: DeviceSetArgs,
    #[command(flatten)]
    pub check: CheckArgs,
    /// Collect Nsight Compute metrics for correct kernels (GPU).
    #[arg(long)]
    pub profile: bool,
}

impl EvalFlags {
    pub fn apply(&self, eval: &mut EvalConfig, pipeline: &mut PipelineConfig) {
        self.check.apply(eval);
        if self.profile {
            pipeline.profile = true;
        }
    }
}

impl PlanArgs {
    /// Puts the mode, seeds, stages and choices given over `pipeline`'s.
    pub fn apply(&self, pipeline: &mut PipelineConfig) {
        if let Some(m) = self.mode {
            pipeline.mode = m;
        }
        if let Some(n) = self.seeds {
            pipeline.seeds = n;
        }
        if let Some(s) = &self.stages {
            pipeline.stages = s
                .iter()
                .filter(|x| !x.trim().is_empty())
                .map(|x| x.trim().to_string())
                .collect();
        }
        if let Some(a) = self.accept {
            pipeline.accept = a;
        }
        if let Some(a) = self.analyze {
            pipeline.analyze = a;
        }
        if self.speed_calls_on_cpu {
            pipeline.speed_calls_on_cpu = true;
        }
    }
}

/// Every stage needs its prompt template.
pub fn check_stages(pipeline: &PipelineConfig) -> Result<()> {
    for stage in &pipeline.stages {
        if crate::prompts::TemplateName::stage(stage).is_none() {
            bail!(
                "unknown stage `{stage}`: the stages are {}",
                crate::config::pipeline::DEFAULT_STAGES.join(", ")
            );
        }
    }
    Ok(())
}
