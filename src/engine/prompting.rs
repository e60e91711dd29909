//! What the engine knows at each step, gathered for the prompt templates.

use serde::Serialize;

use super::events::CallKind;
use crate::eval::EvalResult;
use crate::prompts::{
    AttemptFailure, Failure, PromptContext, PromptSet, TemplateName, TimingInfo, excerpt,
    metrics_from_profile,
};
use crate::task::TaskFile;

/// An earlier attempt's own failure, for the repair prompt's history.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub attempt: u32,
    pub category: String,
    pub summary: String,
    /// The first lines of its cleaned error.
    pub excerpt: String,
}

impl Attempt {
    pub fn from_result(attempt: u32, result: &EvalResult) -> Attempt {
        let excerpt: Vec<&str> = result.message.lines().rev().take(12).collect();
        Attempt {
            attempt,
            category: result
                .category
                .map(|c| c.to_string())
                .unwrap_or_else(|| "failed".into()),
            summary: result.summary.clone(),
            excerpt: excerpt.into_iter().rev().collect::<Vec<_>>().join("\n"),
        }
    }
}

/// The failure being repaired.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorInfo {
    pub category: String,
    pub summary: String,
    /// Cleaned error text (last ~150 lines, argument dumps removed).
    pub message: String,
}

impl ErrorInfo {
    pub fn from_result(result: &EvalResult) -> ErrorInfo {
        ErrorInfo {
            category: result
                .category
                .map(|c| c.to_string())
                .unwrap_or_else(|| "failed".into()),
            summary: result.summary.clone(),
            message: result.message.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StepContext {
    pub kind: CallKind,
    pub task_name: String,
    pub task_source: String,
    pub timing_meaningful: bool,
    pub kernel: Option<String>,
    pub error: Option<ErrorInfo>,
    pub history: Vec<Attempt>,
    pub hints: Vec<String>,
    pub kernel_ms: Option<f64>,
    pub reference_ms: Option<f64>,
    pub score: Option<f64>,
    pub metrics: Option<serde_json::Value>,
    pub analysis: Option<serde_json::Value>,
    pub stage: Option<String>,
    pub instruction: Option<String>,
    /// `repair` or `optimize`, for instructed calls.
    pub instruction_mode: Option<String>,
    /// The GPU, in words, when there is one.
    pub device: Option<String>,
}

impl StepContext {
    pub fn new(kind: CallKind, task: &TaskFile, timing_meaningful: bool) -> StepContext {
        StepContext {
            kind,
            task_name: task.name.clone(),
            task_source: task.source.clone(),
            timing_meaningful,
            kernel: None,
            error: None,
            history: Vec::new(),
            hints: Vec::new(),
            kernel_ms: None,
            reference_ms: None,
            score: None,
            metrics: None,
            analysis: None,
            stage: None,
            instruction: None,
            instruction_mode: None,
            device: None,
        }
    }
}

/// The template a step uses. Stage names without a template are an error.
pub fn template_for(ctx: &StepContext) -> anyhow::Result<TemplateName> {
    Ok(match ctx.kind {
        CallKind::Seed => TemplateName::Seed,
        CallKind::Repair => TemplateName::Repair,
        CallKind::Analysis => TemplateName::Analysis,
        CallKind::Optimize => TemplateName::OptimizeFromAnalysis,
        CallKind::Instructed => TemplateName::Instructed,
        CallKind::Stage => {
            let stage = ctx.stage.as_deref().unwrap_or_default();
            TemplateName::stage(stage)
                .ok_or_else(|| anyhow::anyhow!("no prompt template for the stage `{stage}`"))?
        }
    })
}

/// The templates' view of a step.
pub fn prompt_context(ctx: &StepContext) -> PromptContext {
    let mut p = PromptContext::for_task(&ctx.task_name, &ctx.task_source);
    p.kernel_source = ctx.kernel.clone();
    p.attempts = ctx
        .history
        .iter()
        .map(|a| AttemptFailure {
            attempt: a.attempt,
            category: a.category.clone(),
            summary: a.summary.clone(),
            message: a.excerpt.clone(),
        })
        .collect();
    p.failure = ctx.error.as_ref().map(|e| Failure {
        category: e.category.clone(),
        summary: e.summary.clone(),
        message: excerpt(&e.message, 150, 12_000),
    });
    p.hints = ctx.hints.clone();
    p.timing = TimingInfo {
        meaningful: ctx.timing_meaningful,
        kernel_ms: ctx.kernel_ms,
        reference_ms: ctx.reference_ms,
        score: ctx.score,
    };
    p.metrics = ctx
        .metrics
        .as_ref()
        .map(metrics_from_profile)
        .unwrap_or_default();
    p.analysis = ctx
        .analysis
        .clone()
        .and_then(|a| serde_json::from_value(a).ok());
    p.stage = ctx.stage.clone();
    p.instruction = ctx.instruction.clone();
    p.device = ctx.device.clone();
    p
}

/// (system, user) text of a step's prompt.
pub fn render(prompts: &PromptSet, ctx: &StepContext) -> anyhow::Result<(String, String)> {
    let rendered = prompts.render(template_for(ctx)?, &prompt_context(ctx))?;
    Ok((rendered.system, rendered.user))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> TaskFile {
        TaskFile {
            path: "relu.py".into(),
            name: "relu".into(),
            source: "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\
                     def get_inputs():\n    return [torch.rand(4)]\n"
                .into(),
            hash: "0".into(),
        }
    }

    #[test]
    fn every_step_renders_with_its_template() {
        let prompts = PromptSet::new(None).unwrap();
        let mut ctx = StepContext::new(CallKind::Seed, &task(), false);
        let (system, user) = render(&prompts, &ctx).unwrap();
        assert!(!system.is_empty() && user.contains("class Model"), "{user}");

        ctx.kind = CallKind::Analysis;
        ctx.kernel = Some("class ModelNew: pass".into());
        assert!(
            render(&prompts, &ctx)
                .unwrap()
                .1
                .contains("worth_optimizing")
        );

        ctx.kind = CallKind::Stage;
        ctx.stage = Some("block_tiling".into());
        assert!(render(&prompts, &ctx).unwrap().1.contains("block_tiling"));
        ctx.stage = Some("no_such_stage".into());
        assert!(
            render(&prompts, &ctx)
                .unwrap_err()
                .to_string()
                .contains("no_such_stage")
        );

        ctx.kind = CallKind::Repair;
        ctx.stage = None;
        ctx.error = Some(ErrorInfo {
            category: "compile".into(),
            summary: "tl.tanhh".into(),
            message: "AttributeError: tanhh".into(),
        });
        ctx.history = vec![Attempt {
            attempt: 1,
            category: "syntax".into(),
            summary: "first failure".into(),
            excerpt: "x".into(),
        }];
        let (_, user) = render(&prompts, &ctx).unwrap();
        assert!(
            user.contains("AttributeError: tanhh") && user.contains("first failure"),
            "{user}"
        );
    }
}
