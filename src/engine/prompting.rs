//! What a step's prompt is made of: the template it is rendered from, and the context the
//! engine builds for it from the session (`prompts::PromptContext`, built the same way in
//! production and in tests: `PromptContext::for_task(..).with_kernel(..).with_eval(..)`),
//! with what each kind of call needs on top: a seed's own direction, the session's other
//! designs for an optimization, the lineage's analysis and the earlier stages for a stage,
//! the failing sizes for a repair after the unseen-shapes check.

use std::collections::BTreeMap;

use super::runner::Inner;
use crate::llm::extract::Analysis;
use crate::prompts::{
    EarlierStage, PromptContext, PromptSet, SeedDirection, SiblingDesign, TemplateName,
    design_summary, seed_direction,
};
use crate::protocol::{CallKind, CallTemplate, CandidateId, CandidateKind, EvalResult, StepKey};

/// The task check's result in a session (written by the front end that checked the task,
/// before the engine starts): the prompts take the reference's output shapes from it.
pub const TASK_CHECK_FILE: &str = "task_check.json";

/// The most characters kept of what an earlier stage's answer said it changed.
const TRIED_CHARS: usize = 400;

impl Inner {
    /// The prompt context of a step on candidate `id`: the task with the reference's output
    /// shapes, the kernel, and what its evaluation said (failure and hints, or verdict,
    /// timing and metrics).
    pub fn context_for(&self, id: Option<CandidateId>) -> PromptContext {
        let mut ctx = PromptContext::for_task(&self.task.name, &self.task.source)
            .with_timing_meaningful(self.timing_meaningful())
            .with_precision(self.eval.precision, self.eval.atol, self.eval.rtol);
        if let Some(check) = self.task_check()
            && let Some(first) = check.trials.first()
        {
            ctx = ctx.with_reference_outputs(&first.outputs);
        }
        if let Some(id) = id {
            ctx = ctx.with_kernel(self.kernel_source(id));
            if let Some(result) = self.load_result(id) {
                ctx = ctx.with_eval(&result);
            }
        }
        ctx
    }

    fn task_check(&self) -> Option<EvalResult> {
        serde_json::from_str(&self.session.read_file(TASK_CHECK_FILE).ok()?).ok()
    }

    /// Seed `index`'s context, with its own direction.
    pub fn seed_context(&self, index: u32) -> (PromptContext, SeedDirection) {
        let direction = seed_direction(&self.task.source, index, self.pipeline.seeds);
        let mut ctx = self.context_for(None);
        ctx.direction = Some(direction.clone());
        (ctx, direction)
    }

    /// The optimization of `seed` from its analysis: the session's other designs with it.
    pub fn optimize_context(&self, seed: CandidateId, analysis: Analysis) -> PromptContext {
        let mut ctx = self.context_for(Some(seed));
        ctx.analysis = Some(analysis);
        ctx.siblings = self.siblings_of(seed);
        ctx
    }

    /// Tuning stage `stage` on `base`: the analysis of its lineage and the earlier stages.
    pub fn stage_context(&self, base: CandidateId, stage: &str) -> PromptContext {
        let mut ctx = self.context_for(Some(base));
        ctx.stage = Some(stage.to_string());
        ctx.analysis = self.lineage_analysis(base);
        ctx.stage_history = self.earlier_stages(stage);
        ctx
    }

    /// The nearest analysis up `id`'s lineage (its own, its parent's...).
    fn lineage_analysis(&self, id: CandidateId) -> Option<Analysis> {
        self.with_state(|s| {
            let mut at = s.candidates.get(&id);
            let mut hops = 0;
            while let Some(c) = at
                && hops < 64
            {
                if let Some(a) = &c.analysis {
                    return Some(a.clone());
                }
                at = c.parent.and_then(|p| s.candidates.get(&p));
                hops += 1;
            }
            None
        })
    }

