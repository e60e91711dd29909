//! The unseen-shapes re-check of a session's best and final kernels (issue 25, "Verified
//! wins"; `crate::shapes` derives the variants and runs the check). The variants' task
//! files go to `shapes/<id>/`, the whole check to `shapes/<id>.json`, written before the
//! `shapes_checked` event that names it; a resumed run finds the event and does not check
//! the candidate again.
//!
//! A kernel that fails there is repaired like any other failure (issue 36): the repair
//! prompt names the failing sizes (`shapes<id>/repair<n>`, at most `[pipeline]
//! shape_repairs` attempts); a repaired kernel must be correct on the task, is checked on
//! unseen shapes in turn, and is ranked as every candidate is (a kernel shown wrong on
//! unseen shapes ranks below every one that is not: `session::state::best_of`).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::outcome::{Step, step};
use super::runner::Inner;
use crate::prompts::AttemptFailure;
use crate::protocol::shapes::ShapeCheck;
use crate::protocol::*;
use crate::shape_check as check;

const TAG: &str = "shapes";
/// The most kernels checked in one verification (the best, then the best it moved to...).
const MAX_CHECKED: usize = 4;

impl Inner {
    /// Checks `first` (the best, or the kernel marked final) on unseen shapes; when it fails,
    /// asks for its repair with the failing sizes. The best may move to the repaired kernel
    /// (or to another correct one): the new best is checked too. A kernel marked final stays
    /// final: its repair is offered to the person, not swapped in. One kernel is repaired
    /// per run.
    pub(super) async fn verify_on_unseen_shapes(&self, first: CandidateId, marked: bool) {
        let mut id = first;
        let mut repaired = false;
        let mut checked = BTreeSet::new();
        while checked.insert(id) && checked.len() <= MAX_CHECKED {
            if self.stopping() {
                return;
            }
            if let Step::Stopped = self.check_shapes(id).await {
                return;
            }
            let Some(failed) = self.failed_shape_check(id) else {
                return;
            };
            if repaired || self.pipeline.shape_repairs == 0 {
                return;
            }
            repaired = true;
            let outcome = self.repair_on_unseen_sizes(id, failed).await;
            if let Step::Done(Some(fixed)) = &outcome {
                self.log(
                    LogLevel::Info,
                    TAG,
                    if marked {
                        format!(
                            "candidate {fixed} repairs candidate {id} and is correct on the unseen shapes; {id} stays final as you marked it (mark {fixed} final with F to take it)"
                        )
                    } else {
                        format!("candidate {fixed} repairs candidate {id} and is correct on the unseen shapes")
                    },
                );
            }
            if matches!(outcome, Step::Stopped) || marked {
                return;
            }
            match self.with_state(|s| s.best) {
                Some(best) => id = best,
                None => return,
            }
        }
    }

    /// The check of `id` when it was recorded and failed.
    fn failed_shape_check(&self, id: CandidateId) -> Option<ShapeCheck> {
        let file = self.with_state(|s| {
            s.candidates
                .get(&id)
                .and_then(|c| c.shapes.as_ref())
                .filter(|r| r.verdict.fails())
                .map(|r| r.file.clone())
        })?;
        serde_json::from_str(&self.session.read_file(&file).ok()?).ok()
    }

