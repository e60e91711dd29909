//! Which template a step's prompt is rendered from. The context itself is the one
//! `prompts::PromptContext`, built by the engine from the task and the candidate's
//! evaluation (`PromptContext::for_task(..).with_kernel(..).with_eval(..)`), the same way
//! in production and in tests.

use crate::prompts::{PromptContext, PromptSet, TemplateName};
use crate::protocol::{CallKind, CallTemplate};

/// The template of a call, as its kind's descriptor names it. Stage names without a
/// template are an error.
pub fn template_for(kind: CallKind, stage: Option<&str>) -> anyhow::Result<TemplateName> {
    match kind.descriptor().template {
        CallTemplate::Named(template) => Ok(template),
        CallTemplate::OfStage => {
            let stage = stage.unwrap_or_default();
            TemplateName::stage(stage)
                .ok_or_else(|| anyhow::anyhow!("no prompt template for the stage `{stage}`"))
        }
    }
}

/// (system, user) text of a call's prompt.
pub fn render(
    prompts: &PromptSet,
    kind: CallKind,
    ctx: &PromptContext,
) -> anyhow::Result<(String, String)> {
    let rendered = prompts.render(template_for(kind, ctx.stage.as_deref())?, ctx)?;
    Ok((rendered.system, rendered.user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::AttemptFailure;
    use crate::protocol::Category;
    use crate::protocol::EvalResult;

    const TASK: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\
                        def get_inputs():\n    return [torch.rand(4)]\n";

    /// Each kind's descriptor names a template the registry holds (a stage's, by its name).
    #[test]
    fn every_call_kind_has_its_template() {
        for kind in CallKind::ALL {
            let template = template_for(kind, Some("block_tiling")).unwrap();
            match kind.descriptor().template {
                CallTemplate::Named(named) => assert_eq!(template, named),
                CallTemplate::OfStage => assert_eq!(template, TemplateName::StageBlockTiling),
            }
        }
        // Every stage's template is what a stage call of that stage renders.
        for stage in TemplateName::STAGES {
            assert_eq!(
                template_for(CallKind::Stage, Some(stage)).unwrap(),
                TemplateName::stage(stage).unwrap()
            );
        }
        assert_eq!(
            template_for(CallKind::Optimize, None).unwrap(),
            TemplateName::OptimizeFromAnalysis
        );
    }

    #[test]
    fn every_step_renders_with_its_template() {
        let prompts = PromptSet::new(None).unwrap();
        let base = PromptContext::for_task("relu", TASK);
        let (system, user) = render(&prompts, CallKind::Seed, &base).unwrap();
        assert!(!system.is_empty() && user.contains("class Model"), "{user}");

        let analysis = base
            .clone()
            .with_kernel(Some("class ModelNew: pass".into()));
        assert!(
            render(&prompts, CallKind::Analysis, &analysis)
                .unwrap()
                .1
                .contains("worth_optimizing")
        );

        let mut stage = analysis.clone();
        stage.stage = Some("block_tiling".into());
        assert!(
            render(&prompts, CallKind::Stage, &stage)
                .unwrap()
                .1
                .contains("block_tiling")
        );
        stage.stage = Some("no_such_stage".into());
        assert!(
            render(&prompts, CallKind::Stage, &stage)
                .unwrap_err()
                .to_string()
                .contains("no_such_stage")
        );

        let mut failed = EvalResult::harness_failure("1", "tl.tanhh", "");
        failed.category = Some(Category::Compile);
        failed.message = "AttributeError: tanhh".into();
        let mut first = EvalResult::harness_failure("0", "first failure", "");
        first.category = Some(Category::Syntax);
        let repair = analysis
            .with_eval(&failed)
            .with_attempts(vec![AttemptFailure::from_eval(1, &first)]);
        let (_, user) = render(&prompts, CallKind::Repair, &repair).unwrap();
        assert!(
            user.contains("AttributeError: tanhh") && user.contains("first failure"),
            "{user}"
        );
    }
}
