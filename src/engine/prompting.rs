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
    /// shapes and the tolerance the judge applies to them (both from the task check), the kernel, and what its evaluation said (failure and hints, or verdict,
    /// timing and metrics).
    pub fn context_for(&self, id: Option<CandidateId>) -> PromptContext {
        let mut ctx = PromptContext::for_task(&self.task.name, &self.task.source)
            .with_timing_meaningful(self.timing_meaningful())
            .with_precision(self.eval.precision, self.eval.atol, self.eval.rtol);
        let check = self.task_check();
        // The judge's own figures on the task's outputs, stated as the tolerance.
        ctx = ctx.with_tolerance(
            self.eval.tolerance,
            check.as_ref().and_then(|c| c.tolerance.clone()),
        );
        if let Some(first) = check.as_ref().and_then(|c| c.trials.first()) {
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
            .map(|(record, response, failure)| {
                EarlierStage::new(
                    record.stage,
                    response
                        .and_then(|f| self.session.read_file(&f).ok())
                        .map(|text| answer_prose(&text))
                        .unwrap_or_default(),
                    record.verdict.word(),
                    format!("{}{failure}", record.reason),
                )
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

/// The prompts the pipeline sends, on the fakes: each seed its own, the calls that only
/// chase speed skipped on the CPU, stages and optimizations told what the session knows.
#[cfg(test)]
mod pipeline_prompts {
    use std::sync::Arc;

    use super::super::fakes::{self, FakeEvaluator, FakeLlm};
    use super::super::runner::Engine;
    use super::super::tests::{dir, pipeline, standard};
    use crate::config::pipeline::PipelineConfig;
    use crate::eval::Device;
    use crate::protocol::*;
    use crate::session::state::SessionState;
    use crate::session::store::SessionDir;

    async fn run(
        session: &SessionDir,
        llm: &Arc<FakeLlm>,
        config: PipelineConfig,
        device: Device,
    ) -> (RunEnd, SessionState) {
        let setup = fakes::setup(
            session.clone(),
            SessionState::default(),
            Arc::new(FakeEvaluator::default()),
            llm.clone(),
            config,
            device,
        );
        let engine = Arc::new(Engine::new(setup).unwrap());
        let steering = fakes::steer(&engine, fakes::approve_every_gate);
        let outcome = engine.run().await;
        engine.stop_actions();
        steering.abort();
        let state = SessionState::from_records(&session.read_events().unwrap().records);
        (outcome.end, state)
    }

    fn prompts_of(llm: &FakeLlm, kind: CallKind) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = llm
            .calls()
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| (c.key.clone(), FakeLlm::prompt(c).to_string()))
            .collect();
        out.sort();
        out
    }

    /// Issue 36, item 5: the tolerance a prompt states is the one the judge applies, in the
    /// judge's own figures for this task's outputs (the task check's result in the session).
    #[tokio::test]
    async fn the_prompts_state_the_tolerance_the_task_check_measured() {
        let d = dir();
        let mut check = EvalResult::harness_failure("0", "", "");
        check.correct = true;
        check.category = None;
        check.tolerance = Some(
            serde_json::from_value(serde_json::json!({
                "mode": "oracle",
                "outputs": {"out": {"dtype": "float32", "rule": "oracle", "limit": 128.0,
                                     "honest_rms": 2.5e-7, "max_allowed": 4.0e-5}}
            }))
            .unwrap(),
        );
        d.session
            .write_file(super::TASK_CHECK_FILE, &serde_json::to_vec(&check).unwrap())
            .unwrap();
        let llm = Arc::new(FakeLlm::new(standard));
        let config = PipelineConfig {
            seeds: 1,
            stages: vec![],
            ..pipeline()
        };
        run(&d.session, &llm, config, Device::Cpu).await;
        let (_, seed) = &prompts_of(&llm, CallKind::Seed)[0];
        assert!(
            seed.contains(
                "On this task's inputs: `out` (float32) may differ from the exact result by about +-3.20e-5 \
                 (128x its RMS honest error 2.50e-7), at most +-4.00e-5 at any element"
            ),
            "{seed}"
        );
    }

    #[tokio::test]
    async fn three_seeds_get_three_prompts_each_saying_its_direction() {
        let d = dir();
        let llm = Arc::new(FakeLlm::new(standard));
        let config = PipelineConfig {
            seeds: 3,
            stages: vec![],
            ..pipeline()
        };
        let (end, state) = run(&d.session, &llm, config, Device::Cpu).await;
        assert_eq!(end, RunEnd::Complete);
        let seeds = prompts_of(&llm, CallKind::Seed);
        assert_eq!(seeds.len(), 3);
        for (i, (key, prompt)) in seeds.iter().enumerate() {
            for (other_key, other) in &seeds[i + 1..] {
                assert_ne!(prompt, other, "{key} and {other_key} got the same prompt");
            }
            let index = i as u32 + 1;
            let seed = state
                .candidates
                .values()
                .find(|c| c.key == *key)
                .unwrap_or_else(|| panic!("no candidate for {key}"));
            let CandidateKind::Seed {
                index: recorded,
                direction: Some(direction),
            } = &seed.kind
            else {
                panic!("{key}: {:?}", seed.kind);
            };
            assert_eq!(*recorded, index);
            assert!(
                prompt.contains(&format!(
                    "## Your task: seed {index} of 3, direction `{direction}`"
                )),
                "{key}:\n{prompt}"
            );
            // It names the other seeds' directions, and its own is shown with the seed.
            for other in (1..=3).filter(|&j| j != index) {
                assert!(prompt.contains(&format!("seed {other}: ")), "{prompt}");
            }
            assert_eq!(seed.kind.label(), format!("seed {index} ({direction})"));
            assert!(state.log.iter().any(|l| l.tag == format!("seed {index}")
                && l.message.starts_with(&format!("direction `{direction}`"))));
        }
        // The prompt files hold the same text.
        let first = d.session.read_file("llm/1.prompt.md").unwrap();
        assert!(first.contains(", direction `"), "{first}");
    }

    #[tokio::test]
    async fn the_cpu_skips_the_calls_that_only_chase_speed_unless_asked() {
        let speed = [CallKind::Analysis, CallKind::Optimize, CallKind::Stage];
        let d = dir();
        let llm = Arc::new(FakeLlm::new(standard));
        let config = PipelineConfig {
            speed_calls_on_cpu: false,
            ..pipeline()
        };
        let (end, state) = run(&d.session, &llm, config, Device::Cpu).await;
        assert_eq!(end, RunEnd::Complete);
        let kinds: Vec<CallKind> = llm.calls().iter().map(|c| c.kind).collect();
        assert!(kinds.iter().all(|k| !speed.contains(k)), "{kinds:?}");
        assert!(kinds.contains(&CallKind::Seed) && kinds.contains(&CallKind::Repair));
        assert!(
            state.log.iter().any(|l| l.tag == "engine"
                && l.message.contains("nothing is timed")
                && l.message.contains("--speed-calls-on-cpu")),
            "the skip is said"
        );
        // Every prompt says that nothing is timed here, none talks of CUDA events.
        for call in llm.calls() {
            let system = call.request.system.clone().unwrap_or_default();
            assert!(system.contains("nothing is timed"), "{system}");
            assert!(!system.contains("CUDA events"), "{system}");
        }

        // Asked for, they run on the CPU; on a GPU they run by default.
        for (config, device) in [
            (pipeline(), Device::Cpu),
            (
                PipelineConfig {
                    speed_calls_on_cpu: false,
                    ..pipeline()
                },
                Device::Cuda(0),
            ),
        ] {
            let d = dir();
            let llm = Arc::new(FakeLlm::new(standard));
            let (end, _) = run(&d.session, &llm, config, device).await;
            assert_eq!(end, RunEnd::Complete);
            let kinds: Vec<CallKind> = llm.calls().iter().map(|c| c.kind).collect();
            for kind in speed {
                assert!(kinds.contains(&kind), "{device:?}: {kind:?} in {kinds:?}");
            }
        }
    }

    #[tokio::test]
    async fn stages_carry_the_analysis_and_the_earlier_stages_and_optimize_the_other_designs() {
        let d = dir();
        let llm = Arc::new(FakeLlm::new(standard));
        let (end, _) = run(&d.session, &llm, pipeline(), Device::Cpu).await;
        assert_eq!(end, RunEnd::Complete);
        let stages = llm
            .calls()
            .into_iter()
            .filter(|c| c.kind == CallKind::Stage)
            .map(|c| FakeLlm::prompt(&c).to_string())
            .collect::<Vec<_>>();
        assert_eq!(stages.len(), 3);
        for (i, prompt) in stages.iter().enumerate() {
            assert!(prompt.contains("## The algorithm analysis"), "{prompt}");
            assert!(prompt.contains("- Plan: wider blocks"), "{prompt}");
            assert!(prompt.contains("within the task's tolerance ("), "{prompt}");
            if i == 0 {
                assert!(!prompt.contains("Earlier tuning stages"), "{prompt}");
            } else {
                assert!(prompt.contains("## Earlier tuning stages"), "{prompt}");
                // What the first stage's answer said, and what became of it (on the CPU,
                // not compared: the base stays).
                assert!(
                    prompt.contains(
                        "- `grid_and_parallel`: it tried: \"Here it is.\"; correct, not compared: no timing to compare with (the base stays)\n"
                    ),
                    "{prompt}"
                );
            }
        }
        // The later of the two optimizations is told the other seed's design (which one
        // comes first depends on the lineages' pace), with its direction.
        let optimize = prompts_of(&llm, CallKind::Optimize);
        assert!(
            optimize.iter().any(|(_, p)| {
                let designs = p.split("## Designs already in this session").nth(1);
                designs.is_some_and(|d| d.contains("(`seed") && d.contains(", direction `"))
            }),
            "{optimize:?}"
        );
    }
}