    /// Repairs `id`, right on the task's sizes and wrong on unseen ones (`check`): each
    /// attempt's kernel is evaluated on the task and, when correct, checked on unseen
    /// shapes; the next attempt repairs whichever failed. `Some(kernel)` when one is correct
    /// everywhere it was checked.
    async fn repair_on_unseen_sizes(
        &self,
        id: CandidateId,
        check: ShapeCheck,
    ) -> Step<Option<CandidateId>> {
        let key = StepKey::Shapes { candidate: id };
        let tag = format!("shapes {id}");
        let attempts = self.pipeline.shape_repairs;
        let mut current = id;
        let mut failing: Option<ShapeCheck> = Some(check);
        let mut history: Vec<AttemptFailure> = Vec::new();
        for attempt in 1..=attempts {
            if self.stopping() {
                return Step::Stopped;
            }
            let mut ctx = self.context_for(Some(current));
            let entry = match &failing {
                Some(check) => {
                    ctx = ctx.with_unseen_sizes(check);
                    AttemptFailure::from_unseen_sizes(attempt, check)
                }
                None => self
                    .load_result(current)
                    .map(|r| AttemptFailure::from_eval(attempt, &r)),
            };
            ctx = ctx.with_attempts(history.clone());
            history.extend(entry);
            self.log(
                LogLevel::Info,
                &tag,
                format!(
                    "repair {attempt}/{attempts}: {}",
                    ctx.failure
                        .as_ref()
                        .map(|f| f.summary.chars().take(200).collect::<String>())
                        .unwrap_or_default()
                ),
            );
            let step_key = key.repair(attempt);
            let (code, call) = match self
                .ask_for_code(&step_key, &tag, CallKind::Repair, Some(current), ctx)
                .await
            {
                Step::Done(g) => g,
                Step::Stopped => return Step::Stopped,
                Step::Skipped(why) | Step::Failed(why) => {
                    self.log(LogLevel::Warn, &tag, format!("repair {attempt}: {why}"));
                    return Step::Done(None);
                }
            };
            let kind = CandidateKind::Repair { attempt };
            let new = step!(self.new_candidate(&step_key, Some(current), kind, &code, call));
            let evaluated = match self.evaluate(new, &tag).await {
                Step::Done(e) => e,
                Step::Skipped(_) => return Step::Done(None),
                other => return other.forward(),
            };
            current = new;
            if !evaluated.correct {
                failing = None;
                continue;
            }
            if let Step::Stopped = self.check_shapes(new).await {
                return Step::Stopped;
            }
            failing = self.failed_shape_check(new);
            if failing.is_none() {
                return Step::Done(Some(new));
            }
        }
        Step::Done(None)
    }

    /// Re-checks a correct candidate on unseen shapes unless `[eval] shape_check` is off or
    /// the check is already recorded. `Skipped` says why nothing ran.
    pub(super) async fn check_shapes(&self, id: CandidateId) -> Step<()> {
        if !self.eval.shape_check {
            return Step::Skipped("[eval] shape_check is off".into());
        }
        let candidate = self.with_state(|s| s.candidates.get(&id).cloned());
        let Some(candidate) = candidate else {
            return Step::Failed(format!("no candidate {id}"));
        };
        if candidate.shapes.is_some() {
            return Step::Done(());
        }
        if !candidate.is_correct() {
            return Step::Skipped(format!("candidate {id} is not correct"));
        }
        if self.stopping() {
            return Step::Stopped;
        }
        self.emit(Event::ShapesCheckStarted { candidate: id });
        self.log(
            LogLevel::Info,
            TAG,
            format!("candidate {id}: re-checking correctness on unseen shapes and seeds"),
        );
        let evaluate = |request| {
            self.evaluator
                .evaluate(request, self.control.stop.child_token(), None)
        };
        let outcome = check::check_kernel(
            &self.task.source,
            &self.session.file(&candidate.file),
            &self.session.file(&format!("shapes/{id}")),
            self.devices.primary(),
            &self.eval,
            &evaluate,
        )
        .await;
        match outcome {
            Ok(shapes) => self.record_shapes(id, &shapes),
            Err(crate::eval::EvalError::Cancelled) => Step::Stopped,
            // Not recorded: a later run (resume) checks it again.
            Err(e) => {
                self.emit(Event::ShapesCheckNotRun {
                    candidate: id,
                    reason: e.to_string(),
                });
                let why = format!("candidate {id}: shape check not run: {e}");
                self.log(LogLevel::Warn, TAG, why.clone());
                Step::Failed(why)
            }
        }
    }