    /// The stages recorded before `stage` (this session's, earlier runs' included): what each
    /// tried, in its answer's own words, and what became of it.
    fn earlier_stages(&self, stage: &str) -> Vec<EarlierStage> {
        let records = self.with_state(|s| {
            s.stages
                .iter()
                .filter(|r| r.stage != stage)
                .map(|r| {
                    let key = StepKey::Stage {
                        name: r.stage.clone(),
                    }
                    .to_string();
                    let response = s
                        .candidates
                        .values()
                        .find(|c| c.key == key)
                        .and_then(|c| c.call)
                        .and_then(|call| s.calls.get(&call))
                        .and_then(|call| call.response_file.clone());
                    let failure = r
                        .result
                        .and_then(|id| s.candidates.get(&id))
                        .and_then(|c| c.eval.as_ref())
                        .filter(|e| !e.correct)
                        .map(|e| {
                            format!(
                                " ({}: {})",
                                e.category.map(|c| c.as_str()).unwrap_or("failed"),
                                crate::pysource::traceback::scrub_paths(
                                    &e.summary.chars().take(300).collect::<String>()
                                )
                            )
                        })
                        .unwrap_or_default();
                    (r.clone(), response, failure)
                })
                .collect::<Vec<_>>()
        });
        records
            .into_iter()
            .map(|(record, response, failure)| EarlierStage {
                stage: record.stage,
                tried: response
                    .and_then(|f| self.session.read_file(&f).ok())
                    .map(|text| answer_prose(&text))
                    .unwrap_or_default(),
                verdict: record.verdict.word().to_string(),
                reason: format!("{}{failure}", record.reason),
            })
            .collect()
    }

    /// The correct designs of the session's other lineages (the last correct kernel of
    /// each), for a call that must not write one of them again.
    fn siblings_of(&self, of: CandidateId) -> Vec<SiblingDesign> {
        let root_of = |key: &str| key.parse::<StepKey>().ok().map(|k| k.root().clone());
        let found = self.with_state(|s| {
            let own = s.candidates.get(&of).and_then(|c| root_of(&c.key));
            let mut last: BTreeMap<String, (CandidateId, String, String)> = BTreeMap::new();
            for c in s
                .candidates
                .values()
                .filter(|c| c.is_correct() && c.id != of)
            {
                let Some(root) = root_of(&c.key) else {
                    continue;
                };
                if Some(&root) == own.as_ref() || root == (StepKey::Optimize { candidate: of }) {
                    continue;
                }
                let direction = s
                    .candidates
                    .values()
                    .find(|r| r.key == root.to_string())
                    .and_then(|r| match &r.kind {
                        CandidateKind::Seed {
                            direction: Some(d), ..
                        } => Some(format!(", direction `{d}`")),
                        _ => None,
                    })
                    .unwrap_or_default();
                last.insert(
                    root.to_string(),
                    (
                        c.id,
                        format!("candidate {} (`{}`{direction})", c.id, c.key),
                        c.file.clone(),
                    ),
                );
            }
            last.into_values().collect::<Vec<_>>()
        });
        found
            .into_iter()
            .filter_map(|(_, label, file)| {
                let source = self.session.read_file(&file).ok()?;
                Some(SiblingDesign {
                    label,
                    design: design_summary(&source),
                })
            })
            .collect()
    }
}

/// What an answer says before its code: the model's own account of what it changed, on one
/// line, at most [`TRIED_CHARS`] characters.
pub fn answer_prose(answer: &str) -> String {
    let before = answer.split("```").next().unwrap_or_default();
    let words = before.split_whitespace().collect::<Vec<_>>().join(" ");
    let words = crate::pysource::traceback::scrub_paths(&words);
    if words.chars().count() <= TRIED_CHARS {
        words
    } else {
        let cut: String = words.chars().take(TRIED_CHARS).collect();
        format!("{}...", cut.trim_end())
    }
}

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