    /// A kernel marked final after the run ended is checked now, in the background (during
    /// the run the finish checks it); the result files follow.
    pub(super) fn check_marked_after_run(self: &Arc<Self>, id: CandidateId) {
        let over = self.with_state(|s| s.state.is_over() && s.final_marked == Some(id));
        if !over || !self.eval.shape_check {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = self.clone();
        runtime.spawn(async move {
            if let Step::Done(()) = inner.check_shapes(id).await {
                inner.refresh_result_files();
            }
        });
    }

    /// Saves the check as `shapes/<id>.json`, then announces it (event and console line).
    fn record_shapes(&self, id: CandidateId, shapes: &ShapeCheck) -> Step<()> {
        let result_file = format!("shapes/{id}.json");
        let json = match serde_json::to_vec_pretty(shapes) {
            Ok(j) => j,
            Err(e) => return Step::Failed(format!("cannot encode the shape check of {id}: {e}")),
        };
        step!(self.write(&result_file, &json));
        // A kernel shown wrong on unseen shapes ranks below the others: the best may move.
        let best_before = self.with_state(|s| s.best);
        self.emit(Event::ShapesChecked {
            candidate: id,
            result_file,
            verdict: shapes.verdict.clone(),
            line: shapes.line.clone(),
        });
        // Not shown right on unseen shapes (wrong, or the check did not run): said as a warning.
        let level = if shapes.passes() {
            LogLevel::Info
        } else {
            LogLevel::Warn
        };
        self.log(level, TAG, format!("candidate {id}: {}", shapes.line));
        self.announce_best(best_before);
        self.sync();
        Step::Done(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::fakes::{self, FakeEvaluator, FakeLlm, Reply};
    use super::super::runner::{Engine, RunOutcome};
    use super::super::tests::{dir, pipeline, standard};
    use crate::config::pipeline::PipelineConfig;
    use crate::eval::Device;
    use crate::protocol::shapes::ShapeVerdict;
    use crate::protocol::*;
    use crate::session::state::SessionState;
    use crate::session::store::SessionDir;
    use crate::task::TaskFile;

    /// A ReLU task whose sizes are module-level constants: five variants.
    fn sized_task() -> TaskFile {
        TaskFile {
            source: "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\
                     batch_size = 16\ndim = 64\n\n\
                     def get_inputs():\n    return [torch.rand(batch_size, dim)]\ndef get_init_inputs():\n    return []\n"
                .into(),
            ..fakes::task()
        }
    }

    /// An engine on the sized task over the fakes, `[eval] shape_check` as given.
    fn sized_engine(
        session: &SessionDir,
        prior: SessionState,
        eval: &Arc<FakeEvaluator>,
        llm: &Arc<FakeLlm>,
        config: PipelineConfig,
        shape_check: bool,
    ) -> Engine {
        let mut setup = fakes::setup(
            session.clone(),
            prior,
            eval.clone(),
            llm.clone(),
            config,
            Device::Cpu,
        );
        setup.task = sized_task();
        setup.eval.shape_check = shape_check;
        session
            .write_file("task.py", setup.task.source.as_bytes())
            .unwrap();
        Engine::new(setup).unwrap()
    }

    /// A run to its end on the sized task, every gate approved.
    async fn run_sized(
        session: &SessionDir,
        prior: SessionState,
        eval: &Arc<FakeEvaluator>,
        llm: &Arc<FakeLlm>,
        config: PipelineConfig,
        shape_check: bool,
    ) -> (RunOutcome, SessionState) {
        let engine = Arc::new(sized_engine(session, prior, eval, llm, config, shape_check));
        let steering = fakes::steer(&engine, fakes::approve_every_gate);
        let outcome = engine.run().await;
        engine.stop_actions();
        steering.abort();
        let state = SessionState::from_records(&session.read_events().unwrap().records);
        (outcome, state)
    }

    fn variant_evaluations(eval: &FakeEvaluator) -> usize {
        eval.tasks()
            .iter()
            .filter(|t| t.components().any(|c| c.as_os_str() == "shapes"))
            .count()
    }

    fn shapes_events(session: &SessionDir) -> Vec<CandidateId> {
        session
            .read_events()
            .unwrap()
            .records
            .into_iter()
            .filter_map(|r| match r.event {
                Event::ShapesChecked { candidate, .. } => Some(candidate),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn the_best_is_checked_once_before_the_final_gate_and_resume_does_not_check_again() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(standard));
        let config = PipelineConfig {
            mode: Mode::Review,
            ..pipeline()
        };
        let (outcome, state) = run_sized(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config.clone(),
            true,
        )
        .await;
        assert_eq!(outcome.end, RunEnd::Complete);
        let best = state.best.unwrap();
        let record = state.candidates[&best].shapes.clone().expect("checked");
        assert_eq!(
            record.verdict,
            ShapeVerdict::Generalizes {
                passed: 5,
                checked: 5
            }
        );
        assert_eq!(record.line, "correct on 5 of 5 unseen shapes");
        assert_eq!(variant_evaluations(&eval), 5);
        assert_eq!(shapes_events(&d.session), vec![best]);
        // The file is written before the event, with every variant's task beside it.
        let saved: crate::protocol::shapes::ShapeCheck =
            serde_json::from_str(&d.session.read_file(&record.file).unwrap()).unwrap();
        assert_eq!(saved.variants.len(), 5);
        assert!(
            d.session
                .file(&format!("shapes/{best}/shape5_task.py"))
                .is_file()
        );
        // Checked before the person is asked to declare it final.
        let events = d.session.read_events().unwrap().records;
        let checked_at = events
            .iter()
            .position(|r| matches!(r.event, Event::ShapesChecked { .. }))
            .unwrap();
        // Its start is recorded (views say it runs, issue 39), and over once recorded.
        let started_at = events
            .iter()
            .position(
                |r| matches!(r.event, Event::ShapesCheckStarted { candidate } if candidate == best),
            )
            .expect("the start of the check is recorded");
        assert!(started_at < checked_at);
        assert_eq!(state.shapes_checking, None);
        let final_gate_at = events
            .iter()
            .position(|r| {
                matches!(
                    r.event,
                    Event::GateOpened {
                        kind: GateKind::FinalBest,
                        ..
                    }
                )
            })
            .unwrap();
        assert!(checked_at < final_gate_at);

        let (outcome, _) = run_sized(&d.session, state, &eval, &llm, config, true).await;
        assert_eq!(outcome.end, RunEnd::Complete);
        assert_eq!(variant_evaluations(&eval), 5, "resume re-ran the check");
        assert_eq!(shapes_events(&d.session), vec![best]);
    }

    #[tokio::test]
    async fn a_best_written_for_the_tasks_sizes_is_marked_failing() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(|call| match call.kind {
            CallKind::Analysis => Reply::Text(fakes::analysis(false)),
            _ => Reply::Text(fakes::kernel("FAKE-HARDCODED:dim=64")),
        }));
        let config = PipelineConfig {
            seeds: 1,
            stages: vec![],
            ..pipeline()
        };
        let (outcome, state) = run_sized(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config,
            true,
        )
        .await;
        // Still the session's kernel (correct on the task), but shown failing.
        assert_eq!(outcome.end, RunEnd::Complete);
        let best = state.best.unwrap();
        let record = state.candidates[&best].shapes.clone().expect("checked");
        assert!(record.fails());
        // Every variant draws its own dim (the batch-of-1 one too): none is 64.
        assert_eq!(
            record.verdict,
            ShapeVerdict::FailsOn {
                failed: 5,
                checked: 5
            }
        );
        assert!(
            record.line.starts_with("wrong on batch_size=")
                && record.line.contains(": mismatch: fake mismatch failure"),
            "{}",
            record.line
        );
        // The report says the best is not a win, and why.
        let report = d.session.read_file("report.md").unwrap();
        assert!(
            report.contains(&format!("| Unseen shapes | **not a win**: {}", record.line)),
            "{report}"
        );
        let summary: serde_json::Value =
            serde_json::from_str(&d.session.read_file("summary.json").unwrap()).unwrap();
        assert_eq!(summary["best"]["shapes"]["verdict"], "fails_on");
        assert!(state.log.iter().any(|l| l.level == LogLevel::Warn
            && l.tag == "shapes"
            && l.message.contains(&record.line)));
    }

    /// Issue 36: a best right on the task's sizes and wrong on unseen ones is repaired with
    /// the failing sizes; the repair is correct on the task, checked in turn, and becomes the
    /// best (a kernel shown wrong on unseen shapes ranks below it).
    #[tokio::test]
    async fn a_best_wrong_on_unseen_shapes_is_repaired_with_the_failing_sizes() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(|call| match call.kind {
            CallKind::Repair => Reply::Text(fakes::kernel("sizes from the tensors")),
            _ => Reply::Text(fakes::kernel("FAKE-HARDCODED:dim=64")),
        }));
        let config = PipelineConfig {
            seeds: 1,
            stages: vec![],
            ..pipeline()
        };
        let (outcome, state) = run_sized(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config.clone(),
            true,
        )
        .await;
        assert_eq!(outcome.end, RunEnd::Complete);
        let repairs: Vec<_> = llm
            .calls()
            .into_iter()
            .filter(|c| c.kind == CallKind::Repair)
            .collect();
        assert_eq!(repairs.len(), 1, "one repair was enough");
        assert_eq!(repairs[0].key, "shapes1/repair1");
        let prompt = FakeLlm::prompt(&repairs[0]);
        assert!(
            prompt.contains("## It is wrong on sizes other than the task's"),
            "{prompt}"
        );
        assert!(
            prompt.contains("correct on the task's own sizes (batch_size=16, dim=64)"),
            "{prompt}"
        );
        // Each failing variant with its sizes (drawn from the seeded family) and its failure.
        let failing: Vec<&str> = prompt
            .lines()
            .filter_map(|l| l.strip_prefix("- wrong on "))
            .collect();
        assert!(!failing.is_empty(), "{prompt}");
        for line in &failing {
            let (sizes, failure) = line.split_once(": ").expect("sizes: failure");
            assert!(
                sizes.starts_with("batch_size=") && sizes.contains(", dim="),
                "{line}"
            );
            assert_ne!(sizes, "batch_size=16, dim=64", "a variant is not the task");
            assert_eq!(failure, "mismatch: fake mismatch failure");
            // The failing sizes are said once, the hints follow them.
            assert_eq!(prompt.matches(line).count(), 1, "{prompt}");
        }
        assert!(!prompt.contains("## The failure"), "{prompt}");
        assert!(
            prompt.contains("a size is a power of two.\n\n## Hints for this kind of failure\n"),
            "{prompt}"
        );
        assert!(prompt.contains("hard-codes a size"), "{prompt}");
        // The repair is the best now, checked and right everywhere; the seed is kept, shown
        // failing.
        let best = state.best.unwrap();
        assert_ne!(best, CandidateId(1));
        assert_eq!(state.candidates[&best].parent, Some(CandidateId(1)));
        assert!(
            state.candidates[&best]
                .shapes
                .as_ref()
                .unwrap()
                .verdict
                .generalizes()
        );
        assert!(
            state.candidates[&CandidateId(1)]
                .shapes
                .as_ref()
                .unwrap()
                .fails()
        );
        assert_eq!(shapes_events(&d.session), vec![CandidateId(1), best]);
        assert!(
            d.session
                .read_file("best_kernel.py")
                .unwrap()
                .contains("sizes from the tensors")
        );
        // A resumed run asks nothing again.
        let before = llm.calls().len();
        let (outcome, _) = run_sized(&d.session, state, &eval, &llm, config, true).await;
        assert_eq!(outcome.end, RunEnd::Complete);
        assert_eq!(llm.calls().len(), before, "resume asked again");
    }

    /// Repairs that stay wrong on unseen shapes stop after `[pipeline] shape_repairs`, each
    /// told the earlier attempts' failures.
    #[tokio::test]
    async fn shape_repairs_are_bounded_and_carry_the_earlier_attempts() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(|_| {
            Reply::Text(fakes::kernel("FAKE-HARDCODED:dim=64"))
        }));
        let config = PipelineConfig {
            seeds: 1,
            stages: vec![],
            shape_repairs: 2,
            ..pipeline()
        };
        let (outcome, state) = run_sized(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config,
            true,
        )
        .await;
        assert_eq!(outcome.end, RunEnd::Complete);
        let repairs: Vec<_> = llm
            .calls()
            .into_iter()
            .filter(|c| c.kind == CallKind::Repair)
            .collect();
        assert_eq!(
            repairs.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
            ["shapes1/repair1", "shapes1/repair2"]
        );
        assert!(
            FakeLlm::prompt(&repairs[1]).contains(
                "- Attempt 1: `mismatch`: correct on the task's sizes, wrong on unseen sizes: batch_size="
            ),
            "{}",
            FakeLlm::prompt(&repairs[1])
        );
        // Every kernel is shown wrong: the best stays the earliest.
        assert_eq!(
            shapes_events(&d.session),
            [CandidateId(1), CandidateId(2), CandidateId(3)]
        );
        assert_eq!(state.best, Some(CandidateId(1)));
    }

    #[tokio::test]
    async fn a_kernel_marked_final_after_the_run_is_checked_and_the_report_follows() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(|call| match call.kind {
            CallKind::Seed if call.key == "seed2" => {
                Reply::Text(fakes::kernel("FAKE-HARDCODED:dim=64"))
            }
            _ => standard(call),
        }));
        let config = PipelineConfig {
            stages: vec![],
            ..pipeline()
        };
        let engine = sized_engine(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config,
            true,
        );
        assert_eq!(engine.run().await.end, RunEnd::Complete);
        let state = engine.state();
        let best = state.best.unwrap();
        assert_eq!(shapes_events(&d.session), vec![best]);
        // Seed 2's kernel: correct on the task, written for dim = 64.
        let hardcoded = state
            .candidates
            .values()
            .find(|c| c.key == "seed2")
            .unwrap()
            .id;
        assert_ne!(hardcoded, best);
        engine.command(Command::MarkFinal {
            candidate: hardcoded,
        });
        for _ in 0..200 {
            if shapes_events(&d.session).len() == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(shapes_events(&d.session), vec![best, hardcoded]);
        assert!(
            engine.state().candidates[&hardcoded]
                .shapes
                .as_ref()
                .unwrap()
                .fails()
        );
        // The report follows the final kernel's check once it is written.
        for _ in 0..200 {
            let report = d.session.read_file("report.md").unwrap();
            if report.contains("| Unseen shapes | **not a win**: wrong on") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let report = d.session.read_file("report.md").unwrap();
        assert!(
            report.contains("| Unseen shapes | **not a win**: wrong on"),
            "{report}"
        );
        engine.stop_actions();
    }

    #[tokio::test]
    async fn shape_check_off_checks_nothing() {
        let d = dir();
        let eval = Arc::new(FakeEvaluator::default());
        let llm = Arc::new(FakeLlm::new(standard));
        let (outcome, state) = run_sized(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            pipeline(),
            false,
        )
        .await;
        assert_eq!(outcome.end, RunEnd::Complete);
        assert_eq!(variant_evaluations(&eval), 0);
        assert!(shapes_events(&d.session).is_empty());
        assert!(state.candidates.values().all(|c| c.shapes.is_none()));
    }
}
